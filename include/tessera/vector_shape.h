// File: tessera/vector_shape.h
//
// The jax.numpy / jax.lax functions that build arrays of a new shape from others, and Pallas'
// masked loads and stores, on refs, values and expressions:
//
//   Pallas                                            Tessera
//   jnp.broadcast_to(x, (8, 128))                     jnp::broadcast_to(x, {8, 128})
//   lax.broadcast_in_dim(x, (8, 128), (0,))           lax::broadcast_in_dim(x, {8, 128}, {0})
//   x[:, None], jnp.expand_dims(x, 1)                 jnp::expand_dims(x, 1)
//   jnp.squeeze(x, 0)                                 jnp::squeeze(x, 0)
//   jnp.tile(x, (2, 1))                               jnp::tile(x, {2, 1})
//   jnp.concatenate([a, b], axis=1)                   jnp::concatenate({a, b}, 1)
//   jnp.stack([a, b], axis=0)                         jnp::stack({a, b}, 0)
//   jnp.cumsum(x, axis=1)                             jnp::cumsum(x, 1)
//   jnp.triu(x, k), jnp.tril(x, k)                    jnp::triu(x, k), jnp::tril(x, k)
//   pltpu.store(o_ref, v, mask=m)                     pltpu::store(o_ref, v, m);
//   v = pltpu.load(x_ref)                             jnp::Value v = pltpu::load(x_ref);
//   pl.load(x_ref, (pl.ds(0, 8), slice(None)))        pl::load(x_ref, {pl::ds(0, 8), pl::all})
//   pl.store(o_ref, idx, v, mask=m)                   pl::store(o_ref, {...}, v, m);
//
// Broadcasts, expand_dims and squeeze are views where their operand is a ref or a value (no
// copy); tile copies. concatenate and stack take their parts as values: refs and expressions
// among them are computed into values where the call is made (so a named concatenation is pure),
// and the result is one copy of the parts. cumsum is a scan along one axis (float32 for float
// operands, bfloat16 rounded once; int32 for integers and bools, wrapping), like a reduction in
// cost. Shape errors are kInvalidArgument / kShapeMismatch at the call, naming the shapes.
#pragma once

#include <cstdint>
#include <initializer_list>
#include <optional>
#include <source_location>
#include <tuple>
#include <type_traits>
#include <utility>
#include <vector>

#include "tessera/value.h"
#include "tessera/vector_math.h"
#include "tessera/vector_ops.h"
#include "tessera/vector_reduce.h"

