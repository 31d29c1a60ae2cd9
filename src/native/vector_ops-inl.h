// Per-target elementwise op kernels of the native VPU, included by vector_kernels.cc once per
// Highway target (foreach_target.h). Each function computes one node over a tile of 32-bit
// lanes: float lanes for floating nodes, int32 lanes for integer and bool nodes (uint32 lanes
// hold the bits, and the ops whose unsigned results differ take the dtype). `n` is
// a multiple of the vector length (buffers are padded); padding lanes hold garbage that is
// never stored, so no op may trap on them (integer division is done with a guard).

// Re-included per target: the guard toggles with HWY_TARGET_TOGGLE (Highway's -inl.h idiom).
#if defined(TESSERA_NATIVE_VECTOR_OPS_INL_H_) == defined(HWY_TARGET_TOGGLE)
#ifdef TESSERA_NATIVE_VECTOR_OPS_INL_H_
#undef TESSERA_NATIVE_VECTOR_OPS_INL_H_
#else
#define TESSERA_NATIVE_VECTOR_OPS_INL_H_
#endif

#include <hwy/contrib/math/math-inl.h>
#include <hwy/highway.h>

#include <bit>
#include <cmath>
#include <cstdint>
#include <limits>
#include <type_traits>

#include "native/vector_math-inl.h"
#include "tessera/detail/expr_program.h"

