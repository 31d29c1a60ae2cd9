// Internal: the parameter list of a callable, for the compile-time checks of kernel bodies and
// index maps. Known for lambdas and function objects with one non-template operator() (const or
// not, noexcept or not) and for function pointers; generic lambdas are not known (their
// parameters are decided by the call). `mutable_call` is true for a non-const operator() (a
// `mutable` lambda): kernel bodies and index maps run on every core at once, so they refuse one.
#pragma once

#include <tuple>
#include <type_traits>

namespace tessera::detail {

template <class F>
struct CallableTraits {
  static constexpr bool known = false;
};

template <class F>
requires requires { &F::operator(); }
struct CallableTraits<F> : CallableTraits<decltype(&F::operator())> {};

template <class R, class... P>
struct CallableTraits<R (*)(P...)> {
  static constexpr bool known = true;
  using params = std::tuple<P...>;                       // as declared
  using values = std::tuple<std::remove_cvref_t<P>...>;  // without references and cv
  static constexpr bool mutable_call = false;
};
template <class R, class... P>
struct CallableTraits<R (*)(P...) noexcept> : CallableTraits<R (*)(P...)> {};
template <class R, class... P>
struct CallableTraits<R(P...)> : CallableTraits<R (*)(P...)> {};
template <class R, class... P>
struct MutableCall : CallableTraits<R (*)(P...)> {
  static constexpr bool mutable_call = true;
};
template <class C, class R, class... P>
struct CallableTraits<R (C::*)(P...)> : MutableCall<R, P...> {};
template <class C, class R, class... P>
struct CallableTraits<R (C::*)(P...) const> : CallableTraits<R (*)(P...)> {};
template <class C, class R, class... P>
struct CallableTraits<R (C::*)(P...) noexcept> : MutableCall<R, P...> {};
template <class C, class R, class... P>
struct CallableTraits<R (C::*)(P...) const noexcept> : CallableTraits<R (*)(P...)> {};

}  // namespace tessera::detail
