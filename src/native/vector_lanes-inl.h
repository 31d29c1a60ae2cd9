// Per-target lane conversions of the native VPU, included by vector_kernels.cc once per Highway
// target (foreach_target.h): loads from storage into a node's 32-bit lanes (float lanes for the
// floating dtypes, int32 lanes for the integers and bool; uint32 lanes hold the bits), stores
// from lanes back to storage, and the rounding of a node's lanes to its own dtype.
//
// float16 converts with F16C (Highway's PromoteTo/DemoteTo) on the targets that have it (AVX2
// and up); elsewhere, and for the float8s everywhere, with the integer bit manipulation below,
// which rounds exactly as detail/narrow_float.h does for one value.

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

#include "native/bf16_avx512.h"
#include "native/vector_store-inl.h"
#include "tessera/detail/narrow_float.h"
#include "tessera/dtype.h"

HWY_BEFORE_NAMESPACE();
namespace tessera::detail::HWY_NAMESPACE {
namespace hn = hwy::HWY_NAMESPACE;

// ---- narrow float formats -------------------------------------------------------------------
// F16C on this target: Highway converts float16 with it on AVX2 and up (its emulation on lesser
// targets truncates, so those use the generic code).
#if HWY_TARGET <= HWY_AVX2 && !defined(HWY_DISABLE_F16C)
inline constexpr bool kF16C = true;
#else
inline constexpr bool kF16C = false;
#endif

/// 2^e in every lane (e a normal float exponent).
template <class DF>
HWY_INLINE hn::Vec<DF> narrow_pow2(DF df, int e) {
  return hn::BitCast(df, hn::Set(hn::RebindToUnsigned<DF>(), static_cast<uint32_t>(127 + e) << 23));
}

/// Bits of format F (zero-extended in 32-bit lanes) -> float lanes, exactly: the exponent and
/// mantissa fields shifted into float32's and scaled by 2^(127 - bias), which is exact for
/// normals and subnormals alike; the all-ones exponent (or NaN pattern) mapped separately.
template <class F, class DF>
HWY_INLINE hn::Vec<DF> decode_narrow(DF df, hn::Vec<hn::RebindToUnsigned<DF>> b) {
  const hn::RebindToUnsigned<DF> du;
  const hn::RebindToSigned<DF> di;
  constexpr int Man = F::kMan;
  constexpr int Bits = F::kBits;
  const auto sign = hn::ShiftLeft<32 - Bits>(hn::And(b, hn::Set(du, F::kSign)));
  const auto mag = hn::And(b, hn::Set(du, F::kSign - 1));
  auto v = hn::Mul(hn::BitCast(df, hn::ShiftLeft<23 - Man>(mag)), narrow_pow2(df, 127 - F::kBias));
  const auto magi = hn::BitCast(di, mag);
  if constexpr (F::kFnuz) {  // one NaN: the sign bit alone (its sign is OR-ed in below)
    const auto nan =
        hn::RebindMask(df, hn::Eq(hn::BitCast(di, b), hn::Set(di, static_cast<int32_t>(F::kSign))));
    v = hn::IfThenElse(nan, hn::BitCast(df, hn::Set(du, 0x7fc00000u)), v);
  } else if constexpr (F::kFiniteOnly) {  // finite-only: one NaN pattern per sign
    const auto nan = hn::RebindMask(df, hn::Eq(magi, hn::Set(di, static_cast<int32_t>(F::kNaN))));
    v = hn::IfThenElse(nan, hn::BitCast(df, hn::Set(du, 0x7fc00000u)), v);
  } else {
    const auto special = hn::RebindMask(
        df, hn::Gt(magi, hn::Set(di, static_cast<int32_t>((F::kExpMax << Man) - 1))));
    const auto bits = hn::Or(hn::Set(du, 0x7f800000u),
                             hn::ShiftLeft<23 - Man>(hn::And(mag, hn::Set(du, F::kManMask))));
    v = hn::IfThenElse(special, hn::BitCast(df, bits), v);
  }
  return hn::Or(v, hn::BitCast(df, sign));
}

/// Float lanes rounded to the nearest value of format F (ties to even), as float lanes: the
/// mantissa rounded at its last kept bit for normals, by adding and subtracting 2^(emin - man +
/// 23) for subnormals (the FPU's own round to nearest even at that quantum); overflow gives
/// infinity or, for a finite-only format, NaN; NaN stays NaN (quiet); an fnuz format's zeros are
/// +0.
template <class F, class DF>
HWY_INLINE hn::Vec<DF> round_narrow_vec(DF df, hn::Vec<DF> v) {
  const hn::RebindToUnsigned<DF> du;
  constexpr int Man = F::kMan;
  const auto u = hn::BitCast(du, v);
  const auto sign = hn::And(u, hn::Set(du, 0x80000000u));
  const auto a = hn::And(u, hn::Set(du, 0x7fffffffu));
  const auto af = hn::BitCast(df, a);
  const auto lsb = hn::And(hn::ShiftRight<23 - Man>(a), hn::Set(du, 1u));
  const auto r = hn::And(hn::Add(a, hn::Add(hn::Set(du, (1u << (22 - Man)) - 1), lsb)),
                         hn::Set(du, ~((1u << (23 - Man)) - 1)));
  const auto c = narrow_pow2(df, F::kEmin - Man + 23);
  const auto sub = hn::Sub(hn::Add(af, c), c);
  auto res = hn::IfThenElse(hn::Lt(af, narrow_pow2(df, F::kEmin)), sub, hn::BitCast(df, r));
  const uint32_t over = F::kFiniteOnly ? 0x7fc00000u : 0x7f800000u;
  res = hn::IfThenElse(hn::Gt(res, hn::BitCast(df, hn::Set(du, F::kMaxF32))),
                       hn::BitCast(df, hn::Set(du, over)), res);
  res = hn::Or(res, hn::BitCast(df, sign));
  if constexpr (F::kFnuz) res = hn::IfThenZeroElse(hn::Eq(res, hn::Zero(df)), res);  // -0 is 0
  return hn::IfThenElse(hn::IsNaN(v), hn::BitCast(df, hn::Or(u, hn::Set(du, 0x00400000u))), res);
}

/// Float lanes holding values of format F (already rounded) -> F's bits in 32-bit lanes: the
/// inverse scaling of decode_narrow, with infinities and NaNs mapped separately.
template <class F, class DF>
HWY_INLINE hn::Vec<hn::RebindToUnsigned<DF>> encode_narrow(DF df, hn::Vec<DF> v) {
  const hn::RebindToUnsigned<DF> du;
  constexpr int Man = F::kMan;
  constexpr int Bits = F::kBits;
  const auto u = hn::BitCast(du, v);
  auto sign = hn::ShiftRight<32 - Bits>(hn::And(u, hn::Set(du, 0x80000000u)));
  const auto a = hn::And(u, hn::Set(du, 0x7fffffffu));
  if constexpr (F::kFnuz) sign = hn::IfThenZeroElse(hn::Eq(a, hn::Zero(du)), sign);  // -0 is 0
  const auto scaled = hn::Mul(hn::BitCast(df, a), narrow_pow2(df, F::kBias - 127));
  auto bits = hn::ShiftRight<23 - Man>(hn::BitCast(du, scaled));
  const auto inf = hn::RebindMask(df, hn::Eq(hn::BitCast(hn::RebindToSigned<DF>(), a),
                                             hn::Set(hn::RebindToSigned<DF>(), 0x7f800000)));
  bits = hn::IfThenElse(hn::RebindMask(du, inf), hn::Set(du, F::kOverflow), bits);
  const auto payload = F::kFiniteOnly
                           ? hn::Zero(du)
                           : hn::And(hn::ShiftRight<23 - Man>(a), hn::Set(du, F::kManMask));
  bits =
      hn::IfThenElse(hn::RebindMask(du, hn::IsNaN(v)), hn::Or(hn::Set(du, F::kNaN), payload), bits);
  return hn::Or(bits, sign);
}

/// Rounds float lanes to float16, with F16C where this target has it.
template <class DF>
HWY_INLINE hn::Vec<DF> round_f16_vec(DF df, hn::Vec<DF> v) {
  if constexpr (kF16C) {
    const hn::Rebind<hwy::float16_t, DF> dh;
    return hn::PromoteTo(df, hn::DemoteTo(dh, v));
  } else {
    return round_narrow_vec<Float16Format>(df, v);
  }
}

/// The bits of float8 dtype `dt` (zero-extended in 32-bit lanes) as float lanes, exactly.
template <class DF>
HWY_INLINE hn::Vec<DF> decode_f8(DF df, DType dt, hn::Vec<hn::RebindToUnsigned<DF>> b) {
  if (dt == DType::kFloat8E4M3FN) return decode_narrow<Float8E4M3FNFormat>(df, b);
  if (dt == DType::kFloat8E5M2) return decode_narrow<Float8E5M2Format>(df, b);
  return decode_narrow<Float8E4M3B11FNUZFormat>(df, b);
}

/// Float lanes rounded to float8 dtype `dt` (a no-op on values already of the format) and
/// encoded as its bits in 32-bit lanes.
template <class DF>
HWY_INLINE hn::Vec<hn::RebindToUnsigned<DF>> encode_f8(DF df, DType dt, hn::Vec<DF> v) {
  if (dt == DType::kFloat8E4M3FN) {
    return encode_narrow<Float8E4M3FNFormat>(df, round_narrow_vec<Float8E4M3FNFormat>(df, v));
  }
  if (dt == DType::kFloat8E5M2) {
    return encode_narrow<Float8E5M2Format>(df, round_narrow_vec<Float8E5M2Format>(df, v));
  }
  return encode_narrow<Float8E4M3B11FNUZFormat>(df,
                                                round_narrow_vec<Float8E4M3B11FNUZFormat>(df, v));
}

/// One element of a floating dtype, as float.
inline float load_f1(DType dt, const std::byte* q) {
  switch (dt) {
    case DType::kFloat32: {
      float v;
      std::memcpy(&v, q, 4);
      return v;
    }
    case DType::kFloat8E4M3FN:
      return Float8E4M3FNFormat::to_float(static_cast<uint8_t>(*q));
    case DType::kFloat8E5M2:
      return Float8E5M2Format::to_float(static_cast<uint8_t>(*q));
    case DType::kFloat8E4M3B11FNUZ:
      return Float8E4M3B11FNUZFormat::to_float(static_cast<uint8_t>(*q));
    default: {
      uint16_t h;
      std::memcpy(&h, q, 2);
      return dt == DType::kFloat16 ? Float16Format::to_float(h)
                                   : static_cast<float>(bfloat16::from_bits(h));
    }
  }
}

/// Stores one float (a value of dtype `dt`, or any float, which is rounded) as dtype `dt`.
inline void store_f1(DType dt, float v, std::byte* q) {
  switch (dt) {
    case DType::kFloat32:
      std::memcpy(q, &v, 4);
      return;
    case DType::kFloat8E4M3FN:
      *q = static_cast<std::byte>(Float8E4M3FNFormat::from_float(v));
      return;
    case DType::kFloat8E5M2:
      *q = static_cast<std::byte>(Float8E5M2Format::from_float(v));
      return;
    case DType::kFloat8E4M3B11FNUZ:
      *q = static_cast<std::byte>(Float8E4M3B11FNUZFormat::from_float(v));
      return;
    default: {
      const uint16_t h = dt == DType::kFloat16 ? Float16Format::from_float(v) : bfloat16(v).bits;
      std::memcpy(q, &h, 2);
      return;
    }
  }
}

// ---- loads: storage -> 32-bit lanes --------------------------------------------------------
template <class DF>
void load_f(DF df, DType dt, const std::byte* p, int64_t stride, int64_t len, float* out) {
  const hn::RebindToUnsigned<DF> du;
  const hn::Rebind<uint16_t, DF> d16;
  const hn::Rebind<uint8_t, DF> d8;
  const int64_t N = static_cast<int64_t>(hn::Lanes(df));
  int64_t j = 0;
  if (stride == 0) {
    const auto s = hn::Set(df, load_f1(dt, p));
    for (; j < len; j += N) hn::Store(s, df, out + j);
    return;
  }
  if (stride == 1) {
    if (dt == DType::kFloat32) {
      const float* f = reinterpret_cast<const float*>(p);
      for (; j + N <= len; j += N) hn::Store(hn::LoadU(df, f + j), df, out + j);
    } else if (dt == DType::kBFloat16) {
      const auto* h = reinterpret_cast<const uint16_t*>(p);
      for (; j + N <= len; j += N) {
        const auto wide = hn::PromoteTo(du, hn::LoadU(d16, h + j));
        hn::Store(hn::BitCast(df, hn::ShiftLeft<16>(wide)), df, out + j);
      }
    } else if (dt == DType::kFloat16) {
      const auto* h = reinterpret_cast<const uint16_t*>(p);
      for (; j + N <= len; j += N) {
        if constexpr (kF16C) {
          const hn::Rebind<hwy::float16_t, DF> dh;
          const auto* hf = reinterpret_cast<const hwy::float16_t*>(h);
          hn::Store(hn::PromoteTo(df, hn::LoadU(dh, hf + j)), df, out + j);
        } else {
          const auto wide = hn::PromoteTo(du, hn::LoadU(d16, h + j));
          hn::Store(decode_narrow<Float16Format>(df, wide), df, out + j);
        }
      }
    } else {
      const auto* b = reinterpret_cast<const uint8_t*>(p);
      for (; j + N <= len; j += N) {
        const auto wide = hn::PromoteTo(du, hn::LoadU(d8, b + j));
        hn::Store(decode_f8(df, dt, wide), df, out + j);
      }
    }
  }
  const int64_t isz = itemsize(dt);
  for (; j < len; ++j) out[j] = load_f1(dt, p + j * stride * isz);
}

/// One element of an integer or bool dtype, as int32 lanes hold it (uint32: its bits).
inline int32_t load_i1(DType dt, const std::byte* q) {
  switch (dt) {
    case DType::kInt32:
    case DType::kUInt32: {
      int32_t v;
      std::memcpy(&v, q, 4);
      return v;
    }
    case DType::kInt16: {
      int16_t v;
      std::memcpy(&v, q, 2);
      return v;
    }
    case DType::kUInt16: {
      uint16_t v;
      std::memcpy(&v, q, 2);
      return v;
    }
    case DType::kUInt8:
    case DType::kUInt4:
    case DType::kUInt2:
      return static_cast<uint8_t>(*q);
    case DType::kInt4:
    case DType::kInt2: {
      // The byte holds the value's low bits (ml_dtypes' layout): sign-extend them.
      const int sh = 32 - int_bits(dt);
      return static_cast<int32_t>(static_cast<uint32_t>(static_cast<uint8_t>(*q)) << sh) >> sh;
    }
    case DType::kBool:
      return *q != std::byte{0} ? 1 : 0;
    default:
      return static_cast<int8_t>(*q);
  }
}

template <class DI>
void load_i(DI di, DType dt, const std::byte* p, int64_t stride, int64_t len, int32_t* out) {
  const int64_t N = static_cast<int64_t>(hn::Lanes(di));
  int64_t j = 0;
  if (stride == 0) {
    const auto s = hn::Set(di, load_i1(dt, p));
    for (; j < len; j += N) hn::Store(s, di, out + j);
    return;
  }
  // Narrow integers widen (sign- or zero-extended); bool bytes are 0 or 1, so int8's widening
  // is exact for them.
  auto widen = [&](auto dn) HWY_ATTR {
    const auto* q = reinterpret_cast<const hn::TFromD<decltype(dn)>*>(p);
    for (; j + N <= len; j += N) hn::Store(hn::PromoteTo(di, hn::LoadU(dn, q + j)), di, out + j);
  };
  if (stride == 1) {
    switch (dt) {
      case DType::kInt32:
      case DType::kUInt32: {
        const auto* q = reinterpret_cast<const int32_t*>(p);
        for (; j + N <= len; j += N) hn::Store(hn::LoadU(di, q + j), di, out + j);
        break;
      }
      case DType::kInt16:
        widen(hn::Rebind<int16_t, DI>());
        break;
      case DType::kUInt16:
        widen(hn::Rebind<uint16_t, DI>());
        break;
      case DType::kUInt8:
      case DType::kUInt4:
      case DType::kUInt2:
        widen(hn::Rebind<uint8_t, DI>());
        break;
      case DType::kInt4:
      case DType::kInt2: {
        // The low bits of each byte, sign-extended (ml_dtypes' layout).
        const hn::Rebind<uint8_t, DI> d8;
        const auto* q = reinterpret_cast<const uint8_t*>(p);
        const int sh = 32 - int_bits(dt);
        for (; j + N <= len; j += N) {
          const auto v =
              hn::BitCast(di, hn::PromoteTo(hn::RebindToUnsigned<DI>(), hn::LoadU(d8, q + j)));
          hn::Store(hn::ShiftRightSame(hn::ShiftLeftSame(v, sh), sh), di, out + j);
        }
        break;
      }
      default:
        widen(hn::Rebind<int8_t, DI>());
        break;
    }
  }
  const int64_t isz = itemsize(dt);
  for (; j < len; ++j) out[j] = load_i1(dt, p + j * stride * isz);
}

// ---- stores: 32-bit lanes -> storage -----------------------------------------------------------
// `stream`: non-temporal stores where the destination is vector-aligned (pipeline outputs
// written once in place, see runtime/pipeline.cc; store_vectors, vector_store-inl.h).
template <class DF>
void store_f(DF df, DType dt, const float* in, std::byte* p, int64_t stride, int64_t len,
             bool stream) {
  const hn::RebindToSigned<DF> di;
  const hn::RebindToUnsigned<DF> du;
  const hn::Rebind<uint16_t, DF> d16;
  const hn::Rebind<uint8_t, DF> d8;
  const int64_t N = static_cast<int64_t>(hn::Lanes(df));
  int64_t j = 0;
  if (stride == 1) {
    if (dt == DType::kFloat32) {
      store_vectors(df, reinterpret_cast<float*>(p), j, len, N, stream,
                    [&](int64_t k) HWY_ATTR { return hn::Load(df, in + k); });
    } else if (dt == DType::kBFloat16) {
      // Values are already rounded to bfloat16 by their node, so the low 16 bits are zero
      // (NaNs keep their quiet bit in the upper half): a shift is the conversion.
      store_vectors(d16, reinterpret_cast<uint16_t*>(p), j, len, N, stream,
                    [&](int64_t k) HWY_ATTR {
                      const auto bits = hn::ShiftRight<16>(hn::BitCast(du, hn::Load(df, in + k)));
                      return hn::DemoteTo(d16, hn::BitCast(di, bits));
                    });
    } else if (dt == DType::kFloat16) {
      if constexpr (kF16C) {
        const hn::Rebind<hwy::float16_t, DF> dh;
        store_vectors(dh, reinterpret_cast<hwy::float16_t*>(p), j, len, N, stream,
                      [&](int64_t k) HWY_ATTR { return hn::DemoteTo(dh, hn::Load(df, in + k)); });
      } else {
        store_vectors(d16, reinterpret_cast<uint16_t*>(p), j, len, N, stream,
                      [&](int64_t k) HWY_ATTR {
                        const auto bits = encode_narrow<Float16Format>(
                            df, round_narrow_vec<Float16Format>(df, hn::Load(df, in + k)));
                        return hn::DemoteTo(d16, hn::BitCast(di, bits));
                      });
      }
    } else {
      // float8: rounded again (a no-op on values already of the format) and encoded.
      store_vectors(d8, reinterpret_cast<uint8_t*>(p), j, len, N, stream, [&](int64_t k) HWY_ATTR {
        const auto bits = encode_f8(df, dt, hn::Load(df, in + k));
        return hn::DemoteTo(d8, hn::BitCast(di, bits));
      });
    }
  }
  const int64_t isz = itemsize(dt);
  for (; j < len; ++j) store_f1(dt, in[j], p + j * stride * isz);
}

/// Stores one lane of an integer or bool dtype (already wrapped to it) as dtype `dt`.
inline void store_i1(DType dt, int32_t v, std::byte* q) {
  switch (dt) {
    case DType::kInt32:
    case DType::kUInt32:
      std::memcpy(q, &v, 4);
      return;
    case DType::kInt16:
    case DType::kUInt16: {
      const auto h = static_cast<uint16_t>(v);
      std::memcpy(q, &h, 2);
      return;
    }
    case DType::kInt4:
    case DType::kInt2:  // the value's low bits, zeros above (ml_dtypes' layout)
      *q = static_cast<std::byte>(static_cast<uint8_t>(v) & ((1u << int_bits(dt)) - 1u));
      return;
    default:
      *q = static_cast<std::byte>(static_cast<uint8_t>(v));
      return;
  }
}

template <class DI>
void store_i(DI di, DType dt, const int32_t* in, std::byte* p, int64_t stride, int64_t len,
             bool stream) {
  const int64_t N = static_cast<int64_t>(hn::Lanes(di));
  int64_t j = 0;
  // Lanes already hold values in the dtype's range (wrapped by their node), so the saturating
  // demotions never saturate.
  auto narrow = [&](auto dn) HWY_ATTR {
    store_vectors(dn, reinterpret_cast<hn::TFromD<decltype(dn)>*>(p), j, len, N, stream,
                  [&](int64_t k) HWY_ATTR { return hn::DemoteTo(dn, hn::Load(di, in + k)); });
  };
  if (stride == 1) {
    switch (dt) {
      case DType::kInt32:
      case DType::kUInt32: {
        store_vectors(di, reinterpret_cast<int32_t*>(p), j, len, N, stream,
                      [&](int64_t k) HWY_ATTR { return hn::Load(di, in + k); });
        break;
      }
      case DType::kInt16:
        narrow(hn::Rebind<int16_t, DI>());
        break;
      case DType::kUInt16:
        narrow(hn::Rebind<uint16_t, DI>());
        break;
      case DType::kUInt8:
      case DType::kUInt4:
      case DType::kUInt2:
        narrow(hn::Rebind<uint8_t, DI>());
        break;
      case DType::kInt4:
      case DType::kInt2: {
        // The low bits of each value (ml_dtypes' layout): masked, then in uint8's range.
        const hn::Rebind<uint8_t, DI> d8;
        const auto mask = hn::Set(di, (1 << int_bits(dt)) - 1);
        store_vectors(d8, reinterpret_cast<uint8_t*>(p), j, len, N, stream,
                      [&](int64_t k) HWY_ATTR {
                        return hn::DemoteTo(d8, hn::And(hn::Load(di, in + k), mask));
                      });
        break;
      }
      default:
        narrow(hn::Rebind<int8_t, DI>());
        break;
    }
  }
  const int64_t isz = itemsize(dt);
  for (; j < len; ++j) store_i1(dt, in[j], p + j * stride * isz);
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
  int64_t j = 0;
#if HWY_TARGET == HWY_AVX3 || HWY_TARGET == HWY_AVX3_DL
  if (cpu_has_avx512bf16()) j = round_bf16_avx512bf16(x, padded);
#endif
  for (; j < padded; j += N) {
    const auto v = hn::Load(df, x + j);
    const auto u = hn::BitCast(du, v);
    const auto lsb = hn::And(hn::ShiftRight<16>(u), one);
    const auto r = hn::And(hn::Add(u, hn::Add(bias, lsb)), hi);
    const auto nan = hn::BitCast(df, hn::And(hn::Or(u, quiet), hi));
    hn::Store(hn::IfThenElse(hn::IsNaN(v), nan, hn::BitCast(df, r)), df, x + j);
  }
}

/// Rounds float lanes to a narrow float dtype other than bfloat16 (float16, the float8s).
template <class DF>
void round_narrow(DF df, DType dt, float* x, int64_t padded) {
  const int64_t N = static_cast<int64_t>(hn::Lanes(df));
  for (int64_t j = 0; j < padded; j += N) {
    const auto v = hn::Load(df, x + j);
    hn::Vec<DF> r;
    if (dt == DType::kFloat16)
      r = round_f16_vec(df, v);
    else if (dt == DType::kFloat8E4M3FN)
      r = round_narrow_vec<Float8E4M3FNFormat>(df, v);
    else if (dt == DType::kFloat8E5M2)
      r = round_narrow_vec<Float8E5M2Format>(df, v);
    else
      r = round_narrow_vec<Float8E4M3B11FNUZFormat>(df, v);
    hn::Store(r, df, x + j);
  }
}

template <class DI>
void round_int(DI di, DType dt, int32_t* x, int64_t padded) {
  const int64_t N = static_cast<int64_t>(hn::Lanes(di));
  auto each = [&](auto f) HWY_ATTR {
    for (int64_t j = 0; j < padded; j += N) hn::Store(f(hn::Load(di, x + j)), di, x + j);
  };
  switch (dt) {
    case DType::kInt8:
      return each([](auto v) HWY_ATTR { return hn::ShiftRight<24>(hn::ShiftLeft<24>(v)); });
    case DType::kInt16:
      return each([](auto v) HWY_ATTR { return hn::ShiftRight<16>(hn::ShiftLeft<16>(v)); });
    case DType::kUInt8:
      return each([&](auto v) HWY_ATTR { return hn::And(v, hn::Set(di, 0xff)); });
    case DType::kUInt16:
      return each([&](auto v) HWY_ATTR { return hn::And(v, hn::Set(di, 0xffff)); });
    case DType::kInt4:
      return each([](auto v) HWY_ATTR { return hn::ShiftRight<28>(hn::ShiftLeft<28>(v)); });
    case DType::kInt2:
      return each([](auto v) HWY_ATTR { return hn::ShiftRight<30>(hn::ShiftLeft<30>(v)); });
    case DType::kUInt4:
      return each([&](auto v) HWY_ATTR { return hn::And(v, hn::Set(di, 0xf)); });
    case DType::kUInt2:
      return each([&](auto v) HWY_ATTR { return hn::And(v, hn::Set(di, 0x3)); });
    case DType::kBool:
      return each([&](auto v) HWY_ATTR {
        return hn::IfThenElseZero(hn::Ne(v, hn::Zero(di)), hn::Set(di, 1));
      });
    default:
      return;  // int32 and uint32 lanes are their own range
  }
}

}  // namespace tessera::detail::HWY_NAMESPACE
HWY_AFTER_NAMESPACE();

#endif  // include guard toggle
