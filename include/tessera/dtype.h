// File: tessera/dtype.h
//
// Element types. Pallas kernels name dtypes as `jnp.float32`, `jnp.bfloat16`, `jnp.float16`,
// `jnp.float8_e4m3fn`, `jnp.float8_e5m2`, `jnp.float8_e4m3b11fnuz`, `jnp.int32`, `jnp.int16`,
// `jnp.int8`, `jnp.int4`, `jnp.int2`, `jnp.uint32`, `jnp.uint16`, `jnp.uint8`, `jnp.uint4`,
// `jnp.uint2` and `jnp.bool_`; Tessera uses the C++ types `float`, `tessera::bfloat16`,
// `tessera::float16`, `tessera::float8_e4m3fn`, `tessera::float8_e5m2`,
// `tessera::float8_e4m3b11fnuz`, `int32_t`, `int16_t`, `int8_t`, `tessera::int4`,
// `tessera::int2`, `uint32_t`, `uint16_t`, `uint8_t`, `tessera::uint4`, `tessera::uint2` and
// `bool`, and the runtime tag `tessera::DType` where a type has to be carried as a value.
//
//   tessera::bfloat16 h = 1.1f;        // rounds to nearest even: 1.1015625
//   float f = h;                       // exact widening
//   tessera::float8_e4m3fn q = 500.0f; // above the largest finite (448): NaN, as ml_dtypes
//   static_assert(tessera::dtype_of<tessera::bfloat16> == tessera::DType::kBFloat16);
//   tessera::dtype_name(tessera::DType::kInt8);   // "int8"
//   tessera::int4 i = 9;               // wraps, as astype: -7 (one element per byte)
#pragma once

#include <cstdint>
#include <cstring>
#include <limits>
#include <type_traits>

#include "tessera/detail/narrow_float.h"
#include "tessera/detail/narrow_int.h"

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

namespace detail {
/// A storage type of a narrow float format (detail/narrow_float.h): conversion from float
/// rounds to nearest even (see Format for overflow and NaN), conversion to float is exact, and
/// arithmetic operators widen to float.
template <class Format, class Self>
struct NarrowFloat {
  using storage = typename Format::storage;
  storage bits = 0;

  constexpr NarrowFloat() = default;
  /// Rounds `f` to the nearest value of the format (ties to even).
  constexpr NarrowFloat(float f) noexcept  // NOLINT: implicit like jnp.float16(x)
      : bits(Format::from_float(f)) {}
  /// Rounds a double once (through float rounded to odd, which keeps ties exact) or an
  /// integer (exact in float below 2^24, past every narrow format's range) likewise.
  template <class U>
  requires(std::is_arithmetic_v<U> && !std::is_same_v<U, float>) constexpr NarrowFloat(
      U v) noexcept  // NOLINT: implicit like jnp.float16(x)
      : bits(Format::from_float(to_float_odd(v))) {}
  /// Builds a value from its raw bits.
  static constexpr Self from_bits(storage b) noexcept {
    Self h;
    h.bits = b;
    return h;
  }
  /// Exact widening to float.
  constexpr operator float() const noexcept {  // NOLINT: implicit widening, like numpy
    return Format::to_float(bits);
  }

 private:
  template <class U>
  static constexpr float to_float_odd(U v) noexcept {
    const auto f = static_cast<float>(v);
    if constexpr (std::is_floating_point_v<U>) {
      // An inexact result gets an odd last bit (one step away from zero if it was even, where
      // the exact value lies), so the later rounding to the narrow format sees the tie or not
      // exactly as the double had it.
      auto u = __builtin_bit_cast(uint32_t, f);
      const bool finite = (u & 0x7f800000u) != 0x7f800000u;
      if (finite && static_cast<U>(f) != v && (u & 1u) == 0) {
        const bool away = (v < 0 ? -v : v) > static_cast<U>(f < 0 ? -f : f);
        u = away ? u + 1 : u - 1;
      }
      return __builtin_bit_cast(float, u);
    } else {
      return f;
    }
  }
};
}  // namespace detail

