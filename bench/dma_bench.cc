// sync_copy of contiguous data against memcpy of the same bytes, and a strided (column block)
// copy against a plain row-by-row memcpy loop, in the same binary.
//
//   ./build/default/bench/dma_bench --benchmark_repetitions=5
#include <benchmark/benchmark.h>

#include <cstring>

#include "bench_support.h"
#include "tessera/tessera.h"

namespace {
using namespace tessera;

constexpr int64_t kRows = 4096;
constexpr int64_t kCols = 4096;  // 64 MiB of float32: streams from DRAM

Array<float>& source() {
  static Array<float> a = [] {
    Array<float> x({kRows, kCols});
    for (int64_t i = 0; i < x.size(); ++i) x[i] = static_cast<float>(i % 1000);
    return x;
  }();
  return a;
}

void BM_SyncCopyContiguous(benchmark::State& state) {
  Array<float>& src = source();
  Array<float> dst({kRows, kCols});
  const pltpu::HbmRef<const float> s(src.data(), src.shape());
  const pltpu::VmemRef<float> d(dst.data(), dst.shape());
  for (auto _ : state) {
    pltpu::sync_copy(s, d);
    benchmark::ClobberMemory();
  }
  if (std::memcmp(src.data(), dst.data(), src.bytes()) != 0) state.SkipWithError("wrong copy");
  state.SetBytesProcessed(state.iterations() * static_cast<int64_t>(src.bytes()) * 2);
}
BENCHMARK(BM_SyncCopyContiguous)->UseRealTime()->Unit(benchmark::kMillisecond);

void BM_Memcpy(benchmark::State& state) {
  Array<float>& src = source();
  Array<float> dst({kRows, kCols});
  for (auto _ : state) {
    std::memcpy(dst.data(), src.data(), src.bytes());
    benchmark::ClobberMemory();
  }
  state.SetBytesProcessed(state.iterations() * static_cast<int64_t>(src.bytes()) * 2);
}
BENCHMARK(BM_Memcpy)->UseRealTime()->Unit(benchmark::kMillisecond);

// The left half of every row: 2048-float runs with a 4096-float stride.
void BM_SyncCopyColumnBlock(benchmark::State& state) {
  Array<float>& src = source();
  Array<float> dst({kRows, kCols / 2});
  const pltpu::HbmRef<const float> s(src.data(), src.shape());
  const pltpu::VmemRef<float> d(dst.data(), dst.shape());
  for (auto _ : state) {
    pltpu::sync_copy(s.at(pl::all, pl::ds(0, kCols / 2)), d);
    benchmark::ClobberMemory();
  }
  state.SetBytesProcessed(state.iterations() * static_cast<int64_t>(dst.bytes()) * 2);
}
BENCHMARK(BM_SyncCopyColumnBlock)->UseRealTime()->Unit(benchmark::kMillisecond);

void BM_MemcpyRows(benchmark::State& state) {
  Array<float>& src = source();
  Array<float> dst({kRows, kCols / 2});
  for (auto _ : state) {
    for (int64_t r = 0; r < kRows; ++r) {
      std::memcpy(dst.data() + r * (kCols / 2), src.data() + r * kCols,
                  (kCols / 2) * sizeof(float));
    }
    benchmark::ClobberMemory();
  }
  state.SetBytesProcessed(state.iterations() * static_cast<int64_t>(dst.bytes()) * 2);
}
BENCHMARK(BM_MemcpyRows)->UseRealTime()->Unit(benchmark::kMillisecond);

}  // namespace

int main(int argc, char** argv) {
  return tessera::bench::run_with_ratios(
      argc, argv,
      {{"BM_SyncCopyContiguous", "BM_Memcpy"}, {"BM_SyncCopyColumnBlock", "BM_MemcpyRows"}});
}
