// The tile GEMMs behind jnp::dot: libxsmm's JIT kernels where they apply, packing where an
// operand's layout does not suit them, and portable loops otherwise.
//
// libxsmm is column-major; a row-major product C = A·B is the column-major product
// C' = B'·A' with the same memory (X' is X read column-major, i.e. X transposed). So libxsmm's
// "A" is our B (m' = n, k' = k, lda = B's row stride), its "B" is our A (n' = m, ldb = A's row
// stride) and ldc is C's row stride. libxsmm 1.17 JIT-compiles NN and "transposed B" kernels
// (a transposed "A" returns no kernel), which covers our A read transposed (x.T @ y) in place;
// our B read transposed (x @ y.T) and element strides other than 1 are packed first.
//
// bfloat16 uses libxsmm's bf16 -> f32 kernel with "A" in VNNI layout (pairs of consecutive k
// interleaved: [k/2][n][2]), which is what vdpbf16ps consumes; B is always packed so, with an
// odd k padded by a zero row (A then gets a zero column). Without AVX512-BF16 (libxsmm's target
// below "cpx") the operands are widened to float32, where a bfloat16 product is exact.
//
// Kernels are dispatched once per (shape, strides, flags) and kept in a small per-thread cache,
// as libxsmm's docs advise; libxsmm's own registry is thread-safe behind that.
#include "native/gemm.h"

#include <hwy/targets.h>
#include <immintrin.h>
#include <libxsmm.h>

#include <algorithm>
#include <atomic>
#include <cctype>
#include <cstddef>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <mutex>
#include <new>
#include <optional>
#include <string>
#include <type_traits>

#include "core/cpu_caches.h"
#include "core/simd_target.h"
#include "native/gemm_amx.h"
#include "native/gemm_int8.h"
#include "native/gemm_scratch.h"
#include "native/gemm_skinny.h"
#include "native/gemm_transpose.h"
#include "tessera/tpu_info.h"