/// IEEE 754 binary16 (`jnp.float16`): 1 sign bit, 5 exponent bits, 10 mantissa bits, with
/// subnormals and infinities. Conversion from float rounds to nearest even (overflow gives
/// infinity); conversion to float is exact. The evaluator converts whole vectors with F16C
/// where the CPU has it.
struct float16 : detail::NarrowFloat<detail::Float16Format, float16> {
  using NarrowFloat::NarrowFloat;
};
/// `jnp.float8_e4m3fn` (ml_dtypes): 1 sign bit, 4 exponent bits (bias 7), 3 mantissa bits;
/// finite only: the largest value is 448, S.1111.111 is NaN, and overflow or infinity converts
/// to NaN (ml_dtypes' non-saturating conversion).
struct float8_e4m3fn : detail::NarrowFloat<detail::Float8E4M3FNFormat, float8_e4m3fn> {
  using NarrowFloat::NarrowFloat;
};
/// `jnp.float8_e5m2` (ml_dtypes): 1 sign bit, 5 exponent bits (bias 15), 2 mantissa bits;
/// IEEE-like, with infinities (the largest finite value is 57344).
struct float8_e5m2 : detail::NarrowFloat<detail::Float8E5M2Format, float8_e5m2> {
  using NarrowFloat::NarrowFloat;
};
/// `jnp.float8_e4m3b11fnuz` (ml_dtypes): 1 sign bit, 4 exponent bits (bias 11), 3 mantissa
/// bits; finite only with no negative zero: the largest value is 30, the smallest subnormal
/// 2^-13, the one NaN is 0x80 (negative zero's pattern), and NaN, infinity and overflow convert
/// to it whatever their sign, while a negative value that rounds to zero gives +0.
struct float8_e4m3b11fnuz
    : detail::NarrowFloat<detail::Float8E4M3B11FNUZFormat, float8_e4m3b11fnuz> {
  using NarrowFloat::NarrowFloat;
};
static_assert(sizeof(float16) == 2 && sizeof(float8_e4m3fn) == 1 && sizeof(float8_e5m2) == 1 &&
                  sizeof(float8_e4m3b11fnuz) == 1,
              "narrow float sizes");

/// `jnp.int4` (ml_dtypes): values -8..7, one per byte (the low 4 bits; detail/narrow_int.h).
/// From an integer it wraps, from a float it truncates and saturates (NaN: 0); reads as int.
struct int4 : detail::NarrowInt<4, true, int4> {
  using NarrowInt::NarrowInt;
};
/// `jnp.uint4` (ml_dtypes): values 0..15, one per byte; conversions as int4's.
struct uint4 : detail::NarrowInt<4, false, uint4> {
  using NarrowInt::NarrowInt;
};
/// `jnp.int2` (ml_dtypes): values -2..1, one per byte; conversions as int4's.
struct int2 : detail::NarrowInt<2, true, int2> {
  using NarrowInt::NarrowInt;
};
/// `jnp.uint2` (ml_dtypes): values 0..3, one per byte; conversions as int4's.
struct uint2 : detail::NarrowInt<2, false, uint2> {
  using NarrowInt::NarrowInt;
};
static_assert(sizeof(int4) == 1 && sizeof(uint4) == 1 && sizeof(int2) == 1 && sizeof(uint2) == 1,
              "sub-byte integers are stored one per byte");

/// Runtime tag for the element types Tessera supports (new tags are appended, so the values of
/// the older ones stay).
enum class DType : uint8_t {
  kFloat32,
  kBFloat16,
  kInt32,
  kInt8,
  kBool,
  kInt16,
  kUInt8,
  kUInt16,
  kUInt32,
  kFloat16,
  kFloat8E4M3FN,
  kFloat8E5M2,
  kFloat8E4M3B11FNUZ,
  kInt4,
  kUInt4,
  kInt2,
  kUInt2,
};

