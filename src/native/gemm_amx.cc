// The AMX tile GEMMs: C (+)= A · B on Intel AMX tiles, bfloat16 (TDPBF16PS, float32 sums) and int8
// (TDPBSSD, int32 sums).
//
// A tile register holds 16 rows of 64 bytes. A · B over one tile step multiplies an A tile (16 rows
// of C, 64 bytes of k: 32 bf16 or 64 int8 values) by a B tile of 16 rows of "k groups" (2 bf16 or
// 4 int8 values of consecutive k, one 32-bit word) by 16 columns, into a C tile of 16 x 16 float32
// or int32. The micro-kernel keeps a 32 x 32 block of C in four tiles, two A tiles and two B tiles
// (all eight tile registers), and walks k.
//
// Layouts. A is read where it lies when its rows are contiguous along k and k is a whole number
// of tile steps (the padding of a partial step must be zeros, and A's memory past k is not);
// otherwise it is copied, zero-padded, into a per-thread buffer, and so are the last, partial 32
// rows of A. B is always packed, once per call, into panels of 32 columns: for each tile step,
// the two B tiles of the panel, 1 KiB each, contiguous (word (r, c) of tile t of step s of panel
// p holds B(s * 16G + r * G + g, p * 32 + t * 16 + c), g < G), zero past k and n. C blocks at the
// right or bottom edge go through a 32 x 32 buffer on the stack.
//
// Cache blocking: a 32-row block of A times a run of k steps is kept within half the L1 data
// cache the CPU reports, and reused across every panel of B (which stays in L2); when there are
// enough panels to repay it, the block is first copied into rows of that run's length, so that
// rows of A a multiple of 4 KiB apart do not all fall in the same sets of the L1.
//
// The OS side: Linux enables AMX tile data per process on request (arch_prctl
// ARCH_REQ_XCOMP_PERM); amx_support() asks once. The tile configuration is per thread: every call
// loads it and releases the tiles at the end (so a context switch does not save 8 KiB of tiles).
#include "native/gemm_amx.h"

#include <cpuid.h>
#include <immintrin.h>
#include <unistd.h>

#include <algorithm>
#include <cstddef>
#include <cstring>

#include "native/gemm.h"
#include "native/gemm_scratch.h"
#include "native/gemm_transpose.h"
#include "native/int8_quads-inl.h"
#include "native/transpose16-inl.h"

#if defined(__linux__)
#include <sys/syscall.h>
#endif

