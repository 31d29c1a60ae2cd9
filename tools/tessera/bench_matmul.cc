// `tessera bench matmul --m M --n N --k K --dtype f32|bf16 [--bm --bn --bk] --cores C`: the
// Pallas tutorial's matmul (examples/05_matmul.cc) against oneDNN and OpenBLAS on the same
// inputs and thread count, alternating ours and the references in every repeat. A repeat times
// a batch of back-to-back calls of at least 50 ms (one call of ours, timed first, sets the count
// for all of them); the figures are per call.
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
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdint>
#include <cstdlib>
#include <cstring>
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
#include "omp_binding.h"
#include "tessera/tessera.h"

extern "C" void openblas_set_num_threads(int num_threads);
extern "C" char* openblas_get_corename(void);

namespace tessera::cli {

// OpenBLAS (built with DYNAMIC_ARCH, as Debian's is) picks its kernels from the CPU's model when
// it loads. A model newer than the library falls back to the generic SSE3 kernels ("Prescott"):
// 0.3.21 does so on CPUID family 6 model 207 (a 5th-generation Xeon), where its sgemm then runs
// at a sixth of its AVX-512 kernels' rate (docs/performance.md), and the reference would not be
// the library at its best. OPENBLAS_CORETYPE names the kernels; it is read at load, so the
// benchmark runs itself again with it set, to the library's best target for what the CPU
// reports. A value the user set is kept.
void rerun_with_openblas_kernels(char** argv) {
  if (std::getenv("OPENBLAS_CORETYPE") != nullptr) return;
  const char* core = openblas_get_corename();
  if (core == nullptr || std::strcmp(core, "Prescott") != 0) return;
  const char* best = __builtin_cpu_supports("avx512f") ? "SkylakeX"
                     : __builtin_cpu_supports("avx2")  ? "Haswell"
                                                       : nullptr;
  const std::string self = self_path();
  if (best == nullptr || self.empty()) return;
  std::cerr << "tessera bench: OpenBLAS chose its generic \"Prescott\" kernels on this CPU; "
               "running again with OPENBLAS_CORETYPE="
            << best << "\n";
  ::setenv("OPENBLAS_CORETYPE", best, 1);
  ::execv(self.c_str(), argv);  // returns only on failure: then go on as we are
  ::unsetenv("OPENBLAS_CORETYPE");
}

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

// What the repeats measured, ours and the references'.
struct MatmulResults {
  Timed ours{"tessera pallas_call matmul", {}, 0};
  Timed ours_f32{"tessera pallas_call matmul, float32 on the same values", {}, 0};
  std::vector<Timed> refs;
  double max_error = 0;
  std::vector<double> checked_t;  // checked-mode repeats (--check)
  int calls = 1;                  // calls per timed batch (ours and the references alike)
};

// --trace: the timed runs of ours are traced (after the warm-up); resetting `session` writes the
// trace and prints its summary (stderr).
void start_trace(const MatmulBenchOptions& o, std::optional<trace::Session>& session) {
  if (o.trace_path.empty()) return;
  trace::Options t;
  t.trace_path = o.trace_path;
  session.emplace(std::move(t));
}

// float32: ours against oneDNN's dnnl_sgemm and OpenBLAS' cblas_sgemm.
void bench_f32(const MatmulBenchOptions& o, const examples::MatmulBlocks& b,
               std::optional<trace::Session>& session, MatmulResults& res) {
  const int64_t m = o.m, n = o.n, k = o.k;
  const auto x = random_array<float>(m, k, 1);
  const auto y = random_array<float>(k, n, 2);
  std::vector<float> c_dnnl(static_cast<size_t>(m * n)), c_blas(static_cast<size_t>(m * n));
  auto dnnl_run = [&] {
    dnnl_sgemm('N', 'N', m, n, k, 1.0f, x.data(), k, y.data(), n, 0.0f, c_dnnl.data(), n);
  };
  auto blas_run = [&] {
    cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, static_cast<int>(m), static_cast<int>(n),
                static_cast<int>(k), 1.0f, x.data(), static_cast<int>(k), y.data(),
                static_cast<int>(n), 0.0f, c_blas.data(), static_cast<int>(n));
  };
  res.refs = {{"oneDNN dnnl_sgemm", {}, 0}, {"OpenBLAS cblas_sgemm", {}, 0}};
  {  // warm-up, and the errors
    const Array<float> z = examples::matmul(x, y, b, o.cores);
    dnnl_run();
    blas_run();
    res.max_error = sampled_error(x, y, z, 256);
    for (int64_t e = 0; e < m * n; ++e) {
      res.refs[0].max_diff = std::max<double>(res.refs[0].max_diff, std::fabs(z[e] - c_dnnl[e]));
      res.refs[1].max_diff = std::max<double>(res.refs[1].max_diff, std::fabs(z[e] - c_blas[e]));
    }
  }
  res.calls = calls_per_batch(seconds([&] { (void)examples::matmul(x, y, b, o.cores); }));
  const PinnedOmpTeam pinned(o.cores);  // oneDNN's threads; after the warm-up made ours
  start_trace(o, session);
  Progress progress("tessera bench matmul", o.repeats);
  for (int r = 0; r < o.repeats; ++r) {
    res.ours.t.push_back(
        seconds_per_call([&] { (void)examples::matmul(x, y, b, o.cores); }, res.calls));
    res.refs[0].t.push_back(seconds_per_call(dnnl_run, res.calls));
    res.refs[1].t.push_back(seconds_per_call(blas_run, res.calls));
    progress.done(r + 1);
  }
  if (o.check) {
    const pltpu::ForceTpuInterpretMode force;
    (void)examples::matmul(x, y, b, o.cores);  // warm-up, and any diagnostic
    for (int r = 0; r < o.repeats; ++r) {
      res.checked_t.push_back(seconds([&] { (void)examples::matmul(x, y, b, o.cores); }));
    }
  }
}

