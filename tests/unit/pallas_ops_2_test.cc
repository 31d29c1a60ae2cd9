// Ports of Pallas' tests/pallas/ops_test.py, continued (docs/pallas-parity.md; the first part is
// pallas_ops_test.cc and pallas_ops_shape_test.cc): scalar compares in SMEM, boolean and whole
// reductions, select_n, float classification, nextafter, erf_inv, tan / population_count / clz,
// stacking constants, broadcasts, cumsum, triu, and pl.reciprocal. Expected values are numpy's
// (computed in C++ by the same rule, or taken from jax 0.10 on the CPU where stated).
#include <gtest/gtest.h>

#include <algorithm>
#include <bit>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <string>
#include <utility>
#include <vector>

#include "support/pallas_port.h"
#include "tessera/tessera.h"

namespace {
using namespace tessera;
using namespace tessera::pallas_port;

constexpr float kInf = std::numeric_limits<float>::infinity();
constexpr float kNaN = std::numeric_limits<float>::quiet_NaN();

bool same_bits(float a, float b) {
  return std::bit_cast<uint32_t>(a) == std::bit_cast<uint32_t>(b) ||
         (std::isnan(a) && std::isnan(b));
}

// ---- OpsTest ----------------------------------------------------------------------------------

TEST(OpsTest, WeakDtypeBitwise) {
  const Array<int32_t> x = full<int32_t>({8, 128}, 4), y = full<int32_t>({8, 128}, 2);
  const auto run = [&](auto f) {
    return pl::pallas_call([f](pltpu::VmemRef<const int32_t> a, pltpu::VmemRef<const int32_t> b,
                               pltpu::VmemRef<int32_t> o) { o[pl::ellipsis] = f(a, b); },
                           pl::out_shape<int32_t>({8, 128}))(x, y);
  };
  for (int32_t v : run([](auto a, auto b) { return lax::bitwise_and(a, b); })) ASSERT_EQ(v, 0);
  for (int32_t v : run([](auto a, auto b) { return lax::bitwise_or(a, b); })) ASSERT_EQ(v, 6);
  for (int32_t v : run([](auto a, auto b) { return lax::bitwise_xor(a, b); })) ASSERT_EQ(v, 6);
}

template <class T>
void scalar_compare(T xv, T yv) {
  const Array<int32_t> r = pl::pallas_call(
      [](pltpu::SmemRef<const T> x_ref, pltpu::SmemRef<const T> y_ref,
         pltpu::SmemRef<int32_t> o_ref) {
        const T x = x_ref(0, 0);
        const T y = y_ref(0, 0);
        o_ref(0, 0) = x == y ? 1 : 0;
        o_ref(0, 1) = x != y ? 1 : 0;
        o_ref(0, 2) = x < y ? 1 : 0;
        o_ref(0, 3) = x <= y ? 1 : 0;
        o_ref(0, 4) = x > y ? 1 : 0;
        o_ref(0, 5) = x >= y ? 1 : 0;
      },
      pl::out_shape<int32_t>({1, 128}), pl::grid({1}),
      pl::in_specs(pl::BlockSpec(pltpu::SMEM), pl::BlockSpec(pltpu::SMEM)),
      pl::out_specs(pl::BlockSpec(
          {1, 128}, [](int) { return pl::idx(0, 0); }, pltpu::SMEM)))(full<T>({1, 1}, xv),
                                                                      full<T>({1, 1}, yv));
  const int want[] = {xv == yv, xv != yv, xv<yv, xv <= yv, xv> yv, xv >= yv};
  for (int k = 0; k < 6; ++k) EXPECT_EQ(r(0, k), want[k]) << xv << " " << yv << " op " << k;
}

TEST(OpsTest, ScalarCompare) {
  for (auto [x, y] : {std::pair{1, 1}, {1, 16}, {16, 1}, {-1, 1}, {1, -1}}) {
    scalar_compare<int32_t>(x, y);
  }
  for (auto [x, y] : {std::pair{1.0f, 1.0f},
                      {1.0f, 16.0f},
                      {16.0f, 1.0f},
                      {-1.0f, 1.0f},
                      {1.0f, -1.0f},
                      {1.0f, kInf},
                      {kInf, 1.0f},
                      {kInf, kInf},
                      {1.0f, kNaN},
                      {kNaN, 1.0f},
                      {kNaN, kNaN},
                      {kInf, kNaN}}) {
    scalar_compare<float>(x, y);
  }
}

TEST(OpsTest, ReduceBoolean) {
  const Array<float> ones = full<float>({8, 128}, 1.0f);
  Array<float> one_false = ones;
  one_false(0, 0) = 0.0f;
  const Array<float> inputs[] = {ones, full<float>({8, 128}, 0.0f), one_false};
  for (bool any : {false, true}) {
    for (int i = 0; i < 3; ++i) {
      const Array<float> r = pl::pallas_call(
          [any](pltpu::VmemRef<const float> x_ref, pltpu::VmemRef<const float> ones_ref,
                pltpu::SmemRef<float> o_ref) {
            jnp::Value bool_x = x_ref[pl::ellipsis] == ones_ref[pl::ellipsis];
            jnp::Value reduced = any ? jnp::Value(jnp::any(bool_x, {}, true))
                                     : jnp::Value(jnp::all(bool_x, {}, true));
            jnp::Value float_value = jnp::where(reduced, 1.0f, 0.0f);
            o_ref(0, 0) = float_value(0, 0);
          },
          pl::out_shape<float>({1, 1}), pl::grid({1}),
          pl::in_specs(pl::BlockSpec({8, 128}, [](int) { return pl::idx(0, 0); }),
                       pl::BlockSpec({8, 128}, [](int) { return pl::idx(0, 0); })),
          pl::out_specs(pl::BlockSpec({1, 1}, pltpu::SMEM)))(inputs[i], ones);
      const bool want = any ? i != 1 : i == 0;
      EXPECT_EQ(r(0, 0), want ? 1.0f : 0.0f) << (any ? "any " : "all ") << i;
    }
  }
}

TEST(OpsTest, ReduceFloat) {
  const Array<float> x = random_array<float>({8, 128}, 0);
  double sum = 0, abs_sum = 0;
  float mx = -kInf, mn = kInf;
  for (float v : x) {
    sum += v;
    abs_sum += std::fabs(v);
    mx = std::max(mx, v);
    mn = std::min(mn, v);
  }
  for (int op = 0; op < 3; ++op) {
    const Array<float> r = pl::pallas_call(
        [op](pltpu::VmemRef<const float> x_ref, pltpu::SmemRef<float> o_ref) {
          jnp::Value v = x_ref[pl::ellipsis];
          o_ref(0, 0) = op == 0   ? float(jnp::sum(v))
                        : op == 1 ? float(jnp::max(v))
                                  : float(jnp::min(v));
        },
        pl::out_shape<float>({1, 1}), pl::grid({1}),
        pl::in_specs(pl::BlockSpec({8, 128}, [](int) { return pl::idx(0, 0); })),
        pl::out_specs(pl::BlockSpec({1, 1}, pltpu::SMEM)))(x);
    // Pallas' atol=1e-5 compares two float32 sums; against the exact sum a float32 sum of 1024
    // terms is within a few ulps of the sum of magnitudes.
    const double want = op == 0 ? sum : op == 1 ? mx : mn;
    EXPECT_NEAR(r(0, 0), want, op == 0 ? 1e-6 * abs_sum : 0.0) << op;
  }
}

TEST(OpsTest, ReduceInt32) {
  for (const Shape& s : {Shape{32, 256}, Shape{31, 300}}) {
    const Array<int32_t> x = random_array<int32_t>(s, 0);
    int64_t sum = 0;
    int32_t mx = INT32_MIN, mn = INT32_MAX;
    for (int32_t v : x) {
      sum += v;
      mx = std::max(mx, v);
      mn = std::min(mn, v);
    }
    for (int op = 0; op < 3; ++op) {
      const Array<int32_t> r = pl::pallas_call(
          [op](pltpu::VmemRef<const int32_t> x_ref, pltpu::SmemRef<int32_t> o_ref) {
            o_ref(0, 0) = op == 0   ? int32_t(jnp::sum(x_ref[pl::ellipsis]))
                          : op == 1 ? int32_t(jnp::max(x_ref[pl::ellipsis]))
                                    : int32_t(jnp::min(x_ref[pl::ellipsis]));
          },
          pl::out_shape<int32_t>({1, 1}), pl::grid({1}),
          pl::in_specs(pl::BlockSpec()),  // the whole (irregular) array as its block
          pl::out_specs(pl::BlockSpec({1, 1}, pltpu::SMEM)))(x);
      EXPECT_EQ(r(0, 0), op == 0 ? sum : op == 1 ? mx : mn) << op << " " << s.to_string();
    }
  }
}

template <class T>
void select_n_case(const Shape& s, bool array_pred, bool pred_value) {
  const Array<bool> pred = random_array<bool>(s, 7);
  const Array<T> a = random_array<T>(s, 1), b = random_array<T>(s, 2);
  const auto body = [array_pred, pred_value](pltpu::VmemRef<const bool> p_ref,
                                             pltpu::VmemRef<const T> a_ref,
                                             pltpu::VmemRef<const T> b_ref, pltpu::VmemRef<T> o) {
    jnp::Value av = a_ref[pl::ellipsis], bv = b_ref[pl::ellipsis];
    if (array_pred) {
      o[pl::ellipsis] = lax::select_n(p_ref[pl::ellipsis], av, bv);
    } else {
      o[pl::ellipsis] = lax::select_n(pred_value, av, bv);  // a scalar predicate
    }
  };
  const Array<T> r = pl::pallas_call(body, pl::out_shape<T>(s))(pred, a, b);
  for (int64_t i = 0; i < r.size(); ++i) {
    const bool p = array_pred ? pred[i] : pred_value;
    ASSERT_EQ(static_cast<float>(r[i]), static_cast<float>(p ? b[i] : a[i])) << i;
  }
}

TEST(OpsTest, SelectN) {
  for (const Shape& s : {Shape{2, 3}, Shape{8, 128}, Shape{2, 4, 5}, Shape{2, 2, 3, 9}}) {
    for (bool array_pred : {true, false}) {
      for (bool pv : {false, true}) {
        select_n_case<float>(s, array_pred, pv);
        select_n_case<bfloat16>(s, array_pred, pv);
        select_n_case<int32_t>(s, array_pred, pv);
      }
    }
  }
  // One case: select_n returns it.
  const Array<float> a = random_array<float>({8, 128}, 3);
  const Array<float> r = pl::pallas_call(
      [](pltpu::VmemRef<const float> a_ref, pltpu::VmemRef<float> o) {
        jnp::Value w = jnp::zeros<int32_t>({8, 128});
        o[pl::ellipsis] = lax::select_n(w, a_ref[pl::ellipsis]);
      },
      pl::out_shape<float>({8, 128}))(a);
  for (int64_t i = 0; i < a.size(); ++i) ASSERT_EQ(r[i], a[i]);
}

TEST(OpsTest, ErfInv) {
  // jax.lax.erf_inv on the CPU, float32 (the values Pallas' test compares against).
  const float xs[] = {-3.2f, -1.0f, -0.999517f, -0.4f, 0.0f, 0.72f, 0.999517f, 1.0f, 2.4f};
  const float want[] = {kNaN, -kInf,          -0x1.3be18cp+1f, -0x1.7bb4e2p-2f,
                        0.0f, 0x1.871e0cp-1f, 0x1.3be18cp+1f,  kInf,
                        kNaN};
  for (int k = 0; k < 9; ++k) {
    const Array<float> r = pl::pallas_call(
        [](pltpu::VmemRef<const float> x, pltpu::VmemRef<float> o) {
          o[pl::ellipsis] = lax::erf_inv(x[pl::ellipsis]);
        },
        pl::out_shape<float>({8, 128}))(full<float>({8, 128}, xs[k]));
    for (float v : r) ASSERT_TRUE(same_bits(v, want[k])) << xs[k] << ": " << v;
  }
}

TEST(OpsTest, IsFinite) {
  const float vals[] = {-0.2f, kInf, -kInf, kNaN, 0.0f, 1.0f, -1.0f, 0.5f};
  Array<float> x({8});
  for (int i = 0; i < 8; ++i) x[i] = vals[i];
  const Array<bool> r = pl::pallas_call(
      [](pltpu::VmemRef<const float> x_ref, pltpu::VmemRef<bool> o) {
        o[pl::ellipsis] = lax::is_finite(x_ref[pl::ellipsis]);
      },
      pl::out_shape<bool>({8}))(x);
  for (int i = 0; i < 8; ++i) EXPECT_EQ(r[i], std::isfinite(vals[i])) << i;
}

TEST(OpsTest, Isnan) {
  Array<float> x = arange<float>({8});
  x[3] = kNaN;
  const Array<bool> r = pl::pallas_call(
      [](pltpu::VmemRef<const float> x_ref, pltpu::VmemRef<bool> o) {
        o[pl::ellipsis] = jnp::isnan(x_ref[pl::ellipsis]);
      },
      pl::out_shape<bool>({8}))(x);
  for (int i = 0; i < 8; ++i) EXPECT_EQ(r[i], i == 3) << i;
}

TEST(OpsTest, Nextafter) {
  const float vals[] = {-3.2f, -0.0f, 0.0f, 5.1f, kNaN, kInf, -kInf};
  for (float xv : vals) {
    for (float yv : vals) {
      const Array<float> r = pl::pallas_call(
          [](pltpu::VmemRef<const float> x, pltpu::VmemRef<const float> y,
             pltpu::VmemRef<float> o) {
            o[pl::ellipsis] = jnp::nextafter(x[pl::ellipsis], y[pl::ellipsis]);
          },
          pl::out_shape<float>({4}))(full<float>({4}, xv), full<float>({4}, yv));
      // numpy's nextafter is C's (exact equality, as Pallas asserts).
      for (float v : r) ASSERT_TRUE(same_bits(v, std::nextafter(xv, yv))) << xv << " " << yv;
    }
  }
}

TEST(OpsTest, ElementwiseArrayTanPopulationCountClz) {
  Array<float> x({8, 128});
  for (int64_t i = 0; i < x.size(); ++i) x[i] = i % 2 == 0 ? 0.42f : 2.4f;
  const Array<float> t = pl::pallas_call(
      [](pltpu::VmemRef<const float> x_ref, pltpu::VmemRef<float> o) {
        o[pl::ellipsis] = jnp::tan(x_ref[pl::ellipsis]);
      },
      pl::out_shape<float>({8, 128}))(x);
  Array<bfloat16> xb({8, 128});
  for (int64_t i = 0; i < x.size(); ++i) xb[i] = bfloat16(x[i]);
  const Array<bfloat16> tb = pl::pallas_call(
      [](pltpu::VmemRef<const bfloat16> x_ref, pltpu::VmemRef<bfloat16> o) {
        o[pl::ellipsis] = jnp::tan(x_ref[pl::ellipsis]);
      },
      pl::out_shape<bfloat16>({8, 128}))(xb);
  Array<int32_t> xi({8, 128});
  for (int64_t i = 0; i < x.size(); ++i) xi[i] = i % 2 == 0 ? 0 : 2;  // [0.42, 2.4] as int32
  const Array<int32_t> bits = pl::pallas_call(
      [](pltpu::VmemRef<const int32_t> x_ref, pltpu::VmemRef<int32_t> o) {
        jnp::Value v = x_ref[pl::ellipsis];
        o.at(0) = lax::population_count(v);
        o.at(1) = lax::clz(v);
      },
      pl::out_shape<int32_t>({2, 8, 128}))(xi);
  // jax on the CPU: tan(0.42f), tan(2.4f) = 0x1.c94a50p-2, -0x1.d4ffcep-1 (bfloat16: 0.447265625,
  // -0.90625); population_count([0, 2]) = [0, 1], clz = [32, 30].
  for (int64_t i = 0; i < x.size(); ++i) {
    const bool even = i % 2 == 0;
    ASSERT_EQ(t[i], even ? 0x1.c94a50p-2f : -0x1.d4ffcep-1f) << i;
    ASSERT_EQ(static_cast<float>(tb[i]), even ? 0.447265625f : -0.90625f) << i;
    ASSERT_EQ(bits[i], even ? 0 : 1) << i;
    ASSERT_EQ(bits[x.size() + i], even ? 32 : 30) << i;
  }
}

TEST(OpsTest, ConcatConstant) {
  const Array<float> r = pl::pallas_call(
      [](pltpu::VmemRef<float> out) {
        const auto f = [](int i) { return jnp::Value(jnp::full<float>({1, 128}, float(i))); };
        out[pl::ellipsis] = jnp::stack({f(0), f(1), f(2), f(3), f(4), f(5), f(6), f(7), f(8), f(9),
                                        f(10), f(11), f(12), f(13), f(14), f(15)},
                                       0)
                                .reshape({16, 128});
      },
      pl::out_shape<float>({16, 128}), pl::out_specs(pl::BlockSpec(pltpu::VMEM)))();
  for (int i = 0; i < 16; ++i)
    for (int j = 0; j < 128; ++j) ASSERT_EQ(r(i, j), float(i));
}

TEST(OpsTest, WhereBroadcasting) {
  const Array<float> x = arange<float>({7, 2, 2});
  for (int ii = 0; ii < 7; ++ii) {
    for (int oi = 0; oi < 4; ++oi) {
      const Array<float> out = pl::pallas_call(
          [](pltpu::VmemRef<const float> x_ref, pltpu::SmemRef<const int32_t> in_idx,
             pltpu::SmemRef<const int32_t> out_idx, pltpu::VmemRef<float> o_ref) {
            jnp::Value mask = jnp::reshape(jnp::arange<int32_t>(4) == out_idx(), {4, 1, 1});
            o_ref[pl::ellipsis] = jnp::where(mask, x_ref.at(in_idx()), 0.0f);
          },
          pl::in_specs(pl::BlockSpec(), pl::BlockSpec(pltpu::SMEM), pl::BlockSpec(pltpu::SMEM)),
          pl::out_shape<float>({4, 2, 2}))(x, full<int32_t>({}, ii), full<int32_t>({}, oi));
      for (int i = 0; i < 4; ++i)
        for (int j = 0; j < 2; ++j)
          for (int k = 0; k < 2; ++k) ASSERT_EQ(out(i, j, k), i == oi ? x(ii, j, k) : 0.0f);
    }
  }
}

TEST(OpsTest, ReshapeToScalar) {
  const Array<int32_t> x = arange<int32_t>({4, 4});
  const Array<int32_t> r = pl::pallas_call(
      [](pltpu::VmemRef<const int32_t> x_ref, pltpu::VmemRef<int32_t> o_ref) {
        o_ref[pl::ellipsis] = jnp::zeros_like(o_ref);
        jnp::Value array_val = x_ref[{pl::ds(1, 1), pl::ds(0, 1)}];
        const int32_t scalar_val = jnp::reshape(array_val, Shape{});
        o_ref.at(scalar_val) = jnp::ones_like(o_ref.at(0)) * scalar_val;
      },
      pl::out_shape<int32_t>({8, 128}))(x);
  for (int i = 0; i < 8; ++i)
    for (int j = 0; j < 128; ++j) ASSERT_EQ(r(i, j), i == 4 ? 4 : 0) << i << " " << j;
}

template <class T>
void broadcast_in_dim_case(Shape in, Shape out, std::initializer_list<int64_t> dims) {
  Array<T> x(in);
  for (int64_t i = 0; i < x.size(); ++i) x[i] = in.rank() == 0 ? T(42) : static_cast<T>(i);
  const auto body = [out, dims](auto x_ref, pltpu::VmemRef<T> o_ref) {
    jnp::Value v = x_ref[pl::ellipsis];
    o_ref[pl::ellipsis] = lax::broadcast_in_dim(v, out, dims);
  };
  Array<T> r(out);
  if (in.rank() == 0) {
    r = pl::pallas_call(
        [body](pltpu::SmemRef<const T> x_ref, pltpu::VmemRef<T> o_ref) { body(x_ref, o_ref); },
        pl::in_specs(pl::BlockSpec(pltpu::SMEM)), pl::out_shape<T>(out))(x);
  } else {
    r = pl::pallas_call(
        [body](pltpu::VmemRef<const T> x_ref, pltpu::VmemRef<T> o_ref) { body(x_ref, o_ref); },
        pl::in_specs(pl::BlockSpec()), pl::out_shape<T>(out))(x);
  }
  // numpy's broadcast: every output element is the input element at its index, with size-1 axes
  // (and the new axes) pinned to 0.
  for (int64_t i = 0; i < r.size(); ++i) {
    int64_t src = 0;
    if (in.rank() > 0) {
      const int64_t row = out.rank() == 2 ? i % out[1] : i;
      src = in.size() == 1 ? 0 : row;
    }
    ASSERT_EQ(r[i], x[src]) << in.to_string() << " -> " << out.to_string() << " at " << i;
  }
}

template <class T>
void broadcast_in_dim_all() {
  broadcast_in_dim_case<T>(Shape{}, Shape{2}, {});
  broadcast_in_dim_case<T>(Shape{1}, Shape{2}, {0});
  broadcast_in_dim_case<T>(Shape{1, 128}, Shape{8, 128}, {0, 1});
  broadcast_in_dim_case<T>(Shape{}, Shape{2, 2}, {});
}

TEST(OpsTest, BroadcastInDim) {
  broadcast_in_dim_all<int32_t>();
  broadcast_in_dim_all<int16_t>();
  broadcast_in_dim_all<int8_t>();
  broadcast_in_dim_all<bool>();
}

template <class T>
void cumsum_case(int axis, uint64_t seed) {
  const int m = 32, n = 8;
  Array<T> x({m, n});
  Random rng(seed);
  if constexpr (std::is_integral_v<T>) {
    // A permutation of arange(m * n), as Pallas' test draws it.
    std::vector<T> p(static_cast<size_t>(m * n));
    for (size_t i = 0; i < p.size(); ++i) p[i] = static_cast<T>(i);
    for (size_t i = p.size() - 1; i > 0; --i) std::swap(p[i], p[rng.next() % (i + 1)]);
    for (int64_t i = 0; i < x.size(); ++i) x[i] = p[static_cast<size_t>(i)];
  } else {
    for (int64_t i = 0; i < x.size(); ++i) x[i] = rng.uniform();
  }
  const Array<T> y = pl::pallas_call(
      [axis](pltpu::VmemRef<const T> x_ref, pltpu::VmemRef<T> y_ref) {
        jnp::Value v = x_ref[pl::ellipsis];
        y_ref[pl::ellipsis] = jnp::cumsum(v, axis);
      },
      pl::out_shape<T>({m, n}), pl::grid({}))(x);
  for (int i = 0; i < m; ++i) {
    for (int j = 0; j < n; ++j) {
      double s = 0;
      if (axis == 0) {
        for (int k = 0; k <= i; ++k) s += static_cast<double>(x(k, j));
      } else {
        for (int k = 0; k <= j; ++k) s += static_cast<double>(x(i, k));
      }
      ASSERT_NEAR(static_cast<double>(y(i, j)), s, 1e-2 + 1e-2 * std::fabs(s)) << i << " " << j;
    }
  }
}

TEST(OpsTest, Cumsum) {
  for (int axis : {0, 1}) {
    for (uint64_t seed = 0; seed < 20; ++seed) {
      cumsum_case<float>(axis, seed);
      cumsum_case<int32_t>(axis, seed);
      cumsum_case<uint32_t>(axis, seed);
      cumsum_case<float16>(axis, seed);
    }
  }
}

template <class T>
void triu_case(int k) {
  const Array<T> x = arange<T>({128, 256});
  const Array<T> out = pl::pallas_call(
      [k](pltpu::VmemRef<const T> x_ref, pltpu::VmemRef<T> o_ref) {
        o_ref[pl::ellipsis] = jnp::triu(x_ref[pl::ellipsis], k);
      },
      pl::out_shape<T>({128, 256}))(x);
  for (int i = 0; i < 128; ++i)
    for (int j = 0; j < 256; ++j)
      ASSERT_EQ(static_cast<float>(out(i, j)), j - i >= k ? static_cast<float>(x(i, j)) : 0.0f)
          << k << " " << i << " " << j;
}

TEST(OpsTest, Triu) {
  for (int k : {0, 1, -1}) {
    triu_case<float>(k);
    triu_case<bfloat16>(k);
  }
}

template <class In, class Out>
void bitcast_array_case() {
  const Array<In> x = arange<In>({4, 4});
  const Array<Out> y = pl::pallas_call(
      [](pltpu::VmemRef<const In> x_ref, pltpu::VmemRef<Out> y_ref) {
        y_ref[pl::ellipsis] = lax::bitcast_convert_type<Out>(x_ref[pl::ellipsis]);
      },
      pl::out_shape<Out>({4, 4}), pl::grid({}))(x);
  // numpy's x.view(out_dtype): the same bytes.
  for (int64_t i = 0; i < x.size(); ++i) {
    ASSERT_EQ(std::memcmp(&y[i], &x[i], sizeof(In)), 0) << i;
  }
}

TEST(OpsTest, BitcastConvertTypeArray) {
  bitcast_array_case<float16, float16>();
  bitcast_array_case<int16_t, bfloat16>();
  bitcast_array_case<int16_t, float16>();
  bitcast_array_case<uint16_t, float16>();
  bitcast_array_case<float, int32_t>();
  bitcast_array_case<float, uint32_t>();
  bitcast_array_case<uint32_t, int32_t>();
  bitcast_array_case<int32_t, uint32_t>();
}

TEST(OpsTest, BitcastConvertTypeScalar) {
  const Array<float> y = pl::pallas_call(
      [](pltpu::SmemRef<const int32_t> x_ref, pltpu::SmemRef<float> y_ref) {
        y_ref[pl::ellipsis] = lax::bitcast_convert_type<float>(x_ref[pl::ellipsis]);
      },
      pl::in_specs(pl::BlockSpec(pltpu::SMEM)), pl::out_specs(pl::BlockSpec(pltpu::SMEM)),
      pl::out_shape<float>(Shape{}))(full<int32_t>({}, 42));
  EXPECT_EQ(y[0], 0x1.5p-144f);  // np.int32(42).view(np.float32): a subnormal
}

template <class T>
void pad_case(Shape s, std::pair<int64_t, int64_t> p0, std::pair<int64_t, int64_t> p1,
              const char* mode) {
  const Array<T> x = arange<T>(s);
  const Shape out{s[0] + p0.first + p0.second, s[1] + p1.first + p1.second};
  const Array<T> r = pl::pallas_call(
      [p0, p1, mode](pltpu::VmemRef<const T> x_ref, pltpu::VmemRef<T> o_ref) {
        o_ref[pl::ellipsis] = jnp::pad(x_ref[pl::ellipsis], {p0, p1}, mode);
      },
      pl::out_shape<T>(out))(x);
  const bool wrap = std::string(mode) == "wrap";
  const auto mod = [](int64_t a, int64_t n) { return ((a % n) + n) % n; };
  for (int64_t i = 0; i < out[0]; ++i) {
    for (int64_t j = 0; j < out[1]; ++j) {
      const int64_t si = i - p0.first, sj = j - p1.first;
      const bool inside = si >= 0 && si < s[0] && sj >= 0 && sj < s[1];
      const float want = wrap     ? static_cast<float>(x(mod(si, s[0]), mod(sj, s[1])))
                         : inside ? static_cast<float>(x(si, sj))
                                  : 0.0f;
      ASSERT_EQ(static_cast<float>(r(i, j)), want)
          << s.to_string() << " " << mode << " " << i << " " << j;
    }
  }
}

TEST(OpsTest, ArbitraryPaddingJnpPad) {
  using P = std::pair<int64_t, int64_t>;
  for (const Shape& s : {Shape{4, 128}, Shape{10, 100}, Shape{8, 128}, Shape{17, 257}}) {
    for (const auto& [p0, p1] : {std::pair{P{5, 8}, P{0, 0}}, std::pair{P{0, 0}, P{5, 100}},
                                 std::pair{P{1, 1}, P{1, 1}}, std::pair{P{0, 0}, P{0, 0}}}) {
      for (const char* mode : {"constant", "wrap"}) {
        pad_case<float>(s, p0, p1, mode);
        pad_case<bfloat16>(s, p0, p1, mode);
      }
    }
  }
}

TEST(OpsTest, JnpDiagonalPallas) {
  for (int n : {128, 256}) {
    const Array<float> x = arange<float>({n, n});
    const Array<float> out = pl::pallas_call(
        [](pltpu::VmemRef<const float> x_ref, pltpu::VmemRef<float> o_ref) {
          o_ref[pl::ellipsis] = jnp::diagonal(x_ref[pl::ellipsis]);
        },
        pl::out_shape<float>({n}))(x);
    for (int i = 0; i < n; ++i) ASSERT_EQ(out[i], x(i, i)) << i;
  }
}

// ---- PallasPrimitivesTest ---------------------------------------------------------------------

TEST(PallasPrimitivesTest, Reciprocal) {
  for (bool approx : {false, true}) {
    for (bool full_range : {false, true}) {
      Array<float> x = arange<float>({32, 256});
      if (!full_range) x[0] = -1.0f;
      const Array<float> out = pl::pallas_call(
          [approx, full_range](pltpu::VmemRef<const float> x_ref, pltpu::VmemRef<float> o_ref) {
            o_ref[pl::ellipsis] = pl::reciprocal(x_ref[pl::ellipsis], approx, full_range);
          },
          pl::out_shape<float>({32, 256}))(x);
      // lax.reciprocal(x) = 1 / x; Tessera's approx result is the exact one.
      for (int64_t i = 0; i < x.size(); ++i) ASSERT_EQ(out[i], 1.0f / x[i]) << i;
    }
  }
}

}  // namespace
