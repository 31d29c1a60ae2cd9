// jnp::dot / lax::dot_general on VMEM refs: every dtype pair, ragged and 1-element shapes,
// transposed operands read in place, strided views, accumulation, overlapping destinations and
// errors, against double-precision reference loops. Float results are compared with a bound of
// the float32 accumulation error, (k + 2) * 2^-24 * sum_p |x_ip * y_pj| (plus the final rounding
// for bfloat16 results); integer results must be exact. Everything here runs on the calling thread
// (the file is in TESSERA_ONE_THREAD_TESTS); a dot inside a kernel on two cores is in
// pallas_call_test.cc.
#include <gtest/gtest.h>

#include <cmath>
#include <string>
#include <vector>

#include "native/gemm.h"
#include "support/dot_reference.h"
#include "support/expect_error.h"
#include "tessera/tessera.h"

namespace {
using namespace tessera;
using namespace tessera::testing;

struct Shape3 {
  int64_t m, k, n;
};
const Shape3 kShapes[] = {{1, 1, 1},      {1, 7, 1},    {3, 5, 7},      {2, 1, 9},
                          {8, 128, 128},  {17, 33, 65}, {64, 64, 64},   {1, 300, 2},
                          {130, 1, 129},  {5, 257, 3},  {128, 96, 144}, {40, 1024, 70},
                          {70, 1000, 40}, {3, 4100, 9}, {16, 256, 40},  {6, 256, 12}};

class DotModes : public ::testing::TestWithParam<detail::GemmMode> {
 protected:
  void SetUp() override { detail::set_gemm_mode(GetParam()); }
  void TearDown() override { detail::set_gemm_mode(detail::GemmMode::kAuto); }
};

// Every contracting-dimension pair on f32 and bf16, assigned and accumulated.
// `result_abs`: the result dtype's subnormal step (a rounded result below its smallest normal
// has that absolute precision, whatever its size).
template <class T, class P, class U = T>
void check_all_layouts(const std::string& name, double result_rel, double result_abs = 0.0) {
  uint32_t seed = 1;
  for (const Shape3& s : kShapes) {
    for (int lc : {1, 0}) {
      for (int rc : {0, 1}) {
        const Shape xs = lc == 1 ? Shape{s.m, s.k} : Shape{s.k, s.m};
        const Shape ys = rc == 0 ? Shape{s.k, s.n} : Shape{s.n, s.k};
        auto xv = random_values<T>(s.m * s.k, seed++);
        auto yv = random_values<U>(s.k * s.n, seed++);
        auto x = vref(xv, xs);
        auto y = vref(yv, ys);
        const Reference ref = reference(x, y, lc, rc);
        std::vector<P> ov(static_cast<size_t>(s.m * s.n), static_cast<P>(7.0f));
        auto o = vref(ov, {s.m, s.n});
        const std::string what = name + " (" + std::to_string(s.m) + ", " + std::to_string(s.k) +
                                 ", " + std::to_string(s.n) + ") contracting (" +
                                 std::to_string(lc) + ", " + std::to_string(rc) + ")";
        if (lc == 1 && rc == 0) {
          o = jnp::dot<P>(x, y);
        } else {
          o = lax::dot_general<P>(x, y, {{{lc}, {rc}}, {{}, {}}});
        }
        expect_close(o, ref, s.k, {}, result_rel, what + " =", result_abs);
        std::vector<double> before(ov.size());
        for (size_t e = 0; e < ov.size(); ++e) before[e] = static_cast<float>(ov[e]);
        o += lax::dot_general<P>(x, y, {{{lc - 2}, {rc - 2}}});  // negative dims, batch omitted
        expect_close(o, ref, s.k, before, result_rel * 2, what + " +=", result_abs * 2);
      }
    }
  }
}

TEST_P(DotModes, Float32AllLayouts) { check_all_layouts<float, float>("f32", 0.0); }

TEST_P(DotModes, BFloat16ToFloat32AllLayouts) {
  check_all_layouts<bfloat16, float>("bf16->f32", 0.0);
}

TEST_P(DotModes, BFloat16ResultIsRoundedOnce) {
  check_all_layouts<bfloat16, bfloat16>("bf16->bf16", std::ldexp(1.0, -8));
}

TEST_P(DotModes, Float16AllLayouts) {
  check_all_layouts<float16, float>("f16->f32", 0.0);
  check_all_layouts<float16, float16>("f16->f16", std::ldexp(1.0, -11), std::ldexp(1.0, -24));
}

// A float8 operand pairs with float32, bfloat16 or a float8 (lax.dot_general's mixed operands);
// both are widened to float32, exactly, so the float32 bound holds. The widening does not depend
// on the GEMM mode, and the float32 GEMM's modes are tested above: one mode here.
TEST(Dot, Float8AndMixedAllLayouts) {
  // A float8 result is rounded once (2 mantissa bits; its subnormal step below).
  check_all_layouts<float8_e5m2, float8_e5m2>("e5m2->e5m2", std::ldexp(1.0, -3),
                                              std::ldexp(1.0, -16));
  check_all_layouts<bfloat16, float, float8_e4m3b11fnuz>("bf16 x e4m3b11fnuz->f32", 0.0);
  check_all_layouts<float8_e4m3fn, bfloat16, float8_e5m2>("e4m3fn x e5m2->bf16",
                                                          std::ldexp(1.0, -8));
  // Without a preferred type two operands of one float8 give that float8, as jnp.dot.
  std::vector<float8_e4m3b11fnuz> a(4, float8_e4m3b11fnuz(1.5f)), c(4);
  static_assert(std::is_same_v<decltype(jnp::dot(vref(a, {2, 2}), vref(a, {2, 2})))::value_type,
                               float8_e4m3b11fnuz>);
  vref(c, {2, 2}) = jnp::dot(vref(a, {2, 2}), vref(a, {2, 2}));
  for (const auto& v : c) EXPECT_EQ(static_cast<float>(v), 4.5f);
  // A float32 operand is read in place (its strides), the other widened.
  std::vector<float> f = {1.0f, 2.0f, 3.0f, 4.0f, 5.0f, 6.0f};
  std::vector<float> o(6);
  vref(o, {3, 2}) =
      lax::dot_general<float>(vref(f, {2, 3}), vref(a, {2, 2}), {{{0}, {0}}, {{}, {}}});
  EXPECT_EQ(o, (std::vector<float>{7.5f, 7.5f, 10.5f, 10.5f, 13.5f, 13.5f}));  // f.T @ a
}

TEST_P(DotModes, Int8ToInt32IsExact) {
  uint32_t seed = 100;
  for (const Shape3& s : kShapes) {
    for (int lc : {1, 0}) {
      for (int rc : {0, 1}) {
        auto xv = random_values<int8_t>(s.m * s.k, seed++);
        auto yv = random_values<int8_t>(s.k * s.n, seed++);
        auto x = vref(xv, lc == 1 ? Shape{s.m, s.k} : Shape{s.k, s.m});
        auto y = vref(yv, rc == 0 ? Shape{s.k, s.n} : Shape{s.n, s.k});
        const Reference ref = reference(x, y, lc, rc);
        std::vector<int32_t> ov(static_cast<size_t>(s.m * s.n), 5);
        auto o = vref(ov, {s.m, s.n});
        o = lax::dot_general<int32_t>(x, y, {{{lc}, {rc}}});
        for (size_t e = 0; e < ov.size(); ++e) ASSERT_EQ(ov[e], ref.value[e]) << e;
        o += lax::dot_general<int32_t>(x, y, {{{lc}, {rc}}});
        for (size_t e = 0; e < ov.size(); ++e) ASSERT_EQ(ov[e], 2 * ref.value[e]) << e;
      }
    }
  }
}

// Sums that leave int32 wrap modulo 2^32 on every path (a TPU's int32 accumulator does).
TEST_P(DotModes, Int8SumsWrapInInt32) {
  constexpr int64_t m = 33, k = 4096 * 33, n = 17;  // 4096 * 33 * 127 * 127 > 2^31
  std::vector<int8_t> xv(static_cast<size_t>(m * k), 127), yv(static_cast<size_t>(k * n), 127);
  std::vector<int32_t> ov(static_cast<size_t>(m * n));
  auto o = vref(ov, {m, n});
  o = jnp::dot<int32_t>(vref(xv, {m, k}), vref(yv, {k, n}));
  const auto want = static_cast<int32_t>(static_cast<uint32_t>(k) * 127u * 127u);
  for (int32_t v : ov) ASSERT_EQ(v, want);
}

INSTANTIATE_TEST_SUITE_P(Gemm, DotModes,
                         ::testing::Values(detail::GemmMode::kAuto, detail::GemmMode::kNoAmx,
                                           detail::GemmMode::kPortable),
                         [](const auto& p) {
                           switch (p.param) {
                             case detail::GemmMode::kAuto:
                               return std::string("Auto");
                             case detail::GemmMode::kNoAmx:
                               return std::string("NoAmx");
                             default:
                               return std::string("Portable");
                           }
                         });

TEST(Dot, Int8ResultWraps) {
  std::vector<int8_t> xv{100, 100}, yv{2, 1};
  std::vector<int8_t> ov{0};
  auto o = vref(ov, {1, 1});
  o = jnp::dot(vref(xv, {1, 2}), vref(yv, {2, 1}));  // 300 wraps to 44
  EXPECT_EQ(ov[0], 44);
  o += jnp::dot(vref(xv, {1, 2}), vref(yv, {2, 1}));  // 44 + 44
  EXPECT_EQ(ov[0], 88);
}

TEST(Dot, StridedViewsAndSubTiles) {
  // Operands and destinations are sub-views of larger buffers: row strides != columns, and an
  // element stride of 2 along the columns of x.
  for (auto mode :
       {detail::GemmMode::kAuto, detail::GemmMode::kNoAmx, detail::GemmMode::kPortable}) {
    detail::set_gemm_mode(mode);
    auto big_x = random_values<float>(40 * 64, 7);
    auto big_y = random_values<float>(50 * 70, 8);
    std::vector<float> big_o(60 * 80, 3.0f);
    auto x = vref(big_x, {40, 64}).at(pl::ds(3, 21), pl::ds(1, 19, 2));  // (21, 19), strided
    auto y = vref(big_y, {50, 70}).at(pl::ds(5, 19), pl::ds(2, 33));     // (19, 33), ld 70
    auto o = vref(big_o, {60, 80}).at(pl::ds(10, 21), pl::ds(7, 33));    // (21, 33), ld 80
    const Reference ref = reference(x, y, 1, 0);
    o = jnp::dot(x, y);
    expect_close(o, ref, 19, {}, 0.0, "strided f32");
    EXPECT_EQ(big_o[0], 3.0f);  // untouched outside the view
    EXPECT_EQ(big_o[10 * 80 + 6], 3.0f);
    EXPECT_EQ(big_o[10 * 80 + 40], 3.0f);
    // A destination with a column stride of 2, accumulating.
    std::vector<float> wide(21 * 66, 1.0f);
    auto ow = vref(wide, {21, 66}).at(pl::all, pl::ds(0, 33, 2));
    ow += jnp::dot(x, y);
    expect_close(ow, ref, 19, std::vector<double>(21 * 33, 1.0), 0.0, "column-strided acc");
    EXPECT_EQ(wide[1], 1.0f);
    // bf16 operands through strided views.
    std::vector<bfloat16> bx(big_x.begin(), big_x.end());
    std::vector<bfloat16> by(big_y.begin(), big_y.end());
    auto xb = vref(bx, {40, 64}).at(pl::ds(3, 21), pl::ds(1, 19, 2));
    auto yb = vref(by, {50, 70}).at(pl::ds(5, 33), pl::ds(2, 19));  // (33, 19): y.T contracted
    const Reference refb = reference(xb, yb, 1, 1);
    o = lax::dot_general<float>(xb, yb, {{{1}, {1}}});
    expect_close(o, refb, 19, {}, 0.0, "strided bf16, transposed rhs");
    // int8 through the same views, and a transposed rhs with an element stride of 3.
    auto bi = random_values<int8_t>(40 * 64, 9);
    auto ci = random_values<int8_t>(50 * 70, 10);
    auto xi = vref(bi, {40, 64}).at(pl::ds(3, 21), pl::ds(1, 19, 2));
    auto yi = vref(ci, {50, 70}).at(pl::ds(2, 16, 3), pl::ds(2, 19));  // (16, 19)
    std::vector<int32_t> oi(21 * 16, 0);
    auto oir = vref(oi, {21, 16});
    oir = lax::dot_general<int32_t>(xi, yi, {{{1}, {1}}});
    const Reference refi = reference(xi, yi, 1, 1);
    for (size_t e = 0; e < oi.size(); ++e) ASSERT_EQ(oi[e], refi.value[e]) << e;
  }
  detail::set_gemm_mode(detail::GemmMode::kAuto);
}

// A view of (rows, cols) at (r0, c0) of a buffer of (rows_all, cols_all) elements.
struct Window {
  int64_t rows_all, cols_all, r0, c0;
};

// o = x @ y, then o += x @ y, with x (m, k), y (k, n) and o (m, n) each a view of a larger
// float32 buffer (row strides != columns), in every GEMM mode; the elements of o's buffer
// beside the view stay untouched.
void check_float32_views(int64_t m, int64_t k, int64_t n, Window wx, Window wy, Window wo,
                         uint32_t seed, const std::string& what) {
  auto big_x = random_values<float>(wx.rows_all * wx.cols_all, seed);
  auto big_y = random_values<float>(wy.rows_all * wy.cols_all, seed + 1);
  auto x = vref(big_x, {wx.rows_all, wx.cols_all}).at(pl::ds(wx.r0, m), pl::ds(wx.c0, k));
  auto y = vref(big_y, {wy.rows_all, wy.cols_all}).at(pl::ds(wy.r0, k), pl::ds(wy.c0, n));
  const Reference ref = reference(x, y, 1, 0);
  for (auto mode :
       {detail::GemmMode::kAuto, detail::GemmMode::kNoAmx, detail::GemmMode::kPortable}) {
    detail::set_gemm_mode(mode);
    std::vector<float> big_o(static_cast<size_t>(wo.rows_all * wo.cols_all), 5.0f);
    auto o = vref(big_o, {wo.rows_all, wo.cols_all}).at(pl::ds(wo.r0, m), pl::ds(wo.c0, n));
    o = jnp::dot(x, y);
    expect_close(o, ref, k, {}, 0.0, what + " =");
    std::vector<double> before(static_cast<size_t>(m * n));
    for (int64_t i = 0; i < m; ++i) {
      for (int64_t j = 0; j < n; ++j) before[static_cast<size_t>(i * n + j)] = at(o, i, j);
    }
    o += jnp::dot(x, y);
    expect_close(o, ref, k, before, 0.0, what + " +=");
    const auto elem = [&](int64_t r, int64_t c) {
      return big_o[static_cast<size_t>(r * wo.cols_all + c)];
    };
    EXPECT_EQ(elem(wo.r0, wo.c0 - 1), 5.0f) << what;  // untouched beside the view
    EXPECT_EQ(elem(wo.r0, wo.c0 + n), 5.0f) << what;
    EXPECT_EQ(elem(wo.r0 + m, wo.c0), 5.0f) << what;
  }
  detail::set_gemm_mode(detail::GemmMode::kAuto);
}

TEST(Dot, WideRhsInColumnPanelsThroughViews) {
  // A B of 4.3 MB, past half the L2 of any current x86 core, so that it is packed in column
  // panels (src/native/gemm.cc), with n = 32 panels and 2 columns.
  check_float32_views(128, 520, 2050, {136, 530, 4, 7}, {530, 2060, 3, 5}, {140, 2064, 6, 9}, 21,
                      "panels");
}

TEST(Dot, Int8TransposedRhsWithAPartialQuad) {
  // x @ y.T with y a view of a buffer whose rows (12 bytes) are whole 32-bit words and k = 10 is
  // not: the VNNI packing (src/native/gemm_int8.cc) transposes the whole quads as words and
  // gathers the last two bytes; also a k below one quad, in every GEMM mode.
  for (const int64_t k : {int64_t{10}, int64_t{3}}) {
    constexpr int64_t m = 9, n = 70;
    auto xv = random_values<int8_t>(m * k, 71);
    auto yv = random_values<int8_t>(n * 12, 72);
    auto x = vref(xv, {m, k});
    auto y = vref(yv, {n, 12}).at(pl::all, pl::ds(1, k));
    const Reference ref = reference(x, y, 1, 1);
    for (auto mode :
         {detail::GemmMode::kAuto, detail::GemmMode::kNoAmx, detail::GemmMode::kPortable}) {
      detail::set_gemm_mode(mode);
      std::vector<int32_t> ov(static_cast<size_t>(m * n), 7);
      auto o = vref(ov, {m, n});
      o = lax::dot_general<int32_t>(x, y, {{{1}, {1}}});
      for (size_t e = 0; e < ov.size(); ++e) ASSERT_EQ(ov[e], ref.value[e]) << k << " " << e;
      o += lax::dot_general<int32_t>(x, y, {{{1}, {1}}});
      for (size_t e = 0; e < ov.size(); ++e) ASSERT_EQ(ov[e], 2 * ref.value[e]) << k << " " << e;
    }
  }
  detail::set_gemm_mode(detail::GemmMode::kAuto);
}

TEST(Dot, LongLowPrecisionRhsInSlabsOfK) {
  // bfloat16 and int8 with a B past half the L2 of any current x86 core: without AMX the VNNI
  // kernels pack and multiply it a slab of k at a time (src/native/gemm.cc, gemm_int8.cc), the
  // last slab shorter; an odd k pads a pair, a transposed y goes through the word transposes
  // (17 rows: fewer would take the dot-product kernels of src/native/gemm_skinny.h).
  for (const bool transposed : {false, true}) {
    for (const int64_t k : {int64_t{4100}, int64_t{4103}}) {
      constexpr int64_t m = 17, n = 300;
      auto xv = random_values<bfloat16>(m * k, 81);
      auto yv = random_values<bfloat16>(k * n, 82);
      auto qv = random_values<int8_t>(m * k, 83);
      auto rv = random_values<int8_t>(k * n, 84);
      const Shape ys = transposed ? Shape{n, k} : Shape{k, n};
      const int rc = transposed ? 1 : 0;
      const Reference ref = reference(vref(xv, {m, k}), vref(yv, ys), 1, rc);
      const Reference iref = reference(vref(qv, {m, k}), vref(rv, ys), 1, rc);
      for (auto mode :
           {detail::GemmMode::kAuto, detail::GemmMode::kNoAmx, detail::GemmMode::kPortable}) {
        detail::set_gemm_mode(mode);
        std::vector<float> ov(static_cast<size_t>(m * n), 1.0f);
        auto o = vref(ov, {m, n});
        o += lax::dot_general<float>(vref(xv, {m, k}), vref(yv, ys), {{{1}, {rc}}});
        expect_close(o, ref, k, std::vector<double>(static_cast<size_t>(m * n), 1.0), 0.0,
                     "bf16 slabs");
        std::vector<int32_t> oi(static_cast<size_t>(m * n), 3);
        auto oir = vref(oi, {m, n});
        oir = lax::dot_general<int32_t>(vref(qv, {m, k}), vref(rv, ys), {{{1}, {rc}}});
        for (size_t e = 0; e < oi.size(); ++e) {
          ASSERT_EQ(oi[e], iref.value[e]) << k << " " << e << " mode " << static_cast<int>(mode);
        }
      }
    }
  }
  detail::set_gemm_mode(detail::GemmMode::kAuto);
}

TEST(Dot, LowPrecisionRhsInColumnPanels) {
  // bfloat16 with a B past half the L2 of any current x86 core, k shorter than four times its
  // columns and enough rows: without AMX the VNNI kernel packs B one column panel at a time for
  // the whole k and gives each panel every row of A (src/native/gemm.cc, xsmm_bf16_panels); the
  // panels are a multiple of 16 columns and the last one is narrower. An odd k pads a pair; a
  // transposed y with an even k goes through the word transposes; assigned and accumulated.
  constexpr int64_t m = 130, n = 1100;
  for (const int64_t k : {int64_t{1000}, int64_t{1001}}) {
    auto xv = random_values<bfloat16>(m * k, 85);
    auto yv = random_values<bfloat16>(k * n, 86);
    for (const bool transposed : {false, true}) {
      const Shape ys = transposed ? Shape{n, k} : Shape{k, n};
      const int rc = transposed ? 1 : 0;
      const Reference ref = reference(vref(xv, {m, k}), vref(yv, ys), 1, rc);
      for (auto mode : {detail::GemmMode::kAuto, detail::GemmMode::kNoAmx}) {
        detail::set_gemm_mode(mode);
        std::vector<float> ov(static_cast<size_t>(m * n), 1.0f);
        auto o = vref(ov, {m, n});
        o += lax::dot_general<float>(vref(xv, {m, k}), vref(yv, ys), {{{1}, {rc}}});
        expect_close(o, ref, k, std::vector<double>(static_cast<size_t>(m * n), 1.0), 0.0,
                     "bf16 panels, accumulated");
        o = lax::dot_general<float>(vref(xv, {m, k}), vref(yv, ys), {{{1}, {rc}}});
        expect_close(o, ref, k, {}, 0.0, "bf16 panels, assigned");
      }
    }
  }
  detail::set_gemm_mode(detail::GemmMode::kAuto);
}

TEST(Dot, FewRowsAgainstTransposedRhsInEveryRowBlock) {
  // x @ y.T with 1 to 16 rows, the dot-product kernels' row blocks (1 x 16, 2 x 8, 3 x 4 and 4 x 4
  // with a tail of rows, src/native/gemm_skinny.cc), columns that end inside a block, k below,
  // at and past one vector and past one pass of the L1; x a view whose rows are not k apart.
  // float32, bfloat16 and int8, assigned and accumulated, in every GEMM mode.
  uint32_t seed = 900;
  for (const int64_t m : {1, 2, 3, 4, 5, 8, 12, 16}) {
    for (const int64_t n : {1, 15, 17, 33}) {
      for (const int64_t k : {1, 63, 65, 600, 3000}) {
        auto fx = random_values<float>(m * (k + 3), seed++);
        auto fy = random_values<float>(n * k, seed++);
        auto bx = random_values<bfloat16>(m * (k + 3), seed++);
        auto by = random_values<bfloat16>(n * k, seed++);
        auto ix = random_values<int8_t>(m * (k + 3), seed++);
        auto iy = random_values<int8_t>(n * k, seed++);
        auto fxr = vref(fx, {m, k + 3}).at(pl::all, pl::ds(2, k));
        auto bxr = vref(bx, {m, k + 3}).at(pl::all, pl::ds(2, k));
        auto ixr = vref(ix, {m, k + 3}).at(pl::all, pl::ds(2, k));
        const Reference fref = reference(fxr, vref(fy, {n, k}), 1, 1);
        const Reference bref = reference(bxr, vref(by, {n, k}), 1, 1);
        const Reference iref = reference(ixr, vref(iy, {n, k}), 1, 1);
        const std::string what = "(" + std::to_string(m) + ", " + std::to_string(k) + ") x (" +
                                 std::to_string(n) + ", " + std::to_string(k) + ").T";
        for (auto mode :
             {detail::GemmMode::kAuto, detail::GemmMode::kNoAmx, detail::GemmMode::kPortable}) {
          detail::set_gemm_mode(mode);
          std::vector<float> fo(static_cast<size_t>(m * n), 3.0f), bo(fo);
          auto for_ = vref(fo, {m, n});
          auto bor = vref(bo, {m, n});
          for_ = lax::dot_general<float>(fxr, vref(fy, {n, k}), {{{1}, {1}}});
          expect_close(for_, fref, k, {}, 0.0, "f32 " + what);
          bor += lax::dot_general<float>(bxr, vref(by, {n, k}), {{{1}, {1}}});
          // Added to 3.0: one more float32 rounding.
          expect_close(bor, bref, k, std::vector<double>(bo.size(), 3.0), std::ldexp(1.0, -24),
                       "bf16 " + what);
          std::vector<int32_t> io(static_cast<size_t>(m * n), 5);
          auto ior = vref(io, {m, n});
          ior = lax::dot_general<int32_t>(ixr, vref(iy, {n, k}), {{{1}, {1}}});
          ior += lax::dot_general<int32_t>(ixr, vref(iy, {n, k}), {{{1}, {1}}});
          for (size_t e = 0; e < io.size(); ++e) {
            ASSERT_EQ(io[e], 2 * iref.value[e]) << "int8 " << what << " element " << e;
          }
        }
      }
    }
  }
  detail::set_gemm_mode(detail::GemmMode::kAuto);
}

TEST(Dot, FewInt8RowsAgainstTransposedRhsWrap) {
  // 127 x -128 summed over k = 140000 leaves int32: the dot-product kernels' offset of B and
  // correction by the rows of A (src/native/gemm_skinny.cc) wrap modulo 2^32 like the sum.
  constexpr int64_t m = 2, k = 140000, n = 3;
  std::vector<int8_t> xv(static_cast<size_t>(m * k), 127), yv(static_cast<size_t>(n * k), -128);
  for (auto mode :
       {detail::GemmMode::kAuto, detail::GemmMode::kNoAmx, detail::GemmMode::kPortable}) {
    detail::set_gemm_mode(mode);
    std::vector<int32_t> ov(static_cast<size_t>(m * n));
    vref(ov, {m, n}) = lax::dot_general<int32_t>(vref(xv, {m, k}), vref(yv, {n, k}), {{{1}, {1}}});
    const auto want =
        static_cast<int32_t>(static_cast<uint32_t>(k) * static_cast<uint32_t>(-16256));
    for (int32_t v : ov) ASSERT_EQ(v, want) << static_cast<int>(mode);
  }
  detail::set_gemm_mode(detail::GemmMode::kAuto);
}

TEST(Dot, LongRhsInSlabsOfKThroughViews) {
  // A B past half the L2 of any current x86 core that the column panels do not take (few rows
  // of A, or few columns): the GEMM cuts k into slabs of B that fit half the L2 (src/native/
  // gemm.cc), the last one shorter, each adding to what the earlier ones left in C.
  check_float32_views(5, 4101, 1000, {7, 4110, 1, 3}, {4105, 1003, 2, 1}, {9, 1010, 2, 4}, 51,
                      "slabs, few rows");
  check_float32_views(130, 9000, 96, {131, 9003, 1, 2}, {9001, 100, 1, 3}, {132, 99, 1, 2}, 53,
                      "slabs, few columns");
}

TEST(Dot, LongRhsInSlabsOfKWithTransposedLhs) {
  // x.T @ y with x stored (k, m): the slabs step along x's rows.
  constexpr int64_t m = 6, k = 5000, n = 640;
  auto xv = random_values<float>(k * m, 61);
  auto yv = random_values<float>(k * n, 62);
  auto x = vref(xv, {k, m});
  auto y = vref(yv, {k, n});
  const Reference ref = reference(x, y, 0, 0);
  std::vector<float> ov(static_cast<size_t>(m * n), 2.0f);
  auto o = vref(ov, {m, n});
  o += lax::dot_general<float>(x, y, {{{0}, {0}}});
  expect_close(o, ref, k, std::vector<double>(static_cast<size_t>(m * n), 2.0), 0.0,
               "slabs, transposed lhs");
}

TEST(Dot, StridedRhsOfManyRowsIsPackedFirst) {
  // A B (32 KiB) within the cache, read where it lies in a wider array with a power-of-two row
  // stride (1024), against 128 rows of A (row stride 512): the GEMM packs it contiguously
  // before libxsmm's kernel (src/native/gemm.cc).
  check_float32_views(128, 32, 256, {130, 512, 1, 256}, {40, 1024, 2, 512}, {130, 1024, 1, 256}, 31,
                      "strided B");
}

TEST(Dot, OperandsInPlaceAtPowerOfTwoStridesOverSeveralPasses) {
  // A block of A read where it lies in a wider array whose rows are 4 KiB apart, k long enough
  // for the AMX kernel's several passes (its rows copied a pass at a time, src/native/
  // gemm_amx.cc), five panels of B and a tail of rows; bfloat16 and int8, assigned and
  // accumulated, in every GEMM mode.
  constexpr int64_t m = 80, k = 1024, n = 160;
  auto big_x = random_values<bfloat16>(82 * 2048, 41);
  auto big_y = random_values<bfloat16>(k * n, 42);
  auto big_q = random_values<int8_t>(82 * 4096, 43);
  auto big_r = random_values<int8_t>(k * n, 44);
  auto x = vref(big_x, {82, 2048}).at(pl::ds(1, m), pl::ds(512, k));  // rows 4 KiB apart
  auto y = vref(big_y, {k, n});
  auto q = vref(big_q, {82, 4096}).at(pl::ds(2, m), pl::ds(1024, k));  // rows 4 KiB apart
  auto r = vref(big_r, {k, n});
  const Reference ref = reference(x, y, 1, 0);
  const Reference iref = reference(q, r, 1, 0);
  for (auto mode :
       {detail::GemmMode::kAuto, detail::GemmMode::kNoAmx, detail::GemmMode::kPortable}) {
    detail::set_gemm_mode(mode);
    std::vector<float> ov(static_cast<size_t>(m * n));
    auto o = vref(ov, {m, n});
    o = jnp::dot<float>(x, y);
    expect_close(o, ref, k, {}, 0.0, "bf16 =");
    std::vector<double> before(ov.begin(), ov.end());
    o += jnp::dot<float>(x, y);
    expect_close(o, ref, k, before, 0.0, "bf16 +=");
    std::vector<int32_t> iv(static_cast<size_t>(m * n));
    auto io = vref(iv, {m, n});
    io = jnp::dot<int32_t>(q, r);
    io += jnp::dot<int32_t>(q, r);
    for (size_t e = 0; e < iv.size(); ++e) ASSERT_EQ(iv[e], 2 * iref.value[e]) << e;
  }
  detail::set_gemm_mode(detail::GemmMode::kAuto);
}

TEST(Dot, BfloatSixteenRowsInPlaceAtStridesThatShareTheL1LessOrMore) {
  // A read where it lies with rows 2, 1.5, 1.25 and 1 KiB apart: the AMX kernel copies a pass of
  // a block's rows only where they crowd the L1's sets (2 KiB on a 48 KiB L1; src/native/
  // gemm_amx.cc) and reads the others in place, over two passes of k and five panels of B.
  constexpr int64_t m = 80, k = 512, n = 160;
  auto yv = random_values<bfloat16>(k * n, 46);
  auto y = vref(yv, {k, n});
  for (int64_t width : {1024, 768, 640, 512}) {
    auto big = random_values<bfloat16>(83 * width, 45 + static_cast<uint32_t>(width));
    auto x = vref(big, {83, width}).at(pl::ds(3, m), pl::ds(width - k, k));
    const Reference ref = reference(x, y, 1, 0);
    std::vector<float> ov(static_cast<size_t>(m * n));
    auto o = vref(ov, {m, n});
    o = jnp::dot<float>(x, y);
    expect_close(o, ref, k, {}, 0.0, "bf16 =, row width " + std::to_string(width));
    std::vector<double> before(ov.begin(), ov.end());
    o += jnp::dot<float>(x, y);
    expect_close(o, ref, k, before, 0.0, "bf16 +=, row width " + std::to_string(width));
  }
}

TEST(Dot, DestinationOverlappingAnOperandIsComputedFirst) {
  auto av = random_values<float>(16 * 16, 21);
  auto bv = random_values<float>(16 * 16, 22);
  auto a = vref(av, {16, 16});
  auto b = vref(bv, {16, 16});
  const Reference ref = reference(a, b, 1, 0);
  a = jnp::dot(a, b);
  expect_close(a, ref, 16, {}, 0.0, "a = a @ b");
}

TEST(Dot, ConstAndSmemOperands) {
  auto xv = random_values<float>(3 * 4, 41);
  auto yv = random_values<float>(4 * 2, 42);
  const pl::Ref<const float, MemorySpace::VMEM> x(xv.data(), {3, 4});  // (3, 4) VMEM, read-only
  const pltpu::SmemRef<float> y(yv.data(), {4, 2});                    // (4, 2) SMEM
  std::vector<float> ov(6);
  auto o = vref(ov, {3, 2});
  EXPECT_EQ(jnp::dot(x, y).shape(), (Shape{3, 2}));
  o = jnp::dot(x, y);
  expect_close(o, reference(x, y, 1, 0), 4, {}, 0.0, "const VMEM x SMEM");
}

TEST(Dot, EmptyContraction) {
  std::vector<float> xv(1), yv(1), ov(6, 9.0f);
  auto x = pltpu::VmemRef<float>(xv.data(), {2, 0});
  auto y = pltpu::VmemRef<float>(yv.data(), {0, 3});
  auto o = vref(ov, {2, 3});
  o += jnp::dot(x, y);
  for (float v : ov) EXPECT_EQ(v, 9.0f);
  o = jnp::dot(x, y);
  for (float v : ov) EXPECT_EQ(v, 0.0f);
}

TEST(Dot, ShapeErrors) {
  std::vector<float> xv(8 * 16), yv(16 * 4), ov(8 * 4), v1(16);
  auto x = vref(xv, {8, 16});
  auto y = vref(yv, {16, 4});
  auto o = vref(ov, {8, 4});
  auto vec = vref(v1, {16});
  auto x2 = vref(xv, {16, 8});
  EXPECT_TESSERA_ERROR(o = jnp::dot(x, x), UsageError, ErrorKind::kShapeMismatch,
                       "the contracted extents must be equal", __LINE__ - 1);
  EXPECT_TESSERA_ERROR(o = jnp::dot(vec, y), UsageError, ErrorKind::kShapeMismatch,
                       "has shape (4,), but the destination ref has shape (8, 4)", __LINE__ - 1);
  EXPECT_TESSERA_ERROR(o += jnp::dot(x, x2), UsageError, ErrorKind::kShapeMismatch,
                       "shape (8, 8), but the destination ref has shape (8, 4)", __LINE__ - 1);
  EXPECT_TESSERA_ERROR(o = lax::dot_general(x, y, {{{2}, {0}}}), UsageError,
                       ErrorKind::kInvalidArgument, "contracting dimension 2 of the lhs",
                       __LINE__ - 2);
  EXPECT_TESSERA_ERROR(o = lax::dot_general(x, y, {{{1}, {0}}, {{0}, {0}}}), UsageError,
                       ErrorKind::kInvalidArgument, "name a dimension twice", __LINE__ - 1);
  EXPECT_TESSERA_ERROR(o = lax::dot_general(x, y, {{{0, 1}, {0}}}), UsageError,
                       ErrorKind::kInvalidArgument, "same number of contracting dimensions",
                       __LINE__ - 2);
  // x @ x.T needs dot_general: the message says how.
  std::vector<float> sq(8 * 8);
  auto o8 = vref(sq, {8, 8});
  EXPECT_TESSERA_ERROR(o8 = jnp::dot(x, x), UsageError, ErrorKind::kShapeMismatch,
                       "lax::dot_general(x, y, {{{1}, {1}}})", __LINE__ - 1);
}

TEST(Dot, ErrorsInsideAKernelNameTheCore) {
  auto k = pl::kernel(pl::out_type<float>({8, 8}), pltpu::TensorCoreMesh("core", 1),
                      pl::scratch_types(pltpu::VMEM<float>({8, 16}), pltpu::VMEM<float>({8, 8})),
                      pl::name("bad_dot"))([](pltpu::HbmRef<float>, pltpu::VmemRef<float> a,
                                              pltpu::VmemRef<float> o) { o = jnp::dot(a, a); });
  auto err = tessera::testing::catch_error<KernelError>([&] { (void)k(); });
  ASSERT_TRUE(err.has_value());
  EXPECT_EQ(err->kind(), ErrorKind::kShapeMismatch);
  EXPECT_EQ(err->core(), 0);
  EXPECT_NE(std::string(err->what()).find("bad_dot"), std::string::npos) << err->what();
}

}  // namespace
