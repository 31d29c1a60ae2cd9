// Skinny dots in dot-product form (gemm_skinny.h): C(i, j) = sum_p A(i, p) · Bt(j, p), both
// operands read along k where they lie, with AVX-512 (float32 FMA, bfloat16 VDPBF16PS, int8
// VPDPBUSD).
//
// The micro-kernel takes up to 4 rows of A and 4 rows of Bt (columns of B) and keeps the 16
// products' partial sums in 16 vector accumulators (one lane per k position modulo the vector
// width), then reduces the 16 vectors to one vector of 16 sums with a shuffle tree (15 adds
// instead of 16 horizontal reductions). Loop order: a block of 4 rows of Bt is loaded from memory
// once and meets every row of A while it is in L1; k is split into passes whose rows of A fit in
// half the L1 data cache the CPU reports, so that A stays in L1 across the whole of B.
//
// int8: VPDPBUSD multiplies unsigned by signed bytes. With a' = a + 128 (a XOR 0x80, unsigned),
// sum a·b = sum a'·b - 128 · sum b; the column sums of B come from VPDPBUSD against bytes of 1.
// All of it wraps modulo 2^32, which is the int32 result a TPU gives.
#include "native/gemm_skinny.h"

#include <immintrin.h>

#include <algorithm>
#include <cstring>

#include "native/gemm.h"

#define TESSERA_SKINNY_TARGET "avx512f,avx512bw,avx512vl,avx512dq,avx512bf16,avx512vnni"
#define TESSERA_SKINNY_INLINE [[gnu::always_inline, gnu::target(TESSERA_SKINNY_TARGET)]] inline

