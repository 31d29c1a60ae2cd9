// Internal: the tile GEMMs behind jnp::dot (src/native/gemm.cc).
//
// Every function computes C (m x n) = A (m x k) · B (k x n), or adds it to C when `accumulate`
// is true, on the calling thread. Matrices are strided views: element (i, j) of A is
// a[i * a_rs + j * a_cs] (strides in elements, any non-negative values). C must have a unit
// column stride (c[i * c_rs + j]). Products accumulate in float32 (int32 for int8).
#pragma once

#include <cstdint>

#include "tessera/dtype.h"

namespace tessera::detail {

/// A strided 2-D operand: element (i, j) is data[i * rs + j * cs].
template <class T>
struct MatrixView {
  const T* data;
  int64_t rs;
  int64_t cs;
};

/// float32 x float32 -> float32 (libxsmm's JIT kernel, or a portable loop).
void gemm_f32(int64_t m, int64_t n, int64_t k, MatrixView<float> a, MatrixView<float> b, float* c,
              int64_t c_rs, bool accumulate);
/// bfloat16 x bfloat16 -> float32: libxsmm's AVX512-BF16 kernel where the CPU has it, else the
/// operands are widened to float32 (bfloat16 products are exact in float32) and gemm_f32 runs.
void gemm_bf16(int64_t m, int64_t n, int64_t k, MatrixView<bfloat16> a, MatrixView<bfloat16> b,
               float* c, int64_t c_rs, bool accumulate);
/// int8 x int8 -> int32 (a portable loop; products and sums in int32, wrapping).
void gemm_s8(int64_t m, int64_t n, int64_t k, MatrixView<int8_t> a, MatrixView<int8_t> b,
             int32_t* c, int64_t c_rs, bool accumulate);

/// Which implementation the GEMMs use. kAuto picks the best the CPU runs (AMX tiles, else
/// libxsmm with AVX512-BF16, else libxsmm on what the CPU has); kNoAmx skips AMX (the path of a
/// CPU without it); kPortable forces the portable paths. Tests use them to check every path.
enum class GemmMode { kAuto, kNoAmx, kPortable };
void set_gemm_mode(GemmMode mode) noexcept;
GemmMode gemm_mode() noexcept;
/// True when bfloat16 products run on AVX512-BF16 (libxsmm's CPX or later target) now.
bool gemm_bf16_native() noexcept;
/// Whether the SIMD target cap (TESSERA_SIMD_TARGET) allows AVX-512 kernels (it does unless it
/// names a lesser target).
bool gemm_avx512_allowed() noexcept;
/// True when bfloat16 / int8 products run on AMX tiles now (gemm_amx.h).
bool gemm_amx_bf16() noexcept;
bool gemm_amx_int8() noexcept;
/// The libxsmm target in use ("cpx", "hsw", ...), or "none".
const char* gemm_target() noexcept;

/// The L1 data cache per core that the CPU reports (32 KiB when it reports none): what the
/// GEMMs size their passes and panels by.
int64_t gemm_l1d_bytes() noexcept;
/// The L2 per core that the CPU reports (1 MiB when it reports none).
int64_t gemm_l2_bytes() noexcept;

}  // namespace tessera::detail
