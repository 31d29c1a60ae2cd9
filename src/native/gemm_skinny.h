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

/// The most rows of A for which gemm.cc takes these kernels: one block of the micro-kernel's rows,
/// so that B is read once and A's rows stay in registers' reach. With more rows the swapped
/// products of gemm.cc / gemm_amx.cc (C^T = y · x^T) do better: they need no reduction across
/// vector lanes.
inline constexpr int64_t kSkinnyMaxRows = 4;

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
/// where the CPU has no AMX (the tile unit is faster even with B packed).
inline constexpr int64_t kSkinnyNnMaxRows = 16;
bool skinny_nn_bf16(int64_t m, int64_t n, int64_t k, const bfloat16* a, int64_t a_rs,
                    const bfloat16* b, int64_t b_rs, float* c, int64_t c_rs, bool accumulate);
bool skinny_nn_s8(int64_t m, int64_t n, int64_t k, const int8_t* a, int64_t a_rs, const int8_t* b,
                  int64_t b_rs, int32_t* c, int64_t c_rs, bool accumulate);

/// Whether the CPU and the SIMD cap allow these kernels: AVX-512 (F, BW, VL, DQ), and AVX512-BF16
/// / AVX512-VNNI when asked.
bool skinny_cpu_has(bool bf16, bool vnni);

}  // namespace tessera::detail
