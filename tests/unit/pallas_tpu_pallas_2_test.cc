// Ports of tpu_pallas_test.py (docs/pallas-parity.md), second file: calls without outputs,
// run_scoped scopes that return vector values, semaphore outputs taken by a later call, ref
// reshapes, broadcasts and reductions, jnp.tile / jnp.stack, a mixed-precision dot, masked
// stores, single-buffered constant blocks and the reshapes that change the last dim.
#include <gtest/gtest.h>

#include <array>
#include <atomic>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <optional>
#include <tuple>
#include <vector>

#include "support/pallas_port.h"
#include "tessera/tessera.h"

namespace {
using namespace tessera;
using namespace tessera::pallas_port;

// ---- PallasCallDynamicGridTest ----------------------------------------------------------------

TEST(TpuPallasTest, DynamicGridCanQueryGridStaticallyViaNumPrograms) {
  std::atomic<int> seen{0};
  std::atomic<int> steps{0};
  pl::pallas_call(
      [&] {
        seen = static_cast<int>(pl::num_programs(0));
        ++steps;
      },
      pl::grid({2}))();
  EXPECT_EQ(seen.load(), 2);
  EXPECT_EQ(steps.load(), 2);
}

TEST(TpuPallasTest, DynamicGridCanQueryGridStaticallyViaNumProgramsInBlockSpec) {
  std::atomic<int> seen{0};
  pl::pallas_call([](pltpu::VmemRef<const float>) {},
                  pl::in_specs(pl::BlockSpec({8, 128},
                                             [&seen](int) {
                                               seen = static_cast<int>(pl::num_programs(0));
                                               return pl::idx(0, 0);
                                             })),
                  pl::grid({2}))(full<float>({8, 128}, 1.0f));
  EXPECT_EQ(seen.load(), 2);
}

// ---- PallasCallDMATest ------------------------------------------------------------------------

void run_scoped_returns_vector(int64_t rows) {
  const Array<int32_t> o = pl::pallas_call(
      [rows](pltpu::VmemRef<int32_t> y) {
        jnp::Value out = pl::run_scoped(
            [](pltpu::VmemRef<int32_t> x) {
              x = jnp::ones_like(x);
              return jnp::Value(x[pl::ellipsis] + 1);
            },
            pltpu::VMEM<int32_t>({rows, 128}));
        y[pl::ellipsis] = out;
      },
      pl::out_shape<int32_t>({rows, 128}),
      pltpu::PrefetchScalarGridSpec<0>(pl::out_specs(pl::BlockSpec(pltpu::VMEM))))();
  for (int32_t v : o) ASSERT_EQ(v, 2);
}

TEST(TpuPallasTest, DmaRunScopedCanReturnVectorValues) { run_scoped_returns_vector(16); }
TEST(TpuPallasTest, DmaRunScopedCanReturnPaddedVectorValues) { run_scoped_returns_vector(17); }

TEST(TpuPallasTest, DmaOutputDmaSemaphoreRef) {
  // The first call starts x -> y and returns y with the DMA semaphore; the second call waits.
  const Array<float> x = arange<float>({8, 128});
  auto [y, sem] = pl::pallas_call(
      [](pltpu::AnyRef<const float> xh, pltpu::AnyRef<float> yh, pltpu::DmaSemaphoreRef s) {
        pltpu::make_async_copy(xh.at(pl::ds(0, 8), pl::all), yh.at(pl::all, pl::ds(0, 128)), s)
            .start();
      },
      pl::in_specs(pl::BlockSpec(pl::ANY)),
      pl::out_specs(pl::BlockSpec(pl::ANY), pl::BlockSpec(pltpu::SEMAPHORE)),
      pl::out_shape(ShapeDtypeStruct<float>{{8, 128}}, pltpu::SemaphoreType::DMA))(x);
  const Array<float> out = pl::pallas_call(
      [](pltpu::AnyRef<const float> xh, pltpu::AnyRef<const float>, pltpu::DmaSemaphoreRef s,
         pltpu::AnyRef<float> yh) {
        pltpu::make_async_copy(xh.at(pl::ds(0, 8), pl::all), yh.at(pl::all, pl::ds(0, 128)), s)
            .wait();
      },
      pl::in_specs(pl::BlockSpec(pl::ANY), pl::BlockSpec(pl::ANY), pl::BlockSpec(pltpu::SEMAPHORE)),
      pl::out_specs(pl::BlockSpec(pl::ANY)), pl::out_shape<float>({8, 128}),
      pl::input_output_aliases({{1, 0}}))(x, y, sem);
  for (int64_t i = 0; i < x.size(); ++i) ASSERT_EQ(out[i], x[i]);
}

// test_set_dma_priority: deliberately different. async_copy has no priority= (a hint for the
// TPU's DMA queues, with no effect on what is copied); the port issues the same four copies.
TEST(TpuPallasTest, DmaSetDmaPriority) {
  const Array<int32_t> x1 = arange<int32_t>({8, 128});
  Array<int32_t> x2 = x1;
  for (int32_t& v : x2) v += 1;
  using In = pltpu::AnyRef<const int32_t>;
  using Out = pltpu::AnyRef<int32_t>;
  const auto [y1, y2] = pl::pallas_call(
      [](In a, In b, Out c, Out d, pltpu::VmemRef<int32_t> s1, pltpu::VmemRef<int32_t> s2,
         pltpu::DmaSemaphoreRef sem1, pltpu::DmaSemaphoreRef sem2) {
        auto copy1 = pltpu::async_copy(a, s1, sem1);  // priority=1
        auto copy2 = pltpu::async_copy(b, s2, sem2);  // priority=0
        copy1.wait();
        copy2.wait();
        auto copy3 = pltpu::async_copy(s1, c, sem1);
        auto copy4 = pltpu::async_copy(s2, d, sem2);
        copy3.wait();
        copy4.wait();
      },
      pltpu::PrefetchScalarGridSpec<0>(
          pl::in_specs(pl::BlockSpec(pl::ANY), pl::BlockSpec(pl::ANY)),
          pl::out_specs(pl::BlockSpec(pl::ANY), pl::BlockSpec(pl::ANY)),
          pl::scratch_shapes(pltpu::VMEM<int32_t>({8, 128}), pltpu::VMEM<int32_t>({8, 128}),
                             pltpu::SemaphoreType::DMA, pltpu::SemaphoreType::DMA)),
      pl::out_shape(ShapeDtypeStruct<int32_t>{{8, 128}}, ShapeDtypeStruct<int32_t>{{8, 128}}))(x1,
                                                                                               x2);
  for (int64_t i = 0; i < x1.size(); ++i) {
    ASSERT_EQ(y1[i], x1[i]);
    ASSERT_EQ(y2[i], x2[i]);
  }
}

TEST(TpuPallasTest, DmaSelectRefNested) {
  // pl.select_ref is indexing a std::array of refs; the nested select picks a half of each.
  constexpr int kRefs = 4;
  const Array<int32_t> x = arange<int32_t>({8 * kRefs, 256});
  std::array<Array<int32_t>, kRefs> xs;
  for (int r = 0; r < kRefs; ++r) {
    xs[r] = Array<int32_t>({8, 256});
    for (int64_t i = 0; i < xs[r].size(); ++i) xs[r][i] = x[r * 8 * 256 + i];
  }
  using H = pltpu::HbmRef<const int32_t>;
  const Array<int32_t> y = pl::pallas_call(
      [](H a, H b, H c, H d, pltpu::HbmRef<int32_t> yh) {
        pl::run_scoped(
            [&](pltpu::DmaSemaphoreRef sem) {
              const auto select_first_half = [](H r) {
                const std::array<H, 2> halves{r.at(pl::all, pl::ds(0, 128)),
                                              r.at(pl::all, pl::ds(128, 128))};
                return halves[0];  // pl.select_ref(0, r.at[:, :128], r.at[:, 128:])
              };
              for (int i = 0; i < kRefs; ++i) {
                const std::array<H, kRefs> nested{select_first_half(a), select_first_half(b),
                                                  select_first_half(c), select_first_half(d)};
                pltpu::async_copy(nested[i].reshape(8, 128),
                                  yh.at(pl::ds(8 * i, 8), pl::ds(0, 128)), sem.at(0))
                    .wait();
              }
            },
            pltpu::SemaphoreType::DMA({2}));
      },
      pl::in_specs(pl::BlockSpec(pltpu::HBM), pl::BlockSpec(pltpu::HBM), pl::BlockSpec(pltpu::HBM),
                   pl::BlockSpec(pltpu::HBM)),
      pl::out_specs(pl::BlockSpec(pltpu::HBM)),
      pl::out_shape<int32_t>({8 * kRefs, 256}))(xs[0], xs[1], xs[2], xs[3]);
  for (int64_t r = 0; r < 8 * kRefs; ++r) {
    for (int64_t c = 0; c < 128; ++c) ASSERT_EQ(y(r, c), x(r, c));
  }
}

// ---- PallasCallTest ---------------------------------------------------------------------------

enum class Reduce { kSum, kMax, kMin };

template <class T>
void replicated_broadcast_reduction(int64_t m, bool rep0, bool rep1, bool red0, bool red1,
                                    Reduce f) {
  const Shape in_shape{rep0 ? 1 : m, rep1 ? 1 : m};
  const Shape red_shape{red0 ? 1 : m, red1 ? 1 : m};
  const Array<T> y = pl::pallas_call(
      [=](pltpu::VmemRef<const T> x, pltpu::VmemRef<T> o) {
        jnp::Value dilated = jnp::broadcast_to(x[pl::ellipsis], {m, m});
        const detail::AxisSpec axes = red0 && red1 ? detail::AxisSpec{0, 1}
                                      : red0       ? detail::AxisSpec{0}
                                                   : detail::AxisSpec{1};
        if (f == Reduce::kSum) o[pl::ellipsis] = jnp::sum(dilated, axes).reshape(red_shape);
        if (f == Reduce::kMax) o[pl::ellipsis] = jnp::max(dilated, axes).reshape(red_shape);
        if (f == Reduce::kMin) o[pl::ellipsis] = jnp::min(dilated, axes).reshape(red_shape);
      },
      pl::out_shape<T>(red_shape), pl::in_specs(pl::BlockSpec({in_shape[0], in_shape[1]})),
      pl::out_specs(pl::BlockSpec({red_shape[0], red_shape[1]})),
      pl::grid({1}))(full<T>(in_shape, T(2)));
  const int64_t count = (red0 ? m : 1) * (red1 ? m : 1);
  const T want = f == Reduce::kSum ? static_cast<T>(2 * count) : T(2);
  for (T v : y) ASSERT_EQ(v, want) << m << " " << red0 << red1;
}

TEST(TpuPallasTest, PallasCallReplicatedBroadcastReduction) {
  const std::array<std::array<bool, 2>, 3> replicated{{{true, true}, {false, true}, {true, false}}};
  const std::array<std::array<bool, 2>, 3> reduced{{{true, true}, {true, false}, {false, true}}};
  for (int64_t m : {128, 256}) {
    for (const auto& rep : replicated) {
      for (const auto& red : reduced) {
        for (Reduce f : {Reduce::kSum, Reduce::kMax, Reduce::kMin}) {
          replicated_broadcast_reduction<float>(m, rep[0], rep[1], red[0], red[1], f);
          replicated_broadcast_reduction<int32_t>(m, rep[0], rep[1], red[0], red[1], f);
        }
      }
    }
  }
}

TEST(TpuPallasTest, PallasCallSumInSmem) {
  const Array<int16_t> y = pl::pallas_call(
      [](pltpu::SmemRef<const int16_t> x, pltpu::SmemRef<int16_t> out) {
        int32_t a = 0;
        for (int i = 0; i < 4; ++i) {
          for (int j = 0; j < 4; ++j) {
            out(i, j) = static_cast<int16_t>(a);
            a += x(i, j);
          }
        }
      },
      pl::in_specs(pl::BlockSpec(pltpu::SMEM)), pl::out_specs(pl::BlockSpec(pltpu::SMEM)),
      pl::out_shape<int16_t>({4, 4}))(full<int16_t>({4, 4}, 1));
  for (int64_t i = 0; i < 16; ++i) ASSERT_EQ(y[i], i);
}

// ---- PallasCallPoisonTest ---------------------------------------------------------------------

TEST(TpuPallasTest, PoisonAutomaticSingleBuffering) {
  // Scaled down from 10 MiB windows of a 100 MiB array: 256 KiB windows, a 384 KiB VMEM limit
  // (room for one window, not two) and a 1 MiB array. A block whose index depends only on a
  // 1-sized grid dim (or on none) takes one window; a moving block takes two and is refused
  // unless it is given pl::Buffered(1).
  constexpr int64_t kWindow = 256 * 1024;
  const pltpu::CompilerParams limit{.vmem_limit_bytes = 384 * 1024};
  const auto body = [](pltpu::VmemRef<int8_t>) {};
  const ShapeDtypeStruct<int8_t> x{{4 * kWindow}};
  pl::pallas_call(body, pl::grid({4}), pl::out_shape(ShapeDtypeStruct<int8_t>{{kWindow}}), limit)();
  pl::pallas_call(body, pl::grid({4, 1}), pl::out_shape(x),
                  pl::out_specs(pl::BlockSpec({kWindow}, [](int, int j) { return pl::idx(j); })),
                  limit)();
  pl::pallas_call(body, pl::grid({1, 4}), pl::out_shape(x),
                  pl::out_specs(pl::BlockSpec({kWindow}, [](int i, int) { return pl::idx(i); })),
                  limit)();
  expect_error<UsageError>(
      [&] {
        pl::pallas_call(
            body, pl::grid({4, 1}), pl::out_shape(x),
            pl::out_specs(pl::BlockSpec({kWindow}, [](int i, int j) { return pl::idx(j + i); })),
            limit)();
      },
      ErrorKind::kCapacityExceeded, "VMEM");
  pl::pallas_call(body, pl::grid({4, 1}), pl::out_shape(x),
                  pl::out_specs(pl::BlockSpec(
                      {kWindow}, [](int i, int j) { return pl::idx(j + i); }, pl::Buffered(1))),
                  limit)();
  // Unused scalar-prefetch operands are not taken for unused grid indices.
  const Array<int32_t> scalar({1}, {0});
  expect_error<UsageError>(
      [&] {
        pl::pallas_call(
            [](pltpu::SmemRef<int32_t>, pltpu::SmemRef<int32_t>, pltpu::VmemRef<int8_t>) {},
            pl::out_shape(x),
            pltpu::PrefetchScalarGridSpec<2>(
                pl::grid({4, 1}),
                pl::out_specs(pl::BlockSpec(
                    {kWindow}, [](int i, int j, pltpu::SmemRef<int32_t>,
                                  pltpu::SmemRef<int32_t>) { return pl::idx(j + i); }))),
            limit)(scalar, scalar);
      },
      ErrorKind::kCapacityExceeded, "VMEM");
}

template <class T>
void tile_case(std::initializer_list<int64_t> reps) {
  const Array<T> x = arange<T>({8, 256});
  const std::vector<int64_t> r(reps);
  const int64_t r0 = r.size() == 2 ? r[0] : 1, r1 = r.back();
  const Shape out_shape = r.size() == 2 ? Shape{8 * r0, 256 * r1} : Shape{8, 256 * r1};
  const Array<T> y = pl::pallas_call(
      [reps](pltpu::VmemRef<const T> xr, pltpu::VmemRef<T> o) {
        jnp::Value xv = xr[pl::ellipsis];
        o[pl::ellipsis] = jnp::tile(xv, reps);
      },
      pl::out_shape<T>(out_shape))(x);
  for (int64_t i = 0; i < out_shape[0]; ++i) {
    for (int64_t j = 0; j < out_shape[1]; ++j) ASSERT_EQ(y(i, j), x(i % 8, j % 256));
  }
}

TEST(TpuPallasTest, PoisonTile) {
  tile_case<bfloat16>({2});
  tile_case<bfloat16>({1, 2});
  tile_case<bfloat16>({2, 1});
  tile_case<bfloat16>({2, 2});
  tile_case<float>({2});
  tile_case<float>({1, 2});
  tile_case<float>({2, 1});
  tile_case<float>({2, 2});
}

// test_mixed_precision_dot: lax.dot_general of bfloat16 x and float8_e4m3b11fnuz w with a
// float32 result, the products computed as the host computes them.
Array<float> mixed_precision_dot(const Array<bfloat16>& x, const Array<float8_e4m3b11fnuz>& w,
                                 const pltpu::InterpretParams* chip = nullptr) {
  auto kernel = [](pltpu::VmemRef<const bfloat16> x_ref,
                   pltpu::VmemRef<const float8_e4m3b11fnuz> w_ref, pltpu::VmemRef<float> o_ref) {
    o_ref[pl::ellipsis] =
        lax::dot_general<float>(x_ref[pl::ellipsis], w_ref[pl::ellipsis], {{{1}, {0}}, {{}, {}}});
  };
  const Shape out{x.shape()[0], w.shape()[1]};
  if (chip != nullptr) return pl::pallas_call(kernel, pl::out_shape<float>(out), *chip)(x, w);
  return pl::pallas_call(kernel, pl::out_shape<float>(out))(x, w);
}

// x @ w in double (the float32 GEMM's sums differ from it by rounding only).
std::vector<double> host_mixed_dot(const Array<bfloat16>& x, const Array<float8_e4m3b11fnuz>& w) {
  const int64_t m = x.shape()[0], k = x.shape()[1], n = w.shape()[1];
  std::vector<double> r(static_cast<size_t>(m * n), 0.0);
  for (int64_t i = 0; i < m; ++i) {
    for (int64_t p = 0; p < k; ++p) {
      for (int64_t j = 0; j < n; ++j) {
        r[static_cast<size_t>(i * n + j)] +=
            static_cast<double>(static_cast<float>(x(i, p))) * static_cast<float>(w(p, j));
      }
    }
  }
  return r;
}

TEST(TpuPallasTest, PoisonMixedPrecisionDot) {
  // Pallas' case: ones (64, 128) against a (128, 128) of NaN; as many NaNs as the host product
  // has (every element).
  const Array<bfloat16> x = full<bfloat16>({64, 128}, bfloat16(1.0f));
  const Array<float8_e4m3b11fnuz> w = full<float8_e4m3b11fnuz>(
      {128, 128}, float8_e4m3b11fnuz(std::numeric_limits<float>::quiet_NaN()));
  ASSERT_EQ(w[0].bits, 0x80);
  const std::vector<double> want = host_mixed_dot(x, w);
  const auto nans = [](const auto& v) {
    int64_t c = 0;
    for (const auto& e : v) c += std::isnan(static_cast<double>(e)) ? 1 : 0;
    return c;
  };
  EXPECT_EQ(nans(mixed_precision_dot(x, w)), nans(want));
  EXPECT_EQ(nans(want), 64 * 128);
  // Finite operands (the clean twin), multiples of 1/16 below 4 and 8: every product is a
  // multiple of 2^-8 below 32 and every sum of 128 of them exact in float32, so the kernel's
  // result equals the host's exactly (natively, and checked against a v5e, whose MXU takes the
  // pair).
  Random r(7);
  Array<bfloat16> xf({64, 128});
  Array<float8_e4m3b11fnuz> wf({128, 128});
  for (auto& v : xf) v = bfloat16(std::round(64.0f * r.uniform()) / 16.0f);
  for (auto& v : wf) v = float8_e4m3b11fnuz(std::round(128.0f * r.uniform()) / 16.0f);
  const std::vector<double> wantf = host_mixed_dot(xf, wf);
  pltpu::InterpretParams v5e;
  v5e.chip = "v5e";
  for (const pltpu::InterpretParams* p : {static_cast<pltpu::InterpretParams*>(nullptr), &v5e}) {
    const Array<float> got = mixed_precision_dot(xf, wf, p);
    for (int64_t i = 0; i < got.size(); ++i) {
      ASSERT_EQ(static_cast<double>(got[i]), wantf[static_cast<size_t>(i)]) << i;
    }
  }
  // Pallas skips the test on generations <= 4 and on 7x: their MXUs take no float8_e4m3b11fnuz
  // (pltpu::TpuInfo::is_matmul_supported), and checked mode against them says so.
  for (const char* chip : {"v4", "7x"}) {
    pltpu::InterpretParams p;
    p.chip = chip;
    expect_error([&] { mixed_precision_dot(x, w, &p); }, ErrorKind::kUnsupported,
                 "a bfloat16 x float8_e4m3b11fnuz matmul is not supported by the MXU of");
  }
}

TEST(TpuPallasTest, PoisonMaskedStore) {
  const Shape shape{16, 256};
  const Array<float> x = arange<float>(shape);
  const Array<float> out = pl::pallas_call(
      [shape](pltpu::SmemRef<int32_t> s, pltpu::VmemRef<const float> xr, pltpu::VmemRef<float> o) {
        o[pl::ellipsis] = jnp::full_like(o, -1.0f);
        const int32_t b0 = s(0), b1 = s(1);
        const int32_t e0 = b0 + 10, e1 = b1 + 130;
        auto iota0 = lax::broadcasted_iota<int32_t>(shape, 0);
        auto iota1 = lax::broadcasted_iota<int32_t>(shape, 1);
        auto mask0 = jnp::logical_and(b0 <= iota0, iota0 < e0);
        auto mask1 = jnp::logical_and(b1 <= iota1, iota1 < e1);
        pltpu::store(o, xr[pl::ellipsis], jnp::logical_and(mask0, mask1));
      },
      pl::out_shape<float>(shape),
      pltpu::PrefetchScalarGridSpec<1>())(Array<int32_t>({2}, {4, 5}), x);
  for (int64_t i = 0; i < 16; ++i) {
    for (int64_t j = 0; j < 256; ++j) {
      const bool in = i >= 4 && i < 14 && j >= 5 && j < 135;
      ASSERT_EQ(out(i, j), in ? x(i, j) : -1.0f) << i << "," << j;
    }
  }
}

// ---- TPUPipelineModeRevisitTest -----------------------------------------------------------------

// test_block_reduction_with_non_immediate_revisit: deliberately different. There is no
// pl.Buffered(revisit=pl.RevisitMode.ANY): an output block visited again after another block is
// an error (checked mode reports it, kRevisit, at the step that comes back), so a reduction that
// comes back to its blocks accumulates in scratch or keeps the reduced axis innermost.
TEST(TpuPallasTest, PipelineModeRevisitBlockReductionWithNonImmediateRevisit) {
  const Array<float> x = arange<float>({24, 384});
  auto e = tessera::testing::catch_error<KernelError>([&] {
    pl::pallas_call(
        [](pltpu::VmemRef<const float> xr, pltpu::VmemRef<float> o) {
          if (pl::program_id(0) == 0) o = jnp::zeros_like(o);
          o[pl::ellipsis] = o[pl::ellipsis] + xr[pl::ellipsis];
        },
        pl::out_shape<float>({8, 384}), pl::grid({3, 3}),
        pl::in_specs(pl::BlockSpec({8, 128}, [](int i, int j) { return pl::idx(i, j); })),
        pl::out_specs(pl::BlockSpec(
            {8, 128}, [](int, int j) { return pl::idx(0, j); }, pl::Buffered(1))),
        pltpu::InterpretParams{})(x);
  });
  ASSERT_TRUE(e);
  EXPECT_EQ(e->kind(), ErrorKind::kRevisit) << e->what();
  EXPECT_EQ(e->grid_step(), (std::vector<int64_t>{1, 0})) << e->what();
  // The same reduction with the reduced axis innermost visits each block once, in a row.
  const Array<float> z = pl::pallas_call(
      [](pltpu::VmemRef<const float> xr, pltpu::VmemRef<float> o) {
        if (pl::program_id(1) == 0) o = jnp::zeros_like(o);
        o[pl::ellipsis] = o[pl::ellipsis] + xr[pl::ellipsis];
      },
      pl::out_shape<float>({8, 384}), pl::grid({3, 3}),
      pl::in_specs(pl::BlockSpec({8, 128}, [](int j, int i) { return pl::idx(i, j); })),
      pl::out_specs(pl::BlockSpec({8, 128}, [](int j, int) { return pl::idx(0, j); })))(x);
  for (int64_t r = 0; r < 8; ++r) {
    for (int64_t c = 0; c < 384; ++c) {
      ASSERT_EQ(z(r, c), x(r, c) + x(8 + r, c) + x(16 + r, c)) << r << "," << c;
    }
  }
}

// ---- PallasCallScalarPrefetchTest -------------------------------------------------------------

// test_scalar_prefetch_calling_convention (vmap=False): one grouped scalar-prefetch operand,
// blocked inputs, the output and, with `scratch`, a REGULAR semaphore array. The operand is
// the pytree (s, arange(3), None): its None leaf is a std::nullopt, passed on as one. Grids are
// run-time values, so dyn_grid=True is the same call.
using CallingMeta = std::tuple<pltpu::SmemRef<int32_t>, pltpu::SmemRef<int32_t>, std::nullopt_t>;

void calling_convention(bool scratch) {
  const Array<float> to_store = arange<float>({1, 128});
  const Array<float> x = arange<float>({16, 128});
  const Array<int32_t> s({2}, {1, 0});  // iteration 0 -> block 1, iteration 1 -> block 0
  const Array<int32_t> s2 = arange<int32_t>({3});
  const auto kernel = [](CallingMeta meta, pltpu::VmemRef<const float>,
                         pltpu::VmemRef<const float> store, pltpu::VmemRef<float> dst) {
    const auto& [s_ref, second, none] = meta;
    static_cast<void>(none);
    EXPECT_EQ(s_ref.shape(), Shape({2}));
    EXPECT_EQ(second.shape(), Shape({3}));
    const int32_t store_idx = s_ref(static_cast<int>(pl::program_id(0)));
    dst.at(pl::ds(store_idx, 1), pl::all) = store;
  };
  const auto in_specs = pl::in_specs(
      pl::BlockSpec({8, 128}, [](int i, CallingMeta m) { return pl::idx(std::get<0>(m)(i), 0); }),
      pl::BlockSpec({1, 128}, [](int, CallingMeta) { return pl::idx(0, 0); }));
  const auto out_specs = pl::out_specs(
      pl::BlockSpec({32, 128}, [](int i, CallingMeta m) { return pl::idx(std::get<0>(m)(i), 0); }));
  const int grid_size = 2;
  Array<float> res;
  if (scratch) {
    res = pl::pallas_call(
        [&kernel](CallingMeta meta, pltpu::VmemRef<const float> src,
                  pltpu::VmemRef<const float> store, pltpu::VmemRef<float> dst,
                  pltpu::SemaphoreRef) { kernel(meta, src, store, dst); },
        pl::out_shape<float>({64, 128}),
        pltpu::PrefetchScalarGridSpec<1>(pl::grid({grid_size}), in_specs, out_specs,
                                         pl::scratch_shapes(pltpu::SemaphoreType::REGULAR({3}))))(
        std::tuple{s, s2, std::nullopt}, x, to_store);
  } else {
    res = pl::pallas_call(
        kernel, pl::out_shape<float>({64, 128}),
        pltpu::PrefetchScalarGridSpec<1>(pl::grid({grid_size}), in_specs, out_specs))(
        std::tuple{s, s2, std::nullopt}, x, to_store);
  }
  for (int64_t c = 0; c < 128; ++c) {
    ASSERT_EQ(res(0, c), to_store[c]);
    ASSERT_EQ(res(33, c), to_store[c]);
  }
}

TEST(TpuPallasTest, ScalarPrefetchScalarPrefetchCallingConvention) {
  calling_convention(true);
  calling_convention(false);
}

// ---- PallasCallRefTransformTest: reshapes (bitcasts: pallas_tpu_pallas_bitcast_test.cc) -------

TEST(TpuPallasTest, RefTransformDmaReshapedRef) {
  const Array<int32_t> x = arange<int32_t>({16, 1, 128});
  for (bool slice_first : {true, false}) {
    const Array<int32_t> y = pl::pallas_call(
        [slice_first](pltpu::AnyRef<const int32_t> xh, pltpu::AnyRef<int32_t> yh) {
          pl::run_scoped(
              [&](pltpu::DmaSemaphoreRef sem) {
                const auto ref = slice_first ? xh.at(pl::ds(0, 8), pl::all, pl::all).reshape(8, 128)
                                             : xh.reshape(16, 128).at(pl::ds(0, 8), pl::all);
                pltpu::async_copy(ref, yh.reshape(8, 128), sem).wait();
              },
              pltpu::SemaphoreType::DMA);
        },
        pl::in_specs(pl::BlockSpec(pl::ANY)), pl::out_specs(pl::BlockSpec(pl::ANY)),
        pl::out_shape<int32_t>({8, 1, 128}))(x);
    for (int64_t i = 0; i < y.size(); ++i) ASSERT_EQ(y[i], x[i]) << slice_first;
  }
}

TEST(TpuPallasTest, RefTransformLoadReshapedRef) {
  const Array<int32_t> x = arange<int32_t>({5, 1, 128});
  const Array<int32_t> y = pl::pallas_call(
      [](pltpu::VmemRef<const int32_t> xr, pltpu::VmemRef<int32_t> yr) {
        yr[pl::ellipsis] = xr.reshape(5, 128)[pl::ellipsis];
      },
      pl::out_shape<int32_t>({5, 128}))(x);
  for (int64_t i = 0; i < y.size(); ++i) ASSERT_EQ(y[i], x[i]);
}

TEST(TpuPallasTest, RefTransformStoreReshapedRef) {
  const Array<int32_t> x = arange<int32_t>({5, 128});
  const Array<int32_t> y = pl::pallas_call(
      [](pltpu::VmemRef<const int32_t> xr, pltpu::VmemRef<int32_t> yr) {
        yr.reshape(5, 128)[pl::ellipsis] = xr[pl::ellipsis];
      },
      pl::out_shape<int32_t>({5, 1, 128}))(x);
  for (int64_t i = 0; i < y.size(); ++i) ASSERT_EQ(y[i], x[i]);
}

// ---- MiscellaneousTest: stack, broadcasts, reshapes --------------------------------------------

TEST(TpuPallasTest, MiscellaneousFloat32Stack) {
  const Array<float> x = arange<float>({1, 128});
  Array<float> y = x;
  for (float& v : y) v += 128.0f;
  const Array<float> out = pl::pallas_call(
      [](pltpu::VmemRef<const float> xr, pltpu::VmemRef<const float> yr, pltpu::VmemRef<float> o) {
        o[pl::ellipsis] = jnp::stack({xr[pl::ellipsis], yr[pl::ellipsis]}, 1);
      },
      pl::out_shape<float>({1, 2, 128}))(x, y);
  for (int64_t c = 0; c < 128; ++c) {
    ASSERT_EQ(out(0, 0, c), x(0, c));
    ASSERT_EQ(out(0, 1, c), y(0, c));
  }
}

TEST(TpuPallasTest, MiscellaneousFloat32StackOneOperand) {
  const Array<float> x = arange<float>({1, 128});
  const Array<float> out = pl::pallas_call(
      [](pltpu::VmemRef<const float> xr, pltpu::VmemRef<float> o) {
        o[pl::ellipsis] = jnp::stack({xr[pl::ellipsis]}, 1);
      },
      pl::out_shape<float>({1, 1, 128}))(x);
  for (int64_t c = 0; c < 128; ++c) ASSERT_EQ(out[c], x[c]);
}

TEST(TpuPallasTest, MiscellaneousScalarStack) {
  const Array<float> out = pl::pallas_call(
      [](pltpu::SmemRef<const float> xr, pltpu::SmemRef<const float> yr, pltpu::VmemRef<float> o) {
        o[pl::ellipsis] = jnp::stack({xr[pl::ellipsis], yr[pl::ellipsis]}, 0);
      },
      pl::in_specs(pl::BlockSpec(pltpu::SMEM), pl::BlockSpec(pltpu::SMEM)),
      pl::out_shape<float>({2}))(Array<float>({}, {1.0f}), Array<float>({}, {2.0f}));
  EXPECT_EQ(out[0], 1.0f);
  EXPECT_EQ(out[1], 2.0f);
}

TEST(TpuPallasTest, MiscellaneousLaneToChunkReshapeBf16) {
  const Array<bfloat16> x = arange<bfloat16>({1, 256, 1024});
  const Array<bfloat16> out = pl::pallas_call(
      [](pltpu::VmemRef<const bfloat16> xr, pltpu::VmemRef<bfloat16> o) {
        o[pl::ellipsis] = jnp::reshape(xr[pl::ellipsis], {1, 256, 8, 128});
      },
      pl::out_shape<bfloat16>({1, 256, 8, 128}))(x);
  for (int64_t i = 0; i < x.size(); ++i) ASSERT_EQ(out[i].bits, x[i].bits);
}

TEST(TpuPallasTest, MiscellaneousLaneToChunkBroadcastFp32) {
  const Array<float> x = arange<float>({1, 256, 128});
  const Array<float> out = pl::pallas_call(
      [](pltpu::VmemRef<const float> xr, pltpu::VmemRef<float> o) {
        o[pl::ellipsis] =
            jnp::broadcast_to(jnp::expand_dims(xr[pl::ellipsis], 2), {1, 256, 8, 128});
      },
      pl::out_shape<float>({1, 256, 8, 128}))(x);
  for (int64_t r = 0; r < 256; ++r) {
    for (int64_t k = 0; k < 8; ++k) {
      for (int64_t c = 0; c < 128; ++c) ASSERT_EQ(out(0, r, k, c), x(0, r, c));
    }
  }
}

TEST(TpuPallasTest, MiscellaneousLaneBroadcastBf16) {
  const Array<bfloat16> x = arange<bfloat16>({256, 1});
  const Array<bfloat16> out = pl::pallas_call(
      [](pltpu::VmemRef<const bfloat16> xr, pltpu::VmemRef<bfloat16> o) {
        o[pl::ellipsis] = jnp::broadcast_to(xr[pl::ellipsis], {256, 512});
      },
      pl::out_shape<bfloat16>({256, 512}))(x);
  for (int64_t r = 0; r < 256; ++r) {
    for (int64_t c = 0; c < 512; ++c) ASSERT_EQ(out(r, c).bits, x(r, 0).bits);
  }
}

TEST(TpuPallasTest, MiscellaneousRetiling1) {
  const Array<bfloat16> x = arange<bfloat16>({1024});
  const Array<float> out = pl::pallas_call(
      [](pltpu::VmemRef<const bfloat16> xr, pltpu::VmemRef<float> o) {
        o[pl::ellipsis] = jnp::reshape(xr[pl::ellipsis].astype<float>(), {8, 128});
      },
      pl::out_shape<float>({8, 128}))(x);
  for (int64_t i = 0; i < x.size(); ++i) ASSERT_EQ(out[i], static_cast<float>(x[i]));
}

TEST(TpuPallasTest, MiscellaneousRetiling2) {
  const Array<bfloat16> x = arange<bfloat16>({1, 8, 1024});
  const Array<float> out = pl::pallas_call(
      [](pltpu::VmemRef<const bfloat16> xr, pltpu::VmemRef<float> o) {
        o[pl::ellipsis] =
            jnp::reshape(xr.at(pl::all, 7, pl::all)[pl::ellipsis].astype<float>(), {1, 8, 128});
      },
      pl::out_shape<float>({1, 8, 128}))(x);
  for (int64_t i = 0; i < 1024; ++i) ASSERT_EQ(out[i], static_cast<float>(x(0, 7, i)));
}

TEST(TpuPallasTest, MiscellaneousManualDmaReshapeTc) {
  for (int64_t m : {1, 2, 4, 8, 16}) {
    for (int64_t r : {1, 2, 4, 8, 16, 32, 64}) {
      if (r % m != 0) continue;
      const int64_t n = r / m;
      const Array<float> x = random_array<float>({n * m, 256}, static_cast<uint64_t>(r * 17 + m));
      const Array<float> out = pl::pallas_call(
          [n, m](pltpu::VmemRef<const float> xv, pltpu::VmemRef<float> yv) {
            pl::run_scoped(
                [&](pltpu::DmaSemaphoreRef sem, pltpu::VmemRef<float> buf) {
                  const auto reshaped = buf.reshape(n * m, 256);
                  pltpu::async_copy(xv, reshaped, sem).wait();
                  pltpu::async_copy(reshaped, yv, sem).wait();
                },
                pltpu::SemaphoreType::DMA, pltpu::VMEM<float>({n, m, 256}));
          },
          pl::out_shape<float>({n * m, 256}))(x);
      for (int64_t i = 0; i < x.size(); ++i) ASSERT_EQ(out[i], x[i]) << n << "x" << m;
    }
  }
}

}  // namespace
