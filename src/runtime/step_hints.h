// Internal: what a running pipeline step tells the native vector evaluator about its blocks —
// which output blocks it may store into with streaming stores, and which lines of the next
// step's input blocks to prefetch while this step computes.
#pragma once

#include <cstddef>
#include <cstdint>

namespace tessera::detail {

/// The lines of the next grid step's input blocks, which the native engine prefetches a few at a
/// time while the current step computes (the vector evaluator drains it tile by tile), so that
/// the next blocks arrive while this one is worked on, as a TPU's DMA engine would overlap them.
struct PrefetchQueue {
  struct Block {
    const std::byte* base = nullptr;
    int64_t row_bytes = 0;   // the contiguous innermost run
    int64_t n1 = 1, s1 = 0;  // rows: n1 x n2, at byte strides s1 (inner) and s2 (outer)
    int64_t n2 = 1, s2 = 0;
    // The block this step reads for the same input, or null: with the queue's `lead_rows`, a
    // row-by-row prefetch requests its rows from lead_rows on before the next block's (lead_row).
    const std::byte* lead = nullptr;
  };
  static constexpr int kMaxBlocks = 8;
  Block blocks[kMaxBlocks];
  int num = 0;
  // Position of the next line to prefetch.
  int cur = 0;
  int64_t r1 = 0, r2 = 0, byte = 0;
  // Lines to prefetch per 64 bytes the evaluator stores, in 1/256 units, and the carry.
  int64_t ratio_q8 = 0;
  int64_t credit = 0;
  // Prefetch into L2 only (x86 prefetcht1) rather than L1: set when the queued lines are more
  // than half the L1 data cache, where bringing them into L1 would evict the lines this step is
  // still working on.
  bool to_l2 = false;
  // Rows ahead of the evaluation that a row-by-row prefetch runs within this step's blocks
  // (every queued block has its `lead`), rather than a whole block ahead: 0 for a whole block.
  int64_t lead_rows = 0;
  // The blocks are queued lazily, on the first drain (or materialize()): a step whose body
  // evaluates nothing costs nothing for them.
  void (*fill)(const void* ctx, PrefetchQueue& q) noexcept = nullptr;
  const void* fill_ctx = nullptr;
  // The bases of the blocks the step before queued (clear() keeps them): a pipeline prefetching
  // two steps ahead uses those blocks at the step after this one, which the trace reports.
  const std::byte* earlier[kMaxBlocks] = {};
  int num_earlier = 0;
  bool active() const noexcept { return cur < num || fill != nullptr; }
  /// Queues the blocks now, if that has not happened yet.
  void materialize() noexcept {
    if (fill != nullptr) {
      const auto f = fill;
      fill = nullptr;
      f(fill_ctx, *this);
    }
  }
  void clear() noexcept {
    for (int i = 0; i < num; ++i) earlier[i] = blocks[i].base;
    num_earlier = num;
    num = cur = 0;
    r1 = r2 = byte = credit = ratio_q8 = lead_rows = 0;
    to_l2 = false;
    fill = nullptr;
    fill_ctx = nullptr;
  }
};

/// Prefetches the lines that `stored_bytes` of evaluator output pay for (see PrefetchQueue).
void drain_prefetch(PrefetchQueue& q, int64_t stored_bytes) noexcept;

/// The row of queued block `b` that a row-by-row prefetch requests while the evaluation computes
/// row `r` (0 <= r < rows) of a step whose blocks have `rows` rows: row r of the next block, or
/// with 0 < lead_rows < rows, row r + lead_rows of this step's block (`b.lead`) while there is
/// one, then row r + lead_rows - rows of the next block.
inline const std::byte* lead_row(const PrefetchQueue::Block& b, int64_t rows, int64_t lead_rows,
                                 int64_t r) noexcept {
  if (lead_rows <= 0 || lead_rows >= rows || b.lead == nullptr) return b.base + r * b.s1;
  const int64_t ahead = r + lead_rows;
  return ahead < rows ? b.lead + ahead * b.s1 : b.base + (ahead - rows) * b.s1;
}

/// Whether a pipeline whose input blocks span `step_lines` cache lines a grid step prefetches
/// the next step's blocks in software. Other CPUs than Intel's always do (on an AMD Zen 4 class
/// EPYC the prefetches took the (128, 128) pipelined add from 0.8x to 1.15x the plain loop).
/// Intel cores do only when those lines are few, at most a quarter of the L1 data cache the CPU
/// reports: their L2 streamer follows a large block's rows once the first lines of a row are
/// read, and software prefetches of every line only compete with it for the L1 fill buffers (a
/// Sapphire Rapids class Xeon: (128, 128) blocks 0.86x the plain loop with them, 1.02x
/// without), but a small block's step is short enough that its fixed work leaves the memory idle
/// between the streamer's bursts, and the next block requested during the compute fills that gap
/// ((8, 128) blocks 5-6% faster, (4, 128) 14-16%; docs/performance.md). Decided per pipeline.
bool prefetch_next_blocks(int64_t step_lines) noexcept;
/// Test hook: 1 makes every CPU's pipelines prefetch the next blocks, 0 makes none, -1 restores
/// the CPU's choice. Not for use while a pipeline runs.
void set_prefetch_next_blocks_for_test(int mode) noexcept;

/// How many grid steps ahead a pipeline prefetches its input blocks: 2 or 1, for blocks of
/// `step_rows` rows and `step_lines` cache lines a step (all its prefetched inputs together).
/// Two when the prefetches go to L2 (choose_prefetch_level), the blocks have at least 32 rows,
/// and three steps' blocks fit the L2 the CPU reports for a core; one otherwise. A block's rows
/// are separate runs of memory, more than the hardware's stream prefetchers follow at once, and
/// on an AMD Zen 4 class EPYC asking for each a step earlier took the 8192² pipelined add on one
/// core from 43-50 to 36-41 ms with (128, 128) blocks, 8-18% with (16..256, 128) blocks, and
/// nothing with blocks of 8 rows or of long rows, on two cores -8% to +2% (docs/performance.md,
/// "Prefetching two steps ahead").
int prefetch_distance(int64_t step_rows, int64_t step_lines) noexcept;
/// Test hook: 1 or 2 forces that distance, -1 restores the CPU's choice. Not for use while a
/// pipeline runs.
void set_prefetch_distance_for_test(int distance) noexcept;

/// How many rows ahead of the evaluation a pipeline whose steps read blocks of `block_rows` rows
/// prefetches, within the step's own blocks and then the next step's (PrefetchQueue::lead_rows),
/// for blocks too large to prefetch two steps ahead: 0 (a whole block ahead) unless the
/// prefetches go to L2, the step's input blocks have at least 32 rows (`step_rows`) and span
/// more than a quarter of the L2 the CPU reports (`step_lines`); then the rows that make a
/// quarter of the L2, at least 1 and fewer than block_rows. A whole block ahead, such blocks'
/// lines were evicted from the L2 before their step came: on an AMD Zen 4 class EPYC a lead of
/// 32-128 rows took the 8192² pipelined add with (512, 512) blocks from 25-30 to 21-23 ms on two
/// cores and (256, 256) ones from 25-34 to 22-27 (docs/performance.md, "A lead within the
/// block").
int64_t prefetch_lead_rows(int64_t block_rows, int64_t step_rows, int64_t step_lines) noexcept;
/// Test hook: rows >= 0 forces that lead (capped below the block's rows), -1 restores the CPU's
/// choice. Not for use while a pipeline runs.
void set_prefetch_lead_rows_for_test(int64_t rows) noexcept;

/// Sets `q.to_l2` for `lines` queued lines: L2 unless they fit half the L1 data cache this CPU
/// reports and the CPU is Intel's (step_hints.cc has the measurements).
void choose_prefetch_level(PrefetchQueue& q, int64_t lines) noexcept;

/// What a running pipeline step tells the vector evaluator (native engine only).
struct StepHints {
  /// Output blocks written in place and visited for this one step: stores into them stream past
  /// the caches (non-temporal), since nothing reads them back soon.
  static constexpr int kMaxSpans = 8;
  const std::byte* stream_lo[kMaxSpans] = {};
  const std::byte* stream_hi[kMaxSpans] = {};
  int num_stream = 0;
  bool streamed = false;  // a streaming store happened: fence before the step ends
  PrefetchQueue prefetch;
};

/// The calling thread's step hints, or null when no pipeline step runs on it.
StepHints* step_hints() noexcept;

/// A pipeline's hints become the thread's for its life (an enclosing pipeline's come back
/// after).
class HintsScope {
 public:
  explicit HintsScope(StepHints* h) noexcept;
  ~HintsScope();
  HintsScope(const HintsScope&) = delete;
  HintsScope& operator=(const HintsScope&) = delete;

 private:
  StepHints* saved_;
};

struct RawRef;
/// Queues the lines of `hbm` (a block view) for prefetching; returns the lines queued. Views the
/// queue cannot describe (more than two outer axes, a strided innermost axis) are skipped.
int64_t queue_prefetch(PrefetchQueue& q, const RawRef& hbm);

}  // namespace tessera::detail