// oneDNN's bf16 x bf16 -> bf16 matmul primitive on `x` (m, k) and `y` (k, n), with the weights
// reordered once to its preferred layout (untimed).
class OneDnnBf16Matmul {
 public:
  OneDnnBf16Matmul(const Array<bfloat16>& x, const Array<bfloat16>& y, int64_t m, int64_t n,
                   int64_t k) {
    using dt = dnnl::memory::data_type;
    using tag = dnnl::memory::format_tag;
    eng_ = dnnl::engine(dnnl::engine::kind::cpu, 0);
    strm_ = dnnl::stream(eng_);
    const dnnl::memory::desc src_md({m, k}, dt::bf16, tag::ab);
    const dnnl::memory::desc wei_any({k, n}, dt::bf16, tag::any);
    const dnnl::memory::desc wei_md({k, n}, dt::bf16, tag::ab);
    const dnnl::memory::desc dst_md({m, n}, dt::bf16, tag::ab);
    pd_ = dnnl::matmul::primitive_desc(dnnl::matmul::desc(src_md, wei_any, dst_md), eng_);
    src_mem_ = dnnl::memory(src_md, eng_, const_cast<bfloat16*>(x.data()));
    dnnl::memory wei_plain(wei_md, eng_, const_cast<bfloat16*>(y.data()));
    wei_mem_ = dnnl::memory(pd_.weights_desc(), eng_);
    dnnl::reorder(wei_plain, wei_mem_).execute(strm_, wei_plain, wei_mem_);  // once, untimed
    out_.resize(static_cast<size_t>(m * n));
    dst_mem_ = dnnl::memory(dst_md, eng_, out_.data());
    mm_ = dnnl::matmul(pd_);
  }
  void run() {
    mm_.execute(strm_,
                {{DNNL_ARG_SRC, src_mem_}, {DNNL_ARG_WEIGHTS, wei_mem_}, {DNNL_ARG_DST, dst_mem_}});
    strm_.wait();
  }
  // The product, row-major (m, n).
  const std::vector<bfloat16>& out() const { return out_; }

 private:
  dnnl::engine eng_;
  dnnl::stream strm_;
  dnnl::matmul::primitive_desc pd_;
  dnnl::memory src_mem_;
  dnnl::memory wei_mem_;
  std::vector<bfloat16> out_;
  dnnl::memory dst_mem_;
  dnnl::matmul mm_;
};

