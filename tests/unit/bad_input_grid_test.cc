// Misuse of BlockSpecs, grids, pallas_call options (aliases, scalar prefetch) and compiler
// params: each is a UsageError before launch, or a KernelError at the step that finds it, naming
// the value and the rule, at the user's line.
#include <gtest/gtest.h>

#include <atomic>
#include <cstdint>
#include <limits>
#include <string>

#include "support/expect_error.h"
#include "tessera/tessera.h"

namespace {
using namespace tessera;
using pltpu::ARBITRARY;
using pltpu::PARALLEL;

constexpr int64_t kMax = std::numeric_limits<int64_t>::max();

Array<float> iota_f(Shape shape) {
  Array<float> a(std::move(shape));
  for (int64_t i = 0; i < a.size(); ++i) a[i] = static_cast<float>(i);
  return a;
}

using tessera::testing::expect_kernel_error;

// A pallas_call over a (16, 128) float32 input and output with `spec` for both.
auto copy_call(const pl::BlockSpec& spec, Shape grid = {2}) {
  return pl::pallas_call([](pltpu::VmemRef<float> x, pltpu::VmemRef<float> o) { o = x; },
                         pl::out_shape<float>({16, 128}), pl::grid(grid), pl::in_specs(spec),
                         pl::out_specs(spec), pltpu::TensorCoreMesh("core", 1));
}

// ---------------------------------------------------------------------------------------------
// Block extents: >= 1 or pl::squeezed.

class BadInputBlockExtent : public ::testing::TestWithParam<int64_t> {};

TEST_P(BadInputBlockExtent, OnTheFirstAxis) {
  const int64_t extent = GetParam();
  const int line_ = __LINE__ + 1;
  const pl::BlockSpec spec({extent, 128}, [](int i) { return pl::idx(i, 0); });
  auto f = copy_call(spec);
  const Array<float> x = iota_f({16, 128});
  EXPECT_TESSERA_ERROR(f(x), UsageError, ErrorKind::kInvalidArgument,
                       "has block extent " + std::to_string(extent) + " on axis 0", line_);
}

TEST_P(BadInputBlockExtent, OnTheLastAxis) {
  const int64_t extent = GetParam();
  const int line_ = __LINE__ + 1;
  const pl::BlockSpec spec({8, extent}, [](int i) { return pl::idx(i, 0); });
  auto f = copy_call(spec);
  const Array<float> x = iota_f({16, 128});
  EXPECT_TESSERA_ERROR(f(x), UsageError, ErrorKind::kInvalidArgument,
                       "has block extent " + std::to_string(extent) + " on axis 1", line_);
}

INSTANTIATE_TEST_SUITE_P(All, BadInputBlockExtent,
                         ::testing::Values(int64_t{0}, int64_t{-1}, int64_t{-128},
                                           std::numeric_limits<int64_t>::min()));

TEST(BadInputBlockSpec, BlockBytesOverflow) {
  const int line_ = __LINE__ + 1;
  const pl::BlockSpec spec({int64_t{1} << 40, int64_t{1} << 40}, [](int) { return pl::idx(0, 0); });
  auto f = copy_call(spec, {1});
  const Array<float> x = iota_f({16, 128});
  EXPECT_TESSERA_ERROR(f(x), UsageError, ErrorKind::kInvalidArgument,
                       "has more bytes than a 64-bit count holds", line_);
}

TEST(BadInputBlockSpec, TooFewBlockAxes) {
  const int line_ = __LINE__ + 1;
  const pl::BlockSpec spec({8}, [](int i) { return pl::idx(i); });
  auto f = copy_call(spec);
  const Array<float> x = iota_f({16, 128});
  EXPECT_TESSERA_ERROR(f(x), UsageError, ErrorKind::kShapeMismatch,
                       "input 0 has shape (16, 128) but its BlockSpec has 1 block axes", line_);
}

TEST(BadInputBlockSpec, TooManyBlockAxes) {
  const int line_ = __LINE__ + 1;
  const pl::BlockSpec spec({1, 8, 128}, [](int i) { return pl::idx(0, i, 0); });
  auto f = copy_call(spec);
  const Array<float> x = iota_f({16, 128});
  EXPECT_TESSERA_ERROR(f(x), UsageError, ErrorKind::kShapeMismatch, "has 3 block axes", line_);
}

TEST(BadInputBlockSpec, IndexMapTakesTooManyGridIndices) {
  const int line_ = __LINE__ + 1;
  const pl::BlockSpec spec({8, 128}, [](int i, int j) { return pl::idx(i, j); });
  auto f = copy_call(spec);
  const Array<float> x = iota_f({16, 128});
  EXPECT_TESSERA_ERROR(f(x), UsageError, ErrorKind::kInvalidArgument,
                       "takes 2 grid indices but the grid has rank 1 (grid (2,))", line_);
}

TEST(BadInputBlockSpec, IndexMapTakesTooFewGridIndices) {
  const int line_ = __LINE__ + 1;
  const pl::BlockSpec spec({8, 128}, [](int i) { return pl::idx(i, 0); });
  auto f = copy_call(spec, {2, 1});
  const Array<float> x = iota_f({16, 128});
  EXPECT_TESSERA_ERROR(f(x), UsageError, ErrorKind::kInvalidArgument,
                       "takes 1 grid indices but the grid has rank 2", line_);
}

TEST(BadInputBlockSpec, IndexMapReturnsTooFewIndices) {
  const int line = __LINE__ + 1;
  const pl::BlockSpec spec({8, 128}, [](int i) { return pl::idx(i); });
  auto f = copy_call(spec);
  const Array<float> x = iota_f({16, 128});
  expect_kernel_error([&] { f(x); }, ErrorKind::kShapeMismatch, "the index map returned 1 indices",
                      line);
}

TEST(BadInputBlockSpec, IndexMapReturnsTooManyIndices) {
  const int line = __LINE__ + 1;
  const pl::BlockSpec spec({8, 128}, [](int i) { return pl::idx(i, 0, 0); });
  auto f = copy_call(spec);
  const Array<float> x = iota_f({16, 128});
  expect_kernel_error([&] { f(x); }, ErrorKind::kShapeMismatch, "the index map returned 3 indices",
                      line);
}

TEST(BadInputBlockSpec, BlockIndexPastTheEnd) {
  const int line = __LINE__ + 1;
  const pl::BlockSpec spec({8, 128}, [](int i) { return pl::idx(i + 1, 0); });
  auto f = copy_call(spec);
  const Array<float> x = iota_f({16, 128});
  expect_kernel_error(
      [&] { f(x); }, ErrorKind::kOutOfBounds,
      "input 0: block index 2 on axis 0 starts at element 16, outside the array (16, "
      "128)",
      line);
}

TEST(BadInputBlockSpec, NegativeBlockIndex) {
  const int line = __LINE__ + 1;
  const pl::BlockSpec spec({8, 128}, [](int i) { return pl::idx(i - 1, 0); });
  auto f = copy_call(spec);
  const Array<float> x = iota_f({16, 128});
  expect_kernel_error([&] { f(x); }, ErrorKind::kOutOfBounds, "block index -1 on axis 0", line);
}

TEST(BadInputBlockSpec, BlockIndexTimesExtentOverflows) {
  const int line = __LINE__ + 1;
  const pl::BlockSpec spec({8, 128}, [](int) { return pl::idx(int64_t{1} << 61, 0); });
  auto f = copy_call(spec);
  const Array<float> x = iota_f({16, 128});
  expect_kernel_error([&] { f(x); }, ErrorKind::kOutOfBounds,
                      "block index 2305843009213693952 on axis 0 starts at element beyond 2^63",
                      line);
}

TEST(BadInputBlockSpec, SqueezedIndexPastTheEnd) {
  const int line = __LINE__ + 1;
  const pl::BlockSpec spec({pl::squeezed, 128}, [](int i) { return pl::idx(i + 16, 0); });
  auto f = copy_call(spec, {16});
  const Array<float> x = iota_f({16, 128});
  expect_kernel_error([&] { f(x); }, ErrorKind::kOutOfBounds,
                      "block index 16 on axis 0 starts at element 16", line);
}

TEST(BadInputBlockSpec, NegativeElementPadding) {
  const int line_ = __LINE__ + 2;
  const pl::BlockSpec spec({pl::Element(8, {-1, 0}), pl::Element(128)},
                           [](int i) { return pl::idx(8 * i, 0); });
  auto f = copy_call(spec);
  const Array<float> x = iota_f({16, 128});
  EXPECT_TESSERA_ERROR(f(x), UsageError, ErrorKind::kInvalidArgument,
                       "pads axis 0 by (-1, 0); pl::Element padding is >= 0", line_);
}

TEST(BadInputBlockSpec, ElementOffsetOutsideTheArray) {
  const int line = __LINE__ + 2;
  const pl::BlockSpec spec({pl::Element(8), pl::Element(128)},
                           [](int i) { return pl::idx(8 * i + 9, 0); });
  auto f = copy_call(spec);
  const Array<float> x = iota_f({16, 128});
  expect_kernel_error([&] { f(x); }, ErrorKind::kOutOfBounds,
                      "element offset 9 on axis 0 puts the window of 8 elements outside", line);
}

TEST(BadInputBlockSpec, ZeroBuffers) {
  const int line_ = __LINE__ + 2;
  const pl::BlockSpec spec(
      {8, 128}, [](int i) { return pl::idx(i, 0); }, pl::Buffered(0));
  auto f = copy_call(spec);
  const Array<float> x = iota_f({16, 128});
  EXPECT_TESSERA_ERROR(f(x), UsageError, ErrorKind::kInvalidArgument, "asks for pl::Buffered(0)",
                       line_);
}

TEST(BadInputBlockSpec, NegativeBuffers) {
  const int line_ = __LINE__ + 2;
  const pl::BlockSpec spec(
      {8, 128}, [](int i) { return pl::idx(i, 0); }, pl::Buffered(-2));
  auto f = copy_call(spec);
  const Array<float> x = iota_f({16, 128});
  EXPECT_TESSERA_ERROR(f(x), UsageError, ErrorKind::kInvalidArgument, "asks for pl::Buffered(-2)",
                       line_);
}

TEST(BadInputBlockSpec, LookaheadInAPallasCall) {
  const int line_ = __LINE__ + 2;
  const pl::BlockSpec spec(
      {8, 128}, [](int i) { return pl::idx(i, 0); }, pl::Buffered(2, true));
  auto f = copy_call(spec);
  const Array<float> x = iota_f({16, 128});
  EXPECT_TESSERA_ERROR(f(x), UsageError, ErrorKind::kInvalidArgument, "asks for lookahead", line_);
}

TEST(BadInputBlockSpec, AnyOperandTakenAsVmem) {
  const int line_ = __LINE__ + 1;
  const pl::BlockSpec any(pl::ANY);
  auto f = pl::pallas_call([](pltpu::VmemRef<float> x, pltpu::VmemRef<float> o) { o = x; },
                           pl::out_shape<float>({16, 128}), pl::grid({1}), pl::in_specs(any));
  const Array<float> x = iota_f({16, 128});
  EXPECT_TESSERA_ERROR(f(x), UsageError, ErrorKind::kInvalidArgument,
                       "puts it in pl::ANY (an HBM ref) but the body takes it as a VMEM ref",
                       line_);
}

TEST(BadInputBlockSpec, ZeroExtentInEmitPipeline) {
  std::atomic<int> line{0};  // set by every core that runs the statement
  auto k = pl::kernel(pl::out_type<float>({16, 128}),
                      pltpu::TensorCoreMesh("core", 1))([&](pltpu::HbmRef<float> o) {
    line = __LINE__ + 1;
    const pl::BlockSpec spec({0, 128}, [](int i) { return pl::idx(i, 0); });
    pltpu::emit_pipeline([](pltpu::VmemRef<float> ov) { ov = 0.0f; }, pltpu::grid({2}),
                         pl::out_specs(spec))(o);
  });
  expect_kernel_error([&] { k(); }, ErrorKind::kInvalidArgument, "block extent 0 on axis 0", line);
}

TEST(BadInputBlockSpec, ThreeOutputBuffersInEmitPipeline) {
  std::atomic<int> line{0};  // set by every core that runs the statement
  auto k = pl::kernel(pl::out_type<float>({16, 128}),
                      pltpu::TensorCoreMesh("core", 1))([&](pltpu::HbmRef<float> o) {
    line = __LINE__ + 2;
    const pl::BlockSpec spec(
        {8, 128}, [](int i) { return pl::idx(i, 0); }, pl::Buffered(3));
    pltpu::emit_pipeline([](pltpu::VmemRef<float> ov) { ov = 0.0f; }, pltpu::grid({2}),
                         pl::out_specs(spec))(o);
  });
  expect_kernel_error([&] { k(); }, ErrorKind::kInvalidArgument, "pl::Buffered(3) on an output",
                      line);
}

// ---------------------------------------------------------------------------------------------
// Grids: every extent >= 1, a step count that fits 64 bits.

struct BadGrid {
  const char* name;
  Shape grid;
  const char* says;
};

const BadGrid kBadGrids[] = {
    {"Zero", {0}, "grid (0,) has extent 0 on axis 0; every grid extent must be at least 1"},
    {"Negative", {-3}, "grid (-3,) has extent -3 on axis 0"},
    {"ZeroSecondAxis", {4, 0}, "grid (4, 0) has extent 0 on axis 1"},
    {"MostNegative", {std::numeric_limits<int64_t>::min()}, "has extent -9223372036854775808"},
    {"ProductOverflows",
     {int64_t{1} << 32, int64_t{1} << 32},
     "grid (4294967296, 4294967296) has more steps than a 64-bit count holds"},
    {"ProductOverflowsMax", {kMax, 2}, "has more steps than a 64-bit count holds"},
};

class BadInputGrid : public ::testing::TestWithParam<BadGrid> {};

TEST_P(BadInputGrid, PallasCall) {
  const BadGrid& c = GetParam();
  const pl::BlockSpec spec({8, 128}, [](int) { return pl::idx(0, 0); });
  const pl::BlockSpec spec2({8, 128}, [](int, int) { return pl::idx(0, 0); });
  const int line_ = __LINE__ + 1;
  const auto g = pl::grid(c.grid);
  auto f =
      pl::pallas_call([](pltpu::VmemRef<float> o) { o = 0.0f; }, pl::out_shape<float>({8, 128}), g,
                      pl::out_specs(c.grid.rank() == 1 ? spec : spec2));
  EXPECT_TESSERA_ERROR(f(), UsageError, ErrorKind::kInvalidArgument, c.says, line_);
}

TEST_P(BadInputGrid, EmitPipeline) {
  const BadGrid& c = GetParam();
  std::atomic<int> line{0};  // set by every core that runs the statement
  auto k = pl::kernel(pl::out_type<float>({8, 128}),
                      pltpu::TensorCoreMesh("core", 1))([&](pltpu::HbmRef<float> o) {
    const pl::BlockSpec spec({8, 128}, [](int) { return pl::idx(0, 0); });
    const pl::BlockSpec spec2({8, 128}, [](int, int) { return pl::idx(0, 0); });
    line = __LINE__ + 1;
    pltpu::emit_pipeline([](pltpu::VmemRef<float> ov) { ov = 0.0f; }, pltpu::grid(c.grid),
                         pl::out_specs(c.grid.rank() == 1 ? spec : spec2))(o);
  });
  expect_kernel_error([&] { k(); }, ErrorKind::kInvalidArgument, c.says, line);
}

INSTANTIATE_TEST_SUITE_P(All, BadInputGrid, ::testing::ValuesIn(kBadGrids),
                         [](const auto& test) { return std::string(test.param.name); });

TEST(BadInputGridSemantics, OneEntryForATwoAxisGrid) {
  const pl::BlockSpec spec({8, 128}, [](int i, int) { return pl::idx(i, 0); });
  const int line_ = __LINE__ + 1;
  const auto g = pl::grid({2, 1});
  auto f = pl::pallas_call([](pltpu::VmemRef<float> o) { o = 0.0f; },
                           pl::out_shape<float>({16, 128}), g, pl::out_specs(spec),
                           pltpu::CompilerParams{.dimension_semantics = {PARALLEL}});
  EXPECT_TESSERA_ERROR(f(), UsageError, ErrorKind::kInvalidArgument,
                       "dimension_semantics has 1 entries but the grid (2, 1) has rank 2", line_);
}

TEST(BadInputGridSemantics, ParallelAfterArbitrary) {
  const pl::BlockSpec spec({8, 128}, [](int i, int) { return pl::idx(i, 0); });
  const int line_ = __LINE__ + 1;
  const auto g = pl::grid({2, 1});
  auto f = pl::pallas_call([](pltpu::VmemRef<float> o) { o = 0.0f; },
                           pl::out_shape<float>({16, 128}), g, pl::out_specs(spec),
                           pltpu::CompilerParams{.dimension_semantics = {ARBITRARY, PARALLEL}});
  EXPECT_TESSERA_ERROR(f(), UsageError, ErrorKind::kInvalidArgument,
                       "axis 1 is PARALLEL after an ARBITRARY axis", line_);
}

// ---------------------------------------------------------------------------------------------
// input_output_aliases.

TEST(BadInputAliases, InputIndexOutOfRange) {
  const int line_ = __LINE__ + 1;
  const auto out = pl::out_shape<float>({8, 128});
  auto f = pl::pallas_call([](pltpu::VmemRef<float>, pltpu::VmemRef<float>) {}, out,
                           pl::input_output_aliases({{1, 0}}));
  EXPECT_TESSERA_ERROR(f(iota_f({8, 128})), UsageError, ErrorKind::kInvalidArgument,
                       "names input 1, but the call has 1 inputs", line_);
}

TEST(BadInputAliases, NegativeInputIndex) {
  const int line_ = __LINE__ + 1;
  const auto out = pl::out_shape<float>({8, 128});
  auto f = pl::pallas_call([](pltpu::VmemRef<float>, pltpu::VmemRef<float>) {}, out,
                           pl::input_output_aliases({{-1, 0}}));
  EXPECT_TESSERA_ERROR(f(iota_f({8, 128})), UsageError, ErrorKind::kInvalidArgument,
                       "names input -1", line_);
}

TEST(BadInputAliases, OutputIndexOutOfRange) {
  const int line_ = __LINE__ + 1;
  const auto out = pl::out_shape<float>({8, 128});
  auto f = pl::pallas_call([](pltpu::VmemRef<float>, pltpu::VmemRef<float>) {}, out,
                           pl::input_output_aliases({{0, 1}}));
  EXPECT_TESSERA_ERROR(f(iota_f({8, 128})), UsageError, ErrorKind::kInvalidArgument,
                       "names output 1, but the call has 1 outputs", line_);
}

TEST(BadInputAliases, DtypeMismatch) {
  const int line_ = __LINE__ + 1;
  const auto out = pl::out_shape<float>({8, 128});
  auto f = pl::pallas_call([](pltpu::VmemRef<int32_t>, pltpu::VmemRef<float>) {}, out,
                           pl::input_output_aliases({{0, 0}}));
  EXPECT_TESSERA_ERROR(f(Array<int32_t>({8, 128})), UsageError, ErrorKind::kShapeMismatch,
                       "an aliased pair must have the same shape and dtype", line_);
}

TEST(BadInputAliases, ShapeMismatch) {
  const int line_ = __LINE__ + 1;
  const auto out = pl::out_shape<float>({128, 8});
  auto f = pl::pallas_call([](pltpu::VmemRef<float>, pltpu::VmemRef<float>) {}, out,
                           pl::input_output_aliases({{0, 0}}));
  EXPECT_TESSERA_ERROR(f(iota_f({8, 128})), UsageError, ErrorKind::kShapeMismatch,
                       "must have the same shape and dtype", line_);
}

TEST(BadInputAliases, OutputAliasedTwice) {
  const int line_ = __LINE__ + 1;
  const auto out = pl::out_shape<float>({8, 128});
  auto f =
      pl::pallas_call([](pltpu::VmemRef<float>, pltpu::VmemRef<float>, pltpu::VmemRef<float>) {},
                      out, pl::input_output_aliases({{0, 0}, {1, 0}}));
  EXPECT_TESSERA_ERROR(f(iota_f({8, 128}), iota_f({8, 128})), UsageError,
                       ErrorKind::kInvalidArgument, "uses input 1 or output 0 twice", line_);
}

TEST(BadInputAliases, ScalarPrefetchOperand) {
  const int line_ = __LINE__ + 1;
  const auto g = pl::grid({1});
  auto f = pl::pallas_call(
      [](pltpu::SmemRef<int32_t>, pltpu::VmemRef<int32_t> x, pltpu::VmemRef<int32_t> o) { o = x; },
      pl::out_shape<int32_t>({2}), pltpu::PrefetchScalarGridSpec<1>(g),
      pl::input_output_aliases({{0, 0}}));
  EXPECT_TESSERA_ERROR(f(Array<int32_t>({2}), Array<int32_t>({2})), UsageError,
                       ErrorKind::kInvalidArgument, "a scalar-prefetch operand", line_);
}

// ---------------------------------------------------------------------------------------------
// Scalar prefetch.

TEST(BadInputScalarPrefetch, IndexMapTakesTooManyPrefetchRefs) {
  const Array<int32_t> s({2}, {1, 0});
  const int line_ = __LINE__ + 3;
  const pl::BlockSpec spec({8, 128}, [](int i, pltpu::SmemRef<int32_t>, pltpu::SmemRef<int32_t>) {
    return pl::idx(i, 0);
  });
  auto f = pl::pallas_call(
      [](pltpu::SmemRef<int32_t>, pltpu::VmemRef<float> x, pltpu::VmemRef<float> o) { o = x; },
      pl::out_shape<float>({16, 128}),
      pltpu::PrefetchScalarGridSpec<1>(pl::grid({2}), pl::in_specs(spec), pl::out_specs(spec)));
  EXPECT_TESSERA_ERROR(f(s, iota_f({16, 128})), UsageError, ErrorKind::kInvalidArgument,
                       "takes 2 scalar-prefetch refs after its grid indices, but the call has 1",
                       line_);
}

TEST(BadInputScalarPrefetch, PrefetchedBlockIndexOutOfRange) {
  const Array<int32_t> s({2}, {1, 7});  // block 7 of a 2-block array
  const int line = __LINE__ + 2;
  const pl::BlockSpec in({8, 128},
                         [](int i, pltpu::SmemRef<int32_t> sr) { return pl::idx(sr(i), 0); });
  const pl::BlockSpec out({8, 128}, [](int i, pltpu::SmemRef<int32_t>) { return pl::idx(i, 0); });
  auto f = pl::pallas_call(
      [](pltpu::SmemRef<int32_t>, pltpu::VmemRef<float> x, pltpu::VmemRef<float> o) { o = x; },
      pl::out_shape<float>({16, 128}),
      pltpu::PrefetchScalarGridSpec<1>(pl::grid({2}), pl::in_specs(in), pl::out_specs(out)),
      pltpu::TensorCoreMesh("core", 1));
  expect_kernel_error(
      [&] {
        f(s, iota_f({16, 128}));
      },
      ErrorKind::kOutOfBounds, "block index 7 on axis 0 starts at element 56", line);
}

TEST(BadInputScalarPrefetch, IndexMapReadsPastThePrefetchArray) {
  const Array<int32_t> s({2}, {1, 0});
  const int line = __LINE__ + 2;
  const pl::BlockSpec in({8, 128},
                         [](int i, pltpu::SmemRef<int32_t> sr) { return pl::idx(sr(i + 2), 0); });
  const pl::BlockSpec out({8, 128}, [](int i, pltpu::SmemRef<int32_t>) { return pl::idx(i, 0); });
  auto f = pl::pallas_call(
      [](pltpu::SmemRef<int32_t>, pltpu::VmemRef<float> x, pltpu::VmemRef<float> o) { o = x; },
      pl::out_shape<float>({16, 128}),
      pltpu::PrefetchScalarGridSpec<1>(pl::grid({2}), pl::in_specs(in), pl::out_specs(out)),
      pltpu::TensorCoreMesh("core", 1));
  expect_kernel_error(
      [&] {
        f(s, iota_f({16, 128}));
      },
      ErrorKind::kOutOfBounds, "index 2 is outside 0..1 on axis 0", line);
}

// ---------------------------------------------------------------------------------------------
// Compiler params: vmem_limit_bytes in 1 .. the arena, wait_timeout_ms >= 1.

class BadInputVmemLimit : public ::testing::TestWithParam<int64_t> {};

TEST_P(BadInputVmemLimit, Kernel) {
  const int64_t v = GetParam();
  auto b =
      pl::kernel(pltpu::TensorCoreMesh("core", 1), pltpu::CompilerParams{.vmem_limit_bytes = v});
  const int line_ = __LINE__ + 1;
  EXPECT_TESSERA_ERROR(b([] {}), UsageError, ErrorKind::kInvalidArgument,
                       "vmem_limit_bytes=" + std::to_string(v) + " is outside 1..201326592", line_);
}

TEST_P(BadInputVmemLimit, PallasCall) {
  const int64_t v = GetParam();
  const int line_ = __LINE__ + 1;
  const auto g = pl::grid({1});
  auto f =
      pl::pallas_call([](pltpu::VmemRef<float> o) { o = 0.0f; }, pl::out_shape<float>({8, 128}), g,
                      pltpu::CompilerParams{.vmem_limit_bytes = v});
  EXPECT_TESSERA_ERROR(f(), UsageError, ErrorKind::kInvalidArgument,
                       "vmem_limit_bytes=" + std::to_string(v) + " is outside", line_);
}

INSTANTIATE_TEST_SUITE_P(All, BadInputVmemLimit,
                         ::testing::Values(int64_t{0}, int64_t{-1}, (int64_t{192} << 20) + 1, kMax,
                                           std::numeric_limits<int64_t>::min()));

TEST(BadInputCompilerParams, ZeroWaitTimeout) {
  auto b =
      pl::kernel(pltpu::TensorCoreMesh("core", 1), pltpu::CompilerParams{.wait_timeout_ms = 0});
  const int line_ = __LINE__ + 1;
  EXPECT_TESSERA_ERROR(b([] {}), UsageError, ErrorKind::kInvalidArgument,
                       "wait_timeout_ms=0 must be at least 1", line_);
}

TEST(BadInputCompilerParams, NegativeWaitTimeout) {
  auto b =
      pl::kernel(pltpu::TensorCoreMesh("core", 1), pltpu::CompilerParams{.wait_timeout_ms = -5});
  const int line_ = __LINE__ + 1;
  EXPECT_TESSERA_ERROR(b([] {}), UsageError, ErrorKind::kInvalidArgument, "wait_timeout_ms=-5",
                       line_);
}

TEST(BadInputCompilerParams, ScratchOverTheVmemLimit) {
  auto b =
      pl::kernel(pltpu::TensorCoreMesh("core", 1), pl::scratch_types(pltpu::VMEM<float>({1024})),
                 pltpu::CompilerParams{.vmem_limit_bytes = 1024});
  const int line_ = __LINE__ + 1;
  auto k = b([](pltpu::VmemRef<float>) {});
  EXPECT_TESSERA_ERROR(k(), UsageError, ErrorKind::kCapacityExceeded, "4096 bytes", line_);
}

TEST(BadInputCompilerParams, BlocksOverTheVmemLimit) {
  const pl::BlockSpec spec({8, 128}, [](int i) { return pl::idx(i, 0); });
  const int line_ = __LINE__ + 1;
  const auto g = pl::grid({2});
  auto f = pl::pallas_call([](pltpu::VmemRef<float> x, pltpu::VmemRef<float> o) { o = x; },
                           pl::out_shape<float>({16, 128}), g, pl::in_specs(spec),
                           pl::out_specs(spec), pltpu::CompilerParams{.vmem_limit_bytes = 4096});
  EXPECT_TESSERA_ERROR(f(iota_f({16, 128})), UsageError, ErrorKind::kCapacityExceeded,
                       "vmem_limit_bytes", line_);
  // The message names the largest uses (made only once the budget is exceeded).
  EXPECT_TESSERA_ERROR(
      f(iota_f({16, 128})), UsageError, ErrorKind::kCapacityExceeded,
      "need 16384 bytes of VMEM per core but the limit is 4096 bytes; largest: ", line_);
  EXPECT_TESSERA_ERROR(f(iota_f({16, 128})), UsageError, ErrorKind::kCapacityExceeded,
                       "x 2 buffers = 8192 bytes", line_);
}

}  // namespace
