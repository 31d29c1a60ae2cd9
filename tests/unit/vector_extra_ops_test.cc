// The smaller jnp/lax functions of tessera/vector_extra.h (isnan/isinf/isfinite, all/any, tan,
// reciprocal, rint, nextafter, erf_inv, population_count, clz, select_n, swapaxes, the shift
// spellings, jax::nn::relu), each run in a kernel natively and in checked mode (the two must
// agree) and checked against values jax 0.10 / numpy give; plus the weak scalars of refs'
// elements and of ints with bfloat16 operands.
#include <gtest/gtest.h>

#include <bit>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <utility>
#include <vector>

#include "support/expect_error.h"
#include "tessera/tessera.h"

namespace {
using namespace tessera;

constexpr float kNaN = std::numeric_limits<float>::quiet_NaN();
constexpr float kInf = std::numeric_limits<float>::infinity();

template <class T>
Array<T> array_of(Shape s, const std::vector<T>& v) {
  Array<T> a(std::move(s));
  for (int64_t i = 0; i < a.size(); ++i) a[i] = v[static_cast<size_t>(i)];
  return a;
}

// Runs the kernel natively and in checked mode; the two outputs must be bit-identical.
template <class Body, class Out, class... Args>
auto run_both(Body body, Out out, const Args&... args) {
  auto native = pl::pallas_call(body, out)(args...);
  auto checked = pl::pallas_call(body, out, pltpu::InterpretParams{})(args...);
  EXPECT_EQ(native.size(), checked.size());
  EXPECT_EQ(std::memcmp(native.data(), checked.data(), native.bytes()), 0)
      << "native and checked mode differ";
  return native;
}

bool same_bits(float a, float b) {
  return std::bit_cast<uint32_t>(a) == std::bit_cast<uint32_t>(b);
}

TEST(VectorExtraOps, FloatClassification) {
  const auto x = array_of<float>(
      {8}, {kNaN, kInf, -kInf, -0.0f, 1.0f, std::numeric_limits<float>::max(), 1e-45f, -kNaN});
  auto o = run_both(
      [](pltpu::VmemRef<const float> x_ref, pltpu::VmemRef<bool> o_ref) {
        o_ref.at(0) = jnp::isnan(x_ref);
        o_ref.at(1) = jnp::isinf(x_ref);
        o_ref.at(2) = jnp::isfinite(x_ref);
        o_ref.at(3) = lax::is_finite(x_ref) & ~jnp::isnan(x_ref * 2.0f);
      },
      pl::out_shape<bool>({4, 8}), x);
  for (int64_t i = 0; i < 8; ++i) {
    const float v = x[i];
    EXPECT_EQ(o(0, i), std::isnan(v)) << i;
    EXPECT_EQ(o(1, i), std::isinf(v)) << i;
    EXPECT_EQ(o(2, i), std::isfinite(v)) << i;
    EXPECT_EQ(o(3, i), std::isfinite(v)) << i;
  }
}

TEST(VectorExtraOps, ClassificationOfIntegersAndBfloat16) {
  // jnp: integers are never NaN or infinite; bfloat16 keeps its infinities.
  const auto i = array_of<int32_t>({4}, {INT32_MIN, -1, 0, INT32_MAX});
  const auto b =
      array_of<bfloat16>({4}, {bfloat16(kInf), bfloat16(1e38f), bfloat16(-kInf), bfloat16(kNaN)});
  auto o = run_both(
      [](pltpu::VmemRef<const int32_t> i_ref, pltpu::VmemRef<const bfloat16> b_ref,
         pltpu::VmemRef<bool> o_ref) {
        o_ref.at(0) = jnp::isnan(i_ref) | jnp::isinf(i_ref) | ~jnp::isfinite(i_ref);
        o_ref.at(1) = jnp::isinf(b_ref);
      },
      pl::out_shape<bool>({2, 4}), i, b);
  EXPECT_EQ(o.to_vector(),
            (std::vector<bool>{false, false, false, false, true, false, true, false}));
}

TEST(VectorExtraOps, AllAndAnyWithAxesAndKeepdims) {
  const auto x = array_of<float>({3, 4}, {1, 2, 0, 4, 5, 6, 7, 8, 0, 0, 0, kNaN});
  auto o = run_both(
      [](pltpu::VmemRef<const float> x_ref, pltpu::VmemRef<bool> o_ref) {
        o_ref.at(0, pl::ds(0, 3)) = jnp::all(x_ref, 1);
        o_ref.at(1, pl::ds(0, 3)) = jnp::any(x_ref, -1);
        o_ref.at(pl::ds(2, 1), pl::ds(0, 4)) = jnp::all(x_ref > 0.5f, 0, true);
        const bool every = jnp::all(x_ref);
        const bool some = jnp::any(x_ref == 8.0f);
        o_ref(3, 0) = every;
        o_ref(3, 1) = some;
        o_ref(3, 2) = jnp::any(x_ref, {0, 1});  // a one-element result is a C++ bool
        o_ref(3, 3) = jnp::all(x_ref == x_ref);
        o_ref(0, 3) = false;
        o_ref(1, 3) = false;
      },
      pl::out_shape<bool>({4, 4}), x);
  // numpy: NaN counts as true (nonzero).
  EXPECT_EQ(o.to_vector(), (std::vector<bool>{false, true, false, false,   //
                                              true, true, true, false,     //
                                              false, false, false, false,  // NaN > 0.5 is false
                                              false, true, true, false}));
}

TEST(VectorExtraOps, AllAndAnyOfEmptyAxesAndBadAxes) {
  // numpy: all() over an empty axis is true, any() false.
  auto o = run_both(
      [](pltpu::VmemRef<const int32_t> x_ref, pltpu::VmemRef<bool> o_ref) {
        o_ref.at(0) = jnp::all(x_ref, 0);
        o_ref.at(1) = jnp::any(x_ref, 0);
      },
      pl::out_shape<bool>({2, 3}), Array<int32_t>({0, 3}));
  EXPECT_EQ(o.to_vector(), (std::vector<bool>{true, true, true, false, false, false}));
  std::vector<float> d(8);
  pltpu::VmemRef<float> r(d.data(), {2, 4});
  auto e = tessera::testing::catch_error<Error>([&] { (void)jnp::all(r, 2); });
  ASSERT_TRUE(e.has_value());
  EXPECT_EQ(e->kind(), ErrorKind::kInvalidArgument);
  EXPECT_NE(std::string(e->what()).find("jnp.all"), std::string::npos) << e->what();
  EXPECT_NE(std::string(e->what()).find("axis 2 is out of range"), std::string::npos);
}

TEST(VectorExtraOps, TanAgainstDoubleLibm) {
  Array<float> x({2, 300});
  for (int64_t i = 0; i < x.size(); ++i) x[i] = -40.0f + 80.0f * static_cast<float>(i) / 599.0f;
  x[0] = 1.57f;  // near a pole: jnp.tan gives 1255.8483
  x[1] = -3.0f;
  auto o = run_both([](pltpu::VmemRef<const float> x_ref,
                       pltpu::VmemRef<float> o_ref) { o_ref = jnp::tan(x_ref); },
                    pl::out_shape<float>({2, 300}), x);
  for (int64_t i = 0; i < x.size(); ++i) {
    const float want = static_cast<float>(std::tan(static_cast<double>(x[i])));
    const float ulp = std::nextafter(std::fabs(want), kInf) - std::fabs(want);
    EXPECT_LE(std::fabs(o[i] - want), ulp) << x[i];
  }
  EXPECT_EQ(o[0], 1255.8482666015625f);
  // numpy: 0.14254653, jax on the CPU: 0.14254655 (the two neighbours of tan(-3) = 0.1425465431).
  EXPECT_TRUE(o[1] == 0.14254653453826904f || o[1] == 0.14254654943943024f) << o[1];
}

TEST(VectorExtraOps, ReciprocalRintAndRelu) {
  const auto x = array_of<float>({6}, {2.0f, 0.0f, -4.0f, 2.5f, -0.5f, 3.5f});
  const auto i = array_of<int32_t>({6}, {2, 0, -4, 1, -1, 3});
  auto o = run_both(
      [](pltpu::VmemRef<const float> x_ref, pltpu::VmemRef<const int32_t> i_ref,
         pltpu::VmemRef<float> o_ref) {
        o_ref.at(0) = jnp::reciprocal(x_ref);
        o_ref.at(1) = pl::reciprocal(i_ref, /*approx=*/true);  // jnp: integers give float32
        o_ref.at(2) = jnp::rint(x_ref);
        o_ref.at(3) = jax::nn::relu(x_ref);
        o_ref.at(4) = jax::nn::relu(i_ref).astype<float>();
      },
      pl::out_shape<float>({5, 6}), x, i);
  // numpy: reciprocal([2, 0, -4]) = [0.5, inf, -0.25]; rint rounds half to even.
  const std::vector<float> want = {0.5f, kInf, -0.25f, 0.4f, -2.0f, 1.0f / 3.5f,  //
                                   0.5f, kInf, -0.25f, 1.0f, -1.0f, 1.0f / 3.0f,  //
                                   2.0f, 0.0f, -4.0f,  2.0f, -0.0f, 4.0f,         //
                                   2.0f, 0.0f, 0.0f,   2.5f, 0.0f,  3.5f,         //
                                   2.0f, 0.0f, 0.0f,   1.0f, 0.0f,  3.0f};
  for (int64_t k = 0; k < o.size(); ++k) EXPECT_TRUE(same_bits(o[k], want[size_t(k)])) << k;
}

TEST(VectorExtraOps, NextafterMatchesNumpy) {
  const auto a = array_of<float>({9}, {0.f, 0.f, 1.f, 1.f, -1.f, kInf, 1e-45f, kNaN, 3.f});
  const auto b = array_of<float>({9}, {1.f, -1.f, 2.f, 0.f, kInf, 0.f, 0.f, 1.f, 3.f});
  auto o = run_both([](pltpu::VmemRef<const float> a_ref, pltpu::VmemRef<const float> b_ref,
                       pltpu::VmemRef<float> o_ref) { o_ref = jnp::nextafter(a_ref, b_ref); },
                    pl::out_shape<float>({9}), a, b);
  // np.nextafter(a, b), float32.
  const std::vector<float> want = {0x1p-149f,
                                   -0x1p-149f,
                                   0x1.000002p+0f,
                                   0x1.fffffep-1f,
                                   -0x1.fffffep-1f,
                                   0x1.fffffep+127f,
                                   0.0f,
                                   kNaN,
                                   3.0f};
  for (int k = 0; k < 9; ++k)
    EXPECT_TRUE(same_bits(o[k], want[size_t(k)]) ||
                (std::isnan(o[k]) && std::isnan(want[size_t(k)])))
        << k;
}

TEST(VectorExtraOps, ErfInvMatchesJax) {
  const auto x = array_of<float>(
      {12}, {-0.999f, -0.5f, -0.1f, 0.0f, 1e-8f, 0.3f, 0.7f, 0.95f, 0.9999f, 1.0f, -1.0f, 1.5f});
  auto o = run_both([](pltpu::VmemRef<const float> x_ref,
                       pltpu::VmemRef<float> o_ref) { o_ref = lax::erf_inv(x_ref); },
                    pl::out_shape<float>({12}), x);
  // jax.lax.erf_inv on the CPU, float32.
  const std::vector<float> want = {
      -0x1.29d332p+1f, -0x1.e861fcp-2f, -0x1.6bf442p-4f, 0.0f, 0x1.308156p-27f, 0x1.17007ap-2f,
      0x1.773a9ep-1f,  0x1.62ca96p+0f,  0x1.6021a6p+1f,  kInf, -kInf,           kNaN};
  for (int k = 0; k < 12; ++k) {
    if (std::isnan(want[size_t(k)]) || std::isinf(want[size_t(k)])) {
      EXPECT_TRUE(same_bits(o[k], want[size_t(k)]) ||
                  (std::isnan(o[k]) && std::isnan(want[size_t(k)])))
          << k;
    } else {
      EXPECT_NEAR(o[k], want[size_t(k)], 4e-7f * std::fabs(want[size_t(k)])) << k;
    }
  }
}

TEST(VectorExtraOps, PopulationCountAndClzInTheDtypesWidth) {
  const auto i8 = array_of<int8_t>({7}, {-128, -1, 0, 1, 7, 64, 127});
  const auto i32 = array_of<int32_t>({7}, {INT32_MIN, -1, 0, 1, 255, 1 << 30, 12345});
  const auto u16 = array_of<uint16_t>({7}, {0, 1, 65535, 256, 3, 32768, 7});
  auto o = run_both(
      [](pltpu::VmemRef<const int8_t> a, pltpu::VmemRef<const int32_t> b,
         pltpu::VmemRef<const uint16_t> c, pltpu::VmemRef<int32_t> o_ref) {
        o_ref.at(0) = lax::population_count(a).astype<int32_t>();
        o_ref.at(1) = lax::clz(a).astype<int32_t>();
        o_ref.at(2) = lax::population_count(b);
        o_ref.at(3) = lax::clz(b);
        o_ref.at(4) = lax::population_count(c).astype<int32_t>();
        o_ref.at(5) = lax::clz(c).astype<int32_t>();
      },
      pl::out_shape<int32_t>({6, 7}), i8, i32, u16);
  // jax.lax on the CPU.
  EXPECT_EQ(o.to_vector(), (std::vector<int32_t>{1,  8,  0,  1,  3,  1, 7,   //
                                                 0,  0,  8,  7,  5,  1, 1,   //
                                                 1,  32, 0,  1,  8,  1, 6,   //
                                                 0,  0,  32, 31, 24, 1, 18,  //
                                                 0,  1,  16, 1,  2,  1, 3,   //
                                                 16, 15, 0,  7,  14, 0, 13}));
}

TEST(VectorExtraOps, SelectNClampsWhichAsJax) {
  const auto w = array_of<int32_t>({5}, {0, 1, 2, 5, -1});
  const auto p = array_of<bool>({5}, {true, false, true, false, false});
  auto o = run_both(
      [](pltpu::VmemRef<const int32_t> w_ref, pltpu::VmemRef<const bool> p_ref,
         pltpu::VmemRef<float> o_ref) {
        jnp::Value a = jnp::arange<float>(5);
        o_ref.at(0) = lax::select_n(w_ref, a, a + 10.0f, a + 20.0f);
        o_ref.at(1) = lax::select_n(p_ref, a, a + 10.0f);
        o_ref.at(2) = lax::select_n(w_ref, a);
      },
      pl::out_shape<float>({3, 5}), w, p);
  // jax: lax.select_n([0, 1, 2, 5, -1], ...) = [0, 11, 22, 23, 4].
  EXPECT_EQ(o.to_vector(), (std::vector<float>{0, 11, 22, 23, 4, 10, 1, 12, 3, 4, 0, 1, 2, 3, 4}));
}

TEST(VectorExtraOps, SwapaxesAndShiftSpellings) {
  Array<int32_t> x({2, 3, 4});
  for (int64_t k = 0; k < x.size(); ++k) x[k] = static_cast<int32_t>(k);
  auto o = run_both(
      [](pltpu::VmemRef<const int32_t> x_ref, pltpu::VmemRef<int32_t> o_ref) {
        jnp::Value v = x_ref[pl::ellipsis];
        o_ref = jnp::bitwise_right_shift(jnp::bitwise_left_shift(jnp::swapaxes(v, 0, -1), 3), 1);
      },
      pl::out_shape<int32_t>({4, 3, 2}), x);
  for (int i = 0; i < 4; ++i)
    for (int j = 0; j < 3; ++j)
      for (int k = 0; k < 2; ++k) EXPECT_EQ(o(i, j, k), x(k, j, i) * 4);
  std::vector<float> d(6);
  pltpu::VmemRef<float> r(d.data(), {2, 3});
  auto e = tessera::testing::catch_error<Error>([&] { (void)jnp::swapaxes(r, 0, 2); });
  ASSERT_TRUE(e.has_value());
  EXPECT_NE(std::string(e->what()).find("jnp.swapaxes"), std::string::npos) << e->what();
}

TEST(VectorExtraOps, BitcastConvertTypeSameWidth) {
  const auto f = array_of<float>({4}, {0.0f, 1.0f, 2.0f, -kInf});
  auto o = run_both(
      [](pltpu::VmemRef<const float> x_ref, pltpu::VmemRef<int32_t> o_ref) {
        o_ref.at(0) = lax::bitcast_convert_type<int32_t>(x_ref);
        o_ref.at(1) = lax::bitcast_convert_type<uint32_t>(x_ref).astype<int32_t>();
        // There and back: the bits survive.
        o_ref.at(2) = lax::bitcast_convert_type<int32_t>(
            lax::bitcast_convert_type<float>(lax::bitcast_convert_type<int32_t>(x_ref)));
      },
      pl::out_shape<int32_t>({3, 4}), f);
  // numpy: np.float32([0, 1, 2]).view(np.int32) = [0, 1065353216, 1073741824].
  for (int r = 0; r < 3; ++r) {
    EXPECT_EQ(o(r, 0), 0);
    EXPECT_EQ(o(r, 1), 1065353216);
    EXPECT_EQ(o(r, 2), 1073741824);
    EXPECT_EQ(o(r, 3), static_cast<int32_t>(0xff800000u));
  }
  const auto i16 = array_of<int16_t>({4}, {0, 1, 2, -1});
  auto h = run_both(
      [](pltpu::VmemRef<const int16_t> x_ref, pltpu::VmemRef<float> o_ref) {
        o_ref.at(0) = lax::bitcast_convert_type<float16>(x_ref).astype<float>();
        o_ref.at(1) = lax::bitcast_convert_type<bfloat16>(x_ref).astype<float>();
        o_ref.at(2) = lax::bitcast_convert_type<uint16_t>(x_ref).astype<float>();
      },
      pl::out_shape<float>({3, 4}), i16);
  // numpy: np.int16([0, 1, 2]).view(np.float16) = [0, 5.96e-08, 1.19e-07]; -1 is a NaN.
  EXPECT_EQ(h(0, 1), 0x1p-24f);
  EXPECT_EQ(h(0, 2), 0x1p-23f);
  EXPECT_TRUE(std::isnan(h(0, 3)));
  EXPECT_EQ(h(1, 1), 0x1p-133f);
  EXPECT_EQ(h(2, 3), 65535.0f);
}

TEST(VectorExtraOps, PadConstantAndWrap) {
  auto o = run_both(
      [](pltpu::VmemRef<const int32_t> x_ref, pltpu::VmemRef<int32_t> o_ref) {
        o_ref.at(0) = jnp::pad(x_ref, {{5, 8}}, "wrap");
        o_ref.at(1, pl::ds(0, 7)) = jnp::pad(x_ref, {{1, 2}}, "constant", 9);
        o_ref.at(1, pl::ds(7, 10)) = jnp::pad(x_ref, {{0, 6}});
      },
      pl::out_shape<int32_t>({2, 17}), array_of<int32_t>({4}, {0, 1, 2, 3}));
  // numpy: np.pad(np.arange(4), (5, 8), mode="wrap").
  EXPECT_EQ(o.to_vector(),
            (std::vector<int32_t>{3, 0, 1, 2, 3, 0, 1, 2, 3, 0, 1, 2, 3, 0, 1, 2, 3,
                                  9, 0, 1, 2, 3, 9, 9, 0, 1, 2, 3, 0, 0, 0, 0, 0, 0}));
  std::vector<float> d(8);
  pltpu::VmemRef<float> r(d.data(), {2, 4});
  auto e = tessera::testing::catch_error<Error>([&] { (void)jnp::pad(r, {{1, 1}}); });
  ASSERT_TRUE(e.has_value());
  EXPECT_NE(std::string(e->what()).find("one (before, after) pair per axis"), std::string::npos)
      << e->what();
  e = tessera::testing::catch_error<Error>([&] { (void)jnp::pad(r, {{1, 1}, {0, 0}}, "edge"); });
  ASSERT_TRUE(e.has_value());
  EXPECT_NE(std::string(e->what()).find("mode \"edge\""), std::string::npos) << e->what();
}

TEST(VectorExtraOps, DiagonalWithOffsets) {
  Array<float> x({3, 4});
  for (int64_t k = 0; k < x.size(); ++k) x[k] = static_cast<float>(k);
  auto o = run_both(
      [](pltpu::VmemRef<const float> x_ref, pltpu::VmemRef<float> o_ref) {
        o_ref = jnp::zeros_like(o_ref);
        o_ref.at(0, pl::ds(0, 3)) = jnp::diagonal(x_ref);
        o_ref.at(1, pl::ds(0, 3)) = jnp::diagonal(x_ref, 1);
        o_ref.at(2, pl::ds(0, 2)) = jnp::diagonal(x_ref * 2.0f, -1);
        o_ref.at(3, pl::ds(0, 0)) = jnp::diagonal(x_ref, 4);
      },
      pl::out_shape<float>({4, 3}), x);
  // numpy: np.diagonal(arange(12).reshape(3, 4), k) = [0, 5, 10], [1, 6, 11]; k=-1: [4, 9].
  EXPECT_EQ(o.to_vector(), (std::vector<float>{0, 5, 10, 1, 6, 11, 8, 18, 0, 0, 0, 0}));
}

TEST(VectorExtraOps, WeakScalarsFromRefElementsAndInts) {
  // An element of a non-const ref (s(0)) is a weak scalar; an int with bfloat16 stays bfloat16
  // (and compiles without -Wconversion reports in Tessera's headers: this file is built with it).
  const auto x =
      array_of<bfloat16>({4}, {bfloat16(1.0f), bfloat16(2.0f), bfloat16(-3.0f), bfloat16(0.5f)});
  const auto body = [](pltpu::VmemRef<const bfloat16> x_ref, pltpu::VmemRef<bfloat16> o_ref,
                       pltpu::SmemRef<float> s) {
    s(0) = 2.0f;
    o_ref = jnp::where(x_ref > 0, x_ref + 1, 0) * s(0);
    o_ref += jnp::full_like(o_ref, 1) - s(0) / 2;
  };
  for (bool checked : {false, true}) {
    const auto o = checked ? pl::pallas_call(body, pl::out_shape<bfloat16>({4}),
                                             pl::scratch_shapes(pltpu::SMEM<float>({1})),
                                             pltpu::InterpretParams{})(x)
                           : pl::pallas_call(body, pl::out_shape<bfloat16>({4}),
                                             pl::scratch_shapes(pltpu::SMEM<float>({1})))(x);
    EXPECT_EQ(static_cast<float>(o[0]), 4.0f);
    EXPECT_EQ(static_cast<float>(o[1]), 6.0f);
    EXPECT_EQ(static_cast<float>(o[2]), 0.0f);
    EXPECT_EQ(static_cast<float>(o[3]), 3.0f);
  }
}

}  // namespace