// bfloat16: ours against oneDNN's matmul primitive, and against our own float32 kernel on the
// same values, alternated too: the bf16 target is a ratio to it (bf16 >= 1.6x our f32 rate).
void bench_bf16(const MatmulBenchOptions& o, const examples::MatmulBlocks& b,
                std::optional<trace::Session>& session, MatmulResults& res) {
  const int64_t m = o.m, n = o.n, k = o.k;
  const auto x = random_array<bfloat16>(m, k, 1);
  const auto y = random_array<bfloat16>(k, n, 2);
  OneDnnBf16Matmul dnnl_mm(x, y, m, n, k);
  auto dnnl_run = [&] { dnnl_mm.run(); };
  res.refs = {{"oneDNN matmul bf16 (weights prepacked)", {}, 0}};
  Array<float> xf(detail::Uninitialized{}, x.shape());
  Array<float> yf(detail::Uninitialized{}, y.shape());
  for (int64_t e = 0; e < x.size(); ++e) xf[e] = static_cast<float>(x[e]);
  for (int64_t e = 0; e < y.size(); ++e) yf[e] = static_cast<float>(y[e]);
  (void)examples::matmul(xf, yf, b, o.cores);
  {
    const Array<bfloat16> z = examples::matmul_bf16(x, y, b, o.cores);
    dnnl_run();
    res.max_error = sampled_error(x, y, z, 256);
    const std::vector<bfloat16>& c_dnnl = dnnl_mm.out();
    for (int64_t e = 0; e < m * n; ++e) {
      res.refs[0].max_diff = std::max<double>(
          res.refs[0].max_diff,
          std::fabs(static_cast<float>(z[e]) - static_cast<float>(c_dnnl[static_cast<size_t>(e)])));
    }
  }
  res.calls = calls_per_batch(seconds([&] { (void)examples::matmul_bf16(x, y, b, o.cores); }));
  const PinnedOmpTeam pinned(o.cores);  // oneDNN's threads; after the warm-up made ours
  start_trace(o, session);
  Progress progress("tessera bench matmul", o.repeats);
  for (int r = 0; r < o.repeats; ++r) {
    res.ours.t.push_back(
        seconds_per_call([&] { (void)examples::matmul_bf16(x, y, b, o.cores); }, res.calls));
    res.refs[0].t.push_back(seconds_per_call(dnnl_run, res.calls));
    res.ours_f32.t.push_back(
        seconds_per_call([&] { (void)examples::matmul(xf, yf, b, o.cores); }, res.calls));
    progress.done(r + 1);
  }
  if (o.check) {
    const pltpu::ForceTpuInterpretMode force;
    (void)examples::matmul_bf16(x, y, b, o.cores);
    for (int r = 0; r < o.repeats; ++r) {
      res.checked_t.push_back(seconds([&] { (void)examples::matmul_bf16(x, y, b, o.cores); }));
    }
  }
}

// The reference with the lowest median, the fastest repeat of any reference, and the median over
// the repeats of that reference's time over ours in the same repeat (each repeat times ours and
// the references back to back, so a machine that changes speed between repeats moves both).
struct BestReference {
  double median = 1e300;
  double min = 1e300;
  double paired = 0;
  std::string name;
};

BestReference best_reference(const std::vector<Timed>& refs, const std::vector<double>& ours) {
  BestReference best;
  const Timed* best_t = nullptr;
  for (const Timed& t : refs) {
    const Stats s = stats_of(t.t);
    if (s.median < best.median) {
      best.median = s.median;
      best.name = t.name;
      best_t = &t;
    }
    best.min = std::min(best.min, s.min);
  }
  if (best_t != nullptr) best.paired = paired_ratio(best_t->t, ours);
  return best;
}

nlohmann::json results_json(const MatmulBenchOptions& o, const examples::MatmulBlocks& b,
                            const MatmulResults& res, double flops) {
  const Stats so = stats_of(res.ours.t);
  const BestReference best = best_reference(res.refs, res.ours.t);
  nlohmann::json jr = nlohmann::json::array();
  for (const Timed& t : res.refs) {
    const Stats s = stats_of(t.t);
    jr.push_back({{"name", t.name},
                  {"seconds", stats_json(s)},
                  {"gflops", flops / s.median / 1e9},
                  {"max_abs_diff_from_ours", t.max_diff}});
  }
  nlohmann::json j;
  j["kernel"] = "matmul";
  j["dtype"] = o.dtype;
  j["shape"] = {{"m", o.m}, {"n", o.n}, {"k", o.k}};
  j["block"] = {b.bm, b.bn, b.bk};
  j["cores"] = o.cores;
  j["repeats"] = o.repeats;
  j["calls_per_repeat"] = res.calls;
  j["traced"] = !o.trace_path.empty();
  j["seconds"] = stats_json(so);
  j["gflops"] = flops / so.median / 1e9;
  j["max_error"] = res.max_error;
  j["max_error_note"] = "largest |ours - float64 product| over 256 sampled elements";
  j["references"] = jr;
  j["best_reference"] = best.name;
  if (o.dtype == "f32") j["openblas_core"] = openblas_get_corename();
  j["ratio_to_best"] = best.median / so.median;
  // On a shared machine the fastest repeat is the one least disturbed; its ratio is a second view.
  j["ratio_to_best_min"] = best.min / so.min;
  j["ratio_to_best_paired"] = best.paired;
  if (!res.ours_f32.t.empty()) {
    const Stats sf = stats_of(res.ours_f32.t);
    j["ours_f32"] = {{"name", res.ours_f32.name},
                     {"seconds", stats_json(sf)},
                     {"gflops", flops / sf.median / 1e9}};
    j["bf16_over_own_f32"] = sf.median / so.median;
    j["bf16_over_own_f32_min"] = sf.min / so.min;
  }
  if (!res.checked_t.empty()) {
    const Stats sc = stats_of(res.checked_t);
    j["checked"] = {{"seconds", stats_json(sc)}, {"over_native", sc.median / so.median}};
  }
  return j;
}

