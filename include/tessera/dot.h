// File: tessera/dot.h
//
// Matrix products of 2-D VMEM tiles — the TPU's MXU, `jnp.dot` / `lax.dot_general` inside a
// Pallas kernel. A product is not an elementwise expression: `jnp::dot(x, y)` returns a
// `detail::DotExpr` that only an assignment to a ref evaluates, with a tuned tile GEMM.
//
//   Pallas                                               Tessera
//   z_ref[...] += x_ref[...] @ y_ref[...]                z_ref += jnp::dot(x_ref, y_ref);
//   acc[...] += jnp.dot(x, y, preferred_element_type=    acc += jnp::dot<float>(x, y);
//                       jnp.float32)
//   z_ref[...] = jnp.dot(x, y)                           z_ref = jnp::dot(x, y);
//   lax.dot_general(x, y, (((1,), (1,)), ((), ())),      lax::dot_general<float>(x, y,
//                   preferred_element_type=f32)  # x@y.T     {{{1}, {1}}, {{}, {}}})
//
// Operands are 2-D refs in VMEM or SMEM (any strides: a sub-view `x.at(...)` works, no copy is
// made by the caller). `dot_general`'s contracting dimensions choose which axis of each operand
// is summed over: ((1,), (0,)) is x @ y (what `jnp::dot` does), ((1,), (1,)) is x @ y.T,
// ((0,), (0,)) is x.T @ y, ((0,), (1,)) is x.T @ y.T. Batch dimensions are not supported on
// 2-D tiles. The result has shape (rows of x's free axis, columns of y's free axis).
//
// Dtypes (as jax.numpy promotes them): float32 x float32, bfloat16 x bfloat16 and
// int8 x int8; products are always accumulated in float32 (int32 for int8). The result dtype
// is the operands' dtype unless the preferred element type is given as the first template
// argument (`jnp::dot<float>(x, y)`, jnp's `preferred_element_type=`): float32 or bfloat16 for
// float operands, int32 or int8 for int8. A narrower result is rounded (bfloat16, nearest even)
// or wrapped (int8) once, after the accumulation, as a TPU does. float32 products are computed
// in float32 (Pallas' precision HIGHEST; the TPU default would round operands to bfloat16).
//
// Assignment: `dst = jnp::dot(x, y)` writes the product; `dst += jnp::dot(x, y)` adds it.
// `dst` must be a 2-D VMEM/SMEM ref of the result's shape and of the result's dtype (there is
// no silent conversion; the compiler says so). A destination that overlaps an operand is
// computed through a temporary, so `a = jnp::dot(a, b)` is right.
//
// Errors: a dtype pair or preferred type outside the list above, an operand or destination in
// HBM/ANY, an operand that is not a ref, or a destination of another dtype are compile errors.
// A rank other than 2, a contracting dimension out of range, batch dimensions, contracting
// extents that differ, or a destination of the wrong shape throw `tessera::Error`
// (`KernelError` inside a kernel, `UsageError` outside) of kind kInvalidArgument or
// kShapeMismatch, naming both shapes and the rule, at the line of the `jnp::dot` /
// `lax::dot_general` call.
//
// Cost: one tile GEMM of 2·M·N·K operations on the calling core (libxsmm's JIT kernel,
// dispatched once per shape and cached; bfloat16 uses AVX512-BF16 where the CPU has it). An
// operand whose layout the kernel cannot read directly (a transposed operand libxsmm cannot
// take, an element stride other than 1, bfloat16's right operand, which is repacked in pairs
// of k) is first packed into a per-core buffer: O(size of that operand), small against the
// product. See docs/performance.md for the measured rates.
#pragma once

#include <cstdint>
#include <initializer_list>
#include <source_location>
#include <type_traits>

#include "tessera/dtype.h"
#include "tessera/memory_space.h"
#include "tessera/ref.h"
#include "tessera/vector_ops.h"

