// Timing helpers shared by `tessera bench` kernels.
#pragma once

#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <iostream>
#include <string>
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

/// The median over repeats of `ref[r] / ours[r]` (times of the same repeat, taken back to back):
/// where the machine changes speed between repeats it moves both sides of each ratio, not the
/// ratio of two medians that may come from different states. 0 when the counts differ or are 0.
inline double paired_ratio(const std::vector<double>& ref, const std::vector<double>& ours) {
  if (ref.size() != ours.size() || ours.empty()) return 0;
  std::vector<double> ratios;
  for (size_t r = 0; r < ours.size(); ++r) ratios.push_back(ref[r] / ours[r]);
  return stats_of(ratios).median;
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

/// Nanoseconds per iteration of a fixed loop of six independent integer chains, a few hundred
/// microseconds long: a probe of how much of its core the calling thread gets. Where the host of
/// a VM runs something else on the same physical core, code that retires several instructions
/// per cycle slows by up to 2x while the clock (and a dependent chain's latency) does not
/// (docs/performance.md, "The VM's slow state"); benchmarks whose figures are bound by
/// instructions record it beside them, so that a reader can tell the machine's state from a
/// change of ours.
inline double throughput_probe_ns(int iterations = 200000) {
  volatile uint64_t seed = 1;
  uint64_t a = seed, b = a + 1, c = a + 2, d = a + 3, e = a + 4, f = a + 5;
  const auto t0 = std::chrono::steady_clock::now();
  for (int i = 0; i < iterations; ++i) {
    const auto u = static_cast<uint64_t>(i);
    a += b ^ u;
    b += c ^ u;
    c += d ^ u;
    d += e ^ u;
    e += f ^ u;
    f += a ^ u;
    // Keeps the six chains in registers and the loop as written (no vectorising, no folding).
    asm volatile("" : "+r"(a), "+r"(b), "+r"(c), "+r"(d), "+r"(e), "+r"(f));
  }
  const double ns =
      std::chrono::duration<double, std::nano>(std::chrono::steady_clock::now() - t0).count();
  seed = a + b + c + d + e + f;
  return ns / iterations;
}

/// Seconds per call of `f` over `calls` back-to-back calls, after the same pause as seconds().
/// A kernel of a millisecond or two timed one call at a time after a pause measures mostly how
/// fast the runtimes' threads wake (every runtime's, ours and the references'), and single calls
/// varied by 2x between repeats (docs/performance.md); a batch of calls measures the kernel.
template <class F>
double seconds_per_call(F&& f, int calls) {
  return seconds([&] {
           for (int c = 0; c < calls; ++c) f();
         }) /
         calls;
}

/// How many calls make a batch of at least `batch_seconds`, given one call's `one_call` seconds
/// (at least 1, at most 1000).
inline int calls_per_batch(double one_call, double batch_seconds = 0.05) {
  if (!(one_call > 0)) return 1;
  const double c = batch_seconds / one_call;
  return c >= 1000 ? 1000 : (c <= 1 ? 1 : static_cast<int>(c + 0.999));
}

/// This program's own path (what a benchmark that reruns itself starts), or empty when the
/// system does not say. /proc/self/exe itself would name another program once handed on (to
/// mpirun, whose daemon then runs it).
inline std::string self_path() {
  char self[4096];
  const ssize_t len = ::readlink("/proc/self/exe", self, sizeof(self) - 1);
  if (len <= 0) return {};
  self[len] = '\0';
  return self;
}

/// "repeat r/R" on stderr for a long benchmark: shown when stderr is a terminal, or once the
/// run has taken more than a second (a log then shows that it is alive); never on stdout, so
/// `--json` output stays one object.
class Progress {
 public:
  Progress(std::string what, int total)
      : what_(std::move(what)),
        total_(total),
        tty_(isatty(STDERR_FILENO) == 1),
        t0_(std::chrono::steady_clock::now()) {}
  ~Progress() {
    if (shown_) std::cerr << (tty_ ? "\n" : "") << std::flush;
  }
  Progress(const Progress&) = delete;
  Progress& operator=(const Progress&) = delete;
  void done(int r) {
    const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0_).count();
    if (!tty_ && s <= 1.0) return;
    shown_ = true;
    std::cerr << (tty_ ? "\r" : "") << what_ << ": repeat " << r << "/" << total_ << " ("
              << static_cast<int>(s) << " s)" << (tty_ ? "" : "\n") << std::flush;
  }

 private:
  std::string what_;
  int total_;
  bool tty_;
  bool shown_ = false;
  std::chrono::steady_clock::time_point t0_;
};

}  // namespace tessera::cli
