// File: tessera/vector_ops.h
//
// In-kernel vector compute on VMEM/SMEM refs — the TPU's VPU, `jax.numpy`
// inside a Pallas kernel. Operations build expression templates (no work is
// done until the expression is assigned to a ref); the assignment evaluates the
// whole expression tile by tile with SIMD (Highway, dispatched at run time), so
// a chain of elementwise ops makes no full-size temporaries.
//
//   Pallas                                           Tessera
//   o_vmem[...] = jnp.full_like(o_vmem, 42.0)        o_vmem = jnp::full_like(o_vmem, 42.0f);
//   o_vmem[...] = jnp.arange(128, dtype=f32) + i*128 o_vmem = jnp::arange<float>(128) + float(i *
//   128); o_vmem[...] = x_vmem[...] * 2.0 - y_vmem[...]    o_vmem = x_vmem * 2.0f - y_vmem;
//   z_vmem[...] = jnp.zeros_like(z_vmem)             z_vmem = jnp::zeros_like(z_vmem);
//
// Semantics follow jax.numpy:
// - Broadcasting is numpy's: shapes align on the right, extents of 1 stretch.
//   The assigned expression must broadcast to the destination's shape.
// - Type promotion: bool < int8 < int32 < bfloat16 < float32. C++ scalars are
//   "weak" like Python scalars: `bf16_ref * 2.0f` stays bfloat16, `int8_ref + 1`
//   stays int8; a float scalar with an integer ref gives float32.
// - `/` is true division, as `jnp.divide`: integer operands give float32.
// - Every node rounds to its dtype (bfloat16 rounds to nearest even, int8 wraps).
// - The assigned expression's dtype must equal the destination's (a scalar is
//   converted); there is no silent narrowing.
//
// Cost class (as in Pallas' details.rst): all ops here are elementwise VPU
// ops — one pass over the destination, reading each input once.
#pragma once

#include <cstdint>
#include <source_location>
#include <type_traits>

#include "tessera/detail/expr_program.h"
#include "tessera/dtype.h"
#include "tessera/ref.h"
#include "tessera/shape.h"

