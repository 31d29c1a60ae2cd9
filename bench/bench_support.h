// Benchmark support: run the registered benchmarks, then print the ratio of each benchmark's
// median time to its reference's, measured in the same run.
#pragma once

#include <string>
#include <utility>
#include <vector>

namespace tessera::bench {

/// A pair to compare: ratio = time(subject) / time(reference).
struct Ratio {
  std::string subject;
  std::string reference;
};

/// Runs the benchmarks (argv as Google Benchmark takes it) and prints one line per ratio, using
/// the median of the repetitions when there are several. Returns the process exit code.
int run_with_ratios(int argc, char** argv, const std::vector<Ratio>& ratios);

}  // namespace tessera::bench
