// Internal: writing a transposed product into C (src/native/gemm_transpose.cc). The GEMMs compute
// x @ y.T with few rows of x as its transpose, C^T = y · x^T: y's rows are then read where they
// lie instead of being repacked (gemm.cc, gemm_amx.cc), and this puts C^T back into C.
#pragma once

#include <cstdint>

namespace tessera::detail {

/// C (m x n, row stride c_rs) = T^T, or C += T^T when `accumulate`, where T is (n x m) with row
/// stride t_rs. int32 sums wrap modulo 2^32.
void transpose_into(float* c, int64_t c_rs, const float* t, int64_t t_rs, int64_t m, int64_t n,
                    bool accumulate);
void transpose_into(int32_t* c, int64_t c_rs, const int32_t* t, int64_t t_rs, int64_t m, int64_t n,
                    bool accumulate);

}  // namespace tessera::detail
