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

/// Base of every expression-template node (vector_ops.h).
struct ExprBase {};
template <class E>
inline constexpr bool is_expr_v = std::is_base_of_v<ExprBase, E>;

/// A C++ arithmetic scalar (weakly typed).
template <class S>
inline constexpr bool is_scalar_v = std::is_arithmetic_v<S> || is_narrow_float_v<S>;

/// A ref or an elementwise-capable expression: something an operator can take.
template <class X>
concept Operand = is_ref_v<std::remove_cvref_t<X>> || is_expr_v<std::remove_cvref_t<X>>;
/// A C++ scalar operand (weakly typed, like a Python scalar).
template <class X>
concept Scalar = is_scalar_v<std::remove_cvref_t<X>> && !Operand<X>;

}  // namespace detail
}  // namespace tessera
