// Skinny dots in dot-product form (gemm_skinny.h): C(i, j) = sum_p A(i, p) · Bt(j, p), both
// operands read along k where they lie, with AVX-512 (float32 FMA, bfloat16 VDPBF16PS, int8
// VPDPBUSD).
//
// The micro-kernel takes MR rows of A and NR rows of Bt (columns of B), MR x NR <= 16 (1 x 16,
// 2 x 8, 3 x 4 or 4 x 4), and keeps the products' partial sums in as many vector accumulators (one
// lane per k position modulo the vector width), then reduces them to one vector of 16 sums with a
// shuffle tree (15 adds instead of 16 horizontal reductions). With 4 rows or more, a block of 4
// rows of Bt is loaded from memory once and meets every block of rows of A while it is in L1; k
// is split into passes whose rows fit in half the L1 data cache the CPU reports, so that A stays
// in L1 across the whole of B.
//
// The multiply-adds are written as inline assembly: GCC 12 copies the accumulators of the
// intrinsics between registers (and spills some) on every step of k, which measured 1.1-1.4x
// slower (docs/performance.md, "Skinny dots in dot-product form").
//
// int8: VPDPBUSD multiplies unsigned by signed bytes. With b' = b + 128 (b XOR 0x80, unsigned),
// sum a·b = sum b'·a - 128 · sum a; the row sums of A (once per row and pass, not per column of
// B) come from VPDPBUSD against bytes of 1. All of it wraps modulo 2^32, which is the int32 result
// a TPU gives.
#include "native/gemm_skinny.h"

#include <immintrin.h>

#include <algorithm>
#include <array>
#include <cstring>
#include <type_traits>
#include <vector>

#include "native/gemm.h"
#include "native/gemm_skinny_reduce.h"