namespace tessera::detail {

namespace {

// The operations of one dtype: T the elements, V a vector of them, Acc a vector of 16 sums.
struct F32 {
  using T = float;
  using C = float;
  using V = __m512;
  using Acc = __m512;
  static constexpr int64_t kStep = 16;  // k per vector
  TESSERA_SKINNY_INLINE static V load(const T* p) { return _mm512_loadu_ps(p); }
  TESSERA_SKINNY_INLINE static V load_tail(const T* p, int64_t count) {
    return _mm512_maskz_loadu_ps(static_cast<__mmask16>((1u << count) - 1u), p);
  }
  TESSERA_SKINNY_INLINE static V prepare_a(V a) { return a; }
  TESSERA_SKINNY_INLINE static Acc zero() { return _mm512_setzero_ps(); }
  TESSERA_SKINNY_INLINE static Acc dot(Acc acc, V a, V b) { return _mm512_fmadd_ps(a, b, acc); }
  TESSERA_SKINNY_INLINE static __m512 add(__m512 x, __m512 y) { return _mm512_add_ps(x, y); }
};

struct BF16 {
  using T = bfloat16;
  using C = float;
  using V = __m512i;
  using Acc = __m512;
  static constexpr int64_t kStep = 32;
  TESSERA_SKINNY_INLINE static V load(const T* p) { return _mm512_loadu_si512(p); }
  TESSERA_SKINNY_INLINE static V load_tail(const T* p, int64_t count) {
    return _mm512_maskz_loadu_epi16(static_cast<__mmask32>((uint64_t{1} << count) - 1u), p);
  }
  TESSERA_SKINNY_INLINE static V prepare_a(V a) { return a; }
  TESSERA_SKINNY_INLINE static Acc zero() { return _mm512_setzero_ps(); }
  TESSERA_SKINNY_INLINE static Acc dot(Acc acc, V a, V b) {
    return _mm512_dpbf16_ps(acc, reinterpret_cast<__m512bh>(a), reinterpret_cast<__m512bh>(b));
  }
  TESSERA_SKINNY_INLINE static __m512 add(__m512 x, __m512 y) { return _mm512_add_ps(x, y); }
};

struct S8 {
  using T = int8_t;
  using C = int32_t;
  using V = __m512i;
  using Acc = __m512i;
  static constexpr int64_t kStep = 64;
  TESSERA_SKINNY_INLINE static V load(const T* p) { return _mm512_loadu_si512(p); }
  TESSERA_SKINNY_INLINE static V load_tail(const T* p, int64_t count) {
    const __mmask64 mask = count >= 64 ? ~__mmask64{0} : (__mmask64{1} << count) - 1u;
    return _mm512_maskz_loadu_epi8(mask, p);
  }
  // a + 128 as an unsigned byte (padding lanes become 128 too, against B's zero padding).
  TESSERA_SKINNY_INLINE static V prepare_a(V a) {
    return _mm512_xor_si512(a, _mm512_set1_epi8(static_cast<char>(0x80)));
  }
  TESSERA_SKINNY_INLINE static Acc zero() { return _mm512_setzero_si512(); }
  TESSERA_SKINNY_INLINE static Acc dot(Acc acc, V a, V b) { return _mm512_dpbusd_epi32(acc, a, b); }
  TESSERA_SKINNY_INLINE static __m512 add(__m512 x, __m512 y) {
    return _mm512_castsi512_ps(_mm512_add_epi32(_mm512_castps_si512(x), _mm512_castps_si512(y)));
  }
};

TESSERA_SKINNY_INLINE __m512 as_ps(__m512 v) { return v; }
TESSERA_SKINNY_INLINE __m512 as_ps(__m512i v) { return _mm512_castsi512_ps(v); }

// The shuffles below are the zero-masked forms with every lane selected (the same instructions):
// GCC 12's unmasked intrinsics pass an uninitialised vector through and warn about it.
constexpr __mmask16 kAll = 0xffff;

// Two vectors' 128-bit lanes combined: lanes (x.0 + x.1, x.2 + x.3, y.0 + y.1, y.2 + y.3).
template <class Ops>
TESSERA_SKINNY_INLINE __m512 fold_lanes(__m512 x, __m512 y) {
  return Ops::add(_mm512_maskz_shuffle_f32x4(kAll, x, y, _MM_SHUFFLE(2, 0, 2, 0)),
                  _mm512_maskz_shuffle_f32x4(kAll, x, y, _MM_SHUFFLE(3, 1, 3, 1)));
}

// The sums of the 16 vectors v[0..15], lane e = sum of v[e]'s lanes.
template <class Ops>
TESSERA_SKINNY_INLINE __m512 reduce16(const __m512* v) {
  __m512 t[4];
#pragma GCC unroll 4
  for (int q = 0; q < 4; ++q) {
    // Pairs: per 128-bit lane (a0 + a2, b0 + b2, a1 + a3, b1 + b3), then four vectors' lane sums.
    const __m512 a = v[4 * q], b = v[4 * q + 1], c = v[4 * q + 2], d = v[4 * q + 3];
    const __m512 ab =
        Ops::add(_mm512_maskz_unpacklo_ps(kAll, a, b), _mm512_maskz_unpackhi_ps(kAll, a, b));
    const __m512 cd =
        Ops::add(_mm512_maskz_unpacklo_ps(kAll, c, d), _mm512_maskz_unpackhi_ps(kAll, c, d));
    t[q] = Ops::add(_mm512_maskz_shuffle_ps(kAll, ab, cd, _MM_SHUFFLE(1, 0, 1, 0)),
                    _mm512_maskz_shuffle_ps(kAll, ab, cd, _MM_SHUFFLE(3, 2, 3, 2)));
  }
  return fold_lanes<Ops>(fold_lanes<Ops>(t[0], t[1]), fold_lanes<Ops>(t[2], t[3]));
}

template <class Ops, bool kTail>
TESSERA_SKINNY_INLINE typename Ops::V load_at(const typename Ops::T* x, int64_t left) {
  if constexpr (kTail) {
    return Ops::load_tail(x, left);
  } else {
    return Ops::load(x);
  }
}

// One vector step of k at p (`left` elements when kTail) for MR rows of A and 4 rows of Bt.
template <class Ops, int MR, bool kTail>
TESSERA_SKINNY_INLINE void micro_step(typename Ops::Acc* acc, const typename Ops::T* a,
                                      int64_t a_rs, const typename Ops::T* const* b, int64_t p,
                                      int64_t left) {
  using V = typename Ops::V;
  const V b0 = load_at<Ops, kTail>(b[0] + p, left), b1 = load_at<Ops, kTail>(b[1] + p, left);
  const V b2 = load_at<Ops, kTail>(b[2] + p, left), b3 = load_at<Ops, kTail>(b[3] + p, left);
  // Unrolled, so that the accumulators live in registers.
#pragma GCC unroll 4
  for (int i = 0; i < MR; ++i) {
    const V av = Ops::prepare_a(load_at<Ops, kTail>(a + i * a_rs + p, left));
    acc[i * 4 + 0] = Ops::dot(acc[i * 4 + 0], av, b0);
    acc[i * 4 + 1] = Ops::dot(acc[i * 4 + 1], av, b1);
    acc[i * 4 + 2] = Ops::dot(acc[i * 4 + 2], av, b2);
    acc[i * 4 + 3] = Ops::dot(acc[i * 4 + 3], av, b3);
  }
}

// out[i * 4 + j] = sum_p A(i, p) · B(j, p) for i < MR, j < 4, p < k (the int8 sums still carry
// the +128 of A: see the file comment).
template <class Ops, int MR>
[[gnu::target(TESSERA_SKINNY_TARGET)]] void micro(const typename Ops::T* a, int64_t a_rs,
                                                  const typename Ops::T* const* b, int64_t k,
                                                  typename Ops::C* out) {
  typename Ops::Acc acc[16];
#pragma GCC unroll 16
  for (int e = 0; e < 16; ++e) acc[e] = Ops::zero();
  int64_t p = 0;
  for (; p + Ops::kStep <= k; p += Ops::kStep) micro_step<Ops, MR, false>(acc, a, a_rs, b, p, 0);
  if (p < k) micro_step<Ops, MR, true>(acc, a, a_rs, b, p, k - p);
  __m512 v[16];
#pragma GCC unroll 16
  for (int e = 0; e < 16; ++e) v[e] = as_ps(acc[e]);
  _mm512_storeu_ps(reinterpret_cast<float*>(out), reduce16<Ops>(v));
}

// 128 · (the sum over p < k of each of the 4 rows of Bt), the int8 correction, modulo 2^32.
[[gnu::target(TESSERA_SKINNY_TARGET)]] void column_sums_s8(const int8_t* const* b, int64_t k,
                                                           uint32_t* out) {
  const __m512i ones = _mm512_set1_epi8(1);
  for (int j = 0; j < 4; ++j) {
    __m512i acc = _mm512_setzero_si512();
    int64_t p = 0;
    for (; p + 64 <= k; p += 64) acc = _mm512_dpbusd_epi32(acc, ones, S8::load(b[j] + p));
    if (p < k) acc = _mm512_dpbusd_epi32(acc, ones, S8::load_tail(b[j] + p, k - p));
    alignas(64) uint32_t lanes[16];
    _mm512_store_si512(lanes, acc);
    uint32_t sum = 0;
    for (const uint32_t x : lanes) sum += x;
    out[j] = sum * 128u;
  }
}

// k per pass: the pass's rows of A and of one block of Bt fill at most half the L1 data cache the
// CPU reports (32 KiB when it reports nothing), in whole vectors.
template <class Ops>
int64_t pass_length(int64_t m, int64_t k) {
  const int64_t l1d = gemm_l1d_bytes();
  const int64_t fit = l1d / 2 / ((m + 4) * static_cast<int64_t>(sizeof(typename Ops::T)));
  const int64_t len = std::max<int64_t>(Ops::kStep, fit / Ops::kStep * Ops::kStep);
  const int64_t passes = (k + len - 1) / len;
  // Even passes, in whole vectors.
  return std::min(len, ((k + passes - 1) / passes + Ops::kStep - 1) / Ops::kStep * Ops::kStep);
}

template <class Ops>
void micro_rows(int rows, const typename Ops::T* a, int64_t a_rs, const typename Ops::T* const* b,
                int64_t k, typename Ops::C* out) {
  switch (rows) {
    case 1:
      micro<Ops, 1>(a, a_rs, b, k, out);
      return;
    case 2:
      micro<Ops, 2>(a, a_rs, b, k, out);
      return;
    case 3:
      micro<Ops, 3>(a, a_rs, b, k, out);
      return;
    default:
      micro<Ops, 4>(a, a_rs, b, k, out);
  }
}

template <class Ops>
void skinny(int64_t m, int64_t n, int64_t k, const typename Ops::T* a, int64_t a_rs,
            const typename Ops::T* bt, int64_t bt_rs, typename Ops::C* c, int64_t c_rs,
            bool accumulate) {
  using T = typename Ops::T;
  using C = typename Ops::C;
  const int64_t pass = pass_length<Ops>(m, k);
  for (int64_t p0 = 0; p0 < k; p0 += pass) {
    const int64_t kk = std::min(pass, k - p0);
    const bool add = accumulate || p0 > 0;
    for (int64_t j0 = 0; j0 < n; j0 += 4) {
      const int cols = static_cast<int>(std::min<int64_t>(4, n - j0));
      const T* b[4];
      // Columns past n repeat the last one (computed, never stored).
      for (int j = 0; j < 4; ++j) b[j] = bt + std::min<int64_t>(j0 + j, n - 1) * bt_rs + p0;
      uint32_t corr[4] = {0, 0, 0, 0};
      if constexpr (std::is_same_v<Ops, S8>) column_sums_s8(b, kk, corr);
      for (int64_t i0 = 0; i0 < m; i0 += 4) {
        const int rows = static_cast<int>(std::min<int64_t>(4, m - i0));
        alignas(64) C out[16];
        micro_rows<Ops>(rows, a + i0 * a_rs + p0, a_rs, b, kk, out);
        for (int i = 0; i < rows; ++i) {
          C* crow = c + (i0 + i) * c_rs + j0;
          for (int j = 0; j < cols; ++j) {
            if constexpr (std::is_same_v<C, int32_t>) {
              // Unsigned arithmetic: wraps modulo 2^32, defined in C++.
              uint32_t v = static_cast<uint32_t>(out[i * 4 + j]) - corr[j];
              if (add) v += static_cast<uint32_t>(crow[j]);
              crow[j] = static_cast<int32_t>(v);
            } else {
              crow[j] = add ? crow[j] + out[i * 4 + j] : out[i * 4 + j];
            }
          }
        }
      }
    }
  }
}

}  // namespace

bool skinny_cpu_has(bool bf16, bool vnni) {
  static const bool f = __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw") &&
                        __builtin_cpu_supports("avx512vl") && __builtin_cpu_supports("avx512dq");
  static const bool b = __builtin_cpu_supports("avx512bf16");
  static const bool v = __builtin_cpu_supports("avx512vnni");
  return gemm_avx512_allowed() && f && (!bf16 || b) && (!vnni || v);
}

bool skinny_dot_f32(int64_t m, int64_t n, int64_t k, const float* a, int64_t a_rs, const float* bt,
                    int64_t bt_rs, float* c, int64_t c_rs, bool accumulate) {
  if (!skinny_cpu_has(false, false)) return false;
  skinny<F32>(m, n, k, a, a_rs, bt, bt_rs, c, c_rs, accumulate);
  return true;
}

bool skinny_dot_bf16(int64_t m, int64_t n, int64_t k, const bfloat16* a, int64_t a_rs,
                     const bfloat16* bt, int64_t bt_rs, float* c, int64_t c_rs, bool accumulate) {
  if (!skinny_cpu_has(true, false)) return false;
  skinny<BF16>(m, n, k, a, a_rs, bt, bt_rs, c, c_rs, accumulate);
  return true;
}

bool skinny_dot_s8(int64_t m, int64_t n, int64_t k, const int8_t* a, int64_t a_rs, const int8_t* bt,
                   int64_t bt_rs, int32_t* c, int64_t c_rs, bool accumulate) {
  if (!skinny_cpu_has(false, true)) return false;
  skinny<S8>(m, n, k, a, a_rs, bt, bt_rs, c, c_rs, accumulate);
  return true;
}

}  // namespace tessera::detail
