// File: tessera/vector_reduce.h
//
// Reductions and shape ops on VMEM/SMEM refs and expressions, as Pallas TPU kernels use them:
// `jnp.sum/max/min`, `jnp.argmax/argmin`, `jnp.transpose` (`x.T`), `jnp.reshape` of leading
// dims and `pltpu.roll`.
//
//   Pallas                                              Tessera
//   o[...] = jnp.sum(x[...], axis=1, keepdims=True)     o = jnp::sum(x, 1, true);
//   m[...] = jnp.max(x[...], axis=(0, 1))               m = jnp::max(x, {0, 1});
//   s[0] = jnp.sum(x[...])                              s = jnp::sum(x);   // shape ()
//   i[...] = jnp.argmax(x[...], axis=-1)                i = jnp::argmax(x, -1);
//   o[...] = x[...].T                                   o = jnp::transpose(x);
//   o[...] = x[...].reshape(4, 2, 128)                  o = jnp::reshape(x, {4, 2, 128});
//   o[...] = pltpu.roll(x[...], shift=1, axis=0)        o = pltpu::roll(x, 1, 0);
//   o[...] = pltpu.roll(x[...], 3, 1, stride=2,         o = pltpu::roll(x, 3, 1, 2, 0);
//                       stride_axis=0)
//
// Axes: an int (negative counts from the end), a braced list `{0, 2}`, or nothing for all axes
// (jnp's `axis=None`); `keepdims` is the third argument. A bad or repeated axis throws
// kInvalidArgument at the call, naming it.
//
// Evaluation. These ops are not elementwise: when the expression is assigned, each one first
// evaluates its operand into a temporary (32-bit lanes: float32 for float32/bfloat16 operands,
// int32 for integer and bool ones), then computes its result into a second temporary that the
// rest of the expression reads like a ref. Inside a kernel both come from the core's VMEM arena
// above the kernel's scratch and live run_scoped scopes and count against the kernel's VMEM
// budget; an expression whose temporaries do not fit throws KernelError kCapacityExceeded,
// naming the op and the sizes. Outside a kernel (tests on hand-made refs) they come from the
// heap. A transpose or a contiguous reshape of a plain ref needs no temporary (it is a view), and
// a reduction, roll or cumsum of a plain ref of 32-bit elements (float32, int32, uint32) laid out
// row-major reads it where it lies, with no temporary for its operand.
//
// Dtypes follow jnp: sum of bool/int8/int16 gives int32, of uint8/uint16 uint32 (of bfloat16,
// float16 or a float8, its own dtype, accumulated in float32 and rounded once: jnp on a CPU
// sums float8 in float8 steps, which loses more), max/min keep the dtype and propagate NaN
// (uint32 compares unsigned), argmax/argmin give int32 (the first maximal element; a NaN
// counts as the maximum, as numpy). max/min/argmax/argmin of an empty
// axis throw kInvalidArgument, as jnp raises. Float sums accumulate in float32 in SIMD lanes
// (not sequentially), so results differ from a sequential sum by rounding.
//
// Cost (details.rst): reductions over the last axis are the slowest on a TPU, over the second
// to last faster, over leading axes fastest; here every reduction is one pass over its operand
// plus the temporary's write. Transpose of the last two dims and roll: a copy. Reshape of
// leading dims: free for a contiguous ref, a copy otherwise.
#pragma once

#include <concepts>
#include <cstdint>
#include <initializer_list>
#include <iterator>
#include <source_location>
#include <string_view>
#include <type_traits>

#include "tessera/detail/small_vec.h"
#include "tessera/vector_math.h"
#include "tessera/vector_ops.h"

