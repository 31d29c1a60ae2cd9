// Launch cost: a tiny kernel on 2 cores (each core fills a (128,) VMEM block and DMAs it to its
// slice of the output — the quickstart's iota) against an OpenMP parallel region of 2 threads doing
// the same work (fill a 128-float buffer, copy it to the thread's slice), in the same binary.
//
//   ./build/default/bench/launch_bench --benchmark_repetitions=9
//
// prints each median and "ratio BM_TesseraLaunch / BM_OpenMPRegion = ...".
#include <benchmark/benchmark.h>
#include <omp.h>

#include <cstring>

#include "bench_support.h"
#include "tessera/tessera.h"

namespace {
using namespace tessera;

constexpr int kCores = 2;

void BM_TesseraLaunch(benchmark::State& state) {
  auto kernel =
      pl::kernel(pl::out_type<float>({128 * kCores}), pltpu::TensorCoreMesh("core", kCores),
                 pl::scratch_types(pltpu::VMEM<float>({128})))(
          [](pltpu::HbmRef<float> o_ref, pltpu::VmemRef<float> o_vmem) {
            const int i = lax::axis_index("core");
            o_vmem = jnp::arange<float>(128) + float(i * 128);
            pltpu::sync_copy(o_vmem, o_ref.at(pl::ds(i * 128, 128)));
          });
  for (auto _ : state) {
    Array<float> out = kernel();
    benchmark::DoNotOptimize(out.data());
  }
  Array<float> check = kernel();
  for (int k = 0; k < 128 * kCores; ++k) {
    if (check[k] != static_cast<float>(k)) state.SkipWithError("wrong result");
  }
}
BENCHMARK(BM_TesseraLaunch)->UseRealTime();

void BM_OpenMPRegion(benchmark::State& state) {
  for (auto _ : state) {
    // The same work and the same allocation of the output as the kernel call.
    Array<float> out(detail::Uninitialized{}, Shape{128 * kCores});
    float* o = out.data();
#pragma omp parallel num_threads(kCores)
    {
      alignas(64) float block[128];
      const int i = omp_get_thread_num();
      for (int k = 0; k < 128; ++k) block[k] = static_cast<float>(k) + static_cast<float>(i * 128);
      std::memcpy(o + i * 128, block, sizeof block);
    }
    benchmark::DoNotOptimize(out.data());
  }
}
BENCHMARK(BM_OpenMPRegion)->UseRealTime();

// The bare cost of waking the cores: empty bodies.
void BM_TesseraEmptyLaunch(benchmark::State& state) {
  auto kernel = pl::kernel(pltpu::TensorCoreMesh("core", kCores))([] {});
  for (auto _ : state) kernel();
}
BENCHMARK(BM_TesseraEmptyLaunch)->UseRealTime();

void BM_OpenMPEmptyRegion(benchmark::State& state) {
  for (auto _ : state) {
#pragma omp parallel num_threads(kCores)
    { benchmark::ClobberMemory(); }
  }
}
BENCHMARK(BM_OpenMPEmptyRegion)->UseRealTime();

}  // namespace

int main(int argc, char** argv) {
  return tessera::bench::run_with_ratios(
      argc, argv,
      {{"BM_TesseraLaunch", "BM_OpenMPRegion"}, {"BM_TesseraEmptyLaunch", "BM_OpenMPEmptyRegion"}});
}
