// Three paths of the dots with a few rows of x on a CPU without AMX (src/native/gemm_int8.cc,
// src/native/gemm_skinny_lanes.cc, src/native/gemm.cc), each in every GEMM mode (on a CPU with AMX
// the default mode takes AMX's paths instead), assigned and accumulated. Everything here runs on
// the calling thread (TESSERA_ONE_THREAD_TESTS).
//
// int8 x @ y.T with 6 to 8, 12 to 16 or 30 to 32 rows of x (src/native/gemm_skinny_lanes.cc):
// x's rows in the vector lanes (two groups of 16 past 16 rows), the quads of each row of y
// broadcast against them, sixteen rows of y at a time, the last block of columns overlapping the
// one before; the row sums of y that undo the unsigned offset of x. Results are exact int32.
//
// int8 x @ y with y row-major (its rows contiguous, a view of a wider buffer): the VNNI kernel's
// packing interleaves four rows of y in registers, 128 and then 64 columns at a time down a group
// of quads where a group of quads' rows fits half the L1, or a quad at a time across all columns
// where it does not; the last columns of a block under masks; k padded by zero rows; the column
// sums that undo the unsigned offset of x added on the way. Results are exact int32.
//
// bfloat16 x @ y.T with 6 to 8 rows of x, k up to 128: x's rows in the lanes as int8's above
// (pairs of k, no offset to undo). With 16 to 64 rows of x: where the rows fill whole vectors (a
// multiple of 16), C has fewer words than y has pairs (2m < k) and y's rows are not a multiple of 4
// KiB apart, the GEMM computes the transpose, y · x^T, reading y where it lies, and writes it back
// transposed (swapped_bf16). Checked against a double-precision reference with the float32
// accumulation bound, (k + 2) · 2^-24 · Σ|x · y|: x and y views whose rows are not k apart, columns
// that end inside a 16 x 16 transpose block, k past and at the bounds.
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

// Runs `dot()` (an int32 product of m rows and n columns) into a VMEM ref in every GEMM mode,
// assigned and then accumulated, and checks it exactly against `want`.
template <class Dot>
void expect_exact_in_every_mode(int64_t m, int64_t n, const std::vector<double>& want,
                                const std::string& what, Dot dot) {
  for (auto mode :
       {detail::GemmMode::kAuto, detail::GemmMode::kNoAmx, detail::GemmMode::kPortable}) {
    detail::set_gemm_mode(mode);
    std::vector<int32_t> ov(static_cast<size_t>(m * n), -3);
    auto o = pltpu::VmemRef<int32_t>(ov.data(), {m, n});
    o = dot();
    for (size_t e = 0; e < ov.size(); ++e) {
      ASSERT_EQ(ov[e], want[e]) << what << " assigned, element " << e;
    }
    o += dot();
    for (size_t e = 0; e < ov.size(); ++e) {
      ASSERT_EQ(ov[e], 2 * want[e]) << what << " accumulated, element " << e;
    }
  }
  detail::set_gemm_mode(detail::GemmMode::kAuto);
}

void check_int8(int64_t m, int64_t n, int64_t k, uint32_t seed) {
  const int64_t ld = n + 5;  // y a view: its rows 5 bytes further apart than its width
  auto xv = random_values<int8_t>(m * k, seed);
  auto yv = random_values<int8_t>(k * ld, seed + 1);
  auto x = vref(xv, {m, k});
  auto y = vref(yv, {k, ld}).at(pl::all, pl::ds(0, n));
  const std::vector<double> want = reference(x, y, 1, 0).value;  // exact: |sums| < 2^53
  const std::string what = "(" + std::to_string(m) + ", " + std::to_string(k) + ") x (" +
                           std::to_string(k) + ", " + std::to_string(n) + ")";
  expect_exact_in_every_mode(m, n, want, what, [&] { return jnp::dot<int32_t>(x, y); });
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

// int8 x @ y.T, y (n, k) read along k: x and y views whose rows lie further apart than k, y's
// `pitch` bytes apart.
void check_int8_transposed(int64_t m, int64_t n, int64_t k, int64_t pitch, uint32_t seed) {
  const int64_t ldx = k + 3;
  auto xv = random_values<int8_t>(m * ldx, seed);
  auto yv = random_values<int8_t>(n * pitch, seed + 1);
  auto x = vref(xv, {m, ldx}).at(pl::all, pl::ds(1, k));
  auto y = vref(yv, {n, pitch}).at(pl::all, pl::ds(pitch - k, k));
  const std::vector<double> want = reference(x, y, 1, 1).value;  // exact: |sums| < 2^53
  const std::string what = "(" + std::to_string(m) + ", " + std::to_string(k) + ") x (" +
                           std::to_string(n) + ", " + std::to_string(k) + ").T, y's rows " +
                           std::to_string(pitch) + " apart";
  expect_exact_in_every_mode(m, n, want, what, [&] {
    return lax::dot_general<int32_t>(x, y, {{{1}, {1}}});
  });
}

TEST(DotInt8, RowsInTheLanesAgainstATransposedRhs) {
  // 6 to 8 rows (8 lanes) and 12 to 16 (16 lanes; rows past m are empty lanes); columns in whole
  // blocks of 16 and with a last block that overlaps the one before it by 1 to 15 columns
  // (n = 33, 37, 40, 100); k of one byte, a partial quad, whole steps of 8 quads and quads past
  // them, up to the bound (256).
  uint32_t seed = 201;
  for (const int64_t m : {6, 7, 8, 12, 13, 16}) {
    for (const int64_t n : {32, 33, 37, 40, 100}) {
      for (const int64_t k : {1, 3, 32, 37, 130, 256}) {
        check_int8_transposed(m, n, k, k + 9, seed += 2);
      }
    }
  }
  // 30 and 32 rows: two groups of 16 lanes (the second with 14 rows), each block of y meeting both.
  for (const int64_t m : {30, 32}) {
    for (const int64_t n : {128, 137}) {
      for (const int64_t k : {5, 64, 201}) check_int8_transposed(m, n, k, k + 9, seed += 2);
    }
  }
}

TEST(DotInt8, RowsOutsideTheLanesBoundsTakeTheOtherPaths) {
  // Too few rows for the lanes (5, 9, 28), too few columns (31, and 127 with 32 rows), k past the
  // bound (257), and y's rows 4 KiB apart: the dot-product kernels or libxsmm's, with the same
  // results.
  check_int8_transposed(5, 64, 128, 140, 301);
  check_int8_transposed(9, 64, 128, 140, 303);
  check_int8_transposed(28, 128, 128, 140, 311);
  check_int8_transposed(32, 127, 128, 140, 313);
  check_int8_transposed(8, 31, 128, 140, 305);
  check_int8_transposed(16, 64, 257, 270, 307);
  check_int8_transposed(8, 64, 128, 4096, 309);
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

TEST(DotSwapped, BfloatRowsInTheLanesAgainstATransposedRhs) {
  // 6 to 8 rows of x in the lanes (src/native/gemm_skinny_lanes.cc): columns in whole blocks of
  // 16 and with a last block overlapping the one before (n = 64, 70, 100), k of one element, odd
  // (a last element paired with zero), past whole steps of 8 pairs and at the bound (128).
  uint32_t seed = 401;
  for (const int64_t m : {6, 7, 8}) {
    for (const int64_t n : {64, 70, 100}) {
      for (const int64_t k : {1, 7, 16, 37, 128}) check_bf16(m, n, k, seed += 2);
    }
  }
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