namespace tessera {
namespace detail {

// ---- promotion --------------------------------------------------------------------------
template <class T>
constexpr int type_rank() {
  if constexpr (std::is_same_v<T, bool>) return 0;
  if constexpr (std::is_same_v<T, int8_t>) return 1;
  if constexpr (std::is_same_v<T, int32_t>) return 2;
  if constexpr (std::is_same_v<T, bfloat16>) return 3;
  if constexpr (std::is_same_v<T, float>) return 4;
}
template <class A, class B>
using Promote = std::conditional_t<(type_rank<A>() >= type_rank<B>()), A, B>;

/// The dtype of `array op weak_scalar` where the scalar has C++ type S.
template <class A, class S>
using PromoteWeak = std::conditional_t<std::is_floating_point_v<S>,
                                       std::conditional_t<is_floating(dtype_of<A>), A, float>,
                                       std::conditional_t<std::is_same_v<A, bool>, int32_t, A>>;

// ---- expression nodes ---------------------------------------------------------------------
struct ExprBase {};
template <class E>
inline constexpr bool is_expr_v = std::is_base_of_v<ExprBase, E>;

/// A C++ arithmetic scalar (weakly typed).
template <class S>
inline constexpr bool is_scalar_v =
    std::is_arithmetic_v<S> || std::is_same_v<std::remove_cv_t<S>, bfloat16>;

template <class T>
void set_const(ExprNode& n, T v) {
  n.op = OpCode::kConst;
  n.dtype = dtype_of<T>;
  if constexpr (std::is_floating_point_v<T> || std::is_same_v<T, bfloat16>) {
    n.fconst = static_cast<double>(static_cast<float>(v));
  } else {
    n.iconst = static_cast<int64_t>(v);
    n.fconst = static_cast<double>(v);
  }
}

/// A ref used as a leaf. Only refs in VMEM or SMEM can be leaves.
template <class T, MemorySpace S>
struct RefLeaf : ExprBase {
  static_assert(is_compute_space(S),
                "tessera: a Ref in HBM/ANY memory cannot appear in a compute expression; copy it "
                "into a VMEM buffer with pltpu::sync_copy (or a BlockSpec) and compute on that");
  using value_type = std::remove_cv_t<T>;
  pl::Ref<T, S> ref;  // by value: an expression may outlive a temporary view such as x.at(...)
  const Shape& shape() const { return ref.shape(); }
  int emit(ExprProgram& p) const {
    ExprNode& n = p.emplace();
    n.op = OpCode::kLoad;
    n.dtype = dtype_of<T>;
    n.data = ref.data();
    n.space = S;
    n.shape = ref.shape();
    n.strides = ref.strides();
    return p.last();
  }
};

/// A constant of shape `shape` (jnp.full).
template <class T>
struct FullExpr : ExprBase {
  using value_type = T;
  Shape shape_;
  T value;
  std::source_location where;
  const Shape& shape() const { return shape_; }
  int emit(ExprProgram& p) const {
    if (p.where.line() == 0) p.where = where;
    ExprNode& n = p.emplace();
    set_const<T>(n, value);
    n.shape = shape_;
    n.op = OpCode::kConst;
    // A full of a given shape behaves like a broadcast constant; its shape takes part in the
    // broadcast check through an iota-free load of stride 0.
    n.strides = SmallVec(shape_.rank(), 0);
    return p.last();
  }
};

/// The index along `axis` of `shape` (jnp.arange, lax.broadcasted_iota).
template <class T>
struct IotaExpr : ExprBase {
  using value_type = T;
  Shape shape_;
  int axis;
  std::source_location where;
  const Shape& shape() const { return shape_; }
  int emit(ExprProgram& p) const {
    if (p.where.line() == 0) p.where = where;
    ExprNode& n = p.emplace();
    n.op = OpCode::kIota;
    n.dtype = dtype_of<T>;
    n.shape = shape_;
    n.axis = axis;
    return p.last();
  }
};

/// A weakly typed scalar operand, already converted to the other operand's dtype.
template <class T>
struct ScalarExpr : ExprBase {
  using value_type = T;
  T value;
  const Shape& shape() const {
    static const Shape kScalar{};
    return kScalar;
  }
  int emit(ExprProgram& p) const {
    ExprNode& n = p.emplace();
    set_const<T>(n, value);
    return p.last();
  }
};

template <class T, class E>
int emit_as(const E& e, ExprProgram& p) {
  const int i = e.emit(p);
  if (dtype_of<typename E::value_type> == dtype_of<T>) return i;
  ExprNode& c = p.emplace();
  c.op = OpCode::kConvert;
  c.dtype = dtype_of<T>;
  c.a = i;
  return p.last();
}

Shape broadcast_shapes(const Shape& a, const Shape& b, const char* op, std::source_location where);

template <OpCode Op, class T, class L, class R>
struct BinaryExpr : ExprBase {
  using value_type = T;
  L l;
  R r;
  Shape shape_;
  BinaryExpr(L l_, R r_) : l(std::move(l_)), r(std::move(r_)) {
    shape_ = broadcast_shapes(l.shape(), r.shape(), op_name(Op), {});
  }
  const Shape& shape() const { return shape_; }
  int emit(ExprProgram& p) const {
    const int a = emit_as<T>(l, p);  // operands first: a program lists nodes in evaluation order
    const int b = emit_as<T>(r, p);
    ExprNode& n = p.emplace();
    n.op = Op;
    n.dtype = dtype_of<T>;
    n.a = a;
    n.b = b;
    return p.last();
  }
};

template <class T, class A>
struct NegExpr : ExprBase {
  using value_type = T;
  A a;
  const Shape& shape() const { return a.shape(); }
  int emit(ExprProgram& p) const {
    const int operand = emit_as<T>(a, p);
    ExprNode& n = p.emplace();
    n.op = OpCode::kNeg;
    n.dtype = dtype_of<T>;
    n.a = operand;
    return p.last();
  }
};

// ---- turning operands into nodes ----------------------------------------------------------
template <class X>
struct AsExpr;  // refs -> RefLeaf, expressions -> themselves
template <class T, MemorySpace S>
struct AsExpr<pl::Ref<T, S>> {
  using type = RefLeaf<T, S>;
  static type make(const pl::Ref<T, S>& r) { return type{{}, r}; }
};
template <class E>
requires is_expr_v<E>
struct AsExpr<E> {
  using type = E;
  static const E& make(const E& e) { return e; }
};

template <class X>
concept Operand = is_ref_v<std::remove_cvref_t<X>> || is_expr_v<std::remove_cvref_t<X>>;
template <class X>
concept Scalar = is_scalar_v<std::remove_cvref_t<X>> && !Operand<X>;

template <class X>
using ExprOf = typename AsExpr<std::remove_cvref_t<X>>::type;
template <class X>
using ValueOf = typename ExprOf<X>::value_type;

template <OpCode Op, class A, class B>
auto make_binary(const A& a, const B& b) {
  if constexpr (Op == OpCode::kSub && Operand<A> && Operand<B>) {
    static_assert(!(std::is_same_v<ValueOf<A>, bool> && std::is_same_v<ValueOf<B>, bool>),
                  "tessera: subtracting booleans is not supported (as in numpy); use a "
                  "bitwise or logical op instead");
  }
  if constexpr (Operand<A> && Operand<B>) {
    using T = Promote<ValueOf<A>, ValueOf<B>>;
    using E = BinaryExpr<Op, T, ExprOf<A>, ExprOf<B>>;
    return E(AsExpr<std::remove_cvref_t<A>>::make(a), AsExpr<std::remove_cvref_t<B>>::make(b));
  } else if constexpr (Operand<A>) {
    using T = PromoteWeak<ValueOf<A>, B>;
    using E = BinaryExpr<Op, T, ExprOf<A>, ScalarExpr<T>>;
    return E(AsExpr<std::remove_cvref_t<A>>::make(a), ScalarExpr<T>{{}, static_cast<T>(b)});
  } else {
    using T = PromoteWeak<ValueOf<B>, A>;
    using E = BinaryExpr<Op, T, ScalarExpr<T>, ExprOf<B>>;
    return E(ScalarExpr<T>{{}, static_cast<T>(a)}, AsExpr<std::remove_cvref_t<B>>::make(b));
  }
}

/// True division gives float32 for integer operands (jnp.divide).
template <class A, class B>
auto make_divide(const A& a, const B& b) {
  auto e = make_binary<OpCode::kDiv>(a, b);
  using T = typename decltype(e)::value_type;
  if constexpr (is_floating(dtype_of<T>)) {
    return e;
  } else {
    using F = BinaryExpr<OpCode::kDiv, float, decltype(e.l), decltype(e.r)>;
    return F(e.l, e.r);
  }
}

template <class A, class B>
concept BinaryOperands = (Operand<A> && Operand<B>) || (Operand<A> && Scalar<B>) ||
                         (Scalar<A> && Operand<B>);

/// Right-hand sides that are not elementwise expressions (`jnp::dot`, dot.h) specialise this
/// with `value = true` and a static `assign(dst, rhs)`; Ref::operator= then calls that instead.
template <class E>
struct SpecialAssign {
  static constexpr bool value = false;
};

/// Assigns `expr` into `dst` through the native evaluator.
template <class T, MemorySpace S, class E>
void assign(const pl::Ref<T, S>& dst, const E& expr) {
  static_assert(!std::is_const_v<T>, "tessera: cannot assign to a Ref of const elements");
  static_assert(is_compute_space(S),
                "tessera: this Ref is in HBM/ANY memory, which kernels cannot read, write or "
                "compute on; copy it into a VMEM buffer first with pltpu::sync_copy (or a "
                "BlockSpec), then use the VMEM ref");
  ExprProgram p;
  if constexpr (Scalar<E>) {
    ScalarExpr<T>{{}, static_cast<T>(expr)}.emit(p);
  } else {
    static_assert(std::is_same_v<ValueOf<E>, std::remove_cv_t<T>>,
                  "tessera: the assigned expression's dtype differs from the destination "
                  "ref's dtype; Tessera does not narrow or widen silently (convert with astype "
                  "or use a ref of the expression's dtype)");
    AsExpr<std::remove_cvref_t<E>>::make(expr).emit(p);
  }
  evaluate(p, dst.raw());
}

}  // namespace detail

// ---- operators (found by ADL on refs and expressions) -----------------------------------------
namespace pl {
template <class A, class B>
requires detail::BinaryOperands<A, B>
auto operator+(const A& a, const B& b) { return detail::make_binary<detail::OpCode::kAdd>(a, b); }
template <class A, class B>
requires detail::BinaryOperands<A, B>
auto operator-(const A& a, const B& b) { return detail::make_binary<detail::OpCode::kSub>(a, b); }
template <class A, class B>
requires detail::BinaryOperands<A, B>
auto operator*(const A& a, const B& b) { return detail::make_binary<detail::OpCode::kMul>(a, b); }
template <class A, class B>
requires detail::BinaryOperands<A, B>
auto operator/(const A& a, const B& b) { return detail::make_divide(a, b); }
template <class A>
requires detail::Operand<A>
auto operator-(const A& a) {
  using T = detail::ValueOf<A>;
  return detail::NegExpr<T, detail::ExprOf<A>>{{}, detail::AsExpr<A>::make(a)};
}

template <class T, MemorySpace Space>
Ref<T, Space>& Ref<T, Space>::operator=(const Ref& other) {
  detail::assign(*this, other);
  return *this;
}
template <class T, MemorySpace Space>
template <class E>
Ref<T, Space>& Ref<T, Space>::operator=(const E& expr) {
  static_assert(detail::Operand<E> || detail::Scalar<E> || detail::SpecialAssign<E>::value,
                "tessera: only a ref, an expression or a scalar can be assigned to a Ref");
  if constexpr (detail::SpecialAssign<E>::value) {
    detail::SpecialAssign<E>::assign(*this, expr);
  } else {
    detail::assign(*this, expr);
  }
  return *this;
}
}  // namespace pl

namespace detail {
// Expression nodes live in tessera::detail; bring the operators into reach for them too.
using pl::operator+;
using pl::operator-;
using pl::operator*;
using pl::operator/;
}  // namespace detail

// ---- creation functions (jnp.full, jnp.arange, ...) ------------------------------------------
namespace jnp {

/// `jnp.full(shape, value)`: every element `value`, dtype T.
template <class T>
detail::FullExpr<T> full(Shape shape, T value,
                         std::source_location where = std::source_location::current()) {
  return {{}, std::move(shape), value, where};
}
/// `jnp.full_like(ref, value)`: the ref's shape and dtype, every element `value`.
template <class R, class V>
requires(is_ref_v<R> || detail::is_expr_v<R>) &&
    detail::is_scalar_v<V> auto full_like(
        const R& like, V value, std::source_location where = std::source_location::current()) {
  using T = detail::ValueOf<R>;
  return detail::FullExpr<T>{{}, like.shape(), static_cast<T>(value), where};
}
/// `jnp.zeros_like(ref)`.
template <class R>
requires(is_ref_v<R> || detail::is_expr_v<R>) auto zeros_like(
    const R& like, std::source_location where = std::source_location::current()) {
  using T = detail::ValueOf<R>;
  return detail::FullExpr<T>{{}, like.shape(), static_cast<T>(0), where};
}
/// `jnp.ones_like(ref)`.
template <class R>
requires(is_ref_v<R> || detail::is_expr_v<R>) auto ones_like(
    const R& like, std::source_location where = std::source_location::current()) {
  using T = detail::ValueOf<R>;
  return detail::FullExpr<T>{{}, like.shape(), static_cast<T>(1), where};
}
/// `jnp.zeros(shape, dtype=T)`.
template <class T>
detail::FullExpr<T> zeros(Shape shape,
                          std::source_location where = std::source_location::current()) {
  return {{}, std::move(shape), static_cast<T>(0), where};
}
/// `jnp.arange(n, dtype=T)`: 0, 1, ..., n - 1 as a 1-D expression.
template <class T>
detail::IotaExpr<T> arange(int64_t n,
                           std::source_location where = std::source_location::current()) {
  return {{}, Shape{n}, 0, where};
}

}  // namespace jnp

namespace lax {
/// `lax.broadcasted_iota(dtype, shape, dimension)`: the index along `dimension` of `shape`.
template <class T>
detail::IotaExpr<T> broadcasted_iota(Shape shape, int dimension,
                                     std::source_location where = std::source_location::current()) {
  return {{}, std::move(shape), dimension, where};
}
}  // namespace lax

}  // namespace tessera