namespace detail {
template <class T>
struct DTypeOf {
  static_assert(sizeof(T) == 0,
                "tessera: unsupported element type; use float, tessera::bfloat16, "
                "tessera::float16, tessera::float8_e4m3fn, tessera::float8_e5m2, "
                "tessera::float8_e4m3b11fnuz, int32_t, int16_t, int8_t, tessera::int4, "
                "tessera::int2, uint32_t, uint16_t, uint8_t, tessera::uint4, tessera::uint2 or "
                "bool");
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
template <>
struct DTypeOf<int16_t> {
  static constexpr DType value = DType::kInt16;
};
template <>
struct DTypeOf<uint8_t> {
  static constexpr DType value = DType::kUInt8;
};
template <>
struct DTypeOf<uint16_t> {
  static constexpr DType value = DType::kUInt16;
};
template <>
struct DTypeOf<uint32_t> {
  static constexpr DType value = DType::kUInt32;
};
template <>
struct DTypeOf<float16> {
  static constexpr DType value = DType::kFloat16;
};
template <>
struct DTypeOf<float8_e4m3fn> {
  static constexpr DType value = DType::kFloat8E4M3FN;
};
template <>
struct DTypeOf<float8_e5m2> {
  static constexpr DType value = DType::kFloat8E5M2;
};
template <>
struct DTypeOf<float8_e4m3b11fnuz> {
  static constexpr DType value = DType::kFloat8E4M3B11FNUZ;
};
template <>
struct DTypeOf<int4> {
  static constexpr DType value = DType::kInt4;
};
template <>
struct DTypeOf<uint4> {
  static constexpr DType value = DType::kUInt4;
};
template <>
struct DTypeOf<int2> {
  static constexpr DType value = DType::kInt2;
};
template <>
struct DTypeOf<uint2> {
  static constexpr DType value = DType::kUInt2;
};

/// The C++ element type of a DType.
template <DType D>
struct TypeOf;
template <>
struct TypeOf<DType::kFloat32> {
  using type = float;
};
template <>
struct TypeOf<DType::kBFloat16> {
  using type = bfloat16;
};
template <>
struct TypeOf<DType::kInt32> {
  using type = int32_t;
};
template <>
struct TypeOf<DType::kInt8> {
  using type = int8_t;
};
template <>
struct TypeOf<DType::kBool> {
  using type = bool;
};
template <>
struct TypeOf<DType::kInt16> {
  using type = int16_t;
};
template <>
struct TypeOf<DType::kUInt8> {
  using type = uint8_t;
};
template <>
struct TypeOf<DType::kUInt16> {
  using type = uint16_t;
};
template <>
struct TypeOf<DType::kUInt32> {
  using type = uint32_t;
};
template <>
struct TypeOf<DType::kFloat16> {
  using type = float16;
};
template <>
struct TypeOf<DType::kFloat8E4M3FN> {
  using type = float8_e4m3fn;
};
template <>
struct TypeOf<DType::kFloat8E5M2> {
  using type = float8_e5m2;
};
template <>
struct TypeOf<DType::kFloat8E4M3B11FNUZ> {
  using type = float8_e4m3b11fnuz;
};
template <>
struct TypeOf<DType::kInt4> {
  using type = int4;
};
template <>
struct TypeOf<DType::kUInt4> {
  using type = uint4;
};
template <>
struct TypeOf<DType::kInt2> {
  using type = int2;
};
template <>
struct TypeOf<DType::kUInt2> {
  using type = uint2;
};

template <class T, class... Us>
inline constexpr bool is_one_of_v = (std::is_same_v<T, Us> || ...);
}  // namespace detail

/// True for the element types Tessera supports (cv-qualifiers ignored).
template <class T>
inline constexpr bool is_element_type_v =
    detail::is_one_of_v<std::remove_cv_t<T>, float, bfloat16, float16, float8_e4m3fn, float8_e5m2,
                        float8_e4m3b11fnuz, int32_t, int16_t, int8_t, int4, int2, uint32_t,
                        uint16_t, uint8_t, uint4, uint2, bool>;

/// True for the sub-byte integer types (int4, uint4, int2, uint2; cv-qualifiers ignored).
template <class T>
inline constexpr bool is_narrow_int_v =
    detail::is_one_of_v<std::remove_cv_t<T>, int4, uint4, int2, uint2>;

/// True for Tessera's floating storage types narrower than float (bfloat16, float16 and the
/// float8s): C++ scalars of these types are weakly typed floats, like a Python float.
template <class T>
inline constexpr bool is_narrow_float_v =
    detail::is_one_of_v<std::remove_cv_t<T>, bfloat16, float16, float8_e4m3fn, float8_e5m2,
                        float8_e4m3b11fnuz>;

/// The DType of a C++ element type (cv-qualifiers ignored).
template <class T>
inline constexpr DType dtype_of = detail::DTypeOf<std::remove_cv_t<T>>::value;

/// The C++ element type of a DType.
template <DType D>
using dtype_type_t = typename detail::TypeOf<D>::type;

/// Bytes per element.
constexpr int itemsize(DType d) noexcept {
  switch (d) {
    case DType::kFloat32:
    case DType::kInt32:
    case DType::kUInt32:
      return 4;
    case DType::kBFloat16:
    case DType::kFloat16:
    case DType::kInt16:
    case DType::kUInt16:
      return 2;
    case DType::kInt8:
    case DType::kUInt8:
    case DType::kBool:
    case DType::kFloat8E4M3FN:
    case DType::kFloat8E5M2:
    case DType::kFloat8E4M3B11FNUZ:
    case DType::kInt4:
    case DType::kUInt4:
    case DType::kInt2:
    case DType::kUInt2:
      return 1;  // sub-byte integers: one element per byte, as ml_dtypes stores them
  }
  return 0;
}

/// numpy's (and ml_dtypes') name for a dtype: "float32", "bfloat16", "float16",
/// "float8_e4m3fn", "float8_e5m2", "float8_e4m3b11fnuz", "int32", "int16", "int8", "int4", "int2",
/// "uint32", "uint16", "uint8", "uint4", "uint2", "bool".
const char* dtype_name(DType d) noexcept;

/// True for the 8-bit float dtypes, which jax.numpy never promotes implicitly.
constexpr bool is_float8(DType d) noexcept {
  return d == DType::kFloat8E4M3FN || d == DType::kFloat8E5M2 || d == DType::kFloat8E4M3B11FNUZ;
}

/// True for the floating dtypes: float32, bfloat16, float16 and the float8s.
constexpr bool is_floating(DType d) noexcept {
  return d == DType::kFloat32 || d == DType::kBFloat16 || d == DType::kFloat16 || is_float8(d);
}

/// True for the sub-byte integer dtypes (int4, uint4, int2, uint2), which jax.numpy never
/// promotes implicitly (they combine only with their own dtype, bool and Python ints).
constexpr bool is_narrow_int(DType d) noexcept {
  return d == DType::kInt4 || d == DType::kUInt4 || d == DType::kInt2 || d == DType::kUInt2;
}

/// True for the unsigned integer dtypes (uint2, uint4, uint8, uint16, uint32).
constexpr bool is_unsigned(DType d) noexcept {
  return d == DType::kUInt8 || d == DType::kUInt16 || d == DType::kUInt32 || d == DType::kUInt4 ||
         d == DType::kUInt2;
}

/// Bits of a dtype's values: 8 * itemsize, but 4 for int4/uint4 and 2 for int2/uint2 (bool
/// counts as 8, its byte).
constexpr int dtype_bits(DType d) noexcept {
  if (d == DType::kInt4 || d == DType::kUInt4) return 4;
  if (d == DType::kInt2 || d == DType::kUInt2) return 2;
  return 8 * itemsize(d);
}

/// Bits of an integer dtype's values (2, 4, 8, 16 or 32; bool counts as 8); 0 for the floating
/// dtypes.
constexpr int int_bits(DType d) noexcept { return is_floating(d) ? 0 : dtype_bits(d); }

}  // namespace tessera

template <>
struct std::numeric_limits<tessera::int4> : tessera::detail::NarrowIntLimits<tessera::int4> {};
template <>
struct std::numeric_limits<tessera::uint4> : tessera::detail::NarrowIntLimits<tessera::uint4> {};
template <>
struct std::numeric_limits<tessera::int2> : tessera::detail::NarrowIntLimits<tessera::int2> {};
template <>
struct std::numeric_limits<tessera::uint2> : tessera::detail::NarrowIntLimits<tessera::uint2> {};
