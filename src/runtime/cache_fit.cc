// Whether a working set stays in this machine's caches (runtime/cache_fit.h).
#include "runtime/cache_fit.h"

#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <memory>
#include <optional>

#include "tessera/tpu_info.h"

namespace tessera::detail {

int64_t CacheFit::size_class(int64_t bytes) const {
  int64_t c = trusted_;
  while (c < bytes && c <= llc_ / 2) c *= 2;
  return std::min(std::max(c, bytes), llc_);
}

bool CacheFit::stays(int64_t bytes) {
  if (llc_ <= 0 || bytes > llc_) return false;
  if (bytes <= trusted_) return true;
  const int64_t c = size_class(bytes);
  std::lock_guard<std::mutex> lock(mu_);
  if (c <= largest_fit_) return true;
  if (smallest_miss_ > 0 && c >= smallest_miss_) return false;
  if (reference_ <= 0) {
    reference_ = probe_(trusted_);
    ++probes_;
  }
  const double rate = probe_(c);
  ++probes_;
  // A reference that could not be measured (a zero time) says nothing: trust the report.
  bool fits = reference_ <= 0 || rate >= kFitRatio * reference_;
  if (fits && reference_ > 0) {
    // A reference measured slow (the process or the memory in a slow spell) would make a class
    // that reads at memory speed look as if it fitted, and choose the regular stores that cost
    // such a working set 1.5x. So before a class is taken to fit, the reference is measured
    // again, and the faster of the two decides.
    reference_ = std::max(reference_, probe_(trusted_));
    ++probes_;
    fits = rate >= kFitRatio * reference_;
  }
  if (fits) {
    largest_fit_ = std::max(largest_fit_, c);
  } else {
    smallest_miss_ = smallest_miss_ == 0 ? c : std::min(smallest_miss_, c);
  }
  return fits;
}

namespace {

// Sums the buffer with independent accumulators, so that the loop is bound by the loads.
__attribute__((noinline)) uint64_t sum_words(const uint64_t* p, int64_t n) {
  uint64_t a[8] = {};
  for (int64_t i = 0; i + 8 <= n; i += 8) {
    for (int j = 0; j < 8; ++j) a[j] += p[i + j];
  }
  uint64_t s = 0;
  for (uint64_t v : a) s += v;
  return s;
}

}  // namespace

double measure_read_bandwidth(int64_t bytes) {
  const int64_t n = std::max<int64_t>(bytes / 8, 8) & ~int64_t{7};
  struct Free {
    void operator()(uint64_t* p) const { std::free(p); }
  };
  std::unique_ptr<uint64_t, Free> buf(
      static_cast<uint64_t*>(std::aligned_alloc(64, static_cast<size_t>(n) * 8)));
  if (buf == nullptr) return 0;
  uint64_t* p = buf.get();
  // Written with regular stores, as a kernel's output block is before the next pass reads it.
  for (int64_t i = 0; i < n; ++i) p[i] = static_cast<uint64_t>(i) * 0x9E3779B97F4A7C15ull;
  using Clock = std::chrono::steady_clock;
  double best = 0;
  volatile uint64_t sink = 0;
  for (int pass = 0; pass < 3; ++pass) {
    const auto t0 = Clock::now();
    sink = sink + sum_words(p, n);
    const double s = std::chrono::duration<double>(Clock::now() - t0).count();
    if (s > 0) best = std::max(best, static_cast<double>(n) * 8 / s);
  }
  return best;
}

bool stays_in_cache(int64_t bytes) {
  static CacheFit fit = [] {
    int64_t llc = 0, l2 = 0;
    try {
      const std::optional<pltpu::CpuInfo> c = pltpu::get_tpu_info().cpu;
      if (c) {
        llc = c->l3_bytes > 0 ? c->l3_bytes : c->l2_bytes;
        l2 = c->l2_bytes;
      }
    } catch (...) {
      llc = 0;  // no cache sizes: stream
    }
    // Twice the core's L2 is surely within any last-level cache the CPU has; a CPU that reports
    // no L2 has its report trusted up to a quarter of the last-level cache.
    const int64_t trusted = std::max<int64_t>(l2 > 0 ? std::min(2 * l2, llc) : llc / 4, 1);
    return CacheFit(llc, trusted, &measure_read_bandwidth);
  }();
  return fit.stays(bytes);
}

}  // namespace tessera::detail
