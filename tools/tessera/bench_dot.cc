// `tessera bench dot`: one jnp::dot / lax::dot_general of a skinny or transposed shape on VMEM
// refs, timed on one core inside a kernel (so the launch is not counted), against oneDNN's matmul
// primitive for the same shape, dtypes and operand layout, created once outside the timing; and
// `tessera bench convert`: `o = x.astype<float>()` of a bfloat16 VMEM block against a memcpy of
// the same float32 bytes (what the memory system moves at best). Ours and the reference
// alternate batch by batch; a batch is enough calls for about a millisecond.
//
// The reference gets the operands as the kernel has them: the right operand row-major (k, n), or
// (n, k) for x @ y.T (oneDNN's "ba" weights layout), not prepacked: in a decode-attention kernel
// the transposed operand is a new block of keys at every call.
#include <dnnl.h>
#include <omp.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <dnnl.hpp>
#include <nlohmann/json.hpp>
#include <random>
#include <string>
#include <vector>

#include "bench_command.h"
#include "bench_timing.h"
#include "tessera/tessera.h"

namespace tessera::cli {

namespace {

using Clock = std::chrono::steady_clock;

double since(Clock::time_point t0) {
  return std::chrono::duration<double>(Clock::now() - t0).count();
}

template <class T>
Array<T> random_values(const Shape& s, uint32_t seed) {
  Array<T> a(detail::Uninitialized{}, s);
  std::mt19937 rng(seed);
  if constexpr (std::is_same_v<T, int8_t>) {
    std::uniform_int_distribution<int> d(-128, 127);
    for (int64_t e = 0; e < a.size(); ++e) a[e] = static_cast<int8_t>(d(rng));
  } else {
    std::uniform_real_distribution<float> d(-1.0f, 1.0f);
    for (int64_t e = 0; e < a.size(); ++e) a[e] = static_cast<T>(d(rng));
  }
  return a;
}

template <class T>
dnnl::memory::data_type dnnl_type() {
  using dt = dnnl::memory::data_type;
  if constexpr (std::is_same_v<T, float>) return dt::f32;
  if constexpr (std::is_same_v<T, bfloat16>) return dt::bf16;
  if constexpr (std::is_same_v<T, int8_t>) return dt::s8;
  if constexpr (std::is_same_v<T, int32_t>) return dt::s32;
}

// oneDNN's matmul of x (m, k) and y ((k, n), or (n, k) when transposed) into `out` (m, n).
template <class T, class Acc>
class OneDnnDot {
 public:
  OneDnnDot(const Array<T>& x, const Array<T>& y, int64_t m, int64_t n, int64_t k, bool transposed)
      : eng_(dnnl::engine::kind::cpu, 0), strm_(eng_), out_(static_cast<size_t>(m * n)) {
    using tag = dnnl::memory::format_tag;
    const dnnl::memory::desc src_md({m, k}, dnnl_type<T>(), tag::ab);
    const dnnl::memory::desc wei_md({k, n}, dnnl_type<T>(), transposed ? tag::ba : tag::ab);
    const dnnl::memory::desc dst_md({m, n}, dnnl_type<Acc>(), tag::ab);
    const dnnl::matmul::primitive_desc pd(dnnl::matmul::desc(src_md, wei_md, dst_md), eng_);
    impl_ = pd.impl_info_str();
    src_ = dnnl::memory(src_md, eng_, const_cast<T*>(x.data()));
    wei_ = dnnl::memory(wei_md, eng_, const_cast<T*>(y.data()));
    dst_ = dnnl::memory(dst_md, eng_, out_.data());
    mm_ = dnnl::matmul(pd);
  }
  void run() {
    mm_.execute(strm_, {{DNNL_ARG_SRC, src_}, {DNNL_ARG_WEIGHTS, wei_}, {DNNL_ARG_DST, dst_}});
    strm_.wait();
  }
  const std::vector<Acc>& out() const { return out_; }
  const std::string& impl() const { return impl_; }

