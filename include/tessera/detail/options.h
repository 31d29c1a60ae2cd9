// Internal: the option parser of the calls that take typed options in any order (pl::kernel,
// pl::pallas_call, pltpu::emit_pipeline). A call describes its options with a spec:
//
//   struct Spec {
//     template <class O> static constexpr bool accepts = ...;   // O is one of its options
//     template <class O> static constexpr void reject() {       // the message for any other O
//       static_assert(sizeof(O) == 0, "tessera: <call> options are ...");
//     }
//   };
//
// check_options<Spec, Opts...>() refuses, at compile time, an option the call does not take (with
// the call's message, which lists the options it takes) and an option given twice.
#pragma once

#include <type_traits>

namespace tessera::detail {

/// How many of Ts are T.
template <class T, class... Ts>
inline constexpr int count_v = (0 + ... + (std::is_same_v<T, Ts> ? 1 : 0));

template <class Spec, class O>
constexpr bool check_option() {
  if constexpr (!Spec::template accepts<O>) {
    Spec::template reject<O>();
    return false;
  } else {
    return true;
  }
}

/// True when every option is one `Spec` accepts, each at most once (a compile error otherwise).
template <class Spec, class... Opts>
constexpr bool check_options() {
  constexpr bool known = (check_option<Spec, Opts>() && ...);
  static_assert(((count_v<Opts, Opts...> == 1) && ...),
                "tessera: an option is given twice; give each option at most once");
  return known;
}

}  // namespace tessera::detail
