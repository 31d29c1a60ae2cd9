// Trees on the native evaluator's fused path (src/native/vector_fused_tree-inl.h): a float32
// expression of any shape over + - * / maximum minimum and the float unary ops, each operand a
// row, a per-row scalar, a (1, cols) row broadcast over the rows or a constant, must give bit for
// bit the tile evaluator's result (the same statement with the fused path turned off), over 2-D
// and 3-D shapes with row tails, values with NaN and infinities, into a window of a wider buffer,
// on every SIMD target and in checked mode; and the statements the fused trees take must have
// been taken by them (detail::g_fused_trees_for_test), the others left to the tile evaluator.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <string>
#include <utility>
#include <vector>

#include "native/vector_plan.h"
#include "support/fused_compare.h"
#include "support/vector_targets.h"
#include "tessera/tessera.h"

namespace {
using namespace tessera;

using tessera::testing::FusedPath;
using Path = FusedPath;

bool g_checked = false;  // the tests run in checked mode: no path to check there

// tessera::testing::compare_fused, the path checked on the native engine only.
template <class Body>
void compare(const std::string& what, Shape s, Path path, Body body) {
  tessera::testing::compare_fused(what, s, g_checked ? Path::kAny : path, body);
}

using R = pltpu::VmemRef<const float>;
using W = pltpu::VmemRef<float>;

// Every unary op the fused trees take, inside a tree (both its operand and its result combined
// with other subtrees).
void check_unary(const std::string& how, Shape s) {
  auto each = [&](const std::string& name, auto f) {
    compare(how + ": " + name + " in a tree", s, Path::kTree,
            [f](R x, R y, R sc, W o) { o = f(x * 0.25f - sc) * y + f(y); });
  };
  each("neg", [](auto v) { return -std::move(v); });
  each("abs", [](auto v) { return jnp::abs(std::move(v)); });
  each("sign", [](auto v) { return jnp::sign(std::move(v)); });
  each("square", [](auto v) { return jnp::square(std::move(v)); });
  each("sqrt", [](auto v) { return jnp::sqrt(std::move(v)); });
  each("rsqrt", [](auto v) { return lax::rsqrt(std::move(v)); });
  each("exp", [](auto v) { return jnp::exp(std::move(v)); });
  each("exp2", [](auto v) { return jnp::exp2(std::move(v)); });
  each("log", [](auto v) { return jnp::log(std::move(v)); });
  each("log1p", [](auto v) { return jnp::log1p(std::move(v)); });
  each("tanh", [](auto v) { return jnp::tanh(std::move(v)); });
  each("logistic", [](auto v) { return lax::logistic(std::move(v)); });
  each("sin", [](auto v) { return jnp::sin(std::move(v)); });
  each("cos", [](auto v) { return jnp::cos(std::move(v)); });
  each("erf", [](auto v) { return lax::erf(std::move(v)); });
  each("floor", [](auto v) { return jnp::floor(std::move(v)); });
  each("ceil", [](auto v) { return jnp::ceil(std::move(v)); });
  each("round", [](auto v) { return jnp::round(std::move(v)); });
  each("integer_pow 3", [](auto v) { return lax::integer_pow(std::move(v), 3); });
  each("integer_pow -2", [](auto v) { return lax::integer_pow(std::move(v), -2); });
}

void check_trees(const std::string& how, Shape s) {
  compare(how + ": tanh-GELU", s, Path::kTree, [](R x, R, R, W o) {
    o = 0.5f * x * (1.0f + jnp::tanh(0.7978846f * (x + 0.044715f * x * x * x)));
  });
  // Every binary op with its inputs in every place: a row, a scalar, a subtree's lane buffer.
  auto each = [&](const std::string& name, auto f) {
    compare(how + ": " + name + " of subtrees", s, Path::kTree,
            [f](R x, R y, R, W o) { o = f(x + y, x * y); });
    compare(how + ": " + name + " of a subtree and a row", s, Path::kTree,
            [f](R x, R y, R, W o) { o = f(x - y, y) + f(x, x * 3.0f); });
    compare(how + ": " + name + " of a subtree and a scalar", s, Path::kTree,
            [f](R x, R, R sc, W o) { o = f(x * 0.5f, sc) - f(2.0f, x + 1.0f); });
    compare(how + ": " + name + " of a scalar and a row", s, Path::kTree,
            [f](R x, R, R sc, W o) { o = f(sc, x) * f(x, -1.5f); });
  };
  each("add", [](auto a, auto b) { return std::move(a) + std::move(b); });
  each("sub", [](auto a, auto b) { return std::move(a) - std::move(b); });
  each("mul", [](auto a, auto b) { return std::move(a) * std::move(b); });
  each("div", [](auto a, auto b) { return std::move(a) / std::move(b); });
  each("maximum", [](auto a, auto b) { return jnp::maximum(std::move(a), std::move(b)); });
  each("minimum", [](auto a, auto b) { return jnp::minimum(std::move(a), std::move(b)); });
  // Shapes of trees: deeper on the left, on the right, balanced, four levels (four lane buffers)
  // and five (more than the fused trees hold: the tile evaluator).
  compare(how + ": deeper left", s, Path::kTree,
          [](R x, R y, R, W o) { o = ((x + y) * (x - y) + (y * 2.0f)) / (x + 3.0f); });
  compare(how + ": deeper right", s, Path::kTree,
          [](R x, R y, R, W o) { o = (x + 3.0f) - ((x + y) * (x - y) + (y * 2.0f)); });
  auto level2 = [](R x, R y, R sc) { return (x + y) * (y - sc); };
  auto level3 = [level2](R x, R y, R sc) { return level2(x, y, sc) - level2(y, x, sc); };
  auto level4 = [level3](R x, R y, R sc) { return level3(x, y, sc) / level3(y, x, sc); };
  compare(how + ": four levels", s, Path::kTree,
          [level4](R x, R y, R sc, W o) { o = level4(x, y, sc) * 0.5f; });
  compare(how + ": five levels (tile evaluator)", s, Path::kTile,
          [level4](R x, R y, R sc, W o) { o = level4(x, y, sc) + level4(y, x, sc); });
  // 32 ops fused, 33 not.
  auto e7 = [](R x, R y, R sc) { return ((((x + y) * sc - x) / 3.0f + y) * 0.5f - sc); };
  compare(how + ": 32 ops", s, Path::kTree, [e7](R x, R y, R sc, W o) {
    o = e7(x, y, sc) * e7(y, x, sc) + e7(x, x, sc) * e7(y, y, sc) - 1.0f;
  });
  compare(how + ": 33 ops (tile evaluator)", s, Path::kTile, [e7](R x, R y, R sc, W o) {
    o = e7(x, y, sc) * e7(y, x, sc) + e7(x, x, sc) * e7(y, y, sc) - 1.0f - y;
  });
  // A normalisation, with a subtree of scalars only, and operands given twice.
  compare(how + ": (x - s) * rsqrt(s * s + eps) * 1.5 + 0.5", s, Path::kTree,
          [](R x, R, R sc, W o) { o = (x - sc) * lax::rsqrt(sc * sc + 1e-5f) * 1.5f + 0.5f; });
  // Subtrees of per-row scalars run once a row: eight of them, nine (the tile evaluator), one
  // needing two lane buffers, unary ops of scalars.
  compare(how + ": eight per-row subtrees", s, Path::kTree, [](R x, R y, R sc, W o) {
    o = (x * (sc * 2.0f) + y * (sc + 3.0f)) * (x - 4.0f) - (y / (sc * 5.0f)) +
        (jnp::exp(sc) + x) * (x * jnp::sqrt(sc) - lax::integer_pow(sc, 2) * y) +
        (9.0f - sc) * (y + jnp::maximum(sc, 1.0f));
  });
  compare(how + ": nine per-row subtrees (tile evaluator)", s, Path::kTile,
          [](R x, R y, R sc, W o) {
            o = (x * (sc * 2.0f) + y * (sc + 3.0f)) * (x - 4.0f) - (y / (sc * 5.0f)) +
                (jnp::exp(sc) + x) * (x * jnp::sqrt(sc) - lax::integer_pow(sc, 2) * y) +
                (9.0f - sc) * (y + jnp::maximum(sc, 1.0f)) + (sc + 8.0f);
          });
  compare(how + ": a per-row subtree of two levels", s, Path::kTree, [](R x, R, R sc, W o) {
    o = x * ((sc + 1.0f) * (sc - 2.0f) - (sc * 3.0f) / (sc + 4.0f)) + x;
  });
  compare(how + ": x * x * x * x", s, Path::kTree, [](R x, R, R, W o) { o = x * x * (x * x); });
  compare(how + ": sixteen operands", s, Path::kTree, [](R x, R y, R sc, W o) {
    o = (x * 1.0f + y * 2.0f) * (sc + 3.0f) - (x * 4.0f - y * 5.0f) / (sc * 6.0f) +
        jnp::maximum(x, 7.0f) * 8.0f - (9.0f - y) * (10.0f + x) + (11.0f * sc - 12.0f) * 13.0f;
  });
  compare(how + ": seventeen operands (tile evaluator)", s, Path::kTile, [](R x, R y, R sc, W o) {
    o = (x * 1.0f + y * 2.0f) * (sc + 3.0f) - (x * 4.0f - y * 5.0f) / (sc * 6.0f) +
        jnp::maximum(x, 7.0f) * 8.0f - (9.0f - y) * (10.0f + x) + (11.0f * sc - 12.0f) * 13.0f +
        14.0f;
  });
  compare(how + ": scalars only (tile evaluator)", s, Path::kTile,
          [](R, R, R sc, W o) { o = jnp::exp(sc * 2.0f) + sc * sc; });
  compare(how + ": a conversion (tile evaluator)", s, Path::kTile,
          [](R x, R y, R, W o) { o = (x * 2.0f).astype<bfloat16>().astype<float>() + y; });
  compare(how + ": a remainder (tile evaluator)", s, Path::kTile,
          [](R x, R y, R, W o) { o = jnp::remainder(x, y) + x; });
  if (s.rank() == 2) {  // a (1, cols) row broadcast over the rows (a layer norm's weights)
    compare(how + ": (x - s) * s * w + (w * 0.5)", s, Path::kTree, [](R x, R y, R sc, W o) {
      auto w = y.at(pl::ds(0, 1), pl::all);
      o = (x - sc) * sc * w + w * 0.5f;
    });
  }
}

// Masks: comparisons of floats (NaN and infinities among them) and of int32 iotas, bools combined
// by & | ^, selects of floats and of ints, float iotas; the last axis is the row.
void check_masks(const std::string& how, Shape s) {
  const int last = s.rank() - 1;
  auto each = [&](const std::string& name, auto cmp) {
    compare(how + ": where(x " + name + " y / 2)", s, Path::kTree,
            [cmp](R x, R y, R, W o) { o = jnp::where(cmp(x, y * 0.5f), x, y); });
    compare(how + ": where(row " + name + " col)", s, Path::kTree, [cmp, last](R x, R y, R, W o) {
      auto row = 3 + lax::broadcasted_iota<int32_t>(x.shape(), last - 1);
      auto col = lax::broadcasted_iota<int32_t>(x.shape(), last) * 2 - 7;
      o = jnp::where(cmp(std::move(row), std::move(col)), x - y, y * 3.0f);
    });
  };
  each("==", [](auto a, auto b) { return std::move(a) == std::move(b); });
  each("!=", [](auto a, auto b) { return std::move(a) != std::move(b); });
  each("<", [](auto a, auto b) { return std::move(a) < std::move(b); });
  each("<=", [](auto a, auto b) { return std::move(a) <= std::move(b); });
  each(">", [](auto a, auto b) { return std::move(a) > std::move(b); });
  each(">=", [](auto a, auto b) { return std::move(a) >= std::move(b); });
  compare(how + ": a causal mask", s, Path::kTree, [last](R x, R, R, W o) {
    auto q = 256 + lax::broadcasted_iota<int32_t>(x.shape(), last - 1);
    auto k = 240 + lax::broadcasted_iota<int32_t>(x.shape(), last);
    o = jnp::where(std::move(q) >= std::move(k), x * 0.125f, -1e30f);
  });
  compare(how + ": a local window (& | ^ of masks)", s, Path::kTree, [last](R x, R y, R, W o) {
    auto r = lax::broadcasted_iota<int32_t>(x.shape(), last - 1);
    auto c = lax::broadcasted_iota<int32_t>(x.shape(), last);
    o = jnp::where(((r >= c) & (r - c < 8)) | ((x > y) ^ (y < 0.0f)), x, y);
  });
  compare(how + ": int ops and an int select", s, Path::kTree, [last](R x, R y, R, W o) {
    auto r = lax::broadcasted_iota<int32_t>(x.shape(), last - 1);
    auto c = lax::broadcasted_iota<int32_t>(x.shape(), last);
    auto m = jnp::maximum(r * 3, c) - jnp::minimum(r, c - 5) * 1000003;
    o = jnp::where(jnp::where(std::move(m) > 20, r, c) >= 4, x, y);
  });
  compare(how + ": one iota, two offsets", s, Path::kTree, [last](R x, R y, R, W o) {
    auto c = lax::broadcasted_iota<int32_t>(x.shape(), last);
    o = jnp::where((c + 3) * 2 > 9 + lax::broadcasted_iota<int32_t>(x.shape(), last), x, y);
  });
  compare(how + ": float iotas", s, Path::kTree, [last](R x, R, R, W o) {
    o = x * lax::broadcasted_iota<float>(x.shape(), last) +
        lax::broadcasted_iota<float>(x.shape(), last - 1) * 0.5f;
  });
  compare(how + ": a per-row condition", s, Path::kTree,
          [](R x, R y, R sc, W o) { o = jnp::where(sc > 0.0f, x, y) + jnp::where(x < sc, sc, y); });
  compare(how + ": iotas only", s, Path::kTree, [last](R x, R, R, W o) {
    o = jnp::where(lax::broadcasted_iota<int32_t>(x.shape(), last) > 5, 1.0f, 2.0f) +
        lax::broadcasted_iota<float>(x.shape(), last - 1);
  });
}

// A per-row subtree over a column strided between rows (column 0 of y): its rows' scalars are
// computed a row at a time, as with a float32 iota over the rows (check_masks); a contiguous
// column (sc) and an int32 iota over the rows take them a run of rows at a time.
void check_row_runs(const std::string& how, Shape s) {
  compare(how + ": a strided column in a per-row subtree", s, Path::kTree, [](R x, R y, R sc, W o) {
    auto yc = y.at(pl::all, pl::ds(0, 1));
    o = x * jnp::exp(yc * 0.25f) + (sc * 2.0f - 1.0f);
  });
  compare(how + ": int32 iota and a column in one per-row subtree", s, Path::kTree,
          [](R x, R, R sc, W o) {
            auto r = 5 + 3 * lax::broadcasted_iota<int32_t>(x.shape(), 0);
            o = jnp::where(r > 40, x, sc * 0.5f) - jnp::maximum(sc, 0.0f);
          });
}

void check_all(const std::string& how) {
  for (const Shape& s : {Shape{4, 37}, Shape{3, 128}, Shape{2, 300}, Shape{2, 3, 21}}) {
    check_unary(how, s);
    check_trees(how, s);
    check_masks(how, s);
    if (::testing::Test::HasFatalFailure()) return;
  }
  // Rows in runs (src/native/vector_fused_tree-inl.h, fused_tree): 37 rows (two vectors of rows
  // and a tail of rows), 300 (a run of 256 and one of 32 with AVX-512, then a tail).
  for (const Shape& s : {Shape{37, 20}, Shape{300, 17}}) {
    check_trees(how, s);
    check_masks(how, s);
    check_row_runs(how, s);
    if (::testing::Test::HasFatalFailure()) return;
  }
}

TEST(FusedTree, TreesMatchTheTileEvaluatorOnEveryTarget) {
  const int tried = tessera::testing::on_every_vector_target(
      [](const char* t) { check_all(std::string("target ") + t); });
  EXPECT_GE(tried, 1);
}

TEST(FusedTree, TreesMatchTheTileEvaluatorChecked) {
  const pltpu::ForceTpuInterpretMode force;
  g_checked = true;
  check_all("checked");
  g_checked = false;
}

// int32 refs as operands (a row and a per-row scalar), read as 32-bit lanes: fused against the
// tile evaluator, and the values against plain C++.
TEST(FusedTree, Int32RefsAreOperands) {
  for (const Shape& s : {Shape{4, 37}, Shape{3, 128}}) {
    const int64_t rows = s[0], cols = s[1];
    Array<int32_t> ir(s), is(Shape{rows, 1});
    Array<float> x(s);
    for (int64_t e = 0; e < ir.size(); ++e) {
      ir[e] = static_cast<int32_t>((e * 7919) % 201) - 100;
      x[e] = static_cast<float>(e % 17) - 8.0f;
    }
    for (int64_t r = 0; r < rows; ++r) is[r] = static_cast<int32_t>(r * 40 - 50);
    auto body = [](pltpu::VmemRef<const int32_t> a, pltpu::VmemRef<const int32_t> b, R xr, W o) {
      o = jnp::where((a * 3 - 5 >= jnp::maximum(a, b)) & (a != b), xr, -xr);
    };
    int64_t trees = 0;
    auto k = pl::pallas_call(
        [&](pltpu::VmemRef<const int32_t> a, pltpu::VmemRef<const int32_t> b, R xr, W fused,
            W tile) {
          const int64_t before = detail::g_fused_trees_for_test;
          body(a, b, xr, fused);
          trees = detail::g_fused_trees_for_test - before;
          const tessera::testing::TileEvaluatorOnly tile_only;
          body(a, b, xr, tile);
        },
        pl::out_shape(ShapeDtypeStruct<float>{s}, ShapeDtypeStruct<float>{s}));
    auto [fused, tile] = k(ir, is, x);
    EXPECT_GE(trees, 1) << s.to_string();
    for (int64_t r = 0; r < rows; ++r) {
      for (int64_t j = 0; j < cols; ++j) {
        const int64_t e = r * cols + j;
        const int32_t a = ir[e], b = is[r];
        const float want = (a * 3 - 5 >= std::max(a, b)) && a != b ? x[e] : -x[e];
        ASSERT_EQ(fused[e], want) << s.to_string() << " " << r << ", " << j;
        ASSERT_EQ(tile[e], want) << s.to_string() << " " << r << ", " << j;
      }
    }
  }
}

// The fused values are the plain ones: tanh-GELU and a normalisation against float math here.
TEST(FusedTree, ValuesAreThePlainOnes) {
  Array<float> x(Shape{2, 70});
  for (int64_t e = 0; e < x.size(); ++e) x[e] = static_cast<float>(e % 70 - 35) / 9.0f;
  auto k = pl::pallas_call(
      [](R xr, W g, W n) {
        g = 0.5f * xr * (1.0f + jnp::tanh(0.7978846f * (xr + 0.044715f * xr * xr * xr)));
        n = (xr - 0.25f) * lax::rsqrt(xr * xr + 1.0f) + xr * 2.0f;
      },
      pl::out_shape(ShapeDtypeStruct<float>{Shape{2, 70}}, ShapeDtypeStruct<float>{Shape{2, 70}}));
  auto [g, n] = k(x);
  for (int64_t e = 0; e < x.size(); ++e) {
    const double v = x[e];
    const double gelu = 0.5 * v * (1.0 + std::tanh(0.7978846 * (v + 0.044715 * v * v * v)));
    EXPECT_NEAR(g[e], gelu, 1e-5 * (1.0 + std::fabs(gelu))) << e;
    const double norm = (v - 0.25) / std::sqrt(v * v + 1.0) + v * 2.0;
    EXPECT_NEAR(n[e], norm, 1e-5 * (1.0 + std::fabs(norm))) << e;
  }
}

}  // namespace
