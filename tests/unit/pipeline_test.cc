// pltpu::emit_pipeline in the native engine: the pipelined add tutorial's kernel, reductions over
// an ARBITRARY axis, partial edge blocks, squeezed axes, copy-in elision, revisits, nesting, and
// the errors.
#include <gtest/gtest.h>

#include <vector>

#include "support/expect_error.h"
#include "tessera/tessera.h"

namespace {
using namespace tessera;
using pltpu::ARBITRARY;
using pltpu::PARALLEL;

Array<float> ramp(Shape s, float scale) {
  Array<float> a(std::move(s));
  for (int64_t i = 0; i < a.size(); ++i) a[i] = static_cast<float>(i % 1000) * scale;
  return a;
}

// The pipelined add: o = x + y in (128, 128) blocks, the first grid axis split over the cores.
Array<float> pipelined_add(const Array<float>& x, const Array<float>& y, int cores) {
  const int64_t m = x.shape()[0];
  const int64_t n = x.shape()[1];
  auto k = pl::kernel(pl::out_type<float>({m, n}), pltpu::TensorCoreMesh("core", cores))(
      [m, n](pltpu::HbmRef<const float> x_hbm, pltpu::HbmRef<const float> y_hbm,
             pltpu::HbmRef<float> o_hbm) {
        const pl::BlockSpec spec({128, 128}, [](int i, int j) { return pl::idx(i, j); });
        pltpu::emit_pipeline([](pltpu::VmemRef<float> xv, pltpu::VmemRef<float> yv,
                                pltpu::VmemRef<float> ov) { ov = xv + yv; },
                             pltpu::grid({(m + 127) / 128, (n + 127) / 128}),
                             pl::in_specs(spec, spec), pl::out_specs(spec),
                             pltpu::core_axis_name("core"),
                             pltpu::dimension_semantics(PARALLEL, ARBITRARY))(x_hbm, y_hbm, o_hbm);
      });
  return k(x, y);
}

TEST(EmitPipeline, SeedsPipelinedAdd) {
  const Array<float> x({256, 256}, 2.0f);
  const Array<float> y({256, 256}, 3.0f);
  for (int cores : {1, 2, 3}) {
    const Array<float> o = pipelined_add(x, y, cores);
    for (float v : o) ASSERT_EQ(v, 5.0f) << cores;
  }
  const Array<float> a = ramp({384, 256}, 0.5f);
  const Array<float> b = ramp({384, 256}, -0.25f);
  const Array<float> o = pipelined_add(a, b, 2);
  for (int64_t i = 0; i < o.size(); ++i) ASSERT_EQ(o[i], a[i] + b[i]) << i;
}

TEST(EmitPipeline, PartialEdgeBlocksMoveOnlyTheValidPart) {
  const Array<float> a = ramp({300, 200}, 1.0f);
  const Array<float> b = ramp({300, 200}, 2.0f);
  const Array<float> o = pipelined_add(a, b, 2);
  for (int64_t i = 0; i < o.size(); ++i) ASSERT_EQ(o[i], a[i] + b[i]) << i;
}

TEST(EmitPipeline, ReductionAccumulatesAcrossConsecutiveSteps) {
  // o[i] = sum over j of x[i, j-block]: the output block index ignores j, so the window stays
  // in VMEM across the j steps and is written back once per i.
  const Array<float> x = ramp({256, 512}, 1.0f);
  auto k = pl::kernel(pl::out_type<float>({256, 128}), pltpu::TensorCoreMesh("core", 2))(
      [](pltpu::HbmRef<const float> x_hbm, pltpu::HbmRef<float> o_hbm) {
        pltpu::emit_pipeline(
            [](pltpu::VmemRef<float> xv, pltpu::VmemRef<float> ov) {
              if (pl::program_id(1) == 0) ov = jnp::zeros_like(ov);
              ov = ov + xv;
            },
            pltpu::grid({2, 4}),
            pl::in_specs(pl::BlockSpec({128, 128}, [](int i, int j) { return pl::idx(i, j); })),
            pl::out_specs(pl::BlockSpec({128, 128}, [](int i, int) { return pl::idx(i, 0); })),
            pltpu::core_axis_name("core"),
            pltpu::dimension_semantics(PARALLEL, ARBITRARY))(x_hbm, o_hbm);
      });
  const Array<float> o = k(x);
  for (int64_t r = 0; r < 256; ++r) {
    for (int64_t c = 0; c < 128; ++c) {
      float want = 0;
      for (int64_t j = 0; j < 4; ++j) want += x(r, j * 128 + c);
      ASSERT_EQ(o(r, c), want) << r << "," << c;
    }
  }
}

TEST(EmitPipeline, SqueezedAxesAreDroppedFromTheWindow) {
  Array<float> x({4, 256});
  for (int64_t i = 0; i < x.size(); ++i) x[i] = static_cast<float>(i);
  auto k = pl::kernel(pl::out_type<float>({4, 256}), pltpu::TensorCoreMesh("core", 1))(
      [](pltpu::HbmRef<const float> x_hbm, pltpu::HbmRef<float> o_hbm) {
        const pl::BlockSpec row({pl::squeezed, 128}, [](int i, int j) { return pl::idx(i, j); });
        pltpu::emit_pipeline(
            [](pltpu::VmemRef<float> xv, pltpu::VmemRef<float> ov) {
              EXPECT_EQ(xv.shape(), Shape({128}));
              ov = xv * 2.0f + float(pl::program_id(0));
            },
            pltpu::grid({4, 2}), pl::in_specs(row), pl::out_specs(row))(x_hbm, o_hbm);
      });
  const Array<float> o = k(x);
  for (int64_t r = 0; r < 4; ++r)
    for (int64_t c = 0; c < 256; ++c) ASSERT_EQ(o(r, c), x(r, c) * 2.0f + float(r));
}

TEST(EmitPipeline, UnchangedInputBlockIsNotCopiedAgain) {
  // The input's block never changes, so it is copied in once and the body's writes to the
  // window persist from step to step (Pallas' copy elision).
  const Array<float> x({8, 128}, 1.0f);
  auto k = pl::kernel(pl::out_type<float>({32, 128}),
                      pltpu::TensorCoreMesh("core", 1))([](pltpu::HbmRef<const float> x_hbm,
                                                           pltpu::HbmRef<float> o_hbm) {
    pltpu::emit_pipeline(
        [](pltpu::VmemRef<float> xv, pltpu::VmemRef<float> ov) {
          xv = xv + 1.0f;
          ov = xv;
        },
        pltpu::grid({4}), pl::in_specs(pl::BlockSpec({8, 128}, [](int) { return pl::idx(0, 0); })),
        pl::out_specs(pl::BlockSpec({8, 128}, [](int i) { return pl::idx(i, 0); })))(x_hbm, o_hbm);
  });
  const Array<float> o = k(x);
  for (int64_t i = 0; i < 4; ++i) EXPECT_EQ(o(i * 8, 0), 2.0f + static_cast<float>(i)) << i;
}

TEST(EmitPipeline, OutputsOnlyAndWholeArraySpecs) {
  auto k = pl::kernel(pl::out_type<float>({8, 512}),
                      pltpu::TensorCoreMesh("core", 1))([](pltpu::HbmRef<float> o_hbm) {
    pltpu::emit_pipeline(
        [](pltpu::VmemRef<float> ov) { ov = jnp::full_like(ov, 42.0f); }, pltpu::grid({4}),
        pl::out_specs(pl::BlockSpec({8, 128}, [](int i) { return pl::idx(0, i); })))(o_hbm);
  });
  for (float v : k()) ASSERT_EQ(v, 42.0f);
  // A default BlockSpec is the whole array, copied in once and written back once.
  auto w = pl::kernel(pl::out_type<float>({16}), pltpu::TensorCoreMesh("core", 1))(
      [](pltpu::HbmRef<const float> x_hbm, pltpu::HbmRef<float> o_hbm) {
        pltpu::emit_pipeline(
            [](pltpu::VmemRef<float> xv, pltpu::VmemRef<float> ov) {
              if (pl::program_id(0) == 0) ov = jnp::zeros_like(ov);
              ov = ov + xv;
            },
            pltpu::grid({3}), pl::in_specs(pl::BlockSpec()),
            pl::out_specs(pl::BlockSpec()))(x_hbm, o_hbm);
      });
  const Array<float> x({16}, 2.0f);
  for (float v : w(x)) ASSERT_EQ(v, 6.0f);
}

TEST(EmitPipeline, NestedPipelinesSeeTheirOwnProgramIds) {
  auto k = pl::kernel(pl::out_type<int32_t>({2, 3, 128}),
                      pltpu::TensorCoreMesh("core", 1))([](pltpu::HbmRef<int32_t> o_hbm) {
    pltpu::emit_pipeline(
        [&]() {
          const int64_t outer = pl::program_id(0);
          pltpu::emit_pipeline(
              [outer](pltpu::VmemRef<int32_t> ov) {
                EXPECT_EQ(pl::num_programs(0), 3);
                ov = jnp::full_like(ov, static_cast<int32_t>(10 * outer + pl::program_id(0)));
              },
              pltpu::grid({3}),
              pl::out_specs(pl::BlockSpec({pl::squeezed, pl::squeezed, 128},
                                          [outer](int j) { return pl::idx(outer, j, 0); })))(o_hbm);
          EXPECT_EQ(pl::program_id(0), outer);  // restored after the inner pipeline
          EXPECT_EQ(pl::num_programs(0), 2);
        },
        pltpu::grid({2}))();
  });
  const Array<int32_t> o = k();
  for (int i = 0; i < 2; ++i)
    for (int j = 0; j < 3; ++j) EXPECT_EQ(o(i, j, 77), 10 * i + j);
}

// Each thread keeps a pipeline run's vectors between runs, one set per nesting level
// (src/runtime/pipeline_buffers.h): runs of other operand counts and grids, an inner pipeline
// that fails, and the runs after it all see only their own operands and steps.
TEST(EmitPipeline, RunsReuseTheirThreadsBuffersAcrossCallsNestingAndFailures) {
  const Array<float> a = ramp({256, 384}, 0.5f);
  const Array<float> b = ramp({256, 384}, -0.25f);
  auto nested = [](bool fail) {
    return pl::kernel(pl::out_type<int32_t>({4, 256}),
                      pltpu::TensorCoreMesh("core", 2))([fail](pltpu::HbmRef<int32_t> o_hbm) {
      pltpu::emit_pipeline(
          [&]() {
            const int64_t outer = pl::program_id(0);
            const int64_t blocks = fail && outer == 1 ? 3 : 2;  // block 2 is past the array
            pltpu::emit_pipeline(
                [outer](pltpu::VmemRef<int32_t> ov) {
                  ov = jnp::full_like(ov, static_cast<int32_t>(10 * outer + pl::program_id(0)));
                },
                pltpu::grid({blocks}),
                pl::out_specs(pl::BlockSpec({pl::squeezed, 128},
                                            [outer](int j) { return pl::idx(outer, j); })))(o_hbm);
          },
          pltpu::grid({4}), pltpu::core_axis_name("core"), pltpu::dimension_semantics(PARALLEL))();
    });
  };
  // Two operands on a (4,) grid, the input's blocks in reverse order.
  auto reversed = pl::kernel(pl::out_type<float>({512}), pltpu::TensorCoreMesh("core", 2))(
      [](pltpu::HbmRef<const float> x_hbm, pltpu::HbmRef<float> o_hbm) {
        pltpu::emit_pipeline(
            [](pltpu::VmemRef<const float> xv, pltpu::VmemRef<float> ov) { ov = xv * 2.0f; },
            pltpu::grid({4}),
            pl::in_specs(pl::BlockSpec({128}, [](int i) { return pl::idx(3 - i); })),
            pl::out_specs(pl::BlockSpec({128}, [](int i) { return pl::idx(i); })),
            pltpu::core_axis_name("core"), pltpu::dimension_semantics(PARALLEL))(x_hbm, o_hbm);
      });
  const Array<float> r = ramp({512}, 1.0f);
  for (int round = 0; round < 3; ++round) {
    const Array<float> o = pipelined_add(a, b, 2);  // three operands, a (2, 3) grid
    for (int64_t i = 0; i < o.size(); ++i) ASSERT_EQ(o[i], a[i] + b[i]) << round << " " << i;
    const Array<float> ro = reversed(r);
    for (int64_t i = 0; i < 512; ++i) {
      ASSERT_EQ(ro[i], 2.0f * r[(3 - i / 128) * 128 + i % 128]) << round << " " << i;
    }
    const Array<int32_t> n = nested(false)();  // one operand, nested two deep
    for (int i = 0; i < 4; ++i) {
      for (int j = 0; j < 256; ++j) ASSERT_EQ(n(i, j), 10 * i + j / 128) << round;
    }
    auto err = tessera::testing::catch_error<KernelError>([&] { nested(true)(); });
    ASSERT_TRUE(err) << round;
    EXPECT_EQ(err->kind(), ErrorKind::kOutOfBounds) << err->what();
  }
}

TEST(EmitPipelineErrors, RevisitingAnOutputBlockIsAnError) {
  int line = 0;
  auto k = pl::kernel(pl::out_type<float>({16, 256}),
                      pltpu::TensorCoreMesh("core", 1))([&](pltpu::HbmRef<float> o_hbm) {
    // A pipeline's location in errors is where its pltpu::grid is made.
    line = __LINE__ + 1;
    const auto grid = pltpu::grid({4, 4});
    pltpu::emit_pipeline([](pltpu::VmemRef<float> ov) { ov = jnp::zeros_like(ov); }, grid,
                         pl::out_specs(pl::BlockSpec(
                             {8, 128}, [](int i, int j) { return pl::idx(j / 2, i % 2); })))(o_hbm);
  });
  auto err = tessera::testing::catch_error<KernelError>([&] { k(); });
  ASSERT_TRUE(err);
  EXPECT_EQ(err->kind(), ErrorKind::kRevisit);
  EXPECT_EQ(static_cast<int>(err->where().line()), line);
  EXPECT_NE(std::string(err->what()).find("revisits block (0, 0) at grid step (2, 0)"),
            std::string::npos)
      << err->what();
}

TEST(EmitPipelineErrors, BadGridsSpecsAndCalls) {
  // One core, except where the split itself is tested: pipelines without core_axis_name on
  // several cores would all write the same output blocks.
  auto run = [](auto&& fn, int cores = 1) {
    auto k = pl::kernel(pl::out_type<float>({256, 256}), pltpu::TensorCoreMesh("core", cores))(
        [&](pltpu::HbmRef<float> o) { fn(o); });
    k();
  };
  const pl::BlockSpec spec({128, 128}, [](int i, int j) { return pl::idx(i, j); });
  auto body = [](pltpu::VmemRef<float> ov) { ov = 1.0f; };
  auto e1 = tessera::testing::catch_error<KernelError>([&] {
    run([&](pltpu::HbmRef<float> o) {
      pltpu::emit_pipeline(body, pltpu::grid({0, 2}), pl::out_specs(spec))(o);
    });
  });
  ASSERT_TRUE(e1);
  EXPECT_EQ(e1->kind(), ErrorKind::kInvalidArgument);
  EXPECT_NE(std::string(e1->what()).find("every grid extent must be at least 1"),
            std::string::npos);
  auto e2 = tessera::testing::catch_error<KernelError>([&] {
    run(
        [&](pltpu::HbmRef<float> o) {
          pltpu::emit_pipeline(body, pltpu::grid({2, 2}), pl::out_specs(spec),
                               pltpu::core_axis_name("core"),
                               pltpu::dimension_semantics(ARBITRARY, ARBITRARY))(o);
        },
        2);
  });
  ASSERT_TRUE(e2);
  EXPECT_NE(std::string(e2->what()).find("has no PARALLEL axis"), std::string::npos);
  auto e3 = tessera::testing::catch_error<KernelError>([&] {
    run([&](pltpu::HbmRef<float> o) {
      pltpu::emit_pipeline(body, pltpu::grid({3, 2}), pl::out_specs(spec))(o);
    });
  });
  ASSERT_TRUE(e3);
  EXPECT_EQ(e3->kind(), ErrorKind::kOutOfBounds);
  const pl::BlockSpec one_axis({128}, [](int i) { return pl::idx(i); });
  auto e4 = tessera::testing::catch_error<KernelError>([&] {
    run([&](pltpu::HbmRef<float> o) {
      pltpu::emit_pipeline(body, pltpu::grid({2}), pl::out_specs(one_axis))(o);
    });
  });
  ASSERT_TRUE(e4);
  EXPECT_EQ(e4->kind(), ErrorKind::kShapeMismatch);
  const int line = __LINE__ + 1;
  EXPECT_TESSERA_ERROR(pl::program_id(0), UsageError, ErrorKind::kOutsideKernel, "outside a grid",
                       line);
}

}  // namespace

