// pallas_call's operand features: windows read and written in place (native engine), operands
// left in HBM (pl::ANY) or staged in SMEM, scalar prefetch, input_output_aliases, pl::Element
// block axes, and the checks made before launch for each.
#include <gtest/gtest.h>

#include <vector>

#include "grid_examples.h"
#include "support/expect_error.h"
#include "tessera/tessera.h"

namespace {
using namespace tessera;
using pltpu::ARBITRARY;
using pltpu::PARALLEL;

Array<float> iota_f(Shape shape) {
  Array<float> a(std::move(shape));
  for (int64_t i = 0; i < a.size(); ++i) a[i] = static_cast<float>(i);
  return a;
}

TEST(PallasCallWindows, ConstInputsOfFullBlocksAreReadInPlace) {
  // A body that takes an input as a ref to const reads full blocks where they lie (the array's
  // strides); a partial edge block, and any input the body may write, comes through VMEM.
  const Array<float> x = iota_f({200, 256});
  std::vector<int64_t> const_strides;
  std::vector<int64_t> mutable_strides;
  auto f = pl::pallas_call(
      [&](pltpu::VmemRef<const float> a, pltpu::VmemRef<float> b, pltpu::VmemRef<float> o) {
        const_strides.push_back(a.strides()[0]);
        mutable_strides.push_back(b.strides()[0]);
        o = a + b;
      },
      pl::out_shape<float>({200, 256}), pl::grid({2, 2}),
      pl::in_specs(pl::BlockSpec({128, 128}, [](int i, int j) { return pl::idx(i, j); }),
                   pl::BlockSpec({128, 128}, [](int i, int j) { return pl::idx(i, j); })),
      pl::out_specs(pl::BlockSpec({128, 128}, [](int i, int j) { return pl::idx(i, j); })),
      pltpu::TensorCoreMesh("core", 1));
  const Array<float> o = f(x, x);
  for (int64_t i = 0; i < o.size(); ++i) ASSERT_EQ(o[i], 2 * x[i]) << i;
  // Steps (0,0), (0,1) are full blocks; (1,0), (1,1) are partial (rows 128..199).
  EXPECT_EQ(const_strides, (std::vector<int64_t>{256, 256, 128, 128}));
  EXPECT_EQ(mutable_strides, (std::vector<int64_t>{128, 128, 128, 128}));
}

TEST(PallasCallWindows, AccumulatedOutputsSumAcrossConsecutiveSteps) {
  const Array<float> x = iota_f({16, 512});
  auto f = pl::pallas_call(
      [](pltpu::VmemRef<const float> xv, pltpu::VmemRef<float> ov) {
        if (pl::program_id(1) == 0) ov = jnp::zeros_like(ov);
        ov = ov + xv;
      },
      pl::out_shape<float>({16, 128}), pl::grid({2, 4}),
      pl::in_specs(pl::BlockSpec({8, 128}, [](int i, int k) { return pl::idx(i, k); })),
      pl::out_specs(pl::BlockSpec({8, 128}, [](int i, int) { return pl::idx(i, 0); })),
      pltpu::CompilerParams{.dimension_semantics = {PARALLEL, ARBITRARY}});
  const Array<float> o = f(x);
  for (int64_t r = 0; r < 16; ++r) {
    for (int64_t c = 0; c < 128; ++c) {
      float want = 0;
      for (int64_t k = 0; k < 4; ++k) want += x(r, k * 128 + c);
      ASSERT_EQ(o(r, c), want) << r << "," << c;
    }
  }
}

TEST(PallasCallSpaces, AnyInputIsAnHbmRefTheBodyCopiesItself) {
  Array<float> x = iota_f({8, 128});
  const Array<float> o = examples::hbm_vmem(x);
  ASSERT_EQ(o.shape(), Shape({1, 128}));
  for (int64_t c = 0; c < 128; ++c) EXPECT_EQ(o(0, c), x(0, c) + 1.0f);
}

TEST(PallasCallSpaces, AnyOutputIsWrittenByDma) {
  const Array<float> x = iota_f({16, 128});
  auto f = pl::pallas_call(
      [](pltpu::VmemRef<const float> xv, pltpu::AnyRef<float> o_hbm) {
        const int i = static_cast<int>(pl::program_id(0));
        pltpu::sync_copy(xv, o_hbm.at(pl::ds(i * 8, 8)));
      },
      pl::out_shape<float>({16, 128}), pl::grid({2}),
      pl::in_specs(pl::BlockSpec({8, 128}, [](int i) { return pl::idx(i, 0); })),
      pl::out_specs(pl::BlockSpec(pl::ANY)), pltpu::TensorCoreMesh("core", 1));
  const Array<float> o = f(x);
  for (int64_t i = 0; i < o.size(); ++i) ASSERT_EQ(o[i], x[i]);
}

TEST(PallasCallSpaces, SmemInputHoldsTheWholeArray) {
  const Array<int32_t> scale({4}, {1, 2, 3, 4});
  const Array<float> x = iota_f({4, 128});
  auto f = pl::pallas_call(
      [](pltpu::SmemRef<const int32_t> s, pltpu::VmemRef<const float> xv,
         pltpu::VmemRef<float> ov) {
        const int i = static_cast<int>(pl::program_id(0));
        ov = xv * static_cast<float>(s(i));
      },
      pl::out_shape<float>({4, 128}), pl::grid({4}),
      pl::in_specs(pl::BlockSpec(MemorySpace::SMEM),
                   pl::BlockSpec({pl::squeezed, 128}, [](int i) { return pl::idx(i, 0); })),
      pl::out_specs(pl::BlockSpec({pl::squeezed, 128}, [](int i) { return pl::idx(i, 0); })));
  const Array<float> o = f(scale, x);
  for (int64_t r = 0; r < 4; ++r) {
    for (int64_t c = 0; c < 128; ++c) ASSERT_EQ(o(r, c), x(r, c) * static_cast<float>(r + 1));
  }
}

TEST(PallasCallSpaces, SpecAndBodyMustAgree) {
  const Array<float> x = iota_f({8, 128});
  const int spec_line = __LINE__ + 2;
  auto f = pl::pallas_call([](pltpu::VmemRef<float> xv, pltpu::VmemRef<float> ov) { ov = xv; },
                           pl::in_specs(pl::BlockSpec(pl::ANY)), pl::out_shape<float>({8, 128}));
  EXPECT_TESSERA_ERROR(f(x), UsageError, ErrorKind::kInvalidArgument,
                       "puts it in pl::ANY (an HBM ref) but the body takes it as a VMEM ref",
                       spec_line);
  // A default BlockSpec has no line of its own: the error points at pl::out_shape.
  const int out_line = __LINE__ + 3;
  auto g = pl::pallas_call(
      [](pltpu::AnyRef<const float> xh, pltpu::VmemRef<float> ov) { pltpu::sync_copy(xh, ov); },
      pl::out_shape<float>({8, 128}));
  EXPECT_TESSERA_ERROR(g(x), UsageError, ErrorKind::kInvalidArgument,
                       "puts it in VMEM but the body takes it as a pl::ANY", out_line);
}

TEST(PallasCallScalarPrefetch, TrivialScalarPrefetchGathersBlocks) {
  // Pallas' test_trivial_scalar_prefetch: block s[i] of x lands at block i of the output.
  const Array<int32_t> s({8}, {4, 3, 2, 5, 3, 5, 2, 7});
  Array<int32_t> x({64, 128});
  for (int64_t i = 0; i < x.size(); ++i) x[i] = static_cast<int32_t>(i);
  auto f = pl::pallas_call(
      [](pltpu::SmemRef<int32_t>, pltpu::VmemRef<const int32_t> xv, pltpu::VmemRef<int32_t> ov) {
        ov = xv;
      },
      pl::out_shape<int32_t>({64, 128}),
      pltpu::PrefetchScalarGridSpec<1>(
          pl::grid({8}),
          pl::in_specs(pl::BlockSpec(
              {8, 128}, [](int i, pltpu::SmemRef<int32_t> sr) { return pl::idx(sr(i), 0); })),
          pl::out_specs(pl::BlockSpec(
              {8, 128}, [](int i, pltpu::SmemRef<int32_t>) { return pl::idx(i, 0); }))),
      pltpu::TensorCoreMesh("core", 2), pltpu::CompilerParams{.dimension_semantics = {PARALLEL}});
  const Array<int32_t> o = f(s, x);
  for (int64_t b = 0; b < 8; ++b) {
    for (int64_t r = 0; r < 8; ++r) {
      for (int64_t c = 0; c < 128; ++c) ASSERT_EQ(o(b * 8 + r, c), x(s[b] * 8 + r, c));
    }
  }
}

TEST(PallasCallScalarPrefetch, BlockDynamicSliceExample) {
  Array<int32_t> x({512, 512});
  for (int64_t i = 0; i < x.size(); ++i) x[i] = static_cast<int32_t>(i);
  const Array<int32_t> r = examples::block_dynamic_slice(x, 256, 128, 128, 128);
  for (int64_t i = 0; i < 128; ++i) {
    for (int64_t j = 0; j < 128; ++j) ASSERT_EQ(r(i, j), x(256 + i, 128 + j));
  }
  EXPECT_THROW(examples::block_dynamic_slice(x, 100, 128, 128, 128), UsageError);
  // A block index past int32 (the SMEM scalar it travels as) is refused, not truncated to 0.
  EXPECT_THROW(examples::block_dynamic_slice(x, int64_t{128} << 32, 0, 128, 128), UsageError);
  EXPECT_THROW(examples::block_dynamic_slice(x, -128, 0, 128, 128), UsageError);
}

// Index maps run one step ahead, for prefetching; an index map failing there is reported at
// the step that asked for the block (2), not at the step that was running (1).
TEST(PallasCallScalarPrefetch, IndexMapErrorsNameTheStepThatAsked) {
  const Array<int32_t> s({2}, {1, 0});
  const Array<float> x = iota_f({16, 128});
  const int map_line = __LINE__ + 7;
  auto f = pl::pallas_call(
      [](pltpu::SmemRef<int32_t>, pltpu::VmemRef<float> xv, pltpu::VmemRef<float> ov) { ov = xv; },
      pl::out_shape<float>({24, 128}),
      pltpu::PrefetchScalarGridSpec<1>(
          pl::grid({3}),
          pl::in_specs(pl::BlockSpec(
              {8, 128}, [](int i, pltpu::SmemRef<int32_t> sr) { return pl::idx(sr(i), 0); })),
          pl::out_specs(pl::BlockSpec(
              {8, 128}, [](int i, pltpu::SmemRef<int32_t>) { return pl::idx(i, 0); }))),
      pltpu::TensorCoreMesh("core", 1));
  auto e = tessera::testing::catch_error<KernelError>([&] { f(s, x); });
  ASSERT_TRUE(e);
  EXPECT_EQ(e->kind(), ErrorKind::kOutOfBounds) << e->what();
  EXPECT_EQ(e->grid_step(), (std::vector<int64_t>{2})) << e->what();
  EXPECT_NE(std::string(e->what()).find("grid step (2)"), std::string::npos) << e->what();
  EXPECT_EQ(static_cast<int>(e->where().line()), map_line) << e->what();
}

TEST(PallasCallScalarPrefetch, IndexMapsMayLeaveOutTrailingPrefetchRefs) {
  // An index map takes the grid indices, then the first n (or fewer) scalar-prefetch refs: one
  // that uses none of them leaves them out.
  const Array<int32_t> s({2}, {1, 0});
  const Array<float> x = iota_f({16, 128});
  auto f = pl::pallas_call(
      [](pltpu::SmemRef<int32_t>, pltpu::VmemRef<float> xv, pltpu::VmemRef<float> ov) { ov = xv; },
      pl::out_shape<float>({16, 128}),
      pltpu::PrefetchScalarGridSpec<1>(
          pl::grid({2}), pl::in_specs(pl::BlockSpec({8, 128}, [](int i) { return pl::idx(i, 0); })),
          pl::out_specs(pl::BlockSpec(
              {8, 128}, [](int i, pltpu::SmemRef<int32_t> sr) { return pl::idx(sr(i), 0); }))));
  const Array<float> o = f(s, x);
  for (int64_t r = 0; r < 16; ++r) {
    for (int64_t c = 0; c < 128; ++c) ASSERT_EQ(o(r, c), x((r + 8) % 16, c)) << r << "," << c;
  }
}

TEST(PallasCallAliases, OutputStartsWithTheInputAndSharesItsBuffer) {
  // Blocks visited (0,0) (0,1) (1,0) (1,1); the output's block is the transpose of the input's.
  // Step (0,1) writes output block (1,0) back before step (1,0) reads input block (1,0): through
  // the shared buffer it reads x(0,1) + 1.
  const Array<float> x = iota_f({16, 256});
  const pl::BlockSpec in({8, 128}, [](int i, int j) { return pl::idx(i, j); });
  const pl::BlockSpec out({8, 128}, [](int i, int j) { return pl::idx(j, i); });
  auto f = pl::pallas_call(
      [](pltpu::VmemRef<float> xv, pltpu::VmemRef<float> ov) { ov = xv + 1.0f; },
      pl::out_shape<float>({16, 256}), pl::grid({2, 2}), pl::in_specs(in), pl::out_specs(out),
      pl::input_output_aliases({{0, 0}}), pltpu::TensorCoreMesh("core", 1));
  const Array<float> o = f(x);
  auto block = [](const Array<float>& a, int bi, int bj, int r, int c) {
    return a(bi * 8 + r, bj * 128 + c);
  };
  for (int r = 0; r < 8; ++r) {
    for (int c = 0; c < 128; ++c) {
      ASSERT_EQ(block(o, 0, 0, r, c), block(x, 0, 0, r, c) + 1);
      ASSERT_EQ(block(o, 1, 0, r, c), block(x, 0, 1, r, c) + 1);
      ASSERT_EQ(block(o, 0, 1, r, c), block(x, 0, 1, r, c) + 2);
      ASSERT_EQ(block(o, 1, 1, r, c), block(x, 1, 1, r, c) + 1);
    }
  }
  // The caller's input is untouched (the output started as a copy).
  for (int64_t i = 0; i < x.size(); ++i) ASSERT_EQ(x[i], static_cast<float>(i));
}

TEST(PallasCallAliases, UnvisitedBlocksKeepTheInput) {
  const Array<float> x = iota_f({16, 128});
  auto f =
      pl::pallas_call([](pltpu::VmemRef<float> xv, pltpu::VmemRef<float> ov) { ov = xv * 2.0f; },
                      pl::out_shape<float>({16, 128}), pl::grid({1}),
                      pl::in_specs(pl::BlockSpec({8, 128}, [](int) { return pl::idx(1, 0); })),
                      pl::out_specs(pl::BlockSpec({8, 128}, [](int) { return pl::idx(1, 0); })),
                      pl::input_output_aliases({{0, 0}}));
  const Array<float> o = f(x);
  for (int64_t i = 0; i < 8 * 128; ++i) ASSERT_EQ(o[i], x[i]);
  for (int64_t i = 8 * 128; i < o.size(); ++i) ASSERT_EQ(o[i], 2 * x[i]);
}

TEST(PallasCallAliases, Checked) {
  const Array<float> x = iota_f({8, 128});
  const int shape_line = __LINE__ + 3;
  auto bad_shape =
      pl::pallas_call([](pltpu::VmemRef<float>, pltpu::VmemRef<float>) {},
                      pl::out_shape<float>({8, 256}), pl::input_output_aliases({{0, 0}}));
  EXPECT_TESSERA_ERROR(bad_shape(x), UsageError, ErrorKind::kShapeMismatch,
                       "must have the same shape and dtype", shape_line);
  const int index_line = __LINE__ + 3;
  auto bad_index =
      pl::pallas_call([](pltpu::VmemRef<float>, pltpu::VmemRef<float>) {},
                      pl::out_shape<float>({8, 128}), pl::input_output_aliases({{1, 0}}));
  EXPECT_TESSERA_ERROR(bad_index(x), UsageError, ErrorKind::kInvalidArgument,
                       "names input 1, but the call has 1 inputs", index_line);
}

TEST(PallasCallElement, ElementOffsetsAndPadding) {
  // Pallas' test_block_spec_element: (Element(8), Element(128)) with offsets (8 i, 0).
  auto run = [](Shape shape, pl::Element rows) {
    auto f = pl::pallas_call(
        [](pltpu::VmemRef<float> ov) {
          ov = jnp::full_like(ov, static_cast<float>(pl::program_id(0)));
        },
        pl::out_shape<float>(shape), pl::grid({2}),
        pl::out_specs(
            pl::BlockSpec({rows, pl::Element(128)}, [](int i) { return pl::idx(8 * i, 0); })));
    return f();
  };
  const Array<float> a = run({16, 128}, pl::Element(8));
  for (int64_t r = 0; r < 16; ++r) EXPECT_EQ(a(r, 0), r < 8 ? 0.0f : 1.0f);
  const Array<float> b = run({14, 128}, pl::Element(8, {0, 2}));
  for (int64_t r = 0; r < 14; ++r) EXPECT_EQ(b(r, 5), r < 8 ? 0.0f : 1.0f);
}

TEST(PallasCallElement, OverlappingWindowsSlide) {
  // Pallas' test_element_indexing: windows of 16 rows every 8 rows; o = x[0:8] + x[8:16].
  const Array<float> x = iota_f({128, 128});
  auto f = pl::pallas_call(
      [](pltpu::VmemRef<const float> xv, pltpu::VmemRef<float> ov) {
        ov = xv.at(pl::ds(0, 8)) + xv.at(pl::ds(8, 8));
      },
      pl::out_shape<float>({120, 128}), pl::grid({15}),
      pl::in_specs(pl::BlockSpec({pl::Element(16), pl::Element(128)},
                                 [](int i) { return pl::idx(i * 8, 0); })),
      pl::out_specs(pl::BlockSpec({8, 128}, [](int i) { return pl::idx(i, 0); })));
  const Array<float> o = f(x);
  for (int64_t r = 0; r < 120; ++r) {
    for (int64_t c = 0; c < 128; ++c) ASSERT_EQ(o(r, c), x(r, c) + x(r + 8, c));
  }
}

TEST(PallasCallElement, PaddingBeforeTheArray) {
  // pl::Element(16, (8, 0)) on an (8, 128) array at offset 0: rows 8..15 of the window are the
  // array, rows 0..7 padding.
  const Array<float> x = iota_f({8, 128});
  auto f = pl::pallas_call(
      [](pltpu::VmemRef<const float> xv, pltpu::VmemRef<float> ov) { ov = xv.at(pl::ds(8, 8)); },
      pl::out_shape<float>({8, 128}), pl::grid({1}),
      pl::in_specs(pl::BlockSpec({pl::Element(16, {8, 0}), pl::Element(128)},
                                 [](int) { return pl::idx(0, 0); })),
      pl::out_specs(pl::BlockSpec({8, 128}, [](int) { return pl::idx(0, 0); })));
  const Array<float> o = f(x);
  for (int64_t i = 0; i < o.size(); ++i) ASSERT_EQ(o[i], x[i]);
}

TEST(PallasCallElement, MixedWithBlockedAxesIsAnError) {
  const int spec_line = __LINE__ + 4;  // g++ places a BlockSpec at its last argument's line
  auto f = pl::pallas_call(
      [](pltpu::VmemRef<float> ov) { ov = jnp::zeros_like(ov); }, pl::out_shape<float>({16, 128}),
      pl::grid({2}),
      pl::out_specs(pl::BlockSpec({pl::Element(8), 128}, [](int i) { return pl::idx(8 * i, 0); })));
  EXPECT_TESSERA_ERROR(f(), UsageError, ErrorKind::kInvalidArgument,
                       "mixes pl::Element and blocked axes", spec_line);
}

TEST(PallasCallBuffering, OnlySingleOrDoubleBuffering) {
  const Array<float> x = iota_f({16, 128});
  const int spec_line = __LINE__ + 5;
  auto f =
      pl::pallas_call([](pltpu::VmemRef<float> xv, pltpu::VmemRef<float> ov) { ov = xv; },
                      pl::out_shape<float>({16, 128}), pl::grid({2}),
                      pl::in_specs(pl::BlockSpec(
                          {8, 128}, [](int i) { return pl::idx(i, 0); }, pl::Buffered(3))),
                      pl::out_specs(pl::BlockSpec({8, 128}, [](int i) { return pl::idx(i, 0); })));
  EXPECT_TESSERA_ERROR(f(x), UsageError, ErrorKind::kInvalidArgument,
                       "pallas_call pipelines take single (1) or double (2) buffering", spec_line);
}

}  // namespace
