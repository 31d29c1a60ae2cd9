// File: tessera/control.h
//
// Control flow inside a kernel, spelled as Pallas kernels write it: `lax.fori_loop`,
// `lax.while_loop`, `lax.cond`, `pl.when`. Kernels run on the CPU as C++, so plain `for`/`if`
// work too; these forms exist so that a Pallas kernel ports line by line, carrying values
// through the loop as Pallas does.
//
//   Pallas                                           Tessera
//   acc = lax.fori_loop(0, n, body, acc0)            auto acc = lax::fori_loop(0, n, body, acc0);
//     def body(i, acc): return acc + x_ref[i]          [&](int i, jnp::Value<float> acc) {
//                                                         return acc + x_ref[i]; }
//   m, l = lax.fori_loop(0, n, body, (m0, l0))       auto [m, l] = lax::fori_loop(0, n, body,
//                                                                     std::tuple{m0, l0});
//   @pl.when(i == 0)                                 pl::when(i == 0, [&] { ... });
//   def _(): ...                                     pl::when(i == 0)([&] { ... });
//   y = lax.cond(p, f, g, x)                         auto y = lax::cond(p, f, g, x);
//
// The carry: a jnp::Value (an expression returned by the body is computed into a new value of
// the carry's dtype; the old one is released), a C++ scalar, or a std::tuple of them. An initial
// carry that is an expression becomes a value first. A condition is a bool, or a one-element
// expression or value (converted as `if` would; more elements are kInvalidArgument).
#pragma once

#include <cstdint>
#include <tuple>
#include <type_traits>
#include <utility>

#include "tessera/value.h"
#include "tessera/vector_ops.h"

namespace tessera {
namespace detail {

template <class T>
inline constexpr bool is_tuple_v = false;
template <class... Ts>
inline constexpr bool is_tuple_v<std::tuple<Ts...>> = true;

/// The type a loop carries for an initial value of type X: an expression becomes a value of
/// its dtype, a value, scalar or tuple of them stays what it is.
template <class X>
struct CarryOf {
  using type = X;
};
template <class X>
requires(is_expr_v<X> && !is_value_v<X>) struct CarryOf<X> {
  using type = jnp::Value<ValueOf<X>>;
};
template <class... Xs>
struct CarryOf<std::tuple<Xs...>> {
  using type = std::tuple<typename CarryOf<std::remove_cvref_t<Xs>>::type...>;
};
template <class X>
using CarryT = typename CarryOf<std::remove_cvref_t<X>>::type;

/// `x` as a carry of type C: a value is computed from an expression, a scalar converted, a tuple
/// converted element by element.
template <class C, class X>
C to_carry(X&& x) {
  if constexpr (is_tuple_v<C>) {
    return [&]<size_t... I>(std::index_sequence<I...>) {
      return C{to_carry<std::tuple_element_t<I, C>>(std::get<I>(std::forward<X>(x)))...};
    }
    (std::make_index_sequence<std::tuple_size_v<C>>{});
  } else {
    return C(std::forward<X>(x));
  }
}

/// A condition as a C++ bool: a bool (or any scalar) as it is, an expression or value through
/// its one element.
template <class P>
bool truth(P&& p) {
  if constexpr (is_expr_v<std::remove_cvref_t<P>>) {
    return static_cast<bool>(std::forward<P>(p).item());
  } else {
    return static_cast<bool>(p);
  }
}

}  // namespace detail

namespace lax {

/// `lax.fori_loop(lower, upper, body_fun, init_val)`: carry = body_fun(i, carry) for i from
/// lower up to upper - 1; returns the last carry (init_val when the range is empty). `unroll`
/// is accepted for porting and does nothing (the CPU's compiler unrolls C++ loops).
template <class I, class Body, class Init>
requires std::is_integral_v<I>
auto fori_loop(I lower, I upper, Body&& body_fun, Init&& init_val, int unroll = 1) {
  (void)unroll;
  using C = detail::CarryT<Init>;
  C carry = detail::to_carry<C>(std::forward<Init>(init_val));
  for (I i = lower; i < upper; ++i) {
    C next = detail::to_carry<C>(body_fun(i, static_cast<const C&>(carry)));
    carry = std::move(next);
  }
  return carry;
}

/// `lax.while_loop(cond_fun, body_fun, init_val)`: carry = body_fun(carry) while
/// cond_fun(carry) holds.
template <class Cond, class Body, class Init>
auto while_loop(Cond&& cond_fun, Body&& body_fun, Init&& init_val) {
  using C = detail::CarryT<Init>;
  C carry = detail::to_carry<C>(std::forward<Init>(init_val));
  while (detail::truth(cond_fun(static_cast<const C&>(carry)))) {
    C next = detail::to_carry<C>(body_fun(static_cast<const C&>(carry)));
    carry = std::move(next);
  }
  return carry;
}

/// `lax.cond(pred, true_fun, false_fun, *operands)`: one branch, called with the operands. The
/// branches' results (values, expressions, scalars, tuples, or nothing) become the carry type of
/// the true branch's result.
template <class P, class T, class F, class... Ops>
auto cond(P&& pred, T&& true_fun, F&& false_fun, Ops&&... operands) {
  using R = decltype(true_fun(operands...));
  if constexpr (std::is_void_v<R>) {
    if (detail::truth(std::forward<P>(pred))) {
      true_fun(operands...);
    } else {
      false_fun(operands...);
    }
  } else {
    using C = detail::CarryT<R>;
    if (detail::truth(std::forward<P>(pred))) return detail::to_carry<C>(true_fun(operands...));
    return detail::to_carry<C>(false_fun(operands...));
  }
}

}  // namespace lax

namespace pl {

/// `pl.when(condition)`: runs a function when the condition holds, as the decorator does:
/// `pl::when(c)([&] { ... });` or `pl::when(c, [&] { ... });`.
class When {
 public:
  explicit When(bool on) noexcept : on_(on) {}
  template <class F>
  void operator()(F&& f) const {
    if (on_) f();
  }

 private:
  bool on_;
};
template <class P>
When when(P&& condition) {
  return When(detail::truth(std::forward<P>(condition)));
}
template <class P, class F>
void when(P&& condition, F&& f) {
  if (detail::truth(std::forward<P>(condition))) f();
}

}  // namespace pl

}  // namespace tessera
