// Products on values (dot of values and expressions, batched dot_general, einsum, vectors),
// control flow carrying values (fori_loop, while_loop, cond, when) and the shape ops of
// tessera/vector_shape.h, inside kernels and against plain C++ references.
#include <gtest/gtest.h>

#include <atomic>
#include <cmath>
#include <random>
#include <string>
#include <tuple>
#include <vector>

#include "support/expect_error.h"
#include "tessera/tessera.h"

namespace {
using namespace tessera;

Array<float> random_array(Shape s, uint32_t seed) {
  std::mt19937 rng(seed);
  std::uniform_real_distribution<float> d(-1.0f, 1.0f);
  Array<float> a(std::move(s));
  for (int64_t i = 0; i < a.size(); ++i) a[i] = d(rng);
  return a;
}

// c(b, i, j) = sum_p a(b, i, p) * w(b, j, p), as double.
std::vector<double> batched_abt(const Array<float>& a, const Array<float>& w) {
  const int64_t B = a.shape()[0], M = a.shape()[1], K = a.shape()[2], N = w.shape()[1];
  std::vector<double> c(static_cast<size_t>(B * M * N));
  for (int64_t b = 0; b < B; ++b)
    for (int64_t i = 0; i < M; ++i)
      for (int64_t j = 0; j < N; ++j) {
        double s = 0;
        for (int64_t p = 0; p < K; ++p) s += double(a(b, i, p)) * double(w(b, j, p));
        c[static_cast<size_t>((b * M + i) * N + j)] = s;
      }
  return c;
}

TEST(ValueDot, ProductsOfValuesAndExpressions) {
  // Flash attention's first lines: s = q @ k.T; p = exp(s - max); o = p @ v.
  auto k = pl::pallas_call(
      [](pltpu::VmemRef<const float> q_ref, pltpu::VmemRef<const float> k_ref,
         pltpu::VmemRef<const float> v_ref, pltpu::VmemRef<float> o_ref) {
        jnp::Value q = q_ref[pl::ellipsis];
        jnp::Value kk = k_ref[pl::ellipsis];
        auto s = jnp::dot(q, kk.T());  // pure product: computed once for its three uses
        jnp::Value m = s.max(1, true);
        auto p = jnp::exp(s - m);
        jnp::Value l = p.sum(1, true);
        o_ref[pl::ellipsis] = jnp::dot(p, v_ref) / l;
      },
      pl::out_shape<float>({16, 32}));
  const Array<float> q = random_array({16, 64}, 1), kk = random_array({24, 64}, 2),
                     v = random_array({24, 32}, 3);
  const Array<float> o = k(q, kk, v);
  for (int i = 0; i < 16; ++i) {
    std::vector<double> s(24);
    double m = -1e30, l = 0;
    for (int j = 0; j < 24; ++j) {
      for (int p = 0; p < 64; ++p) s[j] += double(q(i, p)) * double(kk(j, p));
      m = std::max(m, s[j]);
    }
    for (int j = 0; j < 24; ++j) l += std::exp(s[j] - m);
    for (int c = 0; c < 32; ++c) {
      double want = 0;
      for (int j = 0; j < 24; ++j) want += std::exp(s[j] - m) * double(v(j, c));
      ASSERT_NEAR(o(i, c), want / l, 2e-5) << i << "," << c;
    }
  }
}

TEST(ValueDot, AccumulatingAProductOfAnExpression) {
  auto k = pl::pallas_call(
      [](pltpu::VmemRef<const float> x_ref, pltpu::VmemRef<const float> y_ref,
         pltpu::VmemRef<float> o_ref) {
        o_ref[pl::ellipsis] = jnp::zeros_like(o_ref);
        o_ref[pl::ellipsis] +=
            jnp::dot<float>(x_ref.astype<bfloat16>(), y_ref[pl::ellipsis].astype<bfloat16>());
        o_ref += jnp::dot(x_ref, y_ref);
      },
      pl::out_shape<float>({8, 16}));
  const Array<float> x = random_array({8, 32}, 4), y = random_array({32, 16}, 5);
  const Array<float> o = k(x, y);
  for (int i = 0; i < 8; ++i)
    for (int j = 0; j < 16; ++j) {
      double bf = 0, f = 0;
      for (int p = 0; p < 32; ++p) {
        bf += double(float(bfloat16(x(i, p)))) * double(float(bfloat16(y(p, j))));
        f += double(x(i, p)) * double(y(p, j));
      }
      ASSERT_NEAR(o(i, j), bf + f, 1e-4);
    }
}

TEST(Einsum, BatchedProductsAndOutputOrder) {
  auto k = pl::pallas_call(
      [](pltpu::VmemRef<const float> a, pltpu::VmemRef<const float> w, pltpu::VmemRef<float> c,
         pltpu::VmemRef<float> ct, pltpu::VmemRef<float> g) {
        c[pl::ellipsis] = jnp::einsum("bqd,bkd->bqk", a, w);
        ct[pl::ellipsis] = jnp::einsum("bqd,bkd->kbq", a, w);
        g[pl::ellipsis] = lax::dot_general(a, w, {{{2}, {2}}, {{0}, {0}}});
      },
      pl::out_shape(ShapeDtypeStruct<float>{{3, 4, 5}}, ShapeDtypeStruct<float>{{5, 3, 4}},
                    ShapeDtypeStruct<float>{{3, 4, 5}}));
  const Array<float> a = random_array({3, 4, 8}, 6), w = random_array({3, 5, 8}, 7);
  auto [c, ct, g] = k(a, w);
  const std::vector<double> want = batched_abt(a, w);
  for (int b = 0; b < 3; ++b)
    for (int i = 0; i < 4; ++i)
      for (int j = 0; j < 5; ++j) {
        const double v = want[static_cast<size_t>((b * 4 + i) * 5 + j)];
        ASSERT_NEAR(c(b, i, j), v, 1e-5);
        ASSERT_NEAR(g(b, i, j), v, 1e-5);
        ASSERT_NEAR(ct(j, b, i), v, 1e-5);
      }
}

TEST(Einsum, TwoDimensionalFormsAndVectors) {
  auto k = pl::pallas_call(
      [](pltpu::VmemRef<const float> x, pltpu::VmemRef<const float> y,
         pltpu::VmemRef<const float> v, pltpu::VmemRef<float> xy, pltpu::VmemRef<float> xyt,
         pltpu::VmemRef<float> xv, pltpu::VmemRef<float> vy) {
        xy[pl::ellipsis] = jnp::einsum("ij,jk->ik", x, y);
        xyt[pl::ellipsis] = jnp::einsum("ij,jk->ki", x, y);
        xv[pl::ellipsis] = jnp::dot(x, v);                            // (M, K) @ (K,) -> (M,)
        vy[pl::ellipsis] = jnp::dot(jnp::Value(v[pl::ellipsis]), y);  // (K,) @ (K, N) -> (N,)
      },
      pl::out_shape(ShapeDtypeStruct<float>{{4, 6}}, ShapeDtypeStruct<float>{{6, 4}},
                    ShapeDtypeStruct<float>{{4}}, ShapeDtypeStruct<float>{{6}}));
  const Array<float> x = random_array({4, 5}, 8), y = random_array({5, 6}, 9),
                     v = random_array({5}, 10);
  auto [xy, xyt, xv, vy] = k(x, y, v);
  for (int i = 0; i < 4; ++i) {
    double sv = 0;
    for (int p = 0; p < 5; ++p) sv += double(x(i, p)) * double(v[p]);
    ASSERT_NEAR(xv[i], sv, 1e-5);
    for (int j = 0; j < 6; ++j) {
      double s = 0;
      for (int p = 0; p < 5; ++p) s += double(x(i, p)) * double(y(p, j));
      ASSERT_NEAR(xy(i, j), s, 1e-5);
      ASSERT_NEAR(xyt(j, i), s, 1e-5);
    }
  }
  for (int j = 0; j < 6; ++j) {
    double s = 0;
    for (int p = 0; p < 5; ++p) s += double(v[p]) * double(y(p, j));
    ASSERT_NEAR(vy[j], s, 1e-5);
  }
}

// Runs f, expects a UsageError of `kind` whose message says `says`.
template <class F>
void expect_usage_error(F&& f, ErrorKind kind, const std::string& says) {
  auto e = tessera::testing::catch_error<UsageError>(f);
  ASSERT_TRUE(e);
  EXPECT_EQ(e->kind(), kind) << e->what();
  EXPECT_NE(std::string(e->what()).find(says), std::string::npos) << e->what();
}

TEST(Einsum, SubscriptsThatAreNotOneProductAreRefused) {
  std::vector<float> a(12), b(12);
  pltpu::VmemRef<float> x(a.data(), Shape{3, 4});
  pltpu::VmemRef<float> y(b.data(), Shape{4, 3});
  const auto k = ErrorKind::kInvalidArgument;
  expect_usage_error([&] { (void)jnp::einsum("ijk", x, y); }, k, "two subscripts");
  expect_usage_error([&] { (void)jnp::einsum("ij,jk->ijk", x, y); }, k, "no letter is contracted");
  expect_usage_error([&] { (void)jnp::einsum("ij,ji->", x, y); }, k, "2 letters are contracted");
  expect_usage_error([&] { (void)jnp::einsum("ij,kl->il", x, y); }, k,
                     "summed over one operand only");
  expect_usage_error([&] { (void)jnp::einsum("ii,jk->ik", x, y); }, k, "appears twice");
  expect_usage_error([&] { (void)jnp::einsum("ijk,jk->ik", x, y); }, k, "ranks 2 and 2");
}

TEST(ValueDot, BatchExtentsMustAgree) {
  std::vector<float> a(2 * 3 * 4), b(3 * 5 * 4), c(2 * 3 * 5);
  pltpu::VmemRef<float> x(a.data(), Shape{2, 3, 4});
  pltpu::VmemRef<float> y(b.data(), Shape{3, 5, 4});
  pltpu::VmemRef<float> o(c.data(), Shape{2, 3, 5});
  expect_usage_error(
      [&] {
        o = lax::dot_general(x, y, {{{2}, {2}}, {{0}, {0}}});
      },
      ErrorKind::kShapeMismatch, "batch extents must be equal");
}

TEST(Control, ForiLoopCarriesValuesAndTuples) {
  auto k = pl::pallas_call(
      [](pltpu::VmemRef<const float> x_ref, pltpu::VmemRef<float> o_ref,
         pltpu::VmemRef<float> m_ref) {
        // acc = lax.fori_loop(0, 8, lambda i, acc: acc + x_ref[i], zeros)
        auto acc = lax::fori_loop(
            0, 8, [&](int i, const jnp::Value<float>& a) { return a + x_ref[i]; },
            jnp::zeros<float>({16}));
        o_ref[pl::ellipsis] = acc;
        auto [m, n] = lax::fori_loop(
            0, 8,
            [&](int i, const std::tuple<jnp::Value<float>, int>& c) {
              return std::tuple{jnp::maximum(std::get<0>(c), x_ref[i]), std::get<1>(c) + 1};
            },
            std::tuple{jnp::full<float>({16}, -1e30f), 0});
        m_ref[pl::ellipsis] = m + static_cast<float>(n - 8);
      },
      pl::out_shape(ShapeDtypeStruct<float>{{16}}, ShapeDtypeStruct<float>{{16}}));
  const Array<float> x = random_array({8, 16}, 11);
  auto [o, m] = k(x);
  for (int c = 0; c < 16; ++c) {
    float s = 0, mx = -1e30f;
    for (int r = 0; r < 8; ++r) {
      s += x(r, c);
      mx = std::max(mx, x(r, c));
    }
    ASSERT_NEAR(o[c], s, 1e-5);
    ASSERT_EQ(m[c], mx);
  }
}

TEST(Control, WhileLoopCondAndWhen) {
  auto k = pl::pallas_call(
      [](pltpu::VmemRef<const int32_t> n_ref, pltpu::VmemRef<int32_t> o_ref) {
        const int n = n_ref[0];
        // Collatz steps from n, as lax.while_loop over a (value, count) pair of scalars.
        auto [v, steps] =
            lax::while_loop([](const std::tuple<int, int>& c) { return std::get<0>(c) != 1; },
                            [](const std::tuple<int, int>& c) {
                              const int x = std::get<0>(c);
                              return std::tuple{x % 2 == 0 ? x / 2 : 3 * x + 1, std::get<1>(c) + 1};
                            },
                            std::tuple{n, 0});
        o_ref[pl::ellipsis] = jnp::zeros_like(o_ref);
        o_ref[0] = steps;
        o_ref[1] = lax::cond(
            n_ref[pl::ellipsis] > 5, [] { return 1; }, [] { return 2; });
        pl::when(v == 1, [&] { o_ref[2] = 7; });
        pl::when(jnp::sum(n_ref[pl::ellipsis]) < 0)([&] { o_ref[3] = 9; });
      },
      pl::out_shape<int32_t>({4}));
  Array<int32_t> n({1});
  n[0] = 6;
  const Array<int32_t> o = k(n);
  EXPECT_EQ(o[0], 8);  // 6 3 10 5 16 8 4 2 1
  EXPECT_EQ(o[1], 1);
  EXPECT_EQ(o[2], 7);
  EXPECT_EQ(o[3], 0);
}

TEST(ShapeOps, BroadcastsExpandSqueezeAndTile) {
  auto k = pl::pallas_call(
      [](pltpu::VmemRef<const float> r_ref, pltpu::VmemRef<float> b, pltpu::VmemRef<float> bi,
         pltpu::VmemRef<float> t, pltpu::VmemRef<float> e) {
        jnp::Value row = r_ref[pl::ellipsis];  // (4,)
        b[pl::ellipsis] = jnp::broadcast_to(row, {3, 4});
        bi[pl::ellipsis] = lax::broadcast_in_dim(r_ref, {4, 3}, {0});
        t[pl::ellipsis] = jnp::tile(row * 2.0f, {2, 2});
        e[pl::ellipsis] = jnp::expand_dims(row, 1) + jnp::squeeze(jnp::expand_dims(row, 0));
      },
      pl::out_shape(ShapeDtypeStruct<float>{{3, 4}}, ShapeDtypeStruct<float>{{4, 3}},
                    ShapeDtypeStruct<float>{{2, 8}}, ShapeDtypeStruct<float>{{4, 4}}));
  const Array<float> r = random_array({4}, 12);
  auto [b, bi, t, e] = k(r);
  for (int i = 0; i < 3; ++i)
    for (int j = 0; j < 4; ++j) {
      EXPECT_EQ(b(i, j), r[j]);
      EXPECT_EQ(bi(j, i), r[j]);
    }
  for (int i = 0; i < 2; ++i)
    for (int j = 0; j < 8; ++j) EXPECT_EQ(t(i, j), 2.0f * r[j % 4]);
  for (int i = 0; i < 4; ++i)
    for (int j = 0; j < 4; ++j) EXPECT_EQ(e(i, j), r[i] + r[j]);
}

TEST(ShapeOps, ConcatenateStackAndCumsum) {
  auto k = pl::pallas_call(
      [](pltpu::VmemRef<const float> a, pltpu::VmemRef<const int32_t> n, pltpu::VmemRef<float> c,
         pltpu::VmemRef<float> s, pltpu::VmemRef<float> cs, pltpu::VmemRef<int32_t> ci) {
        jnp::Value av = a[pl::ellipsis];  // (2, 3)
        c[pl::ellipsis] = jnp::concatenate(std::tuple{av, av * 10.0f}, 1);
        s[pl::ellipsis] = jnp::stack(std::tuple{av, a, n.astype<float>()}, 0);
        cs[pl::ellipsis] = jnp::cumsum(av, 1);
        ci[pl::ellipsis] = jnp::cumsum(n);  // axis None: flattened
      },
      pl::out_shape(ShapeDtypeStruct<float>{{2, 6}}, ShapeDtypeStruct<float>{{3, 2, 3}},
                    ShapeDtypeStruct<float>{{2, 3}}, ShapeDtypeStruct<int32_t>{{6}}));
  const Array<float> a = random_array({2, 3}, 13);
  Array<int32_t> n({2, 3});
  for (int i = 0; i < 6; ++i) n[i] = i + 1;
  auto [c, s, cs, ci] = k(a, n);
  for (int i = 0; i < 2; ++i) {
    float run = 0;
    for (int j = 0; j < 3; ++j) {
      EXPECT_EQ(c(i, j), a(i, j));
      EXPECT_EQ(c(i, j + 3), a(i, j) * 10.0f);
      EXPECT_EQ(s(0, i, j), a(i, j));
      EXPECT_EQ(s(1, i, j), a(i, j));
      EXPECT_EQ(s(2, i, j), float(n(i, j)));
      run += a(i, j);
      EXPECT_NEAR(cs(i, j), run, 1e-6);
    }
  }
  for (int i = 0; i < 6; ++i) EXPECT_EQ(ci[i], (i + 1) * (i + 2) / 2);
}

TEST(ShapeOps, TriangleMeanVarAndLogic) {
  auto k = pl::pallas_call(
      [](pltpu::VmemRef<const float> x_ref, pltpu::VmemRef<float> u, pltpu::VmemRef<float> l,
         pltpu::VmemRef<float> mv, pltpu::VmemRef<bool> lg) {
        jnp::Value x = x_ref[pl::ellipsis];
        u[pl::ellipsis] = jnp::triu(x, 1);
        l[pl::ellipsis] = jnp::tril(x);
        mv[pl::ellipsis] = jnp::stack(std::tuple{x.mean(1), jnp::var(x, 1)}, 0);
        lg[pl::ellipsis] = jnp::logical_and(x > 0.0f, true) ^ jnp::logical_or(false, x < 0.5f);
      },
      pl::out_shape(ShapeDtypeStruct<float>{{4, 4}}, ShapeDtypeStruct<float>{{4, 4}},
                    ShapeDtypeStruct<float>{{2, 4}}, ShapeDtypeStruct<bool>{{4, 4}}));
  const Array<float> x = random_array({4, 4}, 14);
  auto [u, l, mv, lg] = k(x);
  for (int i = 0; i < 4; ++i) {
    double m = 0, v = 0;
    for (int j = 0; j < 4; ++j) m += x(i, j) / 4.0;
    for (int j = 0; j < 4; ++j) v += (x(i, j) - m) * (x(i, j) - m) / 4.0;
    EXPECT_NEAR(mv(0, i), m, 1e-6);
    EXPECT_NEAR(mv(1, i), v, 1e-6);
    for (int j = 0; j < 4; ++j) {
      EXPECT_EQ(u(i, j), j - i >= 1 ? x(i, j) : 0.0f);
      EXPECT_EQ(l(i, j), j - i <= 0 ? x(i, j) : 0.0f);
      EXPECT_EQ(lg(i, j), (x(i, j) > 0.0f) != (x(i, j) < 0.5f));
    }
  }
}

TEST(ShapeOps, ReshapesOfTheLastDimAndTheirTpuRule) {
  auto body = [](pltpu::VmemRef<const float> x_ref, pltpu::VmemRef<float> o_ref) {
    o_ref[pl::ellipsis] = jnp::reshape(x_ref[pl::ellipsis] + 1.0f, {4, 64});  // (8, 32) -> (4, 64)
  };
  const Array<float> x = random_array({8, 32}, 15);
  const Array<float> o = pl::pallas_call(body, pl::out_shape<float>({4, 64}))(x);
  for (int i = 0; i < 256; ++i) ASSERT_EQ(o[i], x[i] + 1.0f);
  // A TPU kernel cannot re-tile the last dim: checked mode with a chip says so.
  auto e = tessera::testing::catch_error<KernelError>([&] {
    pl::pallas_call(body, pl::out_shape<float>({4, 64}), pltpu::InterpretParams{.chip = "v5e"})(x);
  });
  ASSERT_TRUE(e);
  EXPECT_EQ(e->kind(), ErrorKind::kBlockShape) << e->what();
  EXPECT_NE(std::string(e->what()).find("changes the last dim"), std::string::npos) << e->what();
}

TEST(ShapeOps, MaskedLoadsAndStores) {
  auto k = pl::pallas_call(
      [](pltpu::VmemRef<const float> x_ref, pltpu::VmemRef<float> o_ref) {
        o_ref[pl::ellipsis] = jnp::full_like(o_ref, -1.0f);
        jnp::Value x = pltpu::load(x_ref);
        const auto col = lax::broadcasted_iota<int32_t>({4, 8}, 1);
        pltpu::store(o_ref, x * 2.0f, col < 3);
        pl::store(o_ref, {pl::ds(3, 1), pl::all}, 5.0f);
        const auto row = lax::broadcasted_iota<int32_t>({1, 8}, 1);
        jnp::Value y = pl::load(x_ref, {pl::ds(0, 1), pl::all}, row > 6, 0.0f);
        pl::store(o_ref, {pl::ds(2, 1), pl::all}, y, row >= 0);
      },
      pl::out_shape<float>({4, 8}));
  const Array<float> x = random_array({4, 8}, 16);
  const Array<float> o = k(x);
  for (int i = 0; i < 4; ++i)
    for (int j = 0; j < 8; ++j) {
      float want = j < 3 ? 2.0f * x(i, j) : -1.0f;
      if (i == 3) want = 5.0f;
      if (i == 2) want = j > 6 ? x(0, j) : 0.0f;
      EXPECT_EQ(o(i, j), want) << i << "," << j;
    }
}

}  // namespace
