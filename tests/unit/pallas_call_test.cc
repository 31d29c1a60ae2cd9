// pl::pallas_call in the native engine: blocked operands over a grid, default whole-array specs,
// reductions with scratch that persists across the grid, a blocked matmul accumulating over K, the
// PARALLEL split, and the checks made before launch.
#include <gtest/gtest.h>

#include <atomic>
#include <optional>
#include <vector>

#include "support/expect_error.h"
#include "tessera/tessera.h"

namespace {
using namespace tessera;
using pltpu::ARBITRARY;
using pltpu::PARALLEL;

TEST(PallasCall, BlockedAddSplitOverCores) {
  Array<float> x({256, 384});
  Array<float> y({256, 384});
  for (int64_t i = 0; i < x.size(); ++i) {
    x[i] = static_cast<float>(i % 97);
    y[i] = 0.5f * static_cast<float>(i % 13);
  }
  const pl::BlockSpec spec({128, 128}, [](int i, int j) { return pl::idx(i, j); });
  for (int cores : {1, 2, 3}) {
    auto add = pl::pallas_call([](pltpu::VmemRef<float> xv, pltpu::VmemRef<float> yv,
                                  pltpu::VmemRef<float> ov) { ov = xv + yv; },
                               pl::out_shape<float>({256, 384}), pl::grid({2, 3}),
                               pl::in_specs(spec, spec), pl::out_specs(spec),
                               pltpu::TensorCoreMesh("core", cores),
                               pltpu::CompilerParams{.dimension_semantics = {PARALLEL, ARBITRARY}});
    const Array<float> o = add(x, y);
    for (int64_t i = 0; i < o.size(); ++i) ASSERT_EQ(o[i], x[i] + y[i]) << cores << " " << i;
  }
}

// A mesh with more cores than parallel blocks: the cores past them have no grid step and run
// nothing (src/runtime/pallas_call.cc, run_core), natively and in checked mode; every block is
// computed once, by the core it falls to.
TEST(PallasCall, CoresWithoutGridStepsRunNothing) {
  Array<float> x({16, 128});
  for (int64_t i = 0; i < x.size(); ++i) x[i] = static_cast<float>(i % 89);
  const pl::BlockSpec spec({8, 128}, [](int i) { return pl::idx(i, 0); });
  for (const bool checked : {false, true}) {
    std::optional<pltpu::ForceTpuInterpretMode> force;
    if (checked) force.emplace();
    for (int cores : {1, 2, 3, 4}) {
      std::atomic<int> steps{0};
      auto k = pl::pallas_call(
          [&steps](pltpu::VmemRef<const float> xv, pltpu::VmemRef<float> ov) {
            steps.fetch_add(1);
            ov = xv * 2.0f + 1.0f;
          },
          pl::out_shape<float>({16, 128}), pl::grid({2}), pl::in_specs(spec), pl::out_specs(spec),
          pltpu::TensorCoreMesh("core", cores),
          pltpu::CompilerParams{.dimension_semantics = {PARALLEL}});
      const Array<float> o = k(x);
      EXPECT_EQ(steps.load(), 2) << cores << (checked ? " checked" : "");
      for (int64_t i = 0; i < o.size(); ++i) {
        ASSERT_EQ(o[i], x[i] * 2.0f + 1.0f) << cores << (checked ? " checked " : " ") << i;
      }
    }
  }
}

TEST(PallasCall, DefaultsAreWholeArraysAndOneInvocation) {
  const Array<int32_t> x({3, 5}, 7);
  int calls = 0;
  auto f = pl::pallas_call(
      [&](pltpu::VmemRef<int32_t> xv, pltpu::VmemRef<int32_t> ov) {
        ++calls;
        EXPECT_EQ(xv.shape(), Shape({3, 5}));
        ov = xv * 2;
      },
      pl::out_shape<int32_t>({3, 5}), pltpu::TensorCoreMesh("core", 1));
  const Array<int32_t> o = f(x);
  EXPECT_EQ(calls, 1);
  for (int32_t v : o) EXPECT_EQ(v, 14);
}

TEST(PallasCall, ScratchPersistsAcrossTheGrid) {
  // Pallas' test_hoisted_scratch_space: scratch = x at step 0, += 1 per step, written at the last.
  const Array<float> x({8, 128}, 1.5f);
  auto f = pl::pallas_call(
      [](pltpu::VmemRef<float> xv, pltpu::VmemRef<float> ov, pltpu::VmemRef<float> acc) {
        if (pl::program_id(0) == 0) acc = xv;
        acc = acc + 1.0f;
        if (pl::program_id(0) == pl::num_programs(0) - 1) ov = acc;
      },
      pl::out_shape<float>({8, 128}), pl::grid({3}),
      pl::in_specs(pl::BlockSpec({8, 128}, [](int) { return pl::idx(0, 0); })),
      pl::out_specs(pl::BlockSpec({8, 128}, [](int) { return pl::idx(0, 0); })),
      pl::scratch_shapes(pltpu::VMEM<float>({8, 128})), pltpu::TensorCoreMesh("core", 1));
  for (float v : f(x)) ASSERT_EQ(v, 4.5f);
}

TEST(PallasCall, ReductionOverTheLastArbitraryAxis) {
  Array<float> x({256, 512});
  for (int64_t i = 0; i < x.size(); ++i) x[i] = static_cast<float>(i % 31);
  auto f = pl::pallas_call(
      [](pltpu::VmemRef<float> xv, pltpu::VmemRef<float> ov) {
        if (pl::program_id(1) == 0) ov = jnp::zeros_like(ov);
        ov = ov + xv;
      },
      pl::out_shape<float>({256, 128}), pl::grid({2, 4}),
      pl::in_specs(pl::BlockSpec({128, 128}, [](int i, int j) { return pl::idx(i, j); })),
      pl::out_specs(pl::BlockSpec({128, 128}, [](int i, int) { return pl::idx(i, 0); })),
      pltpu::TensorCoreMesh("core", 2),
      pltpu::CompilerParams{.dimension_semantics = {PARALLEL, ARBITRARY}});
  const Array<float> o = f(x);
  for (int64_t r = 0; r < 256; ++r)
    for (int64_t c = 0; c < 128; ++c) {
      float want = 0;
      for (int64_t j = 0; j < 4; ++j) want += x(r, j * 128 + c);
      ASSERT_EQ(o(r, c), want);
    }
}

TEST(PallasCall, MatmulAccumulatesOverTheArbitraryAxis) {
  // A blocked matmul: out blocks (i, j) split over two cores, K walked in order, each step adding
  // its block product into the resident output block. Small integers keep every sum exact, so a
  // block read or accumulated at the wrong step shows as a wrong value.
  constexpr int64_t M = 64, N = 48, K = 96, bm = 32, bn = 16, bk = 32;
  Array<float> x({M, K}), y({K, N});
  for (int64_t i = 0; i < M; ++i)
    for (int64_t k = 0; k < K; ++k) x(i, k) = static_cast<float>((i * 7 + k * 3) % 11 - 5);
  for (int64_t k = 0; k < K; ++k)
    for (int64_t j = 0; j < N; ++j) y(k, j) = static_cast<float>((k * 5 + j) % 9 - 4);
  auto mm = pl::pallas_call(
      [](pltpu::VmemRef<float> xr, pltpu::VmemRef<float> yr, pltpu::VmemRef<float> zr) {
        if (pl::program_id(2) == 0) zr = jnp::zeros_like(zr);
        zr += jnp::dot(xr, yr);
      },
      pl::out_shape<float>({M, N}), pl::grid({M / bm, N / bn, K / bk}),
      pl::in_specs(pl::BlockSpec({bm, bk}, [](int i, int, int k) { return pl::idx(i, k); }),
                   pl::BlockSpec({bk, bn}, [](int, int j, int k) { return pl::idx(k, j); })),
      pl::out_specs(pl::BlockSpec({bm, bn}, [](int i, int j, int) { return pl::idx(i, j); })),
      pltpu::TensorCoreMesh("core", 2),
      pltpu::CompilerParams{.dimension_semantics = {PARALLEL, PARALLEL, ARBITRARY}});
  const Array<float> z = mm(x, y);
  for (int64_t i = 0; i < M; ++i)
    for (int64_t j = 0; j < N; ++j) {
      float want = 0;
      for (int64_t k = 0; k < K; ++k) want += x(i, k) * y(k, j);
      ASSERT_EQ(z(i, j), want) << i << " " << j;
    }
}

// `x_ref[...].astype(T)` of a ref of T converts nothing: a product takes the ref itself, read in
// place (include/tessera/dot.h, SameDtypeCast), so the kernel runs in a VMEM budget of its scratch
// alone; a real conversion (to bfloat16) needs a temporary and does not fit.
TEST(PallasCall, DotOperandsCastToTheirOwnDtypeAreReadInPlace) {
  constexpr int64_t kScratch = (64 * 128 + 128 * 128 + 64 * 128) * 4;
  auto run = [](bool to_bfloat16) {
    return pl::kernel(
        pl::out_type<float>({64, 128}), pltpu::TensorCoreMesh("core", 1),
        pl::scratch_types(pltpu::VMEM<float>({64, 128}), pltpu::VMEM<float>({128, 128}),
                          pltpu::VMEM<float>({64, 128})),
        pltpu::CompilerParams{.vmem_limit_bytes = kScratch})(
        [to_bfloat16](pltpu::HbmRef<float> o, pltpu::VmemRef<float> x, pltpu::VmemRef<float> y,
                      pltpu::VmemRef<float> acc) {
          x = (lax::broadcasted_iota<int32_t>({64, 128}, 0) % 5 - 2).astype<float>();
          y = (lax::broadcasted_iota<int32_t>({128, 128}, 1) % 3 - 1).astype<float>();
          if (to_bfloat16) {
            acc = jnp::dot<float>(x[pl::ellipsis].astype<bfloat16>(), y.astype<bfloat16>());
          } else {
            acc = jnp::dot<float>(x[pl::ellipsis].astype<float>(), y.astype<float>());
            acc += lax::dot_general<float>(x.astype<float>().astype<float>(),
                                           y[pl::ellipsis].astype<float>(), {{{1}, {0}}});
          }
          pltpu::sync_copy(acc, o);
        });
  };
  for (const bool checked : {false, true}) {
    std::optional<pltpu::ForceTpuInterpretMode> force;
    if (checked) force.emplace(pltpu::InterpretParams{});
    const Array<float> z = run(false)();
    for (int64_t i = 0; i < 64; ++i) {
      for (int64_t j = 0; j < 128; ++j) {
        const float want =
            2.0f * 128.0f * static_cast<float>(i % 5 - 2) * static_cast<float>(j % 3 - 1);
        ASSERT_EQ(z(i, j), want) << i << "," << j << " checked " << checked;
      }
    }
    auto e = tessera::testing::catch_error<Error>([&] { run(true)(); });
    ASSERT_TRUE(e) << "checked " << checked;
    EXPECT_EQ(e->kind(), ErrorKind::kCapacityExceeded) << e->what();
  }
}

TEST(PallasCall, ShowProgramIds) {
  // docs/pallas/grid_blockspec.md: x (8, 6), blocks (2, 3), grid (4, 2), each program writes
  // 10 * i + j into its block.
  auto f = pl::pallas_call(
      [](pltpu::VmemRef<int32_t> ov) {
        ov = static_cast<int32_t>(10 * pl::program_id(0) + pl::program_id(1));
      },
      pl::out_shape<int32_t>({8, 6}), pl::grid({4, 2}),
      pl::out_specs(pl::BlockSpec({2, 3}, [](int i, int j) { return pl::idx(i, j); })),
      pltpu::TensorCoreMesh("core", 2),
      pltpu::CompilerParams{.dimension_semantics = {PARALLEL, PARALLEL}});
  const Array<int32_t> o = f();
  const std::vector<int32_t> row3 = {10, 10, 10, 11, 11, 11};
  for (int c = 0; c < 6; ++c) EXPECT_EQ(o(3, c), row3[static_cast<size_t>(c)]);
  EXPECT_EQ(o(7, 5), 31);
}

TEST(PallasCallErrors, VmemBudgetNamesTheLargestConsumers) {
  const pl::BlockSpec big({512, 512}, [](int i) { return pl::idx(i, 0); });
  const int line = __LINE__ + 1;
  const auto g = pl::grid({2});
  auto f = pl::pallas_call([](pltpu::VmemRef<float>, pltpu::VmemRef<float>) {},
                           pl::out_shape<float>({1024, 512}), g, pl::in_specs(big),
                           pl::out_specs(big), pltpu::TensorCoreMesh("core", 1),
                           pltpu::CompilerParams{.vmem_limit_bytes = 2 << 20});
  const Array<float> x({1024, 512}, 1.0f);
  EXPECT_TESSERA_ERROR(f(x), UsageError, ErrorKind::kCapacityExceeded,
                       "input 0: window (512, 512) of (1024, 512) float32 x 2 buffers = 2097152",
                       line);
}

TEST(PallasCallErrors, SemanticsMustFitTheGrid) {
  const pl::BlockSpec spec({8, 128}, [](int i, int j) { return pl::idx(i, j); });
  auto body = [](pltpu::VmemRef<float>) {};
  auto f =
      pl::pallas_call(body, pl::out_shape<float>({16, 256}), pl::grid({2, 2}), pl::out_specs(spec),
                      pltpu::CompilerParams{.dimension_semantics = {ARBITRARY, PARALLEL}});
  auto e = tessera::testing::catch_error<UsageError>([&] { f(); });
  ASSERT_TRUE(e);
  EXPECT_NE(std::string(e->what()).find("PARALLEL axes must form a prefix"), std::string::npos);
  auto g =
      pl::pallas_call(body, pl::out_shape<float>({16, 256}), pl::grid({2, 2}), pl::out_specs(spec),
                      pltpu::CompilerParams{.dimension_semantics = {PARALLEL}});
  auto e2 = tessera::testing::catch_error<UsageError>([&] { g(); });
  ASSERT_TRUE(e2);
  EXPECT_NE(std::string(e2->what()).find("has 1 entries but the grid (2, 2) has rank 2"),
            std::string::npos);
}

}  // namespace
