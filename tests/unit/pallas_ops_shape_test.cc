// Ports of ops_test.py's iota, reductions, transposes and reshapes (docs/pallas-parity.md).
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <numeric>
#include <vector>

#include "support/pallas_port.h"
#include "tessera/tessera.h"

namespace {
using namespace tessera;
using namespace tessera::pallas_port;

// test_array_reduce: an (32, 8) array reduced along one axis, the grid running over the other
// (every step computes the same whole-array result, as in Pallas' test).
template <class T, class R>
void array_reduce(int op, int axis, uint64_t seed) {
  constexpr int64_t m = 32, n = 8;
  Array<T> x({m, n});
  if constexpr (std::is_integral_v<T>) {
    std::vector<int64_t> perm(m * n);
    std::iota(perm.begin(), perm.end(), 0);
    Random r(seed);
    for (size_t i = perm.size(); i > 1; --i) std::swap(perm[i - 1], perm[r.next() % i]);
    for (int64_t i = 0; i < m * n; ++i) x[i] = static_cast<T>(perm[static_cast<size_t>(i)]);
  } else {
    x = random_array<T>({m, n}, seed);
  }
  const int64_t out_len = axis == 0 ? n : m;
  const Array<R> y = pl::pallas_call(
      [op, axis](pltpu::VmemRef<const T> xr, pltpu::VmemRef<R> o) {
        if constexpr (std::is_same_v<R, int32_t> && !std::is_same_v<T, int32_t>) {
          if (op == 3) o = jnp::argmax(xr, axis);
          if (op == 4) o = jnp::argmin(xr, axis);
        } else {
          if (op == 0) o = jnp::sum(xr, axis);
          if (op == 1) o = jnp::max(xr, axis);
          if (op == 2) o = jnp::min(xr, axis);
        }
      },
      pl::out_shape<R>({out_len}), pl::grid({out_len}))(x);
  for (int64_t k = 0; k < out_len; ++k) {
    double acc = op == 0 ? 0.0 : static_cast<double>(axis == 0 ? x(0, k) : x(k, 0));
    int64_t best = 0;
    const int64_t len = axis == 0 ? m : n;
    for (int64_t t = 0; t < len; ++t) {
      const double v = static_cast<double>(axis == 0 ? x(t, k) : x(k, t));
      if (op == 0) acc += v;
      if ((op == 1 || op == 3) && v > acc) {
        acc = v;
        best = t;
      }
      if ((op == 2 || op == 4) && v < acc) {
        acc = v;
        best = t;
      }
    }
    if (op >= 3) {
      ASSERT_EQ(static_cast<int64_t>(y[k]), best);
    } else {
      ASSERT_NEAR(static_cast<double>(y[k]), acc, 1e-2 + 1e-2 * std::abs(acc)) << op << " " << k;
    }
  }
}

TEST(OpsTest, ArrayReduce) {
  for (int axis : {0, 1}) {
    for (uint64_t seed = 0; seed < 3; ++seed) {  // Pallas draws 20 arrays
      for (int op : {0, 1, 2}) {
        array_reduce<float, float>(op, axis, seed);
        array_reduce<bfloat16, bfloat16>(op, axis, seed);
        array_reduce<int32_t, int32_t>(op, axis, seed);
      }
      array_reduce<float, int32_t>(3, axis, seed);
      array_reduce<float, int32_t>(4, axis, seed);
    }
  }
}

template <class T>
Array<T> transpose(const Array<T>& x, const std::vector<int>& axes) {
  Shape out = x.shape();
  for (size_t a = 0; a < axes.size(); ++a) out[static_cast<int>(a)] = x.shape()[axes[a]];
  // jnp::transpose takes its permutation as a braced list (of run-time values here).
  return pl::pallas_call(
      [a = axes](pltpu::VmemRef<const T> xr, pltpu::VmemRef<T> o) {
        if (a.size() == 3) o = jnp::transpose(xr, {a[0], a[1], a[2]});
        if (a.size() == 4) o = jnp::transpose(xr, {a[0], a[1], a[2], a[3]});
        if (a.size() == 5) o = jnp::transpose(xr, {a[0], a[1], a[2], a[3], a[4]});
      },
      pl::out_shape<T>(out))(x);
}

// Element `flat` of x transposed by `axes` (the reference of np.transpose).
int64_t transposed_source(int64_t flat, const Shape& in, const std::vector<int>& axes) {
  const int r = in.rank();
  std::vector<int64_t> out_idx(static_cast<size_t>(r));
  for (int a = r - 1; a >= 0; --a) {
    const int64_t ext = in[axes[static_cast<size_t>(a)]];
    out_idx[static_cast<size_t>(a)] = flat % ext;
    flat /= ext;
  }
  std::vector<int64_t> in_idx(static_cast<size_t>(r));
  for (int a = 0; a < r; ++a)
    in_idx[static_cast<size_t>(axes[static_cast<size_t>(a)])] = out_idx[static_cast<size_t>(a)];
  int64_t src = 0;
  for (int a = 0; a < r; ++a) src = src * in[a] + in_idx[static_cast<size_t>(a)];
  return src;
}

void expect_transpose(const Shape& shape, const std::vector<int>& axes) {
  const Array<float> x = arange<float>(shape);
  const Array<float> y = transpose(x, axes);
  for (int64_t i = 0; i < y.size(); ++i) {
    ASSERT_EQ(y[i], x[transposed_source(i, shape, axes)]) << shape.to_string() << " " << i;
  }
}

TEST(OpsTest, JnpSwapaxesMajorMinor) {  // jnp.swapaxes(x, 0, 1) is spelled jnp::transpose
  for (int64_t xd = 8; xd <= 32; xd += 8) {
    for (int64_t yd = 8; yd <= 32; yd += 8) {
      for (int64_t zd : {128, 256}) expect_transpose({xd, yd, zd}, {1, 0, 2});
    }
  }
}

TEST(OpsTest, Transpose) {
  const std::vector<std::pair<Shape, std::vector<int>>> cases = {
      {{8, 16, 128}, {0, 2, 1}},          {{16, 128, 128}, {1, 0, 2}},
      {{8, 16, 128}, {1, 2, 0}},          {{8, 16, 128}, {2, 0, 1}},
      {{8, 16, 128}, {2, 1, 0}},          {{1, 2, 16, 128}, {0, 1, 2, 3}},
      {{1, 2, 16, 128}, {1, 0, 3, 2}},    {{8, 16, 8, 128}, {0, 2, 1, 3}},
      {{2, 8, 8, 3}, {0, 2, 1, 3}},       {{2, 8, 16, 8, 128}, {0, 1, 3, 2, 4}},
      {{1, 2, 8, 8, 1}, {0, 1, 3, 2, 4}}, {{3, 2, 8, 8, 8}, {1, 0, 3, 2, 4}}};
  for (const auto& [shape, axes] : cases) expect_transpose(shape, axes);
  std::vector<int> perm = {0, 1, 2, 3, 4};
  do {
    expect_transpose({1, 2, 9, 3, 4}, perm);
  } while (std::next_permutation(perm.begin(), perm.end()));
}

// test_reshape_noop_or_singleton_dims: reshapes that add or drop unit dims.
void reshape_case(const Shape& in, const Shape& out) {
  const Array<float> x =
      in.rank() == 0 ? Array<float>(Shape{}, std::vector<float>{42.0f}) : arange<float>(in);
  const Array<float> y =
      in.rank() == 0
          ? pl::pallas_call([out](pltpu::SmemRef<const float> xr,
                                  pltpu::VmemRef<float> o) { o = jnp::reshape(xr, out); },
                            pl::in_specs(pl::BlockSpec(MemorySpace::SMEM)),
                            pl::out_shape<float>(out))(x)
          : pl::pallas_call([out](pltpu::VmemRef<const float> xr,
                                  pltpu::VmemRef<float> o) { o = jnp::reshape(xr, out); },
                            pl::out_shape<float>(out))(x);
  for (int64_t i = 0; i < x.size(); ++i) ASSERT_EQ(y[i], x[i]) << in.to_string();
}

TEST(OpsTest, ReshapeNoopOrSingletonDims) {
  reshape_case({}, {1});
  reshape_case({}, {1, 1});
  reshape_case({2, 4}, {2, 4});
  reshape_case({2, 4}, {1, 2, 4});
  reshape_case({1, 2, 4}, {2, 4});
  reshape_case({2, 4}, {2, 1, 4});
  reshape_case({1, 2, 4, 1}, {1, 2, 1, 4, 1});
  // The cases that move the last dim (Tessera reshapes any layout, as Pallas' interpret mode).
  reshape_case({2, 4}, {2, 4, 1});
  reshape_case({2, 4, 1}, {2, 4});
  reshape_case({1, 2, 1, 4, 1}, {2, 4});
  reshape_case({2, 4}, {1, 2, 1, 4});
  reshape_case({2, 4}, {1, 2, 4, 1});
}

TEST(OpsTest, Reshape) {
  reshape_case({2, 4}, {8});
  reshape_case({2, 4}, {8, 1});
  reshape_case({2, 4}, {1, 8});
  reshape_case({64}, {32, 2});
}

template <class T>
void iota(const Shape& shape, int dimension) {
  const Array<T> out = pl::pallas_call(
      [shape, dimension](pltpu::VmemRef<T> o) { o = lax::broadcasted_iota<T>(shape, dimension); },
      pl::out_shape<T>(shape))();
  int64_t inner = 1;
  for (int a = dimension + 1; a < shape.rank(); ++a) inner *= shape[a];
  for (int64_t i = 0; i < out.size(); ++i) {
    ASSERT_EQ(out[i], static_cast<T>((i / inner) % shape[dimension]));
  }
}

TEST(OpsTest, Iota) {
  for (const auto& [shape, dim] : std::vector<std::pair<Shape, int>>{{{32}, 0},
                                                                     {{8, 4}, 0},
                                                                     {{8, 4}, 1},
                                                                     {{8, 16, 2}, 0},
                                                                     {{8, 16, 2}, 1},
                                                                     {{8, 16, 2}, 2}}) {
    iota<float>(shape, dim);
    iota<int32_t>(shape, dim);
    iota<int8_t>(shape, dim);
  }
}

TEST(OpsTest, NumPrograms) {
  const Array<int32_t> out = pl::pallas_call(
      [](pltpu::SmemRef<int32_t> o) {
        o(pl::program_id(0)) = static_cast<int32_t>(pl::num_programs(0));
      },
      pl::out_specs(pl::BlockSpec(MemorySpace::SMEM)), pl::out_shape<int32_t>({4}),
      pl::grid({4}))();
  EXPECT_EQ(out.to_vector(), (std::vector<int32_t>{4, 4, 4, 4}));
}

TEST(OpsTest, StridedLoad) {
  const Array<float> x = arange<float>({16, 4});
  const Array<float> out = pl::pallas_call(
      [](pltpu::VmemRef<const float> xr, pltpu::VmemRef<float> o) { o = xr.at(pl::ds(0, 4, 4)); },
      pl::out_shape<float>({4, 4}))(x);
  for (int64_t r = 0; r < 4; ++r) {
    for (int64_t c = 0; c < 4; ++c) ASSERT_EQ(out(r, c), x(4 * r, c));
  }
}

TEST(OpsTest, ReduceOnlyDim) {
  const Array<float> x = random_array<float>({32}, 0);
  const Array<float> y = pl::pallas_call(
      [](pltpu::VmemRef<const float> xr, pltpu::SmemRef<float> o) { o = jnp::sum(xr, -1); },
      pl::out_shape<float>(Shape{}), pl::out_specs(pl::BlockSpec(MemorySpace::SMEM)))(x);
  double want = 0;
  for (float v : x) want += v;
  EXPECT_NEAR(y[0], want, 1e-2 + 1e-2 * std::abs(want));
}

}  // namespace
