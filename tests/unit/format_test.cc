// Array text: the expected strings are what numpy's str() prints for the same values and dtype
// (numpy 2.3+, default print options).
#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <limits>
#include <string>
#include <vector>

#include "tessera/array.h"

namespace {
using namespace tessera;

constexpr float kNaN = std::numeric_limits<float>::quiet_NaN();
constexpr float kInf = std::numeric_limits<float>::infinity();

template <class T>
Array<T> arange(int64_t n, Shape shape = {}) {
  if (shape.rank() == 0) shape = Shape{n};
  std::vector<T> v;
  for (int64_t i = 0; i < n; ++i) v.push_back(static_cast<T>(i));
  return Array<T>(shape, v);
}

Array<bfloat16> bf16_array(std::initializer_list<float> values) {
  std::vector<bfloat16> v;
  for (float f : values) v.emplace_back(f);
  return tessera::array(v);
}

TEST(FormatTest, SummarisesLongArrays) {
  EXPECT_EQ(Array<float>({2000}, 42.0f).to_string(), "[42. 42. 42. ... 42. 42. 42.]");
  EXPECT_EQ(arange<int32_t>(1001).to_string(), "[   0    1    2 ...  998  999 1000]");
  // Exactly threshold elements are not summarised.
  const std::string full = arange<int32_t>(1000).to_string();
  EXPECT_EQ(full.find("..."), std::string::npos);
  EXPECT_EQ(full.substr(0, 8), "[  0   1");
}

TEST(FormatTest, WidthIsComputedOverTheShownItems) {
  EXPECT_EQ(arange<float>(128).to_string(PrintOptions{.threshold = 6}),
            "[  0.   1.   2. ... 125. 126. 127.]");
  // 10000 is not shown, so it does not widen the others.
  Array<float> a({2000}, 1.0f);
  a[1000] = 10000.0f;
  EXPECT_EQ(a.to_string(), "[1. 1. 1. ... 1. 1. 1.]");
}

TEST(FormatTest, EdgeItemsOption) {
  EXPECT_EQ(arange<int32_t>(10).to_string(PrintOptions{.threshold = 5, .edgeitems = 1}),
            "[0 ... 9]");
  EXPECT_EQ(arange<int32_t>(10).to_string(PrintOptions{.threshold = 5, .edgeitems = 5}),
            "[0 1 2 3 4 5 6 7 8 9]");  // no axis is longer than 2 * edgeitems
}

TEST(FormatTest, TwoDimensional) {
  EXPECT_EQ(Array<float>({2, 3}, {1, 2, 3, 4, 5, 6}).to_string(), "[[1. 2. 3.]\n [4. 5. 6.]]");
  EXPECT_EQ(arange<int32_t>(6, Shape{3, 2}).to_string(), "[[0 1]\n [2 3]\n [4 5]]");
  EXPECT_EQ(Array<float>(Shape{1, 1}).to_string(), "[[0.]]");
  EXPECT_EQ(arange<float>(4, Shape{4, 1}).to_string(), "[[0.]\n [1.]\n [2.]\n [3.]]");
}

TEST(FormatTest, ThreeDimensionalBlocksAreSeparatedByBlankLines) {
  EXPECT_EQ(arange<float>(8, Shape{2, 2, 2}).to_string(),
            "[[[0. 1.]\n  [2. 3.]]\n\n [[4. 5.]\n  [6. 7.]]]");
  EXPECT_EQ(arange<int32_t>(12, Shape{2, 3, 2}).to_string(),
            "[[[ 0  1]\n  [ 2  3]\n  [ 4  5]]\n\n [[ 6  7]\n  [ 8  9]\n  [10 11]]]");
  EXPECT_EQ(arange<int32_t>(4, Shape{2, 1, 1, 2}).to_string(), "[[[[0 1]]]\n\n\n [[[2 3]]]]");
}

TEST(FormatTest, SummarisedTwoDimensional) {
  const std::string row = "[0. 0. 0. ... 0. 0. 0.]";
  EXPECT_EQ(
      Array<float>(Shape{100, 100}).to_string(),
      "[" + row + "\n " + row + "\n " + row + "\n ...\n " + row + "\n " + row + "\n " + row + "]");
  EXPECT_EQ(
      arange<int32_t>(20, Shape{10, 2}).to_string(PrintOptions{.threshold = 4, .edgeitems = 1}),
      "[[ 0  1]\n ...\n [18 19]]");
}

TEST(FormatTest, SummarisedThreeDimensional) {
  EXPECT_EQ(Array<float>(Shape{7, 2, 2}).to_string(PrintOptions{.threshold = 10, .edgeitems = 1}),
            "[[[0. 0.]\n  [0. 0.]]\n\n ...\n\n [[0. 0.]\n  [0. 0.]]]");
}

TEST(FormatTest, WrapsLongRows) {
  EXPECT_EQ(arange<float>(30).to_string(),
            "[ 0.  1.  2.  3.  4.  5.  6.  7.  8.  9. 10. 11. 12. 13. 14. 15. 16. 17.\n"
            " 18. 19. 20. 21. 22. 23. 24. 25. 26. 27. 28. 29.]");
  EXPECT_EQ(arange<int32_t>(30).to_string(),
            "[ 0  1  2  3  4  5  6  7  8  9 10 11 12 13 14 15 16 17 18 19 20 21 22 23\n"
            " 24 25 26 27 28 29]");
  EXPECT_EQ(arange<int32_t>(10).to_string(PrintOptions{.linewidth = 20}),
            "[0 1 2 3 4 5 6 7 8\n 9]");
}

TEST(FormatTest, WrapsRowsInsideNestedArrays) {
  EXPECT_EQ(arange<float>(40, Shape{2, 20}).to_string(),
            "[[ 0.  1.  2.  3.  4.  5.  6.  7.  8.  9. 10. 11. 12. 13. 14. 15. 16. 17.\n"
            "  18. 19.]\n"
            " [20. 21. 22. 23. 24. 25. 26. 27. 28. 29. 30. 31. 32. 33. 34. 35. 36. 37.\n"
            "  38. 39.]]");
}

TEST(FormatTest, FloatsUseTheShortestRoundTripDigits) {
  EXPECT_EQ(tessera::array<float>({0.1f, 0.25f}).to_string(), "[0.1  0.25]");
  EXPECT_EQ(tessera::array<float>({1.5f, 100.0f}).to_string(), "[  1.5 100. ]");
  EXPECT_EQ(tessera::array<float>({0.5f, 10.25f, 100.125f}).to_string(),
            "[  0.5    10.25  100.125]");
  EXPECT_EQ(tessera::array<float>({1.0f / 3, 2.0f / 3}).to_string(), "[0.33333334 0.6666667 ]");
  EXPECT_EQ(tessera::array<float>({3.1415927f}).to_string(), "[3.1415927]");
  EXPECT_EQ(tessera::array<float>({0.1f, 0.2f, 0.3f}).to_string(), "[0.1 0.2 0.3]");
  EXPECT_EQ(tessera::array<float>({42.0f}).to_string(), "[42.]");
  EXPECT_EQ(Array<float>(Shape{3}).to_string(), "[0. 0. 0.]");
}

TEST(FormatTest, FloatsKeepAtMostEightFractionDigits) {
  EXPECT_EQ(tessera::array<float>({0.00012345678f, 0.1f}).to_string(), "[0.00012346 0.1       ]");
}

TEST(FormatTest, Negatives) {
  EXPECT_EQ(tessera::array<float>({-1.0f, 2.0f}).to_string(), "[-1.  2.]");
  EXPECT_EQ(tessera::array<float>({-1.5f, 2.0f}).to_string(), "[-1.5  2. ]");
  EXPECT_EQ(tessera::array<float>({-0.0f, 1.0f}).to_string(), "[-0.  1.]");
  EXPECT_EQ(tessera::array<float>({{-1, 2}, {3, -40}}).to_string(), "[[ -1.   2.]\n [  3. -40.]]");
}

TEST(FormatTest, NanAndInfinity) {
  EXPECT_EQ(tessera::array<float>({1.0f, kNaN}).to_string(), "[ 1. nan]");
  EXPECT_EQ(tessera::array<float>({1.0f, kInf}).to_string(), "[ 1. inf]");
  EXPECT_EQ(tessera::array<float>({kNaN, kInf}).to_string(), "[nan inf]");
  EXPECT_EQ(tessera::array<float>({kNaN, -kInf}).to_string(), "[ nan -inf]");
  EXPECT_EQ(tessera::array<float>({kNaN, kInf, -kInf, 1.5f}).to_string(), "[ nan  inf -inf  1.5]");
  EXPECT_EQ(tessera::array<float>({-kNaN}).to_string(), "[nan]");
  EXPECT_EQ(tessera::array<float>({0.5f, 100.0f, kNaN}).to_string(), "[  0.5 100.    nan]");
  EXPECT_EQ(tessera::array<float>({1e-5f, kInf}).to_string(), "[1.e-05    inf]");
}

TEST(FormatTest, ScientificNotation) {
  EXPECT_EQ(tessera::array<float>({1e-5f, 1.0f}).to_string(), "[1.e-05 1.e+00]");
  EXPECT_EQ(tessera::array<float>({1e-5f, 1.5f}).to_string(), "[1.0e-05 1.5e+00]");
  EXPECT_EQ(tessera::array<float>({1e10f, 1.0f}).to_string(), "[1.e+10 1.e+00]");
  EXPECT_EQ(tessera::array<float>({1e-5f, -1e-5f}).to_string(), "[ 1.e-05 -1.e-05]");
  EXPECT_EQ(tessera::array<float>({0.0f, 1e-5f}).to_string(), "[0.e+00 1.e-05]");
  EXPECT_EQ(tessera::array<float>({1.0f, 2000.0f}).to_string(), "[1.e+00 2.e+03]");  // ratio
  EXPECT_EQ(tessera::array<float>({1.0f, 1000.0f}).to_string(), "[   1. 1000.]");    // not > 1e3
  EXPECT_EQ(tessera::array<float>({1e-4f, 0.01f}).to_string(), "[0.0001 0.01  ]");
  EXPECT_EQ(tessera::array<float>({1.25e-5f, 3e-6f}).to_string(), "[1.25e-05 3.00e-06]");
}

TEST(FormatTest, LargeFloat32ValuesSwitchToScientificAtOneMillion) {
  // numpy 2.3+: float32 arrays go scientific at 1e6 (numpy <= 2.2 waited until 1e8).
  EXPECT_EQ(tessera::array<float>({1e5f, 2e5f}).to_string(), "[100000. 200000.]");
  EXPECT_EQ(tessera::array<float>({1e6f, 2e6f}).to_string(), "[1.e+06 2.e+06]");
}

TEST(FormatTest, Integers) {
  EXPECT_EQ(tessera::array<int32_t>({1, -2, 30}).to_string(), "[ 1 -2 30]");
  EXPECT_EQ(tessera::array<int32_t>({0, 1, 2}).to_string(), "[0 1 2]");
  EXPECT_EQ(tessera::array<int8_t>({-128, 0, 127}).to_string(), "[-128    0  127]");
  EXPECT_EQ(tessera::array<int32_t>({std::numeric_limits<int32_t>::min(), 0}).to_string(),
            "[-2147483648           0]");
  EXPECT_EQ(tessera::array<int32_t>({{1, 2}, {-3, 4}}).to_string(), "[[ 1  2]\n [-3  4]]");
}

TEST(FormatTest, Booleans) {
  EXPECT_EQ(tessera::array<bool>({true, false}).to_string(), "[ True False]");
  EXPECT_EQ(tessera::array<bool>({true, true}).to_string(), "[ True  True]");
  EXPECT_EQ(tessera::array<bool>({false}).to_string(), "[False]");
  EXPECT_EQ(tessera::array<bool>({{true, false}, {false, true}}).to_string(),
            "[[ True False]\n [False  True]]");
}

TEST(FormatTest, BFloat16UsesItsOwnShortestDigits) {
  EXPECT_EQ(bf16_array({1.1f}).to_string(), "[1.1]");  // the value is 1.1015625
  EXPECT_EQ(bf16_array({3.14159f, 100.0f}).to_string(), "[  3.14 100.  ]");
  EXPECT_EQ(bf16_array({1.0f, 2.0f, 3.0f}).to_string(), "[1. 2. 3.]");
  EXPECT_EQ(bf16_array({0.1f, -0.5f}).to_string(), "[ 0.1 -0.5]");
  EXPECT_EQ(bf16_array({1e-5f, 1.0f}).to_string(), "[1.e-05 1.e+00]");
  EXPECT_EQ(bf16_array({kNaN, -kInf, 2.0f}).to_string(), "[ nan -inf   2.]");
  EXPECT_EQ(Array<bfloat16>(Shape{}, bfloat16(1.1f)).to_string(), "1.1");
  EXPECT_EQ(Array<bfloat16>(Shape{}, bfloat16(257.0f)).to_string(), "256.0");
}

TEST(FormatTest, RankZeroPrintsTheScalar) {
  EXPECT_EQ(Array<float>(Shape{}, 42.0f).to_string(), "42.0");
  EXPECT_EQ(Array<float>(Shape{}, 0.1f).to_string(), "0.1");
  EXPECT_EQ(Array<float>(Shape{}, -2.5f).to_string(), "-2.5");
  EXPECT_EQ(Array<float>(Shape{}, 0.0f).to_string(), "0.0");
  EXPECT_EQ(Array<float>(Shape{}, -0.0f).to_string(), "-0.0");
  EXPECT_EQ(Array<float>(Shape{}, 1e-5f).to_string(), "1e-05");
  EXPECT_EQ(Array<float>(Shape{}, 1.5e-7f).to_string(), "1.5e-07");
  EXPECT_EQ(Array<float>(Shape{}, 123456.0f).to_string(), "123456.0");
  EXPECT_EQ(Array<float>(Shape{}, 1.5e7f).to_string(), "1.5e+07");
  EXPECT_EQ(Array<float>(Shape{}, kNaN).to_string(), "nan");
  EXPECT_EQ(Array<float>(Shape{}, -kInf).to_string(), "-inf");
  EXPECT_EQ(Array<float>(Shape{}, kInf).to_string(), "inf");
  EXPECT_EQ(Array<int32_t>(Shape{}, 7).to_string(), "7");
  EXPECT_EQ(Array<int8_t>(Shape{}, -5).to_string(), "-5");
  EXPECT_EQ(Array<bool>(Shape{}, true).to_string(), "True");
  EXPECT_EQ(Array<bool>(Shape{}, false).to_string(), "False");
}

TEST(FormatTest, EmptyArrays) {
  EXPECT_EQ(Array<float>().to_string(), "[]");
  EXPECT_EQ(Array<float>(Shape{2, 0}).to_string(), "[]");
  EXPECT_EQ(Array<int32_t>(Shape{0, 3, 4}).to_string(), "[]");
}

TEST(FormatTest, StreamInsertionMatchesToString) {
  std::ostringstream os;
  os << arange<float>(3);
  EXPECT_EQ(os.str(), "[0. 1. 2.]");
}

TEST(FormatTest, FormatArrayOnARawBuffer) {
  const float data[] = {1, 2, 3, 4};
  EXPECT_EQ(detail::format_array(DType::kFloat32, data, Shape{2, 2}, {}), "[[1. 2.]\n [3. 4.]]");
  const int8_t bytes[] = {1, -1};
  EXPECT_EQ(detail::format_array(DType::kInt8, bytes, Shape{2}, {}), "[ 1 -1]");
}

template <class T>
Array<T> narrow_array(std::initializer_list<float> values) {
  std::vector<T> v;
  for (float f : values) v.emplace_back(f);
  return tessera::array(v);
}

TEST(FormatTest, Float16AsNumpy) {
  // numpy's own float16: its cutoff for scientific notation is 1e3 (10**precision).
  EXPECT_EQ(narrow_array<float16>({1.1f, 2.5f, 1000.0f, 3e-5f}).to_string(),
            "[1.1e+00 2.5e+00 1.0e+03 3.0e-05]");
  EXPECT_EQ(narrow_array<float16>({1.1f, 2.5f, 100.0f, 3.0f}).to_string(),
            "[  1.1   2.5 100.    3. ]");
  EXPECT_EQ(narrow_array<float16>({65504.0f, 1.0f}).to_string(), "[6.55e+04 1.00e+00]");
  EXPECT_EQ(Array<float16>({}, {float16(1000.0f)}).to_string(), "1e+03");
  EXPECT_EQ(Array<float16>({}, {float16(999.0f)}).to_string(), "999.0");
  EXPECT_EQ(Array<float16>({}, {float16(0.1f)}).to_string(), "0.1");
}

TEST(FormatTest, Float8AsFloat32) {
  EXPECT_EQ(narrow_array<float8_e4m3fn>({1.125f, 2.5f, 96.0f, 3.0f}).to_string(),
            "[ 1.125  2.5   96.     3.   ]");
  // Their exact values, as float32 prints them.
  EXPECT_EQ(narrow_array<float8_e4m3fn>({0.001953125f, 448.0f}).to_string(),
            "[1.953125e-03 4.480000e+02]");
  EXPECT_EQ(narrow_array<float8_e5m2>({1.0f, kInf, kNaN}).to_string(), "[ 1. inf nan]");
  EXPECT_EQ(Array<float8_e5m2>({}, {float8_e5m2(0.75f)}).to_string(), "0.75");
  // float8_e4m3b11fnuz: 0x80 is NaN, and -0.0 converts to 0 (it has no negative zero).
  EXPECT_EQ(narrow_array<float8_e4m3b11fnuz>({1.5f, 30.0f, kNaN}).to_string(), "[ 1.5 30.   nan]");
  EXPECT_EQ(narrow_array<float8_e4m3b11fnuz>({0x1p-13f, -30.0f}).to_string(),
            "[ 1.2207031e-04 -3.0000000e+01]");
  EXPECT_EQ(Array<float8_e4m3b11fnuz>({}, {float8_e4m3b11fnuz(-0.0f)}).to_string(), "0.0");
}

TEST(FormatTest, NewIntegerDtypes) {
  EXPECT_EQ(Array<uint32_t>({2}, {4294967295u, 0u}).to_string(), "[4294967295          0]");
  EXPECT_EQ(Array<uint8_t>({2, 2}, {1, 200, 3, 4}).to_string(), "[[  1 200]\n [  3   4]]");
  EXPECT_EQ(Array<int16_t>({2}, {-3, 20000}).to_string(), "[   -3 20000]");
  EXPECT_EQ(Array<uint16_t>({}, {65535}).to_string(), "65535");
}

}  // namespace