HWY_BEFORE_NAMESPACE();
namespace tessera::detail::HWY_NAMESPACE {
namespace hn = hwy::HWY_NAMESPACE;

// ---- helpers -----------------------------------------------------------------------------------
template <class D, class F>
HWY_INLINE void map1(D d, const hn::TFromD<D>* a, hn::TFromD<D>* out, int64_t n, F f) {
  const int64_t N = static_cast<int64_t>(hn::Lanes(d));
  for (int64_t j = 0; j < n; j += N) hn::Store(f(hn::Load(d, a + j)), d, out + j);
}
template <class D, class F>
HWY_INLINE void map2(D d, const hn::TFromD<D>* a, const hn::TFromD<D>* b, hn::TFromD<D>* out,
                     int64_t n, F f) {
  const int64_t N = static_cast<int64_t>(hn::Lanes(d));
  for (int64_t j = 0; j < n; j += N)
    hn::Store(f(hn::Load(d, a + j), hn::Load(d, b + j)), d, out + j);
}

template <class DF>
void UnaryF(DF df, OpCode op, int64_t k, const float* a, float* o, int64_t n) {
  using V = hn::Vec<DF>;
  const bool vector_op = with_unary_v(op, [&](auto tag) HWY_ATTR {
    constexpr OpCode kOp = decltype(tag)::value;
    map1(df, a, o, n, [&](V x) HWY_ATTR { return UnaryV<kOp>(df, k, x); });
  });
  if (vector_op) return;
  switch (op) {
    case OpCode::kTan:  // libm's tanf per lane (correctly rounded or within 1 ULP)
      for (int64_t j = 0; j < n; ++j) o[j] = std::tan(a[j]);
      return;
    case OpCode::kErfInv:
      for (int64_t j = 0; j < n; ++j) o[j] = erf_inv(a[j]);
      return;
    default:
      return;
  }
}

// numpy's float divmod: the remainder takes the divisor's sign, the quotient is floored.
inline float py_fmod(float x, float y) {
  float m = std::fmod(x, y);
  if (m != 0.0f && ((m < 0.0f) != (y < 0.0f))) m += y;
  if (m == 0.0f) m = std::copysign(0.0f, y);
  return m;
}
inline float py_floordiv(float x, float y) {
  if (y == 0.0f) return x / y;
  const float m = std::fmod(x, y);
  float div = (x - m) / y;
  if (m != 0.0f && ((y < 0.0f) != (m < 0.0f))) div -= 1.0f;
  if (div == 0.0f) return std::copysign(0.0f, x / y);
  const float fl = std::floor(div);
  return div - fl > 0.5f ? fl + 1.0f : fl;
}

template <class DF>
void BinaryF(DF df, OpCode op, const float* a, const float* b, float* o, int64_t n) {
  using V = hn::Vec<DF>;
  const bool vector_op = with_binary_v(op, [&](auto tag) HWY_ATTR {
    constexpr OpCode kOp = decltype(tag)::value;
    map2(df, a, b, o, n, [&](V x, V y) HWY_ATTR { return BinaryV<kOp>(df, x, y); });
  });
  if (vector_op) return;
  switch (op) {
    case OpCode::kRem:
      for (int64_t j = 0; j < n; ++j) o[j] = py_fmod(a[j], b[j]);
      return;
    case OpCode::kFloorDiv:
      for (int64_t j = 0; j < n; ++j) o[j] = py_floordiv(a[j], b[j]);
      return;
    case OpCode::kPow:
      for (int64_t j = 0; j < n; ++j) o[j] = std::pow(a[j], b[j]);
      return;
    case OpCode::kNextAfter:
      for (int64_t j = 0; j < n; ++j) o[j] = std::nextafter(a[j], b[j]);
      return;
    default:
      return;
  }
}

// ---- integer nodes -----------------------------------------------------------------------------
inline int32_t int_div(int32_t x, int32_t y) {  // XLA: x / 0 == -1, INT_MIN / -1 == INT_MIN
  if (y == 0) return -1;
  if (y == -1) return static_cast<int32_t>(0u - static_cast<uint32_t>(x));
  return x / y;
}
inline int32_t int_rem(int32_t x, int32_t y) {  // XLA: x % 0 == x, INT_MIN % -1 == 0
  if (y == 0) return x;
  if (y == -1) return 0;
  return x % y;
}
inline int32_t py_imod(int32_t x, int32_t y) {
  const int32_t r = int_rem(x, y);
  return (r != 0 && ((r < 0) != (y < 0))) ? r + y : r;
}
inline int32_t py_ifloordiv(int32_t x, int32_t y) {
  const int32_t q = int_div(x, y);
  if (y == 0) return q;
  const int32_t r = int_rem(x, y);
  return (r != 0 && ((r < 0) != (y < 0))) ? q - 1 : q;
}
// Powers by squaring, wrapping; `unsigned_exp`: the exponent's bits are a uint32.
inline int32_t int_pow(int32_t x, int32_t e, bool unsigned_exp = false) {
  if (e < 0 && !unsigned_exp) return x == 1 ? 1 : x == -1 ? ((e & 1) ? -1 : 1) : 0;
  uint32_t r = 1;
  uint32_t b = static_cast<uint32_t>(x);
  for (uint32_t m = static_cast<uint32_t>(e); m > 0; m >>= 1) {
    if (m & 1u) r *= b;
    b *= b;
  }
  return static_cast<int32_t>(r);
}
// uint32 lanes: XLA's unsigned division (x / 0 is all ones, x % 0 == x); floor division and
// Python's remainder are the plain unsigned ones.
inline int32_t uint_div(int32_t x, int32_t y) {
  const auto ux = static_cast<uint32_t>(x), uy = static_cast<uint32_t>(y);
  return static_cast<int32_t>(uy == 0 ? 0xffffffffu : ux / uy);
}
inline int32_t uint_rem(int32_t x, int32_t y) {
  const auto ux = static_cast<uint32_t>(x), uy = static_cast<uint32_t>(y);
  return static_cast<int32_t>(uy == 0 ? ux : ux % uy);
}

template <class DI>
void UnaryI(DI di, OpCode op, DType dt, int64_t k, const int32_t* a, int32_t* o, int64_t n) {
  using V = hn::Vec<DI>;
  const V one = hn::Set(di, 1);
  const bool uns = is_unsigned(dt);
  switch (op) {
    case OpCode::kNeg:
      return map1(di, a, o, n, [](V x) HWY_ATTR { return hn::Neg(x); });
    case OpCode::kAbs:
      if (uns) return map1(di, a, o, n, [](V x) HWY_ATTR { return x; });
      return map1(di, a, o, n, [](V x) HWY_ATTR { return hn::Abs(x); });
    case OpCode::kSign:
      if (uns) {
        return map1(di, a, o, n,
                    [&](V x) HWY_ATTR { return hn::IfThenElseZero(hn::Ne(x, hn::Zero(di)), one); });
      }
      return map1(di, a, o, n, [&](V x) HWY_ATTR {
        const V z = hn::Zero(di);
        return hn::IfThenElse(hn::Gt(x, z), one, hn::IfThenElseZero(hn::Lt(x, z), hn::Neg(one)));
      });
    case OpCode::kSquare:
      return map1(di, a, o, n, [](V x) HWY_ATTR { return hn::Mul(x, x); });
    case OpCode::kNot:
      if (dt == DType::kBool)
        return map1(di, a, o, n, [&](V x) HWY_ATTR { return hn::Xor(x, one); });
      return map1(di, a, o, n, [](V x) HWY_ATTR { return hn::Not(x); });
    case OpCode::kIntegerPow:
      for (int64_t j = 0; j < n; ++j) o[j] = int_pow(a[j], static_cast<int32_t>(k));
      return;
    case OpCode::kPopcount:
    case OpCode::kClz: {
      // The dtype's own bits: int8/int16 lanes are sign-extended, so mask them first.
      const int bits = int_bits(dt);
      const uint32_t mask = bits == 32 ? 0xffffffffu : (1u << bits) - 1u;
      for (int64_t j = 0; j < n; ++j) {
        const uint32_t u = static_cast<uint32_t>(a[j]) & mask;
        o[j] = op == OpCode::kPopcount ? std::popcount(u) : std::countl_zero(u) - (32 - bits);
      }
      return;
    }
    default:
      return;
  }
}

template <class DI>
void BinaryI(DI di, OpCode op, DType dt, const int32_t* a, const int32_t* b, int32_t* o,
             int64_t n) {
  using V = hn::Vec<DI>;
  const hn::RebindToUnsigned<DI> du;
  // Shift amounts are taken as unsigned, so a negative amount counts as out of range.
  const int bits = int_bits(dt);
  const auto width = hn::Set(du, static_cast<uint32_t>(bits));
  const auto max_amount = hn::Set(du, 31u);
  // uint32 lanes need the unsigned forms of max, min, >>, division and pow; narrower unsigned
  // lanes hold non-negative values, for which the signed forms agree.
  const bool u32 = dt == DType::kUInt32;
  if (u32) {
    switch (op) {
      case OpCode::kMax:
        return map2(di, a, b, o, n, [&](V x, V y) HWY_ATTR {
          return hn::BitCast(di, hn::Max(hn::BitCast(du, x), hn::BitCast(du, y)));
        });
      case OpCode::kMin:
        return map2(di, a, b, o, n, [&](V x, V y) HWY_ATTR {
          return hn::BitCast(di, hn::Min(hn::BitCast(du, x), hn::BitCast(du, y)));
        });
      case OpCode::kShrA:
        op = OpCode::kShrL;  // jnp's >> of an unsigned integer is logical
        break;
      case OpCode::kDiv:
      case OpCode::kFloorDiv:
        for (int64_t j = 0; j < n; ++j) o[j] = uint_div(a[j], b[j]);
        return;
      case OpCode::kRem:
        for (int64_t j = 0; j < n; ++j) o[j] = uint_rem(a[j], b[j]);
        return;
      case OpCode::kPow:
        for (int64_t j = 0; j < n; ++j) o[j] = int_pow(a[j], b[j], true);
        return;
      default:
        break;
    }
  }
  const bool vector_op = with_int_binary_v(op, [&](auto tag) HWY_ATTR {
    constexpr OpCode kOp = decltype(tag)::value;
    map2(di, a, b, o, n, [&](V x, V y) HWY_ATTR { return IntBinaryV<kOp>(di, x, y); });
  });
  if (vector_op) return;
  switch (op) {
    case OpCode::kShl:
      return map2(di, a, b, o, n, [&](V x, V y) HWY_ATTR {
        const auto amt = hn::BitCast(du, y);
        const auto valid = hn::RebindMask(di, hn::Lt(amt, width));
        const auto r = hn::BitCast(du, x) << hn::Min(amt, max_amount);
        return hn::IfThenElseZero(valid, hn::BitCast(di, r));
      });
    case OpCode::kShrA:
      return map2(di, a, b, o, n, [&](V x, V y) HWY_ATTR {
        // int8 lanes are sign-extended, so shifting the 32-bit lane by up to 31 is exact.
        const auto sh = hn::BitCast(di, hn::Min(hn::BitCast(du, y), max_amount));
        return x >> sh;
      });
    case OpCode::kShrL:
      return map2(di, a, b, o, n, [&](V x, V y) HWY_ATTR {
        const auto amt = hn::BitCast(du, y);
        const auto valid = hn::RebindMask(di, hn::Lt(amt, width));
        auto xu = hn::BitCast(du, x);
        if (bits < 32) xu = hn::And(xu, hn::Set(du, (1u << bits) - 1));  // int8/16 as unsigned
        const auto r = xu >> hn::Min(amt, max_amount);
        return hn::IfThenElseZero(valid, hn::BitCast(di, r));
      });
    case OpCode::kDiv:
      for (int64_t j = 0; j < n; ++j) o[j] = int_div(a[j], b[j]);
      return;
    case OpCode::kRem:
      for (int64_t j = 0; j < n; ++j) o[j] = py_imod(a[j], b[j]);
      return;
    case OpCode::kFloorDiv:
      for (int64_t j = 0; j < n; ++j) o[j] = py_ifloordiv(a[j], b[j]);
      return;
    case OpCode::kPow:
      for (int64_t j = 0; j < n; ++j) o[j] = int_pow(a[j], b[j]);
      return;
    default:
      return;
  }
}

// ---- comparisons and select --------------------------------------------------------------------
// `flip`: int lanes holding uint32 bits, compared unsigned (the sign bit flipped first).
template <class D, class DI>
void Compare(D d, DI di, OpCode op, const hn::TFromD<D>* a, const hn::TFromD<D>* b, int32_t* o,
             int64_t n, bool flip = false) {
  const int64_t N = static_cast<int64_t>(hn::Lanes(d));
  const auto one = hn::Set(di, 1);
  [[maybe_unused]] const auto bias =
      hn::BitCast(d, hn::Set(di, flip ? std::numeric_limits<int32_t>::min() : 0));
  with_compare_v(op, [&](auto tag) HWY_ATTR {
    for (int64_t j = 0; j < n; j += N) {
      auto x = hn::Load(d, a + j);
      auto y = hn::Load(d, b + j);
      if constexpr (!hwy::IsFloat<hn::TFromD<D>>()) {
        x = hn::Xor(x, bias);
        y = hn::Xor(y, bias);
      }
      const auto m = CompareV<decltype(tag)::value>(d, x, y);
      hn::Store(hn::IfThenElseZero(hn::RebindMask(di, m), one), di, o + j);
    }
  });
}

template <class D, class DI>
void Select(D d, DI di, const int32_t* c, const hn::TFromD<D>* a, const hn::TFromD<D>* b,
            hn::TFromD<D>* o, int64_t n) {
  const int64_t N = static_cast<int64_t>(hn::Lanes(d));
  for (int64_t j = 0; j < n; j += N) {
    const auto m = hn::RebindMask(d, hn::Ne(hn::Load(di, c + j), hn::Zero(di)));
    hn::Store(hn::IfThenElse(m, hn::Load(d, a + j), hn::Load(d, b + j)), d, o + j);
  }
}

// ---- bitcast_convert_type -----------------------------------------------------------------------
// A lane of dtype `dt` (float lane f or int lane i) as the dtype's raw bits, zero-extended. A
// narrow float's lane holds its value exactly, so converting it back rounds nothing.
inline uint32_t lane_to_bits(DType dt, float f, int32_t i) {
  switch (dt) {
    case DType::kFloat32:
      return std::bit_cast<uint32_t>(f);
    case DType::kBFloat16:
      return bfloat16(f).bits;
    case DType::kFloat16:
      return float16(f).bits;
    case DType::kFloat8E4M3FN:
      return float8_e4m3fn(f).bits;
    case DType::kFloat8E5M2:
      return float8_e5m2(f).bits;
    case DType::kFloat8E4M3B11FNUZ:
      return float8_e4m3b11fnuz(f).bits;
    default: {
      const int bits = int_bits(dt);
      return static_cast<uint32_t>(i) & (bits == 32 ? 0xffffffffu : (1u << bits) - 1u);
    }
  }
}
// Raw bits `b` of dtype `dt` as its lane (signed integers sign-extended).
inline void bits_to_lane(DType dt, uint32_t b, float* f, int32_t* i) {
  switch (dt) {
    case DType::kFloat32:
      *f = std::bit_cast<float>(b);
      return;
    case DType::kBFloat16:
      *f = static_cast<float>(bfloat16::from_bits(static_cast<uint16_t>(b)));
      return;
    case DType::kFloat16:
      *f = static_cast<float>(float16::from_bits(static_cast<uint16_t>(b)));
      return;
    case DType::kFloat8E4M3FN:
      *f = static_cast<float>(float8_e4m3fn::from_bits(static_cast<uint8_t>(b)));
      return;
    case DType::kFloat8E5M2:
      *f = static_cast<float>(float8_e5m2::from_bits(static_cast<uint8_t>(b)));
      return;
    case DType::kFloat8E4M3B11FNUZ:
      *f = static_cast<float>(float8_e4m3b11fnuz::from_bits(static_cast<uint8_t>(b)));
      return;
    case DType::kInt8:
      *i = static_cast<int8_t>(static_cast<uint8_t>(b));
      return;
    case DType::kInt16:
      *i = static_cast<int16_t>(static_cast<uint16_t>(b));
      return;
    case DType::kInt4:
    case DType::kInt2: {
      const int sh = 32 - int_bits(dt);
      *i = static_cast<int32_t>(b << sh) >> sh;
      return;
    }
    default:
      *i = static_cast<int32_t>(b);
      return;
  }
}
// Node `out` (dtype `to`, float lanes when `out_flt`) from node `in` (dtype `from`), bit for bit.
inline void Bitcast(DType from, bool in_flt, const void* in, DType to, bool out_flt, void* out,
                    int64_t n) {
  const auto* fi = static_cast<const float*>(in);
  const auto* ii = static_cast<const int32_t*>(in);
  auto* fo = static_cast<float*>(out);
  auto* io = static_cast<int32_t*>(out);
  for (int64_t j = 0; j < n; ++j) {
    const uint32_t b = lane_to_bits(from, in_flt ? fi[j] : 0.0f, in_flt ? 0 : ii[j]);
    float f = 0.0f;
    int32_t i = 0;
    bits_to_lane(to, b, &f, &i);
    if (out_flt)
      fo[j] = f;
    else
      io[j] = i;
  }
}

}  // namespace tessera::detail::HWY_NAMESPACE
HWY_AFTER_NAMESPACE();

#endif  // include guard toggle
