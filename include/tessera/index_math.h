// File: tessera/index_math.h
//
// Integer helpers of Pallas for grid sizes, index maps and kernel bodies.
//
//   Pallas                                      Tessera
//   grid = (pl.cdiv(n, 128),)                   pltpu::grid({pl::cdiv(n, 128)})
//   i = pl.multiple_of(i * 128, 128)            const int64_t i = pl::multiple_of(j * 128, 128);
//   x_ref[pl.ds(pl.multiple_of(s, 8), 8)]       x_ref.at(pl::ds(pl::multiple_of(s, 8), 8))
//
// `pl::cdiv(a, b)` is the ceiling of a / b for b > 0 (Python's `(a + b - 1) // b`, so a negative
// a rounds toward minus infinity as there). `pl::multiple_of(x, n)` returns x: on a TPU it tells
// Mosaic that x is a multiple of n, and a false hint there silently miscompiles, so Tessera
// checks it and raises kInvalidArgument (KernelError in a kernel, UsageError outside) when x is
// not a multiple of n. Both raise for b, n <= 0, and cdiv on overflow.
#pragma once

#include <cstdint>
#include <source_location>
#include <type_traits>

#include "tessera/ref.h"

namespace tessera {
namespace detail {
[[noreturn]] void raise_cdiv(int64_t a, int64_t b, std::source_location where);
[[noreturn]] void raise_multiple_of(int64_t x, int64_t n, std::source_location where);
}  // namespace detail

namespace pl {

/// `pl.cdiv(a, b)`: ceil(a / b) for b > 0, as int64_t.
template <class A, class B>
requires detail::IndexValue<A> && detail::IndexValue<B>
constexpr int64_t cdiv(A a, B b, std::source_location where = std::source_location::current()) {
  const auto x = static_cast<int64_t>(a);
  const auto y = static_cast<int64_t>(b);
  int64_t s = 0;
  if (y <= 0 || __builtin_add_overflow(x, y - 1, &s)) detail::raise_cdiv(x, y, where);
  const int64_t q = s / y;
  return (s % y != 0 && s < 0) ? q - 1 : q;  // Python's floor division
}

/// `pl.multiple_of(x, n)`: x itself, after checking that it is a multiple of n (see the file
/// comment). Works on an element of an SMEM ref too (`pl::multiple_of(s_ref(i), 8)`).
template <class I>
requires detail::IndexValue<I>
constexpr auto multiple_of(I x, int64_t n,
                           std::source_location where = std::source_location::current()) {
  const auto v = static_cast<int64_t>(x);
  if (n <= 0 || v % n != 0) detail::raise_multiple_of(v, n, where);
  if constexpr (std::is_integral_v<I>) {
    return x;
  } else {
    return static_cast<typename I::value_type>(v);
  }
}

}  // namespace pl
}  // namespace tessera
