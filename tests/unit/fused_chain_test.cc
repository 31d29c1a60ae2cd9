// Chains on the native evaluator's fused path (src/native/vector_fused-inl.h): two-op chains
// d = (a op1 b) op2 c and c op2 (a op1 b) for op1, op2 in add, sub, mul (fused_chain), and longer
// chains of + - * / maximum minimum and exp with an operand on either side (which the fused trees
// take, src/native/vector_fused_tree-inl.h, tested with trees in fused_tree_test.cc), each
// operand a row, a per-row scalar or a constant, must give bit for bit the tile evaluator's
// result (the same statement with the fused path turned off), over 2-D and 3-D shapes with row
// tails, values with NaN and infinities, into a window of a wider buffer, on every SIMD target
// and in checked mode.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <string>
#include <vector>

#include "support/fused_compare.h"
#include "tessera/tessera.h"

namespace {
using namespace tessera;

using tessera::testing::fused_values;
using tessera::testing::same_lanes;

// The statement on the fused path against the tile evaluator (support/fused_compare.h).
template <class Body>
void compare(const std::string& what, Shape s, Body body) {
  tessera::testing::compare_fused(what, s, tessera::testing::FusedPath::kAny, body);
}

using R = pltpu::VmemRef<const float>;
using W = pltpu::VmemRef<float>;

void check_all(const std::string& how) {
  for (const Shape& s : {Shape{4, 37}, Shape{3, 128}, Shape{2, 3, 21}}) {
    // (a op1 b) op2 c, every pair of ops, all rows.
    compare(how + ": x * y + x", s, [](R x, R y, R, W o) { o = x * y + x; });
    compare(how + ": x * y - y", s, [](R x, R y, R, W o) { o = x * y - y; });
    compare(how + ": (x - y) * x", s, [](R x, R y, R, W o) { o = (x - y) * x; });
    compare(how + ": (x + y) - x", s, [](R x, R y, R, W o) { o = (x + y) - x; });
    compare(how + ": (x + y) * y", s, [](R x, R y, R, W o) { o = (x + y) * y; });
    compare(how + ": (x - y) + y", s, [](R x, R y, R, W o) { o = (x - y) + y; });
    // c op2 (a op1 b), per-row scalars and constants in every place.
    compare(how + ": x - y * s", s, [](R x, R y, R sc, W o) { o = x - y * sc; });
    compare(how + ": y * (x - s)", s, [](R x, R y, R sc, W o) { o = y * (x - sc); });
    compare(how + ": acc * alpha + p", s, [](R x, R y, R sc, W o) { o = x * sc + y; });
    compare(how + ": (x - mean) * rstd", s, [](R x, R, R sc, W o) { o = (x - sc) * sc; });
    compare(how + ": 2 - x * 0.5", s, [](R x, R, R, W o) { o = 2.0f - x * 0.5f; });
    compare(how + ": (s + 1) * x", s, [](R x, R, R sc, W o) { o = (sc + 1.0f) * x; });
    compare(how + ": s * s - x", s, [](R x, R, R sc, W o) { o = sc * sc - x; });
    // Longer chains: every op, operands on either side, exp inside, scalars and constants.
    compare(how + ": x * y / s", s, [](R x, R y, R sc, W o) { o = x * y / sc; });
    compare(how + ": max(x * 1.5 + 0.25, 0)", s,
            [](R x, R, R, W o) { o = jnp::maximum(x * 1.5f + 0.25f, 0.0f); });
    compare(how + ": (x - s) * s * y + x", s,
            [](R x, R y, R sc, W o) { o = (x - sc) * sc * y + x; });
    compare(how + ": 1 / (1 + exp(-x))", s,
            [](R x, R, R, W o) { o = 1.0f / (1.0f + jnp::exp(0.0f - x)); });
    compare(how + ": min(s, exp(x - s) * y) - 2", s,
            [](R x, R y, R sc, W o) { o = jnp::minimum(sc, jnp::exp(x - sc) * y) - 2.0f; });
    compare(how + ": y / max(x, s) / x", s,
            [](R x, R y, R sc, W o) { o = y / jnp::maximum(x, sc) / x; });
    compare(how + ": eight steps", s, [](R x, R y, R sc, W o) {
      o = ((((((x + y) * sc - x) / 3.0f + y) * 0.5f - sc) * y) + 1.0f) * x;
    });
    compare(how + ": nine steps", s, [](R x, R y, R sc, W o) {
      o = (((((((x + y) * sc - x) / 3.0f + y) * 0.5f - sc) * y) + 1.0f) * x) - y;
    });
    compare(how + ": a tree", s, [](R x, R y, R sc, W o) { o = (x + y) * (x - sc); });
    compare(how + ": scalars only", s, [](R, R, R sc, W o) { o = sc * 2.0f + sc; });
    if (s.rank() == 2) {  // a (1, cols) row broadcast over the rows (a layer norm's weights)
      compare(how + ": (x - s) * w + w", s, [](R x, R y, R sc, W o) {
        auto w = y.at(pl::ds(0, 1), pl::all);
        o = (x - sc) * w + w;
      });
      compare(how + ": max((x - s) * s * w + 1, 0)", s, [](R x, R y, R sc, W o) {
        auto w = y.at(pl::ds(1, 1), pl::all);
        o = jnp::maximum((x - sc) * sc * w + 1.0f, 0.0f);
      });
    }
    if (::testing::Test::HasFatalFailure()) return;
  }
}

TEST(FusedChain, TwoOpChainsMatchTheTileEvaluatorOnEveryTarget) {
  const int tried = tessera::testing::on_every_vector_target(
      [](const char* t) { check_all(std::string("target ") + t); });
  EXPECT_GE(tried, 1);
}

TEST(FusedChain, TwoOpChainsMatchTheTileEvaluatorChecked) {
  const pltpu::ForceTpuInterpretMode force;
  check_all("checked");
}

// The values themselves, against plain float arithmetic (the statement's order of ops).
TEST(FusedChain, ValuesAreThePlainOnes) {
  const Array<float> x = fused_values(Shape{3, 37}, 4), y = fused_values(Shape{3, 37}, 5);
  const Array<float> sc = fused_values(Shape{3, 1}, 6);
  auto k = pl::pallas_call([](R xr, R yr, R sr, W o) { o = xr * sr + yr; },
                           pl::out_shape<float>({3, 37}));
  const Array<float> o = k(x, y, sc);
  for (int64_t i = 0; i < 3; ++i) {
    for (int64_t j = 0; j < 37; ++j) {
      const float want = x(i, j) * sc(i, 0) + y(i, j);
      ASSERT_TRUE(same_lanes(o(i, j), want)) << i << ", " << j << ": " << o(i, j) << " / " << want;
    }
  }
}

// A destination whose outer axes do not merge into one run of rows (a window of the middle axis):
// the chain walks each 2-D slab's rows by pointer steps and the slabs from their index; the
// operands per-row scalars, rows and constants as above, against the tile evaluator.
TEST(FusedChain, SlabsOfADestinationWhoseOuterAxesDoNotMerge) {
  const Array<float> x = fused_values(Shape{3, 5, 37}, 7), y = fused_values(Shape{3, 5, 37}, 8);
  const Array<float> sc = fused_values(Shape{3, 5, 1}, 9);
  auto k = pl::pallas_call(
      [](R xr, R yr, R sr, W fused, W tile) {
        auto w = [](W r) { return r.at(pl::all, pl::ds(1, 5), pl::all); };  // (3, 5, 37) of 7
        w(fused) = xr * sr + yr;
        w(fused).at(pl::all, pl::all, pl::ds(0, 36)) =
            2.0f - xr.at(pl::all, pl::all, pl::ds(1, 36)) * sr;
        const tessera::testing::TileEvaluatorOnly tile_only;
        w(tile) = xr * sr + yr;
        w(tile).at(pl::all, pl::all, pl::ds(0, 36)) =
            2.0f - xr.at(pl::all, pl::all, pl::ds(1, 36)) * sr;
      },
      pl::out_shape(ShapeDtypeStruct<float>{{3, 7, 37}}, ShapeDtypeStruct<float>{{3, 7, 37}}));
  auto [fused, tile] = k(x, y, sc);
  for (int64_t a = 0; a < 3; ++a) {
    for (int64_t b = 1; b < 6; ++b) {
      for (int64_t j = 0; j < 37; ++j) {
        ASSERT_TRUE(same_lanes(fused(a, b, j), tile(a, b, j)))
            << a << ", " << b << ", " << j << ": " << fused(a, b, j) << " / " << tile(a, b, j);
      }
    }
  }
  EXPECT_TRUE(same_lanes(fused(2, 5, 36), x(2, 4, 36) * sc(2, 4, 0) + y(2, 4, 36)));
}

// A chain whose destination overlaps its operand one element further on: the whole right side is
// read before any of it is written, as numpy assigns (the two-op form and a longer one).
TEST(FusedChain, ADestinationOverlappingItsOperandGetsTheOldValues) {
  Array<float> x(Shape{4, 64});
  for (int64_t e = 0; e < x.size(); ++e) x[e] = static_cast<float>(e % 64);
  auto k = pl::pallas_call(
      [](R xr, W o) {
        o = xr * 1.0f;
        o.at(pl::all, pl::ds(1, 63)) = o.at(pl::all, pl::ds(0, 63)) * 2.0f + 1.0f;
        o.at(pl::all, pl::ds(0, 63)) =
            jnp::maximum(o.at(pl::all, pl::ds(1, 63)) * 0.5f - 1.0f, 0.0f) + 0.0f;
      },
      pl::out_shape<float>({4, 64}));
  const Array<float> o = k(x);
  std::vector<float> r(64), s(64);
  for (int j = 0; j < 64; ++j)
    s[static_cast<size_t>(j)] = j == 0 ? 0.0f : static_cast<float>(j - 1) * 2.0f + 1.0f;
  for (int j = 0; j < 64; ++j) {
    r[static_cast<size_t>(j)] =
        j == 63 ? s[63] : std::max(s[static_cast<size_t>(j + 1)] * 0.5f - 1.0f, 0.0f) + 0.0f;
  }
  for (int64_t i = 0; i < 4; ++i) {
    for (int64_t j = 0; j < 64; ++j)
      ASSERT_EQ(o(i, j), r[static_cast<size_t>(j)]) << i << ", " << j;
  }
}

}  // namespace
