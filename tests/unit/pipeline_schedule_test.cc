// The pipeline step schedule (src/runtime/pipeline_schedule.h): copy-in elision, write-back on
// block change, revisit detection, per-core shares, and Pallas' show_program_ids layouts
// reproduced through the same index algebra.
#include "runtime/pipeline_schedule.h"

#include <gtest/gtest.h>

#include <map>
#include <stdexcept>
#include <vector>

#include "core/error_context.h"
#include "tessera/block_spec.h"

namespace {
using namespace tessera;
using detail::PipelineCursor;
using pltpu::ARBITRARY;
using pltpu::PARALLEL;

TEST(PipelineSchedule, CopyInOnlyWhenTheBlockChangesAndWriteBackAtTheEndOfAVisit) {
  const pl::BlockSpec moving({8, 128}, [](int i, int j) { return pl::idx(i, j); });
  const pl::BlockSpec fixed({8, 128}, [](int, int) { return pl::idx(0, 0); });
  const pl::BlockSpec acc({8, 128}, [](int i, int) { return pl::idx(i, 0); });  // reduction over j
  PipelineCursor c(Shape{2, 3}, detail::SmallVec(2, 0), {&moving, &fixed, &acc}, 2);
  EXPECT_EQ(c.num_steps(), 6);
  std::vector<int> copy_moving, copy_fixed, write_acc;
  for (; !c.done(); c.advance()) {
    copy_moving.push_back(c.copy_in(0));
    copy_fixed.push_back(c.copy_in(1));
    write_acc.push_back(c.write_back(0));
  }
  EXPECT_EQ(copy_moving, (std::vector<int>{1, 1, 1, 1, 1, 1}));
  EXPECT_EQ(copy_fixed, (std::vector<int>{1, 0, 0, 0, 0, 0}));
  EXPECT_EQ(write_acc, (std::vector<int>{0, 0, 1, 0, 0, 1}));
}

TEST(PipelineSchedule, NextBlockIsTheNextStepsBlock) {
  const pl::BlockSpec s({128}, [](int i) { return pl::idx(i / 2); });
  PipelineCursor c(Shape{5}, detail::SmallVec(1, 0), {&s}, 1);
  std::vector<int64_t> blocks, nexts;
  for (; !c.done(); c.advance()) {
    blocks.push_back(c.block(0).v[0]);
    nexts.push_back(c.has_next() ? c.next_block(0).v[0] : -1);
  }
  EXPECT_EQ(blocks, (std::vector<int64_t>{0, 0, 1, 1, 2}));
  EXPECT_EQ(nexts, (std::vector<int64_t>{0, 1, 1, 2, -1}));
}

// The blocks two steps ahead (what a pipeline prefetching two steps ahead queues) are the
// blocks the walk reaches two steps later: across the ends of grid rows, within a range of
// steps, on a core's share (offsets) and in a permuted PARALLEL order; none for the last two
// steps. Evaluating them leaves the running step in the error context, and a map raising there
// leaves the walk as it was.
TEST(PipelineSchedule, AfterNextBlockIsTheBlockTwoStepsLater) {
  const pl::BlockSpec rows({8, 128}, [](int i, int j) { return pl::idx(i, 2 * j); });
  const pl::BlockSpec cols({8, 128}, [](int i, int j) { return pl::idx(j, i); });
  struct Walk {
    detail::SmallVec offset;
    int64_t begin, end;
    std::vector<std::vector<int64_t>> perm;
  };
  const std::vector<Walk> walks = {{detail::SmallVec{0, 0}, 0, -1, {}},
                                   {detail::SmallVec{3, 0}, 2, 9, {}},
                                   {detail::SmallVec{0, 0}, 1, -1, {{2, 0, 1}, {}}}};
  for (const Walk& w : walks) {
    detail::ErrorContext context;
    detail::set_current_error_context(&context);
    PipelineCursor c(Shape{3, 4}, w.offset, {&rows, &cols}, 1, w.begin, w.end, {}, w.perm);
    std::vector<detail::SmallVec> blocks[2], after[2];
    for (; !c.done(); c.advance()) {
      const std::vector<int64_t> running(c.grid_point().begin(), c.grid_point().end());
      context.grid_step = running;
      const bool has_after = c.eval_after_next();
      EXPECT_EQ(has_after, c.step() + 2 < c.num_steps()) << c.step();
      EXPECT_EQ(context.grid_step, running) << "the error context names the running step";
      for (int k = 0; k < 2; ++k) {
        blocks[k].push_back(c.block(k).v);
        if (has_after) after[k].push_back(c.after_next_block(k).v);
      }
    }
    detail::set_current_error_context(nullptr);
    ASSERT_GE(blocks[0].size(), 3u);
    for (int k = 0; k < 2; ++k) {
      EXPECT_EQ(after[k], std::vector<detail::SmallVec>(blocks[k].begin() + 2, blocks[k].end()))
          << "walk from step " << w.begin << ", operand " << k;
    }
  }
  // A map that raises two steps ahead: the exception reaches the caller (the prefetcher drops
  // it), the cursor still walks, and the step itself raises when it evaluates its map.
  const pl::BlockSpec raising({128}, [](int i) {
    if (i == 3) throw std::runtime_error("no block for step 3");
    return pl::idx(i);
  });
  PipelineCursor c(Shape{5}, detail::SmallVec{0}, {&raising}, 1);
  c.advance();
  EXPECT_THROW(c.eval_after_next(), std::runtime_error);
  EXPECT_EQ(c.block(0).v[0], 1);
  EXPECT_EQ(c.next_block(0).v[0], 2);
  EXPECT_THROW(c.advance(), std::runtime_error);
}

// Specs whose index maps are the same captureless lambda type share one identity, and the
// cursor evaluates that map once per step for all of them; any other map keeps its own.
TEST(PipelineSchedule, SharedStatelessIndexMapsGiveEachOperandItsIndices) {
  const auto rows = [](int i, int j) { return pl::idx(i, j); };
  const auto cols = [](int i, int j) { return pl::idx(j, i); };
  const int64_t shift = 1;
  const auto captured = [shift](int i, int j) { return pl::idx(i + shift - 1, j); };
  const auto sliced = [](int i, int j) { return pl::idx(pl::ds(i * 8, 8), j); };
  const pl::BlockSpec a({8, 128}, rows);
  const pl::BlockSpec b({16, 128}, rows);  // another block shape, the same map
  const pl::BlockSpec c({8, 128}, cols);
  const pl::BlockSpec d({8, 128}, captured);
  const pl::BlockSpec e({pl::BoundedSlice(8), 128}, sliced);
  const pl::BlockSpec f({pl::BoundedSlice(8), 128}, sliced);
  ASSERT_NE(a.index_map_identity(), nullptr);
  EXPECT_EQ(a.index_map_identity(), b.index_map_identity());
  EXPECT_NE(a.index_map_identity(), c.index_map_identity());
  EXPECT_EQ(d.index_map_identity(), nullptr);  // a capture is state: never shared
  EXPECT_EQ(e.index_map_identity(), f.index_map_identity());
  // Core 1 of two along axis 0 (an offset), so that global points differ from local ones.
  PipelineCursor cur(Shape{2, 3}, detail::SmallVec{2, 0}, {&a, &c, &e, &b, &d, &f}, 3);
  for (; !cur.done(); cur.advance()) {
    const int64_t i = cur.grid_point()[0];
    const int64_t j = cur.grid_point()[1];
    for (int k : {0, 3, 4}) EXPECT_EQ(cur.block(k).v, (detail::SmallVec{i, j})) << k;
    EXPECT_EQ(cur.block(1).v, (detail::SmallVec{j, i}));
    for (int k : {2, 5}) {
      EXPECT_EQ(cur.block(k).v, (detail::SmallVec{i * 8, j, 8})) << k;
      EXPECT_NE(cur.block(k).slices, 0u) << k;
    }
    EXPECT_TRUE(cur.copy_in(0) && cur.copy_in(1) && cur.copy_in(2));
    EXPECT_TRUE(cur.write_back(0) && cur.write_back(1) && cur.write_back(2));
    if (cur.has_next()) {
      EXPECT_EQ(cur.next_block(3).v, cur.next_block(0).v);
    }
  }
}

// Scalar-prefetch parameters reach a shared map as they reach any other.
TEST(PipelineSchedule, SharedIndexMapWithScalarPrefetch) {
  const auto map = [](int i, pltpu::SmemRef<int32_t> order) {
    return pl::idx(static_cast<int32_t>(order(i)));
  };
  const pl::BlockSpec in({128}, map);
  const pl::BlockSpec out({128}, map);
  ASSERT_EQ(in.index_map_identity(), out.index_map_identity());
  int32_t order[4] = {2, 2, 0, 3};
  const detail::RawRef smem{order, DType::kInt32, MemorySpace::SMEM, Shape{4}, detail::SmallVec{1}};
  PipelineCursor cur(Shape{4}, detail::SmallVec{0}, {&in, &out}, 1, 0, -1, {smem});
  std::vector<int64_t> blocks;
  std::vector<int> copies, writes;
  for (; !cur.done(); cur.advance()) {
    EXPECT_EQ(cur.block(0).v, cur.block(1).v);
    blocks.push_back(cur.block(1).v[0]);
    copies.push_back(cur.copy_in(0));
    writes.push_back(cur.write_back(0));
  }
  EXPECT_EQ(blocks, (std::vector<int64_t>{2, 2, 0, 3}));
  EXPECT_EQ(copies, (std::vector<int>{1, 0, 1, 1}));
  EXPECT_EQ(writes, (std::vector<int>{0, 1, 1, 1}));
}

TEST(PipelineSchedule, EmptyShareIsDoneAtOnce) {
  // A (1, 1) PARALLEL grid over 2 cores: core 1 gets nothing.
  const auto p = detail::partition_grid({1, 1}, {PARALLEL, ARBITRARY}, 2, 1, {});
  const pl::BlockSpec s({8, 128}, [](int i, int j) { return pl::idx(i, j); });
  PipelineCursor c(p.grid, p.offset, {&s}, 1);
  EXPECT_TRUE(c.done());
}

TEST(PipelineSchedule, CoreSharesCoverTheGridOnce) {
  // (2, 7) with (ARBITRARY, PARALLEL) on 2 cores: axis 1 is split 4 + 3.
  const pl::BlockSpec s({1, 1}, [](int i, int j) { return pl::idx(i, j); });
  std::vector<int> hits(14, 0);
  std::vector<int64_t> steps;
  for (int core = 0; core < 2; ++core) {
    const auto p = detail::partition_grid({2, 7}, {ARBITRARY, PARALLEL}, 2, core, {});
    PipelineCursor c(p.grid, p.offset, {&s}, 1);
    steps.push_back(c.num_steps());
    for (; !c.done(); c.advance())
      hits[static_cast<size_t>(c.grid_point()[0] * 7 + c.grid_point()[1])]++;
  }
  EXPECT_EQ(steps, (std::vector<int64_t>{8, 6}));
  for (int h : hits) EXPECT_EQ(h, 1);
}

TEST(PipelineSchedule, NonConsecutiveRevisitIsFoundAtIteration20) {
  // Pallas' test_revisiting_is_an_error: grid (4, 4), output map (j // 2, i % 2).
  const pl::BlockSpec out({8, 128}, [](int i, int j) { return pl::idx(j / 2, i % 2); });
  PipelineCursor c(Shape{4, 4}, detail::SmallVec(2, 0), {&out}, 0);
  detail::RevisitTracker seen;
  int64_t visit_start = 0;
  std::vector<int64_t> revisit_at;
  bool starting = true;
  for (; !c.done(); c.advance()) {
    if (starting) {
      if (seen.earlier_visit(c.block(0)) && revisit_at.empty()) {
        revisit_at = {c.grid_point()[0], c.grid_point()[1]};
      }
      visit_start = c.step();
    }
    starting = c.write_back(0);
    if (starting) seen.written_back(c.block(0), visit_start, c.step());
  }
  EXPECT_EQ(revisit_at, (std::vector<int64_t>{2, 0}));
  const auto v = seen.earlier_visit(pl::idx(0, 0));
  ASSERT_TRUE(v.has_value());
}

TEST(PipelineSchedule, RevisitTrackerInOrderAndOutOfOrder) {
  // Written back in increasing order, the tracker keeps a sorted log; the first block out of
  // order moves it to a map. Both must find every earlier visit and nothing else.
  detail::RevisitTracker t;
  for (int i = 0; i < 3; ++i)
    for (int j = 0; j < 4; ++j) {
      EXPECT_FALSE(t.earlier_visit(pl::idx(i, j)).has_value()) << i << "," << j;
      t.written_back(pl::idx(i, j), 10 * i + j, 10 * i + j + 1);
    }
  auto v = t.earlier_visit(pl::idx(1, 2));
  ASSERT_TRUE(v.has_value());
  EXPECT_EQ(v->first, 12);
  EXPECT_EQ(v->last, 13);
  EXPECT_FALSE(t.earlier_visit(pl::idx(1, 7)).has_value());  // between two logged blocks
  EXPECT_FALSE(t.earlier_visit(pl::idx(5, 0)).has_value());  // after the last
  t.written_back(pl::idx(0, 9), 40, 41);                     // out of order
  for (int i = 0; i < 3; ++i)
    for (int j = 0; j < 4; ++j) EXPECT_TRUE(t.earlier_visit(pl::idx(i, j)).has_value());
  v = t.earlier_visit(pl::idx(0, 9));
  ASSERT_TRUE(v.has_value());
  EXPECT_EQ(v->first, 40);
  EXPECT_FALSE(t.earlier_visit(pl::idx(5, 0)).has_value());
}

TEST(PipelineSchedule, RevisitTrackerAgreesWithAMapOnRunsAndBreaks) {
  // Runs of blocks along one axis share one log entry; every shape of sequence that can
  // extend or break a run (a skipped block, a new row, an uneven step spacing, a longer visit,
  // a rank-1 index) must still report exactly the visits a plain map records.
  struct Write {
    std::vector<int64_t> block;
    int64_t first, last;
  };
  auto to_indices = [](const std::vector<int64_t>& b) {
    pl::Indices i;
    for (int64_t x : b) i.v.push_back(x);
    return i;
  };
  const std::vector<std::vector<Write>> sequences = {
      // a row walked one step per block, then the next row, then a skipped block
      {{{0, 0}, 0, 0},
       {{0, 1}, 1, 1},
       {{0, 2}, 2, 2},
       {{1, 0}, 3, 3},
       {{1, 1}, 4, 4},
       {{1, 3}, 5, 5},
       {{1, 4}, 6, 6}},
      // two-step visits (accumulation), evenly spaced, then one spaced unevenly
      {{{0, 0}, 0, 1}, {{0, 1}, 2, 3}, {{0, 2}, 4, 5}, {{0, 3}, 7, 8}, {{0, 4}, 9, 10}},
      // visit lengths that change inside a row
      {{{2, 0}, 0, 0}, {{2, 1}, 1, 2}, {{2, 2}, 3, 3}, {{2, 3}, 4, 4}},
      // rank 1
      {{{0}, 0, 0}, {{1}, 1, 1}, {{2}, 2, 2}, {{5}, 3, 3}, {{6}, 4, 4}},
      // in order, then out of order (the map takes over), then in order again
      {{{0, 0}, 0, 0}, {{0, 1}, 1, 1}, {{0, 2}, 2, 2}, {{0, 1}, 3, 3}, {{3, 3}, 4, 4}},
      // a run along the first axis (a 1-D grid over rows), then blocks inside its range that
      // are not in it (the map takes over), and a revisit of one of its blocks
      {{{0, 0}, 0, 0},
       {{1, 0}, 1, 1},
       {{2, 0}, 2, 2},
       {{3, 0}, 3, 3},
       {{1, 2}, 4, 4},
       {{2, 0}, 5, 5}},
      // a run along the first axis broken by a block after its range, then a row-wise run
      {{{0, 1}, 0, 0},
       {{1, 1}, 1, 1},
       {{2, 1}, 2, 2},
       {{2, 3}, 3, 3},
       {{3, 0}, 4, 4},
       {{3, 1}, 5, 5},
       {{3, 2}, 6, 6}},
      // a run along the first axis at two-step visits, evenly spaced, then unevenly
      {{{0, 5}, 0, 1}, {{1, 5}, 2, 3}, {{2, 5}, 4, 5}, {{3, 5}, 7, 8}},
      // the second block of a run along the last axis (the predicted one) at a gap of three
      // steps, the third at that spacing, the fourth closer
      {{{1, 0}, 0, 0}, {{1, 1}, 3, 3}, {{1, 2}, 6, 6}, {{1, 3}, 7, 7}, {{1, 4}, 8, 8}},
      // the predicted second block, visited longer than the first: a new run
      {{{0, 2}, 0, 0}, {{0, 3}, 1, 2}, {{0, 4}, 3, 4}, {{1, 0}, 5, 5}},
      // a second block along the first axis (not the predicted one), then along the last
      {{{0, 3}, 0, 0}, {{1, 3}, 1, 1}, {{1, 4}, 2, 2}, {{1, 5}, 3, 3}},
      // one block written back twice (a revisit), then the predicted next block
      {{{2, 2}, 0, 0}, {{2, 2}, 1, 1}, {{2, 3}, 2, 2}},
  };
  for (size_t s = 0; s < sequences.size(); ++s) {
    detail::RevisitTracker t;
    std::map<std::vector<int64_t>, std::pair<int64_t, int64_t>> ref;
    for (const Write& w : sequences[s]) {
      t.written_back(to_indices(w.block), w.first, w.last);
      ref[w.block] = {w.first, w.last};
      // Probe every block of a 4 x 8 window (and 8 rank-1 blocks) after each write.
      for (int64_t i = 0; i < 4; ++i) {
        for (int64_t j = 0; j < 8; ++j) {
          const std::vector<int64_t> b =
              w.block.size() == 1 ? std::vector<int64_t>{j} : std::vector<int64_t>{i, j};
          const auto got = t.earlier_visit(to_indices(b));
          const auto want = ref.find(b);
          ASSERT_EQ(got.has_value(), want != ref.end())
              << "sequence " << s << " block " << i << "," << j;
          if (got) {
            EXPECT_EQ(got->first, want->second.first) << "sequence " << s;
            EXPECT_EQ(got->last, want->second.second) << "sequence " << s;
          }
        }
      }
    }
  }
}

// Pallas' show_program_ids: every grid point writes 10*i + j into its block of the output;
// what lands in the array (partial blocks clipped) follows from the cursor and block_window.
std::vector<std::vector<int>> show_program_ids(Shape x, std::vector<pl::BlockDim> block,
                                               Shape grid) {
  std::vector<std::vector<int>> out(static_cast<size_t>(x[0]),
                                    std::vector<int>(static_cast<size_t>(x[1]), 0));
  const pl::BlockSpec s({block[0], block[1]}, [](int i, int j) { return pl::idx(i, j); });
  PipelineCursor c(grid, detail::SmallVec(2, 0), {&s}, 0);
  for (; !c.done(); c.advance()) {
    const auto w = detail::block_window(x, block, c.block(0), {});
    const int v = static_cast<int>(10 * c.grid_point()[0] + c.grid_point()[1]);
    for (int64_t r = 0; r < w.valid[0]; ++r)
      for (int64_t q = 0; q < w.valid[1]; ++q)
        out[static_cast<size_t>(w.start[0] + r)][static_cast<size_t>(w.start[1] + q)] = v;
  }
  return out;
}

TEST(PipelineSchedule, ShowProgramIdsLayouts) {
  const auto a = show_program_ids({8, 6}, {2, 3}, {4, 2});
  EXPECT_EQ(a[0], (std::vector<int>{0, 0, 0, 1, 1, 1}));
  EXPECT_EQ(a[3], (std::vector<int>{10, 10, 10, 11, 11, 11}));
  EXPECT_EQ(a[7], (std::vector<int>{30, 30, 30, 31, 31, 31}));
  const auto b = show_program_ids({7, 5}, {2, 3}, {4, 2});  // partial blocks are clipped
  EXPECT_EQ(b[6], (std::vector<int>{30, 30, 30, 31, 31}));
  const auto c = show_program_ids({1, 2}, {2, 3}, {1, 1});  // array smaller than a block
  EXPECT_EQ(c[0], (std::vector<int>{0, 0}));
}

}  // namespace
