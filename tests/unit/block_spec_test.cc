// Grid and BlockSpec index algebra, as pure functions: grid order, the megacore split of
// emit_pipeline, pallas_call's per-core ranges, block windows with partial edge blocks.
#include "tessera/block_spec.h"

#include <gtest/gtest.h>

#include <vector>

#include "support/expect_error.h"

namespace {
using namespace tessera;
using pltpu::ARBITRARY;
using pltpu::PARALLEL;

std::vector<int64_t> vec(const detail::SmallVec& v) { return {v.begin(), v.end()}; }

TEST(Grid, RowMajorOrderLastAxisFastest) {
  const Shape grid{2, 3};
  detail::SmallVec idx(2, 0);
  std::vector<std::vector<int64_t>> seen{vec(idx)};
  while (detail::next_grid_point(grid, idx)) seen.push_back(vec(idx));
  const std::vector<std::vector<int64_t>> want = {{0, 0}, {0, 1}, {0, 2}, {1, 0}, {1, 1}, {1, 2}};
  EXPECT_EQ(seen, want);
  for (int64_t l = 0; l < grid.size(); ++l) {
    EXPECT_EQ(detail::linear_grid_index(grid, detail::grid_point(grid, l)), l);
  }
}

TEST(PartitionGrid, FirstEvenlyDivisibleParallelAxis) {
  const auto p0 = detail::partition_grid({4, 3}, {PARALLEL, ARBITRARY}, 2, 0, {});
  const auto p1 = detail::partition_grid({4, 3}, {PARALLEL, ARBITRARY}, 2, 1, {});
  EXPECT_EQ(p0.grid, Shape({2, 3}));
  EXPECT_EQ(vec(p0.offset), (std::vector<int64_t>{0, 0}));
  EXPECT_EQ(vec(p1.offset), (std::vector<int64_t>{2, 0}));
  // Axis 0 does not divide, axis 1 does: axis 1 is split.
  const auto q1 = detail::partition_grid({3, 4}, {PARALLEL, PARALLEL}, 2, 1, {});
  EXPECT_EQ(q1.grid, Shape({3, 2}));
  EXPECT_EQ(vec(q1.offset), (std::vector<int64_t>{0, 2}));
}

TEST(PartitionGrid, LargestParallelAxisWithRemainderToLowCores) {
  const auto a0 = detail::partition_grid({3, 5}, {PARALLEL, PARALLEL}, 2, 0, {});
  const auto a1 = detail::partition_grid({3, 5}, {PARALLEL, PARALLEL}, 2, 1, {});
  EXPECT_EQ(a0.grid, Shape({3, 3}));
  EXPECT_EQ(a1.grid, Shape({3, 2}));
  EXPECT_EQ(a1.offset[1], 3);
  // Every point covered exactly once, with counts q + (c < r) as Pallas' test expects.
  for (int cores : {2, 3, 4}) {
    for (int64_t n : {5, 7, 9, 10}) {
      std::vector<int> hits(static_cast<size_t>(n), 0);
      for (int c = 0; c < cores; ++c) {
        const auto p = detail::partition_grid({n, 2}, {PARALLEL, ARBITRARY}, cores, c, {});
        const int64_t want = n / cores + (n % cores != 0 && c < n % cores ? 1 : 0);
        if (n % cores == 0)
          EXPECT_EQ(p.grid[0], n / cores);
        else
          EXPECT_EQ(p.grid[0], want) << n << " " << cores << " " << c;
        for (int64_t i = 0; i < p.grid[0]; ++i) hits[static_cast<size_t>(p.offset[0] + i)]++;
      }
      for (int h : hits) EXPECT_EQ(h, 1);
    }
  }
}

TEST(PartitionGrid, OneCoreAndErrors) {
  const auto p = detail::partition_grid({3, 5}, {ARBITRARY, ARBITRARY}, 1, 0, {});
  EXPECT_EQ(p.grid, Shape({3, 5}));
  const int line = __LINE__ + 1;
  EXPECT_TESSERA_ERROR(
      detail::partition_grid({3, 5}, {ARBITRARY, ARBITRARY}, 2, 0, std::source_location::current()),
      UsageError, ErrorKind::kInvalidArgument, "has no PARALLEL axis", line);
  const int line2 = __LINE__ + 1;
  EXPECT_TESSERA_ERROR(
      detail::partition_grid({3, 5}, {PARALLEL}, 2, 0, std::source_location::current()), UsageError,
      ErrorKind::kInvalidArgument,
      "dimension_semantics (parallel,) has 1 entries but the grid (3, 5)", line2);
}

TEST(PallasCallRange, ContiguousChunksOfTheParallelPrefix) {
  auto r = [](Shape g, std::vector<pltpu::GridDimensionSemantics> s, int n, int c) {
    const auto x = detail::pallas_call_core_range(g, s, n, c, {});
    return std::vector<int64_t>{x.begin, x.end};
  };
  EXPECT_EQ(r({4, 3}, {PARALLEL, ARBITRARY}, 2, 0), (std::vector<int64_t>{0, 6}));
  EXPECT_EQ(r({4, 3}, {PARALLEL, ARBITRARY}, 2, 1), (std::vector<int64_t>{6, 12}));
  EXPECT_EQ(r({5, 2}, {PARALLEL, ARBITRARY}, 2, 1), (std::vector<int64_t>{6, 10}));
  EXPECT_EQ(r({2, 4}, {PARALLEL, ARBITRARY}, 3, 2), (std::vector<int64_t>{8, 8}));
  EXPECT_EQ(r({2, 4}, {ARBITRARY, ARBITRARY}, 2, 0), (std::vector<int64_t>{0, 8}));
  EXPECT_EQ(r({2, 4}, {ARBITRARY, ARBITRARY}, 2, 1), (std::vector<int64_t>{8, 8}));
  EXPECT_EQ(r({2, 4}, {PARALLEL, PARALLEL}, 1, 0), (std::vector<int64_t>{0, 8}));
  const int line = __LINE__ + 1;
  EXPECT_TESSERA_ERROR(detail::pallas_call_core_range({2, 4}, {ARBITRARY, PARALLEL}, 2, 0,
                                                      std::source_location::current()),
                       UsageError, ErrorKind::kInvalidArgument, "must form a prefix", line);
}

TEST(BlockWindow, BlockedSqueezedAndPartialEdges) {
  // A (600, 600) array in (256, 256) blocks: the last row of blocks holds 88 valid rows.
  const std::vector<pl::BlockDim> b{256, 256};
  const auto w = detail::block_window({600, 600}, b, pl::idx(2, 1), {});
  EXPECT_EQ(vec(w.start), (std::vector<int64_t>{512, 256}));
  EXPECT_EQ(vec(w.block), (std::vector<int64_t>{256, 256}));
  EXPECT_EQ(vec(w.valid), (std::vector<int64_t>{88, 256}));
  // A squeezed axis: the index is an element index, size 1.
  const std::vector<pl::BlockDim> s{pl::squeezed, 128};
  const auto ws = detail::block_window({6, 512}, s, pl::idx(3, 2), {});
  EXPECT_EQ(vec(ws.start), (std::vector<int64_t>{3, 256}));
  EXPECT_EQ(vec(ws.block), (std::vector<int64_t>{1, 128}));
}

TEST(BlockWindowErrors, OutsideAndRankMismatch) {
  const std::vector<pl::BlockDim> b{128};
  const int line = __LINE__ + 1;
  EXPECT_TESSERA_ERROR(detail::block_window({256}, b, pl::idx(2), std::source_location::current()),
                       UsageError, ErrorKind::kOutOfBounds, "starts at element 256", line);
  const int line2 = __LINE__ + 1;
  EXPECT_TESSERA_ERROR(
      detail::block_window({256, 4}, b, pl::idx(0), std::source_location::current()), UsageError,
      ErrorKind::kShapeMismatch, "has rank 2", line2);
}

TEST(BlockSpec, IndexMapsAndDefaults) {
  const pl::BlockSpec whole;
  EXPECT_TRUE(whole.is_whole_array());
  const pl::BlockSpec spec(
      {128, 256}, [](int i, int j, int k) { return pl::idx(i + j * 0, k); }, pl::Buffered(3));
  EXPECT_FALSE(spec.is_whole_array());
  EXPECT_EQ(spec.index_map_arity(), 3);
  EXPECT_EQ(spec.pipeline_mode().buffer_count, 3);
  const int64_t g[] = {4, 1, 7};
  EXPECT_EQ(vec(spec.block_indices(g, 3).v), (std::vector<int64_t>{4, 7}));
  const int line = __LINE__ + 1;
  const pl::BlockSpec two({8}, [](int i, int) { return pl::idx(i); });
  EXPECT_TESSERA_ERROR(two.block_indices(g, 3), UsageError, ErrorKind::kInvalidArgument,
                       "takes 2 grid indices but the grid has rank 3", line);
  EXPECT_STREQ(pltpu::to_string(PARALLEL), "parallel");
  EXPECT_STREQ(pltpu::to_string(ARBITRARY), "arbitrary");
}

}  // namespace
