// `tessera info --calibrate`: this machine's memory bandwidth (STREAM add and copy over arrays
// far larger than the caches, one thread per core, best of several runs) and f32 FMA peak (12
// independent chains of vector FMAs per thread, Highway's best target), cached as a small JSON
// file for the trace summary's "% of peak".
#include <fmt/format.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <memory>
#include <sstream>
#include <thread>
#include <vector>

#include "tessera/error.h"
#include "tessera/trace.h"

#undef HWY_TARGET_INCLUDE
#define HWY_TARGET_INCLUDE "trace/calibration.cc"
#include <hwy/foreach_target.h>  // IWYU pragma: keep
#include <hwy/highway.h>

HWY_BEFORE_NAMESPACE();
namespace tessera::trace::HWY_NAMESPACE {
namespace hn = hwy::HWY_NAMESPACE;

// Runs `iters` rounds of 12 independent FMA chains; returns the FLOPs done (and writes a sum
// to `sink` so the work cannot be dropped).
int64_t FmaChains(int64_t iters, float* sink) {
  const hn::ScalableTag<float> d;
  const auto m = hn::Set(d, 0.9999999f);
  const auto c = hn::Set(d, 1e-7f);
  auto a0 = hn::Set(d, 1.0f), a1 = hn::Set(d, 1.1f), a2 = hn::Set(d, 1.2f), a3 = hn::Set(d, 1.3f);
  auto a4 = hn::Set(d, 1.4f), a5 = hn::Set(d, 1.5f), a6 = hn::Set(d, 1.6f), a7 = hn::Set(d, 1.7f);
  auto a8 = hn::Set(d, 1.8f), a9 = hn::Set(d, 1.9f), a10 = hn::Set(d, 2.0f), a11 = hn::Set(d, 2.1f);
  for (int64_t i = 0; i < iters; ++i) {
    a0 = hn::MulAdd(a0, m, c);
    a1 = hn::MulAdd(a1, m, c);
    a2 = hn::MulAdd(a2, m, c);
    a3 = hn::MulAdd(a3, m, c);
    a4 = hn::MulAdd(a4, m, c);
    a5 = hn::MulAdd(a5, m, c);
    a6 = hn::MulAdd(a6, m, c);
    a7 = hn::MulAdd(a7, m, c);
    a8 = hn::MulAdd(a8, m, c);
    a9 = hn::MulAdd(a9, m, c);
    a10 = hn::MulAdd(a10, m, c);
    a11 = hn::MulAdd(a11, m, c);
  }
  auto s =
      hn::Add(hn::Add(hn::Add(a0, a1), hn::Add(a2, a3)), hn::Add(hn::Add(a4, a5), hn::Add(a6, a7)));
  s = hn::Add(s, hn::Add(hn::Add(a8, a9), hn::Add(a10, a11)));
  *sink = hn::GetLane(hn::SumOfLanes(d, s));
  return iters * 12 * 2 * static_cast<int64_t>(hn::Lanes(d));
}

}  // namespace tessera::trace::HWY_NAMESPACE
HWY_AFTER_NAMESPACE();

