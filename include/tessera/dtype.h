// File: tessera/dtype.h
//
// Element types. Pallas kernels name dtypes as `jnp.float32`, `jnp.bfloat16`,
// `jnp.int32`, `jnp.int8` and `jnp.bool_`; Tessera uses the C++ types
// `float`, `tessera::bfloat16`, `int32_t`, `int8_t` and `bool`, and the runtime
// tag `tessera::DType` where a type has to be carried as a value.
//
//   tessera::bfloat16 h = 1.1f;        // rounds to nearest even: 1.1015625
//   float f = h;                       // exact widening
//   static_assert(tessera::dtype_of<tessera::bfloat16> == tessera::DType::kBFloat16);
//   tessera::dtype_name(tessera::DType::kInt8);   // "int8"
#pragma once

#include <cstdint>
#include <cstring>
#include <type_traits>

namespace tessera {

/// The brain floating-point format: 1 sign bit, 8 exponent bits, 7 mantissa bits.
/// Conversion from float rounds to nearest, ties to even; NaN stays NaN (quiet).
/// Conversion to float is exact. Arithmetic operators widen to float.
struct bfloat16 {
  uint16_t bits = 0;

  constexpr bfloat16() = default;
  /// Rounds `f` to the nearest bfloat16 (ties to even).
  bfloat16(float f) noexcept : bits(round_bits(f)) {}  // NOLINT: implicit like jnp.bfloat16(x)
  /// Builds a value from its raw 16 bits.
  static constexpr bfloat16 from_bits(uint16_t b) noexcept {
    bfloat16 h;
    h.bits = b;
    return h;
  }
  /// Exact widening to float.
  operator float() const noexcept {  // NOLINT: implicit widening, like numpy
    const uint32_t u = static_cast<uint32_t>(bits) << 16;
    float f;
    std::memcpy(&f, &u, sizeof f);
    return f;
  }

  /// Round-to-nearest-even of a float's bit pattern to the upper 16 bits.
  static uint16_t round_bits(float f) noexcept {
    uint32_t u;
    std::memcpy(&u, &f, sizeof u);
    if ((u & 0x7f800000u) == 0x7f800000u && (u & 0x007fffffu) != 0) {
      return static_cast<uint16_t>((u >> 16) | 0x0040u);  // NaN: keep sign, force quiet
    }
    const uint32_t lsb = (u >> 16) & 1u;
    u += 0x7fffu + lsb;
    return static_cast<uint16_t>(u >> 16);
  }
};

static_assert(sizeof(bfloat16) == 2, "bfloat16 must be 2 bytes");

/// Runtime tag for the element types Tessera supports.
enum class DType : uint8_t { kFloat32, kBFloat16, kInt32, kInt8, kBool };

namespace detail {
template <class T>
struct DTypeOf {
  static_assert(sizeof(T) == 0,
                "tessera: unsupported element type; use float, tessera::bfloat16, int32_t, "
                "int8_t or bool");
};
template <>
struct DTypeOf<float> {
  static constexpr DType value = DType::kFloat32;
};
template <>
struct DTypeOf<bfloat16> {
  static constexpr DType value = DType::kBFloat16;
};
template <>
struct DTypeOf<int32_t> {
  static constexpr DType value = DType::kInt32;
};
template <>
struct DTypeOf<int8_t> {
  static constexpr DType value = DType::kInt8;
};
template <>
struct DTypeOf<bool> {
  static constexpr DType value = DType::kBool;
};
}  // namespace detail

/// True for the element types Tessera supports (cv-qualifiers ignored).
template <class T>
inline constexpr bool is_element_type_v =
    std::is_same_v<std::remove_cv_t<T>, float> || std::is_same_v<std::remove_cv_t<T>, bfloat16> ||
    std::is_same_v<std::remove_cv_t<T>, int32_t> || std::is_same_v<std::remove_cv_t<T>, int8_t> ||
    std::is_same_v<std::remove_cv_t<T>, bool>;

/// The DType of a C++ element type (cv-qualifiers ignored).
template <class T>
inline constexpr DType dtype_of = detail::DTypeOf<std::remove_cv_t<T>>::value;

/// Bytes per element.
constexpr int itemsize(DType d) noexcept {
  switch (d) {
    case DType::kFloat32:
    case DType::kInt32:
      return 4;
    case DType::kBFloat16:
      return 2;
    case DType::kInt8:
    case DType::kBool:
      return 1;
  }
  return 0;
}

/// numpy's name for a dtype: "float32", "bfloat16", "int32", "int8", "bool".
const char* dtype_name(DType d) noexcept;

/// True for float32 and bfloat16.
constexpr bool is_floating(DType d) noexcept {
  return d == DType::kFloat32 || d == DType::kBFloat16;
}

}  // namespace tessera
