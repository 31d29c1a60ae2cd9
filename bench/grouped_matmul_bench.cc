// Pallas' grouped matmul (megablox gmm) as ported (examples/14_grouped_matmul.cc) against the plain
// C++ a programmer writes for the same mixture-of-experts layer, in the same binary: one library
// GEMM per group on that group's rows (OpenBLAS on two threads, or oneDNN). lhs (4096, 2048),
// rhs (8, 2048, 2048), 8 groups of random sizes summing to 4096; float32, and bfloat16 operands
// with a float32 output. The kernel runs with Pallas' default tiling (128, 128, 128) and with
// (256, 512, 256) ("Larger"); its grid visits each m tile once per group that has rows in it, so a
// tile two groups share is computed twice (the `visits` counter: tile visits per m tile).
//
//   env -u OPENBLAS_CORETYPE -u OPENBLAS_L2_SIZE ./build/default/bench/grouped_matmul_bench
//       --benchmark_repetitions=5 --benchmark_report_aggregates_only=true
#include <benchmark/benchmark.h>
#include <cblas.h>

#include <algorithm>
#include <dnnl.hpp>
#include <vector>

#include "bench_support.h"
#include "grouped_matmul.h"

extern "C" void openblas_set_num_threads(int);

namespace {

constexpr int64_t kM = 4096;
constexpr int64_t kK = 2048;
constexpr int64_t kN = 2048;
constexpr int64_t kGroups = 8;

using Bf16 = tessera::bfloat16;
using tessera::Array;
using tessera::Shape;

struct Inputs {
  Array<float> lhs{Shape{kM, kK}};
  Array<float> rhs{Shape{kGroups, kK, kN}};
  Array<Bf16> lhs_bf16{Shape{kM, kK}};
  Array<Bf16> rhs_bf16{Shape{kGroups, kK, kN}};
  Array<int32_t> sizes{Shape{kGroups}};
  Inputs() {
    uint64_t s = 42;
    auto next = [&] {
      s = s * 6364136223846793005ull + 1442695040888963407ull;
      return s >> 33;
    };
    auto value = [&] { return static_cast<float>(next() & 0xffff) / 32768.0f - 1.0f; };
    for (float& x : lhs) x = value();
    for (float& x : rhs) x = value();
    for (int64_t e = 0; e < lhs.size(); ++e) lhs_bf16.data()[e] = Bf16(lhs.data()[e]);
    for (int64_t e = 0; e < rhs.size(); ++e) rhs_bf16.data()[e] = Bf16(rhs.data()[e]);
    std::vector<int64_t> ends;
    for (int64_t g = 0; g + 1 < kGroups; ++g) ends.push_back(static_cast<int64_t>(next() % kM));
    std::sort(ends.begin(), ends.end());
    ends.push_back(kM);
    int64_t start = 0;
    for (int64_t g = 0; g < kGroups; ++g) {
      sizes[g] = static_cast<int32_t>(ends[static_cast<size_t>(g)] - start);
      start = ends[static_cast<size_t>(g)];
    }
  }
};

const Inputs& inputs() {
  static const Inputs in;
  return in;
}

// The rate, and for the kernel its tile visits per m tile (1: no tile computed twice).
void set_counters(benchmark::State& state, int64_t tm = 0) {
  if (tm > 0) {
    const tessera::examples::GroupMetadata md =
        tessera::examples::make_group_metadata(inputs().sizes, kM, tm, 0, kGroups, false);
    state.counters["visits"] = static_cast<double>(md.num_tiles) / static_cast<double>(kM / tm);
  }
  state.counters["GFLOP/s"] = benchmark::Counter(
      2.0 * kM * kN * kK * static_cast<double>(state.iterations()), benchmark::Counter::kIsRate);
}

template <class T>
void gmm_tessera(benchmark::State& state, const Array<T>& lhs, const Array<T>& rhs,
                 tessera::examples::GmmTiling t) {
  for (auto _ : state) {
    auto o = tessera::examples::gmm<float>(lhs, rhs, inputs().sizes, {.tiling = t});
    benchmark::DoNotOptimize(o.data());
  }
  set_counters(state, t.tm);
}

// Pallas' default tiling, and tiles of (256, 512, 256).
constexpr tessera::examples::GmmTiling kDefault{128, 128, 128};
constexpr tessera::examples::GmmTiling kLarger{256, 512, 256};

void BM_GmmTessera(benchmark::State& state) {
  gmm_tessera(state, inputs().lhs, inputs().rhs, kDefault);
}
void BM_GmmTesseraLarger(benchmark::State& state) {
  gmm_tessera(state, inputs().lhs, inputs().rhs, kLarger);
}
void BM_GmmTesseraBf16(benchmark::State& state) {
  gmm_tessera(state, inputs().lhs_bf16, inputs().rhs_bf16, kDefault);
}
void BM_GmmTesseraBf16Larger(benchmark::State& state) {
  gmm_tessera(state, inputs().lhs_bf16, inputs().rhs_bf16, kLarger);
}

// One GEMM per group, on its rows: `gemm(rows, first_row, group)`.
template <class F>
void per_group(const F& gemm) {
  int64_t row = 0;
  for (int64_t g = 0; g < kGroups; ++g) {
    const int64_t rows = inputs().sizes[g];
    if (rows > 0) gemm(rows, row, g);
    row += rows;
  }
}

void BM_GmmOpenBLAS(benchmark::State& state) {
  const Inputs& in = inputs();
  openblas_set_num_threads(2);
  std::vector<float> out(static_cast<size_t>(kM * kN));
  for (auto _ : state) {
    per_group([&](int64_t rows, int64_t row, int64_t g) {
      cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, static_cast<int>(rows), kN, kK, 1.0f,
                  in.lhs.data() + row * kK, kK, in.rhs.data() + g * kK * kN, kN, 0.0f,
                  out.data() + row * kN, kN);
    });
    benchmark::DoNotOptimize(out.data());
  }
  set_counters(state);
}

