// File: tessera/vector_math.h
//
// The elementwise functions of `jax.numpy` / `jax.lax` that Pallas TPU kernels use, on VMEM/SMEM
// refs and expressions (vector_ops.h has the operators and the evaluation model). Every function
// here builds an expression node; nothing runs until the expression is assigned to a ref, and a
// chain of them is fused into one pass with no temporaries.
//
//   Pallas                                          Tessera
//   o[...] = jnp.maximum(x[...], 0.0)               o = jnp::maximum(x, 0.0f);
//   o[...] = jnp.where(x[...] > 0, x[...], 0.0)     o = jnp::where(x > 0.0f, x, 0.0f);
//   o[...] = x[...].astype(jnp.bfloat16)            o = x.astype<bfloat16>();  // or jnp::astype
//   o[...] = jnp.exp(x[...] - m[...])               o = jnp::exp(x - m);
//   o[...] = jax.nn.sigmoid(x[...])                 o = lax::logistic(x);
//   o[...] = jnp.clip(x[...], -1.0, 1.0)            o = jnp::clip(x, -1.0f, 1.0f);
//
// Dtypes: functions that are only defined on reals (exp, log, sqrt, tanh, sin, erf, ...) take
// integer operands as float32, as jnp does; floor/ceil/round of an integer return it unchanged.
// bfloat16 operands are computed in float32 and rounded once per node.
//
// Accuracy of the float32 transcendentals (Highway's contrib/math with libm's special values,
// plus our own exp2 and erf), as tests/unit/vector_math_test.cc asserts it against the
// double-precision libm: exp, exp2, log, log1p, tanh, logistic, sin, cos within 4 ULP, or 1e-7
// absolute near a zero of the function; erf within 3e-7 absolute; sqrt exact, rsqrt
// (1 / sqrt) within 1 ULP. Measured there on 20011 points per range: exp 1 ULP on [-87, 88],
// exp2 1 ULP, log 1 ULP, log1p 2 ULP, sin 2 ULP on |x| <= 1e4, erf 2.7e-7. sin and cos are
// accurate for |x| <= 39000 (Highway's range); beyond, the result is not meaningful.
//
// Cost classes as Pallas' details.rst gives them: see each function.
#pragma once

#include <cstdint>
#include <source_location>
#include <type_traits>

#include "tessera/detail/runtime.h"
#include "tessera/vector_ops.h"