#if HWY_ONCE
namespace tessera::trace {

HWY_EXPORT(FmaChains);

namespace {

using Clock = std::chrono::steady_clock;

double seconds_since(Clock::time_point t0) {
  return std::chrono::duration<double>(Clock::now() - t0).count();
}

// Runs f(thread) on `n` threads at once; returns the wall time.
template <class F>
double parallel(int n, F&& f) {
  std::vector<std::thread> threads;
  const auto t0 = Clock::now();
  for (int t = 1; t < n; ++t) threads.emplace_back([&f, t] { f(t); });
  f(0);
  for (auto& th : threads) th.join();
  return seconds_since(t0);
}

[[noreturn]] void fail(const std::string& msg) {
  throw UsageError(ErrorKind::kInvalidArgument, msg, std::source_location{});
}

// The number after "key": in a flat JSON object (the file this code writes).
std::optional<double> json_number(const std::string& text, const char* key) {
  const std::string k = fmt::format("\"{}\"", key);
  const size_t p = text.find(k);
  if (p == std::string::npos) return std::nullopt;
  size_t q = text.find(':', p + k.size());
  if (q == std::string::npos) return std::nullopt;
  const char* start = text.c_str() + q + 1;
  char* end = nullptr;
  const double v = std::strtod(start, &end);
  if (end == start || !std::isfinite(v)) return std::nullopt;
  return v;
}

}  // namespace

Calibration calibrate(int cores) {
  if (cores < 1) fail(fmt::format("tessera: calibrate: cores={} must be at least 1", cores));
  Calibration c;
  c.cores = cores;
  // Bandwidth: three arrays of 64 MiB (far beyond the caches), split by thread, each thread
  // first-touching its own part.
  const int64_t n = int64_t{16} << 20;
  std::unique_ptr<float[]> a(new float[static_cast<size_t>(n)]);
  std::unique_ptr<float[]> b(new float[static_cast<size_t>(n)]);
  std::unique_ptr<float[]> o(new float[static_cast<size_t>(n)]);
  auto part = [&](int t) {
    const int64_t lo = n * t / cores;
    const int64_t hi = n * (t + 1) / cores;
    return std::pair<int64_t, int64_t>{lo, hi};
  };
  parallel(cores, [&](int t) {
    const auto [lo, hi] = part(t);
    for (int64_t i = lo; i < hi; ++i) {
      a[static_cast<size_t>(i)] = static_cast<float>(i & 1023);
      b[static_cast<size_t>(i)] = 1.0f;
      o[static_cast<size_t>(i)] = 0.0f;
    }
  });
  const double bytes = static_cast<double>(n) * sizeof(float);
  double best_add = 1e30, best_copy = 1e30;
  for (int r = 0; r < 5; ++r) {
    best_add = std::min(best_add, parallel(cores, [&](int t) {
                          const auto [lo, hi] = part(t);
                          float* __restrict op = o.get();
                          const float* __restrict ap = a.get();
                          const float* __restrict bp = b.get();
                          for (int64_t i = lo; i < hi; ++i) op[i] = ap[i] + bp[i];
                        }));
    best_copy = std::min(best_copy, parallel(cores, [&](int t) {
                           const auto [lo, hi] = part(t);
                           std::memcpy(o.get() + lo, a.get() + lo,
                                       static_cast<size_t>(hi - lo) * sizeof(float));
                         }));
  }
  c.add_gbps = 3 * bytes / best_add * 1e-9;
  c.copy_gbps = 2 * bytes / best_copy * 1e-9;
  // FMA peak: one thread alone, then all together.
  auto fma_rate = [&](int threads) {
    const int64_t iters = 20'000'000;
    std::vector<float> sink(static_cast<size_t>(threads) * 16);
    std::vector<int64_t> flops(static_cast<size_t>(threads));
    double best = 1e30;
    for (int r = 0; r < 3; ++r) {
      best = std::min(best, parallel(threads, [&](int t) {
                        flops[static_cast<size_t>(t)] = HWY_DYNAMIC_DISPATCH(FmaChains)(
                            iters, &sink[static_cast<size_t>(t) * 16]);
                      }));
    }
    double total = 0;
    for (const int64_t f : flops) total += static_cast<double>(f);
    return total / best * 1e-9;
  };
  c.fma_gflops_per_core = fma_rate(1);
  c.fma_gflops = cores > 1 ? fma_rate(cores) : c.fma_gflops_per_core;
  return c;
}

std::string calibration_path() {
  const char* xdg = std::getenv("XDG_CACHE_HOME");
  if (xdg != nullptr && *xdg == '/') return std::string(xdg) + "/tessera/calibration.json";
  const char* home = std::getenv("HOME");
  if (home != nullptr && *home != '\0')
    return std::string(home) + "/.cache/tessera/calibration.json";
  fail(
      "tessera: calibration: neither XDG_CACHE_HOME (an absolute path) nor HOME is set, so there "
      "is no cache folder for calibration.json; set one of them");
}

std::string save_calibration(const Calibration& c) {
  const std::string path = calibration_path();
  std::error_code ec;
  std::filesystem::create_directories(std::filesystem::path(path).parent_path(), ec);
  if (ec) {
    fail(fmt::format("tessera: calibration: cannot create the folder of '{}': {}", path,
                     ec.message()));
  }
  const std::string tmp = path + ".tmp";
  {
    std::ofstream f(tmp, std::ios::trunc);
    f << fmt::format(
        "{{\n  \"version\": 1,\n  \"cores\": {},\n  \"add_gbps\": {:.3f},\n  \"copy_gbps\": "
        "{:.3f},\n  \"fma_gflops\": {:.3f},\n  \"fma_gflops_per_core\": {:.3f}\n}}\n",
        c.cores, c.add_gbps, c.copy_gbps, c.fma_gflops, c.fma_gflops_per_core);
    f.close();
    if (!f) {
      fail(fmt::format("tessera: calibration: cannot write '{}': {}", tmp, std::strerror(errno)));
    }
  }
  std::filesystem::rename(tmp, path, ec);
  if (ec) fail(fmt::format("tessera: calibration: cannot write '{}': {}", path, ec.message()));
  return path;
}

std::optional<Calibration> load_calibration() {
  const std::string path = calibration_path();
  std::error_code ec;
  if (!std::filesystem::exists(path, ec)) return std::nullopt;
  std::ifstream f(path);
  std::stringstream ss;
  ss << f.rdbuf();
  if (!f) {
    fail(
        fmt::format("tessera: calibration: cannot read '{}'; delete it and run `tessera info "
                    "--calibrate` again",
                    path));
  }
  const std::string text = ss.str();
  Calibration c;
  const auto version = json_number(text, "version");
  const auto cores = json_number(text, "cores");
  const auto add = json_number(text, "add_gbps");
  const auto copy = json_number(text, "copy_gbps");
  const auto fma = json_number(text, "fma_gflops");
  const auto fma1 = json_number(text, "fma_gflops_per_core");
  if (!version || *version != 1 || !cores || *cores < 1 || !add || *add <= 0 || !copy ||
      *copy <= 0 || !fma || *fma <= 0 || !fma1 || *fma1 <= 0) {
    fail(
        fmt::format("tessera: calibration: '{}' is damaged or from another version (it needs "
                    "version 1 and positive cores, add_gbps, copy_gbps, fma_gflops and "
                    "fma_gflops_per_core); run `tessera info --calibrate` again",
                    path));
  }
  c.cores = static_cast<int>(*cores);
  c.add_gbps = *add;
  c.copy_gbps = *copy;
  c.fma_gflops = *fma;
  c.fma_gflops_per_core = *fma1;
  return c;
}

}  // namespace tessera::trace
#endif  // HWY_ONCE