void BM_GmmOneDnn(benchmark::State& state) {
  const Inputs& in = inputs();
  std::vector<float> out(static_cast<size_t>(kM * kN));
  for (auto _ : state) {
    per_group([&](int64_t rows, int64_t row, int64_t g) {
      dnnl_sgemm('N', 'N', rows, kN, kK, 1.0f, in.lhs.data() + row * kK, kK,
                 in.rhs.data() + g * kK * kN, kN, 0.0f, out.data() + row * kN, kN);
    });
    benchmark::DoNotOptimize(out.data());
  }
  set_counters(state);
}

// oneDNN's bfloat16 matmul, one primitive with a run-time row count made once (untimed), run per
// group on plain row-major operands.
void BM_GmmOneDnnBf16(benchmark::State& state) {
  const Inputs& in = inputs();
  using dt = dnnl::memory::data_type;
  using tag = dnnl::memory::format_tag;
  const dnnl::engine eng(dnnl::engine::kind::cpu, 0);
  dnnl::stream strm(eng);
  const auto rt = DNNL_RUNTIME_DIM_VAL;
  const dnnl::memory::desc src_rt({rt, kK}, dt::bf16, tag::ab);
  const dnnl::memory::desc wei_md({kK, kN}, dt::bf16, tag::ab);
  const dnnl::memory::desc dst_rt({rt, kN}, dt::f32, tag::ab);
  const dnnl::matmul mm(
      dnnl::matmul::primitive_desc(dnnl::matmul::desc(src_rt, wei_md, dst_rt), eng));
  std::vector<float> out(static_cast<size_t>(kM * kN));
  auto* a = const_cast<Bf16*>(in.lhs_bf16.data());
  auto* b = const_cast<Bf16*>(in.rhs_bf16.data());
  for (auto _ : state) {
    per_group([&](int64_t rows, int64_t row, int64_t g) {
      dnnl::memory src({{rows, kK}, dt::bf16, tag::ab}, eng, a + row * kK);
      dnnl::memory wei(wei_md, eng, b + g * kK * kN);
      dnnl::memory dst({{rows, kN}, dt::f32, tag::ab}, eng, out.data() + row * kN);
      mm.execute(strm, {{DNNL_ARG_SRC, src}, {DNNL_ARG_WEIGHTS, wei}, {DNNL_ARG_DST, dst}});
    });
    strm.wait();
    benchmark::DoNotOptimize(out.data());
  }
  set_counters(state);
}

BENCHMARK(BM_GmmTessera)->Unit(benchmark::kMillisecond)->UseRealTime();
BENCHMARK(BM_GmmTesseraLarger)->Unit(benchmark::kMillisecond)->UseRealTime();
BENCHMARK(BM_GmmOpenBLAS)->Unit(benchmark::kMillisecond)->UseRealTime();
BENCHMARK(BM_GmmOneDnn)->Unit(benchmark::kMillisecond)->UseRealTime();
BENCHMARK(BM_GmmTesseraBf16)->Unit(benchmark::kMillisecond)->UseRealTime();
BENCHMARK(BM_GmmTesseraBf16Larger)->Unit(benchmark::kMillisecond)->UseRealTime();
BENCHMARK(BM_GmmOneDnnBf16)->Unit(benchmark::kMillisecond)->UseRealTime();

}  // namespace

int main(int argc, char** argv) {
  return tessera::bench::run_with_ratios(argc, argv,
                                         {{"BM_GmmTessera", "BM_GmmOpenBLAS"},
                                          {"BM_GmmTessera", "BM_GmmOneDnn"},
                                          {"BM_GmmTesseraLarger", "BM_GmmOpenBLAS"},
                                          {"BM_GmmTesseraLarger", "BM_GmmOneDnn"},
                                          {"BM_GmmTesseraBf16", "BM_GmmOneDnnBf16"},
                                          {"BM_GmmTesseraBf16Larger", "BM_GmmOneDnnBf16"}});
}