namespace tessera {
namespace detail {

/// An operand as an expression of dtype T: refs and expressions as they are, scalars as
/// ScalarExpr<T>.
template <class T, class X>
auto to_expr(const X& x) {
  if constexpr (Operand<X>) {
    return ExprOf<X>(AsExpr<std::remove_cvref_t<X>>::make(x));
  } else {
    return ScalarExpr<T>{{}, weak_cast<T>(x)};
  }
}

template <class X>
concept OperandOrScalar = Operand<X> || Scalar<X>;

/// A unary node whose operand and result are float (integers are taken as float32).
template <OpCode Op, class X>
auto make_float_unary(const X& x) {
  using T = FloatOf<ValueOf<X>>;
  return UnaryExpr<Op, T, ExprOf<X>>{{}, AsExpr<std::remove_cvref_t<X>>::make(x)};
}
/// A unary node that keeps its operand's dtype.
template <OpCode Op, class X>
auto make_same_unary(const X& x) {
  using T = ValueOf<X>;
  return UnaryExpr<Op, T, ExprOf<X>>{{}, AsExpr<std::remove_cvref_t<X>>::make(x)};
}
/// floor/ceil/round: identity on integers (jnp returns integer inputs unchanged).
template <OpCode Op, class X>
auto make_rounding(const X& x) {
  using T = ValueOf<X>;
  if constexpr (is_floating(dtype_of<T>)) {
    return UnaryExpr<Op, T, ExprOf<X>>{{}, AsExpr<std::remove_cvref_t<X>>::make(x)};
  } else {
    return CastExpr<T, ExprOf<X>>{{}, AsExpr<std::remove_cvref_t<X>>::make(x)};
  }
}

/// Throws kInvalidArgument for a negative integer exponent of an integer operand.
void check_integer_pow(bool integral, int64_t n, std::source_location where);

}  // namespace detail

namespace jnp {

/// `x.astype(U)`: x converted to U. float -> int truncates toward zero and saturates to U's
/// range (NaN gives 0); int -> narrower int wraps (uint32 <-> int32 keeps the bits); anything
/// -> bool is `x != 0`; bool -> number is 0 or 1; float -> bfloat16 / float16 / float8 rounds
/// to nearest even (float8_e4m3fn and float8_e4m3b11fnuz: overflow and infinity give NaN, as
/// ml_dtypes; float8_e4m3b11fnuz has no -0). Cheap.
/// `x.astype<U>()` is the same.
template <class U, class X>
requires detail::Operand<X>
auto astype(X&& x) {
  TESSERA_CHECK_NAMED(X);
  static_assert(is_element_type_v<U>,
                "tessera: astype<U> needs U in {float, bfloat16, float16, float8_e4m3fn, "
                "float8_e5m2, float8_e4m3b11fnuz, int32_t, int16_t, int8_t, uint32_t, uint16_t, "
                "uint8_t, int4, uint4, int2, uint2, bool}");
  return detail::CastExpr<U, detail::ExprOf<X>>{{},
                                                detail::AsExpr<std::remove_cvref_t<X>>::make(x)};
}

/// `jnp.maximum(a, b)`, `jnp.minimum(a, b)`: elementwise, jnp promotion, NaN propagates. Cheap.
template <class A, class B>
requires detail::BinaryOperands<A, B>
auto maximum(A&& a, B&& b) {
  TESSERA_CHECK_NAMED(A);
  TESSERA_CHECK_NAMED(B);
  return detail::make_binary<detail::OpCode::kMax>(a, b);
}
template <class A, class B>
requires detail::BinaryOperands<A, B>
auto minimum(A&& a, B&& b) {
  TESSERA_CHECK_NAMED(A);
  TESSERA_CHECK_NAMED(B);
  return detail::make_binary<detail::OpCode::kMin>(a, b);
}

/// `jnp.where(mask, a, b)`: a where mask is true, else b (a and b promoted together, weak
/// scalars allowed; the mask is converted to bool). All three broadcast together. Cheap.
template <class M, class A, class B>
requires detail::Operand<M> && detail::OperandOrScalar<A> && detail::OperandOrScalar<B>
auto where(M&& mask, A&& a, B&& b) {
  TESSERA_CHECK_NAMED(M);
  TESSERA_CHECK_NAMED(A);
  TESSERA_CHECK_NAMED(B);
  using T = detail::PromotedT<A, B>;
  auto ea = detail::to_expr<T>(a);
  auto eb = detail::to_expr<T>(b);
  using E = detail::SelectExpr<T, detail::ExprOf<M>, decltype(ea), decltype(eb)>;
  return E(detail::AsExpr<std::remove_cvref_t<M>>::make(mask), std::move(ea), std::move(eb));
}

/// `jnp.clip(x, lo, hi)`: `minimum(maximum(x, lo), hi)` (NaN propagates). Cheap.
template <class X, class L, class H>
requires detail::Operand<X> && detail::OperandOrScalar<L> && detail::OperandOrScalar<H>
auto clip(X&& x, L&& lo, H&& hi) {
  TESSERA_CHECK_NAMED(X);
  TESSERA_CHECK_NAMED(L);
  TESSERA_CHECK_NAMED(H);
  return minimum(maximum(std::forward<X>(x), std::forward<L>(lo)), std::forward<H>(hi));
}

/// Comparisons as functions: `jnp.equal(a, b)` is `a == b`, ... (bool masks). Cheap.
template <class A, class B>
requires detail::BinaryOperands<A, B>
auto equal(A&& a, B&& b) {
  TESSERA_CHECK_NAMED(A);
  TESSERA_CHECK_NAMED(B);
  return std::forward<A>(a) == std::forward<B>(b);
}
template <class A, class B>
requires detail::BinaryOperands<A, B>
auto not_equal(A&& a, B&& b) {
  TESSERA_CHECK_NAMED(A);
  TESSERA_CHECK_NAMED(B);
  return std::forward<A>(a) != std::forward<B>(b);
}
template <class A, class B>
requires detail::BinaryOperands<A, B>
auto less(A&& a, B&& b) {
  TESSERA_CHECK_NAMED(A);
  TESSERA_CHECK_NAMED(B);
  return std::forward<A>(a) < std::forward<B>(b);
}
template <class A, class B>
requires detail::BinaryOperands<A, B>
auto less_equal(A&& a, B&& b) {
  TESSERA_CHECK_NAMED(A);
  TESSERA_CHECK_NAMED(B);
  return std::forward<A>(a) <= std::forward<B>(b);
}
template <class A, class B>
requires detail::BinaryOperands<A, B>
auto greater(A&& a, B&& b) {
  TESSERA_CHECK_NAMED(A);
  TESSERA_CHECK_NAMED(B);
  return std::forward<A>(a) > std::forward<B>(b);
}
template <class A, class B>
requires detail::BinaryOperands<A, B>
auto greater_equal(A&& a, B&& b) {
  TESSERA_CHECK_NAMED(A);
  TESSERA_CHECK_NAMED(B);
  return std::forward<A>(a) >= std::forward<B>(b);
}

/// Bitwise ops as functions (integers and bools): jnp.bitwise_and/or/xor, jnp.invert,
/// jnp.left_shift, jnp.right_shift (arithmetic). Cheap.
template <class A, class B>
requires detail::BinaryOperands<A, B>
auto bitwise_and(A&& a, B&& b) {
  TESSERA_CHECK_NAMED(A);
  TESSERA_CHECK_NAMED(B);
  return std::forward<A>(a) & std::forward<B>(b);
}
template <class A, class B>
requires detail::BinaryOperands<A, B>
auto bitwise_or(A&& a, B&& b) {
  TESSERA_CHECK_NAMED(A);
  TESSERA_CHECK_NAMED(B);
  return std::forward<A>(a) | std::forward<B>(b);
}
template <class A, class B>
requires detail::BinaryOperands<A, B>
auto bitwise_xor(A&& a, B&& b) {
  TESSERA_CHECK_NAMED(A);
  TESSERA_CHECK_NAMED(B);
  return std::forward<A>(a) ^ std::forward<B>(b);
}
template <class A>
requires detail::Operand<A>
auto invert(A&& a) {
  TESSERA_CHECK_NAMED(A);
  return ~std::forward<A>(a);
}
template <class A>
requires detail::Operand<A>
auto bitwise_not(A&& a) {
  TESSERA_CHECK_NAMED(A);
  return ~std::forward<A>(a);
}
template <class A, class B>
requires detail::BinaryOperands<A, B>
auto left_shift(A&& a, B&& b) {
  TESSERA_CHECK_NAMED(A);
  TESSERA_CHECK_NAMED(B);
  return std::forward<A>(a) << std::forward<B>(b);
}
template <class A, class B>
requires detail::BinaryOperands<A, B>
auto right_shift(A&& a, B&& b) {
  TESSERA_CHECK_NAMED(A);
  TESSERA_CHECK_NAMED(B);
  return std::forward<A>(a) >> std::forward<B>(b);
}

/// Logical ops: the operands are converted to bool first (jnp.logical_and/or/xor/not). Cheap.
template <class A, class B>
requires detail::Operand<A> && detail::Operand<B>
auto logical_and(A&& a, B&& b) {
  TESSERA_CHECK_NAMED(A);
  TESSERA_CHECK_NAMED(B);
  return astype<bool>(std::forward<A>(a)) & astype<bool>(std::forward<B>(b));
}
template <class A, class B>
requires detail::Operand<A> && detail::Operand<B>
auto logical_or(A&& a, B&& b) {
  TESSERA_CHECK_NAMED(A);
  TESSERA_CHECK_NAMED(B);
  return astype<bool>(std::forward<A>(a)) | astype<bool>(std::forward<B>(b));
}
template <class A, class B>
requires detail::Operand<A> && detail::Operand<B>
auto logical_xor(A&& a, B&& b) {
  TESSERA_CHECK_NAMED(A);
  TESSERA_CHECK_NAMED(B);
  return astype<bool>(std::forward<A>(a)) ^ astype<bool>(std::forward<B>(b));
}
template <class A>
requires detail::Operand<A>
auto logical_not(A&& a) {
  TESSERA_CHECK_NAMED(A);
  return ~astype<bool>(std::forward<A>(a));
}

/// `jnp.add`, `jnp.subtract`, `jnp.multiply`, `jnp.divide` (true division), `jnp.negative`.
template <class A, class B>
requires detail::BinaryOperands<A, B>
auto add(A&& a, B&& b) {
  TESSERA_CHECK_NAMED(A);
  TESSERA_CHECK_NAMED(B);
  return std::forward<A>(a) + std::forward<B>(b);
}
template <class A, class B>
requires detail::BinaryOperands<A, B>
auto subtract(A&& a, B&& b) {
  TESSERA_CHECK_NAMED(A);
  TESSERA_CHECK_NAMED(B);
  return std::forward<A>(a) - std::forward<B>(b);
}
template <class A, class B>
requires detail::BinaryOperands<A, B>
auto multiply(A&& a, B&& b) {
  TESSERA_CHECK_NAMED(A);
  TESSERA_CHECK_NAMED(B);
  return std::forward<A>(a) * std::forward<B>(b);
}
template <class A, class B>
requires detail::BinaryOperands<A, B>
auto divide(A&& a, B&& b) {
  TESSERA_CHECK_NAMED(A);
  TESSERA_CHECK_NAMED(B);
  return std::forward<A>(a) / std::forward<B>(b);
}
template <class A>
requires detail::Operand<A>
auto negative(A&& a) {
  TESSERA_CHECK_NAMED(A);
  return -std::forward<A>(a);
}

/// `jnp.remainder(a, b)` (= `a % b`): the sign of the divisor; integer `x % 0 == x`. Medium.
template <class A, class B>
requires detail::BinaryOperands<A, B>
auto remainder(A&& a, B&& b) {
  TESSERA_CHECK_NAMED(A);
  TESSERA_CHECK_NAMED(B);
  return std::forward<A>(a) % std::forward<B>(b);
}
/// `jnp.floor_divide(a, b)` (Python's `a // b`): floor of the quotient; for integers
/// `x // 0 == -1` (XLA) and `INT_MIN // -1 == INT_MIN`; for floats numpy's divmod rule.
/// Medium (integers: one lane at a time).
template <class A, class B>
requires detail::BinaryOperands<A, B>
auto floor_divide(A&& a, B&& b) {
  TESSERA_CHECK_NAMED(A);
  TESSERA_CHECK_NAMED(B);
  return detail::make_remainder<detail::OpCode::kFloorDiv>(a, b);
}

/// `jnp.abs(x)` (int8 -128 stays -128, as numpy), `jnp.sign(x)` (-1, 0 or 1; NaN and -0.0
/// stay), `jnp.square(x)`. Cheap.
template <class X>
requires detail::Operand<X>
auto abs(X&& x) {
  TESSERA_CHECK_NAMED(X);
  return detail::make_same_unary<detail::OpCode::kAbs>(x);
}
template <class X>
requires detail::Operand<X>
auto absolute(X&& x) {
  TESSERA_CHECK_NAMED(X);
  return detail::make_same_unary<detail::OpCode::kAbs>(x);
}
template <class X>
requires detail::Operand<X>
auto sign(X&& x) {
  TESSERA_CHECK_NAMED(X);
  return detail::make_same_unary<detail::OpCode::kSign>(x);
}
template <class X>
requires detail::Operand<X>
auto square(X&& x) {
  TESSERA_CHECK_NAMED(X);
  return detail::make_same_unary<detail::OpCode::kSquare>(x);
}

/// `jnp.sqrt(x)` (correctly rounded; NaN below 0). Medium.
template <class X>
requires detail::Operand<X>
auto sqrt(X&& x) {
  TESSERA_CHECK_NAMED(X);
  return detail::make_float_unary<detail::OpCode::kSqrt>(x);
}
/// `jnp.exp`, `jnp.exp2`, `jnp.log`, `jnp.log1p`, `jnp.tanh` (accuracy: file comment). Medium.
template <class X>
requires detail::Operand<X>
auto exp(X&& x) {
  TESSERA_CHECK_NAMED(X);
  return detail::make_float_unary<detail::OpCode::kExp>(x);
}
template <class X>
requires detail::Operand<X>
auto exp2(X&& x) {
  TESSERA_CHECK_NAMED(X);
  return detail::make_float_unary<detail::OpCode::kExp2>(x);
}
template <class X>
requires detail::Operand<X>
auto log(X&& x) {
  TESSERA_CHECK_NAMED(X);
  return detail::make_float_unary<detail::OpCode::kLog>(x);
}
template <class X>
requires detail::Operand<X>
auto log1p(X&& x) {
  TESSERA_CHECK_NAMED(X);
  return detail::make_float_unary<detail::OpCode::kLog1p>(x);
}
template <class X>
requires detail::Operand<X>
auto tanh(X&& x) {
  TESSERA_CHECK_NAMED(X);
  return detail::make_float_unary<detail::OpCode::kTanh>(x);
}
/// `jnp.sin`, `jnp.cos`: accurate for |x| <= 39000 (file comment). Expensive.
template <class X>
requires detail::Operand<X>
auto sin(X&& x) {
  TESSERA_CHECK_NAMED(X);
  return detail::make_float_unary<detail::OpCode::kSin>(x);
}
template <class X>
requires detail::Operand<X>
auto cos(X&& x) {
  TESSERA_CHECK_NAMED(X);
  return detail::make_float_unary<detail::OpCode::kCos>(x);
}
/// `jnp.floor`, `jnp.ceil`, `jnp.round` (half to even, as numpy; no `decimals`): identity on
/// integers. Cheap.
template <class X>
requires detail::Operand<X>
auto floor(X&& x) {
  TESSERA_CHECK_NAMED(X);
  return detail::make_rounding<detail::OpCode::kFloor>(x);
}
template <class X>
requires detail::Operand<X>
auto ceil(X&& x) {
  TESSERA_CHECK_NAMED(X);
  return detail::make_rounding<detail::OpCode::kCeil>(x);
}
template <class X>
requires detail::Operand<X>
auto round(X&& x) {
  TESSERA_CHECK_NAMED(X);
  return detail::make_rounding<detail::OpCode::kRound>(x);
}

/// `jnp.power(a, b)`. With an integer scalar exponent it is lax.integer_pow (as jnp does for
/// Python ints); otherwise float pow (C's powf per lane) or, for integer operands, integer
/// power by squaring (wrapping; a negative exponent gives 0 except for bases 1 and -1).
/// Medium.
template <class A, class B>
requires detail::BinaryOperands<A, B>
auto power(A&& a, B&& b, std::source_location where = std::source_location::current()) {
  if constexpr (detail::Operand<A> && detail::Scalar<B> &&
                std::is_integral_v<detail::ScalarType<B>> &&
                !std::is_same_v<detail::ScalarType<B>, bool>) {
    using T = detail::ValueOf<A>;
    detail::check_integer_pow(!is_floating(dtype_of<T>), static_cast<int64_t>(b), where);
    return detail::UnaryExpr<detail::OpCode::kIntegerPow, T, detail::ExprOf<A>>{
        {}, detail::AsExpr<std::remove_cvref_t<A>>::make(a), static_cast<int64_t>(b)};
  } else {
    return detail::make_binary<detail::OpCode::kPow>(a, b);
  }
}

}  // namespace jnp

namespace lax {

/// `lax.max`, `lax.min` (= jnp.maximum / jnp.minimum). Cheap.
template <class A, class B>
requires detail::BinaryOperands<A, B>
auto max(A&& a, B&& b) {
  TESSERA_CHECK_NAMED(A);
  TESSERA_CHECK_NAMED(B);
  return jnp::maximum(std::forward<A>(a), std::forward<B>(b));
}
template <class A, class B>
requires detail::BinaryOperands<A, B>
auto min(A&& a, B&& b) {
  TESSERA_CHECK_NAMED(A);
  TESSERA_CHECK_NAMED(B);
  return jnp::minimum(std::forward<A>(a), std::forward<B>(b));
}
/// `lax.clamp(lo, x, hi)`: `minimum(maximum(x, lo), hi)` in x's dtype. Cheap.
template <class L, class X, class H>
requires detail::Operand<X> && detail::OperandOrScalar<L> && detail::OperandOrScalar<H>
auto clamp(L&& lo, X&& x, H&& hi) {
  TESSERA_CHECK_NAMED(L);
  TESSERA_CHECK_NAMED(X);
  TESSERA_CHECK_NAMED(H);
  return jnp::clip(std::forward<X>(x), std::forward<L>(lo), std::forward<H>(hi));
}
/// `lax.integer_pow(x, n)`: x multiplied by itself (by squaring); negative n is 1 / x**-n
/// for floats and a kInvalidArgument error for integers (at this call). Cheap per multiply.
template <class X>
requires detail::Operand<X>
auto integer_pow(X&& x, int n, std::source_location where = std::source_location::current()) {
  using T = detail::ValueOf<X>;
  detail::check_integer_pow(!is_floating(dtype_of<T>), n, where);
  return detail::UnaryExpr<detail::OpCode::kIntegerPow, T, detail::ExprOf<X>>{
      {}, detail::AsExpr<std::remove_cvref_t<X>>::make(x), n};
}
/// `lax.pow(a, b)` (= jnp.power with a non-integer exponent). Medium.
template <class A, class B>
requires detail::BinaryOperands<A, B>
auto pow(A&& a, B&& b) {
  TESSERA_CHECK_NAMED(A);
  TESSERA_CHECK_NAMED(B);
  return detail::make_binary<detail::OpCode::kPow>(a, b);
}
/// `lax.square`, `lax.sqrt`, `lax.exp`, `lax.exp2`, `lax.log`, `lax.log1p`, `lax.tanh` and the
/// rounding functions, as in jnp.
using jnp::ceil;
using jnp::cos;
using jnp::exp;
using jnp::exp2;
using jnp::floor;
using jnp::log;
using jnp::log1p;
using jnp::sin;
using jnp::sqrt;
using jnp::square;
using jnp::tanh;
/// `lax.rsqrt(x)`: 1 / sqrt(x), correctly rounded division of the correctly rounded root.
/// Medium.
template <class X>
requires detail::Operand<X>
auto rsqrt(X&& x) {
  TESSERA_CHECK_NAMED(X);
  return detail::make_float_unary<detail::OpCode::kRsqrt>(x);
}
/// `lax.logistic(x)` (= jax.nn.sigmoid): 1 / (1 + exp(-x)). Medium.
template <class X>
requires detail::Operand<X>
auto logistic(X&& x) {
  TESSERA_CHECK_NAMED(X);
  return detail::make_float_unary<detail::OpCode::kLogistic>(x);
}
/// `lax.erf(x)` (also jax.scipy.special.erf): within 3e-7 absolute of erf. Medium.
template <class X>
requires detail::Operand<X>
auto erf(X&& x) {
  TESSERA_CHECK_NAMED(X);
  return detail::make_float_unary<detail::OpCode::kErf>(x);
}
/// `lax.shift_left`, `lax.shift_right_arithmetic` (= `<<`, `>>`) and
/// `lax.shift_right_logical(x, n)`: the bits of x shifted down with zeros in (int8 as uint8).
/// Shift amounts outside 0..bits-1 give 0 (sign fill for the arithmetic shift). Cheap.
template <class A, class B>
requires detail::BinaryOperands<A, B>
auto shift_left(A&& a, B&& b) {
  TESSERA_CHECK_NAMED(A);
  TESSERA_CHECK_NAMED(B);
  return std::forward<A>(a) << std::forward<B>(b);
}
template <class A, class B>
requires detail::BinaryOperands<A, B>
auto shift_right_arithmetic(A&& a, B&& b) {
  TESSERA_CHECK_NAMED(A);
  TESSERA_CHECK_NAMED(B);
  return std::forward<A>(a) >> std::forward<B>(b);
}
template <class A, class B>
requires detail::BinaryOperands<A, B>
auto shift_right_logical(A&& a, B&& b) {
  TESSERA_CHECK_NAMED(A);
  TESSERA_CHECK_NAMED(B);
  return detail::make_shift<detail::OpCode::kShrL>(a, b);
}
/// `lax.select(mask, on_true, on_false)` (= jnp.where with operands). Cheap.
template <class M, class A, class B>
requires detail::Operand<M> && detail::OperandOrScalar<A> && detail::OperandOrScalar<B>
auto select(M&& mask, A&& a, B&& b) {
  TESSERA_CHECK_NAMED(M);
  TESSERA_CHECK_NAMED(A);
  TESSERA_CHECK_NAMED(B);
  return jnp::where(std::forward<M>(mask), std::forward<A>(a), std::forward<B>(b));
}
/// `lax.convert_element_type(x, U)` (= astype).
template <class U, class X>
requires detail::Operand<X>
auto convert_element_type(X&& x) {
  TESSERA_CHECK_NAMED(X);
  return jnp::astype<U>(std::forward<X>(x));
}

}  // namespace lax

namespace jnp {
/// `jax.scipy.special.erf` is also reachable as jnp::erf (= lax::erf).
using lax::erf;
}  // namespace jnp

// ---- member spellings: x.astype<U>() -----------------------------------------------------
template <class T, MemorySpace Space>
template <class U>
auto pl::Ref<T, Space>::astype() const {
  return jnp::astype<U>(*this);
}
template <class Derived, class V>
template <class U>
auto detail::ExprOps<Derived, V>::astype() const& {
  TESSERA_CHECK_NAMED(const Derived&);
  return jnp::astype<U>(static_cast<const Derived&&>(static_cast<const Derived&>(*this)));
}
template <class Derived, class V>
template <class U>
auto detail::ExprOps<Derived, V>::astype() && {
  return jnp::astype<U>(static_cast<Derived&&>(*this));
}

}  // namespace tessera
