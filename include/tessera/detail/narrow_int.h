// Internal: the storage types of the sub-byte integer dtypes of dtype.h (int4, uint4, int2,
// uint2), one element per byte as ml_dtypes stores them: the byte holds the value's low `Bits`
// bits and zeros above (int4's -1 is the byte 0x0f), so host arrays, refs, strides and DMAs stay
// byte-addressed. Conversions are jax.numpy's astype: from an integer the value wraps (its low
// bits, two's complement); from a float it truncates toward zero and saturates to the range, NaN
// giving 0 (XLA's convert, which jnp uses). Reading gives an `int`, so arithmetic on these C++
// values is int arithmetic and a result stored back wraps.
#pragma once

#include <cmath>
#include <cstdint>
#include <limits>
#include <type_traits>

namespace tessera::detail {

template <int Bits, bool Signed, class Self>
struct NarrowInt {
  static_assert(Bits > 0 && Bits < 8, "a sub-byte integer has 1 to 7 bits");
  using storage = uint8_t;
  static constexpr int kBits = Bits;
  static constexpr bool kSigned = Signed;
  static constexpr int kMin = Signed ? -(1 << (Bits - 1)) : 0;
  static constexpr int kMax = Signed ? (1 << (Bits - 1)) - 1 : (1 << Bits) - 1;
  static constexpr uint8_t kMask = static_cast<uint8_t>((1u << Bits) - 1u);

  /// The low `Bits` bits of the value; the upper bits of the byte are zero.
  storage bits = 0;

  constexpr NarrowInt() = default;
  /// Wraps an integer to the type (its low bits), like jnp.asarray(v).astype(int4).
  template <class U>
  requires std::is_integral_v<U>
  constexpr NarrowInt(U v) noexcept  // NOLINT: implicit like int8
      : bits(static_cast<uint8_t>(static_cast<uint64_t>(v) & kMask)) {}
  /// Another sub-byte integer, wrapped to this type.
  template <int B2, bool S2, class O>
  explicit constexpr NarrowInt(NarrowInt<B2, S2, O> v) noexcept : NarrowInt(static_cast<int>(v)) {}
  /// A float truncated toward zero and saturated to [kMin, kMax]; NaN gives 0.
  template <class U>
  requires(!std::is_integral_v<U> && !requires { U::kBits; } &&
           std::is_convertible_v<const U&, float>) explicit constexpr NarrowInt(U v) noexcept
      : NarrowInt(saturate(to_double(v))) {}

  /// Builds a value from its raw byte (only the low `Bits` bits are kept).
  static constexpr Self from_bits(storage b) noexcept {
    Self v;
    v.bits = static_cast<uint8_t>(b & kMask);
    return v;
  }
  /// The value (sign-extended for the signed types).
  constexpr operator int() const noexcept {  // NOLINT: implicit widening, like numpy
    if constexpr (Signed) {
      return (bits & (1u << (Bits - 1))) != 0 ? static_cast<int>(bits) - (1 << Bits)
                                              : static_cast<int>(bits);
    } else {
      return bits;
    }
  }

 private:
  template <class U>
  static constexpr double to_double(U v) noexcept {
    if constexpr (std::is_floating_point_v<U>) {
      return static_cast<double>(v);
    } else {
      return static_cast<double>(static_cast<float>(v));  // bfloat16, float16, float8s
    }
  }
  static constexpr int saturate(double v) noexcept {
    if (v != v) return 0;  // NaN
    if (v <= kMin) return kMin;
    if (v >= kMax) return kMax;
    return static_cast<int>(v);  // truncates toward zero
  }
};

/// std::numeric_limits for a sub-byte integer type (the members generic code reads).
template <class T>
struct NarrowIntLimits {
  static constexpr bool is_specialized = true;
  static constexpr bool is_signed = T::kSigned;
  static constexpr bool is_integer = true;
  static constexpr bool is_exact = true;
  static constexpr bool is_bounded = true;
  static constexpr bool is_modulo = !T::kSigned;
  static constexpr int digits = T::kSigned ? T::kBits - 1 : T::kBits;
  static constexpr int radix = 2;
  static constexpr T min() noexcept { return T(T::kMin); }
  static constexpr T lowest() noexcept { return T(T::kMin); }
  static constexpr T max() noexcept { return T(T::kMax); }
};

}  // namespace tessera::detail
