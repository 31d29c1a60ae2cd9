// Internal: what counts as an operand of an in-kernel expression. Ref (ref.h) needs these
// concepts to constrain its compound assignments (`a += e`), and vector_ops.h to constrain the
// operators, so they live below both.
#pragma once

#include <type_traits>

#include "tessera/dtype.h"
#include "tessera/memory_space.h"

namespace tessera {

namespace pl {
template <class T, MemorySpace Space>
class Ref;
}  // namespace pl

/// True for any `pl::Ref` type.
template <class R>
inline constexpr bool is_ref_v = false;
template <class T, MemorySpace S>
inline constexpr bool is_ref_v<pl::Ref<T, S>> = true;

namespace detail {

template <class T>
class ElementRef;  // ref.h

/// The C++ type of a weak scalar operand: an element of a ref (`s_ref(0)`, ref.h's ElementRef)
/// counts as a scalar of its element type, read where the expression is built.
template <class S>
struct ScalarTypeImpl {
  using type = S;
};
template <class T>
struct ScalarTypeImpl<ElementRef<T>> {
  using type = T;
};
template <class S>
using ScalarType = typename ScalarTypeImpl<std::remove_cvref_t<S>>::type;

/// Base of every expression-template node (vector_ops.h).
struct ExprBase {};
template <class E>
inline constexpr bool is_expr_v = std::is_base_of_v<ExprBase, E>;

/// False for an expression that reads refs (a leaf holds a ref's view, read when the expression
/// is evaluated); true for one over values, constants and iotas only, which gives the same
/// elements wherever it is evaluated. Every node says which it is with `kPure`.
template <class E>
inline constexpr bool is_pure_expr_v = [] {
  if constexpr (is_expr_v<E>) {
    return E::kPure;
  } else {
    return true;
  }
}();

/// Whether an operand passed as `X` (a forwarding reference's deduced type) may be used: a named
/// expression (an lvalue) must be pure. A named expression that reads refs would read them where
/// it is used, not where it was written, which is not what the same Pallas line means (there
/// `x = x_ref[...] * 2` is a value); see TESSERA_CHECK_NAMED.
template <class X>
inline constexpr bool named_operand_ok_v =
    !std::is_lvalue_reference_v<X> || is_pure_expr_v<std::remove_cvref_t<X>>;

/// A C++ arithmetic scalar (weakly typed; the sub-byte integers too, like C++'s integers), or an
/// element of a ref of them.
template <class S>
inline constexpr bool is_scalar_v =
    std::is_arithmetic_v<ScalarType<S>> || is_narrow_float_v<ScalarType<S>> ||
    is_narrow_int_v<ScalarType<S>>;

/// A ref or an elementwise-capable expression: something an operator can take.
template <class X>
concept Operand = is_ref_v<std::remove_cvref_t<X>> || is_expr_v<std::remove_cvref_t<X>>;
/// A C++ scalar operand (weakly typed, like a Python scalar).
template <class X>
concept Scalar = is_scalar_v<std::remove_cvref_t<X>> && !Operand<X>;

/// A weak scalar operand as a C++ value of dtype C: an element of a ref is read; an integer
/// becomes a narrow float (bfloat16, float16, float8) through float, as jnp converts it, so that
/// no implicit int -> float conversion is left for -Wconversion to report.
template <class C, class S>
C weak_cast(const S& s) {
  const ScalarType<S> v = s;
  if constexpr (is_narrow_float_v<C> && !is_narrow_float_v<ScalarType<S>>) {
    return C(static_cast<float>(v));
  } else {
    return static_cast<C>(v);
  }
}

}  // namespace detail
}  // namespace tessera

/// In a function taking operand `X&&`: refuses a named expression that reads refs (see
/// named_operand_ok_v), with the fix in the message.
#define TESSERA_CHECK_NAMED(X)                                                                   \
  static_assert(::tessera::detail::named_operand_ok_v<X>,                                        \
                "tessera: this named expression reads refs, so it is lazy: it would read them "  \
                "where it is used, not where it was written. Make it a value where it is "       \
                "written (jnp::Value x = x_ref[pl::ellipsis] * 2;), write the expression where " \
                "it is used (o = x_ref * 2 + 1;), or, in a function that takes an expression "   \
                "and uses it at once, pass it on with std::forward / std::move")