namespace tessera::detail {

namespace {

constexpr int kArchReqXcompPerm = 0x1023;  // <asm/prctl.h>
constexpr int kXfeatureXtiledata = 18;

AmxSupport detect() noexcept {
  unsigned a = 0, b = 0, c = 0, d = 0;
  if (__get_cpuid(1, &a, &b, &c, &d) == 0 || (c & bit_OSXSAVE) == 0) return {};
  if (__get_cpuid_count(7, 0, &a, &b, &c, &d) == 0) return {};
  const bool tile = (d & (1u << 24)) != 0;
  const bool bf16 = (d & (1u << 22)) != 0;
  const bool int8 = (d & (1u << 25)) != 0;
  // Also needed: AVX512BW/VL (the packing code), which every AMX CPU has.
  if (!tile || (b & (1u << 30)) == 0 || (b & (1u << 31)) == 0) return {};
  unsigned xcr0_lo = 0, xcr0_hi = 0;
  __asm__ volatile("xgetbv" : "=a"(xcr0_lo), "=d"(xcr0_hi) : "c"(0));
  if ((xcr0_lo & (3u << 17)) != (3u << 17)) return {};  // XTILECFG and XTILEDATA
#if defined(__linux__)
  if (syscall(SYS_arch_prctl, kArchReqXcompPerm, kXfeatureXtiledata) != 0) return {};
#else
  return {};
#endif
  return AmxSupport{bf16, int8};
}

// The tile configuration (palette 1): every tile 16 rows of 64 bytes.
struct alignas(64) TileConfig {
  uint8_t palette = 1;
  uint8_t start_row = 0;
  uint8_t reserved[14] = {};
  uint16_t colsb[16] = {};
  uint8_t rows[16] = {};
};

// `rows`: the rows of the C and A tiles (16, or fewer for a C of fewer rows: the tiles then
// read and write only those, and a tile multiply takes time in proportion); B's are always 16.
[[gnu::target("amx-tile")]] void load_tile_config(int rows) noexcept {
  TileConfig cfg;
  for (int t = 0; t < 8; ++t) {
    cfg.colsb[t] = 64;
    cfg.rows[t] = static_cast<uint8_t>(t < 6 ? rows : 16);
  }
  // GCC 12's _tile_loadconfig names only the first 8 bytes of the configuration as its memory
  // operand, so the compiler may drop the stores to the rest as dead; the whole struct is the
  // operand here.
  __asm__ volatile("ldtilecfg %0" : : "m"(cfg));
}

[[gnu::target("amx-tile")]] void release_tiles() noexcept { _tile_release(); }

// A block of C of NA x NB tiles (16 x 16 each) at `c` (row stride `c_stride` bytes) (+)= the
// 16 * NA rows of A at `a` (row stride `a_stride` bytes, k contiguous) times the B panel `bp` over
// `steps` tile steps. Tiles 0-3 hold C, 4-5 A, 6-7 B.
//
// Nothing is prefetched by software: the hardware's prefetchers follow B's panel, which is
// contiguous, and the block of A stays in L1. Prefetching the next block's B panel and C rows
// into L1 while a block computes was measured slower (Sapphire Rapids class, 48 KiB L1, bf16,
// 1 core, (1024, 256) x (256, 1024) accumulated: 750-775 GFLOP/s with both, 840-850 without the
// B panel's, ~905 without either, 758 with C's prefetched into L2 only; docs/performance.md).
// A block of 8 steps of A, its B panel and the next one are 16 KiB each, the whole L1, and the
// next block's C rows, a row of the accumulator apart (4 KiB for 1024 columns), share its sets.
template <bool kInt8, int NA, int NB>
[[gnu::target("amx-tile,amx-bf16,amx-int8")]] void block(std::byte* c, int64_t c_stride, bool load,
                                                         const std::byte* a, int64_t a_stride,
                                                         const uint32_t* bp, int64_t steps) {
  std::byte* c1 = c + 16 * c_stride;
  if (load) {
    _tile_loadd(0, c, c_stride);
    if constexpr (NB == 2) _tile_loadd(1, c + 64, c_stride);
    if constexpr (NA == 2) _tile_loadd(2, c1, c_stride);
    if constexpr (NA == 2 && NB == 2) _tile_loadd(3, c1 + 64, c_stride);
  } else {
    _tile_zero(0);
    if constexpr (NB == 2) _tile_zero(1);
    if constexpr (NA == 2) _tile_zero(2);
    if constexpr (NA == 2 && NB == 2) _tile_zero(3);
  }
  const std::byte* a1 = a + 16 * a_stride;
  for (int64_t s = 0; s < steps; ++s) {
    _tile_loadd(4, a + s * 64, a_stride);
    if constexpr (NA == 2) _tile_loadd(5, a1 + s * 64, a_stride);
    _tile_loadd(6, bp + s * 512, 64);
    if constexpr (NB == 2) _tile_loadd(7, bp + s * 512 + 256, 64);
    if constexpr (kInt8) {
      _tile_dpbssd(0, 4, 6);
      if constexpr (NB == 2) _tile_dpbssd(1, 4, 7);
      if constexpr (NA == 2) _tile_dpbssd(2, 5, 6);
      if constexpr (NA == 2 && NB == 2) _tile_dpbssd(3, 5, 7);
    } else {
      _tile_dpbf16ps(0, 4, 6);
      if constexpr (NB == 2) _tile_dpbf16ps(1, 4, 7);
      if constexpr (NA == 2) _tile_dpbf16ps(2, 5, 6);
      if constexpr (NA == 2 && NB == 2) _tile_dpbf16ps(3, 5, 7);
    }
  }
  _tile_stored(0, c, c_stride);
  if constexpr (NB == 2) _tile_stored(1, c + 64, c_stride);
  if constexpr (NA == 2) _tile_stored(2, c1, c_stride);
  if constexpr (NA == 2 && NB == 2) _tile_stored(3, c1 + 64, c_stride);
}

// The raw bits of element (i, j) of a view.
template <class T>
uint32_t raw(const MatrixView<T>& v, int64_t i, int64_t j) {
  using U = std::conditional_t<sizeof(T) == 2, uint16_t, uint8_t>;
  U u;
  std::memcpy(&u, v.data + i * v.rs + j * v.cs, sizeof(U));
  return u;
}

// One 32-bit word of B: the G elements B(p .. p + G - 1, j), zero past k and n.
template <class T>
uint32_t b_word(const MatrixView<T>& b, int64_t k, int64_t n, int64_t p, int64_t j) {
  constexpr int G = 4 / static_cast<int>(sizeof(T));
  uint32_t w = 0;
  if (j >= n) return 0;
  for (int g = 0; g < G && p + g < k; ++g) w |= raw(b, p + g, j) << (g * 8 * sizeof(T));
  return w;
}

// 16 words of B for rows p .. p + G - 1 (those below k) and columns j0 .. j0 + cols - 1, B's rows
// contiguous (b.cs == 1).
template <class T>
[[gnu::always_inline, gnu::target("avx512f,avx512bw,avx512vl")]] inline void words_from_rows(
    uint32_t* dst, const MatrixView<T>& b, int64_t k, int64_t p, int64_t j0, int64_t cols) {
  constexpr int G = 4 / static_cast<int>(sizeof(T));
  const auto mask = static_cast<__mmask16>(cols >= 16 ? 0xffffu : (1u << cols) - 1u);
  __m512i w = _mm512_setzero_si512();
  for (int g = 0; g < G && p + g < k; ++g) {
    const T* row = b.data + (p + g) * b.rs + j0;
    __m512i v;
    if constexpr (sizeof(T) == 2) {
      v = _mm512_maskz_cvtepu16_epi32(mask, _mm256_maskz_loadu_epi16(mask, row));
    } else {
      v = _mm512_maskz_cvtepu8_epi32(mask, _mm_maskz_loadu_epi8(mask, row));
    }
    // The zero-masked shift (every lane selected): GCC 12's unmasked form warns.
    w = _mm512_or_si512(w, _mm512_maskz_sll_epi32(
                               0xffff, v, _mm_cvtsi32_si128(static_cast<int>(g * 8 * sizeof(T)))));
  }
  _mm512_storeu_si512(dst, w);
}

// 16 words of B for rows p .. p + G - 1 (all below k) and columns j0 .. j0 + cols - 1, B read
// transposed (b.rs == 1: each column of B is contiguous along k), gathered.
template <class T>
[[gnu::always_inline, gnu::target("avx512f,avx512bw,avx512vl")]] inline void words_from_columns(
    uint32_t* dst, const MatrixView<T>& b, int64_t p, int64_t j0, int64_t cols) {
  const auto mask = static_cast<__mmask16>(cols >= 16 ? 0xffffu : (1u << cols) - 1u);
  const __m512i index =
      _mm512_mullo_epi32(_mm512_set_epi32(15, 14, 13, 12, 11, 10, 9, 8, 7, 6, 5, 4, 3, 2, 1, 0),
                         _mm512_set1_epi32(static_cast<int>(b.cs * sizeof(T))));
  const __m512i w =
      _mm512_mask_i32gather_epi32(_mm512_setzero_si512(), mask, index, b.data + p + j0 * b.cs, 1);
  _mm512_storeu_si512(dst, w);
}

// Where word row r of tile t of step s of panel jp starts.
inline uint32_t* tile_row(uint32_t* bp, int64_t steps, int64_t jp, int64_t s, int t, int r) {
  return bp + ((jp * steps + s) * 2 + t) * 256 + r * 16;
}

// Words of 32 bfloat16 columns of rows p and p + 1 (B's rows contiguous), in column order: the
// 16-bit unpacks interleave the two rows within 128-bit lanes, a 64-bit permute restores the order.
[[gnu::always_inline, gnu::target("avx512f,avx512bw,avx512vl")]] inline void words32_bf16(
    const bfloat16* r0, const bfloat16* r1, uint32_t* d0, uint32_t* d1) {
  const __m512i a = _mm512_loadu_si512(r0);
  const __m512i b = _mm512_loadu_si512(r1);
  const __m512i lo = _mm512_maskz_unpacklo_epi16(~__mmask32{0}, a, b);  // columns 8L .. 8L + 3
  const __m512i hi = _mm512_maskz_unpackhi_epi16(~__mmask32{0}, a, b);  // columns 8L + 4 .. 8L + 7
  _mm512_storeu_si512(
      d0, _mm512_permutex2var_epi64(lo, _mm512_set_epi64(11, 10, 3, 2, 9, 8, 1, 0), hi));
  _mm512_storeu_si512(
      d1, _mm512_permutex2var_epi64(lo, _mm512_set_epi64(15, 14, 7, 6, 13, 12, 5, 4), hi));
}

// B's rows contiguous: whole groups of columns (32 bfloat16, 64 int8: one or two panels) with the
// unpack kernels above, walked group by group so that the stores fill consecutive tiles (walking
// B row by row instead stores to every panel in turn, at a stride that maps them all to the same
// L1 sets); the rest 16 columns at a time, zeros past n.
template <class T>
[[gnu::target("avx512f,avx512bw,avx512vl")]] void pack_b_rows(uint32_t* bp, const MatrixView<T>& b,
                                                              int64_t k, int64_t n, int64_t steps,
                                                              int64_t panels) {
  constexpr int G = 4 / static_cast<int>(sizeof(T));
  constexpr int64_t kGroup = sizeof(T) == 2 ? 32 : 64;
  // Four groups at a time: each row of B is then read in runs of 4 or more cache lines.
  constexpr int64_t kChunk = 4 * kGroup;
  const int64_t full = n / kGroup * kGroup;
  int64_t j0 = 0;
  for (int64_t c0 = 0; c0 < full; c0 += kChunk) {
    const int64_t c1 = std::min(c0 + kChunk, full);
    for (int64_t s = 0; s < steps; ++s) {
      for (int r = 0; r < 16; ++r) {
        const int64_t p = s * 16 * G + r * G;
        for (j0 = c0; j0 < c1; j0 += kGroup) {
          const int64_t jp = j0 / 32;
          if (p + G > k) {
            for (int64_t j = j0; j < j0 + kGroup; j += 16) {
              uint32_t* row = tile_row(bp, steps, j / 32, s, static_cast<int>(j / 16 % 2), r);
              if (p >= k) {
                std::fill(row, row + 16, 0u);
              } else {
                words_from_rows(row, b, k, p, j, 16);
              }
            }
          } else if constexpr (sizeof(T) == 2) {
            const T* r0 = b.data + p * b.rs + j0;
            words32_bf16(r0, r0 + b.rs, tile_row(bp, steps, jp, s, 0, r),
                         tile_row(bp, steps, jp, s, 1, r));
          } else {
            const T* rows[4];
            for (int g = 0; g < 4; ++g) rows[g] = b.data + (p + g) * b.rs + j0;
            uint32_t* d[4] = {tile_row(bp, steps, jp, s, 0, r), tile_row(bp, steps, jp, s, 1, r),
                              tile_row(bp, steps, jp + 1, s, 0, r),
                              tile_row(bp, steps, jp + 1, s, 1, r)};
            words64_s8(rows, d);
          }
        }
      }
    }
  }
  j0 = full;
  for (; j0 < panels * 32; j0 += 16) {
    const int64_t cols = std::clamp<int64_t>(n - j0, 0, 16);
    for (int64_t s = 0; s < steps; ++s) {
      for (int r = 0; r < 16; ++r) {
        const int64_t p = s * 16 * G + r * G;
        uint32_t* row = tile_row(bp, steps, j0 / 32, s, static_cast<int>(j0 / 16 % 2), r);
        if (p >= k || cols == 0) {
          std::fill(row, row + 16, 0u);
        } else {
          words_from_rows(row, b, k, p, j0, cols);
        }
      }
    }
  }
}

// One whole B tile of bfloat16 read transposed (b.rs == 1: each column of B contiguous along k,
// x @ y.T's y): its 16 columns' 16 words (pairs of consecutive k) are 16 rows of 64 bytes, and a
// 16 x 16 transpose of 32-bit words in registers makes them the tile's rows (a gather per row
// cost ~50 cycles: flash attention's q @ k.T spent half its packing there).
[[gnu::always_inline, gnu::target(TESSERA_TRANSPOSE16_TARGET)]] inline void tile_from_columns(
    uint32_t* tile, const bfloat16* col0, int64_t cs) {
  __m512 r[16];
  for (int c = 0; c < 16; ++c) r[c] = _mm512_castsi512_ps(_mm512_loadu_si512(col0 + c * cs));
  transpose16(r);
  for (int q = 0; q < 16; ++q) _mm512_storeu_ps(tile + q * 16, r[q]);
}

// Packs B (k x n) into panels (see the file comment): `steps` tile steps, `panels` panels.
template <class T>
[[gnu::target(TESSERA_TRANSPOSE16_TARGET)]] void pack_b(uint32_t* bp, const MatrixView<T>& b,
                                                        int64_t k, int64_t n, int64_t steps,
                                                        int64_t panels) {
  constexpr int G = 4 / static_cast<int>(sizeof(T));
  if (b.cs == 1) {
    pack_b_rows(bp, b, k, n, steps, panels);
    return;
  }
  // The gather's byte offsets are 32-bit: columns up to 15 apart.
  const bool by_columns = b.rs == 1 && b.cs * 15 * int64_t{sizeof(T)} < (1LL << 31);
  for (int64_t jp = 0; jp < panels; ++jp) {
    for (int64_t s = 0; s < steps; ++s) {
      for (int t = 0; t < 2; ++t) {
        const int64_t j0 = jp * 32 + t * 16;
        const int64_t cols = std::clamp<int64_t>(n - j0, 0, 16);
        if constexpr (sizeof(T) == 2) {
          if (b.rs == 1 && cols == 16 && (s + 1) * 16 * G <= k) {
            tile_from_columns(tile_row(bp, steps, jp, s, t, 0), b.data + j0 * b.cs + s * 16 * G,
                              b.cs);
            continue;
          }
        }
        for (int r = 0; r < 16; ++r) {
          const int64_t p = s * 16 * G + r * G;
          uint32_t* row = tile_row(bp, steps, jp, s, t, r);
          if (p >= k || cols == 0) {
            std::fill(row, row + 16, 0u);
          } else if (by_columns && p + G <= k) {
            words_from_columns(row, b, p, j0, cols);
          } else {
            for (int c = 0; c < 16; ++c) row[c] = b_word(b, k, n, p, j0 + c);
          }
        }
      }
    }
  }
}

// Copies rows [i0, i0 + rows) of A into `dst` (row length `ld` >= k elements, `rows_pad` rows),
// zero-padded.
template <class T>
void pack_a(T* dst, int64_t ld, int64_t rows_pad, const MatrixView<T>& a, int64_t i0, int64_t rows,
            int64_t k) {
  std::memset(static_cast<void*>(dst), 0, static_cast<size_t>(ld * rows_pad) * sizeof(T));
  for (int64_t i = 0; i < rows; ++i) {
    const T* src = a.data + (i0 + i) * a.rs;
    T* d = dst + i * ld;
    if (a.cs == 1) {
      std::memcpy(static_cast<void*>(d), src, static_cast<size_t>(k) * sizeof(T));
    } else {
      for (int64_t p = 0; p < k; ++p) d[p] = src[p * a.cs];
    }
  }
}

thread_local GemmScratch tl_amx_b;
thread_local GemmScratch tl_amx_a;
thread_local GemmScratch tl_amx_tail;
thread_local GemmScratch tl_amx_rows;

// Tile steps per pass over k: a 32-row block of A over them fills at most half the L1 data cache
// the CPU reports (32 KiB when it reports nothing), split evenly over `steps`.
int64_t steps_per_pass(int64_t steps) {
  static const int64_t fit = std::max<int64_t>(1, gemm_l1d_bytes() / 2 / (32 * 64));
  const int64_t passes = (steps + fit - 1) / fit;
  return (steps + passes - 1) / passes;
}

// Where the rows of A come from: rows [0, direct_rows) at `a` (row stride `stride` bytes), the
// rest from `tail` (a block of `rows` zero-padded rows).
struct ARows {
  const std::byte* a = nullptr;
  int64_t stride = 0;
  int64_t direct_rows = 0;
  const std::byte* tail = nullptr;
  int64_t tail_stride = 0;
};

// `rows`: the rows of a block of C (16 or 32).
template <class T>
ARows prepare_a(const MatrixView<T>& a, int64_t m, int64_t k, int64_t kpad, int64_t rows) {
  ARows r;
  if (a.cs == 1 && k == kpad) {
    r.a = reinterpret_cast<const std::byte*>(a.data);
    r.stride = a.rs * static_cast<int64_t>(sizeof(T));
    r.direct_rows = m / rows * rows;
    if (r.direct_rows < m) {
      T* t = tl_amx_tail.get<T>(rows * kpad);
      pack_a(t, kpad, rows, a, r.direct_rows, m - r.direct_rows, k);
      r.tail = reinterpret_cast<const std::byte*>(t);
      r.tail_stride = kpad * static_cast<int64_t>(sizeof(T));
    }
    return r;
  }
  const int64_t mpad = (m + rows - 1) / rows * rows;
  T* p = tl_amx_a.get<T>(mpad * kpad);
  pack_a(p, kpad, mpad, a, 0, m, k);
  r.a = reinterpret_cast<const std::byte*>(p);
  r.stride = kpad * static_cast<int64_t>(sizeof(T));
  r.direct_rows = mpad;
  return r;
}

// C's block at (i0, j0), partial at the edges: through a buffer on the stack.
template <bool kInt8, int NA, int NB, class C>
void edge_block(C* c, int64_t c_rs, int64_t m, int64_t n, int64_t i0, int64_t j0,
                int64_t block_rows, bool load, const std::byte* a, int64_t a_stride,
                const uint32_t* bp, int64_t steps) {
  alignas(64) C tmp[32 * 32] = {};
  const int64_t rows = std::min<int64_t>(block_rows, m - i0);
  const int64_t cols = std::min<int64_t>(16 * NB, n - j0);
  if (load) {
    for (int64_t i = 0; i < rows; ++i) {
      std::memcpy(tmp + i * 32, c + (i0 + i) * c_rs + j0, static_cast<size_t>(cols) * sizeof(C));
    }
  }
  block<kInt8, NA, NB>(reinterpret_cast<std::byte*>(tmp), 32 * sizeof(C), true, a, a_stride, bp,
                       steps);
  for (int64_t i = 0; i < rows; ++i) {
    std::memcpy(c + (i0 + i) * c_rs + j0, tmp + i * 32, static_cast<size_t>(cols) * sizeof(C));
  }
}

// C (+)= A · B on tiles, C's blocks NA x NB tiles (fewer than 32 rows or columns in all: 1).
// C's block at (i0, j0), added to (`accumulate`) or written into D = C^T (row stride d_rs)
// instead of C: through a buffer on the stack, transposed on the way out. One pass over k only.
template <bool kInt8, int NA, int NB, class C>
void transposed_block(C* d, int64_t d_rs, int64_t m, int64_t n, int64_t i0, int64_t j0,
                      int64_t block_rows, bool accumulate, const std::byte* a, int64_t a_stride,
                      const uint32_t* bp, int64_t steps) {
  alignas(64) C tmp[32 * 32];
  block<kInt8, NA, NB>(reinterpret_cast<std::byte*>(tmp), 32 * sizeof(C), false, a, a_stride, bp,
                       steps);
  const int64_t rows = std::min<int64_t>(block_rows, m - i0);
  const int64_t cols = std::min<int64_t>(16 * NB, n - j0);
  transpose_into(d + j0 * d_rs + i0, d_rs, tmp, 32, cols, rows, accumulate);
}

// One row of blocks (C has at most 16 * NA rows) in one pass over k: B's panels are packed two
// at a time just before their blocks run, into a buffer that stays in L1: the tile unit
// multiplies one pair while the core packs the next, and no packed B is written out to L2 and
// read back (measured: a (8, 128) x (128, 512) bf16 dot 5.3-5.9 -> 3.2-3.6 us). Two panels are
// 128 bytes of each bfloat16 row of B (int8's packing works 64 columns at a time anyway), a pair
// of cache lines read together, where one panel read a single line of each row: when B comes
// from beyond the L2, as a kernel's next block of B does, that walk was latency-bound
// (bfloat16, 8 rows, k 256, n 512: 31-33 against 18-19 us; k 384: 48-49 against 26), and from
// L2 it was mostly no faster (7.1-7.2 against 7.1-9.1 us; k 384: 19-21 against 15; `bench dot`,
// k 128, 4-16 rows: 4.5-6.4 against 3.9-4.6 us). Slower with pairs: n 128 and k 256 from L2,
// 2.0 against 2.9 us (oneDNN 3.9-4.1), with only two pairs to overlap; docs/performance.md.
template <class T, class C, int NA, int NB>
void amx_one_row(int64_t m, int64_t n, int64_t k, const MatrixView<T>& a, const MatrixView<T>& b,
                 C* c, int64_t c_rs, int64_t c_cols, bool accumulate, int tile_rows,
                 int64_t steps) {
  constexpr bool kInt8 = sizeof(T) == 1;
  constexpr int64_t kStepK = 64 / sizeof(T);
  constexpr int64_t kPack = 2;  // panels packed at a time
  const int64_t rows = NA * tile_rows;
  const int64_t panels = (n + 31) / 32;
  const ARows ar = prepare_a(a, m, k, steps * kStepK, rows);
  uint32_t* buf = tl_amx_b.get<uint32_t>(kPack * steps * 512);
  const int64_t a_stride = ar.direct_rows > 0 ? ar.stride : ar.tail_stride;
  const std::byte* arow = ar.direct_rows > 0 ? ar.a : ar.tail;
  load_tile_config(tile_rows);
  for (int64_t jp0 = 0; jp0 < panels; jp0 += kPack) {
    const int64_t j00 = jp0 * 32;
    const int64_t np = std::min(kPack, panels - jp0);
    pack_b(buf, MatrixView<T>{b.data + j00 * b.cs, b.rs, b.cs}, k, std::min(np * 32, n - j00),
           steps, np);
    for (int64_t q = 0; q < np; ++q) {
      const uint32_t* bpp = buf + q * steps * 512;
      const int64_t j0 = j00 + q * 32;
      if (rows <= m && j0 + 16 * NB <= c_cols) {
        block<kInt8, NA, NB>(reinterpret_cast<std::byte*>(c + j0),
                             c_rs * static_cast<int64_t>(sizeof(C)), accumulate, arow, a_stride,
                             bpp, steps);
      } else {
        edge_block<kInt8, NA, NB>(c, c_rs, m, n, 0, j0, rows, accumulate, arow, a_stride, bpp,
                                  steps);
      }
    }
  }
  release_tiles();
}

// Whether a block of `rows` rows of A read where it lies, `stride` bytes apart, each `pass_bytes`
// long from `a`, crowds the L1: the most lines of it that fall in any one set of the L1, whose
// ways are 4 KiB each (a virtually indexed L1 of 4 KiB pages: 48 KiB of 12 ways, 32 KiB of 8),
// pass two thirds of the ways, which leaves too few for B's panel beside it. Measured on a
// Sapphire Rapids class CPU (docs/performance.md, "bfloat16: the columns split among the
// cores"): rows 1 KiB apart put 8 lines in a set and ran faster in place (512³), 1.5 KiB 4
// (768³), while rows 2 KiB apart, 16 a set, ran faster copied (1024³), as 4 KiB ones (32) did.
// The answer depends on the addresses only modulo 4 KiB; the last four are kept per thread (a
// kernel's dots repeat their shapes and strides step after step: flash attention's two a step).
bool rows_crowd_l1(const std::byte* a, int64_t stride, int64_t rows, int64_t pass_bytes) {
  constexpr int64_t kSets = 4096 / 64;
  struct Seen {
    uintptr_t a = ~uintptr_t{0};
    int64_t stride = 0, rows = 0, pass_bytes = 0;
    bool crowd = false;
  };
  thread_local Seen seen[4];
  thread_local int next = 0;
  const uintptr_t a_mod = reinterpret_cast<uintptr_t>(a) % 4096;
  const int64_t stride_mod = stride % 4096;
  for (const Seen& e : seen) {
    if (e.a == a_mod && e.stride == stride_mod && e.rows == rows && e.pass_bytes == pass_bytes) {
      return e.crowd;
    }
  }
  const int64_t ways = std::max<int64_t>(1, gemm_l1d_bytes() / 4096);
  int count[kSets] = {};
  int most = 0;
  for (int64_t r = 0; r < rows; ++r) {
    const auto first = reinterpret_cast<uintptr_t>(a + r * stride) / 64;
    const auto end = (reinterpret_cast<uintptr_t>(a + r * stride + pass_bytes) - 1) / 64;
    for (uintptr_t line = first; line <= end && line < first + kSets; ++line) {
      most = std::max(most, ++count[line % kSets]);
    }
  }
  Seen& e = seen[next];
  next = (next + 1) % 4;
  e = Seen{a_mod, stride_mod, rows, pass_bytes, 3 * most > 2 * ways};
  return e.crowd;
}

// `c_cols` >= n: the columns of C that may be written (a padded temporary's), so that blocks
// inside them are stored directly. With `d`, C's blocks go transposed into D = C^T instead
// (transposed_block; k must fit one pass).
template <class T, class C, int NA, int NB>
void amx_blocks(int64_t m, int64_t n, int64_t k, const MatrixView<T>& a, const MatrixView<T>& b,
                C* c, int64_t c_rs, int64_t c_cols, bool accumulate, C* d = nullptr,
                int64_t d_rs = 0) {
  constexpr bool kInt8 = sizeof(T) == 1;
  constexpr int64_t kStepK = 64 / sizeof(T);  // k per tile step
  // A C of fewer than 16 rows takes tiles of that many rows (no padding, no edge buffer).
  const int tile_rows = NA == 1 && m < 16 ? static_cast<int>(m) : 16;
  const int64_t kRows = NA * tile_rows;
  const int64_t steps = (k + kStepK - 1) / kStepK;
  if (d == nullptr && m <= kRows && steps_per_pass(steps) >= steps) {
    amx_one_row<T, C, NA, NB>(m, n, k, a, b, c, c_rs, c_cols, accumulate, tile_rows, steps);
    return;
  }
  const int64_t panels = (n + 31) / 32;
  uint32_t* bp = tl_amx_b.get<uint32_t>(panels * steps * 512);
  pack_b(bp, b, k, n, steps, panels);
  const ARows ar = prepare_a(a, m, k, steps * kStepK, kRows);
  const int64_t pass = steps_per_pass(steps);
  // A block read where it lies is copied, one pass at a time, into a buffer of rows one pass
  // long before the panels of B use it, where its rows crowd the L1: in place, they lie a row of
  // A apart, and when that is a multiple of 4 KiB (a power-of-two k) every row falls in the same
  // sets of the L1, which then cannot hold the block across the panels.
  const bool copy_rows = panels >= 4 && ar.direct_rows > 0 &&
                         rows_crowd_l1(ar.a, ar.stride, std::min(kRows, ar.direct_rows), pass * 64);
  std::byte* rows_buf = copy_rows ? tl_amx_rows.get<std::byte>(kRows * pass * 64) : nullptr;
  load_tile_config(tile_rows);
  for (int64_t s0 = 0; s0 < steps; s0 += pass) {
    const int64_t ns = std::min(pass, steps - s0);
    const bool load = accumulate || s0 > 0;
    for (int64_t i0 = 0; i0 < m; i0 += kRows) {
      const bool direct = i0 < ar.direct_rows;
      int64_t a_stride = direct ? ar.stride : ar.tail_stride;
      const std::byte* arow = (direct ? ar.a + i0 * ar.stride : ar.tail) + s0 * 64;
      if (direct && rows_buf != nullptr) {
        for (int64_t r = 0; r < kRows; ++r) {
          std::memcpy(rows_buf + r * ns * 64, arow + r * a_stride, static_cast<size_t>(ns * 64));
        }
        arow = rows_buf;
        a_stride = ns * 64;
      }
      for (int64_t jp = 0; jp < panels; ++jp) {
        const uint32_t* bpp = bp + (jp * steps + s0) * 512;
        const int64_t j0 = jp * 32;
        if (d != nullptr) {
          transposed_block<kInt8, NA, NB>(d, d_rs, m, n, i0, j0, kRows, accumulate, arow, a_stride,
                                          bpp, ns);
        } else if (i0 + kRows <= m && j0 + 16 * NB <= c_cols) {
          block<kInt8, NA, NB>(reinterpret_cast<std::byte*>(c + i0 * c_rs + j0),
                               c_rs * static_cast<int64_t>(sizeof(C)), load, arow, a_stride, bpp,
                               ns);
        } else {
          edge_block<kInt8, NA, NB>(c, c_rs, m, n, i0, j0, kRows, load, arow, a_stride, bpp, ns);
        }
      }
    }
  }
  release_tiles();
}

template <class T, class C>
void amx_direct(int64_t m, int64_t n, int64_t k, const MatrixView<T>& a, const MatrixView<T>& b,
                C* c, int64_t c_rs, int64_t c_cols, bool accumulate) {
  if (m <= 16 && n <= 16) return amx_blocks<T, C, 1, 1>(m, n, k, a, b, c, c_rs, c_cols, accumulate);
  if (m <= 16) return amx_blocks<T, C, 1, 2>(m, n, k, a, b, c, c_rs, c_cols, accumulate);
  if (n <= 16) return amx_blocks<T, C, 2, 1>(m, n, k, a, b, c, c_rs, c_cols, accumulate);
  amx_blocks<T, C, 2, 2>(m, n, k, a, b, c, c_rs, c_cols, accumulate);
}

thread_local GemmScratch tl_amx_ct;

// x @ y.T (B's columns contiguous along k) with few rows of x: C^T = y · x^T takes y's rows as
// the A tiles where they lie and packs only x, then transposes C^T into C. Moving m·k + 2·n·m
// elements instead of packing B's k·n is the better deal when m is small (decode-sized dots).
template <class T, class C>
bool amx_swapped(int64_t m, int64_t n, int64_t k, const MatrixView<T>& a, const MatrixView<T>& b,
                 C* c, int64_t c_rs, bool accumulate) {
  constexpr int64_t kStepK = 64 / sizeof(T);
  if (b.rs != 1 || k % kStepK != 0 || m * (k + 2 * n) >= k * n) return false;
  const MatrixView<T> yt{b.data, b.cs, 1};     // y, (n, k): C^T's "A"
  const MatrixView<T> xt{a.data, a.cs, a.rs};  // x^T, (k, m): C^T's "B"
  if (steps_per_pass(k / kStepK) >= k / kStepK) {
    // One pass over k: each block of C^T goes transposed into C as it leaves the tiles.
    if (n <= 16 && m <= 16) {
      amx_blocks<T, C, 1, 1>(n, m, k, yt, xt, nullptr, 0, 0, accumulate, c, c_rs);
    } else if (n <= 16) {
      amx_blocks<T, C, 1, 2>(n, m, k, yt, xt, nullptr, 0, 0, accumulate, c, c_rs);
    } else if (m <= 16) {
      amx_blocks<T, C, 2, 1>(n, m, k, yt, xt, nullptr, 0, 0, accumulate, c, c_rs);
    } else {
      amx_blocks<T, C, 2, 2>(n, m, k, yt, xt, nullptr, 0, 0, accumulate, c, c_rs);
    }
    return true;
  }
  const int64_t ld = (m + 15) / 16 * 16;
  C* ct = tl_amx_ct.get<C>(n * ld);
  amx_direct(n, m, k, yt, xt, ct, ld, ld, false);
  transpose_into(c, c_rs, ct, ld, m, n, accumulate);
  return true;
}

// The direct path packs all of B for each call, and a C of at most 32 rows with a k that one pass
// over the L1 takes runs a panel pair at a time (amx_one_row). With a longer k, a few rows of C
// would pack a B that goes out to memory and comes back; cut k instead into slabs whose packed B
// fits the L1 the CPU reports (at least one tile step), each slab adding to what the earlier
// ones left in C (int8 sums wrap the same way; float32 sums continue from C's float32 value).
// Each slab then takes the one-row path. Measured in docs/performance.md ("x @ y with a long
// k"): (8, 4096) x (4096, 256) bfloat16 270 -> 85-92 us, int8 60 -> 37-40 us. A C of more rows
// reloads and stores itself once a slab, which the packing it saves does not repay.
template <class T, class C>
void amx_gemm(int64_t m, int64_t n, int64_t k, const MatrixView<T>& a, const MatrixView<T>& b, C* c,
              int64_t c_rs, bool accumulate) {
  if (amx_swapped(m, n, k, a, b, c, c_rs, accumulate)) return;
  constexpr int64_t kStepK = 64 / sizeof(T);
  const int64_t steps = (k + kStepK - 1) / kStepK;
  if (m > 32 || steps_per_pass(steps) >= steps) {
    amx_direct(m, n, k, a, b, c, c_rs, n, accumulate);
    return;
  }
  const int64_t step_bytes = (n + 31) / 32 * 32 * 64;  // one tile step of packed B
  const int64_t slab = std::max<int64_t>(1, gemm_l1d_bytes() / step_bytes) * kStepK;
  for (int64_t p = 0; p < k; p += slab) {
    const MatrixView<T> as{a.data + p * a.cs, a.rs, a.cs};
    const MatrixView<T> bs{b.data + p * b.rs, b.rs, b.cs};
    amx_direct(m, n, std::min(slab, k - p), as, bs, c, c_rs, n, accumulate || p > 0);
  }
}

}  // namespace

AmxSupport amx_support() noexcept {
  static const AmxSupport s = detect();
  return s;
}

void amx_gemm_bf16(int64_t m, int64_t n, int64_t k, MatrixView<bfloat16> a, MatrixView<bfloat16> b,
                   float* c, int64_t c_rs, bool accumulate) {
  amx_gemm(m, n, k, a, b, c, c_rs, accumulate);
}

void amx_gemm_s8(int64_t m, int64_t n, int64_t k, MatrixView<int8_t> a, MatrixView<int8_t> b,
                 int32_t* c, int64_t c_rs, bool accumulate) {
  amx_gemm(m, n, k, a, b, c, c_rs, accumulate);
}

}  // namespace tessera::detail