namespace tessera {

namespace lax {

/// `dimension_numbers` of `lax.dot_general`: ((lhs_contracting, rhs_contracting), (lhs_batch,
/// rhs_batch)). On 2-D tiles each contracting list has one dimension (0, 1, or -1 / -2 counted
/// from the end) and the batch lists are empty:
///
///   lax::dot_general(x, y, {{{1}, {1}}, {{}, {}}})   // x @ y.T, as (((1,), (1,)), ((), ()))
///   lax::dot_general(x, y, {{{1}, {1}}})             // the same, batch omitted
struct DotDimensionNumbers {
  /// A list of at most two dimensions, `(1,)` in Python.
  struct Dims {
    int size = 0;
    int dims[2] = {0, 0};
    Dims() = default;
    Dims(std::initializer_list<int> l) noexcept {  // NOLINT: implicit, like a Python tuple
      for (int d : l) {
        if (size < 2) dims[size] = d;
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
};

/// Evaluates `call` into `dst` (written when `accumulate` is false, added to when true). Throws
/// kInvalidArgument / kShapeMismatch for ranks, dimensions and shapes (see the file comment).
void dot_evaluate(const DotCall& call, const RawRef& dst, bool accumulate);

/// The result shape of `call` (validating it first; throws as dot_evaluate does).
Shape dot_result_shape(const DotCall& call);

template <class L, class R, class P>
constexpr bool check_dot_types() {
  using A = std::remove_cv_t<L>;
  using B = std::remove_cv_t<R>;
  static_assert(std::is_same_v<A, B> && (std::is_same_v<A, float> || std::is_same_v<A, bfloat16> ||
                                         std::is_same_v<A, int8_t>),
                "tessera: jnp::dot / lax::dot_general takes float32 x float32, bfloat16 x "
                "bfloat16 or int8 x int8 operands; convert one operand first (astype) so that "
                "both have one of these dtypes");
  if constexpr (std::is_same_v<A, int8_t>) {
    static_assert(std::is_same_v<P, int32_t> || std::is_same_v<P, int8_t>,
                  "tessera: the preferred element type of an int8 dot must be int32_t or int8_t "
                  "(products accumulate in int32); e.g. jnp::dot<int32_t>(x, y)");
  } else {
    static_assert(std::is_same_v<P, float> || std::is_same_v<P, bfloat16>,
                  "tessera: the preferred element type of a float32/bfloat16 dot must be float "
                  "or bfloat16 (products accumulate in float32); e.g. jnp::dot<float>(x, y)");
  }
  return true;
}

/// `jnp::dot(x, y)` / `lax::dot_general(...)` before it is assigned: the operands (views, by
/// value), the dimension numbers, the result dtype `Result`, and the user's line.
template <class Result>
struct DotExpr {
  using value_type = Result;
  DotCall call;
  /// The result's shape; throws (at the call's line) for a bad product.
  Shape shape() const { return dot_result_shape(call); }
};

template <class E>
inline constexpr bool is_dot_expr_v = false;
template <class Result>
inline constexpr bool is_dot_expr_v<DotExpr<Result>> = true;

template <class Result>
struct SpecialAssign<DotExpr<Result>> {
  static constexpr bool value = true;
  /// `dst = jnp::dot(...)`, called by Ref::operator= (vector_ops.h).
  template <class T, MemorySpace S>
  static void assign(const pl::Ref<T, S>& dst, const DotExpr<Result>& e) {
    static_assert(!std::is_const_v<T>, "tessera: cannot assign to a Ref of const elements");
    static_assert(is_compute_space(S),
                  "tessera: this Ref is in HBM/ANY memory, which kernels cannot read, write or "
                  "compute on; copy it into a VMEM buffer first with pltpu::sync_copy (or a "
                  "BlockSpec), then use the VMEM ref");
    static_assert(std::is_same_v<std::remove_cv_t<T>, Result>,
                  "tessera: the dot's result dtype differs from the destination ref's dtype; "
                  "Tessera does not convert silently: ask for the destination's dtype as the "
                  "preferred element type, e.g. acc = jnp::dot<float>(x, y) for a float32 acc");
    dot_evaluate(e.call, dst.raw(), false);
  }
};

template <class P, class L, MemorySpace SL, class R, MemorySpace SR>
DotExpr<P> make_dot(const pl::Ref<L, SL>& x, const pl::Ref<R, SR>& y,
                    const lax::DotDimensionNumbers& dims, const char* op,
                    std::source_location where) {
  static_assert(is_compute_space(SL) && is_compute_space(SR),
                "tessera: jnp::dot / lax::dot_general operands must be refs in VMEM (or SMEM); "
                "a Ref in HBM/ANY has to be copied into a VMEM buffer first (pltpu::sync_copy or "
                "a BlockSpec)");
  static_assert(check_dot_types<L, R, P>());
  return DotExpr<P>{DotCall{x.raw(), y.raw(), dims, dtype_of<P>, op, where}};
}

/// The result type of a dot of `L` operands when no preferred element type is given: the
/// operands' dtype, as jnp.dot.
template <class P, class L>
using DotResult = std::conditional_t<std::is_void_v<P>, std::remove_cv_t<L>, P>;

}  // namespace detail

namespace jnp {

/// `jnp.dot(x, y, preferred_element_type=P)` on 2-D VMEM refs: x (M, K) times y (K, N) gives
/// (M, N). `P` (optional) is the preferred element type; without it the result has the
/// operands' dtype. Nothing is computed until the result is assigned to a ref (`=`, `+=`).
/// Throws kInvalidArgument (rank) or kShapeMismatch (K differs) when assigned, naming both
/// shapes; see the file comment for dtypes and cost.
template <class P = void, class L, MemorySpace SL, class R, MemorySpace SR>
detail::DotExpr<detail::DotResult<P, L>> dot(
    const pl::Ref<L, SL>& x, const pl::Ref<R, SR>& y,
    std::source_location where = std::source_location::current()) {
  return detail::make_dot<detail::DotResult<P, L>>(x, y, {{{1}, {0}}, {{}, {}}}, "jnp.dot", where);
}

/// Operands that are not refs (an expression such as `x * 2`, an Array): a compile error that
/// says what to do.
template <class P = void, class L, class R>
requires(!(is_ref_v<L> &&
           is_ref_v<R>)) void dot(const L&, const R&,
                                  std::source_location = std::source_location::current()) {
  static_assert(sizeof(L) == 0,
                "tessera: jnp::dot / lax::dot_general takes 2-D refs in VMEM (tiles); evaluate an "
                "expression into a VMEM scratch ref first (scratch = x * 2.0f;) and pass that ref");
}

}  // namespace jnp

namespace lax {

/// Operands that are not refs: a compile error (see jnp::dot).
template <class P = void, class L, class R>
requires(!(is_ref_v<L> &&
           is_ref_v<R>)) void dot_general(const L&, const R&, const DotDimensionNumbers&,
                                          std::source_location = std::source_location::current()) {
  static_assert(sizeof(L) == 0,
                "tessera: jnp::dot / lax::dot_general takes 2-D refs in VMEM (tiles); evaluate an "
                "expression into a VMEM scratch ref first (scratch = x * 2.0f;) and pass that ref");
}

/// `lax.dot_general(x, y, dimension_numbers, preferred_element_type=P)` on 2-D VMEM refs: sums
/// over x's contracting dimension and y's; the result is (x's other dimension, y's other
/// dimension). A transposed operand is read in place (no copy by the caller). See the file
/// comment for dtypes, errors and cost.
template <class P = void, class L, MemorySpace SL, class R, MemorySpace SR>
detail::DotExpr<detail::DotResult<P, L>> dot_general(
    const pl::Ref<L, SL>& x, const pl::Ref<R, SR>& y, const DotDimensionNumbers& dimension_numbers,
    std::source_location where = std::source_location::current()) {
  return detail::make_dot<detail::DotResult<P, L>>(x, y, dimension_numbers, "lax.dot_general",
                                                   where);
}

}  // namespace lax

namespace detail {
/// `acc += dot`'s body, not inlined so that its return address names the user's statement
/// (assign_statement in vector_ops.h).
template <class T, MemorySpace S, class Result>
[[gnu::noinline]] void accumulate_statement(const pl::Ref<T, S>& acc, const DotExpr<Result>& e) {
  const StatementScope statement(__builtin_return_address(0));
  dot_evaluate(e.call, acc.raw(), true);
}
}  // namespace detail

namespace pl {

/// `acc += jnp::dot(x, y)`: adds the product to `acc`'s elements (`acc[...] += x @ y` in
/// Pallas). `acc` must be a 2-D VMEM/SMEM ref of the product's shape and dtype.
template <class T, MemorySpace S, class Result>
[[gnu::always_inline]] inline const Ref<T, S>& operator+=(const Ref<T, S>& acc,
                                                          const detail::DotExpr<Result>& e) {
  static_assert(!std::is_const_v<T>, "tessera: cannot accumulate into a Ref of const elements");
  static_assert(is_compute_space(S),
                "tessera: this Ref is in HBM/ANY memory, which kernels cannot read, write or "
                "compute on; copy it into a VMEM buffer first with pltpu::sync_copy (or a "
                "BlockSpec), then use the VMEM ref");
  static_assert(std::is_same_v<std::remove_cv_t<T>, Result>,
                "tessera: the dot's result dtype differs from the accumulator's dtype; Tessera "
                "does not convert silently: ask for the accumulator's dtype as the preferred "
                "element type, e.g. acc += jnp::dot<float>(x, y) for a float32 acc");
  detail::accumulate_statement(acc, e);
  detail::keep_return_address();
  return acc;
}

}  // namespace pl

}  // namespace tessera