namespace {
TEST(EmitPipelineErrors, WindowsCountAgainstTheVmemBudget) {
  using namespace tessera;
  // A (128, 128) float window is 64 KiB, double-buffered 128 KiB; the kernel allows 96 KiB.
  auto k = pl::kernel(pl::out_type<float>({256, 256}), pltpu::TensorCoreMesh("core", 1),
                      pltpu::CompilerParams{.vmem_limit_bytes = 96 << 10})(
      [](pltpu::HbmRef<const float> x, pltpu::HbmRef<float> o) {
        const pl::BlockSpec spec({128, 128}, [](int i, int j) { return pl::idx(i, j); });
        pltpu::emit_pipeline([](pltpu::VmemRef<float> xv, pltpu::VmemRef<float> ov) { ov = xv; },
                             pltpu::grid({2, 2}), pl::in_specs(spec), pl::out_specs(spec))(x, o);
      });
  const Array<float> x({256, 256}, 1.0f);
  auto err = tessera::testing::catch_error<KernelError>([&] { k(x); });
  ASSERT_TRUE(err);
  EXPECT_EQ(err->kind(), ErrorKind::kCapacityExceeded);
  EXPECT_NE(std::string(err->what()).find("a pipeline window needs 131072 bytes of VMEM"),
            std::string::npos)
      << err->what();
  EXPECT_NE(
      std::string(err->what()).find("only 98304 of the 98304 bytes of the kernel's VMEM budget"),
      std::string::npos)
      << err->what();
}
}  // namespace

