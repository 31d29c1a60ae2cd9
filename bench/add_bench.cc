// The pipelined add (emit_pipeline, (128, 128) blocks, PARALLEL x ARBITRARY, 2 cores) on
// N x N float32 against a plain two-thread loop computing the same sum, in the same binary.
// GB/s counts 3 * 4 * N^2 bytes (two reads, one write) per run.
//
//   ./build/default/bench/add_bench --benchmark_repetitions=5
//   --benchmark_enable_random_interleaving=true TESSERA_ADD_N=4096 ./build/default/bench/add_bench
//   ...
#include <benchmark/benchmark.h>
#include <omp.h>

#include <cstdlib>
#include <random>

#include "bench_support.h"
#include "pipelined_add.h"
#include "tessera/tessera.h"

namespace {
using namespace tessera;

int64_t size_n() {
  const char* env = std::getenv("TESSERA_ADD_N");
  return env != nullptr ? std::atoll(env) : 8192;
}

struct Inputs {
  Array<float> x, y;
};
const Inputs& inputs() {
  static const Inputs in = [] {
    const int64_t n = size_n();
    Inputs v{Array<float>({n, n}), Array<float>({n, n})};
    std::mt19937 rng(7);
    std::uniform_real_distribution<float> d(-1.0f, 1.0f);
    for (float& a : v.x) a = d(rng);
    for (float& a : v.y) a = d(rng);
    return v;
  }();
  return in;
}

void set_counters(benchmark::State& state) {
  const int64_t n = size_n();
  state.SetBytesProcessed(state.iterations() * 3 * 4 * n * n);
}

void BM_PipelinedAdd(benchmark::State& state) {
  const Inputs& in = inputs();
  for (auto _ : state) {
    Array<float> o = examples::pipelined_add(in.x, in.y, 2);
    benchmark::DoNotOptimize(o.data());
    state.PauseTiming();
    bool ok = true;
    for (int64_t i = 0; i < o.size(); i += 4099) ok = ok && o[i] == in.x[i] + in.y[i];
    if (!ok) state.SkipWithError("wrong sum");
    state.ResumeTiming();
  }
  set_counters(state);
}
BENCHMARK(BM_PipelinedAdd)->UseRealTime()->Unit(benchmark::kMillisecond);

void BM_PlainLoopAdd(benchmark::State& state) {
  const Inputs& in = inputs();
  for (auto _ : state) {
    // The same allocation as the kernel's output, so both pay the same for it.
    Array<float> o(detail::Uninitialized{}, in.x.shape());
    const float* x = in.x.data();
    const float* y = in.y.data();
    float* out = o.data();
    const int64_t total = o.size();
#pragma omp parallel for num_threads(2) schedule(static)
    for (int64_t i = 0; i < total; ++i) out[i] = x[i] + y[i];
    benchmark::DoNotOptimize(o.data());
  }
  set_counters(state);
}
BENCHMARK(BM_PlainLoopAdd)->UseRealTime()->Unit(benchmark::kMillisecond);

}  // namespace

int main(int argc, char** argv) {
  return tessera::bench::run_with_ratios(argc, argv, {{"BM_PipelinedAdd", "BM_PlainLoopAdd"}});
}
