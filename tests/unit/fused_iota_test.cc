// The native evaluator's fused iota (src/native/vector_fused_iota-inl.h): a float iota, alone or
// combined with a constant (iota + c, c - iota, iota * c, ...), writes exactly op(index, c) into a
// window of a wider VMEM buffer, along either axis, with row lengths that leave tails, on every
// SIMD target and in checked mode, and nothing outside the window.
#include <gtest/gtest.h>

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "support/vector_targets.h"
#include "tessera/tessera.h"

namespace {
using namespace tessera;

constexpr float kSentinel = -7.0f;
constexpr int64_t kLeft = 3;  // the window's first column in its buffer

// Runs `body(w)` on a (rows, cols) window, starting at column kLeft, of a (rows, cols + 13) VMEM
// buffer filled with kSentinel in a 1-core kernel; returns the whole buffer.
template <class Body>
std::vector<float> in_window(int64_t rows, int64_t cols, Body body) {
  const int64_t ld = cols + 13;
  Array<float> init({rows, ld});
  for (int64_t e = 0; e < init.size(); ++e) init[e] = kSentinel;
  auto k = pl::kernel(pl::out_type<float>({rows, ld}), pltpu::TensorCoreMesh("core", 1),
                      pl::scratch_types(pltpu::VMEM<float>({rows, ld})))(
      [&](pltpu::HbmRef<const float> in, pltpu::HbmRef<float> out, pltpu::VmemRef<float> buf) {
        pltpu::sync_copy(in, buf);
        body(buf.at(pl::all, pl::ds(kLeft, cols)));
        pltpu::sync_copy(buf, out);
      });
  const Array<float> y = k(init);
  return std::vector<float>(y.begin(), y.end());
}

struct Case {
  const char* name;
  float (*want)(float index, float c);
};

template <class Expr>
void check(const std::string& what, int64_t rows, int64_t cols, int dim, float c, Expr expr,
           float (*want)(float, float)) {
  const std::vector<float> got = in_window(rows, cols, [&](pltpu::VmemRef<float> w) {
    w = expr(lax::broadcasted_iota<float>(Shape{rows, cols}, dim), c);
  });
  const int64_t ld = cols + 13;
  for (int64_t i = 0; i < rows; ++i) {
    for (int64_t j = 0; j < ld; ++j) {
      const float v = got[static_cast<size_t>(i * ld + j)];
      const bool inside = j >= kLeft && j < kLeft + cols;
      const float index = static_cast<float>(dim == 0 ? i : j - kLeft);
      const float expected = inside ? want(index, c) : kSentinel;
      ASSERT_EQ(v, expected) << what << ": (" << rows << ", " << cols << ") along " << dim << " at "
                             << i << ", " << j;
    }
  }
}

void check_all(const std::string& how) {
  for (const int64_t cols : {int64_t{1}, int64_t{15}, int64_t{16}, int64_t{37}, int64_t{128}}) {
    for (const int64_t rows : {int64_t{1}, int64_t{3}}) {
      for (const int dim : {0, 1}) {
        const std::string w = how + ", cols " + std::to_string(cols);
        check(
            w + ", iota", rows, cols, dim, 0.0f, [](auto i, float) { return i; },
            [](float i, float) { return i; });
        check(
            w + ", iota + c", rows, cols, dim, 2.5f, [](auto i, float c) { return i + c; },
            [](float i, float c) { return i + c; });
        check(
            w + ", c - iota", rows, cols, dim, 100.25f, [](auto i, float c) { return c - i; },
            [](float i, float c) { return c - i; });
        check(
            w + ", iota - c", rows, cols, dim, 0.75f, [](auto i, float c) { return i - c; },
            [](float i, float c) { return i - c; });
        check(
            w + ", iota * c", rows, cols, dim, -1.5f, [](auto i, float c) { return i * c; },
            [](float i, float c) { return i * c; });
        check(
            w + ", c * iota", rows, cols, dim, 3.0f, [](auto i, float c) { return c * i; },
            [](float i, float c) { return c * i; });
        if (::testing::Test::HasFatalFailure()) return;
      }
    }
  }
}

TEST(FusedIota, IotaWithAConstantWritesExactlyTheWindowOnEveryTarget) {
  const int tried = tessera::testing::on_every_vector_target(
      [](const char* target) { check_all(std::string("target ") + target); });
  EXPECT_GE(tried, 1);
}

TEST(FusedIota, IotaWithAConstantWritesExactlyTheWindowChecked) {
  const pltpu::ForceTpuInterpretMode force;
  check_all("checked");
}

// The quickstart's statement, a 1-D arange plus an offset, over a long row (several tiles).
TEST(FusedIota, AnArangePlusAnOffsetOverManyVectors) {
  const int64_t n = 5000;
  auto k = pl::kernel(pl::out_type<float>({n}), pltpu::TensorCoreMesh("core", 1),
                      pl::scratch_types(pltpu::VMEM<float>({n})))(
      [](pltpu::HbmRef<float> o, pltpu::VmemRef<float> v) {
        v = jnp::arange<float>(5000) + 1000.0f;
        pltpu::sync_copy(v, o);
      });
  const Array<float> y = k();
  for (int64_t i = 0; i < n; ++i) ASSERT_EQ(y[i], static_cast<float>(i + 1000)) << i;
}

}  // namespace
