// Internal: overflow-checked 64-bit arithmetic for every number a user hands Tessera (extents,
// element and byte counts, slice starts and strides, grid sizes). Each helper returns false when
// the exact result does not fit an int64_t, and never has undefined behaviour; callers turn a
// false into an error that names the value and the rule.
#pragma once

#include <cstdint>
#include <limits>

namespace tessera::detail {

/// *out = a * b; false (and *out unspecified) when the product overflows int64_t.
[[nodiscard]] constexpr bool checked_mul(int64_t a, int64_t b, int64_t* out) noexcept {
  return !__builtin_mul_overflow(a, b, out);
}
/// *out = a + b; false when the sum overflows int64_t.
[[nodiscard]] constexpr bool checked_add(int64_t a, int64_t b, int64_t* out) noexcept {
  return !__builtin_add_overflow(a, b, out);
}
/// *out = the product of [first, last) (1 when empty); false when it overflows int64_t. A zero
/// factor makes the product 0 even when the others alone would overflow.
[[nodiscard]] constexpr bool checked_product(const int64_t* first, const int64_t* last,
                                             int64_t* out) noexcept {
  int64_t n = 1;
  bool ok = true;
  for (const int64_t* p = first; p != last; ++p) {
    if (*p == 0) {
      *out = 0;
      return true;
    }
    ok = ok && checked_mul(n, *p, &n);
  }
  *out = n;
  return ok;
}
/// The product of [first, last), or INT64_MAX when it overflows: for counts of shapes Tessera has
/// already validated (which never overflow), computed without undefined behaviour either way.
constexpr int64_t saturating_product(const int64_t* first, const int64_t* last) noexcept {
  int64_t n = 0;
  return checked_product(first, last, &n) ? n : std::numeric_limits<int64_t>::max();
}

}  // namespace tessera::detail
