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

TEST(VectorOpsErrors, InsideAKernelTheKernelLineIsReported) {
  // A kernel's location is the line where its body is bound: `builder(body)`.
  auto builder = pl::kernel(pl::out_type<float>({8}), pltpu::TensorCoreMesh("core", 2),
                            pl::scratch_types(pltpu::VMEM<float>({8}), pltpu::VMEM<float>({7})));
  const int line = __LINE__ + 1;
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