namespace tessera::detail {

namespace {

std::atomic<GemmMode> g_mode{GemmMode::kAuto};

// Whether the SIMD target cap (TESSERA_SIMD_TARGET, core/simd_target.h) allows AVX-512: a cap
// below it also keeps libxsmm and the AMX kernels to what such a CPU runs.
bool avx512_allowed() noexcept {
  static const bool allowed = [] {
    apply_simd_target_override();
    return (hwy::SupportedTargets() & (HWY_AVX3 | HWY_AVX3_DL)) != 0;
  }();
  return allowed;
}

void init_libxsmm() {
  static std::once_flag once;
  std::call_once(once, [] {
    libxsmm_init();
    if (!avx512_allowed() && libxsmm_get_target_archid() > LIBXSMM_X86_AVX2) {
      libxsmm_set_target_archid(LIBXSMM_X86_AVX2);
    }
  });
}

bool portable() noexcept { return g_mode.load(std::memory_order_relaxed) == GemmMode::kPortable; }

// The AMX kernels: in kAuto mode, where the CPU, the OS and the SIMD cap allow them.
// TESSERA_AMX=off declines them as well, so that an AMX machine runs and measures what a CPU
// with AVX-512 but no AMX (AMD's, Intel's before Sapphire Rapids) would.
bool amx_allowed() noexcept {
  static const bool declined = [] {
    const char* v = std::getenv("TESSERA_AMX");
    if (v == nullptr || *v == '\0') return false;
    std::string s(v);
    for (char& ch : s) ch = static_cast<char>(std::tolower(static_cast<unsigned char>(ch)));
    for (const char* no : {"0", "off", "no", "false"}) {
      if (s == no) return true;
    }
    for (const char* yes : {"1", "on", "yes", "true", "auto"}) {
      if (s == yes) return false;
    }
    // Read deep inside a GEMM, where nothing can be raised: said once, as TESSERA_SIMD_TARGET is.
    std::fprintf(stderr,
                 "tessera: TESSERA_AMX=%s is not a setting; use off (or 0, no, false) to leave "
                 "AMX tiles unused, or on (1, yes, true, auto: the default); using AMX where the "
                 "CPU has it\n",
                 v);
    return false;
  }();
  return g_mode.load(std::memory_order_relaxed) == GemmMode::kAuto && avx512_allowed() && !declined;
}

thread_local GemmScratch tl_pack_a;
thread_local GemmScratch tl_pack_b;
thread_local GemmScratch tl_panel;

// The stride of an axis of extent 1 never matters; give it the value a contiguous layout would
// have so that the layout tests below see through it.
template <class T>
MatrixView<T> normalize(MatrixView<T> v, int64_t rows, int64_t cols) {
  if (cols == 1) v.cs = 1;
  if (rows == 1) v.rs = cols * v.cs;
  return v;
}

// Copies the strided (rows x cols) view into a contiguous row-major buffer of row length `ld`
// (>= cols), zero-filling columns cols..ld-1 and rows rows..rows_pad-1.
template <class T, class U>
void pack_rows(U* dst, int64_t ld, int64_t rows_pad, MatrixView<T> v, int64_t rows, int64_t cols) {
  for (int64_t i = 0; i < rows; ++i) {
    const T* src = v.data + i * v.rs;
    U* d = dst + i * ld;
    if (v.cs == 1 && std::is_same_v<T, U>) {
      // A row copied as bytes, at memcpy's speed whatever the build's optimisation level: GCC 12
      // vectorises the loop below only from -O3, and at -O2 (RelWithDebInfo) moves an element at
      // a time.
      std::memcpy(d, src, static_cast<size_t>(cols) * sizeof(T));
    } else if (v.cs == 1) {
      for (int64_t j = 0; j < cols; ++j) d[j] = static_cast<U>(src[j]);
    } else {
      for (int64_t j = 0; j < cols; ++j) d[j] = static_cast<U>(src[j * v.cs]);
    }
    for (int64_t j = cols; j < ld; ++j) d[j] = U{};
  }
  for (int64_t i = rows; i < rows_pad; ++i) {
    for (int64_t j = 0; j < ld; ++j) dst[i * ld + j] = U{};
  }
}

// ---- libxsmm kernel cache --------------------------------------------------------------------
enum class Kind { kF32, kBf16, kS8 };  // smm, bsmm (VNNI "A"), subimm (VNNI "A", unsigned "B")
struct Key {
  Kind kind;
  libxsmm_blasint m, n, k, lda, ldb, ldc;
  int flags;  // beta is 0 with LIBXSMM_GEMM_FLAG_BETA_0, else 1
  bool operator==(const Key&) const = default;
};
struct Cache {
  static constexpr int kSize = 8;
  Key keys[kSize]{};
  void* fns[kSize]{};
  int used = 0;
  int next = 0;
};
thread_local Cache tl_cache;

// libxsmm's JIT kernel for `key` (alpha 1), dispatched once per key on this thread; null when
// libxsmm has none.
void* xsmm_kernel(const Key& key) {
  Cache& c = tl_cache;
  for (int i = 0; i < c.used; ++i) {
    if (c.keys[i] == key) return c.fns[i];
  }
  init_libxsmm();
  const bool beta0 = (key.flags & LIBXSMM_GEMM_FLAG_BETA_0) != 0;
  const int prefetch = LIBXSMM_GEMM_PREFETCH_NONE;
  void* fn = nullptr;
  if (key.kind == Kind::kS8) {
    const int alpha = 1, beta = beta0 ? 0 : 1;
    fn = reinterpret_cast<void*>(libxsmm_subimmdispatch(
        key.m, key.n, key.k, &key.lda, &key.ldb, &key.ldc, &alpha, &beta, &key.flags, &prefetch));
  } else {
    const float alpha = 1.0f, beta = beta0 ? 0.0f : 1.0f;
    fn = key.kind == Kind::kF32
             ? reinterpret_cast<void*>(libxsmm_smmdispatch(key.m, key.n, key.k, &key.lda, &key.ldb,
                                                           &key.ldc, &alpha, &beta, &key.flags,
                                                           &prefetch))
             : reinterpret_cast<void*>(libxsmm_bsmmdispatch(key.m, key.n, key.k, &key.lda, &key.ldb,
                                                            &key.ldc, &alpha, &beta, &key.flags,
                                                            &prefetch));
  }
  c.keys[c.next] = key;
  c.fns[c.next] = fn;
  c.next = (c.next + 1) % Cache::kSize;
  c.used = std::min(c.used + 1, Cache::kSize);
  return fn;
}

bool fits_blasint(int64_t v) { return v >= 0 && v <= (int64_t{1} << 30); }

// C (+)= A·B with libxsmm, our A read as libxsmm's B (NN: a.cs == 1; T: a.rs == 1), our B as
// its A (b.cs == 1). Returns false when libxsmm has no kernel.
bool xsmm_f32(int64_t m, int64_t n, int64_t k, MatrixView<float> a, MatrixView<float> b, float* c,
              int64_t c_rs, bool accumulate) {
  int flags = accumulate ? 0 : LIBXSMM_GEMM_FLAG_BETA_0;
  libxsmm_blasint ldb = 0;
  if (a.cs == 1 && a.rs >= k) {
    ldb = static_cast<libxsmm_blasint>(a.rs);
  } else if (a.rs == 1 && a.cs >= m) {
    flags |= LIBXSMM_GEMM_FLAG_TRANS_B;
    ldb = static_cast<libxsmm_blasint>(a.cs);
  } else {
    return false;
  }
  if (b.cs != 1 || b.rs < n || c_rs < n) return false;
  if (!fits_blasint(m) || !fits_blasint(n) || !fits_blasint(k) || !fits_blasint(b.rs) ||
      !fits_blasint(ldb) || !fits_blasint(c_rs)) {
    return false;
  }
  void* fn =
      xsmm_kernel(Key{Kind::kF32, static_cast<libxsmm_blasint>(n), static_cast<libxsmm_blasint>(m),
                      static_cast<libxsmm_blasint>(k), static_cast<libxsmm_blasint>(b.rs), ldb,
                      static_cast<libxsmm_blasint>(c_rs), flags});
  if (fn == nullptr) return false;
  reinterpret_cast<libxsmm_smmfunction>(fn)(b.data, a.data, c);
  return true;
}

void portable_f32(int64_t m, int64_t n, int64_t k, MatrixView<float> a, MatrixView<float> b,
                  float* c, int64_t c_rs, bool accumulate);

// Columns of B per panel: four AVX-512 vectors of float32.
constexpr int64_t kPanel = 64;

// C (+)= A·B one column panel of B at a time, each panel (k x 64) packed contiguously first.
// libxsmm's kernel walks all of B for every few rows of A; once B outgrows half the L2 (the
// rest holds A's rows and C's) it comes from memory each time. One call per packed panel keeps
// the panel in cache while every row of A passes it. Measured (docs/performance.md, "B in
// column panels"): one core, a (1024, 1024, 512) tile 84 -> 150 GFLOP/s with AVX-512 and
// 39 -> 99 with AVX2; `bench matmul --bm 1024 --bn 1024 --bk 512` (2048³, 2 cores) 152-160 ->
// 273-277 (AVX2 84 -> 176). Smaller Bs depend on the kernel's vector width: with AVX-512, a B of
// half the L2 or less (the default blocks, (1024, 1024, 256) here) measured ~5% faster direct in
// `bench matmul`, so it stays direct; libxsmm's AVX2 kernel gained from panels as soon as B
// outgrew twice the L1 (the tutorial's 2048³ 154-166 -> 178-187 GFLOP/s, 1024³ 168 -> 190, 512³
// 172 -> 191, with the AVX2 target on this CPU). Also needs at least 128 rows of A and three
// panels: with AVX2, fewer measured faster direct ((64, 1024, 256) 86 against 76 GFLOP/s,
// (1024, 128, 256) 105 against 87). False (nothing done) when it does not apply.
bool xsmm_f32_panels(int64_t m, int64_t n, int64_t k, MatrixView<float> a, MatrixView<float> b,
                     float* c, int64_t c_rs, bool accumulate) {
  static const int64_t fits = [] {
    init_libxsmm();
    return libxsmm_get_target_archid() >= LIBXSMM_X86_AVX512 ? gemm_l2_bytes() / 2
                                                             : 2 * gemm_l1d_bytes();
  }();
  if (a.cs != 1 || b.cs != 1 || m < 2 * kPanel || n <= 2 * kPanel ||
      k * n * static_cast<int64_t>(sizeof(float)) <= fits) {
    return false;
  }
  float* panel = tl_panel.get<float>(k * kPanel);
  for (int64_t j = 0; j < n; j += kPanel) {
    const int64_t w = std::min(kPanel, n - j);
    for (int64_t p = 0; p < k; ++p) {
      std::memcpy(panel + p * w, b.data + p * b.rs + j, static_cast<size_t>(w) * sizeof(float));
    }
    const MatrixView<float> bp{panel, w, 1};
    if (!xsmm_f32(m, w, k, a, bp, c + j, c_rs, accumulate)) {
      portable_f32(m, w, k, a, bp, c + j, c_rs, accumulate);
    }
  }
  return true;
}

// C (+)= A·B for fewer rows of A than the column panels take, with a B larger than half the L2:
// libxsmm's kernel walks all of B once for every few rows of A (six with AVX-512), so from
// beyond the L2 B would be read from memory that many times. Cut along k into slabs of B that
// fit half the L2 and give each slab every row of A: after the first few rows the slab is read
// from L2. C, a few rows, stays in cache between the slabs, and each slab adds to what the
// previous ones left there (the kernel's float32 sum continues from C's float32 value). False
// (nothing done) when it does not apply.
bool xsmm_f32_k_slabs(int64_t m, int64_t n, int64_t k, MatrixView<float> a, MatrixView<float> b,
                      float* c, int64_t c_rs, bool accumulate) {
  const int64_t half_l2 = gemm_l2_bytes() / 2;
  const int64_t row_bytes = n * static_cast<int64_t>(sizeof(float));
  if (b.cs != 1 || k * row_bytes <= half_l2 || 2 * row_bytes > half_l2) {
    return false;
  }
  const int64_t slab = half_l2 / row_bytes;
  for (int64_t p = 0; p < k; p += slab) {
    const int64_t kc = std::min(slab, k - p);
    const MatrixView<float> as{a.data + p * a.cs, a.rs, a.cs};
    const MatrixView<float> bs{b.data + p * b.rs, b.rs, 1};
    if (!xsmm_f32(m, n, kc, as, bs, c, c_rs, accumulate || p > 0)) {
      if (p == 0) return false;  // nothing written yet: the caller's other paths take it
      portable_f32(m, n, kc, as, bs, c, c_rs, true);
    }
  }
  return true;
}

void portable_f32(int64_t m, int64_t n, int64_t k, MatrixView<float> a, MatrixView<float> b,
                  float* c, int64_t c_rs, bool accumulate) {
  for (int64_t i = 0; i < m; ++i) {
    float* crow = c + i * c_rs;
    if (!accumulate) std::fill(crow, crow + n, 0.0f);
    for (int64_t p = 0; p < k; ++p) {
      const float av = a.data[i * a.rs + p * a.cs];
      const float* brow = b.data + p * b.rs;
      for (int64_t j = 0; j < n; ++j) crow[j] += av * brow[j];
    }
  }
}

// d[2j] = r0[j], d[2j + 1] = r1[j] (0 when r1 is null), for j < n: two rows of B interleaved
// into VNNI pairs. Only called when libxsmm runs its AVX512-BF16 kernels, so the CPU has
// AVX512BW/VL; compiled for them here whatever the rest of the build targets.
__attribute__((target("avx512f,avx512bw,avx512vl"))) void interleave_rows_avx512(uint16_t* d,
                                                                                 const uint16_t* r0,
                                                                                 const uint16_t* r1,
                                                                                 int64_t n) {
  int64_t j = 0;
  // 32 columns at a time with whole vectors: unpacklo/hi interleave the words of each 128-bit
  // lane (columns 8L..8L+3 and 8L+4..8L+7 of lane L), and one two-source permute of 64-bit
  // pieces puts the lanes back in column order (`first` gathers the pairs of columns j..j+15,
  // `second` those of j+16..j+31). Measured on an AMD Zen 4 class EPYC against 16
  // columns at a time through zero-extension (below): packing alone up to 1.6x faster, the
  // tutorial's 2048³ bfloat16 matmul 2-4% (docs/performance.md, "bfloat16: B's pairs packed
  // with whole vectors").
  if (r1 != nullptr) {
    const __m512i first = _mm512_set_epi64(11, 10, 3, 2, 9, 8, 1, 0);
    const __m512i second = _mm512_set_epi64(15, 14, 7, 6, 13, 12, 5, 4);
    for (; j + 32 <= n; j += 32) {
      const __m512i a = _mm512_loadu_si512(r0 + j);
      const __m512i b = _mm512_loadu_si512(r1 + j);
      const __m512i lo = _mm512_unpacklo_epi16(a, b);
      const __m512i hi = _mm512_unpackhi_epi16(a, b);
      _mm512_storeu_si512(d + 2 * j, _mm512_permutex2var_epi64(lo, first, hi));
      _mm512_storeu_si512(d + 2 * j + 32, _mm512_permutex2var_epi64(lo, second, hi));
    }
  }
  for (; j < n; j += 16) {
    const int64_t left = std::min<int64_t>(16, n - j);
    const __mmask16 m = static_cast<__mmask16>((1u << left) - 1u);
    const __m512i lo = _mm512_maskz_cvtepu16_epi32(m, _mm256_maskz_loadu_epi16(m, r0 + j));
    __m512i v = lo;
    if (r1 != nullptr) {
      const __m512i hi = _mm512_maskz_cvtepu16_epi32(m, _mm256_maskz_loadu_epi16(m, r1 + j));
      // The masked forms: GCC 12 warns about the unmasked ones' undefined pass-through.
      v = _mm512_or_si512(lo, _mm512_maskz_slli_epi32(m, hi, 16));
    }
    _mm512_mask_storeu_epi32(d + 2 * j, m, v);
  }
}

// A few rows of A against a B whose columns are contiguous along k (x @ y.T): the dot-product
// kernels of gemm_skinny.h read both where they lie, where packing B would cost as much as the
// product.
template <class T>
bool skinny(const MatrixView<T>& a, const MatrixView<T>& b, bool rows_allow) {
  return !portable() && rows_allow && a.cs == 1 && b.rs == 1;
}

// An empty product (no rows, columns or contraction): C is zero, or unchanged when accumulating.
// True when there is nothing more to do.
template <class C>
bool empty_product(int64_t m, int64_t n, int64_t k, C* c, int64_t c_rs, bool accumulate) {
  if (m <= 0 || n <= 0) return true;
  if (k > 0) return false;
  if (!accumulate) {
    for (int64_t i = 0; i < m; ++i) std::fill(c + i * c_rs, c + i * c_rs + n, C{0});
  }
  return true;
}

}  // namespace

void* gemm_s8_kernel(int64_t m, int64_t n, int64_t k, int64_t ldb, int64_t ldc,
                     bool accumulate) noexcept {
  const int flags = LIBXSMM_GEMM_FLAG_VNNI_A | (accumulate ? 0 : LIBXSMM_GEMM_FLAG_BETA_0);
  return xsmm_kernel(Key{Kind::kS8, static_cast<libxsmm_blasint>(m),
                         static_cast<libxsmm_blasint>(n), static_cast<libxsmm_blasint>(k),
                         static_cast<libxsmm_blasint>(m), static_cast<libxsmm_blasint>(ldb),
                         static_cast<libxsmm_blasint>(ldc), flags});
}

void set_gemm_mode(GemmMode mode) noexcept { g_mode.store(mode, std::memory_order_relaxed); }
GemmMode gemm_mode() noexcept { return g_mode.load(std::memory_order_relaxed); }

const char* gemm_target() noexcept {
  if (portable()) return "none";
  init_libxsmm();
  return libxsmm_get_target_arch();
}

bool gemm_avx512_allowed() noexcept { return avx512_allowed(); }

int64_t gemm_l1d_bytes() noexcept {
  static const int64_t bytes = reported_cache_bytes(&pltpu::CpuInfo::l1d_bytes, int64_t{32} << 10);
  return bytes;
}

int64_t gemm_l2_bytes() noexcept {
  static const int64_t bytes = reported_cache_bytes(&pltpu::CpuInfo::l2_bytes, int64_t{1} << 20);
  return bytes;
}

bool gemm_amx_bf16() noexcept { return amx_allowed() && amx_support().bf16; }
bool gemm_amx_int8() noexcept { return amx_allowed() && amx_support().int8; }

bool gemm_bf16_native() noexcept {
  if (portable()) return false;
  init_libxsmm();
  return libxsmm_get_target_archid() >= LIBXSMM_X86_AVX512_CPX;
}

namespace {

thread_local GemmScratch tl_swap;

void gemm_f32_impl(int64_t m, int64_t n, int64_t k, MatrixView<float> a, MatrixView<float> b,
                   float* c, int64_t c_rs, bool accumulate, bool may_swap);

// x @ y.T (B's columns contiguous along k) with few rows of x: C^T = y · x^T reads y's rows where
// they lie and packs only x (gemm_transpose.h); packing B would move k·n elements, this moves
// m·k + 2·n·m.
bool swapped_f32(int64_t m, int64_t n, int64_t k, const MatrixView<float>& a,
                 const MatrixView<float>& b, float* c, int64_t c_rs, bool accumulate) {
  if (portable() || b.rs != 1 || b.cs < k || m * (k + 2 * n) >= k * n) return false;
  float* ct = tl_swap.get<float>(n * m);
  gemm_f32_impl(n, m, k, MatrixView<float>{b.data, b.cs, 1}, MatrixView<float>{a.data, a.cs, a.rs},
                ct, m, false, false);
  transpose_into(c, c_rs, ct, m, m, n, accumulate);
  return true;
}

void gemm_f32_impl(int64_t m, int64_t n, int64_t k, MatrixView<float> a, MatrixView<float> b,
                   float* c, int64_t c_rs, bool accumulate, bool may_swap) {
  if (empty_product(m, n, k, c, c_rs, accumulate)) return;
  if (m == 1) c_rs = n;
  a = normalize(a, m, k);
  b = normalize(b, k, n);
  if (skinny(a, b, m <= kSkinnyMaxRowsF32) &&
      skinny_dot_f32(m, n, k, a.data, a.rs, b.data, b.cs, c, c_rs, accumulate)) {
    return;
  }
  if (may_swap && swapped_f32(m, n, k, a, b, c, c_rs, accumulate)) return;
  // Our B must be row-contiguous (n fastest) for libxsmm and for the portable loop. B read
  // transposed (x @ y.T: its columns contiguous along k) is y's block transposed, 16 x 16 at a
  // time in registers (gemm_transpose.h) rather than gathered element by element: the tutorial's
  // x @ y.T matmul, docs/performance.md ("Taller blocks, split evenly").
  if (b.cs != 1 || b.rs < n) {
    float* pb = tl_pack_b.get<float>(k * n);
    if (b.rs == 1) {
      transpose_into(pb, n, b.data, b.cs, k, n, false);  // a plain loop in the portable mode
    } else {
      pack_rows(pb, n, k, b, k, n);
    }
    b = MatrixView<float>{pb, n, 1};
  }
  if (!portable()) {
    if (xsmm_f32_panels(m, n, k, a, b, c, c_rs, accumulate)) return;
    // A B whose rows are strided (a block read where it lies in a wider array) is walked by
    // libxsmm's kernel for every few rows of A; with a power-of-two row stride its rows share
    // cache sets and the walk misses. Packed once, it is read from a contiguous buffer: the
    // tutorial's 2048³ matmul with its blocks read in place 142-145 -> 283-287 GFLOP/s (2 cores,
    // docs/performance.md, "Inputs read where they lie"). Few rows of A do not repay the copy.
    if (b.rs != n && m >= 2 * kPanel) {
      float* pb = tl_pack_b.get<float>(k * n);
      pack_rows(pb, n, k, b, k, n);
      b = MatrixView<float>{pb, n, 1};
    }
    if (xsmm_f32_k_slabs(m, n, k, a, b, c, c_rs, accumulate)) return;
    if (xsmm_f32(m, n, k, a, b, c, c_rs, accumulate)) return;
    if (!(a.cs == 1 && a.rs >= k)) {
      float* pa = tl_pack_a.get<float>(m * k);
      pack_rows(pa, k, m, a, m, k);
      if (xsmm_f32(m, n, k, MatrixView<float>{pa, k, 1}, b, c, c_rs, accumulate)) return;
    }
  }
  portable_f32(m, n, k, a, b, c, c_rs, accumulate);
}

// Rows [p0, p1) of B (p0 even) into VNNI pairs at `vb`: vb[((p - p0) / 2) * n * 2 + j * 2 + p % 2]
// = B(p, j), zero for p == k.
void pack_vnni_bf16(uint16_t* vb, const MatrixView<bfloat16>& b, int64_t p0, int64_t p1, int64_t k,
                    int64_t n) {
  // B's columns contiguous along k (x @ y.T): each pair of k in a column is one 32-bit word
  // already, so the layout is a transpose of words (AVX-512, gemm_transpose.h): x @ y.T with 8
  // rows, y (512, 128), 52.8 -> 18.7 us where it was gathered element by element.
  if (b.rs == 1 && b.cs % 2 == 0 && k % 2 == 0) {
    transpose_into(reinterpret_cast<int32_t*>(vb), n, reinterpret_cast<const int32_t*>(b.data + p0),
                   b.cs / 2, (p1 - p0) / 2, n, false);
    return;
  }
  for (int64_t p = p0; p < p1; p += 2) {
    uint16_t* d = vb + (p - p0) * n;
    const auto* r0 = reinterpret_cast<const uint16_t*>(b.data + p * b.rs);
    const bool has1 = p + 1 < k;
    const uint16_t* r1 = has1 ? r0 + b.rs : nullptr;
    if (b.cs == 1) {
      interleave_rows_avx512(d, r0, r1, n);
    } else {
      for (int64_t j = 0; j < n; ++j) {
        d[2 * j] = r0[j * b.cs];
        d[2 * j + 1] = has1 ? r1[j * b.cs] : uint16_t{0};
      }
    }
  }
}

// libxsmm's bf16 -> f32 kernel for a (m x kk) · (kk x n) slab, B in VNNI pairs.
libxsmm_bsmmfunction bf16_kernel(int64_t m, int64_t n, int64_t kk, int64_t lda, int64_t c_rs,
                                 bool accumulate) {
  const int flags = LIBXSMM_GEMM_FLAG_VNNI_A | (accumulate ? 0 : LIBXSMM_GEMM_FLAG_BETA_0);
  return reinterpret_cast<libxsmm_bsmmfunction>(xsmm_kernel(
      Key{Kind::kBf16, static_cast<libxsmm_blasint>(n), static_cast<libxsmm_blasint>(m),
          static_cast<libxsmm_blasint>(kk), static_cast<libxsmm_blasint>(n),
          static_cast<libxsmm_blasint>(lda), static_cast<libxsmm_blasint>(c_rs), flags}));
}

// C (+)= A·B for bfloat16 one column panel of B at a time, each panel's pairs for the whole k
// packed first and given every row of A (A already has k2 contiguous columns at `pa`). A B
// whose pairs pass half the L2 would otherwise go through in slabs of k, and each slab reads and
// writes all of C (float32, twice B's columns in bytes per row) once more; panels read A once
// more per panel instead, and a read costs less than a read and a write of the same bytes.
// Panels are as wide as half the L2 holds for the whole k, a multiple of 16 columns (a vector of
// pairs), at least 64; A needs 128 rows or more, as for the float32 panels (xsmm_f32_panels).
// Measured on an AMD Zen 4 class EPYC, one core (docs/performance.md, "bfloat16 without AMX, on
// AMD's AVX512-BF16"): (1024, 1024, 1024) 166 -> 198 GFLOP/s, (1024, 512, 2048) 200 -> 207, with
// B transposed 195 -> 216; slabs stay ahead for (256, 512, 2048), 196 against 188. False
// (nothing done) when it does not apply.
bool xsmm_bf16_panels(int64_t m, int64_t n, int64_t k, int64_t k2, const uint16_t* pa, int64_t lda,
                      const MatrixView<bfloat16>& b, float* c, int64_t c_rs, bool accumulate) {
  const int64_t half_l2 = gemm_l2_bytes() / 2;
  if (k2 * n * 2 <= half_l2 || m < 2 * kPanel) return false;
  // Slabs re-read and re-write C (m * n * 4 bytes) once a slab, panels re-read A (m * k2 * 2) once
  // a panel, and there are about as many of either: slabs are kept where they move no more
  // bytes (k2 >= 4n) and C stays in the L2 between them.
  if (m * n * 4 <= half_l2 && k2 >= 4 * n) return false;
  const int64_t widest = half_l2 / (2 * k2) / 16 * 16;
  if (widest < kPanel) return false;
  const int64_t panels = (n + widest - 1) / widest;
  const int64_t w = ((n + panels - 1) / panels + 15) / 16 * 16;  // even panels, the last narrower
  const libxsmm_bsmmfunction full = bf16_kernel(m, w, k2, lda, c_rs, accumulate);
  const libxsmm_bsmmfunction last =
      n % w != 0 ? bf16_kernel(m, n % w, k2, lda, c_rs, accumulate) : full;
  if (full == nullptr || last == nullptr) return false;
  auto* vb = tl_pack_b.get<uint16_t>(k2 * w);
  for (int64_t j = 0; j < n; j += w) {
    const int64_t wj = std::min(w, n - j);
    pack_vnni_bf16(vb, MatrixView<bfloat16>{b.data + j * b.cs, b.rs, b.cs}, 0, k2, k, wj);
    (wj == w ? full : last)(vb, pa, c + j);
  }
  return true;
}

// bfloat16 on libxsmm's AVX512-BF16 kernel, our B (libxsmm's "A") in VNNI pairs. A B whose pairs
// pass half the L2 goes through in column panels where xsmm_bf16_panels takes it, else it is
// packed and multiplied a slab of k at a time, each slab adding to what the earlier ones left in
// C (float32 sums continue from C's value), so that the packed slab is read from L2 by every few
// rows of A rather than from memory (docs/performance.md, "Without AMX"). False (nothing done)
// when it does not apply.
bool xsmm_bf16(int64_t m, int64_t n, int64_t k, MatrixView<bfloat16> a, MatrixView<bfloat16> b,
               float* c, int64_t c_rs, bool accumulate) {
  const int64_t k2 = (k + 1) / 2 * 2;  // k padded to pairs
  if (!gemm_bf16_native() || !fits_blasint(m) || !fits_blasint(n) || !fits_blasint(k2) ||
      c_rs < n || !fits_blasint(c_rs)) {
    return false;
  }
  // A with k contiguous and k2 columns (a zero column when k is odd).
  const uint16_t* pa = nullptr;
  int64_t lda = 0;
  if (a.cs == 1 && a.rs >= k2 && k2 == k) {
    pa = reinterpret_cast<const uint16_t*>(a.data);
    lda = a.rs;
  } else {
    auto* buf = tl_pack_a.get<uint16_t>(m * k2);
    pack_rows(buf, k2, m,
              MatrixView<uint16_t>{reinterpret_cast<const uint16_t*>(a.data), a.rs, a.cs}, m, k);
    pa = buf;
    lda = k2;
  }
  if (xsmm_bf16_panels(m, n, k, k2, pa, lda, b, c, c_rs, accumulate)) return true;
  const int64_t pair_bytes = 4 * n;  // one VNNI row: two k of every column
  const int64_t slab = std::min(k2, std::max<int64_t>(1, gemm_l2_bytes() / 2 / pair_bytes) * 2);
  // Every kernel the slabs need, before anything is written.
  const libxsmm_bsmmfunction first = bf16_kernel(m, n, slab, lda, c_rs, accumulate);
  const libxsmm_bsmmfunction rest = slab < k2 ? bf16_kernel(m, n, slab, lda, c_rs, true) : first;
  const libxsmm_bsmmfunction tail =
      k2 % slab != 0 && k2 > slab ? bf16_kernel(m, n, k2 % slab, lda, c_rs, true) : rest;
  if (first == nullptr || rest == nullptr || tail == nullptr) return false;
  auto* vb = tl_pack_b.get<uint16_t>(slab * n);
  for (int64_t p0 = 0; p0 < k2; p0 += slab) {
    const int64_t p1 = std::min(p0 + slab, k2);
    pack_vnni_bf16(vb, b, p0, p1, k, n);
    const libxsmm_bsmmfunction fn = p0 == 0 ? first : (p1 - p0 == slab ? rest : tail);
    fn(vb, pa + p0, c);
  }
  return true;
}

// x @ y.T (B's columns contiguous along k) with 16, 32, 48 or 64 rows of x, bfloat16 without
// AMX: C^T = y · x^T reads y's pairs where they lie (libxsmm's "A" with y's rows as its rows) and
// packs only x's, and C^T goes back into C (gemm_transpose.h), like swapped_f32. libxsmm's kernel
// then runs along x's rows, 16 floats to a vector, so only whole vectors are taken; and only
// where C has fewer words than y has pairs (2m < k), which the other way transposes. Measured on
// an AMD Zen 4 class EPYC, one core (docs/performance.md, "bfloat16 without AMX, on AMD's
// AVX512-BF16"): (16, 128) x (512, 128).T 15.1 -> 10.7 us, (32, 1024) x (512, 1024).T 206 -> 156;
// 24 rows (k 128: 19.7 against 20.9 us) and 256 rows (k 1024: 1,239 against 1,271) do not gain.
// Nor do rows of y a multiple of 4 KiB apart (the span of an x86 L1's sets: the kernel walks a
// block of y's rows at once, and they share sets): at k 4096, (32, 4096) x (192 .. 384, 4096).T
// ran at 0.86 to 1.18 times the transposes' speed, varying from run to run. False (nothing done)
// when it does not apply.
bool swapped_bf16(int64_t m, int64_t n, int64_t k, const MatrixView<bfloat16>& a,
                  const MatrixView<bfloat16>& b, float* c, int64_t c_rs, bool accumulate) {
  if (b.rs != 1 || b.cs < k || k % 2 != 0 || m % 16 != 0 || m > 64 || 2 * m >= k) return false;
  if (b.cs * static_cast<int64_t>(sizeof(bfloat16)) % 4096 == 0) return false;
  float* ct = tl_swap.get<float>(n * m);
  if (!xsmm_bf16(n, m, k, MatrixView<bfloat16>{b.data, b.cs, 1},
                 MatrixView<bfloat16>{a.data, a.cs, a.rs}, ct, m, false)) {
    return false;
  }
  transpose_into(c, c_rs, ct, m, m, n, accumulate);
  return true;
}
}  // namespace

void gemm_f32(int64_t m, int64_t n, int64_t k, MatrixView<float> a, MatrixView<float> b, float* c,
              int64_t c_rs, bool accumulate) {
  gemm_f32_impl(m, n, k, a, b, c, c_rs, accumulate, true);
}

void gemm_bf16(int64_t m, int64_t n, int64_t k, MatrixView<bfloat16> a, MatrixView<bfloat16> b,
               float* c, int64_t c_rs, bool accumulate) {
  if (empty_product(m, n, k, c, c_rs, accumulate)) return;
  if (m == 1) c_rs = n;
  a = normalize(a, m, k);
  b = normalize(b, k, n);
  if (skinny(a, b, !gemm_amx_bf16() && lanes_rows_bf16(m, n, k, b.cs * 2)) &&
      lanes_dot_bf16(m, n, k, a.data, a.rs, b.data, b.cs, c, c_rs, accumulate)) {
    return;
  }
  if (skinny(a, b, skinny_low_precision(m, k, gemm_amx_bf16(), true)) &&
      skinny_dot_bf16(m, n, k, a.data, a.rs, b.data, b.cs, c, c_rs, accumulate)) {
    return;
  }
  if (!portable() && !gemm_amx_bf16() && m <= kSkinnyNnMaxRows && a.cs == 1 && b.cs == 1 &&
      skinny_nn_bf16(m, n, k, a.data, a.rs, b.data, b.rs, c, c_rs, accumulate)) {
    return;
  }
  if (gemm_amx_bf16()) {
    amx_gemm_bf16(m, n, k, a, b, c, c_rs, accumulate);
    return;
  }
  if (swapped_bf16(m, n, k, a, b, c, c_rs, accumulate)) return;
  if (xsmm_bf16(m, n, k, a, b, c, c_rs, accumulate)) return;
  // Exact fallback: widen to float32 (a bfloat16 x bfloat16 product is exact in float32).
  float* fa = tl_pack_a.get<float>(m * k);
  pack_rows(fa, k, m, a, m, k);
  float* fb = tl_pack_b.get<float>(k * n);
  pack_rows(fb, n, k, b, k, n);
  gemm_f32(m, n, k, MatrixView<float>{fa, k, 1}, MatrixView<float>{fb, n, 1}, c, c_rs, accumulate);
}

void gemm_s8(int64_t m, int64_t n, int64_t k, MatrixView<int8_t> a, MatrixView<int8_t> b,
             int32_t* c, int64_t c_rs, bool accumulate) {
  if (m <= 0 || n <= 0) return;
  a = normalize(a, m, k);
  b = normalize(b, k, n);
  if (m == 1) c_rs = n;
  if (k > 0 && skinny(a, b, !gemm_amx_int8() && lanes_rows_s8(m, n, k, b.cs)) &&
      lanes_dot_s8(m, n, k, a.data, a.rs, b.data, b.cs, c, c_rs, accumulate)) {
    return;
  }
  if (k > 0 && skinny(a, b, skinny_low_precision(m, k, gemm_amx_int8(), false)) &&
      skinny_dot_s8(m, n, k, a.data, a.rs, b.data, b.cs, c, c_rs, accumulate)) {
    return;
  }
  if (k > 0 && !portable() && !gemm_amx_int8() && m <= kSkinnyNnMaxRowsS8 && a.cs == 1 &&
      b.cs == 1 && skinny_nn_s8(m, n, k, a.data, a.rs, b.data, b.rs, c, c_rs, accumulate)) {
    return;
  }
  if (k > 0 && gemm_amx_int8()) {
    amx_gemm_s8(m, n, k, a, b, c, c_rs, accumulate);
    return;
  }
  if (k > 0 && !portable() && xsmm_s8(m, n, k, a, b, c, c_rs, accumulate)) return;
  if (k > 0 && (b.cs != 1 || b.rs < n)) {
    auto* pb = tl_pack_b.get<int8_t>(k * n);
    pack_rows(pb, n, k, b, k, n);
    b = MatrixView<int8_t>{pb, n, 1};
  }
  // Sums wrap modulo 2^32 like int32 on a TPU; unsigned arithmetic keeps that defined in C++.
  for (int64_t i = 0; i < m; ++i) {
    auto* crow = reinterpret_cast<uint32_t*>(c + i * c_rs);
    if (!accumulate) std::fill(crow, crow + n, 0u);
    for (int64_t p = 0; p < k; ++p) {
      const auto av = static_cast<uint32_t>(static_cast<int32_t>(a.data[i * a.rs + p * a.cs]));
      const int8_t* brow = b.data + p * b.rs;
      for (int64_t j = 0; j < n; ++j) {
        crow[j] += av * static_cast<uint32_t>(static_cast<int32_t>(brow[j]));
      }
    }
  }
}

}  // namespace tessera::detail
