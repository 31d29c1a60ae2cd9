// AVX512-BF16's rounding of float32 to bfloat16 (vcvtneps2bf16), for the native VPU's conversions
// (vector_convert-inl.h) and per-node rounding (vector_lanes-inl.h) on CPUs that have it; the
// callers check cpu_has_avx512bf16() and keep their portable rounding for the rest.
//
// The instruction rounds to nearest even and quiets NaNs bit for bit as the portable rounding
// does (checked over every 4099th 16-element run of the 2^32 float bit patterns and every pattern
// near the largest finite floats), but it flushes subnormal inputs to zero, which the exact
// rounding keeps: a vector that holds a subnormal is rounded by integer arithmetic instead.
// Where the rows are in L1 or L2 it converts at about twice the portable rounding's rate
// (docs/performance.md, "bfloat16: the columns split among the cores").
#pragma once

#include <immintrin.h>

#include <cstdint>

#define TESSERA_BF16_AVX512_TARGET "avx512f,avx512bw,avx512vl,avx512dq,avx512bf16"

namespace tessera::detail {

inline bool cpu_has_avx512bf16() noexcept {
  static const bool b = __builtin_cpu_supports("avx512bf16");
  return b;
}

// 16 floats rounded to bfloat16 bits.
[[gnu::always_inline, gnu::target(TESSERA_BF16_AVX512_TARGET)]] inline __m256i bf16_bits(__m512 v) {
  if (_mm512_fpclass_ps_mask(v, 0x20) == 0) [[likely]] {  // 0x20: subnormal
    return reinterpret_cast<__m256i>(_mm512_cvtneps_pbh(v));
  }
  // The zero-masked forms with every lane selected: GCC 12's unmasked ones warn.
  const __m512i u = _mm512_castps_si512(v);
  const __m512i lsb =
      _mm512_and_si512(_mm512_maskz_srli_epi32(0xffff, u, 16), _mm512_set1_epi32(1));
  __m512i w = _mm512_add_epi32(u, _mm512_add_epi32(_mm512_set1_epi32(0x7fff), lsb));
  w = _mm512_mask_or_epi32(w, _mm512_fpclass_ps_mask(v, 0x81), u,  // 0x81: NaNs
                           _mm512_set1_epi32(0x00400000));
  return _mm512_maskz_cvtepi32_epi16(0xffff, _mm512_maskz_srli_epi32(0xffff, w, 16));
}

// d[0..] = s[0..] as bfloat16 bits, 16 at a time up to the last whole 16 of `len`, streaming
// stores where `stream` and d is aligned for them; returns the elements done.
[[gnu::target(TESSERA_BF16_AVX512_TARGET)]] inline int64_t f32_to_bf16_avx512bf16(const float* s,
                                                                                  uint16_t* d,
                                                                                  int64_t len,
                                                                                  bool stream) {
  const bool nt = stream && reinterpret_cast<uintptr_t>(d) % 32 == 0;
  int64_t j = 0;
  for (; j + 16 <= len; j += 16) {
    const __m256i r = bf16_bits(_mm512_loadu_ps(s + j));
    if (nt) {
      _mm256_stream_si256(reinterpret_cast<__m256i*>(d + j), r);
    } else {
      _mm256_storeu_si256(reinterpret_cast<__m256i*>(d + j), r);
    }
  }
  return j;
}

// x[0..] rounded to bfloat16 in place (float32 values with the low 16 bits zero), 16 at a time up
// to the last whole 16 of `len`; returns the elements done.
[[gnu::target(TESSERA_BF16_AVX512_TARGET)]] inline int64_t round_bf16_avx512bf16(float* x,
                                                                                 int64_t len) {
  int64_t j = 0;
  for (; j + 16 <= len; j += 16) {
    const __m512i w = _mm512_maskz_cvtepu16_epi32(0xffff, bf16_bits(_mm512_loadu_ps(x + j)));
    _mm512_storeu_si512(x + j, _mm512_maskz_slli_epi32(0xffff, w, 16));
  }
  return j;
}

}  // namespace tessera::detail
