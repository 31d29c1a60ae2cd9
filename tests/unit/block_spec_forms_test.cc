// The forms of pl::BlockSpec beyond (block shape, index map): no index map (Pallas' default,
// block 0 everywhere), a memory space with a block shape, `pltpu::SMEM` / `pltpu::VMEM` named as
// in Pallas, pl::BoundedSlice, and the automatic single-buffering of blocks whose index never
// changes (with pl::Buffered as the user's word), each with its errors.
#include <gtest/gtest.h>

#include <atomic>
#include <vector>

#include "support/expect_error.h"
#include "tessera/tessera.h"

namespace {
using namespace tessera;
using pltpu::ARBITRARY;
using pltpu::PARALLEL;

Array<float> iota_f(Shape shape) {
  Array<float> a(std::move(shape));
  for (int64_t i = 0; i < a.size(); ++i) a[i] = static_cast<float>(i % 977);
  return a;
}

std::vector<int64_t> vec(const detail::SmallVec& v) { return {v.begin(), v.end()}; }

TEST(BlockSpecForms, SpellingsOfTheMemorySpace) {
  const pl::BlockSpec smem(pltpu::SMEM);
  EXPECT_TRUE(smem.is_whole_array());
  EXPECT_EQ(smem.memory_space(), MemorySpace::SMEM);
  EXPECT_TRUE(smem.has_memory_space());
  EXPECT_EQ(pl::BlockSpec(MemorySpace::SMEM).memory_space(), MemorySpace::SMEM);
  EXPECT_EQ(pl::BlockSpec(pltpu::VMEM).memory_space(), MemorySpace::VMEM);
  EXPECT_FALSE(pl::BlockSpec().has_memory_space());
  const pl::BlockSpec blocked(
      {8, 128}, [](int i) { return pl::idx(i, 0); }, pltpu::SMEM, pl::Buffered(1));
  EXPECT_FALSE(blocked.is_whole_array());
  EXPECT_EQ(blocked.memory_space(), MemorySpace::SMEM);
  EXPECT_TRUE(blocked.has_pipeline_mode());
  EXPECT_EQ(blocked.pipeline_mode().buffer_count, 1);
  const pl::BlockSpec either_order(
      {8, 128}, [](int i) { return pl::idx(i, 0); }, pl::Buffered(3), pltpu::VMEM);
  EXPECT_EQ(either_order.pipeline_mode().buffer_count, 3);
  EXPECT_EQ(either_order.memory_space(), MemorySpace::VMEM);
  const pl::BlockSpec shape_and_space({8, 128}, MemorySpace::SMEM);
  EXPECT_FALSE(shape_and_space.has_index_map());
  EXPECT_EQ(shape_and_space.memory_space(), MemorySpace::SMEM);
  // Calling them still makes scratch types.
  EXPECT_EQ(pltpu::SMEM<int32_t>({4}).shape, Shape({4}));
}

TEST(BlockSpecForms, AnOptionGivenTwiceIsRefused) {
  const int line = __LINE__ + 1;
  EXPECT_TESSERA_ERROR(pl::BlockSpec(
                           {8, 128}, [](int i) { return pl::idx(i, 0); }, pltpu::SMEM, pltpu::VMEM),
                       UsageError, ErrorKind::kInvalidArgument, "memory_space is given twice",
                       line);
  const int line2 = __LINE__ + 1;
  EXPECT_TESSERA_ERROR(pl::BlockSpec({8}, pl::Buffered(1), pl::Buffered(2)), UsageError,
                       ErrorKind::kInvalidArgument, "pipeline_mode (pl::Buffered) is given twice",
                       line2);
}

TEST(BlockSpecForms, NoIndexMapMeansBlockZeroEverywhere) {
  const pl::BlockSpec spec({8, 128});
  EXPECT_FALSE(spec.has_index_map());
  EXPECT_EQ(spec.index_map_arity(), -1);
  const int64_t g[3] = {5, 6, 7};
  EXPECT_EQ(vec(spec.block_indices(g, 3).v), (std::vector<int64_t>{0, 0}));
  // In a pallas_call over any grid: every step sees rows 0..7.
  const Array<float> x = iota_f({32, 128});
  auto f = pl::pallas_call(
      [](pltpu::VmemRef<const float> xv, pltpu::VmemRef<float> ov) {
        if (pl::program_id(0) == 0) ov = jnp::zeros_like(ov);
        ov += xv;
      },
      pl::out_shape<float>({8, 128}), pl::grid({3}), pl::in_specs(pl::BlockSpec({8, 128})),
      pl::out_specs(pl::BlockSpec({8, 128})), pltpu::TensorCoreMesh("core", 1));
  const Array<float> o = f(x);
  for (int64_t i = 0; i < o.size(); ++i) ASSERT_EQ(o[i], 3 * x[i]) << i;
}

TEST(BlockSpecForms, NoIndexMapTakesAnyScalarPrefetch) {
  const Array<int32_t> s({2}, {1, 0});
  const Array<float> x = iota_f({16, 128});
  auto f = pl::pallas_call(
      [](pltpu::SmemRef<int32_t>, pltpu::VmemRef<const float> xv, pltpu::VmemRef<float> ov) {
        ov = xv;
      },
      pl::out_shape<float>({16, 128}),
      pltpu::PrefetchScalarGridSpec<1>(
          pl::grid({2}), pl::in_specs(pl::BlockSpec({8, 128})),
          pl::out_specs(pl::BlockSpec(
              {8, 128}, [](int i, pltpu::SmemRef<int32_t> sr) { return pl::idx(sr(i), 0); }))),
      pltpu::TensorCoreMesh("core", 1));
  const Array<float> o = f(s, x);
  for (int64_t r = 0; r < 16; ++r) {
    for (int64_t c = 0; c < 128; ++c) ASSERT_EQ(o(r, c), x(r % 8, c)) << r << "," << c;
  }
}

// A 10 MiB window under the 16 MiB default budget: double-buffered it would need 20 MiB.
constexpr int64_t kRows = 10 * 1024 * 1024 / (4 * 256);

TEST(BlockSpecForms, ConstantBlocksAreSingleBuffered) {
  const Array<float> w = iota_f({kRows, 256});
  const Array<float> x = iota_f({8, 256 * 4});
  const pltpu::Grid grid = pl::grid({4});
  const int grid_line = __LINE__ - 1;
  auto with_map = [&](auto spec) {
    return pl::pallas_call(
        [](pltpu::VmemRef<const float> wv, pltpu::VmemRef<const float> xv,
           pltpu::VmemRef<float> ov) { ov = xv + wv.at(pl::ds(0, 8), pl::all); },
        pl::out_shape<float>({8, 256 * 4}), grid,
        pl::in_specs(spec, pl::BlockSpec({8, 256}, [](int j) { return pl::idx(0, j); })),
        pl::out_specs(pl::BlockSpec({8, 256}, [](int j) { return pl::idx(0, j); })),
        pltpu::TensorCoreMesh("core", 1));
  };
  // An index map that ignores the grid, and no index map at all: both fit.
  for (const pl::BlockSpec& spec : {pl::BlockSpec({kRows, 256}, [](int) { return pl::idx(0, 0); }),
                                    pl::BlockSpec({kRows, 256})}) {
    const Array<float> o = with_map(spec)(w, x);
    for (int64_t r = 0; r < 8; ++r) {
      for (int64_t c = 0; c < 256 * 4; ++c) ASSERT_EQ(o(r, c), x(r, c) + w(r, c % 256));
    }
  }
  // pl::Buffered(2) is the user's word: refused, naming the 2 buffers.
  auto two = with_map(pl::BlockSpec(
      {kRows, 256}, [](int) { return pl::idx(0, 0); }, pl::Buffered(2)));
  EXPECT_TESSERA_ERROR(two(w, x), UsageError, ErrorKind::kCapacityExceeded, "x 2 buffers",
                       grid_line);
}

TEST(BlockSpecForms, ABlockThatMovesIsDoubleBuffered) {
  // The same window whose index depends on the grid axis (even if it stays in bounds only on
  // step 0 of a one-block array) double-buffers, and does not fit.
  const Array<float> w = iota_f({2 * kRows, 256});
  const pltpu::Grid grid = pl::grid({2});
  const int line = __LINE__ - 1;
  auto f = pl::pallas_call(
      [](pltpu::VmemRef<const float>, pltpu::VmemRef<float> ov) { ov = jnp::zeros_like(ov); },
      pl::out_shape<float>({8, 256}), grid,
      pl::in_specs(pl::BlockSpec({kRows, 256}, [](int i) { return pl::idx(i, 0); })),
      pl::out_specs(pl::BlockSpec({8, 256}, [](int) { return pl::idx(0, 0); })),
      pltpu::TensorCoreMesh("core", 1));
  EXPECT_TESSERA_ERROR(f(w), UsageError, ErrorKind::kCapacityExceeded, "x 2 buffers", line);
}

TEST(BlockSpecForms, IndexMapsReadingScalarPrefetchAreNotConstant) {
  // Its value depends on data: the budget counts two buffers, as Mosaic would.
  const Array<int32_t> s({2}, {0, 0});
  const Array<float> w = iota_f({kRows, 256});
  const pltpu::Grid grid = pl::grid({2});
  const int line = __LINE__ - 1;
  auto f = pl::pallas_call(
      [](pltpu::SmemRef<int32_t>, pltpu::VmemRef<const float>, pltpu::VmemRef<float> ov) {
        ov = jnp::zeros_like(ov);
      },
      pl::out_shape<float>({8, 256}),
      pltpu::PrefetchScalarGridSpec<1>(
          grid,
          pl::in_specs(pl::BlockSpec(
              {kRows, 256}, [](int i, pltpu::SmemRef<int32_t> sr) { return pl::idx(sr(i), 0); })),
          pl::out_specs(pl::BlockSpec({8, 256}))),
      pltpu::TensorCoreMesh("core", 1));
  EXPECT_TESSERA_ERROR(f(s, w), UsageError, ErrorKind::kCapacityExceeded, "x 2 buffers", line);
}

TEST(BlockSpecForms, BoundedSliceWindows) {
  const Shape array({16, 8});
  const std::vector<pl::BlockDim> block{pl::BoundedSlice(6), 8};
  const detail::BlockWindow w =
      detail::block_window(array, block, pl::idx(pl::ds(4, 5), 0), std::source_location::current());
  EXPECT_EQ(vec(w.start), (std::vector<int64_t>{4, 0}));
  EXPECT_EQ(vec(w.block), (std::vector<int64_t>{6, 8}));
  EXPECT_EQ(vec(w.valid), (std::vector<int64_t>{5, 8}));
  const std::source_location here = std::source_location::current();
  EXPECT_TESSERA_ERROR(detail::block_window(array, block, pl::idx(0, 0), here), UsageError,
                       ErrorKind::kInvalidArgument, "must return a ds from the index_map",
                       here.line());
  EXPECT_TESSERA_ERROR(detail::block_window(array, block, pl::idx(pl::ds(4, 7), 0), here),
                       UsageError, ErrorKind::kOutOfBounds, "holds 0..6 elements", here.line());
  EXPECT_TESSERA_ERROR(detail::block_window(array, block, pl::idx(pl::ds(12, 5), 0), here),
                       UsageError, ErrorKind::kOutOfBounds, "ends inside the array", here.line());
  EXPECT_TESSERA_ERROR(detail::block_window(array, block, pl::idx(pl::ds(0, 4, 2), 0), here),
                       UsageError, ErrorKind::kInvalidArgument, "with a stride", here.line());
  EXPECT_TESSERA_ERROR(
      detail::block_window(array, std::vector<pl::BlockDim>{6, 8}, pl::idx(pl::ds(0, 4), 0), here),
      UsageError, ErrorKind::kInvalidArgument, "not a pl::BoundedSlice axis", here.line());
}

TEST(BlockSpecForms, BoundedSliceNeedsAnIndexMap) {
  const Array<int32_t> x({16, 128}, 1);
  std::atomic<int> line{0};
  auto k = pl::kernel(pl::out_type<int32_t>({8, 128}), pltpu::TensorCoreMesh("core", 1))(
      [&](pltpu::HbmRef<const int32_t> x_hbm, pltpu::HbmRef<int32_t> o_hbm) {
        line = __LINE__ + 1;
        const pl::BlockSpec spec({pl::BoundedSlice(8), 128});
        pltpu::emit_pipeline(
            [](pltpu::VmemRef<const int32_t> xv, pltpu::VmemRef<int32_t> ov) { ov = xv; },
            pltpu::grid({1}), pl::in_specs(spec),
            pl::out_specs(pl::BlockSpec({8, 128})))(x_hbm, o_hbm);
      });
  tessera::testing::expect_kernel_error([&] { k(x); }, ErrorKind::kInvalidArgument,
                                        "has a pl::BoundedSlice on axis 0 but no index map", line);
}

TEST(BlockSpecForms, BoundedSliceIsNotForPallasCall) {
  // Pallas' TPU pallas_call refuses it (an unsupported block dimension type).
  const Array<float> x = iota_f({16, 128});
  const int line = __LINE__ + 5;
  auto f =
      pl::pallas_call([](pltpu::VmemRef<const float> xv, pltpu::VmemRef<float> ov) { ov = xv; },
                      pl::out_shape<float>({8, 128}), pl::grid({1}),
                      pl::in_specs(pl::BlockSpec({pl::BoundedSlice(8), 128},
                                                 [](int) { return pl::idx(pl::ds(4, 8), 0); })),
                      pl::out_specs(pl::BlockSpec({8, 128}, [](int) { return pl::idx(0, 0); })),
                      pltpu::TensorCoreMesh("core", 1));
  EXPECT_TESSERA_ERROR(f(x), UsageError, ErrorKind::kUnsupported, "use it in pltpu::emit_pipeline",
                       line);
}

}  // namespace