namespace {
TEST(EmitPipelineErrors, BufferCountsSetTheWindowsVmem) {
  using namespace tessera;
  // Two operands of (128, 128) floats: 256 KiB double-buffered, 128 KiB with pl::Buffered(1).
  auto run = [](int buffers) {
    auto k = pl::kernel(pl::out_type<float>({256, 256}), pltpu::TensorCoreMesh("core", 1),
                        pltpu::CompilerParams{.vmem_limit_bytes = 200 << 10})(
        [buffers](pltpu::HbmRef<const float> x, pltpu::HbmRef<float> o) {
          const pl::BlockSpec spec(
              {128, 128}, [](int i, int j) { return pl::idx(i, j); }, pl::Buffered(buffers));
          pltpu::emit_pipeline([](pltpu::VmemRef<float> xv, pltpu::VmemRef<float> ov) { ov = xv; },
                               pltpu::grid({2, 2}), pl::in_specs(spec), pl::out_specs(spec))(x, o);
        });
    const Array<float> x({256, 256}, 3.0f);
    return k(x);
  };
  const Array<float> o = run(1);
  for (float v : o) ASSERT_EQ(v, 3.0f);
  auto err = tessera::testing::catch_error<KernelError>([&] { run(2); });
  ASSERT_TRUE(err);
  EXPECT_EQ(err->kind(), ErrorKind::kCapacityExceeded) << err->what();
  auto bad = tessera::testing::catch_error<KernelError>([&] { run(3); });
  ASSERT_TRUE(bad);
  EXPECT_EQ(bad->kind(), ErrorKind::kInvalidArgument) << bad->what();
  EXPECT_NE(std::string(bad->what()).find("outputs 1 or 2"), std::string::npos) << bad->what();
}

TEST(EmitPipelineWindows, AliasedOperandsKeepTheirCopies) {
  using namespace tessera;
  // One HBM buffer as both input and output: the body zeroes its output window before reading
  // its input window. With the copies Pallas makes, the input window still holds the block; had
  // the engine read and written the block in place, the zeroing would wipe the input.
  auto k = pl::kernel(pl::out_type<float>({4, 128}), pltpu::TensorCoreMesh("core", 1))(
      [](pltpu::HbmRef<const float> in, pltpu::HbmRef<float> out) {
        pltpu::sync_copy(in, out);
        const pl::BlockSpec row({1, 128}, [](int j) { return pl::idx(j, 0); });
        pltpu::emit_pipeline(
            [](pltpu::VmemRef<const float> x, pltpu::VmemRef<float> o) {
              o = jnp::zeros_like(o);
              o = o + x * 2.0f;
            },
            pltpu::grid({4}), pl::in_specs(row), pl::out_specs(row))(out, out);
      });
  Array<float> buf({4, 128});
  for (int64_t i = 0; i < buf.size(); ++i) buf[i] = static_cast<float>(i / 128 + 1);
  const Array<float> o = k(buf);
  for (int64_t i = 0; i < o.size(); ++i) ASSERT_EQ(o[i], 2.0f * buf[i]) << i;
}
}  // namespace

