// Examples from the Pallas TPU pipelining docs, written with pl::pallas_call.
#pragma once

#include <tessera/tessera.h>

#include <iosfwd>

namespace tessera::examples {

/// `correct_sum`: sums the (8, 128) blocks of an (8, N) array into one (8, 128) output, over an
/// ARBITRARY grid axis; the output block is initialised when pl::program_id(0) == 0 and stays
/// in VMEM across the steps. True when it matches a plain loop.
bool run_correct_sum(std::ostream& out);

/// `megacore_add`: o = x + y with pallas_call, both grid axes PARALLEL, split over the cores in
/// contiguous chunks. True when it matches a plain loop.
bool run_megacore_add(std::ostream& out);

}  // namespace tessera::examples
