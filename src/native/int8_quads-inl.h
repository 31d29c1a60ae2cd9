// Internal: int8 columns of four rows in "quads" (the four bytes of rows p .. p + 3 of one
// column in one 32-bit word), the layout that AMX's TDPBSSD and AVX512-VNNI's vpdpbusd read:
// used by the AMX tile packing (gemm_amx.cc) and by the VNNI kernels' packing (gemm_int8.cc).
#pragma once

#include <immintrin.h>

#include <cstdint>

namespace tessera::detail {

// Words of 64 int8 columns of rows p .. p + 3 (x0 .. x3), in column order, into w[0 .. 3] (16
// columns each): byte then 16-bit unpacks build the quads of columns 16L + 4x .. + 3 in lane L of
// q[x]; a 4 x 4 transpose of 128-bit lanes puts them in order.
[[gnu::always_inline, gnu::target("avx512f,avx512bw,avx512vl")]] inline void words64_s8(
    __m512i x0, __m512i x1, __m512i x2, __m512i x3, __m512i* w) {
  const __mmask64 all8 = ~__mmask64{0};
  const __mmask32 all16 = ~__mmask32{0};
  const __m512i a = _mm512_maskz_unpacklo_epi8(all8, x0, x1),
                b = _mm512_maskz_unpackhi_epi8(all8, x0, x1);
  const __m512i c = _mm512_maskz_unpacklo_epi8(all8, x2, x3),
                e = _mm512_maskz_unpackhi_epi8(all8, x2, x3);
  const __m512i q0 = _mm512_maskz_unpacklo_epi16(all16, a, c),
                q1 = _mm512_maskz_unpackhi_epi16(all16, a, c);
  const __m512i q2 = _mm512_maskz_unpacklo_epi16(all16, b, e),
                q3 = _mm512_maskz_unpackhi_epi16(all16, b, e);
  const __mmask16 all = 0xffff;
  const __m512i t0 = _mm512_maskz_shuffle_i32x4(all, q0, q1, 0x44);
  const __m512i t1 = _mm512_maskz_shuffle_i32x4(all, q2, q3, 0x44);
  const __m512i t2 = _mm512_maskz_shuffle_i32x4(all, q0, q1, 0xEE);
  const __m512i t3 = _mm512_maskz_shuffle_i32x4(all, q2, q3, 0xEE);
  w[0] = _mm512_maskz_shuffle_i32x4(all, t0, t1, 0x88);
  w[1] = _mm512_maskz_shuffle_i32x4(all, t0, t1, 0xDD);
  w[2] = _mm512_maskz_shuffle_i32x4(all, t2, t3, 0x88);
  w[3] = _mm512_maskz_shuffle_i32x4(all, t2, t3, 0xDD);
}

// The same words of rows r[0 .. 3] (64 bytes each), stored: w[x] to d[x].
[[gnu::always_inline, gnu::target("avx512f,avx512bw,avx512vl")]] inline void words64_s8(
    const int8_t* const* r, uint32_t* const* d) {
  __m512i w[4];
  words64_s8(_mm512_loadu_si512(r[0]), _mm512_loadu_si512(r[1]), _mm512_loadu_si512(r[2]),
             _mm512_loadu_si512(r[3]), w);
  for (int x = 0; x < 4; ++x) _mm512_storeu_si512(d[x], w[x]);
}

}  // namespace tessera::detail
