// int8 and bfloat16 x @ y.T with x's rows in the vector lanes (gemm_skinny.h, `lanes_dot_s8`,
// `lanes_dot_bf16`): C(i, j) = sum_p A(i, p) · Bt(j, p) for a few rows of A, both operands read
// along k where they lie.
//
// Lane i of an accumulator holds row i of A against one row of Bt: A is packed once into 4-byte
// words of k (quads of int8, pairs of bfloat16) across the lanes (8 lanes, a 256-bit vector, for
// up to 8 rows; 16, a 512-bit one, for up to 16; past 16 rows, groups of 16 that each block of Bt
// meets in turn), and each word of a row of Bt is broadcast from memory into the dot-product
// instruction's second operand (VPDPBUSD's signed bytes, VDPBF16PS's pairs), so a row of Bt meets
// every row of A in one instruction per word, with no packing of Bt and no horizontal sum per
// result (the dot-product kernels of gemm_skinny.cc reduce a vector per 16 sums; libxsmm's kernels
// need Bt transposed into quads or pairs first). Sixteen rows of Bt go through together, one
// accumulator each, in an assembly loop (GCC 12 kept the sixteen accumulators of the intrinsics in
// memory, storing each after every instruction); their sums come back to C's rows by 8 x 8
// transposes.
//
// VPDPBUSD multiplies unsigned by signed bytes. A goes in as a' = A + 128 (A XOR 0x80), so
// sum a'·b = sum a·b + 128 · sum b: the row sums of Bt (per 16 rows: VPDPBUSD against bytes of 1,
// then one reduction) come off. All of it wraps modulo 2^32, which is the int32 result a TPU
// gives. bfloat16 sums in float32 and has nothing to undo.
#include <immintrin.h>

#include <algorithm>
#include <cstdint>
#include <cstring>

#include "native/gemm_scratch.h"
#include "native/gemm_skinny.h"
#include "native/gemm_skinny_reduce.h"

