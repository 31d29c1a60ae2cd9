// Internal: a 16 x 16 block of 32-bit elements transposed in AVX-512 registers (64 shuffles), for
// writing a transposed product into C (gemm_transpose.cc) and packing int8 quads (gemm_int8.cc).
#pragma once

#include <immintrin.h>

#include <cstdint>

namespace tessera::detail {

// The instructions these need (and what a caller's own target attribute must include).
#define TESSERA_TRANSPOSE16_TARGET "avx512f,avx512bw,avx512vl,avx512dq"

// The zero-masked shuffles with every lane selected (the same instructions): GCC 12's unmasked
// intrinsics pass an uninitialised vector through and warn about it.
inline constexpr __mmask16 kAll16Lanes = 0xffff;

// r[0..15] (rows of a 16 x 16 block) become its columns: r[c][i] = old r[i][c].
[[gnu::always_inline, gnu::target(TESSERA_TRANSPOSE16_TARGET)]] inline void transpose16(__m512* r) {
  __m512 t[16];
#pragma GCC unroll 8
  for (int i = 0; i < 8; ++i) {
    t[2 * i] = _mm512_maskz_unpacklo_ps(kAll16Lanes, r[2 * i], r[2 * i + 1]);
    t[2 * i + 1] = _mm512_maskz_unpackhi_ps(kAll16Lanes, r[2 * i], r[2 * i + 1]);
  }
  // u[4g + q], 128-bit lane L: column 4L + q of rows 4g .. 4g + 3.
  __m512 u[16];
#pragma GCC unroll 4
  for (int g = 0; g < 4; ++g) {
    u[4 * g + 0] = _mm512_maskz_shuffle_ps(kAll16Lanes, t[4 * g], t[4 * g + 2], 0x44);
    u[4 * g + 1] = _mm512_maskz_shuffle_ps(kAll16Lanes, t[4 * g], t[4 * g + 2], 0xEE);
    u[4 * g + 2] = _mm512_maskz_shuffle_ps(kAll16Lanes, t[4 * g + 1], t[4 * g + 3], 0x44);
    u[4 * g + 3] = _mm512_maskz_shuffle_ps(kAll16Lanes, t[4 * g + 1], t[4 * g + 3], 0xEE);
  }
#pragma GCC unroll 4
  for (int q = 0; q < 4; ++q) {
    const __m512 v0 = _mm512_maskz_shuffle_f32x4(kAll16Lanes, u[q], u[4 + q], 0x88);
    const __m512 w0 = _mm512_maskz_shuffle_f32x4(kAll16Lanes, u[q], u[4 + q], 0xDD);
    const __m512 v1 = _mm512_maskz_shuffle_f32x4(kAll16Lanes, u[8 + q], u[12 + q], 0x88);
    const __m512 w1 = _mm512_maskz_shuffle_f32x4(kAll16Lanes, u[8 + q], u[12 + q], 0xDD);
    r[q] = _mm512_maskz_shuffle_f32x4(kAll16Lanes, v0, v1, 0x88);
    r[4 + q] = _mm512_maskz_shuffle_f32x4(kAll16Lanes, w0, w1, 0x88);
    r[8 + q] = _mm512_maskz_shuffle_f32x4(kAll16Lanes, v0, v1, 0xDD);
    r[12 + q] = _mm512_maskz_shuffle_f32x4(kAll16Lanes, w0, w1, 0xDD);
  }
}

// The mask of the first `count` of 16 lanes (all of them from 16 on).
inline __mmask16 lanes16(int64_t count) {
  return static_cast<__mmask16>(count >= 16 ? 0xffffu : (1u << count) - 1u);
}

// r[c] = column c of the 16 x 16 block of 32-bit elements at t (rows t_rs elements apart): its
// first `rows` rows and the columns under `cols`, zero elsewhere.
template <class T>
[[gnu::always_inline, gnu::target(TESSERA_TRANSPOSE16_TARGET)]] inline void load_transposed16(
    __m512* r, const T* t, int64_t t_rs, int64_t rows, __mmask16 cols) {
  static_assert(sizeof(T) == 4, "32-bit elements");
#pragma GCC unroll 16
  for (int j = 0; j < 16; ++j) {
    r[j] = j < rows ? _mm512_maskz_loadu_ps(cols, t + j * t_rs) : _mm512_setzero_ps();
  }
  transpose16(r);
}

}  // namespace tessera::detail
