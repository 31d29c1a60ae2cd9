// Internal: the target and the 16-vector reduction the skinny-dot kernels share
// (src/native/gemm_skinny.cc, src/native/gemm_skinny_lanes.cc).
#pragma once

#include <immintrin.h>

// The instruction sets of the skinny kernels; they run only where skinny_cpu_has (gemm_skinny.h)
// says the CPU has what each needs.
#define TESSERA_SKINNY_TARGET "avx512f,avx512bw,avx512vl,avx512dq,avx512bf16,avx512vnni"
#define TESSERA_SKINNY_INLINE [[gnu::always_inline, gnu::target(TESSERA_SKINNY_TARGET)]] inline

namespace tessera::detail::skinny_reduce {

// The shuffles below are the zero-masked forms with every lane selected (the same instructions):
// GCC 12's unmasked intrinsics pass an uninitialised vector through and warn about it.
constexpr __mmask16 kAll = 0xffff;

/// Lane-wise adds of 16 float32 or 16 int32 (wrapping) held in a __m512.
struct AddF32 {
  TESSERA_SKINNY_INLINE static __m512 add(__m512 x, __m512 y) { return _mm512_add_ps(x, y); }
};
struct AddI32 {
  TESSERA_SKINNY_INLINE static __m512 add(__m512 x, __m512 y) {
    return _mm512_castsi512_ps(_mm512_add_epi32(_mm512_castps_si512(x), _mm512_castps_si512(y)));
  }
};

/// Two vectors' 128-bit lanes combined: lanes (x.0 + x.1, x.2 + x.3, y.0 + y.1, y.2 + y.3).
template <class Add>
TESSERA_SKINNY_INLINE __m512 fold_lanes(__m512 x, __m512 y) {
  return Add::add(_mm512_maskz_shuffle_f32x4(kAll, x, y, _MM_SHUFFLE(2, 0, 2, 0)),
                  _mm512_maskz_shuffle_f32x4(kAll, x, y, _MM_SHUFFLE(3, 1, 3, 1)));
}

/// The sums of the 16 vectors v[0..15], lane e = the sum of v[e]'s lanes (15 adds instead of 16
/// horizontal reductions). `Add` is any type with a static add(__m512, __m512).
template <class Add>
TESSERA_SKINNY_INLINE __m512 reduce16(const __m512* v) {
  __m512 t[4];
#pragma GCC unroll 4
  for (int q = 0; q < 4; ++q) {
    // Pairs: per 128-bit lane (a0 + a2, b0 + b2, a1 + a3, b1 + b3), then four vectors' lane sums.
    const __m512 a = v[4 * q], b = v[4 * q + 1], c = v[4 * q + 2], d = v[4 * q + 3];
    const __m512 ab =
        Add::add(_mm512_maskz_unpacklo_ps(kAll, a, b), _mm512_maskz_unpackhi_ps(kAll, a, b));
    const __m512 cd =
        Add::add(_mm512_maskz_unpacklo_ps(kAll, c, d), _mm512_maskz_unpackhi_ps(kAll, c, d));
    t[q] = Add::add(_mm512_maskz_shuffle_ps(kAll, ab, cd, _MM_SHUFFLE(1, 0, 1, 0)),
                    _mm512_maskz_shuffle_ps(kAll, ab, cd, _MM_SHUFFLE(3, 2, 3, 2)));
  }
  return fold_lanes<Add>(fold_lanes<Add>(t[0], t[1]), fold_lanes<Add>(t[2], t[3]));
}

}  // namespace tessera::detail::skinny_reduce
