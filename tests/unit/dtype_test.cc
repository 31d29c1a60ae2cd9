// Element types: bfloat16 rounding and widening, the DType tag, itemsize and names.
#include "tessera/dtype.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <string>

namespace {
using tessera::bfloat16;
using tessera::DType;

float float_from_bits(uint32_t u) {
  float f;
  std::memcpy(&f, &u, sizeof f);
  return f;
}

uint32_t bits_of(float f) {
  uint32_t u;
  std::memcpy(&u, &f, sizeof u);
  return u;
}

uint16_t round_bits(uint32_t float_bits) { return bfloat16(float_from_bits(float_bits)).bits; }

TEST(DtypeBFloat16, ExactValuesConvertExactly) {
  EXPECT_EQ(bfloat16(0.0f).bits, 0x0000);
  EXPECT_EQ(bfloat16(1.0f).bits, 0x3F80);
  EXPECT_EQ(bfloat16(-1.0f).bits, 0xBF80);
  EXPECT_EQ(bfloat16(2.0f).bits, 0x4000);
  EXPECT_EQ(bfloat16(-1.5f).bits, 0xBFC0);
  EXPECT_EQ(bfloat16(0.5f).bits, 0x3F00);
  EXPECT_EQ(bfloat16(256.0f).bits, 0x4380);
  EXPECT_EQ(bfloat16(3.0f).bits, 0x4040);
  EXPECT_EQ(static_cast<float>(bfloat16(3.0f)), 3.0f);
  EXPECT_EQ(static_cast<float>(bfloat16(-0.375f)), -0.375f);
}

TEST(DtypeBFloat16, RoundsToNearest) {
  EXPECT_EQ(round_bits(0x3F807FFF), 0x3F80);  // just below half an ulp: down
  EXPECT_EQ(round_bits(0x3F808001), 0x3F81);  // just above half an ulp: up
  EXPECT_EQ(round_bits(0x3F80FFFF), 0x3F81);
  EXPECT_EQ(round_bits(0xBF808001), 0xBF81);  // negative values round by magnitude
  EXPECT_EQ(bfloat16(1.1f).bits, 0x3F8D);     // 1.1f -> 1.1015625
  EXPECT_EQ(static_cast<float>(bfloat16(1.1f)), 1.1015625f);
}

TEST(DtypeBFloat16, TiesRoundToEven) {
  EXPECT_EQ(round_bits(0x3F808000), 0x3F80);  // tie, 0x3F80 even: down
  EXPECT_EQ(round_bits(0x3F818000), 0x3F82);  // tie, 0x3F81 odd: up
  EXPECT_EQ(round_bits(0x3F828000), 0x3F82);
  EXPECT_EQ(round_bits(0x3F838000), 0x3F84);
  EXPECT_EQ(round_bits(0xBF808000), 0xBF80);
  EXPECT_EQ(round_bits(0xBF818000), 0xBF82);
}

TEST(DtypeBFloat16, CarryPropagatesIntoTheExponent) {
  EXPECT_EQ(round_bits(0x3FFF8000), 0x4000);  // 1.99609375 + half ulp (tie, odd) -> 2.0
  EXPECT_EQ(round_bits(0x3FFFC000), 0x4000);
  EXPECT_EQ(round_bits(0x3F7FFFFF), 0x3F80);  // largest float below 1 -> 1.0
  EXPECT_EQ(static_cast<float>(bfloat16(float_from_bits(0x3FFFFFFF))), 2.0f);
}

TEST(DtypeBFloat16, OverflowsToInfinity) {
  const float max_float = std::numeric_limits<float>::max();
  EXPECT_EQ(bfloat16(max_float).bits, 0x7F80);
  EXPECT_EQ(bfloat16(-max_float).bits, 0xFF80);
  EXPECT_EQ(round_bits(0x7F7F8000), 0x7F80);  // tie above the largest bfloat16 (odd): inf
  EXPECT_EQ(round_bits(0x7F7F7FFF), 0x7F7F);  // largest finite bfloat16 stays finite
  EXPECT_TRUE(std::isinf(static_cast<float>(bfloat16(max_float))));
}

TEST(DtypeBFloat16, InfinitiesStayInfinite) {
  EXPECT_EQ(bfloat16(std::numeric_limits<float>::infinity()).bits, 0x7F80);
  EXPECT_EQ(bfloat16(-std::numeric_limits<float>::infinity()).bits, 0xFF80);
}

TEST(DtypeBFloat16, NaNStaysNaNAndQuiet) {
  for (uint32_t nan_bits : {0x7FC00000u, 0x7F800001u, 0x7F80FFFFu, 0x7FFFFFFFu, 0x7FBFFFFFu,
                            0xFFC00000u, 0xFF800001u}) {
    const uint16_t b = round_bits(nan_bits);
    SCOPED_TRACE(nan_bits);
    EXPECT_EQ(b & 0x7F80u, 0x7F80u);                     // exponent all ones
    EXPECT_NE(b & 0x007Fu, 0u);                          // mantissa non-zero: NaN, not inf
    EXPECT_NE(b & 0x0040u, 0u);                          // quiet bit set
    EXPECT_EQ(b & 0x8000u, (nan_bits >> 16) & 0x8000u);  // sign kept
    EXPECT_TRUE(std::isnan(static_cast<float>(bfloat16::from_bits(b))));
  }
  EXPECT_EQ(bfloat16(std::numeric_limits<float>::quiet_NaN()).bits & 0x7FC0u, 0x7FC0u);
  // A signalling NaN whose payload lives only in the low 16 bits must not become infinity.
  EXPECT_EQ(round_bits(0x7F800001u), 0x7FC0);
}

TEST(DtypeBFloat16, NegativeZeroKeepsItsSign) {
  EXPECT_EQ(bfloat16(-0.0f).bits, 0x8000);
  EXPECT_TRUE(std::signbit(static_cast<float>(bfloat16(-0.0f))));
  EXPECT_EQ(static_cast<float>(bfloat16(-0.0f)), 0.0f);
  EXPECT_EQ(round_bits(0x80007FFF), 0x8000);  // tiny negative rounds to -0
}

TEST(DtypeBFloat16, Subnormals) {
  EXPECT_EQ(round_bits(0x00010000), 0x0001);  // smallest bfloat16 subnormal, exact
  EXPECT_EQ(round_bits(0x00008000), 0x0000);  // tie between 0 and the smallest: even (0)
  EXPECT_EQ(round_bits(0x00018000), 0x0002);  // tie, odd: up
  EXPECT_EQ(round_bits(0x00008001), 0x0001);
  EXPECT_EQ(round_bits(0x00000001), 0x0000);  // smallest float subnormal underflows to 0
  EXPECT_EQ(round_bits(0x80008001), 0x8001);
  EXPECT_EQ(round_bits(0x007FFFFF), 0x0080);  // largest float subnormal -> smallest normal
  EXPECT_EQ(static_cast<float>(bfloat16::from_bits(0x0001)), float_from_bits(0x00010000));
  EXPECT_GT(static_cast<float>(bfloat16::from_bits(0x0001)), 0.0f);
}

TEST(DtypeBFloat16, WideningIsExactForAllPatterns) {
  for (uint32_t b = 0; b <= 0xFFFF; ++b) {
    const bfloat16 h = bfloat16::from_bits(static_cast<uint16_t>(b));
    const float f = h;
    ASSERT_EQ(bits_of(f), b << 16) << "pattern " << b;
    if (std::isnan(f)) {
      // NaNs compare by bits: converting back keeps a quiet NaN of the same sign.
      const uint16_t back = bfloat16(f).bits;
      ASSERT_EQ(back, b | 0x0040u) << "pattern " << b;
      ASSERT_TRUE(std::isnan(static_cast<float>(bfloat16::from_bits(back))));
    } else {
      ASSERT_EQ(bfloat16(f).bits, b) << "pattern " << b;  // round trip
    }
  }
}

TEST(DtypeBFloat16, FromBitsAndDefault) {
  constexpr bfloat16 one = bfloat16::from_bits(0x3F80);
  static_assert(one.bits == 0x3F80);
  EXPECT_EQ(static_cast<float>(one), 1.0f);
  constexpr bfloat16 zero{};
  EXPECT_EQ(zero.bits, 0);
  static_assert(sizeof(bfloat16) == 2);
}

TEST(DtypeTag, DtypeOf) {
  static_assert(tessera::dtype_of<float> == DType::kFloat32);
  static_assert(tessera::dtype_of<bfloat16> == DType::kBFloat16);
  static_assert(tessera::dtype_of<int32_t> == DType::kInt32);
  static_assert(tessera::dtype_of<int8_t> == DType::kInt8);
  static_assert(tessera::dtype_of<bool> == DType::kBool);
  static_assert(tessera::dtype_of<const float> == DType::kFloat32);
  static_assert(tessera::dtype_of<const volatile int8_t> == DType::kInt8);
  static_assert(tessera::is_element_type_v<float>);
  static_assert(tessera::is_element_type_v<const bfloat16>);
  static_assert(!tessera::is_element_type_v<double>);
  static_assert(!tessera::is_element_type_v<int64_t>);
  static_assert(!tessera::is_element_type_v<uint64_t>);
  static_assert(!tessera::is_element_type_v<char>);
  static_assert(tessera::dtype_of<int16_t> == DType::kInt16);
  static_assert(tessera::dtype_of<uint8_t> == DType::kUInt8);
  static_assert(tessera::dtype_of<uint16_t> == DType::kUInt16);
  static_assert(tessera::dtype_of<const uint32_t> == DType::kUInt32);
  static_assert(tessera::dtype_of<tessera::float16> == DType::kFloat16);
  static_assert(tessera::dtype_of<tessera::float8_e4m3fn> == DType::kFloat8E4M3FN);
  static_assert(tessera::dtype_of<tessera::float8_e5m2> == DType::kFloat8E5M2);
  static_assert(tessera::dtype_of<tessera::float8_e4m3b11fnuz> == DType::kFloat8E4M3B11FNUZ);
  static_assert(std::is_same_v<tessera::dtype_type_t<DType::kFloat8E4M3B11FNUZ>,
                               tessera::float8_e4m3b11fnuz>);
  static_assert(tessera::is_narrow_float_v<const tessera::float8_e4m3b11fnuz>);
  static_assert(std::is_same_v<tessera::dtype_type_t<DType::kUInt16>, uint16_t>);
  static_assert(std::is_same_v<tessera::dtype_type_t<DType::kFloat8E5M2>, tessera::float8_e5m2>);
  SUCCEED();
}

TEST(DtypeTag, Itemsize) {
  static_assert(tessera::itemsize(DType::kFloat32) == 4);
  EXPECT_EQ(tessera::itemsize(DType::kFloat32), 4);
  EXPECT_EQ(tessera::itemsize(DType::kBFloat16), 2);
  EXPECT_EQ(tessera::itemsize(DType::kInt32), 4);
  EXPECT_EQ(tessera::itemsize(DType::kInt8), 1);
  EXPECT_EQ(tessera::itemsize(DType::kBool), 1);
  EXPECT_EQ(tessera::itemsize(tessera::dtype_of<bfloat16>), static_cast<int>(sizeof(bfloat16)));
  EXPECT_EQ(tessera::itemsize(DType::kInt16), 2);
  EXPECT_EQ(tessera::itemsize(DType::kUInt8), 1);
  EXPECT_EQ(tessera::itemsize(DType::kUInt16), 2);
  EXPECT_EQ(tessera::itemsize(DType::kUInt32), 4);
  EXPECT_EQ(tessera::itemsize(DType::kFloat16), 2);
  EXPECT_EQ(tessera::itemsize(DType::kFloat8E4M3FN), 1);
  EXPECT_EQ(tessera::itemsize(DType::kFloat8E5M2), 1);
  EXPECT_EQ(tessera::itemsize(DType::kFloat8E4M3B11FNUZ), 1);
}

TEST(DtypeTag, IsFloating) {
  EXPECT_TRUE(tessera::is_floating(DType::kFloat32));
  EXPECT_TRUE(tessera::is_floating(DType::kBFloat16));
  EXPECT_FALSE(tessera::is_floating(DType::kInt32));
  EXPECT_FALSE(tessera::is_floating(DType::kInt8));
  EXPECT_FALSE(tessera::is_floating(DType::kBool));
  EXPECT_TRUE(tessera::is_floating(DType::kFloat16));
  EXPECT_TRUE(tessera::is_floating(DType::kFloat8E4M3FN));
  EXPECT_TRUE(tessera::is_floating(DType::kFloat8E5M2));
  EXPECT_TRUE(tessera::is_floating(DType::kFloat8E4M3B11FNUZ));
  EXPECT_TRUE(tessera::is_float8(DType::kFloat8E4M3B11FNUZ));
  EXPECT_FALSE(tessera::is_float8(DType::kBFloat16));
  EXPECT_FALSE(tessera::is_floating(DType::kUInt32));
  EXPECT_TRUE(tessera::is_unsigned(DType::kUInt8));
  EXPECT_TRUE(tessera::is_unsigned(DType::kUInt32));
  EXPECT_FALSE(tessera::is_unsigned(DType::kInt16));
  EXPECT_FALSE(tessera::is_unsigned(DType::kBool));
}

TEST(DtypeTag, Names) {
  EXPECT_STREQ(tessera::dtype_name(DType::kFloat32), "float32");
  EXPECT_STREQ(tessera::dtype_name(DType::kBFloat16), "bfloat16");
  EXPECT_STREQ(tessera::dtype_name(DType::kInt32), "int32");
  EXPECT_STREQ(tessera::dtype_name(DType::kInt8), "int8");
  EXPECT_STREQ(tessera::dtype_name(DType::kBool), "bool");
  EXPECT_STREQ(tessera::dtype_name(DType::kInt16), "int16");
  EXPECT_STREQ(tessera::dtype_name(DType::kUInt8), "uint8");
  EXPECT_STREQ(tessera::dtype_name(DType::kUInt16), "uint16");
  EXPECT_STREQ(tessera::dtype_name(DType::kUInt32), "uint32");
  EXPECT_STREQ(tessera::dtype_name(DType::kFloat16), "float16");
  EXPECT_STREQ(tessera::dtype_name(DType::kFloat8E4M3FN), "float8_e4m3fn");
  EXPECT_STREQ(tessera::dtype_name(DType::kFloat8E5M2), "float8_e5m2");
  EXPECT_STREQ(tessera::dtype_name(DType::kFloat8E4M3B11FNUZ), "float8_e4m3b11fnuz");
}

}  // namespace
