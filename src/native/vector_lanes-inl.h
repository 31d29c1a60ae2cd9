// Per-target lane conversions of the native VPU, included by vector_kernels.cc once per Highway
// target (foreach_target.h): loads from storage into a node's 32-bit lanes (float lanes for
// float32/bfloat16, int32 lanes for int32/int8/bool), stores from lanes back to storage, and
// the rounding of a node's lanes to its own dtype.

// Re-included per target: the guard toggles with HWY_TARGET_TOGGLE (Highway's -inl.h idiom).
#if defined(TESSERA_NATIVE_VECTOR_LANES_INL_H_) == defined(HWY_TARGET_TOGGLE)
#ifdef TESSERA_NATIVE_VECTOR_LANES_INL_H_
#undef TESSERA_NATIVE_VECTOR_LANES_INL_H_
#else
#define TESSERA_NATIVE_VECTOR_LANES_INL_H_
#endif

#include <hwy/highway.h>

#include <cstddef>
#include <cstdint>
#include <cstring>

#include "tessera/dtype.h"

HWY_BEFORE_NAMESPACE();
namespace tessera::detail::HWY_NAMESPACE {
namespace hn = hwy::HWY_NAMESPACE;

// ---- loads: storage -> 32-bit lanes --------------------------------------------------------
template <class DF>
void load_f(DF df, DType dt, const std::byte* p, int64_t stride, int64_t len, float* out) {
  const hn::RebindToUnsigned<DF> du;
  const hn::Rebind<uint16_t, DF> d16;
  const int64_t N = static_cast<int64_t>(hn::Lanes(df));
  int64_t j = 0;
  if (stride == 0) {
    float v = 0;
    if (dt == DType::kFloat32)
      std::memcpy(&v, p, 4);
    else {
      uint16_t h;
      std::memcpy(&h, p, 2);
      v = static_cast<float>(bfloat16::from_bits(h));
    }
    const auto s = hn::Set(df, v);
    for (; j < len; j += N) hn::Store(s, df, out + j);
    return;
  }
  if (stride == 1) {
    if (dt == DType::kFloat32) {
      const float* f = reinterpret_cast<const float*>(p);
      for (; j + N <= len; j += N) hn::Store(hn::LoadU(df, f + j), df, out + j);
    } else {
      const auto* h = reinterpret_cast<const uint16_t*>(p);
      for (; j + N <= len; j += N) {
        const auto wide = hn::PromoteTo(du, hn::LoadU(d16, h + j));
        hn::Store(hn::BitCast(df, hn::ShiftLeft<16>(wide)), df, out + j);
      }
    }
  }
  const int64_t isz = dt == DType::kFloat32 ? 4 : 2;
  for (; j < len; ++j) {
    const std::byte* q = p + j * stride * isz;
    if (dt == DType::kFloat32) {
      std::memcpy(out + j, q, 4);
    } else {
      uint16_t h;
      std::memcpy(&h, q, 2);
      out[j] = static_cast<float>(bfloat16::from_bits(h));
    }
  }
}

template <class DI>
void load_i(DI di, DType dt, const std::byte* p, int64_t stride, int64_t len, int32_t* out) {
  const hn::Rebind<int8_t, DI> d8;
  const int64_t N = static_cast<int64_t>(hn::Lanes(di));
  auto scalar = [&](const std::byte* q) -> int32_t {
    if (dt == DType::kInt32) {
      int32_t v;
      std::memcpy(&v, q, 4);
      return v;
    }
    int8_t v;
    std::memcpy(&v, q, 1);
    return dt == DType::kBool ? (v != 0 ? 1 : 0) : v;
  };
  int64_t j = 0;
  if (stride == 0) {
    const auto s = hn::Set(di, scalar(p));
    for (; j < len; j += N) hn::Store(s, di, out + j);
    return;
  }
  if (stride == 1) {
    if (dt == DType::kInt32) {
      const auto* q = reinterpret_cast<const int32_t*>(p);
      for (; j + N <= len; j += N) hn::Store(hn::LoadU(di, q + j), di, out + j);
    } else {
      // int8 sign-extends; bool bytes are 0 or 1, so the same widening is exact.
      const auto* q = reinterpret_cast<const int8_t*>(p);
      for (; j + N <= len; j += N) hn::Store(hn::PromoteTo(di, hn::LoadU(d8, q + j)), di, out + j);
    }
  }
  const int64_t isz = dt == DType::kInt32 ? 4 : 1;
  for (; j < len; ++j) out[j] = scalar(p + j * stride * isz);
}

// ---- stores: 32-bit lanes -> storage -----------------------------------------------------------
// `stream`: non-temporal stores where the destination is vector-aligned (pipeline outputs
// written once in place, see runtime/pipeline.cc).
template <class DF>
void store_f(DF df, DType dt, const float* in, std::byte* p, int64_t stride, int64_t len,
             bool stream) {
  const hn::RebindToSigned<DF> di;
  const hn::RebindToUnsigned<DF> du;
  const hn::Rebind<uint16_t, DF> d16;
  const int64_t N = static_cast<int64_t>(hn::Lanes(df));
  int64_t j = 0;
  if (stride == 1) {
    if (dt == DType::kFloat32) {
      float* f = reinterpret_cast<float*>(p);
      if (stream && reinterpret_cast<uintptr_t>(f) % (N * sizeof(float)) == 0) {
        for (; j + N <= len; j += N) hn::Stream(hn::Load(df, in + j), df, f + j);
      }
      for (; j + N <= len; j += N) hn::StoreU(hn::Load(df, in + j), df, f + j);
    } else {
      // Values are already rounded to bfloat16 by their node, so the low 16 bits are zero
      // (NaNs keep their quiet bit in the upper half): a shift is the conversion.
      auto* h = reinterpret_cast<uint16_t*>(p);
      for (; j + N <= len; j += N) {
        const auto bits = hn::ShiftRight<16>(hn::BitCast(du, hn::Load(df, in + j)));
        hn::StoreU(hn::DemoteTo(d16, hn::BitCast(di, bits)), d16, h + j);
      }
    }
  }
  const int64_t isz = dt == DType::kFloat32 ? 4 : 2;
  for (; j < len; ++j) {
    std::byte* q = p + j * stride * isz;
    if (dt == DType::kFloat32) {
      std::memcpy(q, in + j, 4);
    } else {
      const uint16_t h = bfloat16(in[j]).bits;
      std::memcpy(q, &h, 2);
    }
  }
}

template <class DI>
void store_i(DI di, DType dt, const int32_t* in, std::byte* p, int64_t stride, int64_t len,
             bool stream) {
  const hn::Rebind<int8_t, DI> d8;
  const int64_t N = static_cast<int64_t>(hn::Lanes(di));
  int64_t j = 0;
  if (stride == 1) {
    if (dt == DType::kInt32) {
      auto* q = reinterpret_cast<int32_t*>(p);
      if (stream && reinterpret_cast<uintptr_t>(q) % (N * sizeof(int32_t)) == 0) {
        for (; j + N <= len; j += N) hn::Stream(hn::Load(di, in + j), di, q + j);
      }
      for (; j + N <= len; j += N) hn::StoreU(hn::Load(di, in + j), di, q + j);
    } else {
      // Lanes already hold int8-range (wrapped) or 0/1 values, so saturation never triggers.
      auto* q = reinterpret_cast<int8_t*>(p);
      for (; j + N <= len; j += N) hn::StoreU(hn::DemoteTo(d8, hn::Load(di, in + j)), d8, q + j);
    }
  }
  const int64_t isz = dt == DType::kInt32 ? 4 : 1;
  for (; j < len; ++j) {
    std::byte* q = p + j * stride * isz;
    if (dt == DType::kInt32) {
      std::memcpy(q, in + j, 4);
    } else {
      const auto v = static_cast<int8_t>(in[j]);
      std::memcpy(q, &v, 1);
    }
  }
}

// ---- per-node rounding -------------------------------------------------------------------------
template <class DF>
void round_bf16(DF df, float* x, int64_t padded) {
  const hn::RebindToUnsigned<DF> du;
  const int64_t N = static_cast<int64_t>(hn::Lanes(df));
  const auto bias = hn::Set(du, 0x7fffu);
  const auto one = hn::Set(du, 1u);
  const auto hi = hn::Set(du, 0xffff0000u);
  const auto quiet = hn::Set(du, 0x00400000u);
  for (int64_t j = 0; j < padded; j += N) {
    const auto v = hn::Load(df, x + j);
    const auto u = hn::BitCast(du, v);
    const auto lsb = hn::And(hn::ShiftRight<16>(u), one);
    const auto r = hn::And(hn::Add(u, hn::Add(bias, lsb)), hi);
    const auto nan = hn::BitCast(df, hn::And(hn::Or(u, quiet), hi));
    hn::Store(hn::IfThenElse(hn::IsNaN(v), nan, hn::BitCast(df, r)), df, x + j);
  }
}

template <class DI>
void round_int(DI di, DType dt, int32_t* x, int64_t padded) {
  const int64_t N = static_cast<int64_t>(hn::Lanes(di));
  if (dt == DType::kInt8) {
    for (int64_t j = 0; j < padded; j += N) {
      hn::Store(hn::ShiftRight<24>(hn::ShiftLeft<24>(hn::Load(di, x + j))), di, x + j);
    }
  } else if (dt == DType::kBool) {
    const auto one = hn::Set(di, 1);
    for (int64_t j = 0; j < padded; j += N) {
      hn::Store(hn::IfThenElseZero(hn::Ne(hn::Load(di, x + j), hn::Zero(di)), one), di, x + j);
    }
  }
}

}  // namespace tessera::detail::HWY_NAMESPACE
HWY_AFTER_NAMESPACE();

#endif  // include guard toggle
