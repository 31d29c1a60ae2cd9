// Timing helpers shared by `tessera bench` kernels.
#pragma once

#include <algorithm>
#include <chrono>
#include <thread>
#include <vector>

namespace tessera::cli {

/// min / median / max of a set of timings.
struct Stats {
  double min, median, max;
};
inline Stats stats_of(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return {v.front(), v[v.size() / 2], v.back()};
}

/// Seconds that `f` takes, measured after a pause. Runtimes keep their threads spinning for a
/// while after a parallel region (libgomp for a few milliseconds, OpenBLAS longer, Tessera's
/// pool 200 µs); on a machine with as many cores as threads, a spinning thread left by the
/// previous run steals a core from the next one, so alternated runs would each be taxed by
/// whichever ran before. The pause lets every spinner go to sleep first.
template <class F>
double seconds(F&& f) {
  std::this_thread::sleep_for(std::chrono::milliseconds(150));
  const auto t0 = std::chrono::steady_clock::now();
  f();
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}

}  // namespace tessera::cli
