// Skinny dots x @ y with y row-major (gemm_skinny.h): a few rows of A against B's rows, which are
// read where they lie. AVX512-BF16's VDPBF16PS and AVX512-VNNI's VPDPBUSD take their right
// operand as pairs (bfloat16) or quads (int8) of consecutive k per 32-bit lane, which is what
// the AMX path packs B into once per call; here the unpacks that interleave 2 (or 4) rows of B
// run in registers as B is read, and serve every row of A. The unpacks work within 128-bit lanes,
// so the accumulators hold the columns in a fixed permuted order, put right once at the end
// (the same permutes as the AMX packing's, src/native/gemm_amx.cc).
//
// Loop order: a chunk of columns of B (32 bfloat16, 64 int8) against blocks of rows of A
// (8 bfloat16 rows, 4 int8 rows: their accumulators fill half the vector registers), all of k.
//
// These run where the CPU has no AMX: at one VDPBF16PS (64 flops) or VPDPBUSD per cycle they
// are far below the tile unit, which wins even with B packed (measured on a Sapphire Rapids
// class Xeon: (8, 128) x (128, 512) in 13.4 us here, 6.6 us on tiles).
#include <immintrin.h>

#include <algorithm>
#include <cstring>

#include "native/gemm_skinny.h"

#define TESSERA_SKINNY_NN_TARGET "avx512f,avx512bw,avx512vl,avx512dq,avx512bf16,avx512vnni"
#define TESSERA_SKINNY_NN_INLINE \
  [[gnu::always_inline, gnu::target(TESSERA_SKINNY_NN_TARGET)]] inline