 private:
  dnnl::engine eng_;
  dnnl::stream strm_;
  std::vector<Acc> out_;
  std::string impl_;
  dnnl::memory src_, wei_, dst_;
  dnnl::matmul mm_;
};

int64_t calls_per_batch(double flops) {
  return std::clamp<int64_t>(static_cast<int64_t>(5e7 / std::max(flops, 1.0)), 4, 100000);
}

nlohmann::json stats_json(const Stats& s) {
  return {{"min", s.min}, {"median", s.median}, {"max", s.max}};
}

template <class T, class Acc>
nlohmann::json bench_dot_typed(const DotBenchOptions& o) {
  const int64_t m = o.m, n = o.n, k = o.k;
  const Shape ys = o.transpose_rhs ? Shape{n, k} : Shape{k, n};
  const Array<T> x = random_values<T>({m, k}, 1);
  const Array<T> y = random_values<T>(ys, 2);
  const double flops =
      2.0 * static_cast<double>(m) * static_cast<double>(n) * static_cast<double>(k);
  const int64_t batch = calls_per_batch(flops);
  const bool transposed = o.transpose_rhs;
  std::vector<double> t_ours, t_ref;
  const int64_t vmem =
      (m * k + k * n) * static_cast<int64_t>(sizeof(T)) + m * n * static_cast<int64_t>(sizeof(Acc));
  auto kernel = pl::kernel(
      pl::out_type<Acc>({m, n}), pltpu::TensorCoreMesh("core", 1),
      pl::scratch_types(pltpu::VMEM<T>({m, k}), pltpu::VMEM<T>(ys), pltpu::VMEM<Acc>({m, n})),
      pltpu::CompilerParams{.vmem_limit_bytes = std::max<int64_t>(vmem + (1 << 20), 16 << 20)},
      pl::name("bench_dot"))([&](pltpu::HbmRef<const T> x_hbm, pltpu::HbmRef<const T> y_hbm,
                                 pltpu::HbmRef<Acc> o_hbm, pltpu::VmemRef<T> xv,
                                 pltpu::VmemRef<T> yv, pltpu::VmemRef<Acc> ov) {
    pltpu::sync_copy(x_hbm, xv);
    pltpu::sync_copy(y_hbm, yv);
    auto once = [&] {
      if (transposed) {
        ov = lax::dot_general<Acc>(xv, yv, {{{1}, {1}}});
      } else {
        ov = jnp::dot<Acc>(xv, yv);
      }
    };
    once();  // warm-up: caches, the kernel dispatch
    const auto t0 = Clock::now();
    for (int64_t b = 0; b < batch; ++b) once();
    t_ours.push_back(since(t0) / static_cast<double>(batch));
    pltpu::sync_copy(ov, o_hbm);
  });
  omp_set_num_threads(1);
  OneDnnDot<T, Acc> ref(x, y, m, n, k, transposed);
  Array<Acc> z = kernel(x, y);
  t_ours.clear();
  ref.run();
  double max_diff = 0;
  for (int64_t e = 0; e < m * n; ++e) {
    max_diff =
        std::max(max_diff, std::fabs(static_cast<double>(z[e]) -
                                     static_cast<double>(ref.out()[static_cast<size_t>(e)])));
  }
  for (int r = 0; r < o.repeats; ++r) {
    z = kernel(x, y);
    ref.run();
    const auto t0 = Clock::now();
    for (int64_t b = 0; b < batch; ++b) ref.run();
    t_ref.push_back(since(t0) / static_cast<double>(batch));
  }
  const Stats so = stats_of(t_ours);
  const Stats sr = stats_of(t_ref);
  nlohmann::json j;
  j["kernel"] = "dot";
  j["dtype"] = o.dtype;
  j["shape"] = {{"m", m}, {"n", n}, {"k", k}};
  j["transpose_rhs"] = transposed;
  j["cores"] = 1;
  j["repeats"] = o.repeats;
  j["calls_per_batch"] = batch;
  j["seconds"] = stats_json(so);
  j["gflops"] = flops / so.median / 1e9;
  j["reference"] = {{"name", "oneDNN matmul (" + ref.impl() + ")"},
                    {"seconds", stats_json(sr)},
                    {"gflops", flops / sr.median / 1e9}};
  j["ratio"] = sr.median / so.median;
  j["max_abs_diff_from_reference"] = max_diff;
  return j;
}

}  // namespace

nlohmann::json dot_bench_json(const DotBenchOptions& o) {
  if (o.dtype == "bf16") return bench_dot_typed<bfloat16, float>(o);
  if (o.dtype == "int8") return bench_dot_typed<int8_t, int32_t>(o);
  return bench_dot_typed<float, float>(o);
}

nlohmann::json convert_bench_json(int64_t rows, int64_t cols, int repeats) {
  const Array<bfloat16> x = random_values<bfloat16>({rows, cols}, 3);
  const int64_t elems = rows * cols;
  const double bytes = static_cast<double>(elems) * 6.0;  // 2 read + 4 written per element
  const int64_t batch = std::clamp<int64_t>(static_cast<int64_t>(2e7 / bytes), 4, 100000);
  std::vector<double> t_ours, t_ref;
  auto kernel = pl::kernel(
      pl::out_type<float>({rows, cols}), pltpu::TensorCoreMesh("core", 1),
      pl::scratch_types(pltpu::VMEM<bfloat16>({rows, cols}), pltpu::VMEM<float>({rows, cols})),
      pl::name("bench_convert"))([&](pltpu::HbmRef<const bfloat16> x_hbm,
                                     pltpu::HbmRef<float> o_hbm, pltpu::VmemRef<bfloat16> xv,
                                     pltpu::VmemRef<float> ov) {
    pltpu::sync_copy(x_hbm, xv);
    ov = xv.astype<float>();
    const auto t0 = Clock::now();
    for (int64_t b = 0; b < batch; ++b) ov = xv.astype<float>();
    t_ours.push_back(since(t0) / static_cast<double>(batch));
    pltpu::sync_copy(ov, o_hbm);
  });
  // The reference: a memcpy of the float32 result's bytes between two buffers of that size.
  std::vector<float> src(static_cast<size_t>(elems), 1.0f), dst(static_cast<size_t>(elems));
  Array<float> z = kernel(x);
  t_ours.clear();
  bool right = true;
  for (int64_t e = 0; e < elems; ++e) right = right && z[e] == static_cast<float>(x[e]);
  for (int r = 0; r < repeats; ++r) {
    z = kernel(x);
    std::memcpy(dst.data(), src.data(), dst.size() * sizeof(float));
    const auto t0 = Clock::now();
    for (int64_t b = 0; b < batch; ++b) {
      std::memcpy(dst.data(), src.data(), dst.size() * sizeof(float));
      __asm__ volatile("" : : "r"(dst.data()) : "memory");
    }
    t_ref.push_back(since(t0) / static_cast<double>(batch));
  }
  const Stats so = stats_of(t_ours);
  const Stats sr = stats_of(t_ref);
  nlohmann::json j;
  j["kernel"] = "convert";
  j["dtype"] = "bf16->f32";
  j["shape"] = {rows, cols};
  j["cores"] = 1;
  j["repeats"] = repeats;
  j["calls_per_batch"] = batch;
  j["seconds"] = stats_json(so);
  j["gbps"] = bytes / so.median / 1e9;
  j["right"] = right;
  j["reference"] = {{"name", "memcpy of the float32 bytes"},
                    {"seconds", stats_json(sr)},
                    {"gbps", static_cast<double>(elems) * 8.0 / sr.median / 1e9}};
  j["ratio"] = sr.median / so.median;  // > 1: faster than copying the result's bytes
  return j;
}

}  // namespace tessera::cli
