// int8 products on libxsmm's AVX512-VNNI kernels (gemm_int8.h).
//
// vpdpbusd multiplies unsigned bytes by signed bytes, and libxsmm 1.17's byte GEMMs take one
// operand of each. A is made unsigned by adding 128 to each value (a + 128 fits a byte exactly),
// and 128 times B's column sums are taken off afterwards: (a + 128) · b - 128 · Σb = a · b, in
// int32 arithmetic that wraps modulo 2^32 like a TPU's accumulator.
//
// libxsmm is column-major: our row-major C = A · B is its C' = B' · A', so its "A" is our B,
// which it wants in VNNI layout: the four bytes of k rows 4q .. 4q + 3 of each column in one
// 32-bit word, [k/4][n][4], with k padded by zero rows to a multiple of 4. Its "B" is our A + 128,
// rows of k (padded) bytes.
#include "native/gemm_int8.h"

#include <immintrin.h>
#include <libxsmm.h>

#include <algorithm>
#include <cstring>

#include "native/gemm_scratch.h"
#include "native/int8_quads-inl.h"
#include "native/transpose16-inl.h"

#define TESSERA_VNNI_TARGET "avx512f,avx512bw,avx512vl,avx512dq,avx512vnni"

namespace tessera::detail {

namespace {

thread_local GemmScratch tl_vnni_b;
thread_local GemmScratch tl_vnni_a;
thread_local GemmScratch tl_colsum;

int8_t elem(const MatrixView<int8_t>& v, int64_t i, int64_t j) {
  return v.data[i * v.rs + j * v.cs];
}

// sums[j] += Σ over k of B(·, j) for the `cols` columns of the packed words (rows ld words
// apart): vpdpbusd of bytes 1 by each quad, a row of words at a time (walking a column of them
// instead strides through the L1's sets).
[[gnu::target(TESSERA_VNNI_TARGET)]] void column_sums(int32_t* sums, const uint32_t* packed,
                                                      int64_t ld, int64_t quads, int64_t cols) {
  const __m512i ones = _mm512_set1_epi8(1);
  for (int64_t q = 0; q < quads; ++q) {
    const uint32_t* row = packed + q * ld;
    for (int64_t j = 0; j < cols; j += 16) {
      const __mmask16 mask = lanes16(cols - j);
      const __m512i acc = _mm512_maskz_loadu_epi32(mask, sums + j);
      _mm512_mask_storeu_epi32(
          sums + j, mask, _mm512_dpbusd_epi32(acc, ones, _mm512_maskz_loadu_epi32(mask, row + j)));
    }
  }
}

// out (quads x n words, row length n) = the transpose of t (n x quads words, rows t_rs words
// apart), 16 x 16 words at a time, adding each column's bytes into sums[j] on the way (vpdpbusd
// of bytes 1 by the transposed rows while they are in registers; a second pass over the packed
// words cost 13% of an (8, 128) x (512, 128).T call).
[[gnu::target(TESSERA_VNNI_TARGET)]] void transpose_quads(uint32_t* out, const int32_t* t,
                                                          int64_t t_rs, int64_t quads, int64_t n,
                                                          int32_t* sums) {
  const __m512i ones = _mm512_set1_epi8(1);
  for (int64_t j0 = 0; j0 < n; j0 += 16) {
    const int64_t rows = std::min<int64_t>(16, n - j0);  // rows of t in this block
    const __mmask16 jmask = lanes16(rows);
    __m512i acc = _mm512_maskz_loadu_epi32(jmask, sums + j0);
    for (int64_t i0 = 0; i0 < quads; i0 += 16) {
      const int64_t cols = std::min<int64_t>(16, quads - i0);
      __m512 r[16];
      load_transposed16(r, t + j0 * t_rs + i0, t_rs, rows, lanes16(cols));
#pragma GCC unroll 16
      for (int i = 0; i < 16; ++i) {
        if (i >= cols) break;
        const __m512i w = _mm512_castps_si512(r[i]);
        _mm512_mask_storeu_epi32(out + (i0 + i) * n + j0, jmask, w);
        acc = _mm512_dpbusd_epi32(acc, ones, w);
      }
    }
    _mm512_mask_storeu_epi32(sums + j0, jmask, acc);
  }
}

// Columns j0 .. j0 + cols (cols ≤ 64 · kBlocks) of B (rows contiguous) into VNNI words, for quads
// q0 .. q1 (zero past k): per quad, four rows' 64-column pieces interleaved in registers
// (words64_s8) and stored, and their column sums added in registers. Loads and stores past
// `cols` are masked off.
template <int kBlocks>
[[gnu::target(TESSERA_VNNI_TARGET)]] void pack_b_columns(uint32_t* out, const MatrixView<int8_t>& b,
                                                         int64_t k, int64_t n, int64_t j0,
                                                         int64_t cols, int64_t q0, int64_t q1,
                                                         int32_t* sums) {
  const __m512i ones = _mm512_set1_epi8(1);
  __mmask64 bytes[kBlocks];
  __mmask16 lanes[4 * kBlocks];
  __m512i acc[4 * kBlocks];
  for (int h = 0; h < kBlocks; ++h) {
    const int64_t c = std::clamp<int64_t>(cols - 64 * h, 0, 64);
    bytes[h] = c == 64 ? ~__mmask64{0} : (__mmask64{1} << static_cast<unsigned>(c)) - 1;
  }
  for (int x = 0; x < 4 * kBlocks; ++x) {
    lanes[x] = lanes16(std::max<int64_t>(0, cols - 16 * x));
    acc[x] = _mm512_maskz_loadu_epi32(lanes[x], sums + j0 + 16 * x);
  }
  for (int64_t q = q0; q < q1; ++q) {
    for (int h = 0; h < kBlocks; ++h) {
      __m512i x[4];
      for (int g = 0; g < 4; ++g) {
        x[g] = 4 * q + g < k
                   ? _mm512_maskz_loadu_epi8(bytes[h], b.data + (4 * q + g) * b.rs + j0 + 64 * h)
                   : _mm512_setzero_si512();
      }
      __m512i w[4];
      words64_s8(x[0], x[1], x[2], x[3], w);
      uint32_t* d = out + q * n + j0 + 64 * h;
      for (int v = 0; v < 4; ++v) {
        _mm512_mask_storeu_epi32(d + 16 * v, lanes[4 * h + v], w[v]);
        acc[4 * h + v] = _mm512_dpbusd_epi32(acc[4 * h + v], ones, w[v]);
      }
    }
  }
  for (int x = 0; x < 4 * kBlocks; ++x) {
    _mm512_mask_storeu_epi32(sums + j0 + 16 * x, lanes[x], acc[x]);
  }
}

// B (k x n) into VNNI words: word (q, j) of `out` (row length n) holds B(4q .. 4q + 3, j), zero
// past k; sums[j] += the sum of column j.
[[gnu::target(TESSERA_VNNI_TARGET)]] void pack_b(uint32_t* out, const MatrixView<int8_t>& b,
                                                 int64_t k, int64_t n, int32_t* sums) {
  const int64_t quads = (k + 3) / 4;
  if (b.cs == 1) {
    // Rows contiguous. Where a group of at least two quads' rows fits half the L1 (n ≤ L1 / 16
    // bytes), 128 and then 64 columns at a time down the group's quads, four rows interleaved in
    // registers and their column sums added there: a second pass over the packed words read them
    // back from the L2 (on an AMD Zen 4 class EPYC, (8, 4096) x (4096, 256) 77 -> 68 us). Past
    // that the column pieces of one quad's rows lie a row of B apart, and packing a quad at a
    // time across all columns, the sums added in a second pass, was measured faster ((8, 256) x
    // (256, 4096): 79 against 89-93 us walking 128 columns down all the quads).
    const int64_t group = gemm_l1d_bytes() / 2 / (4 * n);
    if (group >= 2) {
      for (int64_t q0 = 0; q0 < quads; q0 += group) {
        const int64_t q1 = std::min(quads, q0 + group);
        int64_t j0 = 0;
        for (; j0 + 128 <= n; j0 += 128) pack_b_columns<2>(out, b, k, n, j0, 128, q0, q1, sums);
        for (; j0 < n; j0 += 64) {
          pack_b_columns<1>(out, b, k, n, j0, std::min<int64_t>(64, n - j0), q0, q1, sums);
        }
      }
      return;
    }
    alignas(64) static const int8_t kZeros[64] = {};
    for (int64_t q = 0; q < quads; ++q) {
      const int8_t* rows[4];
      for (int g = 0; g < 4; ++g) {
        rows[g] = 4 * q + g < k ? b.data + (4 * q + g) * b.rs : nullptr;
      }
      int64_t j = 0;
      for (; j + 64 <= n; j += 64) {
        const int8_t* r[4];
        for (int g = 0; g < 4; ++g) r[g] = rows[g] != nullptr ? rows[g] + j : kZeros;
        uint32_t* d[4] = {out + q * n + j, out + q * n + j + 16, out + q * n + j + 32,
                          out + q * n + j + 48};
        words64_s8(r, d);
      }
      if (j < n) {  // the last columns, under masks
        const __mmask64 bytes = (__mmask64{1} << static_cast<unsigned>(n - j)) - 1;
        __m512i x[4];
        for (int g = 0; g < 4; ++g) {
          x[g] = rows[g] != nullptr ? _mm512_maskz_loadu_epi8(bytes, rows[g] + j)
                                    : _mm512_setzero_si512();
        }
        __m512i w[4];
        words64_s8(x[0], x[1], x[2], x[3], w);
        for (int v = 0; v < 4; ++v) {
          _mm512_mask_storeu_epi32(out + q * n + j + 16 * v,
                                   lanes16(std::max<int64_t>(0, n - j - 16 * v)), w[v]);
        }
      }
    }
    column_sums(sums, out, n, quads, n);
    return;
  }
  if (b.rs == 1 && b.cs % 4 == 0 && k >= 4) {
    // Columns contiguous along k (x @ y.T): each column's whole quads are 32-bit words already,
    // so the layout is a transpose of words; a last partial quad is gathered below.
    const int64_t whole = k / 4;
    transpose_quads(out, reinterpret_cast<const int32_t*>(b.data), b.cs / 4, whole, n, sums);
    if (whole < quads) {
      for (int64_t j = 0; j < n; ++j) {
        uint32_t w = 0;
        for (int64_t p = 4 * whole; p < k; ++p) {
          w |= static_cast<uint32_t>(static_cast<uint8_t>(elem(b, p, j))) << 8 * (p - 4 * whole);
        }
        out[whole * n + j] = w;
      }
      column_sums(sums, out + whole * n, n, 1, n);
    }
    return;
  }
  for (int64_t q = 0; q < quads; ++q) {
    for (int64_t j = 0; j < n; ++j) {
      uint32_t w = 0;
      for (int g = 0; g < 4 && 4 * q + g < k; ++g) {
        w |= static_cast<uint32_t>(static_cast<uint8_t>(elem(b, 4 * q + g, j))) << 8 * g;
      }
      out[q * n + j] = w;
    }
  }
  column_sums(sums, out, n, quads, n);
}

// A + 128 as unsigned bytes, rows of `ld` bytes (zero past k).
[[gnu::target(TESSERA_VNNI_TARGET)]] void pack_a(uint8_t* out, int64_t ld,
                                                 const MatrixView<int8_t>& a, int64_t m,
                                                 int64_t k) {
  const __m512i flip = _mm512_set1_epi8(static_cast<char>(0x80));
  for (int64_t i = 0; i < m; ++i) {
    uint8_t* d = out + i * ld;
    if (a.cs == 1) {
      const int8_t* r = a.data + i * a.rs;
      for (int64_t p = 0; p < k; p += 64) {
        const auto mask =
            k - p >= 64 ? ~__mmask64{0} : (__mmask64{1} << static_cast<unsigned>(k - p)) - 1;
        _mm512_mask_storeu_epi8(d + p, mask,
                                _mm512_xor_si512(_mm512_maskz_loadu_epi8(mask, r + p), flip));
      }
    } else {
      for (int64_t p = 0; p < k; ++p) d[p] = static_cast<uint8_t>(elem(a, i, p) ^ 0x80);
    }
    std::fill(d + k, d + ld, uint8_t{0});
  }
}

// C (m x n) -= 128 · sums[j] in every row, wrapping; `sums` (scratch) becomes 128 · sums. Row by
// row, each row's columns in order: walking a column of 16 down all rows instead touched C's rows
// a row pitch apart, and a pitch of 2 KiB puts 32 rows in two of the L1's sets (on an AMD Zen 4
// class EPYC it was 31% of (32, 128) x (512, 128).T, 17.4 us: docs/performance.md, "bfloat16
// without AMX, on AMD's AVX512-BF16").
[[gnu::target(TESSERA_VNNI_TARGET)]] void take_offset(int32_t* c, int64_t c_rs, int32_t* sums,
                                                      int64_t m, int64_t n) {
  for (int64_t j = 0; j < n; j += 16) {
    const __mmask16 mask = lanes16(n - j);
    // The masked form: GCC 12 warns about the unmasked one's undefined pass-through.
    _mm512_mask_storeu_epi32(
        sums + j, mask, _mm512_maskz_slli_epi32(mask, _mm512_maskz_loadu_epi32(mask, sums + j), 7));
  }
  for (int64_t i = 0; i < m; ++i) {
    int32_t* row = c + i * c_rs;
    for (int64_t j = 0; j < n; j += 16) {
      const __mmask16 mask = lanes16(n - j);
      _mm512_mask_storeu_epi32(row + j, mask,
                               _mm512_sub_epi32(_mm512_maskz_loadu_epi32(mask, row + j),
                                                _mm512_maskz_loadu_epi32(mask, sums + j)));
    }
  }
}

bool fits(int64_t v) { return v >= 0 && v <= (int64_t{1} << 30); }

}  // namespace

bool xsmm_s8(int64_t m, int64_t n, int64_t k, MatrixView<int8_t> a, MatrixView<int8_t> b,
             int32_t* c, int64_t c_rs, bool accumulate) {
  (void)gemm_target();  // initialises libxsmm and its target (gemm.cc)
  if (libxsmm_get_target_archid() < LIBXSMM_X86_AVX512_CLX || m <= 0 || n <= 0 || k <= 0) {
    return false;
  }
  const int64_t k4 = (k + 3) / 4 * 4;
  if (!fits(m) || !fits(n) || !fits(k4) || !fits(c_rs) || c_rs < n) return false;
  // A B whose quads pass half the L2 is packed and multiplied a slab of k at a time, each slab
  // adding to what the earlier ones left in C, so that the packed slab is read from L2 by every
  // few rows of A rather than from memory (docs/performance.md, "Without AMX").
  const int64_t slab = std::min(k4, std::max<int64_t>(1, gemm_l2_bytes() / 2 / (4 * n)) * 4);
  auto dispatch = [&](int64_t kk, bool acc) {
    return reinterpret_cast<libxsmm_subimmfunction>(gemm_s8_kernel(n, m, kk, k4, c_rs, acc));
  };
  // Every kernel the slabs need, before anything is written.
  const libxsmm_subimmfunction first = dispatch(slab, accumulate);
  const libxsmm_subimmfunction rest = slab < k4 ? dispatch(slab, true) : first;
  const libxsmm_subimmfunction tail =
      k4 % slab != 0 && k4 > slab ? dispatch(k4 % slab, true) : rest;
  if (first == nullptr || rest == nullptr || tail == nullptr) return false;
  auto* pa = tl_vnni_a.get<uint8_t>(m * k4);
  pack_a(pa, k4, a, m, k);
  auto* pb = tl_vnni_b.get<uint32_t>(slab / 4 * n);
  auto* sums = tl_colsum.get<int32_t>(n);
  std::fill(sums, sums + n, 0);
  for (int64_t p0 = 0; p0 < k4; p0 += slab) {
    const int64_t p1 = std::min(p0 + slab, k4);
    pack_b(pb, MatrixView<int8_t>{b.data + p0 * b.rs, b.rs, b.cs}, std::min(p1, k) - p0, n, sums);
    const libxsmm_subimmfunction fn = p0 == 0 ? first : (p1 - p0 == slab ? rest : tail);
    fn(reinterpret_cast<const char*>(pb), pa + p0, c);
  }
  take_offset(c, c_rs, sums, m, n);
  return true;
}

}  // namespace tessera::detail
