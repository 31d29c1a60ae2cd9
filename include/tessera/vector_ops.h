// File: tessera/vector_ops.h
//
// In-kernel vector compute on VMEM/SMEM refs and values — the TPU's VPU, `jax.numpy`
// inside a Pallas kernel. Operations build expression templates (no work is
// done until the expression is assigned to a ref or made a value, value.h); the
// assignment evaluates the whole expression tile by tile with SIMD (Highway,
// dispatched at run time), so a chain of elementwise ops makes no full-size
// temporaries. A named expression that reads refs cannot be used (it would read
// them late; TESSERA_CHECK_NAMED): make it a jnp::Value.
//
//   Pallas                                           Tessera
//   o_vmem[...] = jnp.full_like(o_vmem, 42.0)        o_vmem = jnp::full_like(o_vmem, 42.0f);
//   o_vmem[...] = x_vmem[...] * 2.0 - y_vmem[...]    o_vmem = x_vmem * 2.0f - y_vmem;
//   m_vmem[...] = x_vmem[...] > 0                    m_vmem = x_vmem > 0.0f;   // bool ref
//   acc_ref[...] += x_ref[...]                       acc_ref += x_ref;
//   z_vmem[...] = jnp.zeros_like(z_vmem)             z_vmem = jnp::zeros_like(z_vmem);
//
// This header holds the expression nodes, the operators (`+ - * / % & | ^ << >>`, unary `-`
// and `~`, comparisons `== != < <= > >=` giving bool masks), assignment and compound
// assignment; vector_create.h the creation functions (full, zeros, ones, arange,
// broadcasted_iota) and detail/ref_item.h what `x_ref[...]` gives.
// vector_math.h has the jnp/lax elementwise functions (maximum, where, exp, astype, ...);
// vector_reduce.h the reductions and shape ops (sum, argmax, transpose, reshape, roll).
//
// Semantics follow jax.numpy:
// - Broadcasting is numpy's: shapes align on the right, extents of 1 stretch.
//   The assigned expression must broadcast to the destination's shape.
// - Type promotion: jax.numpy's lattice with 64-bit types off (detail/promotion.h):
//   uint8 + int8 is int16, uint32 + int32 is int32, any integer + bfloat16 is bfloat16,
//   bfloat16 + float16 is float32; a float8 absorbs bools and integers and refuses other
//   floats. C++ scalars are "weak" like Python scalars: `bf16_ref * 2.0f` stays bfloat16,
//   `uint8_ref + 1` stays uint8, `bool_ref & true` stays bool; a float scalar with an integer
//   ref gives float32.
// - `/` is true division, as `jnp.divide`: integer operands give float32.
// - `%` is jnp.remainder (Python's: a nonzero result takes the divisor's sign). Integer
//   division by zero does not trap: `x % 0 == x` and `jnp::floor_divide(x, 0) == -1`
//   (XLA's integer division semantics); `INT_MIN % -1 == 0`.
// - Every node rounds to its dtype (bfloat16, float16 and the float8s are computed in
//   float32 and rounded to nearest even per node, narrow integers wrap, bool is x != 0).
// - The assigned expression's dtype must equal the destination's (a scalar is
//   converted); there is no silent narrowing.
//
// Cost classes (Pallas' details.rst, what a TPU VPU pays; the CPU is similar):
// cheap — `+ - *`, comparisons, `& | ^ ~ << >>`, where, astype, maximum/minimum, abs, neg;
// medium — `/ %`, floor_divide, exp, tanh, pow; expensive — sin, cos. Here integer `%`,
// floor_divide and pow run one lane at a time.
#pragma once

#include <cmath>
#include <cstdint>
#include <source_location>
#include <type_traits>

#include "tessera/detail/broadcast.h"
#include "tessera/detail/expr_concepts.h"
#include "tessera/detail/expr_program.h"
#include "tessera/detail/promotion.h"
#include "tessera/detail/statement_cache.h"
#include "tessera/dtype.h"
#include "tessera/ref.h"
#include "tessera/shape.h"

