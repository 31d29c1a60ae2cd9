// Internal: the AMX tile GEMMs (src/native/gemm_amx.cc), for CPUs with Intel AMX (Sapphire Rapids
// and later). gemm.cc dispatches to them at run time when amx_support() says the CPU and the OS
// allow it; every other CPU takes gemm.cc's AVX-512 / AVX2 / portable paths.
//
// Same contract as gemm.h: C (m x n, row stride c_rs, unit column stride) = A · B, or += when
// `accumulate`; A and B are strided views of any layout (a transposed operand is read where it
// lies or packed, as its strides allow). bfloat16 products accumulate in float32, int8 products
// in int32 (wrapping modulo 2^32, as AMX's TDPBSSD does).
#pragma once

#include <cstdint>

#include "native/gemm.h"

namespace tessera::detail {

/// What this CPU and OS allow: CPUID's AMX-TILE with AMX-BF16 / AMX-INT8, the tile state enabled
/// in XCR0, and (Linux) the permission to use tile data, requested once per process.
struct AmxSupport {
  bool bf16 = false;
  bool int8 = false;
};
AmxSupport amx_support() noexcept;

void amx_gemm_bf16(int64_t m, int64_t n, int64_t k, MatrixView<bfloat16> a, MatrixView<bfloat16> b,
                   float* c, int64_t c_rs, bool accumulate);
void amx_gemm_s8(int64_t m, int64_t n, int64_t k, MatrixView<int8_t> a, MatrixView<int8_t> b,
                 int32_t* c, int64_t c_rs, bool accumulate);

}  // namespace tessera::detail
