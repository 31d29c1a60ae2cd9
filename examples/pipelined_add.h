// The pipelined add of Pallas' pipelining tutorial (emit_pipeline over (128, 128) blocks).
#pragma once

#include <tessera/tessera.h>

#include <iosfwd>

namespace tessera::examples {

/// o = x + y for (M, N) float32 arrays (M, N multiples of 128 are the fast case; others work
/// with partial edge blocks), on a mesh of `num_cores` cores: emit_pipeline over a
/// (M/128, N/128) grid with (PARALLEL, ARBITRARY) semantics, the first axis split over the cores.
Array<float> pipelined_add(const Array<float>& x, const Array<float>& y, int num_cores);

/// Runs the add on 2 + 3 (256 x 256), then on random inputs, checks both against a plain loop,
/// prints what it did; true when both are right.
bool run_add(std::ostream& out);

}  // namespace tessera::examples
