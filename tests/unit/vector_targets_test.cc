// The evaluator on every SIMD target this binary has and this CPU supports (AVX-512, AVX2,
// SSE4, ...): the same expressions must give the same results as on the best target, exactly
// for exact ops and within a few ULP for transcendentals and float sums (FMA and vector width
// differ between targets). This is what runs on a CPU without AVX-512.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <vector>

#include "native/vector_plan.h"
#include "tessera/tessera.h"

namespace {
using namespace tessera;

template <class T>
pltpu::VmemRef<T> vref(std::vector<T>& v, Shape s) {
  return pltpu::VmemRef<T>(v.data(), std::move(s));
}

struct Results {
  std::vector<float> f_exact, f_approx, f_sum, f_single;
  std::vector<int32_t> i;
  std::vector<int8_t> b;
};

Results compute() {
  const int R = 7, C = 301;  // ragged rows for every vector width
  std::vector<float> x(R * C);
  std::vector<int32_t> n(R * C);
  for (size_t k = 0; k < x.size(); ++k) {
    x[k] = std::sin(static_cast<float>(k) * 0.731f) * 20.0f;
    // Spread over [-2^23, 2^23): 24 bits of a multiplicative hash, computed without overflow.
    n[k] = static_cast<int32_t>(((k * 2654435761u) >> 7) & 0xffffffu) - (1 << 23);
  }
  auto xr = vref(x, {R, C});
  auto nr = vref(n, {R, C});
  Results r;
  r.f_exact.resize(x.size());
  r.f_approx.resize(x.size());
  r.f_sum.resize(R);
  r.f_single.resize(x.size());
  r.i.resize(x.size());
  r.b.resize(x.size());
  vref(r.f_exact, {R, C}) = jnp::where(xr > 0.0f, jnp::maximum(xr * 2.0f - 1.0f, 0.5f),
                                       jnp::floor(xr) + jnp::abs(jnp::round(xr / 3.0f))) +
                            jnp::sqrt(jnp::abs(xr)) - jnp::sign(xr) * xr % 4.0f;
  vref(r.f_approx, {R, C}) = jnp::exp(xr * 0.1f) + jnp::tanh(xr) + lax::logistic(xr) +
                             jnp::sin(xr) * jnp::cos(xr) + lax::erf(xr * 0.2f) +
                             jnp::log1p(jnp::abs(xr)) + jnp::exp2(xr * 0.5f);
  // One op between a ref and a strided view: the evaluator's fused path.
  std::vector<float> y(x.rbegin(), x.rend());
  vref(r.f_single, {R, C}) = xr / vref(y, {R, C});
  vref(r.f_sum, {R}) = jnp::sum(xr, 1) + jnp::max(xr, 1) - jnp::min(xr, 1);
  vref(r.i, {R, C}) = ((nr >> 3) ^ (nr << 2)) + lax::shift_right_logical(nr, 5) + nr % 7 +
                      jnp::floor_divide(nr, -5) + xr.astype<int32_t>() + jnp::argmax(xr, 1, true) +
                      jnp::sum(nr.astype<int8_t>(), 0);
  vref(r.b, {R, C}) = (nr.astype<int8_t>() >> int8_t{2}) + (xr > 1.0f).astype<int8_t>();
  return r;
}

int64_t ulp_diff(float a, float b) {
  if (std::isnan(a) || std::isnan(b)) return std::isnan(a) && std::isnan(b) ? 0 : INT64_MAX;
  auto key = [](float f) {
    int32_t i;
    std::memcpy(&i, &f, 4);
    return i < 0 ? int64_t{INT32_MIN} - i : int64_t{i};
  };
  return std::llabs(key(a) - key(b));
}

TEST(VectorTargets, EveryTargetAgreesWithTheBest) {
  const auto targets = detail::vector_targets();
  ASSERT_FALSE(targets.empty());
  const Results best = compute();
  int tried = 0;
  for (const auto& [bit, name] : targets) {
    detail::set_vector_targets_for_test(bit);
    const Results r = compute();
    detail::set_vector_targets_for_test(0);
    ++tried;
    for (size_t k = 0; k < best.f_exact.size(); ++k)
      ASSERT_EQ(ulp_diff(r.f_exact[k], best.f_exact[k]), 0) << name << " exact " << k;
    int64_t worst = 0;
    for (size_t k = 0; k < best.f_approx.size(); ++k) {
      ASSERT_LE(ulp_diff(r.f_approx[k], best.f_approx[k]), 16) << name << " approx " << k;
      worst = std::max(worst, ulp_diff(r.f_approx[k], best.f_approx[k]));
    }
    // Non-zero differences on some target show that the switch really happened.
    std::printf("[ target   ] %-6s transcendental chain: max %lld ULP from the best target\n",
                name.c_str(), static_cast<long long>(worst));
    for (size_t k = 0; k < best.f_single.size(); ++k)
      ASSERT_EQ(ulp_diff(r.f_single[k], best.f_single[k]), 0) << name << " single op " << k;
    for (size_t k = 0; k < best.f_sum.size(); ++k)
      ASSERT_NEAR(r.f_sum[k], best.f_sum[k], 1e-4f * (1.0f + std::fabs(best.f_sum[k])))
          << name << " sum " << k;
    ASSERT_EQ(r.i, best.i) << name;
    ASSERT_EQ(r.b, best.b) << name;
  }
  EXPECT_GE(tried, 1);
}

}  // namespace
