// Internal: conversions between float32 and the narrow binary floating-point formats of
// dtype.h (float16, float8_e4m3fn, float8_e5m2, float8_e4m3b11fnuz), bit for bit as ml_dtypes
// and numpy convert: round to nearest, ties to even, with subnormals; NaN stays NaN (quiet, sign
// kept). A format with infinities overflows to infinity; a finite-only format (float8_e4m3fn,
// whose only non-finite patterns are the two NaNs S.1111.111) overflows to NaN, and infinity
// converts to NaN. An "fnuz" format (float8_e4m3b11fnuz: finite, no negative zero) has one NaN,
// the pattern of negative zero (1.0000.000), and every other pattern finite: NaN, infinity and
// overflow give that NaN whatever their sign, and a result that rounds to zero is +0. Conversion
// to float32 is exact. The native evaluator does the same per vector
// (src/native/vector_lanes-inl.h); tests/unit/dtype_test.cc checks both against ml_dtypes' bits.
#pragma once

#include <cstdint>
#include <cstring>
#include <type_traits>

namespace tessera::detail {

/// Which patterns of a narrow format are not finite.
enum class NarrowKind {
  kIeee,  // the all-ones exponent: infinities (zero mantissa) and NaNs
  kFn,    // finite only: all exponent and mantissa bits set is NaN (one per sign)
  kFnuz,  // finite only, unsigned zero: the sign bit alone is the one NaN
};

/// A binary format of `Bits` bits (1 sign, Bits - 1 - Man exponent, Man mantissa) with exponent
/// bias `Bias` and the special patterns of `Kind`.
template <int Bits, int Man, int Bias, NarrowKind Kind>
struct NarrowFormat {
  using storage = std::conditional_t<(Bits > 8), uint16_t, uint8_t>;
  static constexpr int kBits = Bits;
  static constexpr int kMan = Man;
  static constexpr int kBias = Bias;
  static constexpr bool kFiniteOnly = Kind != NarrowKind::kIeee;
  static constexpr bool kFnuz = Kind == NarrowKind::kFnuz;
  static constexpr int kExpBits = Bits - 1 - Man;
  static constexpr uint32_t kExpMax = (1u << kExpBits) - 1;  // the all-ones exponent field
  static constexpr uint32_t kManMask = (1u << Man) - 1;
  static constexpr int kEmin = 1 - Bias;  // the smallest normal exponent
  static constexpr uint32_t kSign = 1u << (Bits - 1);
  /// The largest finite value, as float32 bits.
  static constexpr uint32_t kMaxF32 =
      kFnuz         ? ((kExpMax - Bias + 127) << 23) | (kManMask << (23 - Man))
      : kFiniteOnly ? ((kExpMax - Bias + 127) << 23) | ((kManMask - 1) << (23 - Man))
                    : ((kExpMax - 1 - Bias + 127) << 23) | (kManMask << (23 - Man));
  /// The quiet NaN and the overflow value (without sign; an fnuz NaN is the sign bit itself).
  static constexpr uint32_t kNaN = kFnuz         ? kSign
                                   : kFiniteOnly ? (kExpMax << Man) | kManMask
                                                 : (kExpMax << Man) | (1u << (Man - 1));
  static constexpr uint32_t kOverflow = kFiniteOnly ? kNaN : kExpMax << Man;

  static constexpr uint32_t f32_bits(float f) noexcept { return __builtin_bit_cast(uint32_t, f); }
  static constexpr float f32(uint32_t u) noexcept { return __builtin_bit_cast(float, u); }

  /// float32 -> this format, rounding to nearest even.
  static constexpr storage from_float(float f) noexcept {
    const uint32_t u = f32_bits(f);
    const uint32_t sign = (u >> 31) != 0 ? kSign : 0u;
    const uint32_t a = u & 0x7fffffffu;
    if (a > 0x7f800000u) {  // NaN: quiet, keeping the payload's top bits where there is room
      const uint32_t payload = kFiniteOnly ? 0u : (a >> (23 - Man)) & kManMask;
      return static_cast<storage>(sign | kNaN | payload);
    }
    if (a < static_cast<uint32_t>(127 + kEmin) << 23) {
      // Below the smallest normal: a multiple of 2^(kEmin - Man), rounded half to even from
      // the float's integer significand.
      const uint32_t e = a >> 23;
      const uint32_t mant = e == 0 ? a : (a & 0x7fffffu) | 0x800000u;
      const int shift = 150 + kEmin - Man - static_cast<int>(e == 0 ? 1 : e);
      if (shift > 25) return static_cast<storage>(kFnuz ? 0u : sign);
      uint32_t q = mant >> shift;
      const uint32_t rem = mant & ((1u << shift) - 1);
      const uint32_t half = 1u << (shift - 1);
      if (rem > half || (rem == half && (q & 1u) != 0)) ++q;
      if (kFnuz && q == 0) return 0;          // no negative zero
      return static_cast<storage>(sign | q);  // q == 2^Man encodes the smallest normal
    }
    uint32_t r = a + ((1u << (22 - Man)) - 1) + ((a >> (23 - Man)) & 1u);
    r &= ~((1u << (23 - Man)) - 1);
    if (r > kMaxF32) return static_cast<storage>(sign | kOverflow);
    const uint32_t exp = (r >> 23) - 127 + Bias;
    return static_cast<storage>(sign | (exp << Man) | ((r >> (23 - Man)) & kManMask));
  }

  /// This format -> float32, exactly.
  static constexpr float to_float(storage b) noexcept {
    const uint32_t sign = (static_cast<uint32_t>(b) & kSign) != 0 ? 0x80000000u : 0u;
    const uint32_t e = (static_cast<uint32_t>(b) >> Man) & kExpMax;
    const uint32_t m = static_cast<uint32_t>(b) & kManMask;
    if (kFnuz && b == kSign) return f32(0xffc00000u);  // the NaN (negative, as ml_dtypes)
    if (Kind == NarrowKind::kFn && e == kExpMax && m == kManMask) return f32(sign | 0x7fc00000u);
    if (!kFiniteOnly && e == kExpMax) return f32(sign | 0x7f800000u | (m << (23 - Man)));
    if (e == 0) {  // subnormal: m * 2^(kEmin - Man), exact in float32
      const float v = static_cast<float>(m) * f32(static_cast<uint32_t>(127 + kEmin - Man) << 23);
      return sign != 0 ? -v : v;
    }
    return f32(sign | ((e - Bias + 127) << 23) | (m << (23 - Man)));
  }
};

using Float16Format = NarrowFormat<16, 10, 15, NarrowKind::kIeee>;
using Float8E4M3FNFormat = NarrowFormat<8, 3, 7, NarrowKind::kFn>;
using Float8E5M2Format = NarrowFormat<8, 2, 15, NarrowKind::kIeee>;
using Float8E4M3B11FNUZFormat = NarrowFormat<8, 3, 11, NarrowKind::kFnuz>;

}  // namespace tessera::detail
