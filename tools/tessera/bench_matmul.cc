// `tessera bench matmul --m M --n N --k K --dtype f32|bf16 [--bm --bn --bk] --cores C`: the
// Pallas tutorial's matmul (examples/05_matmul.cc) against oneDNN and OpenBLAS on the same
// inputs and thread count, alternating ours and the references in every repeat.
//
// References: float32: oneDNN's dnnl_sgemm and OpenBLAS' cblas_sgemm; bfloat16: oneDNN's matmul
// primitive (bf16 x bf16 -> bf16, as the tutorial's kernel; weights reordered once to oneDNN's
// preferred layout outside the timing, the fastest way to call it). Threads: oneDNN uses OpenMP
// (omp_set_num_threads), OpenBLAS its own pool (openblas_set_num_threads). OpenBLAS reads
// OPENBLAS_CORETYPE / OPENBLAS_L2_SIZE from the environment; unset them in the command line to
// measure its best kernel (../shared/docs/performance.md).
#include <cblas.h>
#include <dnnl.h>
#include <omp.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdint>
#include <dnnl.hpp>
#include <iostream>
#include <nlohmann/json.hpp>
#include <optional>
#include <random>
#include <string>
#include <vector>

#include "bench_command.h"
#include "bench_timing.h"
#include "matmul.h"
#include "tessera/tessera.h"

extern "C" void openblas_set_num_threads(int num_threads);

