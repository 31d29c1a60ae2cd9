// Examples from the Pallas TPU pipelining docs, written with pl::pallas_call.
#pragma once

#include <tessera/tessera.h>

#include <iosfwd>
#include <source_location>

namespace tessera::examples {

/// `correct_sum`: sums the (8, 128) blocks of an (8, N) array into one (8, 128) output, over an
/// ARBITRARY grid axis; the output block is initialised when pl::program_id(0) == 0 and stays
/// in VMEM across the steps. True when it matches a plain loop.
bool run_correct_sum(std::ostream& out);

/// `megacore_add`: o = x + y with pallas_call, both grid axes PARALLEL, split over the cores in
/// contiguous chunks. True when it matches a plain loop.
bool run_megacore_add(std::ostream& out);

/// `hbm_vmem_kernel`: an input left in HBM (pl::BlockSpec(pl::ANY)); the body DMAs x[0:1] into
/// a VMEM scratch and writes it + 1. Returns the (1, N) output.
/// x not 2-D, or empty, raises a UsageError at `where`.
Array<float> hbm_vmem(const Array<float>& x,
                      std::source_location where = std::source_location::current());
/// Runs hbm_vmem on an (8, 128) random array; true when it matches x[0:1] + 1.
bool run_hbm_vmem(std::ostream& out);

/// `block_dynamic_slice`: the (size0, size1) block of `x` at (start0, start1), picked at run
/// time through a scalar-prefetch index (pltpu::PrefetchScalarGridSpec<1>). Starts must be
/// multiples of the sizes (UsageError otherwise).
Array<int32_t> block_dynamic_slice(const Array<int32_t>& x, int64_t start0, int64_t start1,
                                   int64_t size0, int64_t size1,
                                   std::source_location where = std::source_location::current());
/// Runs it on a (512, 512) iota at (128, 256); true when it matches a plain slice.
bool run_block_dynamic_slice(std::ostream& out);

}  // namespace tessera::examples
