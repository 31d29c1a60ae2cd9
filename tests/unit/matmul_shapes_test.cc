// The matmul example (examples/05_matmul.cc) at shapes its blocks do not divide: the partial
// edge blocks of M and N give the exact product in both engines, for the four variants; a k block
// that does not divide K, a negative block size and operands that are not matching matrices raise
// a UsageError at the caller's line; an empty product gives an empty or a zero output.
#include <gtest/gtest.h>

#include <cstdint>
#include <limits>
#include <string>
#include <vector>

#include "matmul.h"
#include "support/expect_error.h"

namespace tessera {
namespace {

// Small integers: every product and sum below is exact in float32, and each input in bfloat16.
template <class T>
Array<T> values(int64_t rows, int64_t cols, int salt) {
  Array<T> a({rows, cols});
  for (int64_t i = 0; i < a.size(); ++i) {
    a[i] = static_cast<T>(static_cast<float>((i * 37 + salt) % 17) - 8.0f);
  }
  return a;
}

// The exact (m, n) product x @ y (x @ y.T where `transposed`), relu'd where asked.
template <class T>
std::vector<float> product(const Array<T>& x, const Array<T>& y, bool transposed, bool relu) {
  const int64_t m = x.shape()[0], k = x.shape()[1];
  const int64_t n = transposed ? y.shape()[0] : y.shape()[1];
  std::vector<float> z(static_cast<size_t>(m * n));
  for (int64_t i = 0; i < m; ++i) {
    for (int64_t j = 0; j < n; ++j) {
      int64_t s = 0;
      for (int64_t p = 0; p < k; ++p) {
        const auto xv = static_cast<int64_t>(static_cast<float>(x[i * k + p]));
        const auto yv =
            static_cast<int64_t>(static_cast<float>(transposed ? y[j * k + p] : y[p * n + j]));
        s += xv * yv;
      }
      z[static_cast<size_t>(i * n + j)] = relu && s < 0 ? 0.0f : static_cast<float>(s);
    }
  }
  return z;
}

template <class Z>
void expect_equal(const Array<Z>& z, const std::vector<float>& want, const std::string& what) {
  ASSERT_EQ(z.size(), static_cast<int64_t>(want.size())) << what;
  for (int64_t e = 0; e < z.size(); ++e) {
    // bfloat16's output is the float32 sum rounded once.
    const auto expected = static_cast<float>(static_cast<Z>(want[static_cast<size_t>(e)]));
    ASSERT_EQ(static_cast<float>(z[e]), expected) << what << ", element " << e;
  }
}

struct Case {
  int64_t m, n, k;
  examples::MatmulBlocks blocks;
};

// Every variant on each case; `label` names the engine.
void check_variants(const std::vector<Case>& cases, const std::string& label) {
  for (const Case& c : cases) {
    const std::string what = label + " (" + std::to_string(c.m) + ", " + std::to_string(c.k) +
                             ") x (" + std::to_string(c.k) + ", " + std::to_string(c.n) +
                             "), blocks (" + std::to_string(c.blocks.bm) + ", " +
                             std::to_string(c.blocks.bn) + ", " + std::to_string(c.blocks.bk) + ")";
    const auto x = values<float>(c.m, c.k, 1);
    const auto y = values<float>(c.k, c.n, 2);
    const auto yt = values<float>(c.n, c.k, 3);
    expect_equal(examples::matmul(x, y, c.blocks, 2), product(x, y, false, false), "f32 " + what);
    expect_equal(examples::matmul_relu(x, y, c.blocks, 2), product(x, y, false, true),
                 "relu " + what);
    expect_equal(examples::matmul_transpose_rhs(x, yt, c.blocks, 2), product(x, yt, true, false),
                 "x @ y.T " + what);
    const auto xb = values<bfloat16>(c.m, c.k, 4);
    const auto yb = values<bfloat16>(c.k, c.n, 5);
    expect_equal(examples::matmul_bf16(xb, yb, c.blocks, 2), product(xb, yb, false, false),
                 "bf16 " + what);
  }
}

const std::vector<Case> kRagged = {
    {200, 300, 136, {128, 256, 0}},  // a partial last block on both output axes
    {200, 300, 136, {64, 128, 68}},  // two k steps, three row blocks, the last columns partial
    {100, 130, 64, {128, 256, 64}},  // blocks larger than the array
    {389, 777, 100, {}},             // sizes with no useful divisor, default blocks
};

TEST(MatmulShapes, PartialEdgeBlocksGiveTheProduct) { check_variants(kRagged, "native"); }

TEST(MatmulShapes, PartialEdgeBlocksGiveTheProductChecked) {
  pltpu::InterpretParams p;
  p.allow_uninitialized_reads = false;  // the padding must never reach an output
  const pltpu::ForceTpuInterpretMode force(p);
  check_variants(kRagged, "checked");
}

TEST(MatmulShapes, MistakesRaiseAtTheCallersLine) {
  const auto x = values<float>(8, 384, 1);
  // A UsageError of kind kInvalidArgument at `line` saying `says`, whose message also names the
  // caller's file:line.
  auto expect_usage_error = [](auto&& call, int line, const std::string& says) {
    const auto e = testing::catch_error<UsageError>(call);
    ASSERT_TRUE(e);
    EXPECT_EQ(e->kind(), ErrorKind::kInvalidArgument);
    EXPECT_EQ(static_cast<int>(e->where().line()), line) << e->what();
    EXPECT_NE(std::string(e->what()).find(says), std::string::npos) << e->what();
    const std::string at = "matmul_shapes_test.cc:" + std::to_string(line) + ": ";
    EXPECT_NE(std::string(e->what()).find(at), std::string::npos) << e->what();
  };
  // clang-format off
  int line = __LINE__ + 1;
  expect_usage_error([&] { (void)examples::matmul(x, values<float>(256, 128, 2)); }, line, "x @ y needs x (M, K) and y (K, N)");
  line = __LINE__ + 1;
  expect_usage_error([&] { (void)examples::matmul_transpose_rhs(x, values<float>(384, 128, 2)); }, line, "x @ y.T needs x (M, K) and y (N, K)");
  line = __LINE__ + 1;
  expect_usage_error([&] { (void)examples::matmul(Array<float>({384}, 1.0f), values<float>(384, 128, 2)); }, line, "x is (384,)");
  line = __LINE__ + 1;
  expect_usage_error([&] { (void)examples::matmul(x, values<float>(384, 128, 2), {8, -128, 0}); }, line, "negative size");
  line = __LINE__ + 1;
  expect_usage_error([&] { (void)examples::matmul(x, values<float>(384, 128, 2), {}, -2); }, line, "num_cores=-2 is below 0");
  line = __LINE__ + 1;
  expect_usage_error([&] { (void)examples::matmul_relu(x, values<float>(384, 128, 2), {8, 128, 256}); }, line, "the k block 256 does not divide K = 384");
  line = __LINE__ + 1;
  expect_usage_error([&] { (void)examples::matmul_bf16(values<bfloat16>(8, 384, 1), values<bfloat16>(384, 128, 2), {0, 0, 100}); }, line, "does not divide K = 384");
  line = __LINE__ + 1;
  expect_usage_error([&] { (void)examples::matmul(x, values<float>(384, 128, 2), {int64_t{1} << 40, 128, 0}); }, line, "MiB of VMEM for their double-buffered windows, more than the 192 MiB");
  line = __LINE__ + 1;
  expect_usage_error([&] { (void)examples::matmul_bf16(values<bfloat16>(8, 384, 1), values<bfloat16>(384, 128, 2), {std::numeric_limits<int64_t>::max(), std::numeric_limits<int64_t>::max(), 384}); }, line, "more than the 192 MiB");
  // clang-format on
}

TEST(MatmulShapes, EmptyProducts) {
  // K = 0: every output element is a sum of nothing.
  const Array<float> z = examples::matmul(Array<float>({8, 0}), Array<float>({0, 128}));
  ASSERT_EQ(z.shape(), Shape({8, 128}));
  for (int64_t e = 0; e < z.size(); ++e) ASSERT_EQ(z[e], 0.0f) << e;
  const Array<bfloat16> zb =
      examples::matmul_bf16(Array<bfloat16>({8, 0}), Array<bfloat16>({0, 16}));
  ASSERT_EQ(zb.shape(), Shape({8, 16}));
  for (int64_t e = 0; e < zb.size(); ++e) ASSERT_EQ(static_cast<float>(zb[e]), 0.0f) << e;
  EXPECT_EQ(examples::matmul(Array<float>({0, 64}), values<float>(64, 128, 1)).shape(),
            Shape({0, 128}));
  EXPECT_EQ(examples::matmul_transpose_rhs(values<float>(8, 64, 1), Array<float>({0, 64})).shape(),
            Shape({8, 0}));
}

}  // namespace
}  // namespace tessera
