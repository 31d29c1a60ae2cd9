// Per-target fused conversions and fills of the native VPU (vector_kernels.cc includes this once
// per Highway target): `x.astype(...)` between bfloat16 and float32 of a ref's rows, and constant
// fills (`zeros_like`, `full_like`), a vector at a time, without the evaluator's lane buffers.

// Re-included per target: the guard toggles with HWY_TARGET_TOGGLE (Highway's -inl.h idiom).
#if defined(TESSERA_NATIVE_VECTOR_CONVERT_INL_H_) == defined(HWY_TARGET_TOGGLE)
#ifdef TESSERA_NATIVE_VECTOR_CONVERT_INL_H_
#undef TESSERA_NATIVE_VECTOR_CONVERT_INL_H_
#else
#define TESSERA_NATIVE_VECTOR_CONVERT_INL_H_
#endif

#include <hwy/highway.h>

#include <algorithm>
#include <cstddef>
#include <cstdint>

#include "native/bf16_avx512.h"
#include "native/vector_plan.h"
#include "native/vector_store-inl.h"
#include "runtime/step_hints.h"
#include "tessera/dtype.h"

HWY_BEFORE_NAMESPACE();
namespace tessera::detail::HWY_NAMESPACE {
namespace hn = hwy::HWY_NAMESPACE;

// A bfloat16 <-> float32 conversion of rows (`x.astype(...)`) or a constant fill (`zeros_like`),
// a vector at a time, without the lane buffers: a widening is a shift, a narrowing rounds to
// nearest even exactly as round_bf16 does, then shifts.
template <class DF>
HWY_INLINE void row_bf16_to_f32(DF df, const uint16_t* s, float* d, int64_t len, bool stream) {
  const hn::RebindToUnsigned<DF> du;
  const hn::Rebind<uint16_t, DF> d16;
  const int64_t N = static_cast<int64_t>(hn::Lanes(df));
  int64_t j = 0;
  store_vectors(df, d, j, len, N, stream, [&](int64_t k) HWY_ATTR {
    return hn::BitCast(df, hn::ShiftLeft<16>(hn::PromoteTo(du, hn::LoadU(d16, s + k))));
  });
  for (; j < len; ++j) d[j] = static_cast<float>(bfloat16::from_bits(s[j]));
}

template <class DF>
HWY_INLINE void row_f32_to_bf16(DF df, const float* s, uint16_t* d, int64_t len, bool stream) {
  const hn::RebindToSigned<DF> di;
  const hn::RebindToUnsigned<DF> du;
  const hn::Rebind<uint16_t, DF> d16;
  const int64_t N = static_cast<int64_t>(hn::Lanes(df));
  const auto bias = hn::Set(du, 0x7fffu);
  const auto one = hn::Set(du, 1u);
  const auto quiet = hn::Set(du, 0x00400000u);
  int64_t j = 0;
#if HWY_TARGET == HWY_AVX3 || HWY_TARGET == HWY_AVX3_DL
  if (cpu_has_avx512bf16()) j = f32_to_bf16_avx512bf16(s, d, len, stream);
#endif
  // An output block written once in place takes streaming stores, as the widening above does.
  store_vectors(d16, d, j, len, N, stream, [&](int64_t k) HWY_ATTR {
    const auto v = hn::LoadU(df, s + k);
    const auto u = hn::BitCast(du, v);
    const auto lsb = hn::And(hn::ShiftRight<16>(u), one);
    const auto r = hn::IfThenElse(hn::RebindMask(du, hn::IsNaN(v)), hn::Or(u, quiet),
                                  hn::Add(u, hn::Add(bias, lsb)));
    return hn::DemoteTo(d16, hn::BitCast(di, hn::ShiftRight<16>(r)));
  });
  for (; j < len; ++j) d[j] = bfloat16(s[j]).bits;
}

// Fills `len` elements at `d` with `v`: with streaming stores into a streamed output block (the
// pipeline's hint) from the first element aligned for them, else with a plain fill.
template <class D, class T>
HWY_INLINE void fill_row(D dv, T* d, int64_t len, T v, bool stream) {
  const int64_t N = static_cast<int64_t>(hn::Lanes(dv));
  const int64_t bytes = N * static_cast<int64_t>(sizeof(T));
  int64_t j = 0;
  if (stream && len >= 2 * N) {
    const auto x = hn::Set(dv, v);
    for (; j < len && reinterpret_cast<uintptr_t>(d + j) % bytes != 0; ++j) d[j] = v;
    if (reinterpret_cast<uintptr_t>(d + j) % bytes == 0) {
      for (; j + N <= len; j += N) hn::Stream(x, dv, d + j);
    }
  }
  std::fill(d + j, d + len, v);
}

// Calls row(src row, dst row, length) for every row of `p` (the source's element stride along
// the rows is 1; a null source is a constant), and drains the pipeline's prefetch queue as rows
// are stored.
template <class Row>
void fused_unary_rows(const plan::Plan& p, const plan::Node* src, Row row) {
  const int nd = p.extent.size();
  const int64_t len = p.extent[nd - 1];
  PrefetchQueue* queue = p.prefetch;
  if (queue != nullptr && !queue->active()) queue = nullptr;
  const int64_t row_bytes = len * itemsize(p.dst_dtype);
  const int64_t src_item = src == nullptr ? 0 : itemsize(src->dtype);
  SmallVec idx(std::max(nd - 1, 1), 0);
  for (;;) {
    int64_t os = 0, od = 0;
    for (int d = 0; d < nd - 1; ++d) {
      if (src != nullptr) os += idx[d] * src->stride[d];
      od += idx[d] * p.dst_stride[d];
    }
    row(src == nullptr ? nullptr : src->data + os * src_item, p.dst + od * itemsize(p.dst_dtype),
        len);
    if (queue != nullptr) drain_prefetch(*queue, row_bytes);
    int d = nd - 2;
    for (; d >= 0; --d) {
      if (++idx[d] < p.extent[d]) break;
      idx[d] = 0;
    }
    if (d < 0) break;
  }
}

// The fused conversions and fills; false when `p` is not one of them.
bool EvaluateFusedConvert(const plan::Plan& p) {
  const hn::ScalableTag<float> df;
  const int nd = p.extent.size();
  const bool f32 = p.dst_dtype == DType::kFloat32, bf16 = p.dst_dtype == DType::kBFloat16;
  if ((!f32 && !bf16) || p.dst_stride[nd - 1] != 1) return false;
  if (p.nodes.size() == 1 && p.nodes[0].op == OpCode::kConst && p.nodes[0].dtype == p.dst_dtype) {
    const float v = p.nodes[0].fval;  // already of the destination's dtype
    fused_unary_rows(p, nullptr, [&](const std::byte*, std::byte* d, int64_t len) HWY_ATTR {
      if (f32) {
        fill_row(df, reinterpret_cast<float*>(d), len, v, p.stream);
      } else {
        const hn::ScalableTag<uint16_t> du16;
        fill_row(du16, reinterpret_cast<uint16_t*>(d), len, bfloat16(v).bits, p.stream);
      }
    });
    return true;
  }
  if (p.nodes.size() != 2 || p.nodes[1].op != OpCode::kConvert || p.nodes[1].a != 0) return false;
  const plan::Node& src = p.nodes[0];
  if (src.op != OpCode::kLoad || src.stride[nd - 1] != 1 || p.nodes[1].dtype != p.dst_dtype) {
    return false;
  }
  if (f32 && src.dtype == DType::kBFloat16) {
    fused_unary_rows(p, &src, [&](const std::byte* s, std::byte* d, int64_t len) HWY_ATTR {
      row_bf16_to_f32(df, reinterpret_cast<const uint16_t*>(s), reinterpret_cast<float*>(d), len,
                      p.stream);
    });
    return true;
  }
  if (bf16 && src.dtype == DType::kFloat32) {
    fused_unary_rows(p, &src, [&](const std::byte* s, std::byte* d, int64_t len) HWY_ATTR {
      row_f32_to_bf16(df, reinterpret_cast<const float*>(s), reinterpret_cast<uint16_t*>(d), len,
                      p.stream);
    });
    return true;
  }
  return false;
}

}  // namespace tessera::detail::HWY_NAMESPACE
HWY_AFTER_NAMESPACE();

#endif  // TESSERA_NATIVE_VECTOR_CONVERT_INL_H_