namespace {
using namespace tessera;

// Pallas' test_block_gather: the input's index map reads a block list (here captured by the
// lambda; the kernel's SMEM in Pallas), with plain, deeper and lookahead buffering alike.
TEST(EmitPipelineBuffering, BlockGatherWithAnyBuffering) {
  const std::vector<int> order{0, 0, 2, 3, 3, 3, 1, 7, 6, 6};
  Array<float> x({64, 128});
  for (int64_t i = 0; i < x.size(); ++i) x[i] = static_cast<float>(i);
  for (const pl::Buffered mode :
       {pl::Buffered{2, false}, pl::Buffered{4, false}, pl::Buffered{4, true}}) {
    auto k = pl::kernel(pl::out_type<float>({80, 128}), pltpu::TensorCoreMesh("core", 1))(
        [&order, mode](pltpu::HbmRef<const float> xh, pltpu::HbmRef<float> oh) {
          const pl::BlockSpec in(
              {8, 128}, [&order](int i) { return pl::idx(order[i], 0); }, mode);
          const pl::BlockSpec out({8, 128}, [](int i) { return pl::idx(i, 0); });
          pltpu::emit_pipeline(
              [](pltpu::VmemRef<const float> xv, pltpu::VmemRef<float> ov) { ov = xv; },
              pltpu::grid({10}), pl::in_specs(in), pl::out_specs(out))(xh, oh);
        });
    const Array<float> o = k(x);
    for (int b = 0; b < 10; ++b) {
      for (int64_t r = 0; r < 8; ++r) {
        for (int64_t c = 0; c < 128; ++c) {
          ASSERT_EQ(o(b * 8 + r, c), x(order[static_cast<size_t>(b)] * 8 + r, c))
              << mode.buffer_count << " " << mode.use_lookahead << " block " << b;
        }
      }
    }
  }
}

// Pallas' test_block_scatter: consecutive steps on one output block keep its last write;
// blocks never visited keep what the kernel put there before the pipeline.
TEST(EmitPipelineBuffering, BlockScatterKeepsTheLastWrite) {
  const std::vector<int> order{0, 0, 2, 2, 2, 5, 3, 3};
  auto k = pl::kernel(pl::out_type<float>({64, 128}), pltpu::TensorCoreMesh("core", 1),
                      pl::scratch_types(pltpu::VMEM<float>({64, 128})))(
      [&order](pltpu::HbmRef<float> oh, pltpu::VmemRef<float> zeros) {
        zeros = jnp::zeros_like(zeros);
        pltpu::sync_copy(zeros, oh);
        const pl::BlockSpec out({8, 128}, [&order](int i) { return pl::idx(order[i], 0); });
        pltpu::emit_pipeline(
            [](pltpu::VmemRef<float> ov) {
              ov = jnp::full_like(ov, static_cast<float>(pl::program_id(0) + 1));
            },
            pltpu::grid({8}), pl::out_specs(out))(oh);
      });
  const Array<float> o = k();
  const float want[8] = {2, 0, 5, 8, 0, 6, 0, 0};  // last step (1-based) that wrote each block
  for (int b = 0; b < 8; ++b) {
    for (int64_t r = 0; r < 8; ++r) ASSERT_EQ(o(b * 8 + r, 0), want[b]) << b;
  }
}

// Pallas' test_single_buffered_output: an output with pl::Buffered(1) accumulates over the
// inner grid axis.
TEST(EmitPipelineBuffering, SingleBufferedOutputAccumulates) {
  auto k = pl::kernel(pl::out_type<float>({2, 8, 128}),
                      pltpu::TensorCoreMesh("core", 1))([](pltpu::HbmRef<float> oh) {
    const pl::BlockSpec out(
        {1, 8, 128}, [](int b, int) { return pl::idx(b, 0, 0); }, pl::Buffered(1));
    pltpu::emit_pipeline(
        [](pltpu::VmemRef<float> ov) {
          if (pl::program_id(1) == 0) ov = jnp::zeros_like(ov);
          ov = ov + 1.0f;
        },
        pltpu::grid({2, 3}), pl::out_specs(out))(oh);
  });
  const Array<float> o = k();
  for (float v : o) ASSERT_EQ(v, 3.0f);
}
}  // namespace
