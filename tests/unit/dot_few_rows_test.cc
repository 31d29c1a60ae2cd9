// Two paths of the dots with a few rows of x on a CPU without AMX (src/native/gemm_int8.cc,
// src/native/gemm.cc), each in every GEMM mode (on a CPU with AMX the default mode takes AMX's
// paths instead), assigned and accumulated. Everything here runs on the calling thread
// (TESSERA_ONE_THREAD_TESTS).
//
// int8 x @ y with y row-major (its rows contiguous, a view of a wider buffer): the VNNI kernel's
// packing interleaves four rows of y in registers, 128 and then 64 columns at a time down a group
// of quads where a group of quads' rows fits half the L1, or a quad at a time across all columns
// where it does not; the last columns of a block under masks; k padded by zero rows; the column
// sums that undo the unsigned offset of x added on the way. Results are exact int32.
//
// bfloat16 x @ y.T with 16 to 64 rows of x: where the rows fill whole vectors (a multiple of 16),
// C has fewer words than y has pairs (2m < k) and y's rows are not a multiple of 4 KiB apart, the
// GEMM computes the transpose, y · x^T, reading y where it lies, and writes it back transposed
// (swapped_bf16). Checked against a double-precision reference with the float32 accumulation
// bound, (k + 2) · 2^-24 · Σ|x · y|: x and y views whose rows are not k apart, columns that end
// inside a 16 x 16 transpose block, k past and at the bounds.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <string>
#include <vector>

#include "native/gemm.h"
#include "support/host_reference.h"
#include "support/random_values.h"
#include "tessera/tessera.h"

namespace {
using namespace tessera;

// out(i, j) = sum_p x(i, p) * y(p, j); x rows k apart, y rows ld apart.
TESSERA_HOST_REFERENCE std::vector<int32_t> product(const int8_t* x, const int8_t* y, int64_t m,
                                                    int64_t n, int64_t k, int64_t ld) {
  std::vector<int32_t> out_v(static_cast<size_t>(m * n), 0);
  int32_t* const out = out_v.data();
  for (int64_t i = 0; i < m; ++i) {
    for (int64_t p = 0; p < k; ++p) {
      const int32_t a = x[i * k + p];
      const int8_t* const yp = y + p * ld;
      for (int64_t j = 0; j < n; ++j) out[i * n + j] += a * yp[j];
    }
  }
  return out_v;
}

void check_int8(int64_t m, int64_t n, int64_t k, uint32_t seed) {
  const int64_t ld = n + 5;  // y a view: its rows 5 bytes further apart than its width
  auto xv = random_values<int8_t>(m * k, seed);
  auto yv = random_values<int8_t>(k * ld, seed + 1);
  const std::vector<int32_t> want = product(xv.data(), yv.data(), m, n, k, ld);
  auto x = pltpu::VmemRef<int8_t>(xv.data(), {m, k});
  auto y = pltpu::VmemRef<int8_t>(yv.data(), {k, ld}).at(pl::all, pl::ds(0, n));
  const std::string what = "(" + std::to_string(m) + ", " + std::to_string(k) + ") x (" +
                           std::to_string(k) + ", " + std::to_string(n) + ")";
  for (auto mode :
       {detail::GemmMode::kAuto, detail::GemmMode::kNoAmx, detail::GemmMode::kPortable}) {
    detail::set_gemm_mode(mode);
    std::vector<int32_t> ov(static_cast<size_t>(m * n), -3);
    auto o = pltpu::VmemRef<int32_t>(ov.data(), {m, n});
    o = jnp::dot<int32_t>(x, y);
    for (size_t e = 0; e < ov.size(); ++e) {
      ASSERT_EQ(ov[e], want[e]) << what << " assigned, element " << e;
    }
    o += jnp::dot<int32_t>(x, y);
    for (size_t e = 0; e < ov.size(); ++e) {
      ASSERT_EQ(ov[e], 2 * want[e]) << what << " accumulated, element " << e;
    }
  }
  detail::set_gemm_mode(detail::GemmMode::kAuto);
}

TEST(DotInt8, RowMajorRhsInColumnBlocksAndGroupsOfQuads) {
  // Columns: one, a partial block, one and two whole blocks of 64, a block of 128 and more, and
  // 128-column blocks with a 64 and a partial one after them. k: one partial quad, several
  // groups of quads (the last partial), a last quad of one row. 5 and 8 rows (past the few-row
  // kernels of src/native/gemm_skinny.h) and 40.
  uint32_t seed = 1;
  for (const int64_t m : {5, 8, 40}) {
    for (const int64_t n : {1, 17, 64, 100, 128, 200, 320}) {
      for (const int64_t k : {3, 250, 701}) check_int8(m, n, k, seed += 2);
    }
  }
}

TEST(DotInt8, RowMajorRhsTooWideForGroupsOfQuads) {
  // A row of y past a sixteenth of any current x86 core's L1 (4,100 bytes): packed a quad at a
  // time across all columns, the last 4 under masks, the column sums in a second pass.
  check_int8(8, 4100, 250, 901);
  check_int8(6, 4160, 9, 903);
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

void check_bf16(int64_t m, int64_t n, int64_t k, uint32_t seed) {
  const int64_t ldx = k + 6, ldy = k + 10;  // views: rows further apart than k
  auto xv = random_values<bfloat16>(m * ldx, seed);
  auto yv = random_values<bfloat16>(n * ldy, seed + 1);
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
      for (const int64_t k : {130, 1000}) check_bf16(m, n, k, seed += 2);
    }
  }
}

TEST(DotSwapped, BfloatRowsPastTheBoundsTakeTheOtherWay) {
  // The same dots where the transpose is not taken: rows not a multiple of 16, more than 64,
  // k odd, C with as many words as y has pairs (2m = k), and y's rows a multiple of 4 KiB apart.
  check_bf16(24, 70, 130, 101);
  check_bf16(80, 33, 400, 103);
  check_bf16(32, 50, 131, 105);
  check_bf16(32, 50, 64, 107);
  check_bf16(32, 20, 2038, 109);  // y's rows 2,048 elements (4 KiB) apart
}

}  // namespace
