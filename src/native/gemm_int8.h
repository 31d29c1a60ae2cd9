// Internal: int8 x int8 -> int32 on libxsmm's AVX512-VNNI kernels (src/native/gemm_int8.cc), for
// CPUs without AMX tiles (AMD's, Intel's before Sapphire Rapids).
#pragma once

#include <cstdint>

#include "native/gemm.h"

namespace tessera::detail {

/// C (m x n, row stride c_rs) = A · B, or += when `accumulate`, on libxsmm's int8 kernel where
/// its target has AVX512-VNNI (sums wrap modulo 2^32). False, with C untouched, where it does
/// not apply (no such target, or extents past libxsmm's).
bool xsmm_s8(int64_t m, int64_t n, int64_t k, MatrixView<int8_t> a, MatrixView<int8_t> b,
             int32_t* c, int64_t c_rs, bool accumulate);

/// libxsmm's unsigned x signed byte kernel (libxsmm_subimmfunction) for its column-major (m x k)
/// · (k x n), "A" in VNNI quads with lda = m, "B" columns ldb bytes apart; dispatched once and
/// cached per thread with the other libxsmm kernels (src/native/gemm.cc). Null when libxsmm has
/// none. Extents must fit libxsmm's (at most 2^30).
void* gemm_s8_kernel(int64_t m, int64_t n, int64_t k, int64_t ldb, int64_t ldc,
                     bool accumulate) noexcept;

}  // namespace tessera::detail