namespace tessera::detail {

namespace {

// The operations of one dtype: T the elements, V a vector of them, Acc a vector of 16 sums.
struct F32 : skinny_reduce::AddF32 {
  using T = float;
  using C = float;
  using V = __m512;
  using Acc = __m512;
  static constexpr int64_t kStep = 16;  // k per vector
  TESSERA_SKINNY_INLINE static V load(const T* p) { return _mm512_loadu_ps(p); }
  TESSERA_SKINNY_INLINE static V load_tail(const T* p, int64_t count) {
    return _mm512_maskz_loadu_ps(static_cast<__mmask16>((1u << count) - 1u), p);
  }
  TESSERA_SKINNY_INLINE static V prepare_b(V b) { return b; }
  TESSERA_SKINNY_INLINE static Acc zero() { return _mm512_setzero_ps(); }
  TESSERA_SKINNY_INLINE static Acc dot(Acc acc, V a, V b) {
    asm("vfmadd231ps %[a], %[b], %[acc]" : [acc] "+v"(acc) : [a] "vm"(a), [b] "v"(b));
    return acc;
  }
};

struct BF16 : skinny_reduce::AddF32 {
  using T = bfloat16;
  using C = float;
  using V = __m512i;
  using Acc = __m512;
  static constexpr int64_t kStep = 32;
  TESSERA_SKINNY_INLINE static V load(const T* p) { return _mm512_loadu_si512(p); }
  TESSERA_SKINNY_INLINE static V load_tail(const T* p, int64_t count) {
    return _mm512_maskz_loadu_epi16(static_cast<__mmask32>((uint64_t{1} << count) - 1u), p);
  }
  TESSERA_SKINNY_INLINE static V prepare_b(V b) { return b; }
  TESSERA_SKINNY_INLINE static Acc zero() { return _mm512_setzero_ps(); }
  TESSERA_SKINNY_INLINE static Acc dot(Acc acc, V a, V b) {
    asm("vdpbf16ps %[a], %[b], %[acc]" : [acc] "+v"(acc) : [a] "vm"(a), [b] "v"(b));
    return acc;
  }
};

struct S8 : skinny_reduce::AddI32 {
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
  // b + 128 as an unsigned byte (padding lanes become 128 too, against A's zero padding).
  TESSERA_SKINNY_INLINE static V prepare_b(V b) {
    return _mm512_xor_si512(b, _mm512_set1_epi8(static_cast<char>(0x80)));
  }
  TESSERA_SKINNY_INLINE static Acc zero() { return _mm512_setzero_si512(); }
  // b (prepared: unsigned) times a (signed).
  TESSERA_SKINNY_INLINE static Acc dot(Acc acc, V a, V b) {
    asm("vpdpbusd %[a], %[b], %[acc]" : [acc] "+v"(acc) : [a] "vm"(a), [b] "v"(b));
    return acc;
  }
};

TESSERA_SKINNY_INLINE __m512 as_ps(__m512 v) { return v; }
TESSERA_SKINNY_INLINE __m512 as_ps(__m512i v) { return _mm512_castsi512_ps(v); }

using skinny_reduce::kAll;
using skinny_reduce::reduce16;

template <class Ops, bool kTail>
TESSERA_SKINNY_INLINE typename Ops::V load_at(const typename Ops::T* x, int64_t left) {
  if constexpr (kTail) {
    return Ops::load_tail(x, left);
  } else {
    return Ops::load(x);
  }
}

// One vector step of k at p (`left` elements when kTail) for MR rows of A and NR rows of Bt: the
// MR rows of A are loaded once, then each row of Bt meets all of them.
template <class Ops, int MR, int NR, bool kTail>
TESSERA_SKINNY_INLINE void micro_step(typename Ops::Acc* acc, const typename Ops::T* a,
                                      int64_t a_rs, const typename Ops::T* const* b, int64_t p,
                                      int64_t left) {
  using V = typename Ops::V;
  V av[MR];
#pragma GCC unroll 4
  for (int i = 0; i < MR; ++i) {
    av[i] = load_at<Ops, kTail>(a + i * a_rs + p, left);
  }
  // Unrolled, so that the accumulators live in registers.
#pragma GCC unroll 16
  for (int j = 0; j < NR; ++j) {
    const V bv = Ops::prepare_b(load_at<Ops, kTail>(b[j] + p, left));
#pragma GCC unroll 4
    for (int i = 0; i < MR; ++i) acc[i * NR + j] = Ops::dot(acc[i * NR + j], av[i], bv);
  }
}

// Lane i * NR + j of the result = sum_p A(i, p) · B(j, p) for i < MR, j < NR, p < k (the int8
// sums still carry 128 times A's row sums: see the file comment); lanes past MR * NR are zero.
template <class Ops, int MR, int NR>
TESSERA_SKINNY_INLINE __m512 micro(const typename Ops::T* a, int64_t a_rs,
                                   const typename Ops::T* const* b, int64_t k) {
  static_assert(MR * NR <= 16, "one vector of 16 sums");
  typename Ops::Acc acc[MR * NR];
#pragma GCC unroll 16
  for (int e = 0; e < MR * NR; ++e) acc[e] = Ops::zero();
  int64_t p = 0;
  for (; p + Ops::kStep <= k; p += Ops::kStep) {
    micro_step<Ops, MR, NR, false>(acc, a, a_rs, b, p, 0);
  }
  if (p < k) micro_step<Ops, MR, NR, true>(acc, a, a_rs, b, p, k - p);
  __m512 v[16];
#pragma GCC unroll 16
  for (int e = 0; e < 16; ++e) v[e] = e < MR * NR ? as_ps(acc[e]) : _mm512_setzero_ps();
  return reduce16<Ops>(v);
}

// 128 · (the sum over p < k of each of the `rows` rows of A), the int8 correction, modulo 2^32.
[[gnu::target(TESSERA_SKINNY_TARGET)]] void row_sums_s8(const int8_t* a, int64_t a_rs, int64_t rows,
                                                        int64_t k, uint32_t* out) {
  const __m512i ones = _mm512_set1_epi8(1);
  for (int64_t i = 0; i < rows; ++i) {
    __m512i acc = _mm512_setzero_si512();
    int64_t p = 0;
    for (; p + 64 <= k; p += 64) acc = _mm512_dpbusd_epi32(acc, ones, S8::load(a + i * a_rs + p));
    if (p < k) acc = _mm512_dpbusd_epi32(acc, ones, S8::load_tail(a + i * a_rs + p, k - p));
    alignas(64) uint32_t lanes[16];
    _mm512_store_si512(lanes, acc);
    uint32_t sum = 0;
    for (const uint32_t x : lanes) sum += x;
    out[i] = sum * 128u;
  }
}

// C's MR rows and `cols` columns from j0 = the sums `v` (lane i * NR + j), less the int8
// corrections, plus C's values when `add`.
template <class Ops, int MR, int NR>
TESSERA_SKINNY_INLINE void store_block(__m512 v, const uint32_t* corr, int cols, bool add,
                                       typename Ops::C* c, int64_t c_rs) {
  const auto mask = static_cast<__mmask16>((1u << cols) - 1u);
  const __m512i iota = _mm512_set_epi32(15, 14, 13, 12, 11, 10, 9, 8, 7, 6, 5, 4, 3, 2, 1, 0);
  for (int i = 0; i < MR; ++i) {
    const __m512 row = i == 0 ? v
                              : _mm512_maskz_permutexvar_ps(
                                    kAll, _mm512_add_epi32(iota, _mm512_set1_epi32(i * NR)), v);
    typename Ops::C* crow = c + i * c_rs;
    if constexpr (std::is_same_v<typename Ops::C, int32_t>) {
      // Wraps modulo 2^32 like the int32 a TPU gives.
      __m512i r = _mm512_sub_epi32(_mm512_castps_si512(row),
                                   _mm512_set1_epi32(static_cast<int32_t>(corr[i])));
      if (add) r = _mm512_add_epi32(r, _mm512_maskz_loadu_epi32(mask, crow));
      _mm512_mask_storeu_epi32(crow, mask, r);
    } else {
      const __m512 r = add ? _mm512_add_ps(row, _mm512_maskz_loadu_ps(mask, crow)) : row;
      _mm512_mask_storeu_ps(crow, mask, r);
    }
  }
}

// MR rows of C over one pass of k (kk elements), NR columns of B at a time; `corr` the rows' int8
// corrections.
template <class Ops, int MR, int NR>
[[gnu::target(TESSERA_SKINNY_TARGET)]] void row_block(int64_t n, int64_t kk,
                                                      const typename Ops::T* a, int64_t a_rs,
                                                      const typename Ops::T* bt, int64_t bt_rs,
                                                      const uint32_t* corr, typename Ops::C* c,
                                                      int64_t c_rs, bool add) {
  for (int64_t j0 = 0; j0 < n; j0 += NR) {
    const int cols = static_cast<int>(std::min<int64_t>(NR, n - j0));
    const typename Ops::T* b[NR];
    // Columns past n repeat the last one (computed, never stored).
    for (int j = 0; j < NR; ++j) b[j] = bt + std::min<int64_t>(j0 + j, n - 1) * bt_rs;
    store_block<Ops, MR, NR>(micro<Ops, MR, NR>(a, a_rs, b, kk), corr, cols, add, c + j0, c_rs);
  }
}

// k per pass: the pass's rows of A and of one block of Bt fill at most half the L1 data cache the
// CPU reports (32 KiB when it reports nothing), in whole vectors.
template <class Ops>
int64_t pass_length(int64_t rows, int64_t k) {
  const int64_t l1d = gemm_l1d_bytes();
  const int64_t fit = l1d / 2 / (rows * static_cast<int64_t>(sizeof(typename Ops::T)));
  const int64_t len = std::max<int64_t>(Ops::kStep, fit / Ops::kStep * Ops::kStep);
  const int64_t passes = (k + len - 1) / len;
  // Even passes, in whole vectors.
  return std::min(len, ((k + passes - 1) / passes + Ops::kStep - 1) / Ops::kStep * Ops::kStep);
}

// Blocks of rows: one row meets 16 columns of B at a time, two rows 8, three or more 4 (the 16
// sums of one vector reduction). With four rows or more, each block of 4 columns of B is read
// from memory once and meets every block of 4 rows while it is in L1.
template <class Ops>
void skinny(int64_t m, int64_t n, int64_t k, const typename Ops::T* a, int64_t a_rs,
            const typename Ops::T* bt, int64_t bt_rs, typename Ops::C* c, int64_t c_rs,
            bool accumulate) {
  const int64_t nr = m == 1 ? 16 : m == 2 ? 8 : 4;
  const int64_t pass = pass_length<Ops>(m + nr, k);
  // The int8 corrections of every row for the current pass.
  std::array<uint32_t, 64> few;  // written by row_sums_s8 before any read; unread otherwise
  std::vector<uint32_t> many;
  uint32_t* corr = few.data();
  if (std::is_same_v<Ops, S8> && m > static_cast<int64_t>(few.size())) {
    many.resize(static_cast<size_t>(m));
    corr = many.data();
  }
  for (int64_t p0 = 0; p0 < k; p0 += pass) {
    const int64_t kk = std::min(pass, k - p0);
    const bool add = accumulate || p0 > 0;
    if constexpr (std::is_same_v<Ops, S8>) row_sums_s8(a + p0, a_rs, m, kk, corr);
    if (m == 1) {
      row_block<Ops, 1, 16>(n, kk, a + p0, a_rs, bt + p0, bt_rs, corr, c, c_rs, add);
      continue;
    }
    if (m == 2) {
      row_block<Ops, 2, 8>(n, kk, a + p0, a_rs, bt + p0, bt_rs, corr, c, c_rs, add);
      continue;
    }
    for (int64_t j0 = 0; j0 < n; j0 += 4) {
      const int64_t cols = std::min<int64_t>(4, n - j0);
      const typename Ops::T* b = bt + j0 * bt_rs + p0;
      for (int64_t i0 = 0; i0 < m; i0 += 4) {
        const typename Ops::T* ai = a + i0 * a_rs + p0;
        typename Ops::C* ci = c + i0 * c_rs + j0;
        switch (std::min<int64_t>(4, m - i0)) {
          case 1:
            row_block<Ops, 1, 4>(cols, kk, ai, a_rs, b, bt_rs, corr + i0, ci, c_rs, add);
            break;
          case 2:
            row_block<Ops, 2, 4>(cols, kk, ai, a_rs, b, bt_rs, corr + i0, ci, c_rs, add);
            break;
          case 3:
            row_block<Ops, 3, 4>(cols, kk, ai, a_rs, b, bt_rs, corr + i0, ci, c_rs, add);
            break;
          default:
            row_block<Ops, 4, 4>(cols, kk, ai, a_rs, b, bt_rs, corr + i0, ci, c_rs, add);
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
