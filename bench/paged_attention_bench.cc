// Pallas' paged attention kernel as ported (examples/13_paged_attention.cc) against the plain C++
// a programmer writes for the same decode step, in the same binary: for each sequence and KV head
// (two OpenMP threads), the sequence's bfloat16 pages widened to float32 into one contiguous
// buffer each for keys and values, the scores by cblas_sgemm (q x K^T), a softmax with std::exp,
// and the output by cblas_sgemm (P x V). 16 sequences of 2048 tokens, 8 KV heads with 8 query
// heads each, head_dim 128, pages of 16 tokens scattered over the cache by a random page table;
// the kernel takes blocks of 512 tokens and megacore mode "batch" on 2 cores. Both read the same
// 128 MiB of pages once a call.
//
//   env -u OPENBLAS_CORETYPE -u OPENBLAS_L2_SIZE ./build/default/bench/paged_attention_bench
//       --benchmark_repetitions=5 --benchmark_report_aggregates_only=true
#include <benchmark/benchmark.h>
#include <cblas.h>
#include <omp.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <vector>

#include "bench_support.h"
#include "paged_attention.h"

extern "C" void openblas_set_num_threads(int);

namespace {

constexpr int64_t kBatch = 16;
constexpr int64_t kKvHeads = 8;
constexpr int64_t kGroups = 8;
constexpr int64_t kHeadDim = 128;
constexpr int64_t kPageSize = 16;
constexpr int64_t kMaxLen = 2048;
constexpr int64_t kPagesPerSeq = kMaxLen / kPageSize;
constexpr int64_t kTotalPages = kBatch * kPagesPerSeq;

using Bf16 = tessera::bfloat16;

struct Inputs {
  tessera::Array<Bf16> q{tessera::Shape{kBatch, kKvHeads* kGroups, kHeadDim}};
  tessera::Array<Bf16> k{tessera::Shape{kKvHeads, kTotalPages, kPageSize, kHeadDim}};
  tessera::Array<Bf16> v{tessera::Shape{kKvHeads, kTotalPages, kPageSize, kHeadDim}};
  tessera::Array<int32_t> lengths{tessera::Shape{kBatch}, kMaxLen};
  tessera::Array<int32_t> pages{tessera::Shape{kBatch, kPagesPerSeq}};
  Inputs() {
    uint64_t s = 42;
    auto next = [&] {
      s = s * 6364136223846793005ull + 1442695040888963407ull;
      return static_cast<float>((s >> 40) & 0xffff) / 32768.0f - 1.0f;
    };
    for (Bf16& x : q) x = Bf16(next());
    for (Bf16& x : k) x = Bf16(next());
    for (Bf16& x : v) x = Bf16(next());
    std::vector<int32_t> perm(kTotalPages);
    for (int64_t p = 0; p < kTotalPages; ++p)
      perm[static_cast<size_t>(p)] = static_cast<int32_t>(p);
    for (int64_t p = kTotalPages - 1; p > 0; --p) {
      s = s * 6364136223846793005ull + 1;
      std::swap(perm[static_cast<size_t>(p)], perm[static_cast<size_t>(s % (p + 1))]);
    }
    std::copy(perm.begin(), perm.end(), pages.data());
  }
};

const Inputs& inputs() {
  static const Inputs in;
  return in;
}

void BM_PagedAttentionTessera(benchmark::State& state) {
  const Inputs& in = inputs();
  const tessera::examples::PagedAttentionOptions opts{.pages_per_compute_block = 512 / kPageSize,
                                                      .megacore_mode = "batch"};
  for (auto _ : state) {
    auto o = tessera::examples::paged_attention(in.q, in.k, in.v, in.lengths, in.pages, opts);
    benchmark::DoNotOptimize(o.data());
  }
}

// A page of bfloat16 widened to float32: the bits moved up 16 (what the compiler vectorises).
void widen(const Bf16* src, float* dst, int64_t n) {
  for (int64_t e = 0; e < n; ++e) {
    const uint32_t bits = static_cast<uint32_t>(src[e].bits) << 16;
    std::memcpy(&dst[e], &bits, sizeof bits);
  }
}

void BM_PagedAttentionPlain(benchmark::State& state) {
  const Inputs& in = inputs();
  openblas_set_num_threads(1);
  std::vector<float> out(static_cast<size_t>(kBatch * kKvHeads * kGroups * kHeadDim));
  for (auto _ : state) {
#pragma omp parallel num_threads(2)
    {
      std::vector<float> kf(kMaxLen * kHeadDim), vf(kMaxLen * kHeadDim);
      std::vector<float> q(kGroups * kHeadDim), s(kGroups * kMaxLen);
#pragma omp for schedule(static)
      for (int64_t bh = 0; bh < kBatch * kKvHeads; ++bh) {
        const int64_t b = bh / kKvHeads, h = bh % kKvHeads;
        const int64_t len = in.lengths.data()[b];
        for (int64_t t = 0; t < len; t += kPageSize) {
          const int64_t page = in.pages.data()[b * kPagesPerSeq + t / kPageSize];
          const int64_t at = ((h * kTotalPages + page) * kPageSize) * kHeadDim;
          widen(in.k.data() + at, &kf[static_cast<size_t>(t * kHeadDim)], kPageSize * kHeadDim);
          widen(in.v.data() + at, &vf[static_cast<size_t>(t * kHeadDim)], kPageSize * kHeadDim);
        }
        widen(in.q.data() + (b * kKvHeads + h) * kGroups * kHeadDim, q.data(), kGroups * kHeadDim);
        const int n = static_cast<int>(len), d = static_cast<int>(kHeadDim);
        const int g = static_cast<int>(kGroups);
        cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, g, n, d, 1.0f, q.data(), d, kf.data(),
                    d, 0.0f, s.data(), n);
        for (int64_t r = 0; r < kGroups; ++r) {
          float* row = &s[static_cast<size_t>(r * len)];
          const float m = *std::max_element(row, row + len);
          float sum = 0.0f;
          for (int64_t t = 0; t < len; ++t) sum += (row[t] = std::exp(row[t] - m));
          for (int64_t t = 0; t < len; ++t) row[t] /= sum;
        }
        cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, g, d, n, 1.0f, s.data(), n,
                    vf.data(), d, 0.0f, &out[static_cast<size_t>(bh * kGroups * kHeadDim)], d);
      }
    }
    benchmark::DoNotOptimize(out.data());
  }
}

BENCHMARK(BM_PagedAttentionTessera)->Unit(benchmark::kMillisecond)->UseRealTime();
BENCHMARK(BM_PagedAttentionPlain)->Unit(benchmark::kMillisecond)->UseRealTime();

}  // namespace

int main(int argc, char** argv) {
  return tessera::bench::run_with_ratios(argc, argv,
                                         {{"BM_PagedAttentionTessera", "BM_PagedAttentionPlain"}});
}