void print_results(const MatmulBenchOptions& o, const examples::MatmulBlocks& b,
                   const MatmulResults& res, double flops) {
  const Stats so = stats_of(res.ours.t);
  const BestReference best = best_reference(res.refs, res.ours.t);
  std::cout << "matmul " << o.dtype << " (" << o.m << ", " << o.k << ") x (" << o.k << ", " << o.n
            << "), blocks (" << b.bm << ", " << b.bn << ", " << b.bk << "), " << o.cores
            << " cores, medians of " << o.repeats << " repeats of " << res.calls
            << (res.calls == 1 ? " call" : " calls") << ": ours " << so.median * 1e3 << " ms ("
            << flops / so.median / 1e9 << " GFLOP/s)";
  for (const Timed& t : res.refs) {
    const Stats s = stats_of(t.t);
    std::cout << "; " << t.name << " " << s.median * 1e3 << " ms (" << flops / s.median / 1e9
              << " GFLOP/s)";
  }
  if (!res.ours_f32.t.empty()) {
    const Stats sf = stats_of(res.ours_f32.t);
    std::cout << "; ours in float32 " << sf.median * 1e3 << " ms (" << flops / sf.median / 1e9
              << " GFLOP/s, bf16 / f32 " << sf.median / so.median << ")";
  }
  std::cout << "; ratio to the best " << best.median / so.median << " (of the fastest repeats "
            << best.min / so.min << ", median of paired repeats " << best.paired << "); max error "
            << res.max_error << "\n";
  if (!res.checked_t.empty()) {
    const Stats sc = stats_of(res.checked_t);
    std::cout << "checked mode: " << sc.median * 1e3 << " ms, " << sc.median / so.median
              << "x native\n";
  }
}
}  // namespace

int run_matmul_bench(const MatmulBenchOptions& o) {
  std::optional<nlohmann::json> j = matmul_bench_json(o, !o.json);
  if (!j) return 2;
  if (o.json) std::cout << j->dump(2) << "\n";
  return 0;
}

std::optional<nlohmann::json> matmul_bench_json(const MatmulBenchOptions& o, bool print) {
  const examples::MatmulBlocks b = examples::default_matmul_blocks(
      o.m, o.n, o.k, o.dtype == "bf16" ? 2 : 4, o.cores, examples::MatmulBlocks{o.bm, o.bn, o.bk});
  // bm and bn need not divide M and N (the last blocks are then partial); bk must divide K.
  if (o.k % b.bk != 0) {
    std::cerr << "tessera bench matmul: the k block " << b.bk << " must divide K = " << o.k
              << " (blocks (" << b.bm << ", " << b.bn << ", " << b.bk << "))\n";
    return std::nullopt;
  }
  const double flops =
      2.0 * static_cast<double>(o.m) * static_cast<double>(o.n) * static_cast<double>(o.k);
  omp_set_num_threads(o.cores);
  openblas_set_num_threads(o.cores);
  MatmulResults res;
  std::optional<trace::Session> session;
  if (o.dtype == "bf16")
    bench_bf16(o, b, session, res);
  else
    bench_f32(o, b, session, res);
  session.reset();  // writes the trace and prints its summary (stderr)
  if (print) print_results(o, b, res, flops);
  return results_json(o, b, res, flops);
}

}  // namespace tessera::cli
