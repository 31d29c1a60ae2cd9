// File: tessera/dot.h
//
// Matrix products — the TPU's MXU, `jnp.dot` / `lax.dot_general` / `jnp.einsum` inside a Pallas
// kernel.
//
//   Pallas                                               Tessera
//   z_ref[...] += x_ref[...] @ y_ref[...]                z_ref += jnp::dot(x_ref, y_ref);
//   acc[...] += jnp.dot(x, y, preferred_element_type=    acc += jnp::dot<float>(x, y);
//                       jnp.float32)
//   s = jnp.dot(q, k.T)                                  jnp::Value s = jnp::dot(q, k.T());
//   lax.dot_general(x, y, (((1,), (1,)), ((), ())),      lax::dot_general<float>(x, y,
//                   preferred_element_type=f32)  # x@y.T     {{{1}, {1}}, {{}, {}}})
//   s = jnp.einsum('bqd,bkd->bqk', q, k)                 jnp::Value s = jnp::einsum("bqd,bkd->bqk",
//   q, k);
//
// Operands are refs in VMEM or SMEM (any strides: a sub-view `x.at(...)` works), `x_ref[...]`,
// values (value.h), or any expression (computed into a temporary when the product is made, so
// `jnp::dot(p.astype<bfloat16>(), v)` works; a cast to the operand's own dtype, as in
// `x_ref[...].astype(input_dtype)`, is no expression: the ref or value itself is the operand).
// `dot_general`'s contracting dimensions choose which
// axis of each operand is summed over: ((1,), (0,)) is x @ y (what `jnp::dot` does), ((1,), (1,))
// is x @ y.T, ((0,), (0,)) is x.T @ y; several contracting dimensions (up to 4, paired in order)
// are summed together. Batch dimensions (up to 4, at any position, listed in the same order for
// both operands) make a batched product: ((2,), (2,)), ((0,), (0,)) on (B, M, K) and (B, N, K) is
// (B, M, N). Every other dimension of an operand is free; a 1-D operand of jnp::dot is a vector
// (as jnp.dot: (M, K) @ (K,) is (M,)). The result's axes are the batch dimensions, then the lhs
// free ones, then the rhs free ones, each in the operand's order (as lax.dot_general).
// `jnp::einsum` takes the two-operand subscripts that map onto one batched product (one
// contracted letter, shared batch letters, at most one free letter per operand, the output in
// any order).
//
// Dtypes (as jax.numpy promotes them): float32 x float32, bfloat16 x bfloat16, float16 x
// float16 and int8 x int8; products are always accumulated in float32 (int32 for int8). The
// result dtype is the operands' dtype unless the preferred element type is given as the first
// template argument (`jnp::dot<float>(x, y)`, jnp's `preferred_element_type=`): float32 or
// bfloat16 for float32/bfloat16 operands, float32 or float16 for float16, int32 or int8 for int8.
// A float8 operand (float8_e4m3fn, float8_e5m2, float8_e4m3b11fnuz) pairs with float32, bfloat16
// or a float8, as lax.dot_general takes mixed operands (`lax::dot_general<float>(x_bf16, w_f8,
// ...)`): two operands of one float8 give that float8 or the preferred float32/bfloat16; a mixed
// pair needs the preferred type (float32 or bfloat16), since jnp.dot and jnp.einsum have no
// promotion for it (Tessera asks for it in lax::dot_general too, where lax would pick the wider
// dtype). float16 and float8 operands, and both operands of a mixed pair, are widened to float32
// first (exact) and multiplied in float32. A TPU's MXU takes no float16, and each generation its
// own float8 pairs (pltpu::TpuInfo::is_matmul_supported: float8_e4m3b11fnuz on v5e, v5p and v6e
// only), so checked mode with a chip raises kUnsupported for the others. A narrower result is
// rounded (bfloat16, nearest even) or wrapped (int8) once, after the accumulation, as a TPU does.
// float32 products are computed in float32 (Pallas' precision HIGHEST; the TPU default would round
// operands to bfloat16).
//
// A product is an expression: `dst = jnp::dot(x, y)` writes it straight into `dst` and
// `dst += jnp::dot(x, y)` accumulates into it with the tile GEMM (no temporary); anywhere else
// (`jnp::dot(x, y) * scale`, `jnp::Value s = jnp::dot(...)`, a reduction of it) it is computed
// into a temporary in the core's VMEM first. A product of refs reads them where it is used (a
// named one cannot be used: make it a value); a product of values is pure and, once computed,
// kept for its other uses (a named `auto s = jnp::dot(q, k)` used three times multiplies once).
// A destination that overlaps an operand is computed through a temporary, so
// `a = jnp::dot(a, b)` is right.
//
// Errors: a dtype pair or preferred type outside the list above, or a destination of another
// dtype are compile errors. Ranks, dimension numbers, einsum subscripts, contracting extents
// that differ, batch extents that differ, or a destination of the wrong shape throw
// `tessera::Error` (`KernelError` inside a kernel, `UsageError` outside) of kind kInvalidArgument
// or kShapeMismatch, naming both shapes and the rule, at the line of the call.
//
// Cost: one tile GEMM of 2·M·N·K operations per batch element on the calling core (libxsmm's
// JIT kernel, dispatched once per shape and cached; bfloat16 uses AVX512-BF16 where the CPU has
// it). An operand whose layout the kernel cannot read directly is first packed into a per-core
// buffer: O(size of that operand), small against the product. See docs/performance.md.
#pragma once