namespace tessera::cli {

namespace {
struct Timed {
  std::string name;
  std::vector<double> t;
  double max_diff = 0;  // largest |ours - this reference| over all elements
};

// A reference implementation: `run()` computes into its own output, `value(e)` reads element e.
template <class T>
Array<T> random_array(int64_t rows, int64_t cols, uint32_t seed) {
  Array<T> a(detail::Uninitialized{}, Shape{rows, cols});
  std::mt19937 rng(seed);
  std::uniform_real_distribution<float> d(-1.0f, 1.0f);
  for (int64_t e = 0; e < a.size(); ++e) a[e] = static_cast<T>(d(rng));
  return a;
}

// The largest error of `z` against a float64 product on `samples` elements spread over z.
template <class T, class Z>
double sampled_error(const Array<T>& x, const Array<T>& y, const Array<Z>& z, int samples) {
  const int64_t m = x.shape()[0], k = x.shape()[1], n = y.shape()[1];
  std::mt19937 rng(99);
  std::uniform_int_distribution<int64_t> di(0, m - 1), dj(0, n - 1);
  double err = 0;
  for (int s = 0; s < samples; ++s) {
    const int64_t i = di(rng), j = dj(rng);
    double want = 0;
    for (int64_t p = 0; p < k; ++p) {
      want += static_cast<double>(static_cast<float>(x[i * k + p])) *
              static_cast<double>(static_cast<float>(y[p * n + j]));
    }
    err = std::max(err, std::fabs(static_cast<double>(static_cast<float>(z[i * n + j])) - want));
  }
  return err;
}

nlohmann::json stats_json(const Stats& s) {
  return {{"min", s.min}, {"median", s.median}, {"max", s.max}};
}
}  // namespace

int run_matmul_bench(const MatmulBenchOptions& o) {
  std::vector<double> checked_t;  // checked-mode repeats (--check)
  const int64_t m = o.m, n = o.n, k = o.k;
  const examples::MatmulBlocks b{o.bm, o.bn, o.bk};
  if (m % b.bm != 0 || n % b.bn != 0 || k % b.bk != 0) {
    std::cerr << "tessera bench matmul: the blocks (" << b.bm << ", " << b.bn << ", " << b.bk
              << ") must divide (M, N, K) = (" << m << ", " << n << ", " << k << ")\n";
    return 2;
  }
  const double flops =
      2.0 * static_cast<double>(m) * static_cast<double>(n) * static_cast<double>(k);
  omp_set_num_threads(o.cores);
  openblas_set_num_threads(o.cores);
  Timed ours{"tessera pallas_call matmul", {}, 0};
  Timed ours_f32{"tessera pallas_call matmul, float32 on the same values", {}, 0};
  std::vector<Timed> refs;
  double max_error = 0;
  // --trace: the timed runs of ours are traced (after the warm-up); summary to stderr.
  std::optional<trace::Session> session;
  auto start_trace = [&] {
    if (o.trace_path.empty()) return;
    trace::Options t;
    t.trace_path = o.trace_path;
    session.emplace(std::move(t));
  };
  const bool bf16 = o.dtype == "bf16";

  if (!bf16) {
    const auto x = random_array<float>(m, k, 1);
    const auto y = random_array<float>(k, n, 2);
    std::vector<float> c_dnnl(static_cast<size_t>(m * n)), c_blas(static_cast<size_t>(m * n));
    auto dnnl_run = [&] {
      dnnl_sgemm('N', 'N', m, n, k, 1.0f, x.data(), k, y.data(), n, 0.0f, c_dnnl.data(), n);
    };
    auto blas_run = [&] {
      cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, static_cast<int>(m),
                  static_cast<int>(n), static_cast<int>(k), 1.0f, x.data(), static_cast<int>(k),
                  y.data(), static_cast<int>(n), 0.0f, c_blas.data(), static_cast<int>(n));
    };
    refs = {{"oneDNN dnnl_sgemm", {}, 0}, {"OpenBLAS cblas_sgemm", {}, 0}};
    {  // warm-up, and the errors
      const Array<float> z = examples::matmul(x, y, b, o.cores);
      dnnl_run();
      blas_run();
      max_error = sampled_error(x, y, z, 256);
      for (int64_t e = 0; e < m * n; ++e) {
        refs[0].max_diff = std::max<double>(refs[0].max_diff, std::fabs(z[e] - c_dnnl[e]));
        refs[1].max_diff = std::max<double>(refs[1].max_diff, std::fabs(z[e] - c_blas[e]));
      }
    }
    start_trace();
    Progress progress("tessera bench matmul", o.repeats);
    for (int r = 0; r < o.repeats; ++r) {
      ours.t.push_back(seconds([&] { (void)examples::matmul(x, y, b, o.cores); }));
      refs[0].t.push_back(seconds(dnnl_run));
      refs[1].t.push_back(seconds(blas_run));
      progress.done(r + 1);
    }
    if (o.check) {
      const pltpu::ForceTpuInterpretMode force;
      (void)examples::matmul(x, y, b, o.cores);  // warm-up, and any diagnostic
      for (int r = 0; r < o.repeats; ++r) {
        checked_t.push_back(seconds([&] { (void)examples::matmul(x, y, b, o.cores); }));
      }
    }
  } else {
    const auto x = random_array<bfloat16>(m, k, 1);
    const auto y = random_array<bfloat16>(k, n, 2);
    using dt = dnnl::memory::data_type;
    using tag = dnnl::memory::format_tag;
    dnnl::engine eng(dnnl::engine::kind::cpu, 0);
    dnnl::stream strm(eng);
    const dnnl::memory::desc src_md({m, k}, dt::bf16, tag::ab);
    const dnnl::memory::desc wei_any({k, n}, dt::bf16, tag::any);
    const dnnl::memory::desc wei_md({k, n}, dt::bf16, tag::ab);
    const dnnl::memory::desc dst_md({m, n}, dt::bf16, tag::ab);
    const dnnl::matmul::primitive_desc pd(dnnl::matmul::desc(src_md, wei_any, dst_md), eng);
    dnnl::memory src_mem(src_md, eng, const_cast<bfloat16*>(x.data()));
    dnnl::memory wei_plain(wei_md, eng, const_cast<bfloat16*>(y.data()));
    dnnl::memory wei_mem(pd.weights_desc(), eng);
    dnnl::reorder(wei_plain, wei_mem).execute(strm, wei_plain, wei_mem);  // once, untimed
    std::vector<bfloat16> c_dnnl(static_cast<size_t>(m * n));
    dnnl::memory dst_mem(dst_md, eng, c_dnnl.data());
    dnnl::matmul mm(pd);
    auto dnnl_run = [&] {
      mm.execute(strm,
                 {{DNNL_ARG_SRC, src_mem}, {DNNL_ARG_WEIGHTS, wei_mem}, {DNNL_ARG_DST, dst_mem}});
      strm.wait();
    };
    refs = {{"oneDNN matmul bf16 (weights prepacked)", {}, 0}};
    // Our own float32 kernel on the same values, alternated too: the bf16 target is a ratio to
    // it (bf16 >= 1.6x our f32 rate).
    Array<float> xf(detail::Uninitialized{}, x.shape());
    Array<float> yf(detail::Uninitialized{}, y.shape());
    for (int64_t e = 0; e < x.size(); ++e) xf[e] = static_cast<float>(x[e]);
    for (int64_t e = 0; e < y.size(); ++e) yf[e] = static_cast<float>(y[e]);
    (void)examples::matmul(xf, yf, b, o.cores);
    {
      const Array<bfloat16> z = examples::matmul_bf16(x, y, b, o.cores);
      dnnl_run();
      max_error = sampled_error(x, y, z, 256);
      for (int64_t e = 0; e < m * n; ++e) {
        refs[0].max_diff = std::max<double>(
            refs[0].max_diff, std::fabs(static_cast<float>(z[e]) -
                                        static_cast<float>(c_dnnl[static_cast<size_t>(e)])));
      }
    }
    start_trace();
    Progress progress("tessera bench matmul", o.repeats);
    for (int r = 0; r < o.repeats; ++r) {
      ours.t.push_back(seconds([&] { (void)examples::matmul_bf16(x, y, b, o.cores); }));
      refs[0].t.push_back(seconds(dnnl_run));
      ours_f32.t.push_back(seconds([&] { (void)examples::matmul(xf, yf, b, o.cores); }));
      progress.done(r + 1);
    }
    if (o.check) {
      const pltpu::ForceTpuInterpretMode force;
      (void)examples::matmul_bf16(x, y, b, o.cores);
      for (int r = 0; r < o.repeats; ++r) {
        checked_t.push_back(seconds([&] { (void)examples::matmul_bf16(x, y, b, o.cores); }));
      }
    }
  }
  session.reset();  // writes the trace and prints its summary (stderr)

