// Ports of pallas_test.py's PallasControlFlowTest and PallasOutOfBoundsInterpretTest
// (docs/pallas-parity.md). Control flow in a kernel is C++'s: lax.switch and lax.cond are a
// switch and an if, lax.fori_loop / pl.loop / lax.while_loop whose carry is a scalar are for and
// while loops over C++ values; a loop that carries an array is lax::fori_loop / lax::while_loop
// over a jnp::Value (alone or in a std::tuple). Rank-0 arrays are `Shape{}` and read as `r()`.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <tuple>
#include <vector>

#include "support/pallas_port.h"
#include "tessera/tessera.h"

namespace {
using namespace tessera;
using namespace tessera::pallas_port;

template <class T>
Array<T> scalar(T v) {
  return Array<T>(Shape{}, std::vector<T>{v});
}

// lax.switch(branch, (lambda x: x**2, lambda x: -x, lambda x: -x**2), x)
template <class X, class O>
void three_branches(int32_t branch, const X& x, O o) {
  switch (branch) {
    case 0:
      o = lax::integer_pow(x, 2);
      break;
    case 1:
      o = -x;
      break;
    default:
      o = -lax::integer_pow(x, 2);
  }
}

float cond_scalar(int32_t branch, float x) {
  return pl::pallas_call([](pltpu::VmemRef<const int32_t> b, pltpu::VmemRef<const float> xr,
                            pltpu::VmemRef<float> y) { three_branches(b(), xr, y); },
                         pl::out_shape<float>(Shape{}))(scalar(branch), scalar(x))[0];
}

TEST(PallasTest, ControlFlowCondSimple) {
  EXPECT_EQ(cond_scalar(0, 3.0f), 9.0f);
  EXPECT_EQ(cond_scalar(1, 2.0f), -2.0f);
}

TEST(PallasTest, ControlFlowCondThreebranch) {
  EXPECT_EQ(cond_scalar(0, 3.0f), 9.0f);
  EXPECT_EQ(cond_scalar(1, 2.0f), -2.0f);
  EXPECT_EQ(cond_scalar(2, 4.0f), -16.0f);
}

Array<float> cond_vector(int32_t branch, float v, int64_t block) {
  return pl::pallas_call(
      [](pltpu::VmemRef<const int32_t> b, pltpu::VmemRef<const float> xr, pltpu::VmemRef<float> y) {
        three_branches(b(), xr, y);
      },
      pl::out_shape<float>({8}),
      pl::in_specs(pl::BlockSpec(), pl::BlockSpec({block}, [](int i) { return pl::idx(i); })),
      pl::out_specs(pl::BlockSpec({block}, [](int i) { return pl::idx(i); })),
      pl::grid({(8 + block - 1) / block}))(scalar(branch), full<float>({8}, v));
}

TEST(PallasTest, ControlFlowCondVectorsAndThreebranchVectors) {
  for (int64_t block : {1, 2, 4, 8}) {
    for (float v : cond_vector(0, 3.0f, block)) ASSERT_EQ(v, 9.0f);
    for (float v : cond_vector(1, 2.0f, block)) ASSERT_EQ(v, -2.0f);
    for (float v : cond_vector(2, 4.0f, block)) ASSERT_EQ(v, -16.0f);
  }
}

TEST(PallasTest, ControlFlowCondThreebranchMatrixOut) {
  Array<float> x({64, 1});
  Array<float> y({1, 128});
  for (int64_t i = 0; i < 64; ++i) x[i] = static_cast<float>(i);
  for (int64_t i = 0; i < 128; ++i) y[i] = static_cast<float>(i);
  for (int64_t bx : {1, 8}) {
    for (int64_t by : {1, 2, 4}) {
      for (int32_t branch : {0, 1, 2}) {
        const Array<float> o = pl::pallas_call(
            [](pltpu::VmemRef<const int32_t> b, pltpu::VmemRef<const float> xr,
               pltpu::VmemRef<const float> yr, pltpu::VmemRef<float> out) {
              switch (b()) {
                case 0:
                  out = lax::integer_pow(xr - yr, 2);
                  break;
                case 1:
                  out = -jnp::abs(xr - yr);
                  break;
                default:
                  out = jnp::sqrt(jnp::abs(xr - yr));
              }
            },
            pl::out_shape<float>({64, 128}),
            pl::in_specs(pl::BlockSpec(),
                         pl::BlockSpec({bx, 1}, [](int i, int) { return pl::idx(i, 0); }),
                         pl::BlockSpec({1, by}, [](int, int j) { return pl::idx(0, j); })),
            pl::out_specs(pl::BlockSpec({bx, by}, [](int i, int j) { return pl::idx(i, j); })),
            pl::grid({64 / bx, 128 / by}))(scalar(branch), x, y);
        for (int64_t i = 0; i < 64; ++i) {
          for (int64_t j = 0; j < 128; ++j) {
            const float d = x[i] - y[j];
            const float want = branch == 0   ? d * d
                               : branch == 1 ? -std::abs(d)
                                             : std::sqrt(std::abs(d));
            ASSERT_EQ(o(i, j), want) << bx << "," << by << " branch " << branch;
          }
        }
      }
    }
  }
}

// The nested lax.cond of test_nested_conds, on C++ values.
int32_t select(bool pred, int32_t x, int32_t y, int nesting) {
  if (pred) return nesting == 0 ? x + 1 : select(x == nesting, x, y, nesting - 1);
  return nesting == 0 ? y + 1 : select(y == nesting, x, y, nesting - 1);
}

TEST(PallasTest, ControlFlowNestedConds) {
  const Array<int32_t> out = pl::pallas_call(
      [](pltpu::VmemRef<int32_t> y) {
        const auto j = static_cast<int32_t>(pl::program_id(0));
        y = jnp::full_like(y, select(j == 0, j, j, 4));  // j * jnp.ones_like(y_ref)
      },
      pl::grid({1}), pl::out_specs(pl::BlockSpec({8, 128}, [](int) { return pl::idx(0, 0); })),
      pl::out_shape<int32_t>({8, 128}))();
  for (int32_t v : out) ASSERT_EQ(v, select(true, 0, 0, 4));
}

TEST(PallasTest, ControlFlowConditionalWrite) {
  const Array<float> arg = arange<float>({8});
  auto f = [&](bool branch) {
    return pl::pallas_call(
        [](pltpu::VmemRef<const bool> b, pltpu::VmemRef<const float> x, pltpu::VmemRef<float> o) {
          o = -x;
          if (b()) o(4) = x(6);  // lax.cond(branch_ref[...], if_true, lambda z: (), x_ref[6])
        },
        pl::out_shape<float>({8}))(scalar(branch), arg);
  };
  EXPECT_EQ(f(true).to_vector(), (std::vector<float>{0, -1, -2, -3, 6, -5, -6, -7}));
  EXPECT_EQ(f(false).to_vector(), (std::vector<float>{0, -1, -2, -3, -4, -5, -6, -7}));
}

TEST(PallasTest, ControlFlowLoop) {
  for (int start : {0, 1, 2}) {
    for (int stop : {6, 7, 8}) {
      for (int step : {1, 3}) {  // step=None is 1
        const Array<int32_t> y = pl::pallas_call(
            [=](pltpu::VmemRef<const int32_t> x, pltpu::VmemRef<int32_t> yr) {
              yr = x;
              for (int i = start; i < stop; i += step) yr += i;  // @pl.loop(start, stop, step)
            },
            pl::out_shape<int32_t>({128}))(full<int32_t>({128}, 0));
        int32_t want = 0;
        for (int i = start; i < stop; i += step) want += i;
        for (int32_t v : y) ASSERT_EQ(v, want);
      }
    }
  }
}

int32_t scalar_kernel_result(int32_t (*body)()) {
  return pl::pallas_call([body](pltpu::VmemRef<int32_t> x) { x() = body(); },
                         pl::out_shape<int32_t>(Shape{}))()[0];
}

TEST(PallasTest, ControlFlowLoopAccumulates) {
  EXPECT_EQ(scalar_kernel_result([] {
              int32_t acc = 32;  // pl.loop(0, 5, init_carry=32)(lambda i, acc: acc + i)
              for (int i = 0; i < 5; ++i) acc += i;
              return acc;
            }),
            42);
}

int32_t fori_into(int32_t init, int lo, int hi, bool add_index) {
  return pl::pallas_call(
      [=](pltpu::VmemRef<const int32_t> x, pltpu::VmemRef<int32_t> y) {
        y = x;
        for (int i = lo; i < hi; ++i) y += add_index ? i : 1;
      },
      pl::out_shape<int32_t>(Shape{}))(scalar(init))[0];
}

TEST(PallasTest, ControlFlowForiLoopSimple) { EXPECT_EQ(fori_into(0, 0, 5, false), 5); }
TEST(PallasTest, ControlFlowForiLoopWithNonzeroLowerBound) {
  EXPECT_EQ(fori_into(6, 2, 5, true), 6 + 2 + 3 + 4);
}

TEST(PallasTest, ControlFlowForiLoopAccumulates) {
  EXPECT_EQ(scalar_kernel_result([] {
              int32_t acc = 0;
              for (int i = 0; i < 5; ++i) acc += 1;
              return acc;
            }),
            5);
}

TEST(PallasTest, ControlFlowForiLoopAccumulatesWithIndex) {
  EXPECT_EQ(scalar_kernel_result([] {
              int32_t acc = 0;
              for (int i = 0; i < 5; ++i) acc += i;
              return acc;
            }),
            10);
}

TEST(PallasTest, ControlFlowForiLoopWithWritingToIndex) {
  const Array<int32_t> y = pl::pallas_call(
      [](pltpu::VmemRef<int32_t> yr) {
        for (int i = 0; i < yr.shape()[0]; ++i) yr(i) = i;
      },
      pl::out_shape<int32_t>({8}))();
  EXPECT_EQ(y.to_vector(), (std::vector<int32_t>{0, 1, 2, 3, 4, 5, 6, 7}));
}

TEST(PallasTest, ControlFlowForiLoopWithDynamicIndices) {
  auto f = [](int32_t lb, int32_t ub) {
    return pl::pallas_call(
        [](pltpu::VmemRef<const int32_t> l, pltpu::VmemRef<const int32_t> u,
           pltpu::VmemRef<int32_t> y) {
          y() = 0;
          for (int32_t i = l(); i < u(); ++i) y += i;
        },
        pl::out_shape<int32_t>(Shape{}))(scalar(lb), scalar(ub))[0];
  };
  EXPECT_EQ(f(2, 5), 2 + 3 + 4);
  EXPECT_EQ(f(1, 8), 1 + 2 + 3 + 4 + 5 + 6 + 7);
}

TEST(PallasTest, ControlFlowSimpleWhile) {
  const Array<int32_t> y = pl::pallas_call(
      [](pltpu::VmemRef<const int32_t> xr, pltpu::VmemRef<int32_t> yr) {
        int32_t x = xr();
        yr() = 0;
        while (x < 5) {  // lax.while_loop(cond, body, x)
          yr += 1;
          x = x + 1;
        }
      },
      pl::out_shape<int32_t>(Shape{}))(scalar(0));
  EXPECT_EQ(y[0], 5);
}

TEST(PallasTest, ControlFlowSimpleWhileWithOnlyValues) {
  EXPECT_EQ(scalar_kernel_result([] {
              int32_t acc = 0;
              while (acc < 5) acc += 1;
              return acc;
            }),
            5);
}

TEST(PallasTest, ControlFlowWhileWithDynamicCondition) {
  for (int32_t n : {1, 4, 100}) {
    const Array<int32_t> y = pl::pallas_call(
        [](pltpu::VmemRef<const int32_t> iv, pltpu::VmemRef<int32_t> yr) {
          yr() = 0;
          const int32_t n_iter = iv();
          int32_t i = 0;
          while (i < n_iter) {
            yr += 1;
            i = i + 1;
          }
        },
        pl::out_shape<int32_t>(Shape{}))(scalar(n));
    EXPECT_EQ(y[0], n);
  }
}

TEST(PallasTest, ControlFlowFori) {
  const pl::BlockSpec smem(MemorySpace::SMEM);
  const Array<int32_t> r = pl::pallas_call(
      [](pltpu::SmemRef<const int32_t> lb, pltpu::SmemRef<const int32_t> ub,
         pltpu::SmemRef<int32_t> o) {
        o(0, 0) = 0;
        for (int32_t i = lb(0, 0); i < ub(0, 0); ++i) o(0, 0) += 1;
      },
      pl::in_specs(smem, smem), pl::out_specs(smem),
      pl::out_shape<int32_t>({1, 1}))(Array<int32_t>({1, 1}, {2}), Array<int32_t>({1, 1}, {6}));
  EXPECT_EQ(r[0], 4);
}

// ---- Loops that carry arrays (in-kernel values) -----------------------------------------------

// test_loop_with_unused_i_no_int / _with_unused_int / _with_used_int: the carry is an array value
// (alone, or in a tuple with int counters); three additions of x.
TEST(PallasTest, ControlFlowLoopWithUnusedI) {
  const Array<int32_t> x({4}, std::vector<int32_t>{1, 2, 3, 4});
  const std::vector<int32_t> want{3, 6, 9, 12};
  auto call = [&](auto body) {
    return pl::pallas_call(body, pl::out_shape<int32_t>({4}))(x).to_vector();
  };
  EXPECT_EQ(call([](pltpu::VmemRef<const int32_t> xr, pltpu::VmemRef<int32_t> y) {
              y[pl::ellipsis] = lax::fori_loop(
                  0, 3, [&](int, const jnp::Value<int32_t>& acc) { return acc + xr[pl::ellipsis]; },
                  jnp::zeros<int32_t>({4}));
            }),
            want);
  EXPECT_EQ(call([](pltpu::VmemRef<const int32_t> xr, pltpu::VmemRef<int32_t> y) {
              auto [i, acc] = lax::fori_loop(
                  0, 3,
                  [&](int, const std::tuple<int, jnp::Value<int32_t>>& c) {
                    return std::tuple{std::get<0>(c) + 1, std::get<1>(c) + xr[pl::ellipsis]};
                  },
                  std::tuple{0, jnp::zeros<int32_t>({4})});
              EXPECT_EQ(i, 3);
              y[pl::ellipsis] = acc;
            }),
            want);
  EXPECT_EQ(call([](pltpu::VmemRef<const int32_t> xr, pltpu::VmemRef<int32_t> y) {
              auto [i, j, acc] = lax::fori_loop(
                  0, 3,
                  [&](int, const std::tuple<int, int, jnp::Value<int32_t>>& c) {
                    const int jj = std::get<1>(c);
                    return std::tuple{std::get<0>(c) + 1, jj * 2,
                                      std::get<2>(c) + xr[pl::ellipsis] + jj * 0};
                  },
                  std::tuple{0, 0, jnp::zeros<int32_t>({4})});
              EXPECT_EQ(i + j, 3);
              y[pl::ellipsis] = acc;
            }),
            want);
}

// test_scan_cond_vm_explicit_ref_arg / _closing_over_ref: a fori_loop over a program of opcodes,
// each a lax.switch branch that adds params[i, c] * 2**i * x to the carried value.
Array<float> run_program(const Array<int32_t>& program, const Array<float>& params,
                         const Array<float>& x, bool closing_over_ref) {
  const int64_t n = program.shape()[0];
  constexpr int64_t bx = 4;
  return pl::pallas_call(
      [=](pltpu::VmemRef<const int32_t> program_ref, pltpu::VmemRef<const float> params_ref,
          pltpu::VmemRef<const float> x_ref, pltpu::VmemRef<float> out_ref) {
        jnp::Value<float> xv = x_ref[pl::ellipsis];
        auto add = [&](const jnp::Value<float>& state, int i, int col) -> jnp::Value<float> {
          const float p = params_ref(i, col);
          return state + p * std::ldexp(1.0f, i) * xv;  // state + params[i, col] * 2.**i * x
        };
        auto body_fn = [&](int i, const jnp::Value<float>& state) -> jnp::Value<float> {
          if (closing_over_ref) {
            switch (program_ref(i) + 1) {  // lax.switch(opcode + 1, (identity, c0, c1, c2, c1))
              case 0:
                return state;
              case 1:
                return add(state, i, 0);
              case 2:
              case 4:
                return add(state, i, 1);
              default:
                return add(state, i, 2);
            }
          }
          switch (program_ref(i)) {  // lax.switch(opcode, (c0, c1, c2, c1))
            case 0:
              return add(state, i, 0);
            case 1:
            case 3:
              return add(state, i, 1);
            default:
              return add(state, i, 2);
          }
        };
        out_ref[pl::ellipsis] =
            lax::fori_loop(0, static_cast<int>(n), body_fn, jnp::zeros<float>(xv.shape()));
      },
      pl::out_shape<float>({x.shape()[0]}),
      pl::in_specs(pl::BlockSpec({n}, [](int) { return pl::idx(0); }),
                   pl::BlockSpec({n, 3}, [](int) { return pl::idx(0, 0); }),
                   pl::BlockSpec({bx}, [](int i) { return pl::idx(i); })),
      pl::out_specs(pl::BlockSpec({bx}, [](int i) { return pl::idx(i); })),
      pl::grid({pl::cdiv(x.shape()[0], bx)}))(program, params, x);
}

void check_program(const std::vector<int32_t>& prog, bool closing_over_ref) {
  const auto n = static_cast<int64_t>(prog.size());
  const Array<int32_t> program({n}, prog);
  const Array<float> params = arange<float>({n, 3});
  const Array<float> x = arange<float>({7});
  const Array<float> out = run_program(program, params, x, closing_over_ref);
  for (int64_t e = 0; e < 7; ++e) {
    const float want = x[e] * params(0, 0) + 2 * x[e] * params(1, 1) + 4 * x[e] * params(2, 2) +
                       8 * x[e] * params(3, 1) + 16 * x[e] * params(4, 2);
    ASSERT_NEAR(out[e], want, 1e-4f * std::abs(want)) << e;
  }
}

TEST(PallasTest, ControlFlowScanCondVmExplicitRefArg) { check_program({0, 1, 2, 3, 2}, false); }
TEST(PallasTest, ControlFlowScanCondVmClosingOverRef) { check_program({0, 1, 2, 3, 2, -1}, true); }

TEST(PallasTest, ControlFlowRangeWhileLoop) {
  // A while_loop that reduces to a fori_loop, summing x[0] (an SMEM block) into an SMEM output.
  const Array<int32_t> x = arange<int32_t>({4, 8, 128});
  const Array<int32_t> r = pl::pallas_call(
      [](pltpu::SmemRef<const int32_t> x_ref, pltpu::SmemRef<int32_t> r_ref) {
        pl::when(pl::program_id(0) == 0, [&] { r_ref(0, 0) = 0; });
        lax::while_loop(
            [](const std::tuple<int, int>& c) { return std::get<0>(c) < std::get<1>(c); },
            [&](const std::tuple<int, int>& c) {
              const int io = std::get<0>(c);
              const int i = io - 128;
              const int32_t v = x_ref(0, i / 128, i % 128);
              r_ref(0, 0) += v;
              return std::tuple{io + 1, std::get<1>(c)};
            },
            std::tuple{128, 128 + 1024});
      },
      pl::grid({1}), pl::out_specs(pl::BlockSpec({1, 1}, pltpu::SMEM)),
      pl::out_shape<int32_t>({1, 1}),
      pl::in_specs(pl::BlockSpec(
          {1, 8, 128}, [](int i) { return pl::idx(i, 0, 0); }, pltpu::SMEM)))(x);
  EXPECT_EQ(r[0], 1023 * 1024 / 2);
}

TEST(PallasTest, ControlFlowNonRangeWhileLoop) {
  const Array<int32_t> x = arange<int32_t>({8, 128});
  const Array<int32_t> r = pl::pallas_call(
      [](pltpu::SmemRef<const int32_t> x_ref, pltpu::SmemRef<int32_t> r_ref) {
        const auto [i, s] = lax::while_loop(
            [](const std::tuple<int32_t, int32_t>& st) {
              return std::get<0>(st) < 1024 && std::get<1>(st) < 1024;
            },
            [&](const std::tuple<int32_t, int32_t>& st) {
              const int32_t ii = std::get<0>(st);
              const int32_t v = x_ref(ii / 128, ii % 128);
              return std::tuple{ii + 1, std::get<1>(st) + v};
            },
            std::tuple{int32_t{0}, int32_t{0}});
        (void)i;
        r_ref(0, 0) = s;
      },
      pl::grid({1}), pl::out_specs(pl::BlockSpec({1, 1}, pltpu::SMEM)),
      pl::out_shape<int32_t>({1, 1}),
      pl::in_specs(pl::BlockSpec(
          {8, 128}, [](int) { return pl::idx(0, 0); }, pltpu::SMEM)))(x);
  EXPECT_EQ(r[0], 1035);
}

TEST(PallasTest, ControlFlowVectorCarryWhileLoop) {
  const pl::BlockSpec spec({8, 128}, [](int) { return pl::idx(0, 0); });
  const Array<int32_t> r = pl::pallas_call(
      [](pltpu::VmemRef<const int32_t> x_ref, pltpu::VmemRef<int32_t> r_ref) {
        r_ref[pl::ellipsis] = lax::while_loop(
            [](const jnp::Value<int32_t>& v) { return v(0, 0) < 16; },
            [](const jnp::Value<int32_t>& v) { return v * 2; }, x_ref[pl::ellipsis]);
      },
      pl::grid({1}), pl::in_specs(spec), pl::out_specs(spec),
      pl::out_shape<int32_t>({8, 128}))(full<int32_t>({8, 128}, 3));
  int64_t sum = 0;
  for (int32_t v : r) sum += v;
  EXPECT_EQ(sum, 1024 * 24);  // 3 -> 6 -> 12 -> 24
}

TEST(PallasTest, ControlFlowVector1dSliceCarryWhileLoop) {
  const pl::BlockSpec spec({100}, [](int) { return pl::idx(0); });
  const Array<int32_t> r = pl::pallas_call(
      [](pltpu::VmemRef<const int32_t> x_ref, pltpu::VmemRef<int32_t> r_ref) {
        r_ref[pl::ellipsis] = lax::while_loop(
            [](const jnp::Value<int32_t>& v) { return v(0) < 16; },
            [](const jnp::Value<int32_t>& v) {
              jnp::Value<int32_t> both = jnp::concatenate({v, v});
              return both[pl::ds(1, 100)] * 2;  // jnp.concatenate([v, v])[1:101] * 2
            },
            x_ref[pl::ellipsis]);
      },
      pl::grid({1}), pl::in_specs(spec), pl::out_specs(spec),
      pl::out_shape<int32_t>({100}))(full<int32_t>({100}, 3));
  int64_t sum = 0;
  for (int32_t v : r) sum += v;
  EXPECT_EQ(sum, 100 * 24);
}

TEST(PallasTest, ControlFlowWhileLoopCarryMemref) {
  // Pallas skips (1, 128); Tessera runs it too.
  for (const Shape& shape :
       {Shape{1, 128}, Shape{2, 128}, Shape{4, 128}, Shape{8, 128}, Shape{8, 256}}) {
    const int64_t bound = shape[1];
    const Array<int32_t> y = pl::pallas_call(
        [bound](pltpu::SmemRef<int32_t> out_ref) {
          lax::while_loop([&](int64_t i) { return i < bound; },
                          [&](int64_t i) {
                            out_ref(0, i) = 2;
                            return i + 1;
                          },
                          int64_t{0});
        },
        pl::grid({1}),
        pl::out_specs(pl::BlockSpec(
            {shape[0], shape[1]}, [](int) { return pl::idx(0, 0); }, pltpu::SMEM)),
        pl::out_shape<int32_t>(shape))();
    for (int64_t j = 0; j < 4; ++j) ASSERT_EQ(y(0, j), 2) << shape.to_string();
  }
}

TEST(PallasTest, ControlFlowNestedWhileLoop) {
  // The lengths of runs of equal keys, by two nested while_loops over SMEM.
  constexpr int key_count = 1024;
  const std::vector<int32_t> real{4, 4, 4, 3, 2, 2, 7, 7, 7, 7};
  Array<int32_t> keys = full<int32_t>({8, 128}, 32768);
  for (size_t i = 0; i < real.size(); ++i) keys[static_cast<int64_t>(i)] = real[i];
  const auto [count, sizes] = pl::pallas_call(
      [](pltpu::SmemRef<const int32_t> in_key_ref, pltpu::SmemRef<int32_t> out_segment_count,
         pltpu::SmemRef<int32_t> out_size_ref) {
        using Carry = std::tuple<int32_t, int32_t>;
        auto inner_cond = [&](const Carry& c) {
          const int32_t i = std::get<0>(c);
          const int32_t key = lax::cond(
              i < key_count, [&](int32_t k) -> int32_t { return in_key_ref(k / 128, k % 128); },
              [](int32_t) -> int32_t { return -1; }, i);
          return i < key_count && key == std::get<1>(c);
        };
        auto inner_body = [](const Carry& c) { return Carry{std::get<0>(c) + 1, std::get<1>(c)}; };
        auto outer_body = [&](const Carry& c) {
          const auto [i, next_out_idx] = c;
          const int32_t key = in_key_ref(i / 128, i % 128);
          const auto [end, unused] = lax::while_loop(inner_cond, inner_body, Carry{i + 1, key});
          (void)unused;
          out_size_ref(next_out_idx / 128, next_out_idx % 128) = end - i;
          return Carry{end, next_out_idx + 1};
        };
        const auto [i, n] = lax::while_loop(
            [](const Carry& c) { return std::get<0>(c) < key_count; }, outer_body, Carry{0, 0});
        (void)i;
        out_segment_count(0, 0) = n;
      },
      pl::grid({1}),
      pl::in_specs(pl::BlockSpec(
          {8, 128}, [](int) { return pl::idx(0, 0); }, pltpu::SMEM)),
      pl::out_specs(pl::BlockSpec({1, 1}, pltpu::SMEM), pl::BlockSpec({8, 128}, pltpu::SMEM)),
      pl::out_shape(ShapeDtypeStruct<int32_t>{{1, 1}}, ShapeDtypeStruct<int32_t>{{8, 128}}))(keys);
  EXPECT_EQ(count(0, 0), 5);
  EXPECT_EQ(sizes(0, 0), 3);
  EXPECT_EQ(sizes(0, 1), 1);
  EXPECT_EQ(sizes(0, 2), 2);
  EXPECT_EQ(sizes(0, 3), 4);
  EXPECT_EQ(sizes(0, 4), key_count - static_cast<int32_t>(real.size()));
}

// ---- PallasOutOfBoundsInterpretTest -----------------------------------------------------------

// test_interpret_mode_out_of_bounds_access, its unmasked half: the partial blocks along the
// contraction are padded with NaN in checked mode (as in Pallas' interpret mode), so the unmasked
// product is NaN everywhere. (The masked half is in pallas_pallas_2_test.cc.)
TEST(PallasTest, OutOfBoundsInterpretModeOutOfBoundsAccessUnmaskedIsNaN) {
  constexpr int64_t kBlock = 32;
  const Array<float> x = random_array<float>({kBlock, kBlock + 1}, 0);
  const Array<float> y = random_array<float>({kBlock + 1, kBlock}, 1);
  const Array<float> out = pl::pallas_call(
      [](pltpu::VmemRef<const float> xr, pltpu::VmemRef<const float> yr, pltpu::VmemRef<float> o) {
        if (pl::program_id(2) == 0) o = jnp::zeros_like(o);
        o += jnp::dot(xr, yr);
      },
      pl::out_shape<float>({kBlock, kBlock}), pl::grid({1, 1, 2}),
      pl::in_specs(
          pl::BlockSpec({kBlock, kBlock}, [](int i, int, int k) { return pl::idx(i, k); }),
          pl::BlockSpec({kBlock, kBlock}, [](int, int j, int k) { return pl::idx(k, j); })),
      pl::out_specs(
          pl::BlockSpec({kBlock, kBlock}, [](int i, int j, int) { return pl::idx(i, j); })),
      pltpu::InterpretParams{})(x, y);
  for (float v : out) ASSERT_TRUE(std::isnan(v));
}

}  // namespace
