// int8 x @ y with y row-major (its rows contiguous, possibly a view of a wider buffer): without
// AMX the VNNI kernel's packing (src/native/gemm_int8.cc) interleaves four rows of y in
// registers, 128 and then 64 columns at a time down a group of quads where a group of quads'
// rows fits half the L1, or a quad at a time across all columns where it does not; the last
// columns of a block under masks; k padded by zero rows; the column sums that undo the unsigned
// offset of x added on the way. Results are exact int32; every GEMM mode, assigned and
// accumulated. Everything here runs on the calling thread (TESSERA_ONE_THREAD_TESTS).
#include <gtest/gtest.h>

#include <cstdint>
#include <random>
#include <string>
#include <vector>

#include "native/gemm.h"
#include "support/host_reference.h"
#include "tessera/tessera.h"

namespace {
using namespace tessera;

std::vector<int8_t> random_bytes(int64_t n, uint32_t seed) {
  std::mt19937 rng(seed);
  std::uniform_int_distribution<int> d(-128, 127);
  std::vector<int8_t> v(static_cast<size_t>(n));
  for (auto& x : v) x = static_cast<int8_t>(d(rng));
  return v;
}

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

void check(int64_t m, int64_t n, int64_t k, uint32_t seed) {
  const int64_t ld = n + 5;  // y a view: its rows 5 bytes further apart than its width
  auto xv = random_bytes(m * k, seed);
  auto yv = random_bytes(k * ld, seed + 1);
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
      for (const int64_t k : {3, 250, 701}) check(m, n, k, seed += 2);
    }
  }
}

TEST(DotInt8, RowMajorRhsTooWideForGroupsOfQuads) {
  // A row of y past a sixteenth of any current x86 core's L1 (4,100 bytes): packed a quad at a
  // time across all columns, the last 4 under masks, the column sums in a second pass.
  check(8, 4100, 250, 901);
  check(6, 4160, 9, 903);
}

}  // namespace
