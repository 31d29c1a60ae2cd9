// exp on the native evaluator's fused path (src/native/vector_kernels.cc, EvaluateFused): exp of a
// ref and exp of a binary op of a ref and a ref, a per-row scalar or a constant (softmax's
// exp(s - max)) are computed in registers; the result must be bit for bit the tile evaluator's
// (the same statement with the fused path turned off), over rows with tails,
// arguments across exp's ranges (subnormal results, zeros, infinities, NaN), into a window of a
// wider buffer, on every SIMD target and in checked mode.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <string>
#include <vector>

#include "support/vector_targets.h"
#include "tessera/tessera.h"

namespace {
using namespace tessera;

Array<float> arguments(int64_t rows, int64_t cols) {
  const float specials[] = {std::numeric_limits<float>::quiet_NaN(),
                            std::numeric_limits<float>::infinity(),
                            -std::numeric_limits<float>::infinity(),
                            -95.5f,
                            -103.98f,
                            -87.1f,
                            88.5f,
                            0.0f};
  Array<float> x(Shape{rows, cols});
  for (int64_t i = 0; i < rows; ++i) {
    for (int64_t j = 0; j < cols; ++j) {
      const int64_t e = i * cols + j;
      x(i, j) =
          e % 29 == 5 ? specials[e % 8] : -120.0f + 130.0f * static_cast<float>(e % 97) / 97.0f;
    }
  }
  return x;
}

bool same_bits(float a, float b) { return std::memcmp(&a, &b, sizeof a) == 0; }

void check(const std::string& how) {
  for (const int64_t cols : {int64_t{5}, int64_t{16}, int64_t{37}, int64_t{128}, int64_t{200}}) {
    const int64_t rows = 4;
    const Array<float> x = arguments(rows, cols);
    Array<float> m(Shape{rows, 1});
    for (int64_t i = 0; i < rows; ++i) m(i, 0) = 3.5f * static_cast<float>(i) - 4.0f;
    const ShapeDtypeStruct<float> full{{rows, cols + 3}};
    auto k = pl::pallas_call(
        [cols](pltpu::VmemRef<const float> x_ref, pltpu::VmemRef<const float> m_ref,
               pltpu::VmemRef<float> a, pltpu::VmemRef<float> b, pltpu::VmemRef<float> c,
               pltpu::VmemRef<float> d, pltpu::VmemRef<float> e, pltpu::VmemRef<float> f) {
          // Fused, each into a window (the destination's rows are 3 elements longer), and the
          // same on the tile evaluator into the rest of the outputs.
          auto w = [cols](pltpu::VmemRef<float> r) { return r.at(pl::all, pl::ds(0, cols)); };
          w(a) = jnp::exp(x_ref);
          w(b) = jnp::exp(x_ref - m_ref);
          w(c) = jnp::exp(jnp::maximum(x_ref, -90.0f));
          const tessera::testing::TileEvaluatorOnly tile_only;
          w(d) = jnp::exp(x_ref);
          w(e) = jnp::exp(x_ref - m_ref);
          w(f) = jnp::exp(jnp::maximum(x_ref, -90.0f));
        },
        pl::out_shape(full, full, full, full, full, full));
    auto [a, b, c, d, e, f] = k(x, m);
    for (int64_t i = 0; i < rows; ++i) {
      for (int64_t j = 0; j < cols; ++j) {
        const std::string at = how + ", cols " + std::to_string(cols) + " at (" +
                               std::to_string(i) + ", " + std::to_string(j) + "), x " +
                               std::to_string(x(i, j));
        ASSERT_TRUE(same_bits(a(i, j), d(i, j))) << at << ": " << a(i, j) << " / " << d(i, j);
        ASSERT_TRUE(same_bits(b(i, j), e(i, j))) << at << ": " << b(i, j) << " / " << e(i, j);
        ASSERT_TRUE(same_bits(c(i, j), f(i, j))) << at << ": " << c(i, j) << " / " << f(i, j);
        const double want = std::exp(static_cast<double>(x(i, j) - m(i, 0)));
        if (std::isnan(want)) {
          ASSERT_TRUE(std::isnan(b(i, j))) << at;
        } else if (std::isinf(want) || want > 3.4e38) {
          ASSERT_EQ(b(i, j), std::numeric_limits<float>::infinity()) << at;
        } else {
          ASSERT_NEAR(b(i, j), want, 4e-7 * want + 1.5e-45) << at;  // 1 ULP of a subnormal
        }
      }
    }
  }
}

TEST(FusedExp, ExpOfARefAndOfABinaryOpMatchesTheTileEvaluatorOnEveryTarget) {
  const int tried = tessera::testing::on_every_vector_target(
      [](const char* t) { check(std::string("target ") + t); });
  EXPECT_GE(tried, 1);
}

TEST(FusedExp, ExpOfARefAndOfABinaryOpMatchesTheTileEvaluatorChecked) {
  const pltpu::ForceTpuInterpretMode force;
  check("checked");
}

}  // namespace
