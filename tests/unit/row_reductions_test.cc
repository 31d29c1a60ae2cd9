// Reductions along rows (jnp.max/min/sum over an axis, as softmax and flash attention take them)
// on the native evaluator's two ways in (src/native/vector_evaluate.cc, lower_node): a ref of
// 32-bit lanes laid out row-major is reduced where it lies, anything else (a strided window, an
// expression) through a temporary copy; and the row fold of src/native/vector_reduce_kernels.cc
// (four vector accumulators, NaNs noted aside) over row lengths below, at and past whole
// vectors, on every SIMD target and in checked mode; and rows folded 16 at a time, bit for bit
// as each row alone.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <optional>
#include <random>
#include <string>
#include <utility>
#include <vector>

#include "support/vector_targets.h"
#include "tessera/tessera.h"

namespace {
using namespace tessera;

const std::vector<int64_t> kLengths = {1,  7,  15,  16,  17,  31,  32,  33, 63,
                                       64, 65, 100, 127, 128, 129, 200, 513};

Array<float> random_rows(int64_t rows, int64_t cols, uint32_t seed) {
  std::mt19937 gen(seed);
  std::normal_distribution<float> dist(0.0f, 3.0f);
  Array<float> x(Shape{rows, cols});
  for (int64_t e = 0; e < x.size(); ++e) x[e] = dist(gen);
  return x;
}

enum class Op { kMax, kMin, kSum };
enum class Way { kInPlace, kWindow, kExpression };

const char* name(Op op) { return op == Op::kMax ? "max" : op == Op::kMin ? "min" : "sum"; }
const char* name(Way w) {
  return w == Way::kInPlace ? "in place" : w == Way::kWindow ? "window" : "expression";
}

// op over axis 1 of x's first `cols` columns, taken the way `way` says: the whole ref (x has
// exactly `cols` columns), a window of a ref 5 columns wider, or the expression x + 0.
template <class T>
Array<T> reduce_rows(const Array<T>& x, int64_t cols, Op op, Way way) {
  const int64_t rows = x.shape()[0];
  auto k = pl::pallas_call(
      [cols, op, way](pltpu::VmemRef<const T> x_ref, pltpu::VmemRef<T> o_ref) {
        auto apply = [&](auto&& operand) {
          if (op == Op::kMax) o_ref = jnp::max(std::forward<decltype(operand)>(operand), 1);
          if (op == Op::kMin) o_ref = jnp::min(std::forward<decltype(operand)>(operand), 1);
          if (op == Op::kSum) o_ref = jnp::sum(std::forward<decltype(operand)>(operand), 1);
        };
        if (way == Way::kInPlace) apply(x_ref);
        if (way == Way::kWindow) apply(x_ref.at(pl::all, pl::ds(0, cols)));
        if (way == Way::kExpression) apply(x_ref + T(0));
      },
      pl::out_shape<T>(Shape{rows}));
  return k(x);
}

// x widened by 5 columns of `fill` for the window's way.
Array<float> widened(const Array<float>& x, float fill) {
  const int64_t rows = x.shape()[0], cols = x.shape()[1];
  Array<float> w(Shape{rows, cols + 5});
  for (int64_t i = 0; i < rows; ++i)
    for (int64_t j = 0; j < cols + 5; ++j) w(i, j) = j < cols ? x(i, j) : fill;
  return w;
}

void check_floats(const std::string& how) {
  for (const int64_t cols : kLengths) {
    const Array<float> x = random_rows(3, cols, static_cast<uint32_t>(cols));
    for (const Op op : {Op::kMax, Op::kMin, Op::kSum}) {
      for (const Way way : {Way::kInPlace, Way::kWindow, Way::kExpression}) {
        // The window's extra columns would win a max or min taken over them by mistake.
        const float fill = op == Op::kMax ? 1e30f : op == Op::kMin ? -1e30f : 1e6f;
        const Array<float> y =
            reduce_rows(way == Way::kWindow ? widened(x, fill) : x, cols, op, way);
        for (int64_t i = 0; i < 3; ++i) {
          double want = op == Op::kSum ? 0.0 : x(i, 0);
          double magnitude = 0.0;
          for (int64_t j = 0; j < cols; ++j) {
            const double v = x(i, j);
            magnitude += std::fabs(v);
            if (op == Op::kMax) want = std::max(want, v);
            if (op == Op::kMin) want = std::min(want, v);
            if (op == Op::kSum) want += v;
          }
          const std::string at = how + ", " + name(op) + " " + name(way) + ", cols " +
                                 std::to_string(cols) + ", row " + std::to_string(i);
          if (op == Op::kSum) {
            ASSERT_NEAR(y[i], want, 1e-6 * magnitude + 1e-6) << at;
          } else {
            ASSERT_EQ(y[i], static_cast<float>(want)) << at;
          }
        }
      }
    }
  }
}

// A NaN anywhere in a row (the first vector, the body, the tail) makes its max and min NaN, in
// place and through a copy; infinities are ordinary values.
void check_specials(const std::string& how) {
  const float nan = std::numeric_limits<float>::quiet_NaN();
  const float inf = std::numeric_limits<float>::infinity();
  for (const int64_t cols :
       {int64_t{5}, int64_t{16}, int64_t{40}, int64_t{64}, int64_t{100}, int64_t{130}}) {
    for (const int64_t at : {int64_t{0}, cols / 2, cols - 1}) {
      Array<float> x = random_rows(2, cols, 7);
      x(0, at) = nan;
      x(1, at) = at % 2 == 0 ? inf : -inf;
      for (const Way way : {Way::kInPlace, Way::kExpression}) {
        const std::string w = how + ", " + name(way) + ", cols " + std::to_string(cols) +
                              ", special at " + std::to_string(at);
        const Array<float> mx = reduce_rows(x, cols, Op::kMax, way);
        const Array<float> mn = reduce_rows(x, cols, Op::kMin, way);
        ASSERT_TRUE(std::isnan(mx[0])) << w << ": " << mx[0];
        ASSERT_TRUE(std::isnan(mn[0])) << w << ": " << mn[0];
        if (at % 2 == 0) {
          ASSERT_EQ(mx[1], inf) << w;
          ASSERT_FALSE(std::isinf(mn[1])) << w;
        } else {
          ASSERT_EQ(mn[1], -inf) << w;
          ASSERT_FALSE(std::isinf(mx[1])) << w;
        }
      }
    }
  }
}

// int32 sums wrap; uint32 compares unsigned; both in place.
void check_integers(const std::string& how) {
  for (const int64_t cols : {int64_t{3}, int64_t{16}, int64_t{40}, int64_t{129}}) {
    Array<int32_t> a(Shape{2, cols});
    Array<uint32_t> u(Shape{2, cols});
    for (int64_t j = 0; j < cols; ++j) {
      a(0, j) = j == cols - 1 ? std::numeric_limits<int32_t>::max() : (j == 0 ? 1 : 0);
      a(1, j) = static_cast<int32_t>(j * 37 % 101) - 50;
      u(0, j) = static_cast<uint32_t>(j + 1);
      u(1, j) = static_cast<uint32_t>(j + 5);
    }
    u(0, cols / 2) = 0xFFFFFFF0u;
    const std::string w = how + ", cols " + std::to_string(cols);
    const Array<int32_t> s = reduce_rows(a, cols, Op::kSum, Way::kInPlace);
    ASSERT_EQ(s[0],
              cols == 1 ? std::numeric_limits<int32_t>::max() : std::numeric_limits<int32_t>::min())
        << w;
    int32_t mx = a(1, 0), mn = a(1, 0);
    for (int64_t j = 0; j < cols; ++j) {
      mx = std::max(mx, a(1, j));
      mn = std::min(mn, a(1, j));
    }
    ASSERT_EQ(reduce_rows(a, cols, Op::kMax, Way::kInPlace)[1], mx) << w;
    ASSERT_EQ(reduce_rows(a, cols, Op::kMin, Way::kInPlace)[1], mn) << w;
    const Array<uint32_t> umax = reduce_rows(u, cols, Op::kMax, Way::kInPlace);
    const Array<uint32_t> umin = reduce_rows(u, cols, Op::kMin, Way::kInPlace);
    ASSERT_EQ(umax[0], 0xFFFFFFF0u) << w;
    ASSERT_EQ(umin[1], 5u) << w;
  }
}

void check_all(const std::string& how) {
  check_floats(how);
  if (::testing::Test::HasFatalFailure()) return;
  check_specials(how);
  if (::testing::Test::HasFatalFailure()) return;
  check_integers(how);
}

TEST(RowReductions, MaxMinSumOfRowsOfEveryLengthOnEveryTarget) {
  const int tried = tessera::testing::on_every_vector_target(
      [](const char* target) { check_all(std::string("target ") + target); });
  EXPECT_GE(tried, 1);
}

TEST(RowReductions, MaxMinSumOfRowsOfEveryLengthChecked) {
  const pltpu::ForceTpuInterpretMode force;
  check_all("checked");
}

// The other ops that read a ref where it lies: a reduction over the leading axis and over all
// axes, a running sum and a roll, each against the same op on an expression (which is copied).
TEST(RowReductions, OtherOpsOnARefMatchTheSameOpsOnACopy) {
  const Array<float> x = random_rows(6, 40, 11);
  auto k = pl::pallas_call(
      [](pltpu::VmemRef<const float> x_ref, pltpu::VmemRef<float> a, pltpu::VmemRef<float> b,
         pltpu::VmemRef<float> c, pltpu::VmemRef<float> d, pltpu::VmemRef<float> e,
         pltpu::VmemRef<float> f, pltpu::VmemRef<float> g, pltpu::VmemRef<float> h) {
        a = jnp::max(x_ref, 0);
        b = jnp::max(x_ref + 0.0f, 0);
        c = jnp::sum(x_ref, {0, 1}, true);
        d = jnp::sum(x_ref + 0.0f, {0, 1}, true);
        e = jnp::cumsum(x_ref, 1);
        f = jnp::cumsum(x_ref + 0.0f, 1);
        g = pltpu::roll(x_ref, 3, 0);
        h = pltpu::roll(x_ref + 0.0f, 3, 0);
      },
      pl::out_shape(ShapeDtypeStruct<float>{{40}}, ShapeDtypeStruct<float>{{40}},
                    ShapeDtypeStruct<float>{{1, 1}}, ShapeDtypeStruct<float>{{1, 1}},
                    ShapeDtypeStruct<float>{{6, 40}}, ShapeDtypeStruct<float>{{6, 40}},
                    ShapeDtypeStruct<float>{{6, 40}}, ShapeDtypeStruct<float>{{6, 40}}));
  auto [a, b, c, d, e, f, g, h] = k(x);
  double total = 0;
  for (int64_t j = 0; j < 40; ++j) {
    float m = x(0, j);
    for (int64_t i = 0; i < 6; ++i) {
      m = std::max(m, x(i, j));
      total += x(i, j);
    }
    EXPECT_EQ(a[j], m) << j;
    EXPECT_EQ(b[j], m) << j;
  }
  EXPECT_EQ(c[0], d[0]);
  EXPECT_NEAR(c[0], total, 1e-3);
  for (int64_t i = 0; i < 6; ++i) {
    float run = 0;
    for (int64_t j = 0; j < 40; ++j) {
      run += x(i, j);
      EXPECT_EQ(e(i, j), run) << i << "," << j;
      EXPECT_EQ(f(i, j), run) << i << "," << j;
      EXPECT_EQ(g((i + 3) % 6, j), x(i, j)) << i << "," << j;
      EXPECT_EQ(h((i + 3) % 6, j), x(i, j)) << i << "," << j;
    }
  }
}

// A sum, max or min alone is reduced straight into a destination of its own shape, dtype and
// row-major layout (reduce_into, src/native/vector_evaluate.cc); one that overlaps the operand,
// or that the result broadcasts into, goes through a temporary and still gets the whole result.
TEST(RowReductions, StraightIntoTheDestinationOnlyWhereThatIsSafe) {
  for (const bool checked : {false, true}) {
    std::optional<pltpu::ForceTpuInterpretMode> force;
    if (checked) force.emplace();
    Array<float> x = random_rows(8, 40, 17);
    for (int64_t j = 0; j < 40; ++j) x(7, j) = 100.0f + static_cast<float>(j);  // the max, row 7
    auto k = pl::pallas_call(
        [](pltpu::VmemRef<const float> x_ref, pltpu::VmemRef<float> own, pltpu::VmemRef<float> o,
           pltpu::VmemRef<float> wide) {
          own = jnp::max(x_ref, 0, true);  // (1, 40): straight in
          o = x_ref[pl::ellipsis];
          o.at(pl::ds(7, 1), pl::all) = jnp::max(o, 0, true);  // row 7 of its own operand
          wide = jnp::sum(x_ref, 1, true);                     // (8, 1) broadcast to (8, 40)
        },
        pl::out_shape(ShapeDtypeStruct<float>{{1, 40}}, ShapeDtypeStruct<float>{{8, 40}},
                      ShapeDtypeStruct<float>{{8, 40}}));
    auto [own, o, wide] = k(x);
    for (int64_t j = 0; j < 40; ++j) {
      EXPECT_EQ(own(0, j), 100.0f + static_cast<float>(j)) << j << (checked ? " checked" : "");
      EXPECT_EQ(o(7, j), 100.0f + static_cast<float>(j)) << j << (checked ? " checked" : "");
    }
    for (int64_t i = 0; i < 8; ++i) {
      double sum = 0;
      for (int64_t j = 0; j < 40; ++j) sum += x(i, j);
      for (int64_t j = 0; j < 40; ++j) EXPECT_NEAR(wide(i, j), sum, 1e-3) << i << ", " << j;
    }
  }
}

// Rows folded 16 at a time (fold_rows, src/native/vector_reduce_kernels.cc) give every row the bits
// it gets alone: an (R, L) reduction against each of its rows reduced as a (1, L) array, for
// float32 rows of random values, of signed zeros only (which zero a max or min keeps depends on
// the order its lanes meet in), with infinities, and with a NaN in some rows; int32 rows whose
// sums wrap and uint32 rows past 2^31; row counts around 16 and lengths below, at and past whole
// vectors. And a reduction over an outer axis as well (the 16 rows' results combined into the
// ones before them, the runs of results at two places) against a float64 reference.
template <class T>
uint32_t bits_of(T v) {
  uint32_t b;
  std::memcpy(&b, &v, sizeof b);
  return b;
}

template <class T>
void check_rows_alone(const Array<T>& x, const std::string& how) {
  const int64_t rows = x.shape()[0], cols = x.shape()[1];
  for (const Op op : {Op::kMax, Op::kMin, Op::kSum}) {
    const Array<T> all = reduce_rows(x, cols, op, Way::kInPlace);
    for (int64_t i = 0; i < rows; ++i) {
      Array<T> row(Shape{1, cols});
      for (int64_t j = 0; j < cols; ++j) row(0, j) = x(i, j);
      const Array<T> alone = reduce_rows(row, cols, op, Way::kInPlace);
      ASSERT_EQ(bits_of(all[i]), bits_of(alone[0]))
          << how << ", " << name(op) << ", (" << rows << ", " << cols << "), row " << i << ": "
          << all[i] << " against " << alone[0];
    }
  }
}

void check_sixteen_rows(const std::string& how) {
  const float nan = std::numeric_limits<float>::quiet_NaN();
  const float inf = std::numeric_limits<float>::infinity();
  for (const int64_t rows : {int64_t{16}, int64_t{17}, int64_t{40}}) {
    for (const int64_t cols : {int64_t{7}, int64_t{16}, int64_t{31}, int64_t{64}, int64_t{100},
                               int64_t{128}, int64_t{130}, int64_t{513}}) {
      const std::string at = how + ", (" + std::to_string(rows) + ", " + std::to_string(cols) + ")";
      const uint32_t seed = static_cast<uint32_t>(rows * 1000 + cols);
      check_rows_alone(random_rows(rows, cols, seed), at + " random");
      std::mt19937 gen(seed);
      Array<float> zeros(Shape{rows, cols});
      for (int64_t e = 0; e < zeros.size(); ++e) zeros[e] = gen() % 2 ? 0.0f : -0.0f;
      check_rows_alone(zeros, at + " signed zeros");
      Array<float> special = random_rows(rows, cols, seed + 1);
      for (int64_t i = 0; i < rows; ++i) {
        const int64_t j = static_cast<int64_t>(gen() % static_cast<uint32_t>(cols));
        special(i, j) = i % 5 == 3 ? nan : i % 2 ? inf : -inf;
      }
      check_rows_alone(special, at + " specials");
      Array<int32_t> ints(Shape{rows, cols});
      Array<uint32_t> uints(Shape{rows, cols});
      for (int64_t e = 0; e < ints.size(); ++e) {
        ints[e] = static_cast<int32_t>(gen());
        uints[e] = static_cast<uint32_t>(gen());
      }
      check_rows_alone(ints, at + " int32");
      check_rows_alone(uints, at + " uint32");
      if (::testing::Test::HasFatalFailure()) return;
    }
  }
  // Axes 1 and 3 of (2, 3, 20, 128): each row's result meets the ones of the rows before it,
  // and the runs of 20 results lie at two places.
  std::mt19937 gen(5);
  std::normal_distribution<float> dist(0.0f, 3.0f);
  Array<float> x(Shape{2, 3, 20, 128});
  for (int64_t e = 0; e < x.size(); ++e) x[e] = dist(gen);
  for (const Op op : {Op::kMax, Op::kMin, Op::kSum}) {
    auto k = pl::pallas_call(
        [op](pltpu::VmemRef<const float> x_ref, pltpu::VmemRef<float> o_ref) {
          if (op == Op::kMax) o_ref = jnp::max(x_ref, {1, 3});
          if (op == Op::kMin) o_ref = jnp::min(x_ref, {1, 3});
          if (op == Op::kSum) o_ref = jnp::sum(x_ref, {1, 3});
        },
        pl::out_shape<float>(Shape{2, 20}));
    const Array<float> y = k(x);
    for (int64_t c = 0; c < 2; ++c) {
      for (int64_t b = 0; b < 20; ++b) {
        double want = op == Op::kSum ? 0.0 : x(c, 0, b, 0);
        for (int64_t a = 0; a < 3; ++a) {
          for (int64_t j = 0; j < 128; ++j) {
            const double v = x(c, a, b, j);
            want = op == Op::kMax   ? std::max(want, v)
                   : op == Op::kMin ? std::min(want, v)
                                    : want + v;
          }
        }
        const std::string at = how + ", axes (1, 3), " + name(op) + " at (" + std::to_string(c) +
                               ", " + std::to_string(b) + ")";
        if (op == Op::kSum) {
          ASSERT_NEAR(y(c, b), want, 1e-3) << at;
        } else {
          ASSERT_EQ(y(c, b), static_cast<float>(want)) << at;
        }
      }
    }
  }
}

TEST(RowReductions, SixteenRowsAtATimeGiveEachRowItsBitsAlone) {
  const int tried = tessera::testing::on_every_vector_target(
      [](const char* target) { check_sixteen_rows(std::string("target ") + target); });
  EXPECT_GE(tried, 1);
  const pltpu::ForceTpuInterpretMode force;
  check_sixteen_rows("checked");
}

}  // namespace
