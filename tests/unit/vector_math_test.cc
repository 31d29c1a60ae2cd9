// Elementwise jnp/lax functions on VMEM refs (vector_math.h and the operators of vector_ops.h):
// maximum/minimum, where, astype, comparisons, integer division semantics, bitwise ops and
// shifts, rounding, transcendentals (accuracy measured against double-precision libm), pow,
// clip, compound assignment and broadcasting, over dtypes and ragged / 1-element shapes.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <vector>

#include "support/expect_error.h"
#include "support/vector_targets.h"
#include "tessera/tessera.h"

namespace {
using namespace tessera;

template <class T>
pltpu::VmemRef<T> vref(std::vector<T>& v, Shape s) {
  return pltpu::VmemRef<T>(v.data(), std::move(s));
}
// std::vector<bool> has no data(): bool buffers are vectors of this.
struct Bool {
  bool v;
};
pltpu::VmemRef<bool> bref(std::vector<Bool>& v, Shape s) {
  return pltpu::VmemRef<bool>(reinterpret_cast<bool*>(v.data()), std::move(s));
}

constexpr float kNaN = std::numeric_limits<float>::quiet_NaN();
constexpr float kInf = std::numeric_limits<float>::infinity();

// Sizes that cover one element, ragged vector tails and several evaluator tiles (256).
const int kSizes[] = {1, 7, 16, 255, 256, 257, 1000};

std::vector<float> sample(int n, float lo, float hi, bool specials = false) {
  std::vector<float> v(static_cast<size_t>(n));
  for (int k = 0; k < n; ++k) {
    const float t = n == 1 ? 0.5f : static_cast<float>(k) / static_cast<float>(n - 1);
    v[static_cast<size_t>(k)] = lo + (hi - lo) * t;
  }
  if (specials && n >= 7) {
    v[0] = kNaN;
    v[1] = kInf;
    v[2] = -kInf;
    v[3] = 0.0f;
    v[4] = -0.0f;
  }
  return v;
}

bool same_float(float a, float b) {
  if (std::isnan(a) || std::isnan(b)) return std::isnan(a) && std::isnan(b);
  return a == b && std::signbit(a) == std::signbit(b);
}

TEST(VectorMath, MaximumMinimumPropagateNaN) {
  for (int n : kSizes) {
    auto x = sample(n, -3.0f, 3.0f, true);
    auto y = sample(n, 2.0f, -2.0f);
    std::vector<float> o(x.size());
    auto xr = vref(x, {n});
    auto yr = vref(y, {n});
    auto orf = vref(o, {n});
    orf = jnp::maximum(xr, yr);
    for (size_t k = 0; k < x.size(); ++k) {
      const float want = std::isnan(x[k]) ? kNaN : std::max(x[k], y[k]);
      ASSERT_TRUE(same_float(o[k], want) || (o[k] == 0 && want == 0)) << k << " " << o[k];
    }
    orf = jnp::minimum(xr, 0.5f);
    for (size_t k = 0; k < x.size(); ++k) {
      const float want = std::isnan(x[k]) ? kNaN : std::min(x[k], 0.5f);
      ASSERT_TRUE(same_float(o[k], want) || (o[k] == 0 && want == 0)) << k;
    }
  }
  std::vector<int8_t> a = {-128, 5, 127, 0}, b = {3, -7, 100, 0}, c(4);
  vref(c, {4}) = jnp::maximum(vref(a, {4}), vref(b, {4}));
  EXPECT_EQ(c, (std::vector<int8_t>{3, 5, 127, 0}));
  vref(c, {4}) = lax::min(vref(a, {4}), int8_t{1});
  EXPECT_EQ(c, (std::vector<int8_t>{-128, 1, 1, 0}));
  std::vector<bfloat16> h = {bfloat16(1.5f), bfloat16(-2.0f)}, ho(2);
  vref(ho, {2}) = jnp::maximum(vref(h, {2}), 0.0f);  // ReLU on bfloat16 stays bfloat16
  EXPECT_EQ(static_cast<float>(ho[0]), 1.5f);
  EXPECT_EQ(static_cast<float>(ho[1]), 0.0f);
}

TEST(VectorMath, ComparisonsGiveBoolMasks) {
  for (int n : kSizes) {
    auto x = sample(n, -2.0f, 2.0f, true);
    auto y = sample(n, 1.0f, -1.0f);
    std::vector<Bool> m(x.size());
    auto xr = vref(x, {n});
    auto yr = vref(y, {n});
    auto mr = bref(m, {n});
    auto check = [&](auto f, const char* what) {
      for (size_t k = 0; k < x.size(); ++k) ASSERT_EQ(m[k].v, f(x[k], y[k])) << what << " " << k;
    };
    mr = xr == yr;
    check([](float a, float b) { return a == b; }, "==");
    mr = xr != yr;  // NaN != anything is true, as numpy
    check([](float a, float b) { return a != b; }, "!=");
    mr = jnp::less(xr, yr);
    check([](float a, float b) { return a < b; }, "<");
    mr = xr <= yr;
    check([](float a, float b) { return a <= b; }, "<=");
    mr = jnp::greater(xr, yr);
    check([](float a, float b) { return a > b; }, ">");
    mr = xr >= yr;
    check([](float a, float b) { return a >= b; }, ">=");
  }
  std::vector<int32_t> a = {-5, 0, 7, 2147483647}, b = {-5, 1, 6, -2147483647 - 1};
  std::vector<Bool> m(4);
  auto ar = vref(a, {4});
  auto br = vref(b, {4});
  bref(m, {4}) = ar <= br;
  EXPECT_TRUE(m[0].v && m[1].v && !m[2].v && !m[3].v);
  bref(m, {4}) = ar >= br;
  EXPECT_TRUE(m[0].v && !m[1].v && m[2].v && m[3].v);
  bref(m, {4}) = 0 < ar;  // scalar on the left
  EXPECT_TRUE(!m[0].v && !m[1].v && m[2].v && m[3].v);
  static_assert(std::is_same_v<detail::ValueOf<decltype(ar == br)>, bool>);
}

TEST(VectorMath, WhereBroadcastsAndPromotes) {
  std::vector<float> x = sample(24, -1.0f, 1.0f), o(24);
  auto xr = vref(x, {2, 3, 4});
  auto orf = vref(o, {2, 3, 4});
  orf = jnp::where(xr > 0.0f, xr, 0.1f * xr);  // leaky ReLU
  for (size_t k = 0; k < x.size(); ++k) ASSERT_EQ(o[k], x[k] > 0 ? x[k] : 0.1f * x[k]) << k;
  // A (3, 1) column mask, a (4,) row and a scalar broadcast against each other.
  std::vector<Bool> col = {{true}, {false}, {true}};
  std::vector<float> row = {10, 20, 30, 40};
  orf = jnp::where(bref(col, {3, 1}), vref(row, {4}), -1.0f);
  for (int i = 0; i < 2; ++i)
    for (int r = 0; r < 3; ++r)
      for (int c = 0; c < 4; ++c)
        ASSERT_EQ(o[static_cast<size_t>(i * 12 + r * 4 + c)],
                  col[static_cast<size_t>(r)].v ? row[static_cast<size_t>(c)] : -1.0f);
  std::vector<int32_t> io(24);
  vref(io, {2, 3, 4}) = jnp::where(xr > 0.0f, 1, 0);  // two weak ints: int32
  for (size_t k = 0; k < x.size(); ++k) ASSERT_EQ(io[k], x[k] > 0 ? 1 : 0);
  // A non-bool mask is converted to bool (nonzero = true).
  vref(io, {2, 3, 4}) = jnp::where(vref(io, {2, 3, 4}), 7, -7);
  for (size_t k = 0; k < x.size(); ++k) ASSERT_EQ(io[k], x[k] > 0 ? 7 : -7);
  static_assert(std::is_same_v<detail::ValueOf<decltype(jnp::where(xr > 0.0f, 1.0f, 0))>, float>);
  // Shapes that do not broadcast.
  std::vector<float> bad(5);
  auto err = tessera::testing::catch_error<UsageError>(
      [&] { orf = jnp::where(xr > 0.0f, xr, vref(bad, {5})); });
  ASSERT_TRUE(err);
  EXPECT_EQ(err->kind(), ErrorKind::kShapeMismatch);
  EXPECT_NE(std::string(err->what()).find("(2, 3, 4) and (5,)"), std::string::npos) << err->what();
}

TEST(VectorMath, AstypeConvertsLikeJnp) {
  std::vector<float> x = {1.7f, -1.7f, 300.0f, -300.0f, kNaN, 3e9f, -3e9f, 0.0f, 0.5f};
  const int n = static_cast<int>(x.size());
  auto xr = vref(x, {n});
  std::vector<int32_t> i32(x.size());
  vref(i32, {n}) = jnp::astype<int32_t>(xr);  // truncates, saturates, NaN -> 0
  EXPECT_EQ(i32, (std::vector<int32_t>{1, -1, 300, -300, 0, 2147483647, -2147483647 - 1, 0, 0}));
  std::vector<int8_t> i8(x.size());
  vref(i8, {n}) = xr.astype<int8_t>();  // the member spelling; saturates to int8
  EXPECT_EQ(i8, (std::vector<int8_t>{1, -1, 127, -128, 0, 127, -128, 0, 0}));
  vref(i8, {n}) = vref(i32, {n}).astype<int8_t>();  // int -> int8 wraps, as numpy
  EXPECT_EQ(i8[2], static_cast<int8_t>(300 - 256));
  std::vector<Bool> b(x.size());
  bref(b, {n}) = xr.astype<bool>();  // x != 0 (NaN is true)
  EXPECT_TRUE(b[0].v && b[4].v && !b[7].v && b[8].v);
  std::vector<float> back(x.size());
  vref(back, {n}) = bref(b, {n}).astype<float>();
  EXPECT_EQ(back[7], 0.0f);
  EXPECT_EQ(back[0], 1.0f);
  std::vector<bfloat16> h(x.size());
  vref(h, {n}) = (xr * 2.0f).astype<bfloat16>();  // an expression's member spelling
  for (int k = 0; k < n; ++k) {
    ASSERT_TRUE(same_float(static_cast<float>(h[static_cast<size_t>(k)]),
                           static_cast<float>(bfloat16(x[static_cast<size_t>(k)] * 2.0f))))
        << k;
  }
  vref(i32, {n}) = vref(h, {n}).astype<int32_t>();
  EXPECT_EQ(i32[0], 3);  // bf16(3.4) = 3.40625 -> 3
}

TEST(VectorMath, IntegerRemainderAndFloorDivideArePythonic) {
  std::vector<int32_t> a, b;
  const int32_t kMin = std::numeric_limits<int32_t>::min();
  for (int32_t x : {-7, -6, -1, 0, 1, 6, 7, kMin, 2147483647})
    for (int32_t y : {-3, -1, 0, 1, 3, kMin}) {
      a.push_back(x);
      b.push_back(y);
    }
  const int n = static_cast<int>(a.size());
  std::vector<int32_t> r(a.size()), q(a.size());
  vref(r, {n}) = vref(a, {n}) % vref(b, {n});
  vref(q, {n}) = jnp::floor_divide(vref(a, {n}), vref(b, {n}));
  for (size_t k = 0; k < a.size(); ++k) {
    const int64_t x = a[k], y = b[k];
    int64_t want_r, want_q;
    if (y == 0) {
      want_r = x;   // XLA: x % 0 == x
      want_q = -1;  // XLA: x / 0 == -1
    } else {
      want_q = x / y;
      want_r = x % y;
      if (want_r != 0 && ((want_r < 0) != (y < 0))) {
        want_r += y;
        want_q -= 1;
      }
      want_q = static_cast<int32_t>(static_cast<uint32_t>(want_q));  // INT_MIN // -1 wraps
    }
    ASSERT_EQ(r[k], want_r) << x << " % " << y;
    ASSERT_EQ(q[k], want_q) << x << " // " << y;
  }
  std::vector<float> fx = {5.5f, -5.5f, 5.5f, -5.5f, 1.0f}, fy = {2.0f, 2.0f, -2.0f, -2.0f, 0.0f};
  std::vector<float> fr(5), fq(5);
  vref(fr, {5}) = vref(fx, {5}) % vref(fy, {5});
  vref(fq, {5}) = jnp::floor_divide(vref(fx, {5}), vref(fy, {5}));
  EXPECT_EQ(fr[0], 1.5f);
  EXPECT_EQ(fr[1], 0.5f);
  EXPECT_EQ(fr[2], -0.5f);
  EXPECT_EQ(fr[3], -1.5f);
  EXPECT_TRUE(std::isnan(fr[4]));
  EXPECT_EQ(fq, (std::vector<float>{2.0f, -3.0f, -3.0f, 2.0f, kInf}));
  std::vector<int8_t> i8 = {-7, 7}, o8(2);
  vref(o8, {2}) = vref(i8, {2}) % 3;
  EXPECT_EQ(o8, (std::vector<int8_t>{2, 1}));
}

TEST(VectorMath, BitwiseAndShifts) {
  std::vector<int32_t> a = {0x0f0f, -1, -8, 12345, 1, 1, -1, 7};
  std::vector<int32_t> s = {4, 1, 1, 31, 32, -1, 40, 0};
  const int n = 8;
  std::vector<int32_t> o(8);
  auto ar = vref(a, {n});
  auto sr = vref(s, {n});
  auto orf = vref(o, {n});
  orf = (ar & 0xff) | (ar ^ 3);
  for (int k = 0; k < n; ++k)
    ASSERT_EQ(o[static_cast<size_t>(k)],
              (a[static_cast<size_t>(k)] & 0xff) | (a[static_cast<size_t>(k)] ^ 3));
  orf = ~ar;
  for (int k = 0; k < n; ++k) ASSERT_EQ(o[static_cast<size_t>(k)], ~a[static_cast<size_t>(k)]);
  auto shl = [](int32_t x, int32_t y) {
    return (y < 0 || y >= 32) ? 0 : static_cast<int32_t>(static_cast<uint32_t>(x) << y);
  };
  auto sra = [](int32_t x, int32_t y) { return (y < 0 || y >= 32) ? (x < 0 ? -1 : 0) : x >> y; };
  auto srl = [](int32_t x, int32_t y) {
    return (y < 0 || y >= 32) ? 0 : static_cast<int32_t>(static_cast<uint32_t>(x) >> y);
  };
  orf = ar << sr;
  for (size_t k = 0; k < 8; ++k) ASSERT_EQ(o[k], shl(a[k], s[k])) << k;
  orf = ar >> sr;
  for (size_t k = 0; k < 8; ++k) ASSERT_EQ(o[k], sra(a[k], s[k])) << k;
  orf = lax::shift_right_logical(ar, sr);
  for (size_t k = 0; k < 8; ++k) ASSERT_EQ(o[k], srl(a[k], s[k])) << k;
  // int8: shifts work on 8 bits; logical right shift sees the bits as uint8.
  std::vector<int8_t> b = {-128, -1, 64, 3}, bs = {1, 4, 1, 8}, bo(4);
  vref(bo, {4}) = lax::shift_right_logical(vref(b, {4}), vref(bs, {4}));
  EXPECT_EQ(bo, (std::vector<int8_t>{64, 15, 32, 0}));
  vref(bo, {4}) = vref(b, {4}) << vref(bs, {4});
  EXPECT_EQ(bo, (std::vector<int8_t>{0, -16, -128, 0}));
  vref(bo, {4}) = vref(b, {4}) >> int8_t{7};
  EXPECT_EQ(bo, (std::vector<int8_t>{-1, -1, 0, 0}));
  // Bools: logical.
  std::vector<Bool> p = {{true}, {true}, {false}, {false}}, q = {{true}, {false}, {true}, {false}};
  std::vector<Bool> r(4);
  bref(r, {4}) = bref(p, {4}) & bref(q, {4});
  EXPECT_TRUE(r[0].v && !r[1].v && !r[2].v && !r[3].v);
  bref(r, {4}) = ~bref(p, {4}) | jnp::logical_xor(bref(p, {4}), bref(q, {4}));
  EXPECT_TRUE(!r[0].v && r[1].v && r[2].v && r[3].v);
  bref(r, {4}) = jnp::logical_not(vref(a, {4}));
  EXPECT_TRUE(!r[0].v && !r[1].v && !r[2].v && !r[3].v);
}

TEST(VectorMath, CheapUnaryOps) {
  for (int n : kSizes) {
    auto x = sample(n, -4.5f, 4.5f, true);
    std::vector<float> o(x.size());
    auto xr = vref(x, {n});
    auto orf = vref(o, {n});
    auto check = [&](auto f, const char* what) {
      for (size_t k = 0; k < x.size(); ++k)
        ASSERT_TRUE(same_float(o[k], f(x[k]))) << what << " " << x[k] << " -> " << o[k];
    };
    orf = jnp::abs(xr);
    check([](float v) { return std::fabs(v); }, "abs");
    orf = -xr;
    check([](float v) { return -v; }, "neg");
    orf = jnp::sign(xr);
    check([](float v) { return v > 0 ? 1.0f : v < 0 ? -1.0f : v; }, "sign");
    orf = jnp::square(xr);
    check([](float v) { return v * v; }, "square");
    orf = jnp::floor(xr);
    check([](float v) { return std::floor(v); }, "floor");
    orf = jnp::ceil(xr);
    check([](float v) { return std::ceil(v); }, "ceil");
    orf = jnp::round(xr);  // half to even
    check([](float v) { return std::nearbyint(v); }, "round");
  }
  std::vector<int32_t> i = {-3, 0, 5, std::numeric_limits<int32_t>::min()}, io(4);
  vref(io, {4}) = jnp::abs(vref(i, {4}));
  EXPECT_EQ(io, (std::vector<int32_t>{3, 0, 5, std::numeric_limits<int32_t>::min()}));
  vref(io, {4}) = jnp::sign(vref(i, {4}));
  EXPECT_EQ(io, (std::vector<int32_t>{-1, 0, 1, -1}));
  vref(io, {4}) =
      jnp::floor(vref(i, {4})) + jnp::square(vref(i, {4}).astype<int8_t>().astype<int32_t>());
  EXPECT_EQ(io[0], -3 + 9);
  std::vector<int8_t> m = {-128, 5}, mo(2);
  vref(mo, {2}) = jnp::abs(vref(m, {2}));  // wraps, as numpy
  EXPECT_EQ(mo, (std::vector<int8_t>{-128, 5}));
}

// ULP distance between two floats (0 for two NaNs).
int64_t ulp_diff(float a, float b) {
  if (std::isnan(a) || std::isnan(b)) return std::isnan(a) && std::isnan(b) ? 0 : INT64_MAX;
  if (a == b) return 0;
  auto key = [](float f) {
    int32_t i;
    std::memcpy(&i, &f, 4);
    return i < 0 ? int64_t{INT32_MIN} - i : int64_t{i};
  };
  return std::llabs(key(a) - key(b));
}

struct MathCase {
  const char* name;
  double (*ref)(double);
  float lo, hi;
  int64_t max_ulp;
  double abs_tol;  // accepted instead of ULPs (near a zero of the function)
};

template <class Build>
void check_transcendental(const MathCase& c, Build build) {
  const int n = 20011;  // prime: ragged tails
  auto x = sample(n, c.lo, c.hi);
  std::vector<float> o(x.size());
  vref(o, {n}) = build(vref(x, {n}));
  int64_t worst = 0;
  double worst_abs = 0;
  for (size_t k = 0; k < x.size(); ++k) {
    const double want = c.ref(static_cast<double>(x[k]));
    const int64_t u = ulp_diff(o[k], static_cast<float>(want));
    const double ad = std::fabs(static_cast<double>(o[k]) - want);
    if (u > c.max_ulp && ad > c.abs_tol) {
      ADD_FAILURE() << c.name << "(" << x[k] << ") = " << o[k] << ", want " << want << " (" << u
                    << " ULP)";
      return;
    }
    if (ad > c.abs_tol) worst = std::max(worst, u);
    worst_abs = std::max(worst_abs, ad);
  }
  std::printf(
      "[ accuracy ] %-9s on [%g, %g]: max %lld ULP (outside the %g absolute band), "
      "max abs error %.3g\n",
      c.name, static_cast<double>(c.lo), static_cast<double>(c.hi), static_cast<long long>(worst),
      c.abs_tol, worst_abs);
}

double logistic_ref(double v) { return 1.0 / (1.0 + std::exp(-v)); }
double exp2_ref(double v) { return std::exp2(v); }
double rsqrt_ref(double v) { return 1.0 / std::sqrt(v); }

TEST(VectorMath, TranscendentalsAreAccurate) {
  using R = pltpu::VmemRef<float>;
  check_transcendental({"exp", [](double v) { return std::exp(v); }, -87.0f, 88.0f, 4, 0},
                       [](R x) { return jnp::exp(x); });
  check_transcendental({"exp2", exp2_ref, -126.0f, 127.0f, 4, 0}, [](R x) { return jnp::exp2(x); });
  check_transcendental({"log", [](double v) { return std::log(v); }, 1e-30f, 1e30f, 4, 1e-7},
                       [](R x) { return jnp::log(x); });
  check_transcendental({"log", [](double v) { return std::log(v); }, 0.5f, 2.0f, 4, 1e-7},
                       [](R x) { return jnp::log(x); });
  check_transcendental({"log1p", [](double v) { return std::log1p(v); }, -0.999f, 1e6f, 4, 1e-7},
                       [](R x) { return jnp::log1p(x); });
  check_transcendental({"log1p", [](double v) { return std::log1p(v); }, -1e-3f, 1e-3f, 4, 0},
                       [](R x) { return jnp::log1p(x); });
  check_transcendental({"tanh", [](double v) { return std::tanh(v); }, -12.0f, 12.0f, 4, 1e-7},
                       [](R x) { return jnp::tanh(x); });
  check_transcendental({"logistic", logistic_ref, -80.0f, 30.0f, 4, 1e-7},
                       [](R x) { return lax::logistic(x); });
  check_transcendental({"sin", [](double v) { return std::sin(v); }, -1e4f, 1e4f, 4, 1e-7},
                       [](R x) { return jnp::sin(x); });
  check_transcendental({"cos", [](double v) { return std::cos(v); }, -1e4f, 1e4f, 4, 1e-7},
                       [](R x) { return jnp::cos(x); });
  check_transcendental({"erf", [](double v) { return std::erf(v); }, -5.0f, 5.0f, 1 << 30, 3e-7},
                       [](R x) { return lax::erf(x); });
  check_transcendental({"sqrt", [](double v) { return std::sqrt(v); }, 0.0f, 1e30f, 0, 0},
                       [](R x) { return jnp::sqrt(x); });
  check_transcendental({"rsqrt", rsqrt_ref, 1e-30f, 1e30f, 1, 0},
                       [](R x) { return lax::rsqrt(x); });
}

TEST(VectorMath, TranscendentalSpecialValues) {
  std::vector<float> x = {kNaN, kInf, -kInf, 0.0f, -1.0f, -2.0f, 200.0f, -200.0f};
  std::vector<float> o(x.size());
  auto xr = vref(x, {8});
  auto orf = vref(o, {8});
  orf = jnp::exp(xr);
  EXPECT_TRUE(std::isnan(o[0]) && o[1] == kInf && o[2] == 0 && o[3] == 1 && o[6] == kInf &&
              o[7] == 0);
  orf = jnp::log(xr);
  EXPECT_TRUE(std::isnan(o[0]) && o[1] == kInf && std::isnan(o[2]) && o[3] == -kInf &&
              std::isnan(o[4]));
  orf = jnp::log1p(xr);
  EXPECT_TRUE(std::isnan(o[0]) && o[1] == kInf && o[3] == 0 && o[4] == -kInf && std::isnan(o[5]));
  orf = jnp::tanh(xr);
  EXPECT_TRUE(std::isnan(o[0]) && o[1] == 1 && o[2] == -1 && o[6] == 1 && o[7] == -1);
  orf = lax::logistic(xr);
  EXPECT_TRUE(o[1] == 1 && o[2] == 0 && o[3] == 0.5f && o[6] == 1 && o[7] == 0);
  orf = jnp::exp2(xr);
  EXPECT_TRUE(std::isnan(o[0]) && o[1] == kInf && o[2] == 0 && o[3] == 1 && o[6] == kInf &&
              o[7] == 0);
  orf = lax::erf(xr);
  EXPECT_TRUE(std::isnan(o[0]) && o[1] == 1 && o[2] == -1 && o[3] == 0);
  orf = jnp::sqrt(xr);
  EXPECT_TRUE(std::isnan(o[4]) && o[1] == kInf && o[3] == 0);
  // Subnormal results of exp2.
  std::vector<float> s = {-149.0f, -140.5f, -127.0f}, so(3);
  vref(so, {3}) = jnp::exp2(vref(s, {3}));
  for (size_t k = 0; k < 3; ++k) EXPECT_LE(ulp_diff(so[k], std::exp2(s[k])), 1) << s[k];
}

// exp's results below FLT_MIN (arguments below -87) come from integer rounding, not from a
// multiply whose result is subnormal (src/native/vector_ops-inl.h, ExpTiny): within 1 ULP of the
// correctly rounded subnormal (or 0), on every SIMD target, with the arguments of each vector
// mixing the ranges (normal results, subnormal ones, zeros) and the specials.
TEST(VectorMath, ExpOfSubnormalResultsOnEveryTarget) {
  std::vector<float> x;
  for (int k = 0; k < 4001; ++k) x.push_back(-112.0f + 27.0f * static_cast<float>(k) / 4000.0f);
  for (int k = 0; k < 200; ++k) x.push_back(k % 3 == 0 ? -1.5f : k % 3 == 1 ? -200.0f : -95.25f);
  const float edges[] = {-87.0f,      std::nextafter(-87.0f, -100.0f),
                         -87.336544f, -103.972077f,
                         -103.97208f, -103.9f,
                         -110.0f,     -kInf,
                         kNaN,        0.0f};
  x.insert(x.end(), std::begin(edges), std::end(edges));
  const int n = static_cast<int>(x.size());
  const int tried = tessera::testing::on_every_vector_target([&](const char* target) {
    std::vector<float> o(x.size());
    vref(o, {n}) = jnp::exp(vref(x, {n}));
    for (size_t k = 0; k < x.size(); ++k) {
      const float want = static_cast<float>(std::exp(static_cast<double>(x[k])));
      if (std::isnan(x[k])) {
        ASSERT_TRUE(std::isnan(o[k])) << target;
        continue;
      }
      ASSERT_LE(ulp_diff(o[k], want), 1)
          << target << ": exp(" << x[k] << ") = " << o[k] << ", want " << want;
    }
  });
  EXPECT_GE(tried, 1);
}

// exp of vectors whose lanes all lie in [-87, 88] (src/native/vector_math-inl.h, ExpNormal), or
// there and below ln(2^-150) = -103.97 (attention's masked scores: exactly 0), on every SIMD
// target: within 1 ULP of the correctly rounded result, the low lanes +0, and the edges of both
// ranges in every lane position.
TEST(VectorMath, ExpOfNormalResultsAndMaskedZerosOnEveryTarget) {
  std::vector<float> x;
  const float low[] = {-1e30f, -kInf, -200.0f, std::nextafter(-103.972077f, -200.0f), -110.0f};
  for (int k = 0; k < 4096; ++k) {
    const float v = -87.0f + 175.0f * static_cast<float>(k % 1024) / 1023.0f;  // [-87, 88]
    x.push_back(k < 1024 || k % 5 != 0 ? v : low[(k / 5) % 5]);
  }
  for (const float e :
       {-87.0f, 88.0f, std::nextafter(88.0f, 0.0f), 88.5f, 88.7f, -86.99f, -87.2f, 0.0f, -0.0f}) {
    for (int lane = 0; lane < 16; ++lane) x.push_back(lane % 2 ? e : -kInf);
  }
  const int n = static_cast<int>(x.size());
  const int tried = tessera::testing::on_every_vector_target([&](const char* target) {
    std::vector<float> o(x.size());
    vref(o, {n}) = jnp::exp(vref(x, {n}));
    for (size_t k = 0; k < x.size(); ++k) {
      if (x[k] < -103.972077f) {
        ASSERT_EQ(std::signbit(o[k]), false) << target << ": exp(" << x[k] << ")";
        ASSERT_EQ(o[k], 0.0f) << target << ": exp(" << x[k] << ")";
        continue;
      }
      const float want = static_cast<float>(std::exp(static_cast<double>(x[k])));
      ASSERT_LE(ulp_diff(o[k], want), 1)
          << target << ": exp(" << x[k] << ") = " << o[k] << ", want " << want;
    }
  });
  EXPECT_GE(tried, 1);
}

TEST(VectorMath, Bfloat16TranscendentalsRoundOnce) {
  const int n = 999;
  auto xf = sample(n, -6.0f, 6.0f);
  std::vector<bfloat16> x(xf.begin(), xf.end()), o(x.size());
  vref(o, {n}) = jnp::tanh(vref(x, {n})) + 1.0f;  // two nodes, each rounds to bfloat16
  for (size_t k = 0; k < x.size(); ++k) {
    const float xv = static_cast<float>(x[k]);
    const bfloat16 t(static_cast<float>(std::tanh(static_cast<double>(xv))));
    const float want = static_cast<float>(bfloat16(static_cast<float>(t) + 1.0f));
    // One bfloat16 ULP: the float32 tanh may round to the other side of a bfloat16 tie.
    ASSERT_LE(std::fabs(static_cast<float>(o[k]) - want), std::ldexp(std::fabs(want), -7)) << xv;
  }
  static_assert(std::is_same_v<detail::ValueOf<decltype(jnp::exp(vref(x, {n})))>, bfloat16>);
  std::vector<int32_t> i = {0, 1, 2};
  std::vector<float> f(3);
  vref(f, {3}) = jnp::exp(vref(i, {3}));  // integers are taken as float32
  EXPECT_NEAR(f[2], std::exp(2.0f), 1e-6f);
}

TEST(VectorMath, PowerAndIntegerPow) {
  auto x = sample(257, 0.1f, 3.0f);
  std::vector<float> y = sample(257, -2.0f, 2.0f), o(x.size());
  auto xr = vref(x, {257});
  auto orf = vref(o, {257});
  orf = jnp::power(xr, vref(y, {257}));
  for (size_t k = 0; k < x.size(); ++k) ASSERT_LE(ulp_diff(o[k], std::pow(x[k], y[k])), 2) << k;
  orf = jnp::power(xr, 3);  // an integer scalar exponent is lax.integer_pow
  for (size_t k = 0; k < x.size(); ++k) ASSERT_EQ(o[k], x[k] * x[k] * x[k]) << k;
  orf = lax::integer_pow(xr, -2);
  for (size_t k = 0; k < x.size(); ++k) ASSERT_EQ(o[k], 1.0f / (x[k] * x[k])) << k;
  orf = lax::integer_pow(xr, 0);
  EXPECT_EQ(o[5], 1.0f);
  std::vector<int32_t> a = {-3, 2, 5, -1}, e = {3, 10, 0, -3}, io(4);
  vref(io, {4}) = jnp::power(vref(a, {4}), vref(e, {4}));
  EXPECT_EQ(io, (std::vector<int32_t>{-27, 1024, 1, -1}));
  vref(io, {4}) = lax::integer_pow(vref(a, {4}), 2);
  EXPECT_EQ(io, (std::vector<int32_t>{9, 4, 25, 1}));
  const int line = __LINE__ + 1;
  EXPECT_TESSERA_ERROR(vref(io, {4}) = lax::integer_pow(vref(a, {4}), -1), UsageError,
                       ErrorKind::kInvalidArgument, "negative power -1", line);
}

TEST(VectorMath, ClipAndClamp) {
  for (int n : kSizes) {
    auto x = sample(n, -3.0f, 3.0f);
    std::vector<float> o(x.size());
    vref(o, {n}) = jnp::clip(vref(x, {n}), -1.0f, 1.5f);
    for (size_t k = 0; k < x.size(); ++k) ASSERT_EQ(o[k], std::min(std::max(x[k], -1.0f), 1.5f));
    vref(o, {n}) = lax::clamp(0.0f, vref(x, {n}), 2.0f);
    for (size_t k = 0; k < x.size(); ++k) ASSERT_EQ(o[k], std::min(std::max(x[k], 0.0f), 2.0f));
  }
  std::vector<int8_t> b = {-100, 0, 100}, lo = {-5, -5, -5}, bo(3);
  vref(bo, {3}) = jnp::clip(vref(b, {3}), vref(lo, {3}), int8_t{50});
  EXPECT_EQ(bo, (std::vector<int8_t>{-5, 0, 50}));
}

TEST(VectorMath, CompoundAssignment) {
  std::vector<float> acc(8 * 128, 1.0f), x(8 * 128), row(128);
  for (size_t k = 0; k < x.size(); ++k) x[k] = static_cast<float>(k % 13);
  for (size_t k = 0; k < row.size(); ++k) row[k] = static_cast<float>(k);
  auto a = vref(acc, {8, 128});
  auto xr = vref(x, {8, 128});
  a += xr;
  a *= 2.0f;
  a -= vref(row, {128});  // broadcast row
  a /= 4.0f;
  for (size_t k = 0; k < acc.size(); ++k)
    ASSERT_EQ(acc[k], ((1.0f + x[k]) * 2.0f - row[k % 128]) / 4.0f) << k;
  a += jnp::maximum(xr, 5.0f) * 0.0f;  // an expression
  std::vector<int32_t> i = {1, 2, 3};
  auto ir = vref(i, {3});
  ir += 10;
  ir *= ir;
  EXPECT_EQ(i, (std::vector<int32_t>{121, 144, 169}));
}

TEST(VectorMath, BroadcastLeadingDimsAndUnitDims) {
  std::vector<float> x(2 * 1 * 3 * 5), y(5), z(3 * 1), o(2 * 4 * 3 * 5);
  for (size_t k = 0; k < x.size(); ++k) x[k] = static_cast<float>(k);
  for (size_t k = 0; k < y.size(); ++k) y[k] = static_cast<float>(k) * 100.0f;
  for (size_t k = 0; k < z.size(); ++k) z[k] = static_cast<float>(k) * 1000.0f;
  vref(o, {2, 4, 3, 5}) = vref(x, {2, 1, 3, 5}) + vref(y, {5}) + vref(z, {3, 1});
  for (int a = 0; a < 2; ++a)
    for (int b = 0; b < 4; ++b)
      for (int c = 0; c < 3; ++c)
        for (int d = 0; d < 5; ++d)
          ASSERT_EQ(o[static_cast<size_t>(((a * 4 + b) * 3 + c) * 5 + d)],
                    x[static_cast<size_t>((a * 3 + c) * 5 + d)] + y[static_cast<size_t>(d)] +
                        z[static_cast<size_t>(c)]);
  std::vector<float> bad(4);
  auto err = tessera::testing::catch_error<UsageError>([&] {
    vref(o, {2, 4, 3, 5}) = jnp::maximum(vref(x, {2, 1, 3, 5}), vref(bad, {4}));
  });
  ASSERT_TRUE(err);
  EXPECT_EQ(err->kind(), ErrorKind::kShapeMismatch);
  EXPECT_NE(std::string(err->what()).find("maximum"), std::string::npos) << err->what();
}

TEST(VectorMath, CreationFunctions) {
  std::vector<float> o(8 * 3);
  vref(o, {8, 3}) = jnp::ones<float>({8, 1}) * 2.0f + jnp::zeros<float>({3});
  for (float v : o) ASSERT_EQ(v, 2.0f);
  std::vector<float> a(4);
  vref(a, {4}) = jnp::arange<float>(0.0f, 1.0f, 0.25f);
  EXPECT_EQ(a, (std::vector<float>{0.0f, 0.25f, 0.5f, 0.75f}));
  std::vector<int32_t> i(3);
  vref(i, {3}) = jnp::arange<int32_t>(10, 4, -2);
  EXPECT_EQ(i, (std::vector<int32_t>{10, 8, 6}));
  const int line = __LINE__ + 1;
  EXPECT_TESSERA_ERROR(vref(i, {3}) = jnp::arange<int32_t>(0, 3, 0), UsageError,
                       ErrorKind::kInvalidArgument, "step is 0", line);
}

TEST(VectorMath, InsideAKernel) {
  // The quickstart's shape of kernel: compute on VMEM scratch, on every core.
  auto k =
      pl::kernel(pl::out_type<float>({8, 128}), pltpu::TensorCoreMesh("core", 2),
                 pl::scratch_types(pltpu::VMEM<float>({8, 128}), pltpu::VMEM<int32_t>({8, 128})))(
          [](pltpu::HbmRef<float> o, pltpu::VmemRef<float> v, pltpu::VmemRef<int32_t> iv) {
            iv = lax::broadcasted_iota<int32_t>({8, 128}, 1) % 7 - 3;
            v = jnp::where(iv > 0, lax::logistic(iv.astype<float>()), jnp::abs(iv).astype<float>());
            pltpu::run_on_first_core("core", [&] { pltpu::sync_copy(v, o); });
          });
  Array<float> out = k();
  for (int r = 0; r < 8; ++r)
    for (int c = 0; c < 128; ++c) {
      const int i = c % 7 - 3;
      const float want = i > 0 ? 1.0f / (1.0f + std::exp(-static_cast<float>(i)))
                               : static_cast<float>(std::abs(i));
      ASSERT_NEAR(out(r, c), want, 1e-6f) << r << "," << c;
    }
}

}  // namespace
