// Ports of Pallas' ops_test.py cases for lax.dot_general with several free or contracting
// dimensions per operand and batch dimensions anywhere (docs/pallas-parity.md): each kernel reads
// both operands whole (x_ref[...]) and writes the product, checked against a float64 reference
// computed here from the dimension numbers alone.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "support/pallas_port.h"
#include "tessera/tessera.h"

namespace {
using namespace tessera;
using namespace tessera::pallas_port;
using Ints = std::vector<int>;

// Dimension numbers from lists (each at most 4 long, as lax::DotDimensionNumbers holds).
lax::DotDimensionNumbers::Dims dims_of(const Ints& v) {
  lax::DotDimensionNumbers::Dims d;
  d.size = static_cast<int>(v.size());
  for (size_t i = 0; i < v.size(); ++i) d.dims[i] = v[i];
  return d;
}

struct Case {
  Shape x, y;
  Ints lc, rc, lb, rb;
};

// The row-major index of `idx` in `s`.
int64_t flat(const Shape& s, const std::vector<int64_t>& idx) {
  int64_t f = 0;
  for (int d = 0; d < s.rank(); ++d) f = f * s[d] + idx[static_cast<size_t>(d)];
  return f;
}

bool contains(const Ints& v, int d) {
  for (int e : v) {
    if (e == d) return true;
  }
  return false;
}

// lax.dot_general's result in float64 terms: axes (batch..., x's free..., y's free...). Only
// every `step`-th element is computed (a sample of about 4096 keeps the tests quick); the others
// are NaN and not compared.
struct Reference {
  Shape shape;
  std::vector<double> values;
  int64_t step = 1;
};
Reference reference(const Case& c, const Array<float>& x, const Array<float>& y) {
  Ints xf, yf;
  for (int d = 0; d < c.x.rank(); ++d) {
    if (!contains(c.lc, d) && !contains(c.lb, d)) xf.push_back(d);
  }
  for (int d = 0; d < c.y.rank(); ++d) {
    if (!contains(c.rc, d) && !contains(c.rb, d)) yf.push_back(d);
  }
  std::vector<int64_t> out_dims, k_dims;
  for (int d : c.lb) out_dims.push_back(c.x[d]);
  for (int d : xf) out_dims.push_back(c.x[d]);
  for (int d : yf) out_dims.push_back(c.y[d]);
  for (int d : c.lc) k_dims.push_back(c.x[d]);
  Reference r{Shape(out_dims), {}};
  int64_t ksize = 1;
  for (int64_t e : k_dims) ksize *= e;
  r.values.assign(static_cast<size_t>(r.shape.size()), std::nan(""));
  r.step = std::max<int64_t>(1, r.shape.size() / 4096) | 1;
  std::vector<int64_t> out_idx(out_dims.size(), 0), xi(static_cast<size_t>(c.x.rank())),
      yi(static_cast<size_t>(c.y.rank()));
  for (int64_t o = 0; o < r.shape.size(); o += r.step) {
    int64_t rem = o;
    for (int a = static_cast<int>(out_dims.size()) - 1; a >= 0; --a) {
      out_idx[static_cast<size_t>(a)] = rem % out_dims[static_cast<size_t>(a)];
      rem /= out_dims[static_cast<size_t>(a)];
    }
    size_t a = 0;
    for (size_t i = 0; i < c.lb.size(); ++i, ++a) {
      xi[static_cast<size_t>(c.lb[i])] = out_idx[a];
      yi[static_cast<size_t>(c.rb[i])] = out_idx[a];
    }
    for (int d : xf) xi[static_cast<size_t>(d)] = out_idx[a++];
    for (int d : yf) yi[static_cast<size_t>(d)] = out_idx[a++];
    double sum = 0;
    for (int64_t kk = 0; kk < ksize; ++kk) {
      int64_t krem = kk;
      for (int i = static_cast<int>(k_dims.size()) - 1; i >= 0; --i) {
        const int64_t v = krem % k_dims[static_cast<size_t>(i)];
        krem /= k_dims[static_cast<size_t>(i)];
        xi[static_cast<size_t>(c.lc[static_cast<size_t>(i)])] = v;
        yi[static_cast<size_t>(c.rc[static_cast<size_t>(i)])] = v;
      }
      sum += double(x[flat(c.x, xi)]) * double(y[flat(c.y, yi)]);
    }
    r.values[static_cast<size_t>(o)] = sum;
  }
  return r;
}

// The kernel of every case: out_ref[...] = lax.dot_general(x_ref[...], y_ref[...], dims).
void run_case(const Case& c, uint64_t seed) {
  SCOPED_TRACE(::testing::Message() << "x " << c.x.to_string() << " y " << c.y.to_string());
  const Array<float> x = random_array<float>(c.x, seed), y = random_array<float>(c.y, seed + 1);
  const Reference want = reference(c, x, y);
  const lax::DotDimensionNumbers dn{{dims_of(c.lc), dims_of(c.rc)}, {dims_of(c.lb), dims_of(c.rb)}};
  const Array<float> out = pl::pallas_call(
      [dn](pltpu::VmemRef<const float> x_ref, pltpu::VmemRef<const float> y_ref,
           pltpu::VmemRef<float> o_ref) {
        o_ref[pl::ellipsis] = lax::dot_general<float>(x_ref[pl::ellipsis], y_ref[pl::ellipsis], dn);
      },
      pl::out_shape<float>(want.shape))(x, y);
  ASSERT_EQ(out.shape(), want.shape);
  for (int64_t i = 0; i < out.size(); i += want.step) {
    const double w = want.values[static_cast<size_t>(i)];
    ASSERT_NEAR(out[i], w, 1e-4 + 1e-5 * std::fabs(w)) << "element " << i;
  }
}

Ints offset(const Ints& v) {
  Ints r;
  for (int d : v) r.push_back(d + 1);
  return r;
}

// Pallas' batch_size parameter: None (no batch), 1 or 2 (a leading batch dim on both operands).
void with_batch_sizes(const Case& base, uint64_t seed) {
  run_case(base, seed);
  for (int64_t b : {1, 2}) {
    std::vector<int64_t> xd{b}, yd{b};
    for (int d = 0; d < base.x.rank(); ++d) xd.push_back(base.x[d]);
    for (int d = 0; d < base.y.rank(); ++d) yd.push_back(base.y[d]);
    run_case({Shape(xd), Shape(yd), offset(base.lc), offset(base.rc), {0}, {0}}, seed);
  }
}

TEST(OpsTest, DotGeneralMultipleNonContractingDims) {
  const Case cases[] = {
      {{8, 8, 256}, {256, 128}, {2}, {0}, {}, {}},
      {{3, 4, 128}, {256, 128}, {2}, {1}, {}, {}},
      {{256, 8, 128}, {256, 128}, {0}, {0}, {}, {}},
      {{128, 8, 128}, {256, 128}, {0}, {1}, {}, {}},
      {{8, 128}, {8, 128, 128}, {1}, {2}, {}, {}},
      {{128, 8}, {8, 128, 128}, {0}, {2}, {}, {}},
      {{8, 128}, {128, 8, 128}, {1}, {0}, {}, {}},
      {{128, 8}, {128, 8, 128}, {0}, {0}, {}, {}},
      {{8, 8, 128}, {8, 128, 128}, {2}, {2}, {}, {}},
      {{8, 8, 128}, {128, 8, 128}, {2}, {0}, {}, {}},
      {{32, 8, 128}, {8, 128, 32}, {0}, {2}, {}, {}},
      {{8, 8, 128}, {8, 8, 128}, {0}, {0}, {}, {}},
      {{2, 128, 128}, {2, 128, 128}, {1}, {2}, {}, {}},
      {{2, 128, 128}, {128, 2, 128}, {1}, {0}, {}, {}},
      {{2, 128, 128}, {2, 128, 128}, {2}, {1}, {}, {}},
      {{128, 2, 128}, {2, 128, 128}, {0}, {1}, {}, {}},
      {{2, 128, 128}, {2, 128, 128}, {1}, {1}, {}, {}},
  };
  uint64_t seed = 10;
  for (const Case& c : cases) with_batch_sizes(c, seed += 2);
}

TEST(OpsTest, DotGeneralNonFrontBatchDims) {
  run_case({{3, 4, 128}, {4, 2, 128}, {2}, {2}, {1}, {0}}, 30);
  run_case({{3, 4, 128}, {2, 4, 128}, {2}, {2}, {1}, {1}}, 32);
  run_case({{3, 4, 256}, {2, 3, 256}, {2}, {2}, {0}, {1}}, 34);
  run_case({{4, 3, 2, 32}, {2, 128, 32, 2}, {3}, {2}, {2}, {3}}, 36);
}

// x (and y) transposed inside the kernel before the product, as Pallas' test does with
// jnp.transpose(x_ref[...], perm).
void transposed_case(Shape xs, Shape ys, Ints lc, Ints rc, Ints xp, Ints yp, bool batched,
                     uint64_t seed) {
  const Array<float> x = random_array<float>(xs, seed), y = random_array<float>(ys, seed + 1);
  auto permuted = [](const Shape& s, const Ints& p) {
    std::vector<int64_t> d;
    for (int a : p) d.push_back(s[a]);
    return p.empty() ? s : Shape(d);
  };
  const Shape xts = permuted(xs, xp), yts = permuted(ys, yp);
  // The reference: the transposed operands made on the host.
  auto transposed = [](const Array<float>& a, const Shape& to, const Ints& p) {
    if (p.empty()) return a;
    Array<float> t(to);
    std::vector<int64_t> idx(static_cast<size_t>(to.rank())), src(idx.size());
    for (int64_t i = 0; i < t.size(); ++i) {
      int64_t rem = i;
      for (int d = to.rank() - 1; d >= 0; --d) {
        idx[static_cast<size_t>(d)] = rem % to[d];
        rem /= to[d];
      }
      for (size_t d = 0; d < p.size(); ++d) src[static_cast<size_t>(p[d])] = idx[d];
      t[i] = a[flat(a.shape(), src)];
    }
    return t;
  };
  const Case c{xts, yts, lc, rc, batched ? Ints{0} : Ints{}, batched ? Ints{0} : Ints{}};
  const Reference want = reference(c, transposed(x, xts, xp), transposed(y, yts, yp));
  const lax::DotDimensionNumbers dn{{dims_of(c.lc), dims_of(c.rc)}, {dims_of(c.lb), dims_of(c.rb)}};
  // jnp.transpose with the permutation in a container (a run-time list, as the test's perm).
  auto apply = [](const jnp::Value<float>& v, const Ints& p) -> jnp::Value<float> {
    if (p.empty()) return v;
    return jnp::transpose(v, p);
  };
  const Array<float> out = pl::pallas_call(
      [&](pltpu::VmemRef<const float> x_ref, pltpu::VmemRef<const float> y_ref,
          pltpu::VmemRef<float> o_ref) {
        jnp::Value<float> xv = x_ref[pl::ellipsis], yv = y_ref[pl::ellipsis];
        jnp::Value<float> xt = apply(xv, xp), yt = apply(yv, yp);
        o_ref[pl::ellipsis] = lax::dot_general<float>(xt, yt, dn);
      },
      pl::out_shape<float>(want.shape))(x, y);
  for (int64_t i = 0; i < out.size(); i += want.step) {
    const double w = want.values[static_cast<size_t>(i)];
    ASSERT_NEAR(out[i], w, 1e-5 + 1e-5 * std::fabs(w)) << "element " << i;
  }
}

TEST(OpsTest, DotGeneralMultipleNonContractingDimsWithTransposes) {
  struct T {
    Shape x, y;
    Ints lc, rc, xp, yp;
  };
  const T cases[] = {
      {{4, 3, 2, 6}, {4, 6}, {2}, {1}, {2, 1, 3, 0}, {}},
      {{3, 4, 2, 6}, {6, 4}, {1}, {0}, {}, {1, 0}},
      {{3, 2, 6, 4}, {4, 6}, {2}, {1}, {0, 1, 3, 2}, {1, 0}},
  };
  uint64_t seed = 50;
  for (const T& t : cases) {
    transposed_case(t.x, t.y, t.lc, t.rc, t.xp, t.yp, false, seed += 2);
    for (int64_t b : {1, 2}) {
      std::vector<int64_t> xd{b}, yd{b};
      for (int d = 0; d < t.x.rank(); ++d) xd.push_back(t.x[d]);
      for (int d = 0; d < t.y.rank(); ++d) yd.push_back(t.y[d]);
      auto perm = [](const Ints& p) {
        if (p.empty()) return p;
        Ints r{0};
        for (int a : p) r.push_back(a + 1);
        return r;
      };
      transposed_case(Shape(xd), Shape(yd), offset(t.lc), offset(t.rc), perm(t.xp), perm(t.yp),
                      true, seed);
    }
  }
}

TEST(OpsTest, MatrixArrayLikeDotGeneral) {
  uint64_t seed = 70;
  for (int batch : {0, 1, 2}) {
    for (bool two_free : {false, true}) {
      for (bool rhs_is_array : {true, false}) {
        std::vector<int64_t> xs, ys;
        if (batch) xs.push_back(batch), ys.push_back(batch);
        xs.push_back(8);
        if (two_free) xs.push_back(128);
        xs.push_back(128);
        if (!rhs_is_array) ys.push_back(1);
        ys.push_back(128);
        const int xr = static_cast<int>(xs.size()), yr = static_cast<int>(ys.size());
        const Ints b = batch ? Ints{0} : Ints{};
        run_case({Shape(xs), Shape(ys), {xr - 1}, {yr - 1}, b, b}, seed += 2);
      }
    }
  }
}

TEST(OpsTest, DotGeneralMultipleBatchDims) {
  const Case cases[] = {
      {{4, 1, 256, 256}, {4, 1, 256, 256}, {3}, {2}, {0, 1}, {0, 1}},
      {{7, 2, 128, 256}, {7, 2, 256, 128}, {3}, {2}, {0, 1}, {0, 1}},
      {{3, 2, 1, 128, 128}, {3, 2, 1, 128, 128}, {4}, {3}, {0, 1, 2}, {0, 1, 2}},
      {{128, 5, 2, 128}, {5, 2, 128, 128}, {3}, {2}, {1, 2}, {0, 1}},
      {{3, 128, 2, 128}, {128, 3, 2, 128}, {3}, {0}, {0, 2}, {1, 2}},
      {{3, 1, 16, 128}, {1, 3, 128, 32}, {3}, {2}, {1, 0}, {0, 1}},
      {{16, 3, 1, 128}, {1, 3, 128, 32}, {3}, {2}, {2, 1}, {0, 1}},
  };
  uint64_t seed = 90;
  for (const Case& c : cases) run_case(c, seed += 2);
}

TEST(OpsTest, DotGeneralMultipleContractingDims) {
  const Case cases[] = {
      {{2, 2, 128}, {2, 128, 2}, {1, 2}, {0, 1}, {}, {}},
      {{2, 2, 2, 1, 128}, {2, 2, 1, 128, 2}, {3, 4}, {2, 3}, {0, 1}, {0, 1}},
      {{2, 16, 128}, {2, 32, 128}, {0, 2}, {0, 2}, {}, {}},
      {{2, 2, 16, 128}, {2, 2, 32, 128}, {1, 3}, {1, 3}, {0}, {0}},
      {{2, 2, 16, 128}, {32, 2, 2, 128}, {1, 3}, {2, 3}, {0}, {1}},
  };
  uint64_t seed = 110;
  for (const Case& c : cases) run_case(c, seed += 2);
}

// A bfloat16 result summed over two contracting dims is rounded once, after the float32 sum (as
// a TPU does), not after each partial product.
TEST(OpsTest, DotGeneralMultipleContractingDimsRoundsOnce) {
  Array<bfloat16> x({2, 8, 64}), y({2, 64, 8});
  Random r(5);
  for (bfloat16& v : x) v = bfloat16(r.uniform());
  for (bfloat16& v : y) v = bfloat16(r.uniform());
  const Array<bfloat16> out = pl::pallas_call(
      [](pltpu::VmemRef<const bfloat16> x_ref, pltpu::VmemRef<const bfloat16> y_ref,
         pltpu::VmemRef<bfloat16> o_ref) {
        o_ref[pl::ellipsis] = lax::dot_general<bfloat16>(x_ref[pl::ellipsis], y_ref[pl::ellipsis],
                                                         {{{0, 2}, {0, 1}}, {{}, {}}});
      },
      pl::out_shape<bfloat16>({8, 8}))(x, y);
  for (int i = 0; i < 8; ++i) {
    for (int j = 0; j < 8; ++j) {
      float acc = 0;
      for (int b = 0; b < 2; ++b) {
        for (int p = 0; p < 64; ++p) {
          acc += static_cast<float>(x(b, i, p)) * static_cast<float>(y(b, p, j));
        }
      }
      ASSERT_NEAR(static_cast<float>(out(i, j)), static_cast<float>(bfloat16(acc)),
                  1e-6 + std::fabs(acc) * 1e-5)
          << i << " " << j;
    }
  }
}

// Contracting lists of different lengths, and a dimension named both contracted and batched,
// are refused at the call's line.
TEST(OpsTest, DotGeneralDimensionNumbersErrors) {
  const Array<float> x({2, 8, 16}), y({2, 16, 8});
  int line = 0;
  auto call = [&](lax::DotDimensionNumbers dn) {
    return pl::pallas_call(
        [dn, &line](pltpu::VmemRef<const float> x_ref, pltpu::VmemRef<const float> y_ref,
                    pltpu::VmemRef<float> o_ref) {
          jnp::Value<float> xv = x_ref[pl::ellipsis], yv = y_ref[pl::ellipsis];
          line = __LINE__ + 1;
          o_ref[pl::ellipsis] = lax::dot_general<float>(xv, yv, dn);
        },
        pl::out_shape<float>({8, 8}))(x, y);
  };
  const std::pair<lax::DotDimensionNumbers, std::pair<ErrorKind, const char*>> bad[] = {
      {{{{0, 2}, {1}}, {{}, {}}},
       {ErrorKind::kInvalidArgument, "same number of contracting dimensions"}},
      {{{{2}, {1}}, {{2}, {0}}}, {ErrorKind::kInvalidArgument, "name a dimension twice"}},
      {{{{0, 2}, {1, 0}}, {{}, {}}},
       {ErrorKind::kShapeMismatch, "contracted extents must be equal"}},
  };
  for (const auto& [dn, want] : bad) {
    auto e = tessera::testing::catch_error<KernelError>([&] { (void)call(dn); });
    ASSERT_TRUE(e);
    EXPECT_EQ(e->kind(), want.first) << e->what();
    EXPECT_NE(std::string(e->what()).find(want.second), std::string::npos) << e->what();
    EXPECT_EQ(static_cast<int>(e->where().line()), line) << e->what();
  }
}

}  // namespace
