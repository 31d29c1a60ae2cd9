// Internal: dots of a few rows of A against a B whose columns are contiguous along k (x @ y.T with
// y row-major, the decode-attention shape: a few query rows against a block of keys), computed
// as dot products, reading both operands where they lie (src/native/gemm_skinny.cc). The general
// GEMMs would first pack B, which for a few rows of A costs as much as the product.
//
// Each function computes C (m x n, row stride c_rs) = A · B, or += when `accumulate`, where
// A(i, p) = a[i * a_rs + p] and B(p, j) = bt[j * bt_rs + p], and returns true; it returns false,
// computing nothing, when this CPU (or the SIMD cap, TESSERA_SIMD_TARGET) has no kernel for it.
// Products accumulate in float32 (bfloat16: AVX512-BF16's VDPBF16PS) or int32 (int8: AVX512-VNNI,
// wrapping modulo 2^32).
#pragma once

#include <cstdint>

#include "tessera/dtype.h"

namespace tessera::detail {

/// The most rows of A for which gemm.cc takes these kernels for float32: 8, two blocks of the
/// micro-kernel's 4 rows, measured on a Sapphire Rapids class Xeon against the alternative, x @ y.T
/// computed as C^T = y · x^T (gemm.cc): (8, 4096) x (256, 4096).T 176-182 us here, 336-352 us
/// swapped; (8, 128) x (512, 128).T 10.0 against 12.3 us; with 16 rows the swapped product wins,
/// 12.1 against 18.8 us.
inline constexpr int64_t kSkinnyMaxRowsF32 = 8;

/// Whether gemm.cc takes these kernels for a bfloat16 (`bf16`) or int8 product of m rows and a
/// contraction of k, measured against the alternatives (docs/performance.md, "Skinny dots in
/// dot-product form", and "bfloat16 without AMX, on AMD's AVX512-BF16"):
/// - with AMX tiles, up to 2 rows (a Sapphire Rapids class Xeon): int8 (1, 128) x (512, 128).T
///   1.0-1.8 against 2.6-3.7 us on tiles, 2 rows 1.5-2.2 against 2.6-4.0 us; with 3 rows the
///   tiles are as fast (int8) or faster (bfloat16 5.9 against 9.7 us).
/// - without, libxsmm's kernels first pack all of B and these reduce a vector per 16 sums, so a
///   long k favours these and many rows libxsmm's faster multiply. Measured on an AMD Zen 4
///   class EPYC (a CPU without AMX whose VDPBF16PS runs at the FMA's rate), one core: int8 up to
///   4 rows, and up to 16 where k is at least 32 per row ((8, 128) x (512, 128).T 5.8 against
///   5.7 us, (16, 256) 15.9 against 15.6, (16, 512) 24.1 against 29.3); bfloat16 up to 8 rows,
///   and up to 16 where k is at least 16 per row ((8, 128) 8.0 against 10.5 us, (16, 128) 15.7
///   against 14.9, (16, 256) 22.6 against 28.5; 32 rows lose at every k). A Sapphire Rapids Xeon
///   with TESSERA_AMX=off gave int8 the same bounds.
inline bool skinny_low_precision(int64_t m, int64_t k, bool amx, bool bf16) {
  if (amx) return m <= 2;
  const int64_t few = bf16 ? 8 : 4;
  const int64_t per_row = bf16 ? 16 : 32;
  return m <= few || (m <= 16 && k >= per_row * m);
}

bool skinny_dot_f32(int64_t m, int64_t n, int64_t k, const float* a, int64_t a_rs, const float* bt,
                    int64_t bt_rs, float* c, int64_t c_rs, bool accumulate);
bool skinny_dot_bf16(int64_t m, int64_t n, int64_t k, const bfloat16* a, int64_t a_rs,
                     const bfloat16* bt, int64_t bt_rs, float* c, int64_t c_rs, bool accumulate);
bool skinny_dot_s8(int64_t m, int64_t n, int64_t k, const int8_t* a, int64_t a_rs, const int8_t* bt,
                   int64_t bt_rs, int32_t* c, int64_t c_rs, bool accumulate);

/// x @ y with y row-major, for few rows of x (src/native/gemm_skinny_nn.cc): B(p, j) =
/// b[p * b_rs + j], A's rows contiguous along k; B's rows are read where they lie, interleaved
/// in registers into the pairs (bfloat16) or quads (int8) of k that the dot-product
/// instructions take, without the packing of B that libxsmm's kernels need. gemm.cc takes them
/// where the CPU has no AMX (the tile unit is faster even with B packed), for up to 16 rows of
/// bfloat16 and 4 of int8, where libxsmm's kernel on a packed B overtakes the int8 ones from 8
/// rows. Measured on an AMD Zen 4 class EPYC, one core, against that kernel: int8 (4, 128) x (128,
/// 512) 4.2 against 4.7 us, (8, 128) 8.1 against 6.1, (8, 4096) x (4096, 256) 92 against 74, (16,
/// 128) 16.4 against 10.6; bfloat16 (16, 128) 13.3 against 14.0, (16, 4096) 177 against 195.
inline constexpr int64_t kSkinnyNnMaxRows = 16;
inline constexpr int64_t kSkinnyNnMaxRowsS8 = 4;
bool skinny_nn_bf16(int64_t m, int64_t n, int64_t k, const bfloat16* a, int64_t a_rs,
                    const bfloat16* b, int64_t b_rs, float* c, int64_t c_rs, bool accumulate);
bool skinny_nn_s8(int64_t m, int64_t n, int64_t k, const int8_t* a, int64_t a_rs, const int8_t* b,
                  int64_t b_rs, int32_t* c, int64_t c_rs, bool accumulate);

/// Whether gemm.cc takes lanes_dot_s8 (below) on a CPU without AMX for an int8 x @ y.T of m rows,
/// n columns and a contraction of k, Bt's rows bt_rs bytes apart. Its cost follows the lanes, not
/// the rows (8 lanes up to 8 rows, 16 up to 16, two groups of 16 up to 32), so it needs most of
/// them filled; the dot-product kernels and libxsmm's overtake it as k grows. Measured on an AMD
/// Zen 4 class EPYC, one core, against the path taken before (ratios of time, n = 512;
/// docs/performance.md, "int8 x @ y.T with x's rows in the lanes"): 6 to 8 rows at k 64 to 256
/// 1.09-1.57 (5 rows at k 256 0.85, 8 rows at k 512 0.92), 12 to 16 rows 0.97-1.36 (12 at k 512
/// 0.84), 9 and 10 rows 0.83-1.06; 30 and 32 rows 1.05-1.14, 24 and 28 rows 0.94-1.04, 32 rows
/// with 64 columns 0.97. At least 32 columns ((16, 128) x (16, 128).T: 0.87), 128 with two
/// groups. Rows of Bt a multiple of 4 KiB apart share the L1's sets, and the sixteen rows read at
/// once then miss (0.55-0.69): left out.
inline bool lanes_rows_s8(int64_t m, int64_t n, int64_t k, int64_t bt_rs) {
  if (k > 256 || n < 32 || bt_rs % 4096 == 0) return false;
  if (m <= 8) return m >= 6;
  if (m <= 16) return m >= 12;
  return m >= 30 && m <= 32 && n >= 128;
}

/// int8 x @ y.T (as skinny_dot_s8) with A's rows in the vector lanes and the quads of each row of
/// Bt broadcast against them (src/native/gemm_skinny_lanes.cc): no packing of Bt and no
/// horizontal sum per result. Takes 1 to 32 rows of A (in groups of 16 past 16 rows) and at least
/// 16 rows of Bt (n); false, computing nothing, otherwise or where the CPU has no AVX512-VNNI.
bool lanes_dot_s8(int64_t m, int64_t n, int64_t k, const int8_t* a, int64_t a_rs, const int8_t* bt,
                  int64_t bt_rs, int32_t* c, int64_t c_rs, bool accumulate);

/// Whether gemm.cc takes lanes_dot_bf16 (below) on a CPU without AMX, as lanes_rows_s8 for int8
/// (Bt's rows bt_rs_bytes apart). Measured the same way (docs/performance.md, "bfloat16 x @ y.T
/// in the lanes"): 6 to 8 rows at k up to 128 1.17-2.36 of the time before ((8, 32) x (512,
/// 32).T 2.32, (8, 128) x (512, 128).T 1.27-1.47; 64 columns 1.17, 32 columns 0.97); at k 192 and
/// 256 0.83-1.22, and 12 to 16 rows 0.86-1.65 with no clear bound: left to the other paths.
inline bool lanes_rows_bf16(int64_t m, int64_t n, int64_t k, int64_t bt_rs_bytes) {
  return m >= 6 && m <= 8 && n >= 64 && k <= 128 && bt_rs_bytes % 4096 != 0;
}

/// bfloat16 x @ y.T the same way (float32 sums, `vdpbf16ps` on pairs of k); needs AVX512-BF16.
bool lanes_dot_bf16(int64_t m, int64_t n, int64_t k, const bfloat16* a, int64_t a_rs,
                    const bfloat16* bt, int64_t bt_rs, float* c, int64_t c_rs, bool accumulate);

/// Whether the CPU and the SIMD cap allow these kernels: AVX-512 (F, BW, VL, DQ), and AVX512-BF16
/// / AVX512-VNNI when asked.
bool skinny_cpu_has(bool bf16, bool vnni);

}  // namespace tessera::detail