namespace tessera::detail {

namespace {

constexpr __mmask16 kAll16 = 0xffff;

// A row's group of G consecutive k values at p as one 32-bit word (zeros past k).
template <class T, int G>
uint32_t group_word(const T* row, int64_t p, int64_t k) {
  uint32_t w = 0;
  if (p + G <= k) {
    std::memcpy(&w, row + p, 4);
    return w;
  }
  for (int g = 0; g < G && p + g < k; ++g) {
    uint32_t u = 0;
    std::memcpy(&u, row + p + g, sizeof(T));
    w |= u << (8 * sizeof(T) * g);
  }
  return w;
}

TESSERA_SKINNY_NN_INLINE __m512i load_cols16(const bfloat16* row, __mmask32 mask) {
  return _mm512_maskz_loadu_epi16(mask, row);
}

// C rows i0 .. i0 + R of the 32 columns at j0 (bfloat16): out[i][0..31] in column order.
template <int R>
[[gnu::target(TESSERA_SKINNY_NN_TARGET)]] void nn_bf16_block(const bfloat16* a, int64_t a_rs,
                                                             const bfloat16* b, int64_t b_rs,
                                                             int64_t k, __mmask32 cmask,
                                                             float* out) {
  __m512 lo[R], hi[R];
#pragma GCC unroll 8
  for (int i = 0; i < R; ++i) lo[i] = hi[i] = _mm512_setzero_ps();
  const __m512i zero = _mm512_setzero_si512();
  for (int64_t p = 0; p < k; p += 2) {
    const __m512i r0 = load_cols16(b + p * b_rs, cmask);
    const __m512i r1 = p + 1 < k ? load_cols16(b + (p + 1) * b_rs, cmask) : zero;
    const __m512i wl = _mm512_maskz_unpacklo_epi16(~__mmask32{0}, r0, r1);
    const __m512i wh = _mm512_maskz_unpackhi_epi16(~__mmask32{0}, r0, r1);
#pragma GCC unroll 8
    for (int i = 0; i < R; ++i) {
      const __m512i av =
          _mm512_set1_epi32(static_cast<int>(group_word<bfloat16, 2>(a + i * a_rs, p, k)));
      lo[i] =
          _mm512_dpbf16_ps(lo[i], reinterpret_cast<__m512bh>(av), reinterpret_cast<__m512bh>(wl));
      hi[i] =
          _mm512_dpbf16_ps(hi[i], reinterpret_cast<__m512bh>(av), reinterpret_cast<__m512bh>(wh));
    }
  }
  const __m512i idx0 = _mm512_set_epi64(11, 10, 3, 2, 9, 8, 1, 0);
  const __m512i idx1 = _mm512_set_epi64(15, 14, 7, 6, 13, 12, 5, 4);
#pragma GCC unroll 8
  for (int i = 0; i < R; ++i) {
    const __m512i l = _mm512_castps_si512(lo[i]), h = _mm512_castps_si512(hi[i]);
    _mm512_storeu_si512(out + i * 32, _mm512_permutex2var_epi64(l, idx0, h));
    _mm512_storeu_si512(out + i * 32 + 16, _mm512_permutex2var_epi64(l, idx1, h));
  }
}

// The 4 x 4 transpose of 128-bit lanes that puts quads q0..q3 (lane L of q[x]: columns
// 16L + 4x .. + 3) in column order, 64 columns in out[0..63].
TESSERA_SKINNY_NN_INLINE void store_quads(__m512i q0, __m512i q1, __m512i q2, __m512i q3,
                                          int32_t* out) {
  const __m512i t0 = _mm512_maskz_shuffle_i32x4(kAll16, q0, q1, 0x44);
  const __m512i t1 = _mm512_maskz_shuffle_i32x4(kAll16, q2, q3, 0x44);
  const __m512i t2 = _mm512_maskz_shuffle_i32x4(kAll16, q0, q1, 0xEE);
  const __m512i t3 = _mm512_maskz_shuffle_i32x4(kAll16, q2, q3, 0xEE);
  _mm512_storeu_si512(out, _mm512_maskz_shuffle_i32x4(kAll16, t0, t1, 0x88));
  _mm512_storeu_si512(out + 16, _mm512_maskz_shuffle_i32x4(kAll16, t0, t1, 0xDD));
  _mm512_storeu_si512(out + 32, _mm512_maskz_shuffle_i32x4(kAll16, t2, t3, 0x88));
  _mm512_storeu_si512(out + 48, _mm512_maskz_shuffle_i32x4(kAll16, t2, t3, 0xDD));
}

// C rows i0 .. i0 + R of the 64 columns at j0 (int8): out[i][0..63] = sum_p (a + 128) · b, and
// corr[0..63] = 128 · the columns' sums (see gemm_skinny.cc), both wrapping, in column order.
template <int R>
[[gnu::target(TESSERA_SKINNY_NN_TARGET)]] void nn_s8_block(const int8_t* a, int64_t a_rs,
                                                           const int8_t* b, int64_t b_rs, int64_t k,
                                                           __mmask64 cmask, int32_t* out,
                                                           int32_t* corr) {
  __m512i acc[R][4], sums[4];
  for (auto& s : sums) s = _mm512_setzero_si512();
#pragma GCC unroll 4
  for (int i = 0; i < R; ++i) {
    for (auto& x : acc[i]) x = _mm512_setzero_si512();
  }
  const __m512i ones = _mm512_set1_epi8(1);
  const __mmask64 all8 = ~__mmask64{0};
  const __mmask32 all16 = ~__mmask32{0};
  for (int64_t p = 0; p < k; p += 4) {
    __m512i x[4];
    for (int g = 0; g < 4; ++g) {
      x[g] =
          p + g < k ? _mm512_maskz_loadu_epi8(cmask, b + (p + g) * b_rs) : _mm512_setzero_si512();
    }
    const __m512i u0 = _mm512_maskz_unpacklo_epi8(all8, x[0], x[1]);
    const __m512i u1 = _mm512_maskz_unpackhi_epi8(all8, x[0], x[1]);
    const __m512i u2 = _mm512_maskz_unpacklo_epi8(all8, x[2], x[3]);
    const __m512i u3 = _mm512_maskz_unpackhi_epi8(all8, x[2], x[3]);
    const __m512i q[4] = {
        _mm512_maskz_unpacklo_epi16(all16, u0, u2), _mm512_maskz_unpackhi_epi16(all16, u0, u2),
        _mm512_maskz_unpacklo_epi16(all16, u1, u3), _mm512_maskz_unpackhi_epi16(all16, u1, u3)};
    for (int c = 0; c < 4; ++c) sums[c] = _mm512_dpbusd_epi32(sums[c], ones, q[c]);
#pragma GCC unroll 4
    for (int i = 0; i < R; ++i) {
      // a + 128 as unsigned bytes: XOR 0x80 on each of the quad's bytes (padding too: it meets
      // B's zero rows).
      const uint32_t w = group_word<int8_t, 4>(a + i * a_rs, p, k) ^ 0x80808080u;
      const __m512i av = _mm512_set1_epi32(static_cast<int>(w));
      for (int c = 0; c < 4; ++c) acc[i][c] = _mm512_dpbusd_epi32(acc[i][c], av, q[c]);
    }
  }
  for (int c = 0; c < 4; ++c) sums[c] = _mm512_maskz_slli_epi32(kAll16, sums[c], 7);
  store_quads(sums[0], sums[1], sums[2], sums[3], corr);
#pragma GCC unroll 4
  for (int i = 0; i < R; ++i) store_quads(acc[i][0], acc[i][1], acc[i][2], acc[i][3], out + i * 64);
}

template <class C>
void store_rows(const C* out, int64_t width, const C* corr, int rows, int64_t cols, C* c,
                int64_t c_rs, bool accumulate) {
  for (int i = 0; i < rows; ++i) {
    C* crow = c + i * c_rs;
    for (int64_t j = 0; j < cols; ++j) {
      if constexpr (std::is_same_v<C, int32_t>) {
        // Unsigned arithmetic: wraps modulo 2^32, defined in C++.
        uint32_t v = static_cast<uint32_t>(out[i * width + j]) - static_cast<uint32_t>(corr[j]);
        if (accumulate) v += static_cast<uint32_t>(crow[j]);
        crow[j] = static_cast<int32_t>(v);
      } else {
        crow[j] = accumulate ? crow[j] + out[i * width + j] : out[i * width + j];
      }
    }
  }
}

void nn_bf16_rows(int rows, const bfloat16* a, int64_t a_rs, const bfloat16* b, int64_t b_rs,
                  int64_t k, __mmask32 cmask, float* out) {
  switch (rows) {
    case 1:
      return nn_bf16_block<1>(a, a_rs, b, b_rs, k, cmask, out);
    case 2:
      return nn_bf16_block<2>(a, a_rs, b, b_rs, k, cmask, out);
    case 3:
      return nn_bf16_block<3>(a, a_rs, b, b_rs, k, cmask, out);
    case 4:
      return nn_bf16_block<4>(a, a_rs, b, b_rs, k, cmask, out);
    case 5:
      return nn_bf16_block<5>(a, a_rs, b, b_rs, k, cmask, out);
    case 6:
      return nn_bf16_block<6>(a, a_rs, b, b_rs, k, cmask, out);
    case 7:
      return nn_bf16_block<7>(a, a_rs, b, b_rs, k, cmask, out);
    default:
      return nn_bf16_block<8>(a, a_rs, b, b_rs, k, cmask, out);
  }
}

void nn_s8_rows(int rows, const int8_t* a, int64_t a_rs, const int8_t* b, int64_t b_rs, int64_t k,
                __mmask64 cmask, int32_t* out, int32_t* corr) {
  switch (rows) {
    case 1:
      return nn_s8_block<1>(a, a_rs, b, b_rs, k, cmask, out, corr);
    case 2:
      return nn_s8_block<2>(a, a_rs, b, b_rs, k, cmask, out, corr);
    case 3:
      return nn_s8_block<3>(a, a_rs, b, b_rs, k, cmask, out, corr);
    default:
      return nn_s8_block<4>(a, a_rs, b, b_rs, k, cmask, out, corr);
  }
}

}  // namespace

bool skinny_nn_bf16(int64_t m, int64_t n, int64_t k, const bfloat16* a, int64_t a_rs,
                    const bfloat16* b, int64_t b_rs, float* c, int64_t c_rs, bool accumulate) {
  if (!skinny_cpu_has(true, false)) return false;
  for (int64_t j0 = 0; j0 < n; j0 += 32) {
    const int64_t cols = std::min<int64_t>(32, n - j0);
    const auto cmask = static_cast<__mmask32>(cols >= 32 ? ~0u : (1u << cols) - 1u);
    for (int64_t i0 = 0; i0 < m; i0 += 8) {
      const int rows = static_cast<int>(std::min<int64_t>(8, m - i0));
      alignas(64) float out[8 * 32];
      nn_bf16_rows(rows, a + i0 * a_rs, a_rs, b + j0, b_rs, k, cmask, out);
      store_rows<float>(out, 32, nullptr, rows, cols, c + i0 * c_rs + j0, c_rs, accumulate);
    }
  }
  return true;
}

bool skinny_nn_s8(int64_t m, int64_t n, int64_t k, const int8_t* a, int64_t a_rs, const int8_t* b,
                  int64_t b_rs, int32_t* c, int64_t c_rs, bool accumulate) {
  if (!skinny_cpu_has(false, true)) return false;
  for (int64_t j0 = 0; j0 < n; j0 += 64) {
    const int64_t cols = std::min<int64_t>(64, n - j0);
    const __mmask64 cmask = cols >= 64 ? ~__mmask64{0} : (__mmask64{1} << cols) - 1u;
    for (int64_t i0 = 0; i0 < m; i0 += 4) {
      const int rows = static_cast<int>(std::min<int64_t>(4, m - i0));
      alignas(64) int32_t out[4 * 64];
      alignas(64) int32_t corr[64];
      nn_s8_rows(rows, a + i0 * a_rs, a_rs, b + j0, b_rs, k, cmask, out, corr);
      store_rows<int32_t>(out, 64, corr, rows, cols, c + i0 * c_rs + j0, c_rs, accumulate);
    }
  }
  return true;
}

}  // namespace tessera::detail