  const Stats so = stats_of(ours.t);
  double best = 1e300, best_min = 1e300;
  std::string best_name;
  nlohmann::json jr = nlohmann::json::array();
  for (const Timed& t : refs) {
    const Stats s = stats_of(t.t);
    if (s.median < best) {
      best = s.median;
      best_name = t.name;
    }
    best_min = std::min(best_min, s.min);
    jr.push_back({{"name", t.name},
                  {"seconds", stats_json(s)},
                  {"gflops", flops / s.median / 1e9},
                  {"max_abs_diff_from_ours", t.max_diff}});
  }
  nlohmann::json j;
  j["kernel"] = "matmul";
  j["dtype"] = o.dtype;
  j["shape"] = {{"m", m}, {"n", n}, {"k", k}};
  j["block"] = {b.bm, b.bn, b.bk};
  j["cores"] = o.cores;
  j["repeats"] = o.repeats;
  j["traced"] = !o.trace_path.empty();
  j["seconds"] = stats_json(so);
  j["gflops"] = flops / so.median / 1e9;
  j["max_error"] = max_error;
  j["max_error_note"] = "largest |ours - float64 product| over 256 sampled elements";
  j["references"] = jr;
  j["best_reference"] = best_name;
  j["ratio_to_best"] = best / so.median;
  // On a shared machine the fastest repeat is the one least disturbed; its ratio is a second view.
  j["ratio_to_best_min"] = best_min / so.min;
  if (!ours_f32.t.empty()) {
    const Stats sf = stats_of(ours_f32.t);
    j["ours_f32"] = {
        {"name", ours_f32.name}, {"seconds", stats_json(sf)}, {"gflops", flops / sf.median / 1e9}};
    j["bf16_over_own_f32"] = sf.median / so.median;
    j["bf16_over_own_f32_min"] = sf.min / so.min;
  }
  if (!checked_t.empty()) {
    const Stats sc = stats_of(checked_t);
    j["checked"] = {{"seconds", stats_json(sc)}, {"over_native", sc.median / so.median}};
  }
  if (o.json) {
    std::cout << j.dump(2) << "\n";
  } else {
    std::cout << "matmul " << o.dtype << " (" << m << ", " << k << ") x (" << k << ", " << n
              << "), blocks (" << b.bm << ", " << b.bn << ", " << b.bk << "), " << o.cores
              << " cores, medians of " << o.repeats << ": ours " << so.median * 1e3 << " ms ("
              << flops / so.median / 1e9 << " GFLOP/s)";
    for (const Timed& t : refs) {
      const Stats s = stats_of(t.t);
      std::cout << "; " << t.name << " " << s.median * 1e3 << " ms (" << flops / s.median / 1e9
                << " GFLOP/s)";
    }
    if (!ours_f32.t.empty()) {
      const Stats sf = stats_of(ours_f32.t);
      std::cout << "; ours in float32 " << sf.median * 1e3 << " ms (" << flops / sf.median / 1e9
                << " GFLOP/s, bf16 / f32 " << sf.median / so.median << ")";
    }
    std::cout << "; ratio to the best " << best / so.median << " (of the fastest repeats "
              << best_min / so.min << "); max error " << max_error << "\n";
    if (!checked_t.empty()) {
      const Stats sc = stats_of(checked_t);
      std::cout << "checked mode: " << sc.median * 1e3 << " ms, " << sc.median / so.median
                << "x native\n";
    }
  }
  return 0;
}

}  // namespace tessera::cli
