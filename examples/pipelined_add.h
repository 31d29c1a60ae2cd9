// The pipelined add of Pallas' pipelining tutorial (emit_pipeline over (128, 128) blocks).
#pragma once

#include <tessera/tessera.h>

#include <cstdint>
#include <iosfwd>
#include <source_location>

namespace tessera::examples {

/// o = x + y for (M, N) float32 arrays (M, N multiples of the block are the fast case; others
/// work with partial edge blocks), on a mesh of `num_cores` cores: emit_pipeline over (bm, bn)
/// blocks, (128, 128) as in the tutorial, on a (M/bm, N/bn) grid with (PARALLEL, ARBITRARY)
/// semantics, the first axis split over the cores. Operands that are not 2-D arrays of one
/// shape, or a block size below 1, raise a UsageError at `where`.
Array<float> pipelined_add(const Array<float>& x, const Array<float>& y, int num_cores,
                           int64_t bm = 128, int64_t bn = 128,
                           std::source_location where = std::source_location::current());

/// Runs the add on 2 + 3 (256 x 256), then on random inputs, checks both against a plain loop,
/// prints what it did; true when both are right.
bool run_add(std::ostream& out);

}  // namespace tessera::examples
