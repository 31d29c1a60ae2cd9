// File: tessera/vector_extra.h
//
// The smaller jax.numpy / jax.lax functions that Pallas kernels use beside the core ones of
// vector_math.h and vector_reduce.h: float classification, boolean reductions, bit counts,
// and alternative spellings. Like every elementwise function they build expression nodes, fused
// into the one pass of the assignment that uses them.
//
//   Pallas                                          Tessera
//   o[...] = jnp.isnan(x[...])                      o = jnp::isnan(x);   // also isinf, isfinite
//   o[...] = jnp.all(x[...] > 0, axis=1)            o = jnp::all(x > 0.0f, 1);   // jnp::any
//   o[...] = lax.select_n(w[...], a, b, c)          o = lax::select_n(w, a, b, c);
//   o[...] = lax.population_count(x[...])           o = lax::population_count(x);   // lax::clz
//   o[...] = jnp.nextafter(x[...], y[...])          o = jnp::nextafter(x, y);
//   o[...] = jnp.swapaxes(x[...], 0, 1)             o = jnp::swapaxes(x, 0, 1);
//   o[...] = jax.nn.relu(x[...])                    o = jax::nn::relu(x);
//
// Costs (Pallas' details.rst classes): isnan/isinf/isfinite, select_n, rint, relu, the shifts:
// cheap; reciprocal: medium (a division); tan, erf_inv, nextafter, population_count, clz:
// medium, computed one lane at a time with libm / the C++ bit functions.
#pragma once

#include <algorithm>
#include <cstdint>
#include <limits>
#include <source_location>
#include <string_view>
#include <type_traits>
#include <utility>
#include <vector>

#include "tessera/vector_math.h"
#include "tessera/vector_ops.h"
#include "tessera/vector_reduce.h"
#include "tessera/vector_shape.h"