namespace tessera {
namespace detail {

/// Validates lax.broadcast_in_dim's arguments (operand shape `in`, result `out`, operand axis i
/// becomes result axis dims[i]) and returns dims; throws at `where` naming `op`.
SmallVec broadcast_dims(const Shape& in, const Shape& out, const SmallVec& dims, const char* op,
                        std::source_location where);
/// numpy's broadcast of `in` to `out` (right-aligned) as lax.broadcast_in_dim dimensions.
SmallVec broadcast_to_dims(const Shape& in, const Shape& out, std::source_location where);
/// Validates the parts of a concatenate (`stack`: a new axis) and returns the result's shape;
/// `axis` is normalised.
Shape concat_shape(const Shape* parts, int n, int& axis, bool stack, std::source_location where);
/// Computes a concatenate / stack of `parts` (views of `dtype` elements) into a new block of the
/// core's VMEM and appends its load to `p`.
int emit_concat(ExprProgram& p, const RawRef* parts, int n, int axis, bool stack, const Shape& out,
                std::source_location where);
/// The axis of a scan or an expand_dims, normalised against `rank`; throws at `where`.
int normalise_axis(int axis, int rank, const char* op, std::source_location where);
/// The extent of each of jnp.split's `sections` parts of `s` along `axis` (normalised in place);
/// kInvalidArgument when they do not divide it equally.
int64_t split_size(const Shape& s, int64_t sections, int& axis, std::source_location where);
/// kInvalidArgument for jnp.repeat's repeats outside 0..2^31.
void check_repeats(int64_t repeats, std::source_location where);
/// kInvalidArgument for lax.slice_in_dim's limit below start or a stride below 1.
void check_slice_in_dim(int64_t start, int64_t limit, int64_t stride, std::source_location where);

/// jnp.concatenate / jnp.stack of values of dtype T (see the file comment).
template <class T>
struct ConcatExpr : ExprOps<ConcatExpr<T>, T> {
  using value_type = T;
  static constexpr bool kPure = true;
  std::vector<jnp::Value<T>> parts;
  int axis = 0;
  bool stack = false;
  Shape out;
  std::source_location where;
  const Shape& shape() const { return out; }
  int emit(ExprProgram& p) const {
    if (p.where.line() == 0) p.where = where;
    std::vector<RawRef> views;
    views.reserve(parts.size());
    for (const auto& v : parts) views.push_back(v.raw());
    return emit_concat(p, views.data(), static_cast<int>(views.size()), axis, stack, out, where);
  }
};

template <class T>
ConcatExpr<T> make_concat(std::vector<jnp::Value<T>> parts, int axis, bool stack,
                          std::source_location where) {
  std::vector<Shape> shapes;
  for (const auto& v : parts) shapes.push_back(v.shape());
  Shape out = concat_shape(shapes.data(), static_cast<int>(shapes.size()), axis, stack, where);
  return ConcatExpr<T>{{}, std::move(parts), axis, stack, std::move(out), where};
}

/// `x` as a value of dtype T: a value as it is (shared), anything else computed now.
template <class T, class X>
jnp::Value<T> part_value(const X& x, std::source_location where) {
  if constexpr (is_value_v<X> && std::is_same_v<ValueOf<X>, T>) {
    return x;
  } else {
    return jnp::Value<T>(jnp::astype<T>(checked(x)), where);
  }
}

/// The dtype of several operands together (jnp's promotion).
template <class... Xs>
struct PromoteAll;
template <class X>
struct PromoteAll<X> {
  using type = ValueOf<X>;
};
template <class X, class Y, class... Rest>
struct PromoteAll<X, Y, Rest...> {
  using type = typename PromoteAll<jnp::Value<Promote<ValueOf<X>, ValueOf<Y>>>, Rest...>::type;
};

template <class X>
auto as_bool(const X& x) {
  if constexpr (Operand<X>) {
    return jnp::astype<bool>(checked(x));
  } else {
    return ScalarExpr<bool>{{}, static_cast<bool>(x)};
  }
}

}  // namespace detail

namespace jnp {

/// `jnp.broadcast_to(x, shape)`: numpy's broadcast (extents align on the right, 1 stretches). A
/// view of a ref or a value.
template <class X>
requires detail::Operand<X>
auto broadcast_to(X&& x, Shape shape,
                  std::source_location where = std::source_location::current()) {
  TESSERA_CHECK_NAMED(X);
  detail::SmallVec dims = detail::broadcast_to_dims(x.shape(), shape, where);
  auto e = detail::make_shape_op<detail::OpCode::kBroadcast, detail::ValueOf<X>>(
      x, std::move(shape), where);
  e.perm = std::move(dims);
  return e;
}

/// `jnp.expand_dims(x, axis)` (`x[:, None]` for axis 1): a unit axis inserted at `axis`
/// (negative counts from the end of the result). A view of a ref or a value.
template <class X>
requires detail::Operand<X>
auto expand_dims(X&& x, int axis, std::source_location where = std::source_location::current()) {
  TESSERA_CHECK_NAMED(X);
  const Shape& in = x.shape();
  const int ax = detail::normalise_axis(axis, in.rank() + 1, "jnp.expand_dims", where);
  detail::SmallVec dims;
  for (int i = 0; i < in.rank(); ++i) dims.push_back(in[i]);
  dims.insert_front(0);  // placeholder, moved into place below
  for (int i = 0; i < ax; ++i) dims[i] = dims[i + 1];
  dims[ax] = 1;
  return jnp::reshape(detail::checked(x), Shape(std::move(dims)), where);
}

/// `jnp.squeeze(x, axis)`: drops unit axis `axis` (kInvalidArgument when its extent is not 1);
/// `jnp::squeeze(x)` drops every unit axis. A view of a ref or a value.
template <class X>
requires detail::Operand<X>
auto squeeze(X&& x, std::optional<int> axis = std::nullopt,
             std::source_location where = std::source_location::current()) {
  TESSERA_CHECK_NAMED(X);
  const Shape& in = x.shape();
  detail::SmallVec dims;
  const int ax = axis ? detail::normalise_axis(*axis, in.rank(), "jnp.squeeze", where) : -1;
  if (axis && in[ax] != 1) {
    detail::raise(ErrorKind::kInvalidArgument, "jnp.squeeze", where,
                  "cannot squeeze an axis whose extent is not 1 (axis " + std::to_string(ax) +
                      " of " + in.to_string() + ")");
  }
  for (int i = 0; i < in.rank(); ++i) {
    if ((axis && i == ax) || (!axis && in[i] == 1)) continue;
    dims.push_back(in[i]);
  }
  return jnp::reshape(detail::checked(x), Shape(std::move(dims)), where);
}

/// `jnp.tile(x, reps)`: x repeated reps[i] times along axis i (reps shorter than x's rank count
/// from the last axis; longer ones add leading axes), as numpy. A copy.
template <class X>
requires detail::Operand<X>
auto tile(X&& x, std::initializer_list<int64_t> reps,
          std::source_location where = std::source_location::current()) {
  TESSERA_CHECK_NAMED(X);
  const Shape& in = x.shape();
  const int r = std::max<int>(in.rank(), static_cast<int>(reps.size()));
  detail::SmallVec xs(r, 1), rs(r, 1);
  for (int i = 0; i < in.rank(); ++i) xs[r - in.rank() + i] = in[i];
  int i = r - static_cast<int>(reps.size());
  for (int64_t rep : reps) {
    if (rep < 0) {
      detail::raise(ErrorKind::kInvalidArgument, "jnp.tile", where,
                    "reps must be >= 0 (got " + std::to_string(rep) + ")");
    }
    rs[i++] = rep;
  }
  // (r0, s0, r1, s1, ...): x's axes at the odd positions, each repeated along the even one
  // before it; then merged pairwise.
  detail::SmallVec wide, map, merged;
  for (int a = 0; a < r; ++a) {
    wide.push_back(rs[a]);
    wide.push_back(xs[a]);
    map.push_back(2 * a + 1);
    merged.push_back(rs[a] * xs[a]);
  }
  auto padded = jnp::reshape(detail::checked(x), Shape(xs), where);
  auto e = detail::make_shape_op<detail::OpCode::kBroadcast, detail::ValueOf<X>>(
      std::move(padded), Shape(std::move(wide)), where);
  e.perm = std::move(map);
  return jnp::reshape(std::move(e), Shape(std::move(merged)), where);
}

/// `jnp.concatenate([a, b, ...], axis=0)`: the parts joined along `axis` (their other extents
/// must agree; dtypes promote as jnp does). `jnp::concatenate({a, b}, 1)` for parts of one type,
/// `jnp::concatenate(std::tuple{a, b_ref, c * 2}, 1)` for mixed ones.
template <class X>
requires detail::Operand<X>
auto concatenate(std::initializer_list<X> parts, int axis = 0,
                 std::source_location where = std::source_location::current()) {
  using T = detail::ValueOf<X>;
  std::vector<Value<T>> values;
  for (const X& x : parts) values.push_back(detail::part_value<T>(x, where));
  return detail::make_concat<T>(std::move(values), axis, false, where);
}
template <class... Xs>
requires(detail::Operand<Xs>&&...) auto concatenate(
    const std::tuple<Xs...>& parts, int axis = 0,
    std::source_location where = std::source_location::current()) {
  using T = typename detail::PromoteAll<Xs...>::type;
  std::vector<Value<T>> values;
  std::apply([&](const auto&... x) { (values.push_back(detail::part_value<T>(x, where)), ...); },
             parts);
  return detail::make_concat<T>(std::move(values), axis, false, where);
}

/// `jnp.stack([a, b, ...], axis=0)`: the parts (of one shape) along a new axis.
template <class X>
requires detail::Operand<X>
auto stack(std::initializer_list<X> parts, int axis = 0,
           std::source_location where = std::source_location::current()) {
  using T = detail::ValueOf<X>;
  std::vector<Value<T>> values;
  for (const X& x : parts) values.push_back(detail::part_value<T>(x, where));
  return detail::make_concat<T>(std::move(values), axis, true, where);
}
template <class... Xs>
requires(detail::Operand<Xs>&&...) auto stack(
    const std::tuple<Xs...>& parts, int axis = 0,
    std::source_location where = std::source_location::current()) {
  using T = typename detail::PromoteAll<Xs...>::type;
  std::vector<Value<T>> values;
  std::apply([&](const auto&... x) { (values.push_back(detail::part_value<T>(x, where)), ...); },
             parts);
  return detail::make_concat<T>(std::move(values), axis, true, where);
}

/// `jnp.split(x, sections, axis=0)`: x cut along `axis` into `sections` equal parts, as values
/// (views of one copy of x; a value is not copied). kInvalidArgument when the parts would not be
/// equal.
template <class X>
requires detail::Operand<X> std::vector<Value<detail::ValueOf<X>>> split(
    X&& x, int64_t sections, int axis = 0,
    std::source_location where = std::source_location::current()) {
  TESSERA_CHECK_NAMED(X);
  using T = detail::ValueOf<X>;
  const Value<T> v = detail::part_value<T>(x, where);
  const int64_t size = detail::split_size(v.shape(), sections, axis, where);
  std::vector<Value<T>> parts;
  parts.reserve(static_cast<size_t>(sections));
  std::vector<detail::Indexer> ix(static_cast<size_t>(axis), detail::Indexer(pl::all));
  ix.emplace_back(pl::ds(0, size));
  for (int64_t i = 0; i < sections; ++i) {
    ix.back() = detail::Indexer(pl::ds(i * size, size));
    parts.push_back(v.at(ix.data(), axis + 1, where));
  }
  return parts;
}

/// `jnp.repeat(x, repeats, axis)`: each element of x repeated `repeats` times along `axis`
/// ([a, b] -> [a, a, b, b] for 2); `jnp::repeat(x, repeats)` (axis=None) repeats the flattened
/// elements. Cost: a copy of the result.
template <class X>
requires detail::Operand<X>
auto repeat(X&& x, int64_t repeats, int axis,
            std::source_location where = std::source_location::current()) {
  TESSERA_CHECK_NAMED(X);
  detail::check_repeats(repeats, where);
  const Shape s = x.shape();
  axis = detail::normalise_axis(axis, s.rank(), "jnp.repeat", where);
  std::vector<int64_t> wide, out;
  for (int a = 0; a < s.rank(); ++a) {
    wide.push_back(s[a]);
    out.push_back(a == axis ? s[a] * repeats : s[a]);
    if (a == axis) wide.push_back(repeats);
  }
  auto spread =
      jnp::broadcast_to(jnp::expand_dims(detail::checked(x), axis + 1, where), Shape(wide), where);
  return jnp::reshape(std::move(spread), Shape(out), where);
}
template <class X>
requires detail::Operand<X>
auto repeat(X&& x, int64_t repeats, std::source_location where = std::source_location::current()) {
  TESSERA_CHECK_NAMED(X);
  return jnp::repeat(jnp::reshape(detail::checked(x), Shape{x.shape().size()}, where), repeats, 0,
                     where);
}

/// `jnp.cumsum(x, axis)`: running sums along `axis`; `jnp::cumsum(x)` (axis=None) scans x
/// flattened. float32/bfloat16 accumulate in float32; integers and bools give int32 (wrapping).
template <class X>
requires detail::Operand<X>
auto cumsum(X&& x, int axis, std::source_location where = std::source_location::current()) {
  TESSERA_CHECK_NAMED(X);
  static_assert(!is_narrow_int_v<detail::ValueOf<X>>,
                "tessera: jnp.cumsum of a sub-byte integer array (int4, uint4, int2, uint2) is not "
                "provided (jax keeps the sub-byte dtype, wrapping); convert it first: "
                "jnp::cumsum(x.astype<int32_t>(), axis)");
  using T = detail::SumOf<detail::ValueOf<X>>;
  const Shape s = x.shape();
  auto e = detail::make_shape_op<detail::OpCode::kCumSum, T>(x, s, where);
  e.axis = detail::normalise_axis(axis, s.rank(), "jnp.cumsum", where);
  return e;
}
template <class X>
requires detail::Operand<X>
auto cumsum(X&& x, std::source_location where = std::source_location::current()) {
  TESSERA_CHECK_NAMED(X);
  return jnp::cumsum(jnp::reshape(detail::checked(x), Shape{x.shape().size()}, where), 0, where);
}

/// `jnp.triu(x, k=0)`: x with the elements below the k-th diagonal of its last two axes set to
/// 0; `jnp.tril(x, k=0)`: above it. Cheap (a select on iotas).
template <class X>
requires detail::Operand<X>
auto triu(X&& x, int k = 0, std::source_location where = std::source_location::current()) {
  TESSERA_CHECK_NAMED(X);
  const Shape& s = x.shape();
  if (s.rank() < 2) {
    detail::raise(ErrorKind::kInvalidArgument, "jnp.triu", where,
                  "needs at least 2 dimensions (got shape " + s.to_string() + ")");
  }
  const Shape mn{s[s.rank() - 2], s[s.rank() - 1]};
  using T = detail::ValueOf<X>;
  return jnp::where(
      lax::broadcasted_iota<int32_t>(mn, 1, where) - lax::broadcasted_iota<int32_t>(mn, 0, where) >=
          k,
      detail::checked(x), T(0));
}
template <class X>
requires detail::Operand<X>
auto tril(X&& x, int k = 0, std::source_location where = std::source_location::current()) {
  TESSERA_CHECK_NAMED(X);
  const Shape& s = x.shape();
  if (s.rank() < 2) {
    detail::raise(ErrorKind::kInvalidArgument, "jnp.tril", where,
                  "needs at least 2 dimensions (got shape " + s.to_string() + ")");
  }
  const Shape mn{s[s.rank() - 2], s[s.rank() - 1]};
  using T = detail::ValueOf<X>;
  return jnp::where(
      lax::broadcasted_iota<int32_t>(mn, 1, where) - lax::broadcasted_iota<int32_t>(mn, 0, where) <=
          k,
      detail::checked(x), T(0));
}

}  // namespace jnp

namespace lax {

/// `lax.slice_in_dim(x, start, limit, stride=1, axis=0)`: elements start, start + stride, ...
/// below `limit` of `axis` (negative axis counts from the end), a view of x as a value (x is
/// computed first unless it is a value). kOutOfBounds outside the axis.
template <class X>
requires detail::Operand<X>
auto slice_in_dim(X&& x, int64_t start, int64_t limit, int64_t stride = 1, int axis = 0,
                  std::source_location where = std::source_location::current()) {
  TESSERA_CHECK_NAMED(X);
  using T = detail::ValueOf<X>;
  const jnp::Value<T> v = detail::part_value<T>(x, where);
  axis = detail::normalise_axis(axis, v.shape().rank(), "lax.slice_in_dim", where);
  detail::check_slice_in_dim(start, limit, stride, where);
  std::vector<detail::Indexer> ix(static_cast<size_t>(axis), detail::Indexer(pl::all));
  ix.emplace_back(pl::ds(start, (limit - start + stride - 1) / stride, stride));
  return v.at(ix.data(), axis + 1, where);
}

/// `lax.broadcast_in_dim(x, shape, broadcast_dimensions)`: operand axis i becomes result axis
/// broadcast_dimensions[i] (increasing; its extent equal or 1). A view of a ref or a value.
template <class X>
requires detail::Operand<X>
auto broadcast_in_dim(X&& x, Shape shape, std::initializer_list<int64_t> broadcast_dimensions,
                      std::source_location where = std::source_location::current()) {
  TESSERA_CHECK_NAMED(X);
  detail::SmallVec dims = detail::broadcast_dims(
      x.shape(), shape, detail::SmallVec(broadcast_dimensions), "lax.broadcast_in_dim", where);
  auto e = detail::make_shape_op<detail::OpCode::kBroadcast, detail::ValueOf<X>>(
      x, std::move(shape), where);
  e.perm = std::move(dims);
  return e;
}

/// `lax.bitwise_and/or/xor/not` (= jnp.bitwise_*), `lax.cumsum(x, axis)`.
using jnp::bitwise_and;
using jnp::bitwise_not;
using jnp::bitwise_or;
using jnp::bitwise_xor;
template <class X>
requires detail::Operand<X>
auto cumsum(X&& x, int axis, std::source_location where = std::source_location::current()) {
  TESSERA_CHECK_NAMED(X);
  return jnp::cumsum(detail::checked(x), axis, where);
}

}  // namespace lax

namespace pltpu {

/// `pltpu.load(ref)`: the ref's elements as a value (a copy). With a mask
/// (`pltpu.load(ref, mask=m)`), the lanes the mask leaves out are unspecified, as on a TPU:
/// here they hold the ref's elements (garbage where the ref holds garbage, which checked mode
/// tracks).
template <class T, MemorySpace S>
auto load(const pl::Ref<T, S>& ref, std::source_location where = std::source_location::current()) {
  return jnp::Value<std::remove_cv_t<T>>(ref, where);
}
template <class T, MemorySpace S, class M>
requires detail::Operand<M>
auto load(const pl::Ref<T, S>& ref, M&& mask,
          std::source_location where = std::source_location::current()) {
  TESSERA_CHECK_NAMED(M);
  (void)detail::broadcast_shapes(mask.shape(), ref.shape(), "pltpu.load", where);
  return jnp::Value<std::remove_cv_t<T>>(ref, where);
}
/// `pltpu.store(ref, val)`, `pltpu.store(ref, val, mask=m)`: writes val (broadcast to the
/// ref's shape) where the mask is true and leaves the other elements as they were.
template <class T, MemorySpace S, class V>
requires(detail::Operand<V> || detail::Scalar<V>) void store(const pl::Ref<T, S>& ref, V&& val) {
  TESSERA_CHECK_NAMED(V);
  pl::Ref<T, S> dst = ref;
  dst = std::forward<V>(val);
}
template <class T, MemorySpace S, class V, class M>
requires((detail::Operand<V> ||
          detail::Scalar<V>)&&detail::Operand<M>) void store(const pl::Ref<T, S>& ref, V&& val,
                                                             M&& mask) {
  TESSERA_CHECK_NAMED(V);
  TESSERA_CHECK_NAMED(M);
  pl::Ref<T, S> dst = ref;
  dst = jnp::where(std::forward<M>(mask), std::forward<V>(val), ref);
}

}  // namespace pltpu

namespace pl {

/// `pl.load(ref, idx)`: the indexed elements as a value; with `mask` and `other`, `other` where
/// the mask is false (`pl.load(ref, idx, mask=m, other=0)`).
template <class T, MemorySpace S>
auto load(const Ref<T, S>& ref, std::initializer_list<detail::Indexer> idx,
          std::source_location where = std::source_location::current()) {
  return jnp::Value<std::remove_cv_t<T>>(ref[idx], where);
}
template <class T, MemorySpace S, class M, class O>
requires detail::Operand<M>
auto load(const Ref<T, S>& ref, std::initializer_list<detail::Indexer> idx, M&& mask, O&& other,
          std::source_location where = std::source_location::current()) {
  TESSERA_CHECK_NAMED(M);
  TESSERA_CHECK_NAMED(O);
  using T0 = std::remove_cv_t<T>;
  return jnp::Value<T0>(
      jnp::astype<T0>(jnp::where(std::forward<M>(mask), ref[idx], std::forward<O>(other))), where);
}
/// `pl.store(ref, idx, val)` / `pl.store(ref, idx, val, mask=m)`.
template <class T, MemorySpace S, class V>
void store(const Ref<T, S>& ref, std::initializer_list<detail::Indexer> idx, V&& val) {
  TESSERA_CHECK_NAMED(V);
  ref[idx] = std::forward<V>(val);
}
template <class T, MemorySpace S, class V, class M>
requires detail::Operand<M>
void store(const Ref<T, S>& ref, std::initializer_list<detail::Indexer> idx, V&& val, M&& mask) {
  TESSERA_CHECK_NAMED(V);
  TESSERA_CHECK_NAMED(M);
  ref[idx] = jnp::where(std::forward<M>(mask), std::forward<V>(val), ref[idx]);
}

}  // namespace pl

namespace jnp {
/// `jnp.logical_and/or/xor/not` with C++ scalars among the operands (each converted to bool).
template <class A, class B>
requires detail::BinaryOperands<A, B> &&
    (!(detail::Operand<A> && detail::Operand<B>)) auto logical_and(A&& a, B&& b) {
  TESSERA_CHECK_NAMED(A);
  TESSERA_CHECK_NAMED(B);
  return detail::as_bool(a) & detail::as_bool(b);
}
template <class A, class B>
requires detail::BinaryOperands<A, B> &&
    (!(detail::Operand<A> && detail::Operand<B>)) auto logical_or(A&& a, B&& b) {
  TESSERA_CHECK_NAMED(A);
  TESSERA_CHECK_NAMED(B);
  return detail::as_bool(a) | detail::as_bool(b);
}
template <class A, class B>
requires detail::BinaryOperands<A, B> &&
    (!(detail::Operand<A> && detail::Operand<B>)) auto logical_xor(A&& a, B&& b) {
  TESSERA_CHECK_NAMED(A);
  TESSERA_CHECK_NAMED(B);
  return detail::as_bool(a) ^ detail::as_bool(b);
}
}  // namespace jnp

}  // namespace tessera
