// Checked mode (docs/checked-mode.md), memory and chip rules: uninitialised memory,
// bounds, chip capacity, the TPU's block-shape and matmul rules, output revisits, and
// pltpu::ForceTpuInterpretMode. One buggy kernel per detector and variant, each with a clean twin
// that passes with the right output. Assertions name the kind, the line, the core and the grid
// step.
#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <string>
#include <vector>

#include "support/checked_support.h"
#include "tessera/tessera.h"

namespace {
using namespace tessera;
using namespace tessera::checked_testing;

// ---- uninitialised memory ---------------------------------------------------------------------

Array<float> read_fresh_scratch(bool buggy, pltpu::InterpretParams p = checked()) {
  return pl::kernel(pl::out_type<float>({128}), pltpu::TensorCoreMesh("core", 1),
                    pl::scratch_types(pltpu::VMEM<float>({128}), pltpu::VMEM<float>({128})), p)(
      [buggy](pltpu::HbmRef<float> o, pltpu::VmemRef<float> acc, pltpu::VmemRef<float> ov) {
        if (!buggy) acc = jnp::zeros_like(acc);
        // clang-format off
        MARK_LINE; ov = acc + jnp::full_like(acc, 1.0f);
        // clang-format on
        pltpu::sync_copy(ov, o);
      })();
}

TEST(CheckedUninitialized, ReadOfFreshScratch) {
  const Array<float> o = read_fresh_scratch(false);
  for (int64_t i = 0; i < 128; ++i) ASSERT_EQ(o[i], 1.0f);
  expect_bug([] { read_fresh_scratch(true); },
             {ErrorKind::kUninitialized, kMarked, 0, {}, "VMEM scratch #0"});
  // Allowed: the read sees the poison (NaN), or zeros.
  pltpu::InterpretParams allow = checked();
  allow.allow_uninitialized_reads = true;
  EXPECT_TRUE(std::isnan(read_fresh_scratch(true, allow)[0]));
  allow.uninitialized_memory = pltpu::UninitializedMemory::zero;
  EXPECT_EQ(read_fresh_scratch(true, allow)[0], 1.0f);
}

// An accumulator output window not initialised at the first step of its visit.
Array<float> row_sums(const Array<float>& x, bool buggy) {
  // An operator assignment has no call site of its own: errors name its line, read back from
  // the line tables (src/core/symbolize.cc).
  return pl::pallas_call(
      [buggy](pltpu::VmemRef<const float> xv, pltpu::VmemRef<float> ov) {
        if (!buggy && pl::program_id(1) == 0) ov = jnp::zeros_like(ov);
        // clang-format off
        MARK_LINE; ov += xv;
        // clang-format on
      },
      pl::out_shape<float>({16, 128}), pl::grid({2, 3}),
      pl::in_specs(pl::BlockSpec({8, 128}, [](int i, int j) { return pl::idx(i, j); })),
      pl::out_specs(pl::BlockSpec({8, 128}, [](int i, int) { return pl::idx(i, 0); })),
      checked())(x);
}

TEST(CheckedUninitialized, AccumulatorNotInitialised) {
  const Array<float> x = ramp({16, 384});
  const Array<float> o = row_sums(x, false);
  for (int64_t r = 0; r < 16; ++r) {
    for (int64_t c = 0; c < 128; ++c) {
      ASSERT_EQ(o[r * 128 + c], x[r * 384 + c] + x[r * 384 + 128 + c] + x[r * 384 + 256 + c]);
    }
  }
  expect_bug([&] { row_sums(x, true); },
             {ErrorKind::kUninitialized, kMarked, 0, {0, 0}, "the VMEM window of output 0"});
}

// An output that the kernel leaves partly unwritten.
Array<float> half_written(bool buggy) {
  return pl::kernel(pl::out_type<float>({256}), pltpu::TensorCoreMesh("core", 1),
                    pl::scratch_types(pltpu::VMEM<float>({128})), checked(),
                    pl::name("half"))([buggy](pltpu::HbmRef<float> o, pltpu::VmemRef<float> v) {
    v = jnp::full_like(v, 2.0f);
    pltpu::sync_copy(v, o.at(pl::ds(0, 128)));
    if (!buggy) pltpu::sync_copy(v, o.at(pl::ds(128, 128)));
  })();
}

TEST(CheckedUninitialized, OutputNeverWritten) {
  const Array<float> o = half_written(false);
  for (int64_t i = 0; i < 256; ++i) ASSERT_EQ(o[i], 2.0f);
  auto e = tessera::testing::catch_error<KernelError>([] { half_written(true); });
  ASSERT_TRUE(e);
  maybe_print(*e);
  EXPECT_EQ(e->kind(), ErrorKind::kUninitialized);
  EXPECT_EQ(e->kernel_name(), "half");
  EXPECT_NE(std::string(e->what()).find("element (128,) was never written"), std::string::npos)
      << e->what();
  EXPECT_NE(std::string(e->what()).find("128 of its 256 elements"), std::string::npos) << e->what();
}

// A run_scoped buffer read before anything is written to it.
Array<float> scoped_read(bool buggy) {
  return pl::kernel(pl::out_type<float>({128}), pltpu::TensorCoreMesh("core", 1),
                    checked())([buggy](pltpu::HbmRef<float> o) {
    pl::run_scoped(
        [&](pltpu::VmemRef<float> t) {
          if (!buggy) t = jnp::full_like(t, 4.0f);
          pltpu::sync_copy(t, o);
        },
        pltpu::VMEM<float>({128}));
  })();
}

TEST(CheckedUninitialized, RunScopedBufferCopiedOutUnwritten) {
  const Array<float> o = scoped_read(false);
  for (int64_t i = 0; i < 128; ++i) ASSERT_EQ(o[i], 4.0f);
  // The copy itself moves the poison; the output check reports it.
  auto e = tessera::testing::catch_error<KernelError>([] { scoped_read(true); });
  ASSERT_TRUE(e);
  maybe_print(*e);
  EXPECT_EQ(e->kind(), ErrorKind::kUninitialized) << e->what();
  EXPECT_NE(std::string(e->what()).find("output 0"), std::string::npos) << e->what();
}

// A scalar read of unwritten SMEM through a ref of const elements.
Array<int32_t> smem_read(bool buggy) {
  return pl::kernel(pl::out_type<int32_t>({8}), pltpu::TensorCoreMesh("core", 1),
                    pl::scratch_types(pltpu::SMEM<int32_t>({8}), pltpu::VMEM<int32_t>({8})),
                    checked())(
      [buggy](pltpu::HbmRef<int32_t> o, pltpu::SmemRef<int32_t> s, pltpu::VmemRef<int32_t> v) {
        if (!buggy) s(3) = 11;
        const pltpu::SmemRef<const int32_t> cs = s;
        // clang-format off
    MARK_LINE; const int32_t got = cs(3);
        // clang-format on
        v = jnp::full_like(v, got);
        pltpu::sync_copy(v, o);
      })();
}

TEST(CheckedUninitialized, ScalarReadOfUnwrittenSmem) {
  const Array<int32_t> o = smem_read(false);
  for (int64_t i = 0; i < 8; ++i) ASSERT_EQ(o[i], 11);
  expect_bug([] { smem_read(true); },
             {ErrorKind::kUninitialized, kMarked, 0, {}, "SMEM scratch #0"});
}

// acc += dot(x, y) into an accumulator nobody initialised.
Array<float> dot_acc(bool buggy) {
  return pl::kernel(pl::out_type<float>({8, 128}), pltpu::TensorCoreMesh("core", 1),
                    pl::scratch_types(pltpu::VMEM<float>({8, 128}), pltpu::VMEM<float>({128, 128}),
                                      pltpu::VMEM<float>({8, 128})),
                    checked())([buggy](pltpu::HbmRef<float> o, pltpu::VmemRef<float> x,
                                       pltpu::VmemRef<float> y, pltpu::VmemRef<float> acc) {
    x = jnp::full_like(x, 1.0f);
    y = jnp::full_like(y, 0.5f);
    if (!buggy) acc = jnp::zeros_like(acc);
    // clang-format off
    MARK_LINE; acc += jnp::dot(x, y);
    // clang-format on
    pltpu::sync_copy(acc, o);
  })();
}

TEST(CheckedUninitialized, DotAccumulatorNotInitialised) {
  const Array<float> o = dot_acc(false);
  for (int64_t i = 0; i < o.size(); ++i) ASSERT_EQ(o[i], 64.0f);
  expect_bug([] { dot_acc(true); }, {ErrorKind::kUninitialized, kMarked, 0, {}, "dot"});
}

// Partial edge blocks: the padding is poison; computing on it is fine, and only valid elements
// reach the output. A kernel that reduces over the padding sees NaN.
TEST(CheckedUninitialized, PartialEdgeBlocksArePaddedWithPoison) {
  const Array<float> x = ramp({10, 128});
  const pl::BlockSpec spec({8, 128}, [](int i) { return pl::idx(i, 0); });
  auto add1 = pl::pallas_call(
      [](pltpu::VmemRef<const float> xv, pltpu::VmemRef<float> ov) { ov = xv + 1.0f; },
      pl::out_shape<float>({10, 128}), pl::grid({2}), pl::in_specs(spec), pl::out_specs(spec),
      checked());
  const Array<float> o = add1(x);
  for (int64_t i = 0; i < o.size(); ++i) ASSERT_EQ(o[i], x[i] + 1.0f);
  auto sums = pl::pallas_call(
      [](pltpu::VmemRef<const float> xv, pltpu::VmemRef<float> ov) { ov = jnp::sum(xv, 0); },
      pl::out_shape<float>({256}), pl::grid({2}), pl::in_specs(spec),
      pl::out_specs(pl::BlockSpec({128}, [](int i) { return pl::idx(i); })), checked());
  const Array<float> s = sums(x);
  EXPECT_FALSE(std::isnan(s[0]));
  EXPECT_TRUE(std::isnan(s[128]));  // the second block's rows 10..15 are padding
}

// ---- bounds -----------------------------------------------------------------------------------

Array<float> slice_oob(const Array<float>& x, bool buggy) {
  return pl::kernel(pl::out_type<float>({16}), pltpu::TensorCoreMesh("core", 1),
                    pl::scratch_types(pltpu::VMEM<float>({16})), checked())(
      [buggy](pltpu::HbmRef<const float> x_hbm, pltpu::HbmRef<float> o, pltpu::VmemRef<float> v) {
        // clang-format off
        MARK_LINE; pltpu::sync_copy(x_hbm.at(pl::ds(buggy ? 120 : 112, 16)), v);
        // clang-format on
        pltpu::sync_copy(v, o);
      })(x);
}

TEST(CheckedBounds, DmaSliceOutOfBounds) {
  const Array<float> x = ramp({128});
  const Array<float> o = slice_oob(x, false);
  for (int64_t i = 0; i < 16; ++i) ASSERT_EQ(o[i], x[112 + i]);
  expect_bug([&] { slice_oob(x, true); }, {ErrorKind::kOutOfBounds, kMarked, 0, {}, "120"});
}

TEST(CheckedBounds, BlockIndexOutOfBounds) {
  const Array<float> x = ramp({32, 128});
  const pl::BlockSpec spec({8, 128}, [](int i) { return pl::idx(i, 0); });
  auto run = [&](bool buggy) {
    const pl::BlockSpec in({8, 128}, [buggy](int i) { return pl::idx(buggy ? i + 1 : i, 0); });
    return pl::pallas_call(
        [](pltpu::VmemRef<const float> xv, pltpu::VmemRef<float> ov) { ov = xv; },
        pl::out_shape<float>({32, 128}), pl::grid({4}), pl::in_specs(in), pl::out_specs(spec),
        checked())(x);
  };
  const Array<float> o = run(false);
  for (int64_t i = 0; i < o.size(); ++i) ASSERT_EQ(o[i], x[i]);
  auto e = tessera::testing::catch_error<KernelError>([&] { run(true); });
  ASSERT_TRUE(e);
  maybe_print(*e);
  EXPECT_EQ(e->kind(), ErrorKind::kOutOfBounds) << e->what();
  EXPECT_EQ(e->grid_step(), (std::vector<int64_t>{3})) << e->what();
}

// ---- capacity and TPU rules -------------------------------------------------------------------

TEST(CheckedCapacity, ScratchOverChipVmem) {
  auto run = [](const char* chip) {
    return pl::kernel(
        pl::out_type<float>({128}), pltpu::TensorCoreMesh("core", 1),
        pl::scratch_types(pltpu::VMEM<float>({20, 1024, 1024}), pltpu::VMEM<float>({128})),
        pltpu::CompilerParams{.vmem_limit_bytes = int64_t{96} << 20},
        on_chip(chip))([](pltpu::HbmRef<float> o, pltpu::VmemRef<float>, pltpu::VmemRef<float> v) {
      v = jnp::full_like(v, 1.0f);
      pltpu::sync_copy(v, o);
    })();
  };
  EXPECT_EQ(run("v5e")[0], 1.0f);  // 128 MiB of VMEM
  auto e = tessera::testing::catch_error<UsageError>([&] { run("v4"); });
  ASSERT_TRUE(e);
  maybe_print(*e);
  EXPECT_EQ(e->kind(), ErrorKind::kCapacityExceeded) << e->what();
  EXPECT_NE(std::string(e->what()).find("#0 VMEM<float32>(20, 1024, 1024)"), std::string::npos)
      << e->what();
  EXPECT_NE(std::string(e->what()).find("v4"), std::string::npos) << e->what();
}

TEST(CheckedCapacity, PipelineWindowsOverChipVmem) {
  const Array<float> x({4096, 1024}, 1.0f);
  auto run = [&](const char* chip) {
    const pl::BlockSpec spec({2048, 1024}, [](int i) { return pl::idx(i, 0); });
    return pl::pallas_call(
        [](pltpu::VmemRef<const float> xv, pltpu::VmemRef<float> ov) { ov = xv + 1.0f; },
        pl::out_shape<float>({4096, 1024}), pl::grid({2}), pl::in_specs(spec), pl::out_specs(spec),
        pltpu::TensorCoreMesh("core", 1),
        pltpu::CompilerParams{.vmem_limit_bytes = int64_t{64} << 20}, on_chip(chip))(x);
  };
  EXPECT_EQ(run("v5e")[5], 2.0f);
  auto e = tessera::testing::catch_error<KernelError>([&] { run("v4"); });
  ASSERT_TRUE(e);
  maybe_print(*e);
  EXPECT_EQ(e->kind(), ErrorKind::kCapacityExceeded) << e->what();
  EXPECT_NE(std::string(e->what()).find("pipeline window"), std::string::npos) << e->what();
}

TEST(CheckedCapacity, MeshLargerThanChip) {
  auto run = [](int cores) {
    return pl::kernel(pl::out_type<float>({128}), pltpu::TensorCoreMesh("core", cores),
                      pl::scratch_types(pltpu::VMEM<float>({128})),
                      on_chip("v5e"))([](pltpu::HbmRef<float> o, pltpu::VmemRef<float> v) {
      v = jnp::full_like(v, 1.0f);
      if (lax::axis_index("core") == 0) pltpu::sync_copy(v, o);
    })();
  };
  EXPECT_EQ(run(1)[0], 1.0f);
  auto e = tessera::testing::catch_error<UsageError>([&] { run(2); });
  ASSERT_TRUE(e);
  maybe_print(*e);
  EXPECT_EQ(e->kind(), ErrorKind::kUnsupported) << e->what();
  EXPECT_NE(std::string(e->what()).find("v5e chip has 1 TensorCore"), std::string::npos)
      << e->what();
}

Array<float> blocked_copy(const Array<float>& x, int64_t rows, const char* chip = "v5e") {
  const pl::BlockSpec spec({rows, 128}, [](int i) { return pl::idx(i, 0); });
  return pl::pallas_call([](pltpu::VmemRef<const float> xv, pltpu::VmemRef<float> ov) { ov = xv; },
                         pl::out_shape<float>(x.shape()), pl::grid({x.shape()[0] / rows}),
                         pl::in_specs(spec), pl::out_specs(spec), pltpu::TensorCoreMesh("core", 1),
                         on_chip(chip))(x);
}

TEST(CheckedRules, BlockShapeLastTwoDims) {
  const Array<float> x = ramp({16, 128});
  const Array<float> o = blocked_copy(x, 8);
  for (int64_t i = 0; i < o.size(); ++i) ASSERT_EQ(o[i], x[i]);
  // Without a chip, blocks of any shape run (this CPU has no tiling rule).
  const Array<float> o4 = blocked_copy(x, 4, "");
  for (int64_t i = 0; i < o4.size(); ++i) ASSERT_EQ(o4[i], x[i]);
  auto e = tessera::testing::catch_error<KernelError>([&] { blocked_copy(x, 4); });
  ASSERT_TRUE(e);
  maybe_print(*e);
  EXPECT_EQ(e->kind(), ErrorKind::kBlockShape) << e->what();
  EXPECT_NE(std::string(e->what()).find("divisible by 8 and 128"), std::string::npos) << e->what();
  EXPECT_NE(std::string(e->what()).find("second-to-last dimension 4"), std::string::npos)
      << e->what();
}

TEST(CheckedRules, BlockShapeRankOne) {
  auto run = [](int64_t n, int64_t b) {
    Array<float> x = ramp({n});
    const pl::BlockSpec spec({b}, [](int i) { return pl::idx(i); });
    return pl::pallas_call(
        [](pltpu::VmemRef<const float> xv, pltpu::VmemRef<float> ov) { ov = xv; },
        pl::out_shape<float>({n}), pl::grid({n / b}), pl::in_specs(spec), pl::out_specs(spec),
        pltpu::TensorCoreMesh("core", 1), on_chip("v6e"))(x);
  };
  EXPECT_EQ(run(1024, 128)[1000], 1000.0f);  // a power of 2 >= 128
  EXPECT_EQ(run(4096, 2048)[4000], 4000.0f);
  auto e = tessera::testing::catch_error<KernelError>([&] { run(128, 64); });
  ASSERT_TRUE(e);
  maybe_print(*e);
  EXPECT_EQ(e->kind(), ErrorKind::kBlockShape) << e->what();
  EXPECT_NE(std::string(e->what()).find("rank-1 block (64,)"), std::string::npos) << e->what();
}

TEST(CheckedRules, MatmulDtypePerGeneration) {
  auto run = [](const char* chip) {
    return pl::kernel(
        pl::out_type<float>({8, 128}), pltpu::TensorCoreMesh("core", 1),
        pl::scratch_types(pltpu::VMEM<bfloat16>({8, 128}), pltpu::VMEM<bfloat16>({128, 128}),
                          pltpu::VMEM<float>({8, 128})),
        on_chip(chip))([](pltpu::HbmRef<float> o, pltpu::VmemRef<bfloat16> x,
                          pltpu::VmemRef<bfloat16> y, pltpu::VmemRef<float> acc) {
      x = jnp::full_like(x, bfloat16(1.0f));
      y = jnp::full_like(y, bfloat16(1.0f));
      // clang-format off
      MARK_LINE; acc = jnp::dot<float>(x, y);
      // clang-format on
      pltpu::sync_copy(acc, o);
    })();
  };
  EXPECT_EQ(run("v5e")[0], 128.0f);
  expect_bug([&] { run("v3"); }, {ErrorKind::kUnsupported, kMarked, 0, {}, "v3"});
}

// float16 operands: computed without a chip (widened to float32), refused by every chip's MXU.
TEST(CheckedMemory, Float16MatmulRunsWithoutAChipAndNoChipTakesIt) {
  auto run = [](const char* chip) {
    return pl::kernel(
        pl::out_type<float>({8, 128}), pltpu::TensorCoreMesh("core", 1),
        pl::scratch_types(pltpu::VMEM<float16>({8, 128}), pltpu::VMEM<float16>({128, 128}),
                          pltpu::VMEM<float>({8, 128})),
        on_chip(chip))([](pltpu::HbmRef<float> o, pltpu::VmemRef<float16> x,
                          pltpu::VmemRef<float16> y, pltpu::VmemRef<float> acc) {
      x = jnp::full_like(x, float16(1.0f));
      y = jnp::full_like(y, float16(0.5f));
      // clang-format off
      MARK_LINE; acc = jnp::dot<float>(x, y);
      // clang-format on
      pltpu::sync_copy(acc, o);
    })();
  };
  EXPECT_EQ(run("")[0], 64.0f);
  for (const char* chip : {"v4", "v5e", "v6e"}) {
    expect_bug([&] { run(chip); }, {ErrorKind::kUnsupported, kMarked, 0, {}, chip});
  }
}

// ---- output revisits --------------------------------------------------------------------------

Array<float> revisit(const Array<float>& x, bool buggy) {
  // grid (2, 2); output block i (buggy: j) — with j the inner axis, block j is revisited at
  // step (1, 0) after being written back at (0, 0).
  return pl::pallas_call(
      [](pltpu::VmemRef<const float> xv, pltpu::VmemRef<float> ov) { ov = xv; },
      pl::out_shape<float>({16, 128}), pl::grid({2, 2}),
      pl::in_specs(pl::BlockSpec({8, 128}, [](int i, int) { return pl::idx(i, 0); })),
      pl::out_specs(
          pl::BlockSpec({8, 128}, [buggy](int i, int j) { return pl::idx(buggy ? j : i, 0); })),
      checked())(x);
}

TEST(CheckedRevisit, NonConsecutiveOutputRevisit) {
  const Array<float> x = ramp({16, 128});
  const Array<float> o = revisit(x, false);
  for (int64_t i = 0; i < o.size(); ++i) ASSERT_EQ(o[i], x[i]);
  auto e = tessera::testing::catch_error<KernelError>([&] { revisit(x, true); });
  ASSERT_TRUE(e);
  maybe_print(*e);
  EXPECT_EQ(e->kind(), ErrorKind::kRevisit) << e->what();
  EXPECT_EQ(e->grid_step(), (std::vector<int64_t>{1, 0})) << e->what();
}

// pltpu::ForceTpuInterpretMode runs a kernel that names no InterpretParams checked.
TEST(CheckedForce, ForceTpuInterpretModeChecksUnchangedKernels) {
  auto k = pl::kernel(pl::out_type<float>({128}), pltpu::TensorCoreMesh("core", 1),
                      pl::scratch_types(pltpu::VMEM<float>({128}), pltpu::VMEM<float>({128})))(
      [](pltpu::HbmRef<float> o, pltpu::VmemRef<float> acc, pltpu::VmemRef<float> ov) {
        // clang-format off
        MARK_LINE; ov = acc + jnp::full_like(acc, 1.0f);
        // clang-format on
        pltpu::sync_copy(ov, o);
      });
  static_cast<void>(k());                               // native: garbage in, no error
  const pltpu::ForceTpuInterpretMode force(checked());  // with definedness tracked
  expect_bug([&] { k(); }, {ErrorKind::kUninitialized, kMarked, 0, {}, "VMEM scratch #0"});
}

}  // namespace
