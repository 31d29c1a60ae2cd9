// Transposing a product into C (gemm_transpose.h): 16 x 16 blocks of 32-bit elements transposed
// in AVX-512 registers (64 shuffles per block), or a plain loop where AVX-512 is not allowed.
#include "native/gemm_transpose.h"

#include <immintrin.h>

#include <algorithm>
#include <cstring>
#include <type_traits>

#include "native/gemm.h"
#include "native/transpose16-inl.h"

namespace tessera::detail {

namespace {

template <class C>
[[gnu::target(TESSERA_TRANSPOSE16_TARGET)]] void transpose_avx512(C* c, int64_t c_rs, const C* t,
                                                                  int64_t t_rs, int64_t m,
                                                                  int64_t n, bool accumulate) {
  for (int64_t j0 = 0; j0 < n; j0 += 16) {
    const int64_t rows = std::min<int64_t>(16, n - j0);  // rows of T in this block
    const __mmask16 jmask = lanes16(rows);
    for (int64_t i0 = 0; i0 < m; i0 += 16) {
      const int64_t cols = std::min<int64_t>(16, m - i0);
      __m512 r[16];
      load_transposed16(r, t + j0 * t_rs + i0, t_rs, rows, lanes16(cols));
#pragma GCC unroll 16
      for (int i = 0; i < 16; ++i) {
        if (i >= cols) break;
        C* row = c + (i0 + i) * c_rs + j0;
        __m512 v = r[i];
        if (accumulate) {
          const __m512 old = _mm512_maskz_loadu_ps(jmask, row);
          if constexpr (std::is_same_v<C, float>) {
            v = _mm512_add_ps(v, old);
          } else {
            v = _mm512_castsi512_ps(
                _mm512_add_epi32(_mm512_castps_si512(v), _mm512_castps_si512(old)));
          }
        }
        _mm512_mask_storeu_ps(row, jmask, v);
      }
    }
  }
}

template <class C>
void transpose_plain(C* c, int64_t c_rs, const C* t, int64_t t_rs, int64_t m, int64_t n,
                     bool accumulate) {
  for (int64_t i = 0; i < m; ++i) {
    for (int64_t j = 0; j < n; ++j) {
      const C v = t[j * t_rs + i];
      C& d = c[i * c_rs + j];
      if constexpr (std::is_same_v<C, int32_t>) {
        // Unsigned arithmetic: wraps modulo 2^32, defined in C++.
        d = accumulate ? static_cast<int32_t>(static_cast<uint32_t>(d) + static_cast<uint32_t>(v))
                       : v;
      } else {
        d = accumulate ? d + v : v;
      }
    }
  }
}

bool avx512() {
  static const bool cpu = __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw") &&
                          __builtin_cpu_supports("avx512vl") && __builtin_cpu_supports("avx512dq");
  return cpu && gemm_avx512_allowed() && gemm_mode() != GemmMode::kPortable;
}

}  // namespace

void transpose_into(float* c, int64_t c_rs, const float* t, int64_t t_rs, int64_t m, int64_t n,
                    bool accumulate) {
  if (avx512()) {
    transpose_avx512(c, c_rs, t, t_rs, m, n, accumulate);
  } else {
    transpose_plain(c, c_rs, t, t_rs, m, n, accumulate);
  }
}

void transpose_into(int32_t* c, int64_t c_rs, const int32_t* t, int64_t t_rs, int64_t m, int64_t n,
                    bool accumulate) {
  if (avx512()) {
    transpose_avx512(c, c_rs, t, t_rs, m, n, accumulate);
  } else {
    transpose_plain(c, c_rs, t, t_rs, m, n, accumulate);
  }
}

}  // namespace tessera::detail
