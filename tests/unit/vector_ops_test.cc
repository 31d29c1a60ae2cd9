// In-kernel vector ops on VMEM refs: creation functions, arithmetic with scalars and refs,
// broadcasting, dtype rules, strided and overlapping views, against scalar reference loops.
#include <gtest/gtest.h>

#include <cmath>
#include <numeric>
#include <vector>

#include "support/expect_error.h"
#include "tessera/tessera.h"

namespace {
using namespace tessera;

template <class T>
pltpu::VmemRef<T> vref(std::vector<T>& v, Shape s) {
  return pltpu::VmemRef<T>(v.data(), std::move(s));
}

TEST(VectorOps, FullLikeZerosOnes) {
  for (int n : {1, 7, 16, 255, 256, 257, 1000}) {
    std::vector<float> buf(static_cast<size_t>(n), -1.0f);
    auto r = vref(buf, {n});
    r = jnp::full_like(r, 42.0f);
    for (float v : buf) ASSERT_EQ(v, 42.0f) << n;
    r = jnp::zeros_like(r);
    for (float v : buf) ASSERT_EQ(v, 0.0f) << n;
    r = jnp::ones_like(r);
    for (float v : buf) ASSERT_EQ(v, 1.0f) << n;
  }
  std::vector<int32_t> ib(10);
  auto ir = vref(ib, {2, 5});
  ir = jnp::full_like(ir, 3);
  for (int32_t v : ib) EXPECT_EQ(v, 3);
  ir = 5;  // a scalar assigns every element
  for (int32_t v : ib) EXPECT_EQ(v, 5);
}

TEST(VectorOps, ArangePlusScalarMatchesTheSeed) {
  for (int i = 0; i < 4; ++i) {
    std::vector<float> buf(128);
    auto r = vref(buf, {128});
    r = jnp::arange<float>(128) + float(i * 128);
    for (int k = 0; k < 128; ++k) ASSERT_EQ(buf[static_cast<size_t>(k)], float(i * 128 + k));
  }
  std::vector<int32_t> ib(300);
  auto ir = vref(ib, {300});
  ir = jnp::arange<int32_t>(300) * 2 - 1;
  for (int k = 0; k < 300; ++k) ASSERT_EQ(ib[static_cast<size_t>(k)], 2 * k - 1);
}

TEST(VectorOps, RefArithmeticMatchesReference) {
  for (int n : {1, 3, 17, 256, 999}) {
    std::vector<float> x(static_cast<size_t>(n)), y(static_cast<size_t>(n)),
        o(static_cast<size_t>(n));
    for (int k = 0; k < n; ++k) {
      x[static_cast<size_t>(k)] = 0.5f * static_cast<float>(k) - 3.0f;
      y[static_cast<size_t>(k)] = 1.0f + static_cast<float>(k % 7);
    }
    auto xr = vref(x, {n});
    auto yr = vref(y, {n});
    auto orf = vref(o, {n});
    orf = (xr * 2.0f - yr) / yr + -xr;
    for (int k = 0; k < n; ++k) {
      const float xv = x[static_cast<size_t>(k)];
      const float yv = y[static_cast<size_t>(k)];
      const float want = (xv * 2.0f - yv) / yv + -xv;
      ASSERT_NEAR(o[static_cast<size_t>(k)], want, 1e-6f * (1.0f + std::fabs(want))) << k;
    }
    orf = 1.0f - xr;  // scalar on the left
    for (int k = 0; k < n; ++k)
      ASSERT_EQ(o[static_cast<size_t>(k)], 1.0f - x[static_cast<size_t>(k)]);
  }
}

TEST(VectorOps, BroadcastRowsAndColumns) {
  std::vector<float> col(8), row(128), o(8 * 128);
  for (int i = 0; i < 8; ++i) col[static_cast<size_t>(i)] = static_cast<float>(i) * 1000.0f;
  for (int j = 0; j < 128; ++j) row[static_cast<size_t>(j)] = static_cast<float>(j);
  auto c = vref(col, {8, 1});
  auto r = vref(row, {128});  // rank 1 broadcasts as a row
  auto out = vref(o, {8, 128});
  out = c + r;
  for (int i = 0; i < 8; ++i)
    for (int j = 0; j < 128; ++j)
      ASSERT_EQ(o[static_cast<size_t>(i * 128 + j)],
                static_cast<float>(i) * 1000.0f + static_cast<float>(j));
  out =
      lax::broadcasted_iota<float>({8, 128}, 0) * 10.0f + lax::broadcasted_iota<float>({8, 128}, 1);
  for (int i = 0; i < 8; ++i)
    for (int j = 0; j < 128; ++j)
      ASSERT_EQ(o[static_cast<size_t>(i * 128 + j)], static_cast<float>(i * 10 + j));
}

TEST(VectorOps, StridedViewsReadAndWrite) {
  std::vector<float> src(16 * 16), dst(16 * 16, -1.0f);
  std::iota(src.begin(), src.end(), 0.0f);
  auto s = vref(src, {16, 16});
  auto d = vref(dst, {16, 16});
  // Write the transpose-free column block (every other column) with a strided source.
  d.at(pl::all, pl::ds(0, 8, 2)) = s.at(pl::all, pl::ds(1, 8, 2)) + 0.5f;
  for (int i = 0; i < 16; ++i)
    for (int j = 0; j < 16; ++j) {
      const float want = j % 2 == 0 ? src[static_cast<size_t>(i * 16 + j + 1)] + 0.5f : -1.0f;
      ASSERT_EQ(dst[static_cast<size_t>(i * 16 + j)], want) << i << "," << j;
    }
  // A column written from a row: a (16,) strided destination.
  d.at(pl::all, 1) = s.at(3);
  for (int i = 0; i < 16; ++i)
    ASSERT_EQ(dst[static_cast<size_t>(i * 16 + 1)], src[static_cast<size_t>(48 + i)]);
}

TEST(VectorOps, OverlappingShiftIsLikeNumpy) {
  std::vector<float> a(10);
  std::iota(a.begin(), a.end(), 0.0f);
  auto r = vref(a, {10});
  r.at(pl::ds(1, 9)) = r.at(pl::ds(0, 9));  // a[1:] = a[:-1]
  const std::vector<float> want = {0, 0, 1, 2, 3, 4, 5, 6, 7, 8};
  EXPECT_EQ(a, want);
  r = r * 2.0f;  // in place, same position: no temporary needed
  EXPECT_EQ(a[9], 16.0f);
}

// A copy or one float32 binary op between refs, per-row values and scalars takes the
// evaluator's fused path (vector_kernels.cc); it must agree with scalar loops on every layout:
// ragged lengths, strided views on both sides, row broadcasts, rank 3, NaNs, in place.
TEST(VectorOps, SingleOpsAgreeWithScalarLoopsOnEveryLayout) {
  enum Op { kAdd, kSub, kMul, kDiv, kMax, kMin };
  auto scalar_op = [](Op op, float a, float b) {
    switch (op) {
      case kAdd:
        return a + b;
      case kSub:
        return a - b;
      case kMul:
        return a * b;
      case kDiv:
        return a / b;
      case kMax:
        return std::isnan(a) || std::isnan(b) ? NAN : std::max(a, b);
      case kMin:
        return std::isnan(a) || std::isnan(b) ? NAN : std::min(a, b);
    }
    return 0.0f;
  };
  auto apply = [](Op op, auto dst, auto a, auto b) {
    switch (op) {
      case kAdd:
        dst = a + b;
        break;
      case kSub:
        dst = a - b;
        break;
      case kMul:
        dst = a * b;
        break;
      case kDiv:
        dst = a / b;
        break;
      case kMax:
        dst = jnp::maximum(a, b);
        break;
      case kMin:
        dst = jnp::minimum(a, b);
        break;
    }
  };
  auto same = [](float got, float want) {
    return (std::isnan(got) && std::isnan(want)) || got == want;
  };
  // Rows of `cols` elements inside buffers `wide` elements wide, starting at column 3 of row 1.
  for (int cols : {1, 5, 16, 17, 64, 65, 130, 1000}) {
    for (int rows : {1, 3}) {
      const int wide = cols + 7;
      const auto n = static_cast<size_t>((rows + 1) * wide);
      std::vector<float> x(n), y(n), col(static_cast<size_t>(rows)), out(n, -7.0f);
      for (size_t k = 0; k < n; ++k) {
        x[k] = static_cast<float>(k % 29) * 0.75f - 9.0f;
        y[k] = k % 11 == 0 ? NAN : static_cast<float>(k % 13) + 0.5f;
      }
      for (int r = 0; r < rows; ++r) col[static_cast<size_t>(r)] = 2.0f + static_cast<float>(r);
      auto view = [&](std::vector<float>& v) {
        return vref(v, {rows + 1, wide}).at(pl::ds(1, rows), pl::ds(3, cols));
      };
      auto at = [&](int r, int c) { return static_cast<size_t>((r + 1) * wide + 3 + c); };
      auto check = [&](const char* what, Op op, auto want) {
        for (int r = 0; r < rows; ++r)
          for (int c = 0; c < cols; ++c)
            ASSERT_TRUE(same(out[at(r, c)], want(r, c)))
                << what << " op " << op << " " << rows << "x" << cols << " at " << r << "," << c
                << ": " << out[at(r, c)] << " vs " << want(r, c);
        ASSERT_EQ(out[0], -7.0f) << "wrote outside the view";
      };
      for (Op op : {kAdd, kSub, kMul, kDiv, kMax, kMin}) {
        apply(op, view(out), view(x), view(y));
        check("ref,ref", op, [&](int r, int c) { return scalar_op(op, x[at(r, c)], y[at(r, c)]); });
        apply(op, view(out), view(x), 1.5f);
        check("ref,scalar", op, [&](int r, int c) { return scalar_op(op, x[at(r, c)], 1.5f); });
        apply(op, view(out), -2.5f, view(y));
        check("scalar,ref", op, [&](int r, int c) { return scalar_op(op, -2.5f, y[at(r, c)]); });
        apply(op, view(out), view(x), vref(col, {rows, 1}));
        check("ref,column", op, [&](int r, int c) {
          return scalar_op(op, x[at(r, c)], col[static_cast<size_t>(r)]);
        });
      }
      view(out) = view(x);
      check("copy", kAdd, [&](int r, int c) { return x[at(r, c)]; });
      view(out) = view(out) * view(y);  // in place, same position
      check("in place", kMul, [&](int r, int c) { return x[at(r, c)] * y[at(r, c)]; });
    }
  }
  // Rank 3, contiguous and as a view of every other plane.
  std::vector<float> a(4 * 3 * 40), b(4 * 3 * 40), o(4 * 3 * 40, 0.0f);
  std::iota(a.begin(), a.end(), 1.0f);
  std::iota(b.begin(), b.end(), -50.0f);
  vref(o, {4, 3, 40}).at(pl::ds(0, 2, 2)) =
      vref(a, {4, 3, 40}).at(pl::ds(1, 2, 2)) - vref(b, {4, 3, 40}).at(pl::ds(0, 2, 2));
  for (int p = 0; p < 4; ++p)
    for (int k = 0; k < 120; ++k) {
      const auto i = static_cast<size_t>(p * 120 + k);
      const float want = p % 2 == 0 ? a[i + 120] - b[i] : 0.0f;
      ASSERT_EQ(o[i], want) << p << "," << k;
    }
}

TEST(VectorOps, Bfloat16RoundsEveryNode) {
  std::vector<bfloat16> x(5), o(5);
  for (int k = 0; k < 5; ++k)
    x[static_cast<size_t>(k)] = bfloat16(1.0f + 0.01f * static_cast<float>(k));
  auto xr = vref(x, {5});
  auto orf = vref(o, {5});
  orf = xr * 3.0f + 1.0f;  // weak float scalars keep bfloat16
  for (int k = 0; k < 5; ++k) {
    const bfloat16 prod(static_cast<float>(x[static_cast<size_t>(k)]) * 3.0f);
    const bfloat16 want(static_cast<float>(prod) + 1.0f);
    ASSERT_EQ(o[static_cast<size_t>(k)].bits, want.bits) << k;
  }
  static_assert(std::is_same_v<detail::ValueOf<decltype(xr * 3.0f)>, bfloat16>);
}

TEST(VectorOps, IntegerRules) {
  std::vector<int8_t> x = {100, 120, -128, 5}, o(4);
  auto xr = vref(x, {4});
  auto orf = vref(o, {4});
  orf = xr + int8_t{30};  // int8 wraps
  EXPECT_EQ(o[0], static_cast<int8_t>(130 - 256));
  EXPECT_EQ(o[1], static_cast<int8_t>(150 - 256));
  EXPECT_EQ(o[2], static_cast<int8_t>(-98));
  EXPECT_EQ(o[3], 35);
  std::vector<int32_t> a = {7, -7, 1, 9};
  std::vector<float> q(4);
  auto ar = vref(a, {4});
  auto qr = vref(q, {4});
  qr = ar / 2;  // true division: int / int -> float32, as jnp.divide
  EXPECT_EQ(q[0], 3.5f);
  EXPECT_EQ(q[1], -3.5f);
  qr = ar + 0.25f;  // int ref with a float scalar -> float32
  EXPECT_EQ(q[3], 9.25f);
  static_assert(std::is_same_v<detail::ValueOf<decltype(ar / 2)>, float>);
  static_assert(std::is_same_v<detail::ValueOf<decltype(ar * 2)>, int32_t>);
  static_assert(std::is_same_v<detail::ValueOf<decltype(xr + ar)>, int32_t>);
}

TEST(VectorOps, RankZeroAndEmpty) {
  float s = 0;
  pltpu::VmemRef<float> r(&s, Shape{});
  r = jnp::full<float>({}, 2.5f) * 2.0f;
  EXPECT_EQ(s, 5.0f);
  std::vector<float> none;
  pltpu::VmemRef<float> e(none.data(), {0});
  e = jnp::full_like(e, 1.0f);  // no elements, no work
}

TEST(VectorOpsErrors, NonBroadcastableShapes) {
  std::vector<float> a(8), b(7), o(8);
  auto ar = vref(a, {8});
  auto br = vref(b, {7});
  auto orf = vref(o, {8});
  // Binary operators carry no call site in C++: on the host the message still names the shapes.
  auto err = tessera::testing::catch_error<UsageError>([&] { orf = ar + br; });
  ASSERT_TRUE(err);
  EXPECT_EQ(err->kind(), ErrorKind::kShapeMismatch);
  EXPECT_NE(std::string(err->what()).find("(8,) and (7,)"), std::string::npos) << err->what();
  // Functions with a call site report it.
  const int line_1 = __LINE__ + 1;
  EXPECT_TESSERA_ERROR(orf = jnp::full<float>({8, 2}, 1.0f), UsageError, ErrorKind::kShapeMismatch,
                       "does not broadcast to the destination shape (8,)", line_1);
  const int line_2 = __LINE__ + 1;
  EXPECT_TESSERA_ERROR(orf = lax::broadcasted_iota<float>({8}, 1), UsageError,
                       ErrorKind::kInvalidArgument, "dimension 1 is outside 0..0", line_2);
}

TEST(VectorOpsErrors, InsideAKernelTheStatementLineIsReported) {
  // An operator statement has no call site of its own; its line is read back from the line
  // tables (src/core/symbolize.cc), not the kernel's `builder(body)` line.
  auto builder = pl::kernel(pl::out_type<float>({8}), pltpu::TensorCoreMesh("core", 2),
                            pl::scratch_types(pltpu::VMEM<float>({8}), pltpu::VMEM<float>({7})));
  const int line = __LINE__ + 2;
  auto k = builder(
      [](pltpu::HbmRef<float>, pltpu::VmemRef<float> a, pltpu::VmemRef<float> b) { a = a + b; });
  auto err = tessera::testing::catch_error<KernelError>([&] { k(); });
  ASSERT_TRUE(err);
  EXPECT_EQ(err->kind(), ErrorKind::kShapeMismatch);
  EXPECT_EQ(static_cast<int>(err->where().line()), line) << err->what();
  EXPECT_GE(err->core(), 0);
  EXPECT_NE(std::string(err->what()).find("(8,) and (7,)"), std::string::npos) << err->what();
}

}  // namespace