#include <cstdint>
#include <initializer_list>
#include <memory>
#include <source_location>
#include <string_view>
#include <type_traits>

#include "tessera/dtype.h"
#include "tessera/memory_space.h"
#include "tessera/ref.h"
#include "tessera/value.h"
#include "tessera/vector_ops.h"

namespace tessera {

namespace lax {

/// `dimension_numbers` of `lax.dot_general`: ((lhs_contracting, rhs_contracting), (lhs_batch,
/// rhs_batch)). Each list has up to four dimensions (negative counts from the end); the two
/// contracting lists, and the two batch lists, have the same length:
///
///   lax::dot_general(x, y, {{{1}, {1}}, {{}, {}}})   // x @ y.T, as (((1,), (1,)), ((), ()))
///   lax::dot_general(x, y, {{{1}, {1}}})             // the same, batch omitted
///   lax::dot_general(q, k, {{{2}, {2}}, {{0}, {0}}}) // batched: (B, M, K) x (B, N, K)
struct DotDimensionNumbers {
  static constexpr int kMaxDims = 4;
  /// A list of dimensions, `(1,)` in Python.
  struct Dims {
    int size = 0;
    int dims[kMaxDims] = {0, 0, 0, 0};
    Dims() = default;
    Dims(std::initializer_list<int> l) noexcept {  // NOLINT: implicit, like a Python tuple
      for (int d : l) {
        if (size < kMaxDims) dims[size] = d;
        ++size;
      }
    }
  };
  /// One list per operand, `((1,), (0,))` in Python.
  struct Pair {
    Dims lhs;
    Dims rhs;
  };
  Pair contracting;
  Pair batch{};
};

}  // namespace lax

namespace detail {

/// The type-erased product the runtime evaluates: dst (+)= contract(lhs, rhs).
struct DotCall {
  RawRef lhs;
  RawRef rhs;
  lax::DotDimensionNumbers dims;
  DType result;  // the result dtype (preferred element type)
  const char* op;
  std::source_location where;
  /// The result's axes in the order the caller wants them (jnp::einsum's output subscripts): out
  /// axis i is axis out_perm[i] of the natural order (batch, lhs free, rhs free); empty: natural.
  SmallVec out_perm;
};

/// Evaluates `call` into `dst` (written when `accumulate` is false, added to when true). Throws
/// kInvalidArgument / kShapeMismatch for ranks, dimensions and shapes (see the file comment).
void dot_evaluate(const DotCall& call, const RawRef& dst, bool accumulate);

/// The result shape of `call` (validating it first; throws as dot_evaluate does).
Shape dot_result_shape(const DotCall& call);

/// Computes `call` into a new block of the calling core's VMEM (a value's storage, in the
/// result's axis order) and appends its load to `p`; `cache`, when given, keeps the block for the
/// next use of the same (pure) product.
int emit_dot(ExprProgram& p, const DotCall& call, ValueStorage* cache);

/// jnp::einsum's subscripts as dimension numbers and an output order (`out_perm`, empty on entry,
/// stays empty for the natural order); throws kInvalidArgument at `where` for subscripts it
/// cannot map onto one batched product.
void parse_einsum(std::string_view subscripts, int lhs_rank, int rhs_rank,
                  lax::DotDimensionNumbers& dims, SmallVec& out_perm, std::source_location where);

/// The result type of a dot of `L` operands when no preferred element type is given: the
/// operands' dtype, as jnp.dot.
template <class P, class L>
using DotResult = std::conditional_t<std::is_void_v<P>, std::remove_cv_t<L>, P>;

/// True for the operand dtypes a float8 operand pairs with: float32, bfloat16 and the float8s.
constexpr bool is_float8_partner(DType d) noexcept {
  return d == DType::kFloat32 || d == DType::kBFloat16 || is_float8(d);
}

/// Compile-time checks of a product with a float8 operand (see check_dot_types).
template <class A, class B, class P>
constexpr bool check_float8_dot_types() {
  static_assert(is_float8_partner(dtype_of<A>) && is_float8_partner(dtype_of<B>),
                "tessera: a float8 operand of jnp::dot / lax::dot_general pairs with float32, "
                "bfloat16 or a float8 operand only; convert the other operand first (astype)");
  if constexpr (std::is_same_v<A, B>) {
    static_assert(std::is_void_v<P> || std::is_same_v<P, float> || std::is_same_v<P, bfloat16> ||
                      std::is_same_v<P, A>,
                  "tessera: the preferred element type of a float8 dot must be float, bfloat16 "
                  "or the operands' float8 (products accumulate in float32); e.g. "
                  "jnp::dot<float>(x, y)");
  } else {
    static_assert(std::is_same_v<P, float> || std::is_same_v<P, bfloat16>,
                  "tessera: a product of a float8 and another dtype needs a preferred element "
                  "type, float or bfloat16 (jax.numpy has no promotion between them; products "
                  "accumulate in float32); e.g. lax::dot_general<float>(x, w, ...) or "
                  "jnp::dot<float>(x, w)");
  }
  return true;
}

/// Compile-time checks of a product's operand dtypes `L`, `R` and preferred element type `P`
/// (void: none given). See the file comment for the pairs.
template <class L, class R, class P>
constexpr bool check_dot_types() {
  using A = std::remove_cv_t<L>;
  using B = std::remove_cv_t<R>;
  if constexpr (is_float8(dtype_of<A>) || is_float8(dtype_of<B>)) {
    return check_float8_dot_types<A, B, P>();
  } else {
    using Q = DotResult<P, A>;
    static_assert(
        std::is_same_v<A, B> && (std::is_same_v<A, float> || std::is_same_v<A, bfloat16> ||
                                 std::is_same_v<A, float16> || std::is_same_v<A, int8_t>),
        "tessera: jnp::dot / lax::dot_general takes float32 x float32, bfloat16 x "
        "bfloat16, float16 x float16 or int8 x int8 operands, or a float8 with float32, "
        "bfloat16 or a float8; convert one operand first (astype) so that both have "
        "one of these dtypes");
    if constexpr (std::is_same_v<A, int8_t>) {
      static_assert(std::is_same_v<Q, int32_t> || std::is_same_v<Q, int8_t>,
                    "tessera: the preferred element type of an int8 dot must be int32_t or "
                    "int8_t (products accumulate in int32); e.g. jnp::dot<int32_t>(x, y)");
    } else if constexpr (std::is_same_v<A, float16>) {
      static_assert(std::is_same_v<Q, float> || std::is_same_v<Q, float16>,
                    "tessera: the preferred element type of a float16 dot must be float or "
                    "float16 (products accumulate in float32); e.g. jnp::dot<float>(x, y)");
    } else {
      static_assert(std::is_same_v<Q, float> || std::is_same_v<Q, bfloat16>,
                    "tessera: the preferred element type of a float32/bfloat16 dot must be "
                    "float or bfloat16 (products accumulate in float32); e.g. "
                    "jnp::dot<float>(x, y)");
    }
    return true;
  }
}

/// The result of a pure product once computed, shared by the copies of its expression.
struct DotCache {
  ValueStorage storage;
};

/// `jnp::dot(x, y)` / `lax::dot_general(...)` / `jnp::einsum(...)`: the operands' views (and the
/// storage of value or computed operands), the dimension numbers, the result dtype `Result`,
/// and the user's line. `Pure` when no operand is a ref (see the file comment).
template <class Result, bool Pure>
struct DotExpr : ExprOps<DotExpr<Result, Pure>, Result> {
  using value_type = Result;
  static constexpr bool kPure = Pure;
  DotCall call;
  ValueStorage keep_lhs;
  ValueStorage keep_rhs;
  std::shared_ptr<DotCache> cache;  // pure products only
  /// The result's shape; throws (at the call's line) for a bad product.
  Shape shape() const { return dot_result_shape(call); }
  int emit(ExprProgram& p) const {
    if (p.where.line() == 0) p.where = call.where;
    return emit_dot(p, call, cache ? &cache->storage : nullptr);
  }
};

template <class E>
inline constexpr bool is_dot_expr_v = false;
template <class Result, bool Pure>
inline constexpr bool is_dot_expr_v<DotExpr<Result, Pure>> = true;

template <class Result, bool Pure>
struct SpecialAssign<DotExpr<Result, Pure>> {
  static constexpr bool value = true;
  template <class T, MemorySpace S>
  static void check_destination() {
    static_assert(!std::is_const_v<T>, "tessera: cannot assign to a Ref of const elements");
    static_assert(is_compute_space(S),
                  "tessera: this Ref is in HBM/ANY memory, which kernels cannot read, write or "
                  "compute on; copy it into a VMEM buffer first with pltpu::sync_copy (or a "
                  "BlockSpec), then use the VMEM ref");
    static_assert(std::is_same_v<std::remove_cv_t<T>, Result>,
                  "tessera: the dot's result dtype differs from the destination ref's dtype; "
                  "Tessera does not convert silently: ask for the destination's dtype as the "
                  "preferred element type, e.g. acc = jnp::dot<float>(x, y) for a float32 acc");
  }
  /// `dst = jnp::dot(...)`, called by Ref::operator= (vector_ops.h).
  template <class T, MemorySpace S>
  static void assign(const pl::Ref<T, S>& dst, const DotExpr<Result, Pure>& e) {
    check_destination<T, S>();
    dot_evaluate(e.call, dst.raw(), false);
  }
  /// `acc += jnp::dot(...)`: accumulates with the GEMM, no temporary.
  template <class T, MemorySpace S>
  static void accumulate(const pl::Ref<T, S>& acc, const DotExpr<Result, Pure>& e) {
    static_assert(!std::is_const_v<T>, "tessera: cannot accumulate into a Ref of const elements");
    static_assert(std::is_same_v<std::remove_cv_t<T>, Result>,
                  "tessera: the dot's result dtype differs from the accumulator's dtype; Tessera "
                  "does not convert silently: ask for the accumulator's dtype as the preferred "
                  "element type, e.g. acc += jnp::dot<float>(x, y) for a float32 acc");
    dot_evaluate(e.call, acc.raw(), true);
  }
};

/// True for the operands a product reads in place, where they lie when it runs: refs,
/// `x_ref[...]`, and the load an expression makes of a ref (what `x_ref[...].astype(T)` of a ref
/// of T holds, see SameDtypeCast).
template <class X>
inline constexpr bool is_ref_operand_v = is_ref_v<X>;
template <class T, MemorySpace S>
inline constexpr bool is_ref_operand_v<RefItem<T, S>> = true;
template <class T, MemorySpace S>
inline constexpr bool is_ref_operand_v<RefLeaf<T, S>> = true;

/// `x.astype(T)` of an `x` already of dtype T converts nothing (CastExpr emits no node), so a
/// product takes `x` itself as its operand: a ref read in place, a value without a copy (ports
/// write `lhs[...].astype(input_dtype)` for operands that often have that dtype already).
template <class X>
struct SameDtypeCast {
  using type = X;
  static const X& operand(const X& x) { return x; }
};
template <class T, class A>
requires std::is_same_v<T, ValueOf<A>>
struct SameDtypeCast<CastExpr<T, A>> {
  using type = typename SameDtypeCast<A>::type;
  static const type& operand(const CastExpr<T, A>& x) { return SameDtypeCast<A>::operand(x.a); }
};

/// One operand of a product: its view, and the storage that keeps it alive (values and
/// expressions computed into a temporary).
struct DotOperand {
  RawRef view;
  ValueStorage keep;
};
template <class X>
DotOperand dot_operand(const X& x, std::source_location where) {
  if constexpr (is_ref_v<X>) {
    static_assert(is_compute_space(X::space),
                  "tessera: jnp::dot / lax::dot_general operands must be in VMEM (or SMEM); a "
                  "Ref in HBM/ANY has to be copied into a VMEM buffer first (pltpu::sync_copy or "
                  "a BlockSpec)");
    return {x.raw(), {}};
  } else if constexpr (is_ref_operand_v<X>) {
    return {x.ref.raw(), {}};
  } else if constexpr (is_value_v<X>) {
    return {x.raw(), x.storage()};
  } else {
    jnp::Value<ValueOf<X>> v(checked(x), where);
    return {v.raw(), v.storage()};
  }
}

/// The product of `x` and `y` with preferred element type `Preferred` (void: none given).
template <class Preferred, class X, class Y>
auto make_dot(const X& x, const Y& y, const lax::DotDimensionNumbers& dims, const char* op,
              std::source_location where, SmallVec out_perm = {}) {
  static_assert(check_dot_types<ValueOf<X>, ValueOf<Y>, Preferred>());
  using P = DotResult<Preferred, ValueOf<X>>;
  using XO = typename SameDtypeCast<X>::type;
  using YO = typename SameDtypeCast<Y>::type;
  constexpr bool kPure = !is_ref_operand_v<XO> && !is_ref_operand_v<YO>;
  DotOperand l = dot_operand(SameDtypeCast<X>::operand(x), where);
  DotOperand r = dot_operand(SameDtypeCast<Y>::operand(y), where);
  DotExpr<P, kPure> e{{},
                      DotCall{std::move(l.view), std::move(r.view), dims, dtype_of<P>, op, where,
                              std::move(out_perm)},
                      std::move(l.keep),
                      std::move(r.keep),
                      nullptr};
  if constexpr (kPure) e.cache = std::make_shared<DotCache>();
  return e;
}

template <class X, class Y>
concept DotArgs = Operand<X> && Operand<Y>;

}  // namespace detail

namespace jnp {

/// `jnp.dot(x, y, preferred_element_type=P)`: x (M, K) times y (K, N) gives (M, N); a 1-D x or
/// y is a vector. `P` (optional) is the preferred element type; without it the result has the
/// operands' dtype. See the file comment for operands, dtypes, errors and cost.
template <class P = void, class X, class Y>
requires detail::DotArgs<X, Y>
auto dot(X&& x, Y&& y, std::source_location where = std::source_location::current()) {
  TESSERA_CHECK_NAMED(X);
  TESSERA_CHECK_NAMED(Y);
  using XT = std::remove_cvref_t<X>;
  using YT = std::remove_cvref_t<Y>;
  return detail::make_dot<P>(static_cast<const XT&>(x), static_cast<const YT&>(y),
                             {{{-1}, {0}}, {{}, {}}}, "jnp.dot", where);
}

/// `jnp.matmul(x, y)` / `x @ y` on 2-D operands (= jnp::dot).
template <class P = void, class X, class Y>
requires detail::DotArgs<X, Y>
auto matmul(X&& x, Y&& y, std::source_location where = std::source_location::current()) {
  return jnp::dot<P>(std::forward<X>(x), std::forward<Y>(y), where);
}

/// `jnp.einsum(subscripts, x, y, preferred_element_type=P)` for two operands whose subscripts
/// map onto one (batched) product: "ij,jk->ik", "qd,kd->qk", "bqd,bkd->bqk", "bhqd,bhkd->bhqk",
/// an output in any order ("ij,jk->ki"); without "->" the output is the letters that appear once,
/// in alphabetical order, as in numpy.
template <class P = void, class X, class Y>
requires detail::DotArgs<X, Y>
auto einsum(std::string_view subscripts, X&& x, Y&& y,
            std::source_location where = std::source_location::current()) {
  TESSERA_CHECK_NAMED(X);
  TESSERA_CHECK_NAMED(Y);
  using XT = std::remove_cvref_t<X>;
  using YT = std::remove_cvref_t<Y>;
  lax::DotDimensionNumbers dims;
  detail::SmallVec perm;
  detail::parse_einsum(subscripts, x.shape().rank(), y.shape().rank(), dims, perm, where);
  return detail::make_dot<P>(static_cast<const XT&>(x), static_cast<const YT&>(y), dims,
                             "jnp.einsum", where, std::move(perm));
}

}  // namespace jnp

namespace lax {

/// `lax.dot_general(x, y, dimension_numbers, preferred_element_type=P)`: sums over x's
/// contracting dimensions and y's, batched over the batch dimensions; the result is (batch...,
/// x's free dimensions..., y's free dimensions...). A transposed operand is read in place. See
/// the file comment for dtypes, errors and cost.
template <class P = void, class X, class Y>
requires detail::DotArgs<X, Y>
auto dot_general(X&& x, Y&& y, const DotDimensionNumbers& dimension_numbers,
                 std::source_location where = std::source_location::current()) {
  TESSERA_CHECK_NAMED(X);
  TESSERA_CHECK_NAMED(Y);
  using XT = std::remove_cvref_t<X>;
  using YT = std::remove_cvref_t<Y>;
  return detail::make_dot<P>(static_cast<const XT&>(x), static_cast<const YT&>(y),
                             dimension_numbers, "lax.dot_general", where);
}

}  // namespace lax

}  // namespace tessera