namespace tessera {
namespace detail {

/// Validates `axes` against `in` and returns the result shape; `mask` gets one bit per reduced
/// axis. `single` requires one axis (argmax); `nonempty` rejects reducing an empty axis.
Shape reduce_shape(const Shape& in, const AxisSpec& axes, bool keepdims, bool single, bool nonempty,
                   const char* op, std::source_location where, int64_t& mask);
/// Validates a permutation (empty: reverse all axes) and returns it, filled in.
SmallVec transpose_perm(const Shape& in, const SmallVec& perm, std::source_location where);
/// Validates a reshape of `in` to `to` (one -1 allowed) and returns the new shape.
Shape reshape_shape(const Shape& in, const Shape& to, std::source_location where);
/// A TPU's reshape rule (checked mode with a chip): the last dim stays, unless only unit dims
/// are added or removed; throws kBlockShape naming `chip`.
void check_tpu_reshape(const Shape& in, const Shape& out, std::string_view chip,
                       std::source_location where);
/// Validates a roll's axis (negative counts from the end) and returns it; `shift` is normalised
/// to 0..extent-1.
int roll_axis(const Shape& in, int axis, int64_t& shift, std::source_location where);
/// Validates pltpu.roll's `stride` (>= 0) and `stride_axis` (in range, negative counting from
/// the end, not the rolled axis `axis`, already normalised) and returns the stride axis;
/// `stride` is normalised to 0..extent-1 of the rolled axis.
int roll_stride_axis(const Shape& in, int axis, int64_t& stride, int stride_axis,
                     std::source_location where);

/// A non-elementwise node: the operand is emitted in its own dtype, and the evaluator computes
/// this node into a temporary before the elementwise pass (see the file comment).
template <OpCode Op, class T, class A>
struct ShapeOpExpr : ExprOps<ShapeOpExpr<Op, T, A>, T> {
  using value_type = T;
  static constexpr bool kPure = A::kPure;
  A a;
  Shape out_shape;
  int64_t iconst = 0;  // reductions: the axis mask; roll: the shift
  int axis = 0;        // roll
  SmallVec perm;       // transpose
  std::source_location where;
  int stride_axis = -1;     // roll with a stride (-1: none)
  int64_t roll_stride = 0;  // roll with a stride
  const Shape& shape() const { return out_shape; }
  int emit(ExprProgram& p) const {
    if (p.where.line() == 0) p.where = where;
    const int begin = p.last() + 1;
    const int operand = a.emit(p);
    ExprNode& n = p.emplace();
    n.op = Op;
    n.dtype = dtype_of<T>;
    n.a = operand;
    n.sub_begin = begin;
    n.shape = a.shape();
    n.out_shape = out_shape;
    n.iconst = iconst;
    n.axis = axis;
    n.strides = perm;
    n.where = where;
    n.stride_axis = stride_axis;
    n.roll_stride = roll_stride;
    return p.last();
  }
};

template <OpCode Op, class T, class X>
auto make_shape_op(const X& x, Shape out, std::source_location where) {
  using E = ShapeOpExpr<Op, T, ExprOf<X>>;
  return E{{}, AsExpr<std::remove_cvref_t<X>>::make(x), std::move(out), 0, 0, SmallVec(), where, -1,
           0};
}

/// jnp.sum's result dtype (x64 off): floats keep theirs, unsigned integers give uint32, bool and
/// signed integers int32.
template <class T>
using SumOf = std::conditional_t<is_floating(dtype_of<T>), T,
                                 std::conditional_t<is_unsigned(dtype_of<T>), uint32_t, int32_t>>;

}  // namespace detail

namespace jnp {

/// `jnp.sum(x, axis=None, keepdims=False)`: float32/bfloat16 sum in float32 (bfloat16 rounds
/// the result), integers and bools in int32 (wrapping). See the file comment for the cost.
template <class X>
requires detail::Operand<X>
auto sum(X&& x, detail::AxisSpec axis = {}, bool keepdims = false,
         std::source_location where = std::source_location::current()) {
  TESSERA_CHECK_NAMED(X);
  static_assert(!is_narrow_int_v<detail::ValueOf<X>>,
                "tessera: jnp.sum of a sub-byte integer array (int4, uint4, int2, uint2) has no "
                "accumulator dtype (jax raises); convert it first: jnp::sum(x.astype<int32_t>())");
  int64_t mask = 0;
  Shape out = detail::reduce_shape(x.shape(), axis, keepdims, false, false, "jnp.sum", where, mask);
  using T = detail::SumOf<detail::ValueOf<X>>;
  auto e = detail::make_shape_op<detail::OpCode::kReduceSum, T>(x, std::move(out), where);
  e.iconst = mask;
  return e;
}
/// `jnp.max(x, axis=None, keepdims=False)`: NaN propagates; an empty axis throws.
template <class X>
requires detail::Operand<X>
auto max(X&& x, detail::AxisSpec axis = {}, bool keepdims = false,
         std::source_location where = std::source_location::current()) {
  TESSERA_CHECK_NAMED(X);
  int64_t mask = 0;
  Shape out = detail::reduce_shape(x.shape(), axis, keepdims, false, true, "jnp.max", where, mask);
  auto e = detail::make_shape_op<detail::OpCode::kReduceMax, detail::ValueOf<X>>(x, std::move(out),
                                                                                 where);
  e.iconst = mask;
  return e;
}
/// `jnp.min(x, axis=None, keepdims=False)`: NaN propagates; an empty axis throws.
template <class X>
requires detail::Operand<X>
auto min(X&& x, detail::AxisSpec axis = {}, bool keepdims = false,
         std::source_location where = std::source_location::current()) {
  TESSERA_CHECK_NAMED(X);
  int64_t mask = 0;
  Shape out = detail::reduce_shape(x.shape(), axis, keepdims, false, true, "jnp.min", where, mask);
  auto e = detail::make_shape_op<detail::OpCode::kReduceMin, detail::ValueOf<X>>(x, std::move(out),
                                                                                 where);
  e.iconst = mask;
  return e;
}
/// `jnp.argmax(x, axis=None, keepdims=False)`: int32 index of the first maximum along one axis
/// (axis=None: the index into the flattened x). A NaN is the maximum. An empty axis throws.
template <class X>
requires detail::Operand<X>
auto argmax(X&& x, detail::AxisSpec axis = {}, bool keepdims = false,
            std::source_location where = std::source_location::current()) {
  TESSERA_CHECK_NAMED(X);
  int64_t mask = 0;
  Shape out =
      detail::reduce_shape(x.shape(), axis, keepdims, true, true, "jnp.argmax", where, mask);
  auto e = detail::make_shape_op<detail::OpCode::kArgMax, int32_t>(x, std::move(out), where);
  e.iconst = mask;
  return e;
}
/// `jnp.argmin(x, axis=None, keepdims=False)`: as argmax, for the first minimum.
template <class X>
requires detail::Operand<X>
auto argmin(X&& x, detail::AxisSpec axis = {}, bool keepdims = false,
            std::source_location where = std::source_location::current()) {
  TESSERA_CHECK_NAMED(X);
  int64_t mask = 0;
  Shape out =
      detail::reduce_shape(x.shape(), axis, keepdims, true, true, "jnp.argmin", where, mask);
  auto e = detail::make_shape_op<detail::OpCode::kArgMin, int32_t>(x, std::move(out), where);
  e.iconst = mask;
  return e;
}

/// `jnp.transpose(x)` (Pallas' `x.T`: all axes reversed) or `jnp.transpose(x, {perm})` (a braced
/// list, or any container of ints: `std::vector<int>`, `std::array<int, N>`). Pallas TPU
/// lowers swaps of the last two dims (and leading-dim permutations); Tessera accepts any
/// permutation. A plain ref is transposed as a view (strided reads); an expression through a
/// temporary. Cost: a copy.
template <class X, class Axes = std::initializer_list<int>>
requires detail::Operand<X> && requires(const Axes& a) {
  { *std::begin(a) } -> std::convertible_to<int>;
  std::end(a);
}
auto transpose(X&& x, const Axes& axes = {},
               std::source_location where = std::source_location::current()) {
  TESSERA_CHECK_NAMED(X);
  detail::SmallVec perm;
  for (auto a : axes) perm.push_back(static_cast<int>(a));
  perm = detail::transpose_perm(x.shape(), perm, where);
  detail::SmallVec dims;
  for (int i = 0; i < perm.size(); ++i) dims.push_back(x.shape()[static_cast<int>(perm[i])]);
  auto e = detail::make_shape_op<detail::OpCode::kTranspose, detail::ValueOf<X>>(
      x, Shape(std::move(dims)), where);
  e.perm = std::move(perm);
  return e;
}

/// `jnp.reshape(x, shape)` (Pallas' `x.reshape(shape)`): the same elements in row-major order with
/// a new shape (one extent may be -1), any reshape that keeps the element count, as Pallas'
/// interpret mode allows. A TPU kernel can only keep the last dim (reshaping leading dims, or
/// flattening them into the second-to-last) or add and drop unit dims: checked mode with a chip
/// (pltpu::InterpretParams{.chip = ...}) raises kBlockShape for the others. Free for a
/// contiguous ref; a copy otherwise.
template <class X>
requires detail::Operand<X>
auto reshape(X&& x, Shape shape, std::source_location where = std::source_location::current()) {
  TESSERA_CHECK_NAMED(X);
  Shape out = detail::reshape_shape(x.shape(), shape, where);
  return detail::make_shape_op<detail::OpCode::kReshape, detail::ValueOf<X>>(x, std::move(out),
                                                                             where);
}

/// `jnp.roll(x, shift, axis)`: element i along `axis` moves to (i + shift) mod n; any shift
/// (negative too). Cost: a copy.
template <class X>
requires detail::Operand<X>
auto roll(X&& x, int64_t shift, int axis,
          std::source_location where = std::source_location::current()) {
  TESSERA_CHECK_NAMED(X);
  const int ax = detail::roll_axis(x.shape(), axis, shift, where);
  auto e = detail::make_shape_op<detail::OpCode::kRoll, detail::ValueOf<X>>(x, x.shape(), where);
  e.iconst = shift;
  e.axis = ax;
  return e;
}

}  // namespace jnp

namespace pltpu {
/// `pltpu.roll(x, shift, axis)`: as jnp.roll (Pallas requires shift >= 0 and 0 <= axis < rank;
/// Tessera accepts any shift, and a negative axis counts from the end). Cost: a copy.
template <class X>
requires detail::Operand<X>
auto roll(X&& x, int64_t shift, int axis,
          std::source_location where = std::source_location::current()) {
  TESSERA_CHECK_NAMED(X);
  return jnp::roll(std::forward<X>(x), shift, axis, where);
}

/// `pltpu.roll(x, shift, axis, stride=stride, stride_axis=stride_axis)`: each slice i along
/// `stride_axis` is rolled along `axis` by shift + i * stride (Pallas' definition: split x along
/// stride_axis, jnp.roll slice i by that shift, concatenate). `stride` must be >= 0 and
/// `stride_axis` another axis than `axis` (negative counts from the end); either mistake throws
/// kInvalidArgument at the call, naming the value. Cost: a copy.
template <class X>
requires detail::Operand<X>
auto roll(X&& x, int64_t shift, int axis, int64_t stride, int stride_axis,
          std::source_location where = std::source_location::current()) {
  TESSERA_CHECK_NAMED(X);
  const int ax = detail::roll_axis(x.shape(), axis, shift, where);
  const int sax = detail::roll_stride_axis(x.shape(), ax, stride, stride_axis, where);
  auto e = detail::make_shape_op<detail::OpCode::kRoll, detail::ValueOf<X>>(x, x.shape(), where);
  e.iconst = shift;
  e.axis = ax;
  e.stride_axis = sax;
  e.roll_stride = stride;
  return e;
}
}  // namespace pltpu

namespace lax {
/// `lax.broadcasted_iota` is in vector_ops.h; `lax.reduce_sum/max/min(x, axes)` here.
template <class X>
requires detail::Operand<X>
auto reduce_sum(X&& x, detail::AxisSpec axes,
                std::source_location where = std::source_location::current()) {
  TESSERA_CHECK_NAMED(X);
  return jnp::sum(std::forward<X>(x), std::move(axes), false, where);
}
template <class X>
requires detail::Operand<X>
auto reduce_max(X&& x, detail::AxisSpec axes,
                std::source_location where = std::source_location::current()) {
  TESSERA_CHECK_NAMED(X);
  return jnp::max(std::forward<X>(x), std::move(axes), false, where);
}
template <class X>
requires detail::Operand<X>
auto reduce_min(X&& x, detail::AxisSpec axes,
                std::source_location where = std::source_location::current()) {
  TESSERA_CHECK_NAMED(X);
  return jnp::min(std::forward<X>(x), std::move(axes), false, where);
}
}  // namespace lax

namespace jnp {

/// `jnp.mean(x, axis=None, keepdims=False)`: the sum in float32 over the count of reduced
/// elements; float32 for integer and bool operands, bfloat16 stays bfloat16 (rounded once). An
/// empty reduction gives NaN, as numpy.
template <class X>
requires detail::Operand<X>
auto mean(X&& x, detail::AxisSpec axis = {}, bool keepdims = false,
          std::source_location where = std::source_location::current()) {
  TESSERA_CHECK_NAMED(X);
  using T = detail::FloatOf<detail::ValueOf<X>>;
  const Shape in = x.shape();
  auto s = jnp::sum(jnp::astype<float>(detail::checked(x)), std::move(axis), keepdims, where);
  const int64_t out = s.shape().size();
  const float count = out == 0 ? 0.0f : static_cast<float>(in.size() / out);
  return jnp::astype<T>(std::move(s) / count);
}

/// `jnp.var(x, axis=None, keepdims=False, ddof=0)`: the mean of the squared deviations from the
/// mean (two passes over x, as numpy); dtypes as jnp.mean. `ddof` divides by count - ddof.
template <class X>
requires detail::Operand<X>
auto var(X&& x, detail::AxisSpec axis = {}, bool keepdims = false, int ddof = 0,
         std::source_location where = std::source_location::current()) {
  TESSERA_CHECK_NAMED(X);
  using T = detail::FloatOf<detail::ValueOf<X>>;
  const Shape in = x.shape();
  auto xf = jnp::astype<float>(detail::checked(x));
  auto m = jnp::sum(detail::checked(xf), axis, true, where);
  const int64_t kept = m.shape().size();
  const int64_t n = kept == 0 ? 0 : in.size() / kept;
  auto d = detail::checked(xf) - std::move(m) / static_cast<float>(n);
  auto ss = jnp::sum(jnp::square(std::move(d)), std::move(axis), keepdims, where);
  return jnp::astype<T>(std::move(ss) / static_cast<float>(n - ddof));
}

}  // namespace jnp

// ---- member spellings: x.T(), x.reshape(...), x.sum(...), ... ---------------------------------
template <class Derived, class V>
auto detail::ExprOps<Derived, V>::T(std::source_location where) const& {
  TESSERA_CHECK_NAMED(const Derived&);
  return jnp::transpose(detail::checked(derived()), {}, where);
}
template <class Derived, class V>
auto detail::ExprOps<Derived, V>::T(std::source_location where) && {
  return jnp::transpose(static_cast<Derived&&>(*this), {}, where);
}
template <class Derived, class V>
auto detail::ExprOps<Derived, V>::reshape(Shape shape, std::source_location where) const& {
  TESSERA_CHECK_NAMED(const Derived&);
  return jnp::reshape(detail::checked(derived()), std::move(shape), where);
}
template <class Derived, class V>
auto detail::ExprOps<Derived, V>::reshape(Shape shape, std::source_location where) && {
  return jnp::reshape(static_cast<Derived&&>(*this), std::move(shape), where);
}
#define TESSERA_EXPR_REDUCTION_MEMBER(name)                                                        \
  template <class Derived, class V>                                                                \
  auto detail::ExprOps<Derived, V>::name(AxisSpec axis, bool keepdims, std::source_location where) \
      const& {                                                                                     \
    TESSERA_CHECK_NAMED(const Derived&);                                                           \
    return jnp::name(detail::checked(derived()), std::move(axis), keepdims, where);                \
  }                                                                                                \
  template <class Derived, class V>                                                                \
  auto detail::ExprOps<Derived, V>::name(AxisSpec axis, bool keepdims,                             \
                                         std::source_location where)&& {                           \
    return jnp::name(static_cast<Derived&&>(*this), std::move(axis), keepdims, where);             \
  }
TESSERA_EXPR_REDUCTION_MEMBER(sum)
TESSERA_EXPR_REDUCTION_MEMBER(max)
TESSERA_EXPR_REDUCTION_MEMBER(min)
TESSERA_EXPR_REDUCTION_MEMBER(mean)
TESSERA_EXPR_REDUCTION_MEMBER(argmax)
TESSERA_EXPR_REDUCTION_MEMBER(argmin)
#undef TESSERA_EXPR_REDUCTION_MEMBER

}  // namespace tessera
