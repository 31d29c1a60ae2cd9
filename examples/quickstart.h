// The first two kernels of the Pallas TPU quickstart, as a Tessera user writes them.
#pragma once

#include <tessera/tessera.h>

#include <iosfwd>
#include <source_location>

namespace tessera::examples {

/// `fill_42`: computes a (128,) block of 42.0 in VMEM and copies it to the output in HBM.
/// Every core of the default mesh does the same (the quickstart's point about redundant work).
Array<float> fill_42();

/// `iota`: every core writes its own 128-element slice, so the output is 0 .. 128*n - 1 for a
/// mesh of n cores (default: pltpu::get_tpu_info().num_cores).
Array<float> iota();
/// num_cores outside 1..256 raises a UsageError at `where`.
Array<float> iota(int num_cores, std::source_location where = std::source_location::current());

/// Runs both, prints them in numpy's style, checks them; true when both are right.
bool run_quickstart(std::ostream& out);

}  // namespace tessera::examples