namespace tessera {
namespace detail {

// ---- expression nodes ---------------------------------------------------------------------
/// The `axis` argument of a reduction: one axis, a list, or all (jnp's None).
struct AxisSpec {
  bool all = true;
  SmallVec axes;
  AxisSpec() = default;
  AxisSpec(int axis) : all(false), axes(1, axis) {}         // NOLINT: implicit, like axis=1
  AxisSpec(std::initializer_list<int> list) : all(false) {  // NOLINT: implicit, like axis=(0, 1)
    for (int a : list) axes.push_back(a);
  }
};

/// The element of a one-element expression, as a C++ scalar: evaluates `program` (of `shape`,
/// which must hold exactly one element, else kInvalidArgument at `where`) into `out` (a `dtype`
/// scalar). A scalar read, as the checked engine sees it.
void evaluate_scalar(const ExprProgram& program, const Shape& shape, DType dtype, void* out,
                     std::source_location where);

/// Members every expression node has (the CRTP base), Pallas' methods on values: `x.astype(U)`,
/// `x.T`, `x.reshape(...)`, `x.sum(axis)`, `x.max(...)`, `x.mean(...)`, `x.item()`, and the
/// conversion of a one-element expression to its C++ scalar (`float m = jnp::max(x);`,
/// `if (x > 0)`, `pl::ds(idx, 8)`). Each has an lvalue form, which refuses a named expression
/// that reads refs (TESSERA_CHECK_NAMED), and an rvalue form. Defined in vector_math.h and
/// vector_reduce.h.
template <class Derived, class V>
struct ExprOps : ExprBase {
  template <class U>
  auto astype() const&;
  template <class U>
  auto astype() &&;
  /// `x.T`: all axes reversed (jnp.transpose).
  auto T(std::source_location where = std::source_location::current()) const&;
  auto T(std::source_location where = std::source_location::current()) &&;
  auto reshape(Shape shape, std::source_location where = std::source_location::current()) const&;
  auto reshape(Shape shape, std::source_location where = std::source_location::current()) &&;
#define TESSERA_EXPR_REDUCTION_MEMBER(name)                                       \
  auto name(AxisSpec axis = {}, bool keepdims = false,                            \
            std::source_location where = std::source_location::current()) const&; \
  auto name(AxisSpec axis = {}, bool keepdims = false,                            \
            std::source_location where = std::source_location::current())&&;
  TESSERA_EXPR_REDUCTION_MEMBER(sum)
  TESSERA_EXPR_REDUCTION_MEMBER(max)
  TESSERA_EXPR_REDUCTION_MEMBER(min)
  TESSERA_EXPR_REDUCTION_MEMBER(mean)
  TESSERA_EXPR_REDUCTION_MEMBER(argmax)
  TESSERA_EXPR_REDUCTION_MEMBER(argmin)
#undef TESSERA_EXPR_REDUCTION_MEMBER

  /// Number of axes and of elements.
  int ndim() const { return derived().shape().rank(); }
  int64_t size() const { return derived().shape().size(); }

  /// The one element of the expression (kInvalidArgument unless it has exactly one).
  V item(std::source_location where = std::source_location::current()) const& {
    TESSERA_CHECK_NAMED(const Derived&);
    return item_of(where);
  }
  V item(std::source_location where = std::source_location::current()) && { return item_of(where); }
  /// `float m = jnp::max(x);`: the one element, as item().
  operator V() const& {  // NOLINT: implicit, as a traced scalar reads in Pallas
    TESSERA_CHECK_NAMED(const Derived&);
    return item_of({});
  }
  operator V() && { return item_of({}); }  // NOLINT

