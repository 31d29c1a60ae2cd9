// bfloat16 x @ y.T with 16 to 64 rows of x on a CPU without AMX: where the rows fill whole vectors
// (a multiple of 16) and C has fewer words than y has pairs (2m < k), the GEMM computes the
// transpose, y · x^T, reading y where it lies, and writes it back transposed
// (src/native/gemm.cc, swapped_bf16). Checked against a double-precision reference with the
// float32 accumulation bound, (k + 2) · 2^-24 · Σ|x · y|: x and y views whose rows are not k
// apart, columns that end inside a 16 x 16 transpose block, k past and at the bound, assigned and
// accumulated, in every GEMM mode (on a CPU with AMX the default mode takes AMX's path instead).
// Everything here runs on the calling thread (TESSERA_ONE_THREAD_TESTS).
#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <random>
#include <string>
#include <vector>

#include "native/gemm.h"
#include "support/host_reference.h"
#include "tessera/tessera.h"

namespace {
using namespace tessera;

std::vector<bfloat16> random_bf16(int64_t n, uint32_t seed) {
  std::mt19937 rng(seed);
  std::uniform_real_distribution<float> d(-1.0f, 1.0f);
  std::vector<bfloat16> v(static_cast<size_t>(n));
  for (auto& x : v) x = static_cast<bfloat16>(d(rng));
  return v;
}

// value(i, j) = sum_p x(i, p) · y(j, p) and bound(i, j) = sum_p |x(i, p) · y(j, p)|; x rows ldx
// apart, y rows ldy apart.
TESSERA_HOST_REFERENCE void product(const bfloat16* x, int64_t ldx, const bfloat16* y, int64_t ldy,
                                    int64_t m, int64_t n, int64_t k, double* value, double* bound) {
  for (int64_t i = 0; i < m; ++i) {
    for (int64_t j = 0; j < n; ++j) {
      double s = 0, b = 0;
      for (int64_t p = 0; p < k; ++p) {
        const double t = static_cast<double>(static_cast<float>(x[i * ldx + p])) *
                         static_cast<double>(static_cast<float>(y[j * ldy + p]));
        s += t;
        b += std::fabs(t);
      }
      value[i * n + j] = s;
      bound[i * n + j] = b;
    }
  }
}

void check(int64_t m, int64_t n, int64_t k, uint32_t seed) {
  const int64_t ldx = k + 6, ldy = k + 10;  // views: rows further apart than k
  auto xv = random_bf16(m * ldx, seed);
  auto yv = random_bf16(n * ldy, seed + 1);
  std::vector<double> value(static_cast<size_t>(m * n)), bound(value.size());
  product(xv.data() + 2, ldx, yv.data() + 4, ldy, m, n, k, value.data(), bound.data());
  auto x = pltpu::VmemRef<bfloat16>(xv.data(), {m, ldx}).at(pl::all, pl::ds(2, k));
  auto y = pltpu::VmemRef<bfloat16>(yv.data(), {n, ldy}).at(pl::all, pl::ds(4, k));
  const std::string what = "(" + std::to_string(m) + ", " + std::to_string(k) + ") x (" +
                           std::to_string(n) + ", " + std::to_string(k) + ").T";
  for (auto mode :
       {detail::GemmMode::kAuto, detail::GemmMode::kNoAmx, detail::GemmMode::kPortable}) {
    detail::set_gemm_mode(mode);
    std::vector<float> ov(value.size(), 0.5f);
    auto o = pltpu::VmemRef<float>(ov.data(), {m, n});
    for (const bool accumulated : {true, false}) {
      if (accumulated) {
        o += lax::dot_general<float>(x, y, {{{1}, {1}}});
      } else {
        o = lax::dot_general<float>(x, y, {{{1}, {1}}});
      }
      int bad = 0;
      for (size_t e = 0; e < ov.size() && bad < 5; ++e) {
        const double want = value[e] + (accumulated ? 0.5 : 0.0);
        const double tol = static_cast<double>(k + 2) * std::ldexp(1.0, -24) * (bound[e] + 0.5);
        if (!(std::fabs(ov[e] - want) <= tol)) {
          ADD_FAILURE() << what << (accumulated ? " accumulated" : " assigned") << ", element " << e
                        << " = " << ov[e] << ", want " << want;
          ++bad;
        }
      }
    }
  }
  detail::set_gemm_mode(detail::GemmMode::kAuto);
}

TEST(DotSwapped, BfloatRowsInWholeVectorsAgainstATransposedRhs) {
  uint32_t seed = 11;
  for (const int64_t m : {16, 32, 48, 64}) {
    for (const int64_t n : {1, 17, 300}) {
      for (const int64_t k : {130, 1000}) check(m, n, k, seed += 2);
    }
  }
}

TEST(DotSwapped, BfloatRowsPastTheBoundsTakeTheOtherWay) {
  // The same dots where the transpose is not taken: rows not a multiple of 16, more than 64,
  // k odd, and C with as many words as y has pairs (2m = k).
  check(24, 70, 130, 101);
  check(80, 33, 400, 103);
  check(32, 50, 131, 105);
  check(32, 50, 64, 107);
}

}  // namespace
