// The native engine's prefetch of a pipeline's next input blocks (src/runtime/step_hints.h):
// how far ahead it runs (prefetch_distance, prefetch_lead_rows), the rows a row-by-row prefetch
// requests (lead_row), and what the queue holds at each grid step of a real pipeline.
#include <gtest/gtest.h>

#include <cstdint>
#include <string>
#include <vector>

#include "runtime/step_hints.h"
#include "support/pallas_port.h"
#include "tessera/tessera.h"

namespace {
using namespace tessera;
using pallas_port::random_array;

// What the prefetch queue held at one grid step, after the step's statement drained it.
struct QueueAtStep {
  int64_t lead_rows = -1;
  std::vector<const void*> bases;  // the queued blocks
  std::vector<const void*> leads;  // their `lead` (this step's block of the same input)
};

// o = x + y over (bm, bn) blocks of (m, n) arrays, on one core, recording the queue at every
// step; `block(input, s)` is where input 0 (x) or 1 (y)'s block of step s lies.
struct Recorded {
  std::vector<QueueAtStep> steps;
  const float* base[2] = {nullptr, nullptr};
  int64_t n = 0, bm = 0, bn = 0;
  const void* block(int input, int64_t s) const {
    const int64_t gj = n / bn;
    return base[input] + (s / gj) * bm * n + (s % gj) * bn;
  }
};

Recorded record_queues(int64_t m, int64_t n, int64_t bm, int64_t bn) {
  Recorded r;
  r.n = n;
  r.bm = bm;
  r.bn = bn;
  auto k = pl::kernel(pl::out_type<float>({m, n}), pltpu::TensorCoreMesh("core", 1))(
      [&](pltpu::HbmRef<const float> x_hbm, pltpu::HbmRef<const float> y_hbm,
          pltpu::HbmRef<float> o_hbm) {
        r.base[0] = x_hbm.data();
        r.base[1] = y_hbm.data();
        const pl::BlockSpec spec({bm, bn}, [](int i, int j) { return pl::idx(i, j); });
        pltpu::emit_pipeline(
            [&](pltpu::VmemRef<const float> xv, pltpu::VmemRef<const float> yv,
                pltpu::VmemRef<float> ov) {
              ov = xv + yv;
              QueueAtStep q;
              if (detail::StepHints* h = detail::step_hints()) {
                h->prefetch.materialize();
                q.lead_rows = h->prefetch.lead_rows;
                for (int b = 0; b < h->prefetch.num; ++b) {
                  q.bases.push_back(h->prefetch.blocks[b].base);
                  q.leads.push_back(h->prefetch.blocks[b].lead);
                }
              }
              r.steps.push_back(q);
            },
            pltpu::grid({m / bm, n / bn}), pl::in_specs(spec, spec),
            pl::out_specs(spec))(x_hbm, y_hbm, o_hbm);
      });
  const Array<float> x = random_array<float>({m, n}, 3);
  const Array<float> y = random_array<float>({m, n}, 4);
  const Array<float> o = k(x, y);
  for (int64_t i = 0; i < o.size(); ++i) EXPECT_EQ(o[i], x[i] + y[i]) << i;
  EXPECT_EQ(static_cast<int64_t>(r.steps.size()), (m / bm) * (n / bn));
  return r;
}

// Forces the CPU's prefetch choices for one test, and restores them after.
struct Forced {
  Forced(int distance, int64_t lead_rows) {
    detail::set_prefetch_next_blocks_for_test(1);
    detail::set_prefetch_distance_for_test(distance);
    detail::set_prefetch_lead_rows_for_test(lead_rows);
  }
  ~Forced() {
    detail::set_prefetch_next_blocks_for_test(-1);
    detail::set_prefetch_distance_for_test(-1);
    detail::set_prefetch_lead_rows_for_test(-1);
  }
  Forced(const Forced&) = delete;
  Forced& operator=(const Forced&) = delete;
};

class PrefetchDistance : public ::testing::TestWithParam<int> {};
INSTANTIATE_TEST_SUITE_P(PrefetchQueue, PrefetchDistance, ::testing::Values(1, 2),
                         [](const auto& p) { return "Distance" + std::to_string(p.param); });

// At distance 2 the queue holds the blocks of the step after the next (step 0 also the next
// step's), across the ends of grid rows, and nothing in the last two steps; at distance 1 the
// next step's.
TEST_P(PrefetchDistance, TheQueueHoldsTheBlocksOfTheStepsAhead) {
  const int distance = GetParam();
  const Forced forced(distance, 0);
  const Recorded r = record_queues(24, 512, 8, 128);
  const auto steps = static_cast<int64_t>(r.steps.size());
  for (int64_t s = 0; s < steps; ++s) {
    std::vector<const void*> want;
    for (int input = 0; input < 2; ++input) {
      if ((distance == 1 || s == 0) && s + 1 < steps) want.push_back(r.block(input, s + 1));
      if (distance == 2 && s + 2 < steps) want.push_back(r.block(input, s + 2));
    }
    EXPECT_EQ(r.steps[static_cast<size_t>(s)].bases, want) << "step " << s;
    EXPECT_EQ(r.steps[static_cast<size_t>(s)].lead_rows, 0) << "step " << s;
  }
}

// With a lead (blocks too large to prefetch a whole block ahead), each queued next block also
// names this step's block of the same input, from whose row `lead_rows` on the row-by-row
// prefetch starts.
TEST(PrefetchQueue, TheQueueNamesThisStepsBlocksForALead) {
  const Forced forced(1, 3);
  const Recorded r = record_queues(16, 384, 8, 128);
  const auto steps = static_cast<int64_t>(r.steps.size());
  for (int64_t s = 0; s + 1 < steps; ++s) {
    const QueueAtStep& q = r.steps[static_cast<size_t>(s)];
    EXPECT_EQ(q.lead_rows, 3) << "step " << s;
    EXPECT_EQ(q.bases, (std::vector<const void*>{r.block(0, s + 1), r.block(1, s + 1)}))
        << "step " << s;
    EXPECT_EQ(q.leads, (std::vector<const void*>{r.block(0, s), r.block(1, s)})) << "step " << s;
  }
  EXPECT_TRUE(r.steps.back().bases.empty());  // the last step queues nothing
}

// The rows a row-by-row prefetch requests: with a lead, this step's block from row lead_rows on,
// then the next block's first rows; without one (or without this step's block), the next
// block's row for row.
TEST(PrefetchQueue, LeadRowWalksThisBlocksTailThenTheNextBlocksHead) {
  std::vector<std::byte> memory(4096);
  detail::PrefetchQueue::Block b;
  b.base = memory.data() + 2048;  // the next block
  b.lead = memory.data();         // this step's
  b.s1 = 100;
  b.n1 = 8;
  const int64_t rows = 8;
  std::vector<const std::byte*> got, want;
  for (int64_t r = 0; r < rows; ++r) {
    got.push_back(detail::lead_row(b, rows, 3, r));
    want.push_back(r + 3 < rows ? b.lead + (r + 3) * 100 : b.base + (r + 3 - rows) * 100);
  }
  EXPECT_EQ(got, want);
  EXPECT_EQ(detail::lead_row(b, rows, 3, 4), memory.data() + 700);
  EXPECT_EQ(detail::lead_row(b, rows, 3, 5), memory.data() + 2048);
  EXPECT_EQ(detail::lead_row(b, rows, 3, 7), memory.data() + 2248);
  for (int64_t r = 0; r < rows; ++r) {
    EXPECT_EQ(detail::lead_row(b, rows, 0, r), b.base + r * 100);
    EXPECT_EQ(detail::lead_row(b, rows, rows, r), b.base + r * 100);  // no lead of a whole block
  }
  b.lead = nullptr;
  EXPECT_EQ(detail::lead_row(b, rows, 3, 2), b.base + 200);
}

// A lead only where a whole block ahead does not fit: never for blocks that go two steps ahead
// or have few rows, always fewer rows than the block's, and what the test hook forces.
TEST(PrefetchQueue, LeadRowsFollowTheBlocksRowsAndTheL2) {
  const int64_t l2 = pltpu::get_tpu_info().cpu->l2_bytes;
  EXPECT_EQ(detail::prefetch_lead_rows(8, 16, 2 * 8 * 128 * 4 / 64), 0);  // (8, 128) f32 x 2
  EXPECT_EQ(detail::prefetch_lead_rows(1, 256, 3 * l2 / 64), 0);          // one row: no lead
  for (const int64_t rows : {int64_t{256}, int64_t{512}, int64_t{1} << 40}) {
    const int64_t lines = 2 * rows * 2048 / 64;  // two inputs of 2 KiB rows
    const int64_t lead = detail::prefetch_lead_rows(rows, 2 * rows, lines);
    EXPECT_GE(lead, 0) << rows;
    EXPECT_LT(lead, rows) << rows;
    if (lead > 0) {  // a quarter of the L2, in rows of the two inputs
      EXPECT_NEAR(static_cast<double>(lead), static_cast<double>(l2 / 4) / (2 * 2048), 1.0) << rows;
      EXPECT_EQ(detail::prefetch_distance(2 * rows, lines), 1) << rows;
    }
  }
  detail::set_prefetch_lead_rows_for_test(100);
  EXPECT_EQ(detail::prefetch_lead_rows(512, 1024, 1 << 15), 100);
  EXPECT_EQ(detail::prefetch_lead_rows(64, 128, 1 << 15), 63);
  detail::set_prefetch_lead_rows_for_test(-1);
}

// Two steps ahead only for blocks of many rows whose three steps fit the L2 the CPU reports
// (runtime/step_hints.h): never for blocks of fewer than 32 rows or for larger blocks.
TEST(PrefetchQueue, DistanceFollowsTheBlocksRowsAndTheL2) {
  const int64_t l2 = pltpu::get_tpu_info().cpu->l2_bytes;
  EXPECT_EQ(detail::prefetch_distance(16, 2 * 8 * 128 * 4 / 64), 1);  // two (8, 128) f32 blocks
  EXPECT_EQ(detail::prefetch_distance(2048, 3 * l2 / 64), 1);         // beyond the L2
  EXPECT_EQ(detail::prefetch_distance(256, 0), 1);
  const int two_128 = detail::prefetch_distance(256, 2 * 128 * 128 * 4 / 64);
  EXPECT_TRUE(two_128 == 1 || two_128 == 2);
  if (l2 < 3 * 2 * 128 * 128 * 4) {
    EXPECT_EQ(two_128, 1);
  }
  detail::set_prefetch_distance_for_test(2);
  EXPECT_EQ(detail::prefetch_distance(1, 1), 2);
  detail::set_prefetch_distance_for_test(-1);
}

}  // namespace
