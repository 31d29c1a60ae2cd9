// Per-target float math of the native VPU, included by vector_ops-inl.h once per Highway target
// (foreach_target.h): the float ops computed a vector at a time (UnaryV, BinaryV) and the
// functions they are built from. The tile evaluator (UnaryF, BinaryF in vector_ops-inl.h) and the
// fused trees (vector_fused_tree-inl.h) both take them, so both give the same bits.

// Re-included per target: the guard toggles with HWY_TARGET_TOGGLE (Highway's -inl.h idiom).
#if defined(TESSERA_NATIVE_VECTOR_MATH_INL_H_) == defined(HWY_TARGET_TOGGLE)
#ifdef TESSERA_NATIVE_VECTOR_MATH_INL_H_
#undef TESSERA_NATIVE_VECTOR_MATH_INL_H_
#else
#define TESSERA_NATIVE_VECTOR_MATH_INL_H_
#endif

#include <hwy/contrib/math/math-inl.h>
#include <hwy/highway.h>

#include <cmath>
#include <cstddef>
#include <cstdint>
#include <iterator>
#include <limits>
#include <type_traits>
#include <utility>

#include "tessera/detail/expr_program.h"

HWY_BEFORE_NAMESPACE();
namespace tessera::detail::HWY_NAMESPACE {
namespace hn = hwy::HWY_NAMESPACE;

/// max/min that propagate NaN (jnp.maximum); x86's max returns the second operand instead.
template <class D, class V>
HWY_INLINE V MaxNaN(D, V a, V b) {
  const V r = hn::Max(a, b);
  return hn::IfThenElse(hn::IsNaN(b), b, hn::IfThenElse(hn::IsNaN(a), a, r));
}
template <class D, class V>
HWY_INLINE V MinNaN(D, V a, V b) {
  const V r = hn::Min(a, b);
  return hn::IfThenElse(hn::IsNaN(b), b, hn::IfThenElse(hn::IsNaN(a), a, r));
}

/// 2**x: x = n + f with n = round(x) and |f| <= 0.5, so exp(f * ln 2) keeps full accuracy; 2**n
/// is applied as two exact power-of-two factors so that results near the subnormal and overflow
/// limits are right.
template <class D, class V>
HWY_INLINE V Exp2(D d, V x) {
  const hn::RebindToSigned<D> di;
  const V xc = hn::Min(hn::Max(x, hn::Set(d, -160.0f)), hn::Set(d, 160.0f));
  const V n = hn::Round(xc);
  const V f = hn::Sub(xc, n);
  const V e = hn::Exp(d, hn::Mul(f, hn::Set(d, 0.69314718055994531f)));
  const auto ni = hn::ConvertTo(di, n);
  const auto n1 = hn::ShiftRight<1>(ni);  // floor(n / 2)
  const auto n2 = hn::Sub(ni, n1);
  const auto bias = hn::Set(di, 127);
  const V p1 = hn::BitCast(d, hn::ShiftLeft<23>(hn::Add(n1, bias)));
  const V p2 = hn::BitCast(d, hn::ShiftLeft<23>(hn::Add(n2, bias)));
  const V r = hn::Mul(hn::Mul(e, p1), p2);
  return hn::IfThenElse(hn::IsNaN(x), x, r);
}

/// exp(x) for x below -87 (ln(FLT_MIN) is -87.34), where the result is subnormal, 0 or at most
/// twice FLT_MIN, without a subnormal intermediate: x = n ln2 + r (|r| <= ln2 / 2; ln2 in two
/// parts, so n ln2_hi is exact), and p = exp(r) scaled by 2^(n + 149), a normal float, rounds to
/// the integer that is the result's bit pattern (its quantum is 2^-149; 2^23 is FLT_MIN's). On
/// Intel an arithmetic result that is subnormal takes a microcode assist (over a hundred cycles)
/// unless the FPU flushes it, and softmax over a row whose scores lie far below its maximum makes
/// many of them (docs/performance.md, "Softmax: row reductions and exp").
template <class D, class V>
HWY_INLINE V ExpTiny(D d, V x) {
  const hn::RebindToSigned<D> di;
  const V xc = hn::Max(x, hn::Set(d, -110.0f));  // exp(-110) rounds to 0 already
  const V n = hn::Round(hn::Mul(xc, hn::Set(d, 1.44269504088896341f)));  // -159 .. -125
  const V r = hn::MulAdd(n, hn::Set(d, -1.428606765330187045e-6f),
                         hn::MulAdd(n, hn::Set(d, -0.693145751953125f), xc));
  const V p = hn::Exp(d, r);
  const auto field = hn::Add(hn::ConvertTo(di, n), hn::Set(di, 149 + 127));  // 2^(n + 149)
  const V scale = hn::BitCast(d, hn::ShiftLeft<23>(field));
  return hn::BitCast(d, hn::NearestInt(hn::Mul(p, scale)));
}

/// exp(x) for x in [-87, 88], bit for bit Highway's (hn::Exp) there: q = round(x / ln 2) (halves
/// away from 0), exp(r) for r = x - q ln 2 by Highway's reduction and polynomial, then 2^q in one
/// multiply where Highway takes two factors of 2^(q/2): both exact powers of two, and every
/// intermediate and result here is a normal float, so the bits are the same.
template <class D, class V>
HWY_INLINE V ExpNormal(D d, V x) {
  const hn::Rebind<int32_t, D> di;
  hn::impl::ExpImpl<float> impl;
  const auto q =
      impl.ToInt32(d, hn::MulAdd(x, hn::Set(d, 1.442695040888963407359924681f),
                                 hn::Or(hn::Set(d, 0.5f), hn::And(x, hn::Set(d, -0.0f)))));
  const V p = hn::Add(impl.ExpPoly(d, impl.ExpReduce(d, x, q)), hn::Set(d, 1.0f));
  return hn::Mul(p, hn::BitCast(d, hn::ShiftLeft<23>(hn::Add(q, hn::Set(di, 127)))));
}

/// exp(x) with Highway's kernel, extended to the whole float range: +inf above 100 (Highway is
/// not valid beyond +104, where the result is +inf anyway), and below -87 ExpTiny's subnormals
/// and zeros. hn::Exp rather than hn::CallExp (which Highway keeps out of line):
/// inlined, a tile's loop overlaps consecutive vectors' polynomials (softmax's exp(s - max) 3-4%
/// faster). A vector whose lanes all lie in [-87, 88], or else there and below -103.97 where the
/// result is 0 (the masked scores of attention), takes ExpNormal without the clamps, the NaN
/// blend and the subnormal path: about 21 operations a vector instead of 32 (docs/performance.md,
/// "exp's common case").
template <class D, class V>
HWY_INLINE V ExpFull(D d, V x) {
  // Just above ln(FLT_MIN) = -87.34: at lo Highway's result and its scaling steps are normal
  // floats; below it ExpTiny's bit patterns are exact for normals too (up to 2^24, twice FLT_MIN).
  const V lo = hn::Set(d, -87.0f);
  const auto in = hn::And(hn::Ge(x, lo), hn::Le(x, hn::Set(d, 88.0f)));  // a NaN is not in
  if (hn::AllTrue(d, in)) return ExpNormal(d, x);
  const auto zero = hn::Lt(x, hn::Set(d, -103.972077f));  // ln(2^-150): exp rounds to 0 below
  if (hn::AllTrue(d, hn::Or(in, zero)))
    return hn::IfThenZeroElse(zero, ExpNormal(d, hn::Max(x, lo)));
  const auto tiny = hn::Lt(x, lo);
  V r = hn::Exp(d, hn::Min(hn::Max(x, lo), hn::Set(d, 100.0f)));
  if (!hn::AllFalse(d, tiny)) {
    // Below ln(2^-150) = -103.97 the result rounds to 0 (the masked scores of attention land
    // there, and take no ExpTiny).
    r = hn::IfThenZeroElse(zero, r);
    const auto band = hn::AndNot(zero, tiny);
    if (!hn::AllFalse(d, band)) r = hn::IfThenElse(band, ExpTiny(d, x), r);
  }
  return hn::IfThenElse(hn::IsNaN(x), x, r);
}

/// log(x) with the special values libm gives: log(0) = -inf, log(x < 0) = NaN, log(inf) = inf.
template <class D, class V>
HWY_INLINE V LogFull(D d, V x) {
  const V inf = hn::Set(d, std::numeric_limits<float>::infinity());
  const V nan = hn::Set(d, std::numeric_limits<float>::quiet_NaN());
  V r = hn::Log(d, hn::Max(x, hn::Set(d, std::numeric_limits<float>::denorm_min())));
  r = hn::IfThenElse(hn::Eq(x, hn::Zero(d)), hn::Neg(inf), r);
  r = hn::IfThenElse(hn::Eq(x, inf), inf, r);
  r = hn::IfThenElse(hn::Lt(x, hn::Zero(d)), nan, r);
  return hn::IfThenElse(hn::IsNaN(x), x, r);
}
template <class D, class V>
HWY_INLINE V Log1pFull(D d, V x) {
  const V inf = hn::Set(d, std::numeric_limits<float>::infinity());
  const V nan = hn::Set(d, std::numeric_limits<float>::quiet_NaN());
  const V m1 = hn::Set(d, -1.0f);
  V r = hn::Log1p(d, hn::Max(x, hn::Set(d, -0.99999994f)));
  r = hn::IfThenElse(hn::Eq(x, m1), hn::Neg(inf), r);
  r = hn::IfThenElse(hn::Eq(x, inf), inf, r);
  r = hn::IfThenElse(hn::Lt(x, m1), nan, r);
  return hn::IfThenElse(hn::IsNaN(x), x, r);
}

/// erf(x) = x * P(x^2) / Q(x^2) on [-4, 4] (the rational approximation XLA and Eigen use for
/// float32), clamped outside where erf is +-1 in float32.
template <class D, class V>
HWY_INLINE V Erf(D d, V x) {
  const V xc = hn::Min(hn::Max(x, hn::Set(d, -4.0f)), hn::Set(d, 4.0f));
  const V x2 = hn::Mul(xc, xc);
  V p = hn::Set(d, -2.72614225801306e-10f);
  p = hn::MulAdd(x2, p, hn::Set(d, 2.77068142495902e-08f));
  p = hn::MulAdd(x2, p, hn::Set(d, -2.10102402082508e-06f));
  p = hn::MulAdd(x2, p, hn::Set(d, -5.69250639462346e-05f));
  p = hn::MulAdd(x2, p, hn::Set(d, -7.34990630326855e-04f));
  p = hn::MulAdd(x2, p, hn::Set(d, -2.95459980854025e-03f));
  p = hn::MulAdd(x2, p, hn::Set(d, -1.60960333262415e-02f));
  p = hn::Mul(p, xc);
  V q = hn::Set(d, -1.45660718464996e-05f);
  q = hn::MulAdd(x2, q, hn::Set(d, -2.13374055278905e-04f));
  q = hn::MulAdd(x2, q, hn::Set(d, -1.68282697438203e-03f));
  q = hn::MulAdd(x2, q, hn::Set(d, -7.37332916720468e-03f));
  q = hn::MulAdd(x2, q, hn::Set(d, -1.42647390514189e-02f));
  const V r = hn::Div(p, q);
  return hn::IfThenElse(hn::IsNaN(x), x, r);
}

/// erf^-1(x) in float32: M. Giles' single-precision approximation ("Approximating the erfinv
/// function", GPU Computing Gems, 2011), two polynomials in w = -log1p(-x^2); +-1 give +-inf,
/// |x| > 1 NaN.
inline float erf_inv(float x) {
  float w = -std::log1p(-x * x);
  float p;
  if (w < 5.0f) {
    w -= 2.5f;
    p = 2.81022636e-08f;
    p = 3.43273939e-07f + p * w;
    p = -3.5233877e-06f + p * w;
    p = -4.39150654e-06f + p * w;
    p = 0.00021858087f + p * w;
    p = -0.00125372503f + p * w;
    p = -0.00417768164f + p * w;
    p = 0.246640727f + p * w;
    p = 1.50140941f + p * w;
  } else {
    w = std::sqrt(w) - 3.0f;
    p = -0.000200214257f;
    p = 0.000100950558f + p * w;
    p = 0.00134934322f + p * w;
    p = -0.00367342844f + p * w;
    p = 0.00573950773f + p * w;
    p = -0.0076224613f + p * w;
    p = 0.00943887047f + p * w;
    p = 1.00167406f + p * w;
    p = 2.83297682f + p * w;
  }
  if (std::fabs(x) == 1.0f) return x * std::numeric_limits<float>::infinity();
  return p * x;
}

// ---- the float ops a vector at a time ----------------------------------------------------------
// The math library's functions are inlined (Highway's Call* wrappers are out-of-line calls).

template <OpCode Op>
using OpTag = std::integral_constant<OpCode, Op>;

/// Float unary op `Op` of x; `k` is kIntegerPow's exponent.
template <OpCode Op, class DF, class V = hn::Vec<DF>>
HWY_INLINE V UnaryV(DF df, int64_t k, V x) {
  const V one = hn::Set(df, 1.0f);
  if constexpr (Op == OpCode::kNeg) {
    return hn::Neg(x);
  } else if constexpr (Op == OpCode::kAbs) {
    return hn::Abs(x);
  } else if constexpr (Op == OpCode::kSign) {
    const V z = hn::Zero(df);
    return hn::IfThenElse(hn::Gt(x, z), one, hn::IfThenElse(hn::Lt(x, z), hn::Neg(one), x));
  } else if constexpr (Op == OpCode::kSquare) {
    return hn::Mul(x, x);
  } else if constexpr (Op == OpCode::kSqrt) {
    return hn::Sqrt(x);
  } else if constexpr (Op == OpCode::kRsqrt) {
    return hn::Div(one, hn::Sqrt(x));
  } else if constexpr (Op == OpCode::kExp) {
    return ExpFull(df, x);
  } else if constexpr (Op == OpCode::kExp2) {
    return Exp2(df, x);
  } else if constexpr (Op == OpCode::kLog) {
    return LogFull(df, x);
  } else if constexpr (Op == OpCode::kLog1p) {
    return Log1pFull(df, x);
  } else if constexpr (Op == OpCode::kTanh) {
    return hn::IfThenElse(hn::IsNaN(x), x, hn::Tanh(df, x));
  } else if constexpr (Op == OpCode::kLogistic) {
    return hn::Div(one, hn::Add(one, ExpFull(df, hn::Neg(x))));
  } else if constexpr (Op == OpCode::kSin) {
    return hn::Sin(df, x);
  } else if constexpr (Op == OpCode::kCos) {
    return hn::Cos(df, x);
  } else if constexpr (Op == OpCode::kErf) {
    return Erf(df, x);
  } else if constexpr (Op == OpCode::kFloor) {
    return hn::Floor(x);
  } else if constexpr (Op == OpCode::kCeil) {
    return hn::Ceil(x);
  } else if constexpr (Op == OpCode::kRound) {
    return hn::Round(x);
  } else {
    static_assert(Op == OpCode::kIntegerPow);
    const int64_t e = k < 0 ? -k : k;
    V r = one;
    V b = x;
    for (int64_t m = e; m > 0; m >>= 1) {
      if (m & 1) r = hn::Mul(r, b);
      if (m > 1) b = hn::Mul(b, b);
    }
    return k < 0 ? hn::Div(one, r) : r;
  }
}

/// Float binary op `Op` of x and y (maximum and minimum propagate NaN).
template <OpCode Op, class DF, class V = hn::Vec<DF>>
HWY_INLINE V BinaryV(DF df, V x, V y) {
  if constexpr (Op == OpCode::kAdd) {
    return hn::Add(x, y);
  } else if constexpr (Op == OpCode::kSub) {
    return hn::Sub(x, y);
  } else if constexpr (Op == OpCode::kMul) {
    return hn::Mul(x, y);
  } else if constexpr (Op == OpCode::kDiv) {
    return hn::Div(x, y);
  } else if constexpr (Op == OpCode::kMax) {
    return MaxNaN(df, x, y);
  } else {
    static_assert(Op == OpCode::kMin);
    return MinNaN(df, x, y);
  }
}

/// The float ops UnaryV and BinaryV compute.
inline constexpr OpCode kUnaryVOps[] = {
    OpCode::kNeg,   OpCode::kAbs,      OpCode::kSign,  OpCode::kSquare,    OpCode::kSqrt,
    OpCode::kRsqrt, OpCode::kExp,      OpCode::kExp2,  OpCode::kLog,       OpCode::kLog1p,
    OpCode::kTanh,  OpCode::kLogistic, OpCode::kSin,   OpCode::kCos,       OpCode::kErf,
    OpCode::kFloor, OpCode::kCeil,     OpCode::kRound, OpCode::kIntegerPow};
inline constexpr OpCode kBinaryVOps[] = {OpCode::kAdd, OpCode::kSub, OpCode::kMul,
                                         OpCode::kDiv, OpCode::kMax, OpCode::kMin};

/// Where `op` is in `ops`; -1 when it is not there.
template <size_t N>
constexpr int op_index(const OpCode (&ops)[N], OpCode op) {
  for (size_t i = 0; i < N; ++i) {
    if (ops[i] == op) return static_cast<int>(i);
  }
  return -1;
}

template <const auto& Ops, class F, size_t... I>
HWY_INLINE bool with_op(OpCode op, F& f, std::index_sequence<I...>) {
  return ((op == Ops[I] && (f(OpTag<Ops[I]>()), true)) || ...);
}

/// Calls f(OpTag<op>()) for a float unary op UnaryV computes and returns true; false for another.
template <class F>
HWY_INLINE bool with_unary_v(OpCode op, F f) {
  return with_op<kUnaryVOps>(op, f, std::make_index_sequence<std::size(kUnaryVOps)>());
}
/// Calls f(OpTag<op>()) for a float binary op BinaryV computes and returns true; false for
/// another.
template <class F>
HWY_INLINE bool with_binary_v(OpCode op, F f) {
  return with_op<kBinaryVOps>(op, f, std::make_index_sequence<std::size(kBinaryVOps)>());
}

/// The int32 ops computed a vector at a time (on int32 lanes; bool lanes hold 0 or 1): wrapping
/// + - *, signed maximum and minimum, bitwise and, or, xor.
inline constexpr OpCode kIntBinaryVOps[] = {OpCode::kAdd, OpCode::kSub, OpCode::kMul, OpCode::kMax,
                                            OpCode::kMin, OpCode::kAnd, OpCode::kOr,  OpCode::kXor};
template <OpCode Op, class DI, class V = hn::Vec<DI>>
HWY_INLINE V IntBinaryV(DI di, V x, V y) {
  if constexpr (Op == OpCode::kAdd || Op == OpCode::kSub || Op == OpCode::kMul) {
    return BinaryV<Op>(di, x, y);
  } else if constexpr (Op == OpCode::kMax) {
    return hn::Max(x, y);
  } else if constexpr (Op == OpCode::kMin) {
    return hn::Min(x, y);
  } else if constexpr (Op == OpCode::kAnd) {
    return hn::And(x, y);
  } else if constexpr (Op == OpCode::kOr) {
    return hn::Or(x, y);
  } else {
    static_assert(Op == OpCode::kXor);
    return hn::Xor(x, y);
  }
}

/// The comparisons, of float lanes or of int32 lanes: a mask. != is true for NaN, as numpy's
/// (x86's NEQ_OQ is not); integer <= and >= are the negations (Highway 1.0.3 has no integer Le,
/// Ge).
inline constexpr OpCode kCompareOps[] = {OpCode::kEq, OpCode::kNe, OpCode::kLt,
                                         OpCode::kLe, OpCode::kGt, OpCode::kGe};
template <OpCode Op, class D, class V = hn::Vec<D>>
HWY_INLINE hn::Mask<D> CompareV(D, V x, V y) {
  constexpr bool kFloat = hwy::IsFloat<hn::TFromD<D>>();
  if constexpr (Op == OpCode::kEq) {
    return hn::Eq(x, y);
  } else if constexpr (Op == OpCode::kNe) {
    return hn::Not(hn::Eq(x, y));
  } else if constexpr (Op == OpCode::kLt) {
    return hn::Lt(x, y);
  } else if constexpr (Op == OpCode::kLe) {
    if constexpr (kFloat)
      return hn::Le(x, y);
    else
      return hn::Not(hn::Gt(x, y));
  } else if constexpr (Op == OpCode::kGt) {
    return hn::Gt(x, y);
  } else {
    static_assert(Op == OpCode::kGe);
    if constexpr (kFloat)
      return hn::Ge(x, y);
    else
      return hn::Not(hn::Lt(x, y));
  }
}

template <class F>
HWY_INLINE bool with_int_binary_v(OpCode op, F f) {
  return with_op<kIntBinaryVOps>(op, f, std::make_index_sequence<std::size(kIntBinaryVOps)>());
}
template <class F>
HWY_INLINE bool with_compare_v(OpCode op, F f) {
  return with_op<kCompareOps>(op, f, std::make_index_sequence<std::size(kCompareOps)>());
}

}  // namespace tessera::detail::HWY_NAMESPACE
HWY_AFTER_NAMESPACE();

#endif  // TESSERA_NATIVE_VECTOR_MATH_INL_H_