namespace tessera {
namespace detail {

/// A unary node on integer operands that keeps the dtype (population_count, clz).
template <OpCode Op, class X>
auto make_int_unary(const X& x) {
  using T = ValueOf<X>;
  static_assert(!is_floating(dtype_of<T>) && !std::is_same_v<T, bool>,
                "tessera: lax.population_count and lax.clz need integer operands (int8/16/32 or "
                "uint8/16/32), not floats or bools (as in jax.lax)");
  return UnaryExpr<Op, T, ExprOf<X>>{{}, AsExpr<std::remove_cvref_t<X>>::make(x)};
}

/// The number of elements of `x` that are false (`Negate`) or true over `axis`, as jnp.all and
/// jnp.any need it: a sum of the bool mask in int32, its axes checked as `op`.
template <bool Negate, class X>
auto count_true(const X& x, AxisSpec axis, bool keepdims, const char* op,
                std::source_location where) {
  int64_t mask = 0;
  Shape out = reduce_shape(x.shape(), axis, keepdims, false, false, op, where, mask);
  auto b = jnp::astype<bool>(checked(x));
  auto e = [&] {
    if constexpr (Negate) {
      return make_shape_op<OpCode::kReduceSum, int32_t>(~std::move(b), std::move(out), where);
    } else {
      return make_shape_op<OpCode::kReduceSum, int32_t>(b, std::move(out), where);
    }
  }();
  e.iconst = mask;
  return e;
}

/// lax.select_n with an integer `which` from case k on: case k where which <= k, else the next
/// (so an out-of-range `which` is clamped to the first or the last case, as jax computes it).
template <class W, class C0, class C1, class... Cs>
auto select_n_from(int k, const W& which, const C0& c0, const C1& c1, const Cs&... cs) {
  if constexpr (sizeof...(Cs) == 0) {
    return jnp::where(checked(which) <= k, checked(c0), checked(c1));
  } else {
    return jnp::where(checked(which) <= k, checked(c0), select_n_from(k + 1, which, c1, cs...));
  }
}

/// Throws kInvalidArgument at `where` for jnp.diagonal of an operand that is not 2-D.
void check_diagonal_rank(const Shape& in, std::source_location where);
/// Validates jnp.pad's arguments against `in` (one (before, after) pair per axis, none negative,
/// rank 1..4; a known mode; wrap needs nonempty axes where it pads); throws at `where`.
void check_pad(const Shape& in, const std::pair<int64_t, int64_t>* pads, int n,
               std::string_view mode, std::source_location where);

/// `v` restricted to elements [start, start + len) of axis d (rank 1..4).
template <class T>
jnp::Value<T> slice_axis(const jnp::Value<T>& v, int d, int64_t start, int64_t len,
                         std::source_location where) {
  Indexer ix[4] = {pl::all, pl::all, pl::all, pl::all};
  ix[d] = pl::ds(start, len);
  switch (v.ndim()) {
    case 1:
      return v.at(ix[0], where);
    case 2:
      return v.at(ix[0], ix[1], where);
    case 3:
      return v.at(ix[0], ix[1], ix[2], where);
    default:
      return v.at(ix[0], ix[1], ix[2], ix[3], where);
  }
}

/// jnp.pad of one axis: `lo` and `hi` elements of `value` (constant) or of x's periodic
/// continuation (wrap) on either side of axis d.
template <class T>
jnp::Value<T> pad_axis(const jnp::Value<T>& v, int d, int64_t lo, int64_t hi, bool wrap, T value,
                       std::source_location where) {
  const int64_t n = v.shape()[d];
  std::vector<jnp::Value<T>> parts;
  if (!wrap) {
    const auto block = [&](int64_t len) {
      SmallVec dims = v.shape().dims();
      dims[d] = len;
      return jnp::Value<T>(jnp::full<T>(Shape(std::move(dims)), value, where), where);
    };
    if (lo > 0) parts.push_back(block(lo));
    parts.push_back(v);
    if (hi > 0) parts.push_back(block(hi));
  } else {
    // The window [-lo, n + hi) of the periodic continuation, one period's piece at a time.
    int64_t pos = (n - lo % n) % n;
    for (int64_t left = lo + n + hi; left > 0;) {
      const int64_t take = std::min(n - pos, left);
      parts.push_back(slice_axis(v, d, pos, take, where));
      left -= take;
      pos = 0;
    }
  }
  if (parts.size() == 1) return parts[0];
  return jnp::Value<T>(make_concat<T>(std::move(parts), d, false, where), where);
}

}  // namespace detail

namespace jnp {

/// `jnp.isnan(x)`: true where x is NaN (never for integers and bools). Cheap.
template <class X>
requires detail::Operand<X>
auto isnan(X&& x) {
  TESSERA_CHECK_NAMED(X);
  return detail::checked(x) != detail::checked(x);
}
/// `jnp.isinf(x)`: true where x is +inf or -inf (never for integers and bools). Cheap.
template <class X>
requires detail::Operand<X>
auto isinf(X&& x) {
  TESSERA_CHECK_NAMED(X);
  if constexpr (is_floating(dtype_of<detail::ValueOf<X>>)) {
    return jnp::abs(detail::checked(x)) == std::numeric_limits<float>::infinity();
  } else {
    return detail::checked(x) != detail::checked(x);
  }
}
/// `jnp.isfinite(x)`: true where x is neither infinite nor NaN (always for integers). Cheap.
template <class X>
requires detail::Operand<X>
auto isfinite(X&& x) {
  TESSERA_CHECK_NAMED(X);
  if constexpr (is_floating(dtype_of<detail::ValueOf<X>>)) {
    return jnp::abs(detail::checked(x)) < std::numeric_limits<float>::infinity();
  } else {
    return detail::checked(x) == detail::checked(x);
  }
}

/// `jnp.all(x, axis=None, keepdims=False)`: whether every element (x != 0) along `axis` is true;
/// true for an empty axis. `jnp.any`: whether one is; false for an empty axis. Bool results;
/// a one-element result converts to a C++ bool (`if (jnp::all(m))`). Cost: as jnp.sum.
template <class X>
requires detail::Operand<X>
auto all(X&& x, detail::AxisSpec axis = {}, bool keepdims = false,
         std::source_location where = std::source_location::current()) {
  TESSERA_CHECK_NAMED(X);
  return detail::count_true<true>(x, std::move(axis), keepdims, "jnp.all", where) == 0;
}
template <class X>
requires detail::Operand<X>
auto any(X&& x, detail::AxisSpec axis = {}, bool keepdims = false,
         std::source_location where = std::source_location::current()) {
  TESSERA_CHECK_NAMED(X);
  return detail::count_true<false>(x, std::move(axis), keepdims, "jnp.any", where) != 0;
}

/// `jnp.tan(x)`: libm's tanf per element (integers as float32). Medium.
template <class X>
requires detail::Operand<X>
auto tan(X&& x) {
  TESSERA_CHECK_NAMED(X);
  return detail::make_float_unary<detail::OpCode::kTan>(x);
}
/// `jnp.reciprocal(x)`: 1 / x, correctly rounded (integers as float32, as jnp). Medium.
template <class X>
requires detail::Operand<X>
auto reciprocal(X&& x) {
  TESSERA_CHECK_NAMED(X);
  using F = detail::FloatOf<detail::ValueOf<X>>;
  return detail::UnaryExpr<detail::OpCode::kIntegerPow, F, detail::ExprOf<X>, F>{
      {}, detail::AsExpr<std::remove_cvref_t<X>>::make(x), -1};
}
/// `jnp.rint(x)`: round half to even (= jnp::round). Cheap.
template <class X>
requires detail::Operand<X>
auto rint(X&& x) {
  TESSERA_CHECK_NAMED(X);
  return jnp::round(detail::checked(x));
}
/// `jnp.nextafter(x, y)`: the float32 next after x in the direction of y (C's nextafterf,
/// subnormals included). float32 only: stepping a bfloat16 would need its own ulp. Medium.
template <class A, class B>
requires detail::BinaryOperands<A, B>
auto nextafter(A&& a, B&& b) {
  TESSERA_CHECK_NAMED(A);
  TESSERA_CHECK_NAMED(B);
  static_assert(std::is_same_v<detail::FloatOf<detail::PromotedT<A, B>>, float>,
                "tessera: jnp::nextafter steps float32 values; convert the operands with "
                "astype<float>() first");
  return detail::make_binary<detail::OpCode::kNextAfter, detail::ResultKind::kFloat>(a, b);
}
/// `jnp.bitwise_left_shift`, `jnp.bitwise_right_shift` (= left_shift / right_shift). Cheap.
template <class A, class B>
requires detail::BinaryOperands<A, B>
auto bitwise_left_shift(A&& a, B&& b) {
  TESSERA_CHECK_NAMED(A);
  TESSERA_CHECK_NAMED(B);
  return std::forward<A>(a) << std::forward<B>(b);
}
template <class A, class B>
requires detail::BinaryOperands<A, B>
auto bitwise_right_shift(A&& a, B&& b) {
  TESSERA_CHECK_NAMED(A);
  TESSERA_CHECK_NAMED(B);
  return std::forward<A>(a) >> std::forward<B>(b);
}

/// `jnp.swapaxes(x, axis1, axis2)`: x with the two axes exchanged (a transpose; negative axes
/// count from the end; out of range: kInvalidArgument). Cost: a copy (a view for a ref).
template <class X>
requires detail::Operand<X>
auto swapaxes(X&& x, int axis1, int axis2,
              std::source_location where = std::source_location::current()) {
  TESSERA_CHECK_NAMED(X);
  const int r = x.shape().rank();
  const int a1 = detail::normalise_axis(axis1, r, "jnp.swapaxes", where);
  const int a2 = detail::normalise_axis(axis2, r, "jnp.swapaxes", where);
  detail::SmallVec perm;
  detail::SmallVec dims;
  for (int i = 0; i < r; ++i) {
    const int from = i == a1 ? a2 : i == a2 ? a1 : i;
    perm.push_back(from);
    dims.push_back(x.shape()[from]);
  }
  auto e = detail::make_shape_op<detail::OpCode::kTranspose, detail::ValueOf<X>>(
      x, Shape(std::move(dims)), where);
  e.perm = std::move(perm);
  return e;
}

/// `jnp.diagonal(x, offset=0)` of a 2-D operand: x[i, i + offset]. A view of a value (an
/// operand that is not one is computed into one first). Cheap (medium for a computed operand).
template <class X>
requires detail::Operand<X>
auto diagonal(X&& x, int offset = 0, std::source_location where = std::source_location::current()) {
  TESSERA_CHECK_NAMED(X);
  detail::check_diagonal_rank(x.shape(), where);
  using T = detail::ValueOf<X>;
  return detail::part_value<T>(x, where).diagonal_view(offset);
}

/// `jnp.pad(x, pad_width, mode="constant", constant_values=0)`: x with pads[d] = (before, after)
/// elements added on either side of axis d (rank 1..4): `constant_values` there ("constant"), or
/// x's periodic continuation ("wrap"). `jnp::pad(x, {{1, 1}, {0, 2}})`,
/// `jnp::pad(x, {{5, 8}, {0, 0}}, "wrap")`. Cost: a copy per padded axis.
template <class X>
requires detail::Operand<X>
auto pad(X&& x, std::initializer_list<std::pair<int64_t, int64_t>> pads,
         std::string_view mode = "constant", double constant_values = 0.0,
         std::source_location where = std::source_location::current()) {
  TESSERA_CHECK_NAMED(X);
  using T = detail::ValueOf<X>;
  detail::check_pad(x.shape(), pads.begin(), static_cast<int>(pads.size()), mode, where);
  jnp::Value<T> v = detail::part_value<T>(x, where);
  const bool wrap = mode == "wrap";
  const T value = static_cast<T>(static_cast<float>(constant_values));
  int d = 0;
  for (const auto& [lo, hi] : pads) {
    if (lo > 0 || hi > 0) v = detail::pad_axis(v, d, lo, hi, wrap, value, where);
    ++d;
  }
  return v;
}

}  // namespace jnp

namespace lax {
/// `lax.bitcast_convert_type(x, U)` between dtypes of one width: the same bits read as U
/// (float32 <-> int32/uint32, bfloat16/float16 <-> int16/uint16, ...). Cheap.
template <class U, class X>
requires detail::Operand<X>
auto bitcast_convert_type(X&& x) {
  TESSERA_CHECK_NAMED(X);
  using T = detail::ValueOf<X>;
  static_assert(is_element_type_v<U> && !std::is_same_v<U, bool> && !std::is_same_v<T, bool> &&
                    dtype_bits(dtype_of<U>) == dtype_bits(dtype_of<T>),
                "tessera: lax.bitcast_convert_type here converts between dtypes of one width "
                "(not bool), e.g. float <-> int32_t, bfloat16 <-> int16_t; a width change would "
                "add or drop an axis");
  if constexpr (std::is_same_v<U, T>) {
    return detail::CastExpr<U, detail::ExprOf<X>>{{},
                                                  detail::AsExpr<std::remove_cvref_t<X>>::make(x)};
  } else {
    return detail::UnaryExpr<detail::OpCode::kBitcast, U, detail::ExprOf<X>, T>{
        {}, detail::AsExpr<std::remove_cvref_t<X>>::make(x)};
  }
}
}  // namespace lax

namespace lax {

/// `lax.is_finite(x)`: floats only, as in jax.lax (jnp::isfinite takes integers too). Cheap.
template <class X>
requires detail::Operand<X>
auto is_finite(X&& x) {
  TESSERA_CHECK_NAMED(X);
  static_assert(is_floating(dtype_of<detail::ValueOf<X>>),
                "tessera: lax.is_finite takes a floating operand (as in jax.lax); jnp::isfinite "
                "takes integers too");
  return jnp::isfinite(detail::checked(x));
}
using jnp::tan;
/// `lax.erf_inv(x)`: the inverse of erf on (-1, 1) (integers as float32), Giles' float32
/// approximation (within 4e-7 relative on |x| <= 0.999); +-1 give +-inf, |x| > 1 NaN.
/// Medium.
template <class X>
requires detail::Operand<X>
auto erf_inv(X&& x) {
  TESSERA_CHECK_NAMED(X);
  return detail::make_float_unary<detail::OpCode::kErfInv>(x);
}
/// `lax.population_count(x)`: the set bits of each element in its dtype's width (int8 -1 has
/// 8); `lax.clz(x)`: the leading zero bits in that width (clz(0) is the width). Integers only.
/// Medium.
template <class X>
requires detail::Operand<X>
auto population_count(X&& x) {
  TESSERA_CHECK_NAMED(X);
  return detail::make_int_unary<detail::OpCode::kPopcount>(x);
}
template <class X>
requires detail::Operand<X>
auto clz(X&& x) {
  TESSERA_CHECK_NAMED(X);
  return detail::make_int_unary<detail::OpCode::kClz>(x);
}

/// `lax.select_n(which, *cases)`: cases[which] elementwise. A bool `which` takes two cases
/// (false picks the first); an integer `which` any number (XLA leaves an out-of-range `which`
/// undefined; here, as jax on the CPU, it is clamped to the first or the last case). The cases
/// share one dtype. Cheap.
template <class W, class C0, class... Cs>
requires detail::Operand<W> && detail::Operand<C0> &&
    (detail::Operand<Cs>&&...) auto select_n(W&& which, C0&& c0, Cs&&... cs) {
  TESSERA_CHECK_NAMED(W);
  TESSERA_CHECK_NAMED(C0);
  static_assert((detail::named_operand_ok_v<Cs> && ...),
                "tessera: a named expression that reads refs is lazy; make the cases values "
                "(jnp::Value c = c_ref[pl::ellipsis];) or write them where they are used");
  using T = detail::ValueOf<C0>;
  static_assert((std::is_same_v<detail::ValueOf<Cs>, T> && ...),
                "tessera: lax.select_n's cases must share one dtype (as in jax.lax); convert "
                "them with astype first");
  using WT = detail::ValueOf<W>;
  static_assert(!is_floating(dtype_of<WT>),
                "tessera: lax.select_n's `which` must be bool or an integer (as in jax.lax)");
  if constexpr (sizeof...(Cs) == 0) {
    return detail::CastExpr<T, detail::ExprOf<C0>>{
        {}, detail::AsExpr<std::remove_cvref_t<C0>>::make(c0)};
  } else if constexpr (std::is_same_v<WT, bool>) {
    static_assert(sizeof...(Cs) == 1,
                  "tessera: lax.select_n with a bool `which` takes exactly two cases");
    return jnp::where(detail::checked(which), detail::checked(cs)..., detail::checked(c0));
  } else {
    return detail::select_n_from(0, which, c0, cs...);
  }
}

/// `lax.select_n(p, *cases)` with a scalar `which` (a C++ bool or integer, as a traced scalar
/// in Pallas): the same choice for every element.
template <class W, class C0, class... Cs>
requires detail::Scalar<W> && detail::Operand<C0> &&
    (detail::Operand<Cs>&&...) auto select_n(const W& which, C0&& c0, Cs&&... cs) {
  TESSERA_CHECK_NAMED(C0);
  using S = detail::ScalarType<W>;
  const S w = which;
  return select_n(jnp::full<S>(c0.shape(), w), std::forward<C0>(c0), std::forward<Cs>(cs)...);
}

}  // namespace lax

namespace pl {
/// `pl.reciprocal(x, approx=..., full_range=...)`: 1 / x. Tessera always gives the correctly
/// rounded quotient over the whole range, which is within any bound `approx=True` allows.
/// Medium.
template <class X>
requires detail::Operand<X>
auto reciprocal(X&& x, bool approx = false, bool full_range = true) {
  TESSERA_CHECK_NAMED(X);
  (void)approx;
  (void)full_range;
  return jnp::reciprocal(detail::checked(x));
}
}  // namespace pl

namespace jax::nn {
/// `jax.nn.relu(x)`: max(x, 0) (NaN propagates, as jnp.maximum). Cheap.
template <class X>
requires detail::Operand<X>
auto relu(X&& x) {
  TESSERA_CHECK_NAMED(X);
  return jnp::maximum(detail::checked(x), detail::ValueOf<X>{});
}
}  // namespace jax::nn

}  // namespace tessera