namespace tessera::detail {

namespace {

thread_local GemmScratch tl_lanes;

// The shuffles below are the zero-masked forms with every lane selected (the same instructions):
// GCC 12's unmasked intrinsics pass an uninitialised vector through and warn about it.
using skinny_reduce::kAll;
constexpr __mmask8 kAll4 = 0x0f;

// Rows of Bt that go through together (one accumulator each), and quads of k per loop step (the
// assembly below is written for these: sixteen registers, eight quads of 4 bytes a step).
constexpr int64_t kRows = 16;
constexpr int64_t kStepQuads = 8;

// clang-format off
// One INSN (VPDPBUSD, or VDPBF16PS for bfloat16) per row of the block: accumulator r (register
// r) += the vector of A's words (quads of int8, pairs of bfloat16) in register 16 times the word
// at byte D of row r, broadcast. The rows are addressed from four
// bases, p0 = row 0, p1 = row 5, p2 = row 10 and p3 = row 15, plus 0 to 4 row strides (R, 2R,
// R3 = 3R, 4R), so that sixteen rows take six registers.
#define TESSERA_LANES_ROWS(V, D) \
  INSN " " #D "(%[p0])%{1to" BC "%}, %%" V "16, %%" V "0\n\t" \
  INSN " " #D "(%[p0],%[R],1)%{1to" BC "%}, %%" V "16, %%" V "1\n\t" \
  INSN " " #D "(%[p0],%[R],2)%{1to" BC "%}, %%" V "16, %%" V "2\n\t" \
  INSN " " #D "(%[p0],%[R3],1)%{1to" BC "%}, %%" V "16, %%" V "3\n\t" \
  INSN " " #D "(%[p0],%[R],4)%{1to" BC "%}, %%" V "16, %%" V "4\n\t" \
  INSN " " #D "(%[p1])%{1to" BC "%}, %%" V "16, %%" V "5\n\t" \
  INSN " " #D "(%[p1],%[R],1)%{1to" BC "%}, %%" V "16, %%" V "6\n\t" \
  INSN " " #D "(%[p1],%[R],2)%{1to" BC "%}, %%" V "16, %%" V "7\n\t" \
  INSN " " #D "(%[p1],%[R3],1)%{1to" BC "%}, %%" V "16, %%" V "8\n\t" \
  INSN " " #D "(%[p1],%[R],4)%{1to" BC "%}, %%" V "16, %%" V "9\n\t" \
  INSN " " #D "(%[p2])%{1to" BC "%}, %%" V "16, %%" V "10\n\t" \
  INSN " " #D "(%[p2],%[R],1)%{1to" BC "%}, %%" V "16, %%" V "11\n\t" \
  INSN " " #D "(%[p2],%[R],2)%{1to" BC "%}, %%" V "16, %%" V "12\n\t" \
  INSN " " #D "(%[p2],%[R3],1)%{1to" BC "%}, %%" V "16, %%" V "13\n\t" \
  INSN " " #D "(%[p2],%[R],4)%{1to" BC "%}, %%" V "16, %%" V "14\n\t" \
  INSN " " #D "(%[p3])%{1to" BC "%}, %%" V "16, %%" V "15\n\t"
// Quad E of a step: its vector of A (XB bytes) into register 16, then the sixteen rows.
#define TESSERA_LANES_QUAD(V, E, XB) \
  "vmovdqu64 " #E "*" XB "(%[xq]), %%" V "16\n\t" TESSERA_LANES_ROWS(V, 4 * E)
#define TESSERA_LANES_ZERO(V, A) "vpxord %%" V #A ", %%" V #A ", %%" V #A "\n\t"
#define TESSERA_LANES_STORE(V, A, XB) "vmovdqu64 %%" V #A ", " #A "*" XB "(%[out])\n\t"
#define TESSERA_LANES_16(M, V, X) \
  M(V, 0, X) M(V, 1, X) M(V, 2, X) M(V, 3, X) M(V, 4, X) M(V, 5, X) M(V, 6, X) M(V, 7, X) \
  M(V, 8, X) M(V, 9, X) M(V, 10, X) M(V, 11, X) M(V, 12, X) M(V, 13, X) M(V, 14, X) M(V, 15, X)
#define TESSERA_LANES_ZERO3(V, A, X) TESSERA_LANES_ZERO(V, A)
// `n` steps of 8 quads from zeroed accumulators, which are stored to out[0..15] at the end.
#define TESSERA_LANES_KERNEL(V, XB) \
  TESSERA_LANES_16(TESSERA_LANES_ZERO3, V, XB) \
  "test %[n], %[n]\n\t" \
  "jz 2f\n\t" \
  "1:\n\t" \
  TESSERA_LANES_QUAD(V, 0, XB) TESSERA_LANES_QUAD(V, 1, XB) \
  TESSERA_LANES_QUAD(V, 2, XB) TESSERA_LANES_QUAD(V, 3, XB) \
  TESSERA_LANES_QUAD(V, 4, XB) TESSERA_LANES_QUAD(V, 5, XB) \
  TESSERA_LANES_QUAD(V, 6, XB) TESSERA_LANES_QUAD(V, 7, XB) \
  "add $32, %[p0]\n\t" \
  "add $32, %[p1]\n\t" \
  "add $32, %[p2]\n\t" \
  "add $32, %[p3]\n\t" \
  "add $8*" XB ", %[xq]\n\t" \
  "dec %[n]\n\t" \
  "jnz 1b\n\t" \
  "2:\n\t" \
  TESSERA_LANES_16(TESSERA_LANES_STORE, V, XB)
#define TESSERA_LANES_OPERANDS \
  : [p0] "+r"(p0), [p1] "+r"(p1), [p2] "+r"(p2), [p3] "+r"(p3), [xq] "+r"(xq), [n] "+r"(steps) \
  : [R] "r"(rs), [R3] "r"(rs3), [out] "r"(out) \
  : "memory", "cc", "xmm0", "xmm1", "xmm2", "xmm3", "xmm4", "xmm5", "xmm6", "xmm7", "xmm8", \
    "xmm9", "xmm10", "xmm11", "xmm12", "xmm13", "xmm14", "xmm15", "xmm16"
// clang-format on

// Vectors of L int32 lanes.
template <int L>
struct Lanes;
template <>
struct Lanes<8> {
  using V = __m256i;
  TESSERA_SKINNY_INLINE static V load(const int32_t* p) {
    return _mm256_loadu_si256(reinterpret_cast<const __m256i*>(p));
  }
  TESSERA_SKINNY_INLINE static __m256i half(V v, int) { return v; }
  // acc += a (unsigned quads) times the quad w (signed), broadcast.
  TESSERA_SKINNY_INLINE static V dot(V acc, V a, int32_t w) {
    return _mm256_dpbusd_epi32(acc, a, _mm256_set1_epi32(w));
  }
  // acc (float32 lanes) += the pairs of bfloat16 in a times the pair w, broadcast.
  TESSERA_SKINNY_INLINE static V dot_bf16(V acc, V a, int32_t w) {
    return _mm256_castps_si256(
        _mm256_dpbf16_ps(_mm256_castsi256_ps(acc), (__m256bh)a, (__m256bh)_mm256_set1_epi32(w)));
  }
};
template <>
struct Lanes<16> {
  using V = __m512i;
  TESSERA_SKINNY_INLINE static V load(const int32_t* p) { return _mm512_loadu_si512(p); }
  TESSERA_SKINNY_INLINE static __m256i half(V v, int h) {
    return h == 0 ? _mm512_maskz_extracti64x4_epi64(kAll4, v, 0)
                  : _mm512_maskz_extracti64x4_epi64(kAll4, v, 1);
  }
  TESSERA_SKINNY_INLINE static V dot(V acc, V a, int32_t w) {
    return _mm512_dpbusd_epi32(acc, a, _mm512_set1_epi32(w));
  }
  TESSERA_SKINNY_INLINE static V dot_bf16(V acc, V a, int32_t w) {
    return _mm512_castps_si512(
        _mm512_dpbf16_ps(_mm512_castsi512_ps(acc), (__m512bh)a, (__m512bh)_mm512_set1_epi32(w)));
  }
};

// The accumulators of the 16 rows of Bt from y0 (rows rs bytes apart) over `steps` steps of 8
// words of A's packed lanes `xq`, into out[0..15]; VDPBF16PS where kBf16, else VPDPBUSD.
template <int L, bool kBf16>
[[gnu::target(TESSERA_SKINNY_TARGET)]] void block_steps(typename Lanes<L>::V* out,
                                                        const int32_t* xq, const char* y0,
                                                        int64_t rs, int64_t steps) {
  const char* p0 = y0;
  const char* p1 = y0 + 5 * rs;
  const char* p2 = y0 + 10 * rs;
  const char* p3 = y0 + 15 * rs;
  const int64_t rs3 = 3 * rs;
  if constexpr (L == 8 && !kBf16) {
#define BC "8"
#define INSN "vpdpbusd"
    asm volatile(TESSERA_LANES_KERNEL("ymm", "32") TESSERA_LANES_OPERANDS);
#undef INSN
#undef BC
  } else if constexpr (!kBf16) {
#define BC "16"
#define INSN "vpdpbusd"
    asm volatile(TESSERA_LANES_KERNEL("zmm", "64") TESSERA_LANES_OPERANDS);
#undef INSN
#undef BC
  } else if constexpr (L == 8) {
#define BC "8"
#define INSN "vdpbf16ps"
    asm volatile(TESSERA_LANES_KERNEL("ymm", "32") TESSERA_LANES_OPERANDS);
#undef INSN
#undef BC
  } else {
#define BC "16"
#define INSN "vdpbf16ps"
    asm volatile(TESSERA_LANES_KERNEL("zmm", "64") TESSERA_LANES_OPERANDS);
#undef INSN
#undef BC
  }
}

// An 8 x 8 transpose of int32: r[i] lane j becomes r[j] lane i.
TESSERA_SKINNY_INLINE void transpose8(__m256i* r) {
  __m256i t[8];
  __m256i u[8];
  for (int i = 0; i < 4; ++i) {
    t[2 * i] = _mm256_unpacklo_epi32(r[2 * i], r[2 * i + 1]);
    t[2 * i + 1] = _mm256_unpackhi_epi32(r[2 * i], r[2 * i + 1]);
  }
  for (int i = 0; i < 2; ++i) {
    u[4 * i] = _mm256_unpacklo_epi64(t[4 * i], t[4 * i + 2]);
    u[4 * i + 1] = _mm256_unpackhi_epi64(t[4 * i], t[4 * i + 2]);
    u[4 * i + 2] = _mm256_unpacklo_epi64(t[4 * i + 1], t[4 * i + 3]);
    u[4 * i + 3] = _mm256_unpackhi_epi64(t[4 * i + 1], t[4 * i + 3]);
  }
  for (int i = 0; i < 4; ++i) {
    r[i] = _mm256_permute2x128_si256(u[i], u[i + 4], 0x20);
    r[i + 4] = _mm256_permute2x128_si256(u[i], u[i + 4], 0x31);
  }
}

// Lane r = 128 · (the sum of row r's k bytes), for the 16 rows of Bt from y0, modulo 2^32.
TESSERA_SKINNY_INLINE __m512i row_corrections(const int8_t* y0, int64_t rs, int64_t k) {
  const __m512i ones = _mm512_set1_epi8(1);
  __m512i s[kRows];
  for (int r = 0; r < kRows; ++r) s[r] = _mm512_setzero_si512();
  int64_t p = 0;
  for (; p + 64 <= k; p += 64) {
    for (int r = 0; r < kRows; ++r) {
      s[r] = _mm512_dpbusd_epi32(s[r], ones, _mm512_loadu_si512(y0 + r * rs + p));
    }
  }
  if (p < k) {
    const __mmask64 mask = (__mmask64{1} << (k - p)) - 1u;
    for (int r = 0; r < kRows; ++r) {
      s[r] = _mm512_dpbusd_epi32(s[r], ones, _mm512_maskz_loadu_epi8(mask, y0 + r * rs + p));
    }
  }
  __m512 v[kRows];
  for (int r = 0; r < kRows; ++r) v[r] = _mm512_castsi512_ps(s[r]);
  const __m512i sums = _mm512_castps_si512(skinny_reduce::reduce16<skinny_reduce::AddI32>(v));
  return _mm512_maskz_slli_epi32(kAll, sums, 7);
}

// A's m rows (`bytes` bytes each, rows `a_rs` bytes apart) in L lanes as 4-byte words XOR
// `flip`, word q of row i at xq[q * L + i]: quads of int8 with 0x80808080 (a' = A + 128),
// pairs of bfloat16 with 0. Lanes past m are never stored; they are zeroed so that nothing reads
// indeterminate memory. A last partial word's bytes past the row meet zero bytes of Bt (`lanes`
// reads Bt's last word only up to its row's end).
void pack_words(int32_t* xq, int L, int64_t m, int64_t bytes, const char* a, int64_t a_rs,
                uint32_t flip) {
  const int64_t words = (bytes + 3) / 4, whole = bytes / 4;
  for (int64_t i = 0; i < L; ++i) {
    if (i >= m) {
      for (int64_t q = 0; q < words; ++q) xq[q * L + i] = 0;
      continue;
    }
    const char* row = a + i * a_rs;
    for (int64_t q = 0; q < whole; ++q) {
      uint32_t w = 0;
      std::memcpy(&w, row + 4 * q, 4);
      xq[q * L + i] = static_cast<int32_t>(w ^ flip);
    }
    if (whole < words) {
      uint32_t w = 0;
      std::memcpy(&w, row + 4 * whole, static_cast<size_t>(bytes - 4 * whole));
      xq[whole * L + i] = static_cast<int32_t>(w ^ flip);
    }
  }
}

// The two element types: int8 (quads of k, int32 sums less the offset's corrections) and
// bfloat16 (pairs of k, float32 sums).
struct S8Words {
  using T = int8_t;
  using C = int32_t;
  static constexpr bool kBf16 = false;
  static constexpr uint32_t kFlip = 0x80808080u;  // A + 128: unsigned bytes for VPDPBUSD
  TESSERA_SKINNY_INLINE static __m512i corrections(const char* y0, int64_t rs, int64_t k) {
    return row_corrections(reinterpret_cast<const int8_t*>(y0), rs, k);
  }
  template <class V, class Ops>
  TESSERA_SKINNY_INLINE static V dot(V acc, V x, int32_t w) {
    return Ops::dot(acc, x, w);
  }
};
struct Bf16Words {
  using T = bfloat16;
  using C = float;
  static constexpr bool kBf16 = true;
  static constexpr uint32_t kFlip = 0;
  TESSERA_SKINNY_INLINE static __m512i corrections(const char*, int64_t, int64_t) {
    return _mm512_setzero_si512();
  }
  template <class V, class Ops>
  TESSERA_SKINNY_INLINE static V dot(V acc, V x, int32_t w) {
    return Ops::dot_bf16(acc, x, w);
  }
};

// C's `rows` rows (at most L) and 16 columns from c, from the accumulators of 16 rows of Bt (lane
// i of acc[r] = C(i, r); for int8 plus 128 times row r's sum, which `corr`'s lane r takes off),
// plus C's values when `accumulate`; C's first `done` columns are left as they are.
template <class W, int L>
[[gnu::target(TESSERA_SKINNY_TARGET)]] void store_rows(const typename Lanes<L>::V* acc,
                                                       __m512i corr, int64_t rows, int done,
                                                       bool accumulate, typename W::C* c,
                                                       int64_t c_rs) {
  for (int h = 0; 8 * h < rows; ++h) {  // C's rows 8h .. 8h + 7
    for (int g = 0; g < 2; ++g) {       // C's columns 8g .. 8g + 7
      const int lo = std::max(0, done - 8 * g);
      if (lo >= 8) continue;
      __m256i t[8];
      for (int r = 0; r < 8; ++r) t[r] = Lanes<L>::half(acc[8 * g + r], h);
      transpose8(t);
      const __m256i cg = g == 0 ? _mm512_maskz_extracti64x4_epi64(kAll4, corr, 0)
                                : _mm512_maskz_extracti64x4_epi64(kAll4, corr, 1);
      const auto mask = static_cast<__mmask8>(0xffu << lo);
      for (int i = 0; i < 8 && 8 * h + i < rows; ++i) {
        typename W::C* crow = c + (8 * h + i) * c_rs + 8 * g;
        if constexpr (W::kBf16) {
          __m256 v = _mm256_castsi256_ps(t[i]);
          if (accumulate) v = _mm256_add_ps(v, _mm256_maskz_loadu_ps(mask, crow));
          _mm256_mask_storeu_ps(crow, mask, v);
        } else {
          __m256i v = _mm256_sub_epi32(t[i], cg);
          if (accumulate) v = _mm256_add_epi32(v, _mm256_maskz_loadu_epi32(mask, crow));
          _mm256_mask_storeu_epi32(crow, mask, v);
        }
      }
    }
  }
}

// C = A · Bt (or +=) for element type W in L lanes: A packed into 4-byte words of k (quads of
// int8, pairs of bfloat16) across the lanes, then Bt sixteen rows at a time.
template <class W, int L>
[[gnu::target(TESSERA_SKINNY_TARGET)]] void lanes(int64_t m, int64_t n, int64_t k,
                                                  const typename W::T* a, int64_t a_rs,
                                                  const typename W::T* bt, int64_t bt_rs,
                                                  typename W::C* c, int64_t c_rs, bool accumulate) {
  using Ops = Lanes<L>;
  using V = typename Ops::V;
  constexpr int64_t kSize = sizeof(typename W::T);
  constexpr int64_t kPerWord = 4 / kSize;
  const int64_t words = (k + kPerWord - 1) / kPerWord, whole = k / kPerWord;
  const int64_t steps = whole / kStepQuads;
  const int64_t rs = bt_rs * kSize;  // bytes from one row of Bt to the next
  // A's rows in groups of L (the lanes of one vector), each group packed on its own; every block
  // of Bt meets the groups one after the other while it is in L1.
  const int64_t groups = (m + L - 1) / L;
  int32_t* xq = tl_lanes.get<int32_t>(groups * words * L);
  for (int64_t g = 0; g < groups; ++g) {
    pack_words(xq + g * words * L, L, std::min<int64_t>(L, m - g * L), k * kSize,
               reinterpret_cast<const char*>(a + g * L * a_rs), a_rs * kSize, W::kFlip);
  }
  alignas(64) V acc[kRows];
  for (int64_t j0 = 0; j0 < n; j0 += kRows) {
    // The last block ends at n: its first columns, written by the block before, are skipped.
    const int64_t jb = std::min(j0, n - kRows);
    const int done = static_cast<int>(j0 - jb);
    const char* y0 = reinterpret_cast<const char*>(bt + jb * bt_rs);
    const __m512i corr = W::corrections(y0, rs, k);
    for (int64_t g = 0; g < groups; ++g) {
      const int32_t* xg = xq + g * words * L;
      block_steps<L, W::kBf16>(acc, xg, y0, rs, steps);
      for (int64_t q = steps * kStepQuads; q < whole; ++q) {  // whole words past the steps
        const V x = Ops::load(xg + q * L);
        for (int r = 0; r < kRows; ++r) {
          int32_t w;
          std::memcpy(&w, y0 + r * rs + 4 * q, 4);
          acc[r] = W::template dot<V, Ops>(acc[r], x, w);
        }
      }
      if (whole < words) {  // a last partial word: its bytes past k read as zero (not read)
        const V x = Ops::load(xg + whole * L);
        const auto bytes = static_cast<__mmask16>((1u << (k * kSize - 4 * whole)) - 1u);
        for (int r = 0; r < kRows; ++r) {
          const __m128i part = _mm_maskz_loadu_epi8(bytes, y0 + r * rs + 4 * whole);
          acc[r] = W::template dot<V, Ops>(acc[r], x, _mm_cvtsi128_si32(part));
        }
      }
      store_rows<W, L>(acc, corr, std::min<int64_t>(L, m - g * L), done, accumulate,
                       c + g * L * c_rs + jb, c_rs);
    }
  }
}

}  // namespace

bool lanes_dot_s8(int64_t m, int64_t n, int64_t k, const int8_t* a, int64_t a_rs, const int8_t* bt,
                  int64_t bt_rs, int32_t* c, int64_t c_rs, bool accumulate) {
  if (m < 1 || m > 32 || n < kRows || k < 1 || !skinny_cpu_has(false, true)) return false;
  if (m <= 8) {
    lanes<S8Words, 8>(m, n, k, a, a_rs, bt, bt_rs, c, c_rs, accumulate);
  } else {
    lanes<S8Words, 16>(m, n, k, a, a_rs, bt, bt_rs, c, c_rs, accumulate);
  }
  return true;
}

bool lanes_dot_bf16(int64_t m, int64_t n, int64_t k, const bfloat16* a, int64_t a_rs,
                    const bfloat16* bt, int64_t bt_rs, float* c, int64_t c_rs, bool accumulate) {
  if (m < 1 || m > 32 || n < kRows || k < 1 || !skinny_cpu_has(true, false)) return false;
  if (m <= 8) {
    lanes<Bf16Words, 8>(m, n, k, a, a_rs, bt, bt_rs, c, c_rs, accumulate);
  } else {
    lanes<Bf16Words, 16>(m, n, k, a, a_rs, bt, bt_rs, c, c_rs, accumulate);
  }
  return true;
}

}  // namespace tessera::detail