 private:
  const Derived& derived() const { return static_cast<const Derived&>(*this); }
  V item_of(std::source_location where) const {
    ExprProgram p;
    p.where = where;
    derived().emit(p);
    V out{};
    evaluate_scalar(p, derived().shape(), dtype_of<V>, &out, where);
    return out;
  }
};

/// A ref used as a leaf. Only refs in VMEM or SMEM can be leaves.
template <class T, MemorySpace S>
struct RefLeaf : ExprOps<RefLeaf<T, S>, std::remove_cv_t<T>> {
  static_assert(is_compute_space(S),
                "tessera: a Ref in HBM/ANY memory cannot appear in a compute expression; copy it "
                "into a VMEM buffer with pltpu::sync_copy (or a BlockSpec) and compute on that");
  using value_type = std::remove_cv_t<T>;
  static constexpr bool kPure = false;  // reads the ref when evaluated
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
struct FullExpr : ExprOps<FullExpr<T>, T> {
  using value_type = T;
  static constexpr bool kPure = true;
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
struct IotaExpr : ExprOps<IotaExpr<T>, T> {
  using value_type = T;
  static constexpr bool kPure = true;
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
struct ScalarExpr : ExprOps<ScalarExpr<T>, T> {
  using value_type = T;
  static constexpr bool kPure = true;
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

/// Throws kInvalidArgument for jnp::arange with step 0.
[[noreturn]] void raise_zero_step(std::source_location where);

/// Tag of BinaryExpr's constructor from functions that make its operands.
struct MakeOperands {};

/// A two-operand elementwise node: operands are converted to the compute dtype C, the
/// result has dtype T (T == C except for comparisons, which give bool).
template <OpCode Op, class T, class L, class R, class C = T>
struct BinaryExpr : ExprOps<BinaryExpr<Op, T, L, R, C>, T> {
  using value_type = T;
  static constexpr bool kPure = L::kPure && R::kPure;
  L l;
  R r;
  Shape shape_;
  BinaryExpr(L l_, R r_)
      : l(std::move(l_)), r(std::move(r_)), shape_(broadcast_pair(l.shape(), r.shape(), Op)) {}
  /// The operands made where they are kept (make_binary): a ref's leaf is built in place, with
  /// no temporary leaf to move from (a statement builds its expression at every grid step).
  template <class MakeL, class MakeR>
  BinaryExpr(MakeOperands, const MakeL& make_l, const MakeR& make_r)
      : l(make_l()), r(make_r()), shape_(broadcast_pair(l.shape(), r.shape(), Op)) {}
  const Shape& shape() const { return shape_; }
  int emit(ExprProgram& p) const {
    const int a = emit_as<C>(l, p);  // operands first: a program lists nodes in evaluation order
    const int b = emit_as<C>(r, p);
    ExprNode& n = p.emplace();
    n.op = Op;
    n.dtype = dtype_of<T>;
    n.a = a;
    n.b = b;
    return p.last();
  }
};

/// A one-operand elementwise node: the operand is converted to C, the result has dtype T.
/// `iconst` is the exponent of kIntegerPow.
template <OpCode Op, class T, class A, class C = T>
struct UnaryExpr : ExprOps<UnaryExpr<Op, T, A, C>, T> {
  using value_type = T;
  static constexpr bool kPure = A::kPure;
  A a;
  int64_t iconst = 0;
  const Shape& shape() const { return a.shape(); }
  int emit(ExprProgram& p) const {
    const int operand = emit_as<C>(a, p);
    ExprNode& n = p.emplace();
    n.op = Op;
    n.dtype = dtype_of<T>;
    n.a = operand;
    n.iconst = iconst;
    return p.last();
  }
};

/// `astype`: the operand converted to T (no node when the dtypes already agree).
template <class T, class A>
struct CastExpr : ExprOps<CastExpr<T, A>, T> {
  using value_type = T;
  static constexpr bool kPure = A::kPure;
  A a;
  const Shape& shape() const { return a.shape(); }
  int emit(ExprProgram& p) const { return emit_as<T>(a, p); }
};

/// `jnp.where(mask, a, b)`: the mask converted to bool, a and b to T.
template <class T, class M, class A, class B>
struct SelectExpr : ExprOps<SelectExpr<T, M, A, B>, T> {
  using value_type = T;
  static constexpr bool kPure = M::kPure && A::kPure && B::kPure;
  M m;
  A a;
  B b;
  Shape shape_;
  SelectExpr(M m_, A a_, B b_) : m(std::move(m_)), a(std::move(a_)), b(std::move(b_)) {
    shape_ = broadcast_shapes(broadcast_shapes(m.shape(), a.shape(), "where", {}), b.shape(),
                              "where", {});
  }
  const Shape& shape() const { return shape_; }
  int emit(ExprProgram& p) const {
    const int c = emit_as<bool>(m, p);
    const int x = emit_as<T>(a, p);
    const int y = emit_as<T>(b, p);
    ExprNode& n = p.emplace();
    n.op = OpCode::kSelect;
    n.dtype = dtype_of<T>;
    n.c = c;
    n.a = x;
    n.b = y;
    return p.last();
  }
};

// ---- turning operands into nodes ----------------------------------------------------------
/// Passes an operand that a public call has already checked (TESSERA_CHECK_NAMED) on to other
/// public calls as an rvalue, so that they do not check it again. Nothing is moved from: every
/// call copies its operands.
template <class X>
const std::remove_cvref_t<X>&& checked(const X& x) noexcept {
  return static_cast<const std::remove_cvref_t<X>&&>(x);
}

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
using ExprOf = typename AsExpr<std::remove_cvref_t<X>>::type;
template <class X>
using ValueOf = typename ExprOf<X>::value_type;

/// What a binary op's result dtype is, given the promoted operand dtype C.
enum class ResultKind { kSame, kBool, kFloat };

/// The expression node for `a Op b` with jnp's promotion (refs, expressions, weak scalars).
template <OpCode Op, ResultKind K = ResultKind::kSame, class A, class B>
auto make_binary(const A& a, const B& b) {
  if constexpr (Op == OpCode::kSub && Operand<A> && Operand<B>) {
    static_assert(!(std::is_same_v<ValueOf<A>, bool> && std::is_same_v<ValueOf<B>, bool>),
                  "tessera: subtracting booleans is not supported (as in numpy); use a "
                  "bitwise or logical op instead");
  }
  if constexpr (Operand<A> && Operand<B>) {
    using C0 = Promote<ValueOf<A>, ValueOf<B>>;
    using C = std::conditional_t<K == ResultKind::kFloat, FloatOf<C0>, C0>;
    using T = std::conditional_t<K == ResultKind::kBool, bool, C>;
    using E = BinaryExpr<Op, T, ExprOf<A>, ExprOf<B>, C>;
    return E(
        MakeOperands{}, [&]() -> ExprOf<A> { return AsExpr<std::remove_cvref_t<A>>::make(a); },
        [&]() -> ExprOf<B> { return AsExpr<std::remove_cvref_t<B>>::make(b); });
  } else if constexpr (Operand<A>) {
    using C0 = PromoteWeak<ValueOf<A>, ScalarType<B>>;
    using C = std::conditional_t<K == ResultKind::kFloat, FloatOf<C0>, C0>;
    using T = std::conditional_t<K == ResultKind::kBool, bool, C>;
    using E = BinaryExpr<Op, T, ExprOf<A>, ScalarExpr<C>, C>;
    return E(
        MakeOperands{}, [&]() -> ExprOf<A> { return AsExpr<std::remove_cvref_t<A>>::make(a); },
        [&] {
          return ScalarExpr<C>{{}, weak_cast<C>(b)};
        });
  } else {
    using C0 = PromoteWeak<ValueOf<B>, ScalarType<A>>;
    using C = std::conditional_t<K == ResultKind::kFloat, FloatOf<C0>, C0>;
    using T = std::conditional_t<K == ResultKind::kBool, bool, C>;
    using E = BinaryExpr<Op, T, ScalarExpr<C>, ExprOf<B>, C>;
    return E(
        MakeOperands{},
        [&] {
          return ScalarExpr<C>{{}, weak_cast<C>(a)};
        },
        [&]() -> ExprOf<B> { return AsExpr<std::remove_cvref_t<B>>::make(b); });
  }
}

/// The promoted operand dtype of `a op b` (before a comparison makes it bool).
template <class A, class B>
struct PromotedOf {
  using type = PromoteScalars<ScalarType<A>, ScalarType<B>>;
};
template <class A, class B>
requires(Operand<A>&& Operand<B>) struct PromotedOf<A, B> {
  using type = Promote<ValueOf<A>, ValueOf<B>>;
};
template <class A, class B>
requires(Operand<A> && !Operand<B>) struct PromotedOf<A, B> {
  using type = PromoteWeak<ValueOf<A>, ScalarType<B>>;
};
template <class A, class B>
requires(!Operand<A> && Operand<B>) struct PromotedOf<A, B> {
  using type = PromoteWeak<ValueOf<B>, ScalarType<A>>;
};
template <class A, class B>
using PromotedT = typename PromotedOf<A, B>::type;

/// True division gives float32 for integer operands (jnp.divide).
template <class A, class B>
auto make_divide(const A& a, const B& b) {
  return make_binary<OpCode::kDiv, ResultKind::kFloat>(a, b);
}

/// `&`, `|`, `^`: integers or bools only.
template <OpCode Op, class A, class B>
auto make_bitwise(const A& a, const B& b) {
  static_assert(!is_floating(dtype_of<PromotedT<A, B>>),
                "tessera: bitwise ops (&, |, ^, ~) need integer or bool operands, not floats "
                "(as in jax.numpy); compare first (x > 0) or convert with astype");
  return make_binary<Op>(a, b);
}

/// `<<`, `>>`, lax.shift_right_logical: integers only.
template <OpCode Op, class A, class B>
auto make_shift(const A& a, const B& b) {
  using C = PromotedT<A, B>;
  static_assert(!is_floating(dtype_of<C>) && !std::is_same_v<C, bool>,
                "tessera: shifts (<<, >>, shift_right_logical) need integer operands (int8/16/32 "
                "or uint8/16/32), not floats or bools (as in jax.numpy)");
  return make_binary<Op>(a, b);
}

/// `%` and floor_divide: numbers only.
template <OpCode Op, class A, class B>
auto make_remainder(const A& a, const B& b) {
  static_assert(!std::is_same_v<PromotedT<A, B>, bool>,
                "tessera: % and floor_divide need numeric operands, not two bools; convert "
                "with astype<int32_t>() first");
  return make_binary<Op>(a, b);
}

template <class A, class B>
concept BinaryOperands = (Operand<A> && Operand<B>) || (Operand<A> && Scalar<B>) ||
                         (Scalar<A> && Operand<B>);

/// Right-hand sides that are not elementwise passes (`jnp::dot`, dot.h) specialise this with
/// `value = true` and static `assign(dst, rhs)` and `accumulate(dst, rhs)`; Ref::operator= and
/// Ref::operator+= then call those instead of the elementwise evaluator.
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
  if constexpr (Scalar<E>) {
    assign(dst, ScalarExpr<T>{{}, weak_cast<T>(expr)});
  } else {
    static_assert(std::is_same_v<ValueOf<E>, std::remove_cv_t<T>>,
                  "tessera: the assigned expression's dtype differs from the destination "
                  "ref's dtype; Tessera does not narrow or widen silently (convert with astype "
                  "or use a ref of the expression's dtype)");
    using X = std::remove_cvref_t<E>;
    auto emit = [](const void* e, ExprProgram& p) {
      AsExpr<X>::make(*static_cast<const X*>(e)).emit(p);
    };
    if constexpr (DirectBinary<X>::kApplies) {  // statement_cache.h
      if (DirectBinary<X>::run(expr, dst.data(), dst.shape(), dst.strides())) return;
    }
    if constexpr (DirectIota<X>::kApplies) {  // statement_cache.h
      if (DirectIota<X>::run(expr, dst.data(), dst.shape(), dst.strides())) return;
    }
    if constexpr (StatementLeaves<X>::kCacheable) {  // statement_cache.h
      const StatementArgs<X> args(expr, emit);
      if (evaluate_statement(args.view(), dst.data(), dst.dtype, S, dst.shape(), dst.strides()))
        return;
    }
    ExprProgram p;
    emit(&expr, p);
    evaluate(p, dst.raw());
  }
}

}  // namespace detail

// ---- operators (found by ADL on refs and expressions) -----------------------------------------
namespace pl {

#define TESSERA_BINARY_OPERATOR(op_, make_) \
  template <class A, class B>               \
  requires detail::BinaryOperands<A, B>     \
  auto operator op_(A&& a, B&& b) {         \
    TESSERA_CHECK_NAMED(A);                 \
    TESSERA_CHECK_NAMED(B);                 \
    return make_(a, b);                     \
  }

/// `a + b`, `a - b`, `a * b`: elementwise, jnp promotion. Cheap.
TESSERA_BINARY_OPERATOR(+, (detail::make_binary<detail::OpCode::kAdd>))
TESSERA_BINARY_OPERATOR(-, (detail::make_binary<detail::OpCode::kSub>))
TESSERA_BINARY_OPERATOR(*, (detail::make_binary<detail::OpCode::kMul>))
/// `a / b`: true division (float32 for integer operands). Medium.
TESSERA_BINARY_OPERATOR(/, (detail::make_divide))
/// `a % b`: jnp.remainder, the sign of the divisor (x % 0 == x for integers). Medium.
TESSERA_BINARY_OPERATOR(%, (detail::make_remainder<detail::OpCode::kRem>))
/// `a & b`, `a | b`, `a ^ b`: bitwise (logical for bools); integers and bools only. Cheap.
TESSERA_BINARY_OPERATOR(&, (detail::make_bitwise<detail::OpCode::kAnd>))
TESSERA_BINARY_OPERATOR(|, (detail::make_bitwise<detail::OpCode::kOr>))
TESSERA_BINARY_OPERATOR(^, (detail::make_bitwise<detail::OpCode::kXor>))
/// `a << b`, `a >> b` (arithmetic): integers only; shift amounts outside 0..bits-1 give 0
/// (`<<`) or the sign fill (`>>`), as XLA defines them. Cheap.
TESSERA_BINARY_OPERATOR(<<, (detail::make_shift<detail::OpCode::kShl>))
TESSERA_BINARY_OPERATOR(>>, (detail::make_shift<detail::OpCode::kShrA>))
/// Comparisons give bool masks (jnp.equal, ...); NaN compares unequal to everything. Cheap.
TESSERA_BINARY_OPERATOR(==, (detail::make_binary<detail::OpCode::kEq, detail::ResultKind::kBool>))
TESSERA_BINARY_OPERATOR(!=, (detail::make_binary<detail::OpCode::kNe, detail::ResultKind::kBool>))
TESSERA_BINARY_OPERATOR(<, (detail::make_binary<detail::OpCode::kLt, detail::ResultKind::kBool>))
TESSERA_BINARY_OPERATOR(<=, (detail::make_binary<detail::OpCode::kLe, detail::ResultKind::kBool>))
TESSERA_BINARY_OPERATOR(>, (detail::make_binary<detail::OpCode::kGt, detail::ResultKind::kBool>))
TESSERA_BINARY_OPERATOR(>=, (detail::make_binary<detail::OpCode::kGe, detail::ResultKind::kBool>))
#undef TESSERA_BINARY_OPERATOR

/// `-a`: jnp.negative. Cheap.
template <class A>
requires detail::Operand<A>
auto operator-(A&& a) {
  TESSERA_CHECK_NAMED(A);
  using T = detail::ValueOf<A>;
  return detail::UnaryExpr<detail::OpCode::kNeg, T, detail::ExprOf<A>>{
      {}, detail::AsExpr<std::remove_cvref_t<A>>::make(a)};
}
/// `~a`: bitwise not (logical not for bools); integers and bools only. Cheap.
template <class A>
requires detail::Operand<A>
auto operator~(A&& a) {
  TESSERA_CHECK_NAMED(A);
  using T = detail::ValueOf<A>;
  static_assert(!is_floating(dtype_of<T>),
                "tessera: bitwise ops (&, |, ^, ~) need integer or bool operands, not floats "
                "(as in jax.numpy); compare first (x > 0) or convert with astype");
  return detail::UnaryExpr<detail::OpCode::kNot, T, detail::ExprOf<A>>{
      {}, detail::AsExpr<std::remove_cvref_t<A>>::make(a)};
}

/// `a && b`, `a || b`, `!a` on arrays: refused, as Python's `and`/`or`/`not` refuse an array of
/// more than one element; the elementwise ops are `&`, `|`, `~` (jnp.logical_and/or/not).
template <class A, class B>
requires(detail::Operand<A> || detail::Operand<B>) void operator&&(const A&, const B&) {
  static_assert(sizeof(A) == 0,
                "tessera: && on arrays is not elementwise; use & (or jnp::logical_and) for an "
                "elementwise and, or reduce first (jnp::all)");
}
template <class A, class B>
requires(detail::Operand<A> || detail::Operand<B>) void operator||(const A&, const B&) {
  static_assert(sizeof(A) == 0,
                "tessera: || on arrays is not elementwise; use | (or jnp::logical_or) for an "
                "elementwise or, or reduce first (jnp::any)");
}
template <class A>
requires detail::Operand<A>
void operator!(const A&) {
  static_assert(sizeof(A) == 0,
                "tessera: ! on an array is not elementwise; use ~ (or jnp::logical_not) on a bool "
                "array");
}

}  // namespace pl

namespace detail {
/// The body of Ref's assignments. Not inlined, so that its return address lies in the user's
/// statement: errors raised while it runs name that statement (StatementScope in
/// detail/runtime.h). Ref's operators call it, then keep_return_address().
template <class T, MemorySpace S, class E>
[[gnu::noinline]] void assign_statement(const pl::Ref<T, S>& dst, const E& expr) {
  const StatementScope statement(__builtin_return_address(0));
  if constexpr (SpecialAssign<E>::value) {
    SpecialAssign<E>::assign(dst, expr);
  } else {
    assign(dst, expr);
  }
}
}  // namespace detail

namespace detail {
/// `dst += rhs` for a right-hand side with its own accumulation (SpecialAssign): not inlined, as
/// assign_statement.
template <class T, MemorySpace S, class E>
[[gnu::noinline]] void accumulate_statement(const pl::Ref<T, S>& dst, const E& expr) {
  const StatementScope statement(__builtin_return_address(0));
  SpecialAssign<E>::accumulate(dst, expr);
}
}  // namespace detail

namespace pl {
// Ref's assignments are always inlined, at every optimisation level, so that the call to
// assign_statement lies in the user's statement and its return address names that statement.
template <class T, MemorySpace Space>
[[gnu::always_inline]] inline Ref<T, Space>& Ref<T, Space>::operator=(const Ref& other) {
  detail::assign_statement(*this, other);
  detail::keep_return_address();
  return *this;
}
template <class T, MemorySpace Space>
template <class E>
requires(!std::is_same_v<std::remove_cvref_t<E>, Ref<T, Space>>)
    [[gnu::always_inline]] inline Ref<T, Space>& Ref<T, Space>::operator=(E&& expr) {
  using X = std::remove_cvref_t<E>;
  static_assert(detail::Operand<X> || detail::Scalar<X> || detail::SpecialAssign<X>::value,
                "tessera: only a ref, an expression, a value or a scalar can be assigned to a Ref");
  TESSERA_CHECK_NAMED(E);
  detail::assign_statement(*this, static_cast<const X&>(expr));
  detail::keep_return_address();
  return *this;
}
#define TESSERA_COMPOUND_ASSIGN(op_, binop_, accumulates_)                              \
  template <class T, MemorySpace Space>                                                 \
  template <class E>                                                                    \
  requires(detail::Operand<E> || detail::Scalar<E>)                                     \
      [[gnu::always_inline]] inline Ref<T, Space>& Ref<T, Space>::operator op_(E&& e) { \
    TESSERA_CHECK_NAMED(E);                                                             \
    using X = std::remove_cvref_t<E>;                                                   \
    if constexpr (accumulates_ && detail::SpecialAssign<X>::value) {                    \
      detail::accumulate_statement(*this, static_cast<const X&>(e));                    \
    } else {                                                                            \
      detail::assign_statement(*this, *this binop_ std::forward<E>(e));                 \
    }                                                                                   \
    detail::keep_return_address();                                                      \
    return *this;                                                                       \
  }
TESSERA_COMPOUND_ASSIGN(+=, +, true)
TESSERA_COMPOUND_ASSIGN(-=, -, false)
TESSERA_COMPOUND_ASSIGN(*=, *, false)
TESSERA_COMPOUND_ASSIGN(/=, /, false)
#undef TESSERA_COMPOUND_ASSIGN
}  // namespace pl

namespace detail {
// Expression nodes live in tessera::detail; bring the operators into reach for them too.
using pl::operator+;
using pl::operator-;
using pl::operator*;
using pl::operator/;
using pl::operator%;
using pl::operator&;
using pl::operator|;
using pl::operator^;
using pl::operator<<;
using pl::operator>>;
using pl::operator==;
using pl::operator!=;
using pl::operator<;
using pl::operator<=;
using pl::operator>;
using pl::operator>=;
using pl::operator~;
using pl::operator&&;
using pl::operator||;
using pl::operator!;
}  // namespace detail

}  // namespace tessera

// x_ref[...] (detail/ref_item.h) and the creation functions jnp::full, zeros, arange, ...
// (vector_create.h) build on the nodes and operators above.
#include "tessera/detail/ref_item.h"
#include "tessera/vector_create.h"
