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
#include "support/dot_reference.h"
#include "tessera/tessera.h"

namespace {
using namespace tessera;
using namespace tessera::testing;

void check_int8(int64_t m, int64_t n, int64_t k, uint32_t seed) {
  const int64_t ld = n + 5;  // y a view: its rows 5 bytes further apart than its width
  auto xv = random_values<int8_t>(m * k, seed);
  auto yv = random_values<int8_t>(k * ld, seed + 1);
  auto x = vref(xv, {m, k});
  auto y = vref(yv, {k, ld}).at(pl::all, pl::ds(0, n));
  const std::vector<double> want = reference(x, y, 1, 0).value;  // exact: |sums| < 2^53
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

void check_bf16(int64_t m, int64_t n, int64_t k, uint32_t seed) {
  const int64_t ldx = k + 6, ldy = k + 10;  // views: rows further apart than k
  auto xv = random_values<bfloat16>(m * ldx, seed);
  auto yv = random_values<bfloat16>(n * ldy, seed + 1);
  auto x = vref(xv, {m, ldx}).at(pl::all, pl::ds(2, k));
  auto y = vref(yv, {n, ldy}).at(pl::all, pl::ds(4, k));
  const Reference ref = reference(x, y, 1, 1);
  const std::string what = "(" + std::to_string(m) + ", " + std::to_string(k) + ") x (" +
                           std::to_string(n) + ", " + std::to_string(k) + ").T";
  for (auto mode :
       {detail::GemmMode::kAuto, detail::GemmMode::kNoAmx, detail::GemmMode::kPortable}) {
    detail::set_gemm_mode(mode);
    std::vector<float> ov(ref.value.size(), 0.5f);
    auto o = pltpu::VmemRef<float>(ov.data(), {m, n});
    // The bound widened by the 0.5 that C starts with, in both checks.
    const double widened = static_cast<double>(k + 2) * std::ldexp(1.0, -24) * 0.5;
    o += lax::dot_general<float>(x, y, {{{1}, {1}}});
    expect_close(o, ref, k, std::vector<double>(ov.size(), 0.5), 0.0, what + " accumulated",
                 widened);
    o = lax::dot_general<float>(x, y, {{{1}, {1}}});
    expect_close(o, ref, k, {}, 0.0, what + " assigned", widened);
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
