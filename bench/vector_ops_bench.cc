// The native VPU evaluator against plain C++ loops in the same binary, on one VMEM-sized tile:
// (256, 1024) float32 = 1 MiB per operand, which stays in this machine's 2 MiB L2. Each Tessera
// benchmark runs inside a 1-core kernel (so a reduction's temporaries come from VMEM, as in real
// kernels) and times kReps evaluations of one assignment; the loops are what a C++ programmer
// writes by hand, compiled with the project's flags (no -march, so SSE2 plus whatever the
// compiler vectorises) while Tessera dispatches to AVX-512 at run time. Times are per
// evaluation; bytes count each input read and the output written once.
//
//   ./build/default/bench/vector_ops_bench --benchmark_repetitions=5
//       --benchmark_report_aggregates_only=true
#include <benchmark/benchmark.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <vector>

#include "bench_support.h"
#include "tessera/tessera.h"

namespace {
using namespace tessera;

constexpr int64_t kRows = 256;
constexpr int64_t kCols = 1024;
constexpr int kReps = 20;
constexpr int64_t kSize = kRows * kCols;

using Clock = std::chrono::steady_clock;

// Runs `op(x, y, s)` kReps times inside a 1-core kernel on VMEM scratch x (input), y (output)
// and s (one value per row) and returns the seconds per evaluation.
template <class Op>
double time_in_kernel(Op op) {
  static double seconds = 0;
  auto k = pl::kernel(
      pl::out_type<float>({1}), pltpu::TensorCoreMesh("core", 1),
      pl::scratch_types(pltpu::VMEM<float>({kRows, kCols}), pltpu::VMEM<float>({kRows, kCols}),
                        pltpu::VMEM<float>({kRows})))(
      [op](pltpu::HbmRef<float>, pltpu::VmemRef<float> x, pltpu::VmemRef<float> y,
           pltpu::VmemRef<float> s) {
        x = jnp::sin(lax::broadcasted_iota<float>({kRows, kCols}, 1) * 0.01f +
                     lax::broadcasted_iota<float>({kRows, kCols}, 0));
        op(x, y, s);  // warm up
        const auto t0 = Clock::now();
        for (int r = 0; r < kReps; ++r) op(x, y, s);
        seconds = std::chrono::duration<double>(Clock::now() - t0).count() / kReps;
      });
  static_cast<void>(k());
  return seconds;
}

struct Host {
  std::vector<float> x = std::vector<float>(kSize), y = std::vector<float>(kSize),
                     s = std::vector<float>(kRows);
  Host() {
    for (int64_t i = 0; i < kRows; ++i)
      for (int64_t j = 0; j < kCols; ++j)
        x[static_cast<size_t>(i * kCols + j)] =
            std::sin(static_cast<float>(j) * 0.01f + static_cast<float>(i));
  }
};
Host& host() {
  static Host h;
  return h;
}

template <class F>
void run_loop(benchmark::State& state, F f, int64_t bytes) {
  Host& h = host();
  for (auto _ : state) {
    const auto t0 = Clock::now();
    for (int r = 0; r < kReps; ++r) {
      f(h.x.data(), h.y.data(), h.s.data());
      benchmark::ClobberMemory();
    }
    state.SetIterationTime(std::chrono::duration<double>(Clock::now() - t0).count() / kReps);
  }
  state.SetBytesProcessed(state.iterations() * bytes);
}

template <class Op>
void run_tessera(benchmark::State& state, Op op, int64_t bytes) {
  for (auto _ : state) state.SetIterationTime(time_in_kernel(op));
  state.SetBytesProcessed(state.iterations() * bytes);
}

constexpr int64_t kElementwiseBytes = 2 * 4 * kSize;

// 1. A cheap fused chain: max(x * 1.5 + 0.25, 0) (a scaled ReLU).
void BM_ReluChain_Tessera(benchmark::State& state) {
  run_tessera(
      state,
      [](pltpu::VmemRef<float> x, pltpu::VmemRef<float> y, pltpu::VmemRef<float>) {
        y = jnp::maximum(x * 1.5f + 0.25f, 0.0f);
      },
      kElementwiseBytes);
}
void BM_ReluChain_Loop(benchmark::State& state) {
  run_loop(
      state,
      [](const float* x, float* y, float*) {
        for (int64_t i = 0; i < kSize; ++i) y[i] = std::max(x[i] * 1.5f + 0.25f, 0.0f);
      },
      kElementwiseBytes);
}

// 2. A transcendental chain: tanh-GELU, 0.5 x (1 + tanh(0.7978846 (x + 0.044715 x^3))).
void BM_GeluChain_Tessera(benchmark::State& state) {
  run_tessera(
      state,
      [](pltpu::VmemRef<float> x, pltpu::VmemRef<float> y, pltpu::VmemRef<float>) {
        y = 0.5f * x * (1.0f + jnp::tanh(0.7978846f * (x + 0.044715f * x * x * x)));
      },
      kElementwiseBytes);
}
void BM_GeluChain_Loop(benchmark::State& state) {
  run_loop(
      state,
      [](const float* x, float* y, float*) {
        for (int64_t i = 0; i < kSize; ++i) {
          const float v = x[i];
          y[i] = 0.5f * v * (1.0f + std::tanh(0.7978846f * (v + 0.044715f * v * v * v)));
        }
      },
      kElementwiseBytes);
}

// 3. A row reduction: s = sum(x, axis=1).
void BM_RowSum_Tessera(benchmark::State& state) {
  run_tessera(
      state,
      [](pltpu::VmemRef<float> x, pltpu::VmemRef<float>, pltpu::VmemRef<float> s) {
        s = jnp::sum(x, 1);
      },
      4 * kSize);
}
void BM_RowSum_Loop(benchmark::State& state) {
  run_loop(
      state,
      [](const float* x, float*, float* s) {
        for (int64_t i = 0; i < kRows; ++i) {
          float acc = 0;
          for (int64_t j = 0; j < kCols; ++j) acc += x[i * kCols + j];
          s[i] = acc;
        }
      },
      4 * kSize);
}

// 4. Row softmax: exp(x - max(x, 1)) / sum(exp(x - max(x, 1)), 1).
void BM_Softmax_Tessera(benchmark::State& state) {
  run_tessera(
      state,
      [](pltpu::VmemRef<float> x, pltpu::VmemRef<float> y, pltpu::VmemRef<float>) {
        y = jnp::exp(x - jnp::max(x, 1, true)) /
            jnp::sum(jnp::exp(x - jnp::max(x, 1, true)), 1, true);
      },
      kElementwiseBytes);
}
void BM_Softmax_Loop(benchmark::State& state) {
  run_loop(
      state,
      [](const float* x, float* y, float*) {
        for (int64_t i = 0; i < kRows; ++i) {
          const float* r = x + i * kCols;
          float* o = y + i * kCols;
          float m = r[0];
          for (int64_t j = 1; j < kCols; ++j) m = std::max(m, r[j]);
          float s = 0;
          for (int64_t j = 0; j < kCols; ++j) {
            o[j] = std::exp(r[j] - m);
            s += o[j];
          }
          const float inv = 1.0f / s;
          for (int64_t j = 0; j < kCols; ++j) o[j] *= inv;
        }
      },
      kElementwiseBytes);
}

// 5. A layer norm, as Pallas' layer-norm kernels write it: mean, variance of x - mean, then
// (x - mean) * rsqrt(var + eps) * w + b (w, b constants here).
void BM_LayerNorm_Tessera(benchmark::State& state) {
  run_tessera(
      state,
      [](pltpu::VmemRef<float> x, pltpu::VmemRef<float> y, pltpu::VmemRef<float>) {
        jnp::Value mean = jnp::mean(x, 1, true);
        jnp::Value var = jnp::mean(jnp::square(x - mean), 1, true);
        y = (x - mean) * lax::rsqrt(var + 1e-5f) * 1.5f + 0.25f;
      },
      kElementwiseBytes);
}
void BM_LayerNorm_Loop(benchmark::State& state) {
  run_loop(
      state,
      [](const float* x, float* y, float*) {
        for (int64_t i = 0; i < kRows; ++i) {
          const float* r = x + i * kCols;
          float* o = y + i * kCols;
          float sum = 0;
          for (int64_t j = 0; j < kCols; ++j) sum += r[j];
          const float mean = sum / static_cast<float>(kCols);
          float sq = 0;
          for (int64_t j = 0; j < kCols; ++j) sq += (r[j] - mean) * (r[j] - mean);
          const float rstd = 1.0f / std::sqrt(sq / static_cast<float>(kCols) + 1e-5f);
          for (int64_t j = 0; j < kCols; ++j) o[j] = (r[j] - mean) * rstd * 1.5f + 0.25f;
        }
      },
      kElementwiseBytes);
}

BENCHMARK(BM_ReluChain_Tessera)->UseManualTime()->MinTime(0.05)->Unit(benchmark::kMicrosecond);
BENCHMARK(BM_ReluChain_Loop)->UseManualTime()->MinTime(0.05)->Unit(benchmark::kMicrosecond);
BENCHMARK(BM_GeluChain_Tessera)->UseManualTime()->MinTime(0.05)->Unit(benchmark::kMicrosecond);
BENCHMARK(BM_GeluChain_Loop)->UseManualTime()->MinTime(0.05)->Unit(benchmark::kMicrosecond);
BENCHMARK(BM_RowSum_Tessera)->UseManualTime()->MinTime(0.05)->Unit(benchmark::kMicrosecond);
BENCHMARK(BM_RowSum_Loop)->UseManualTime()->MinTime(0.05)->Unit(benchmark::kMicrosecond);
BENCHMARK(BM_Softmax_Tessera)->UseManualTime()->MinTime(0.05)->Unit(benchmark::kMicrosecond);
BENCHMARK(BM_Softmax_Loop)->UseManualTime()->MinTime(0.05)->Unit(benchmark::kMicrosecond);
BENCHMARK(BM_LayerNorm_Tessera)->UseManualTime()->MinTime(0.05)->Unit(benchmark::kMicrosecond);
BENCHMARK(BM_LayerNorm_Loop)->UseManualTime()->MinTime(0.05)->Unit(benchmark::kMicrosecond);

}  // namespace

int main(int argc, char** argv) {
  return tessera::bench::run_with_ratios(argc, argv,
                                         {{"BM_ReluChain_Tessera", "BM_ReluChain_Loop"},
                                          {"BM_GeluChain_Tessera", "BM_GeluChain_Loop"},
                                          {"BM_RowSum_Tessera", "BM_RowSum_Loop"},
                                          {"BM_Softmax_Tessera", "BM_Softmax_Loop"},
                                          {"BM_LayerNorm_Tessera", "BM_LayerNorm_Loop"}});
}
