// Internal: the step schedule of a pipelined grid walk (emit_pipeline, pallas_call), as pure
// logic shared by the engines.
//
// Pallas' rules, per operand, for grid steps s = 0 .. S-1 of one core (row-major order):
//   input  copy-in  at step s  iff s == 0 or block(s) != block(s - 1)   (the copy is elided while
//                                                                       the block stays the same)
//   output write-back after s  iff s == S - 1 or block(s + 1) != block(s)
// so consecutive steps that map an output to the same block accumulate into one VMEM buffer. An
// output block visited again after it was written back (a non-consecutive revisit) would start
// from garbage: the RevisitTracker reports it.
//
// The cursor evaluates each index map once per step (it keeps the next step's indices for the
// write-back decision and for prefetching).
#pragma once

#include <cstdint>
#include <optional>
#include <source_location>
#include <unordered_map>
#include <vector>

#include "tessera/block_spec.h"

namespace tessera::detail {

struct ErrorContext;

/// a == b for the short index vectors of one operand (inline: no library call per step).
inline bool same_indices(const SmallVec& a, const SmallVec& b) noexcept {
  const int n = a.size();
  if (n != b.size()) return false;
  const int64_t* x = a.data();
  const int64_t* y = b.data();
  for (int i = 0; i < n; ++i) {
    if (x[i] != y[i]) return false;
  }
  return true;
}

/// Copies `n` indices (a grid point's rank: a handful) with a plain loop, which the compiler
/// keeps inline, where std::copy of a run length unknown at compile time calls memmove.
inline void copy_indices(const int64_t* src, int n, int64_t* dst) noexcept {
  for (int i = 0; i < n; ++i) dst[i] = src[i];
}

/// Writes a grid point into an error context's step (the same rank at every step of a pipeline,
/// so resized only when it changes, and copied in place).
inline void write_grid_step(const SmallVec& point, std::vector<int64_t>& step) {
  if (step.size() != static_cast<size_t>(point.size())) {
    step.resize(static_cast<size_t>(point.size()));
  }
  copy_indices(point.data(), point.size(), step.data());
}

class PipelineCursor {
 public:
  /// `specs` are the inputs then the outputs; `local_grid` and `offset` come from the core's
  /// share of the grid (partition_grid, or the whole grid with zero offsets).
  /// With `begin`/`end`, only the linear steps [begin, end) of `local_grid` are walked
  /// (pallas_call gives each core a contiguous range; end < 0 means the whole grid).
  PipelineCursor(const Shape& local_grid, const SmallVec& offset,
                 const std::vector<const pl::BlockSpec*>& specs, int num_inputs, int64_t begin = 0,
                 int64_t end = -1, const std::vector<RawRef>& scalar_prefetch = {},
                 std::vector<std::vector<int64_t>> permutations = {});
  /// A cursor to reset() before use.
  PipelineCursor() = default;
  /// Starts the walk the constructor starts, reusing this cursor's storage (a thread keeps one
  /// per nesting level of pipelines, so that a run allocates nothing).
  void reset(const Shape& local_grid, const SmallVec& offset,
             const std::vector<const pl::BlockSpec*>& specs, int num_inputs, int64_t begin,
             int64_t end, const std::vector<RawRef>& scalar_prefetch,
             std::vector<std::vector<int64_t>> permutations);

  /// True when every step has been visited (immediately for an empty grid).
  bool done() const noexcept { return done_; }
  int64_t step() const noexcept { return step_; }
  int64_t num_steps() const noexcept { return num_steps_; }
  /// The global grid point of this step (what pl::program_id reports).
  const SmallVec& grid_point() const noexcept { return identity_ ? local_ : global_; }
  /// The block indices of operand `k` (inputs first) at this step.
  const pl::Indices& block(int k) const { return cur_[at(k)]; }
  /// Whether input `i` needs its block copied in before this step's body.
  bool copy_in(int i) const { return moved_[at(i)] != 0; }
  /// Whether output `o` (0-based among outputs) is written back after this step's body.
  bool write_back(int o) const { return !has_next_ || moves_[at(num_inputs_ + o)] != 0; }
  /// Whether there is a next step, and the block operand `k` maps to there (for prefetching).
  bool has_next() const noexcept { return has_next_; }
  const pl::Indices& next_block(int k) const { return next_[at(k)]; }
  /// Whether there is a step after the next one; if so, evaluates the index maps there (once a
  /// step), for a pipeline that prefetches two steps ahead. Unlike the steps' own evaluations
  /// this one does not name its step in the error context: a prefetch is only a hint, so the
  /// caller drops whatever a map raises here, and the step raises it when it comes.
  bool eval_after_next();
  /// The block operand `k` maps to two steps ahead (after eval_after_next() returned true).
  const pl::Indices& after_next_block(int k) const { return after_[at(k)]; }
  /// Moves to the next step (steps are numbered from 0 within the range).
  void advance();

 private:
  void eval(const SmallVec& local, std::vector<pl::Indices>& out);
  // moves_ from cur_ and next_.
  void compare_next();
  // Where operand k's indices are kept: its own slot, or an earlier operand's with the same map.
  size_t at(int k) const { return at_[static_cast<size_t>(k)]; }
  // The global grid point of a local one (offsets, then permutations), into `global`.
  void to_global(const SmallVec& local, SmallVec& global) const;

  Shape grid_;
  SmallVec offset_;
  std::vector<const pl::BlockSpec*> specs_;
  // Per operand, the first operand whose spec has the same stateless index map (its own index
  // when none before it has): the map runs once per step for all of them.
  std::vector<size_t> at_;
  std::vector<size_t> slots_;  // the operands k with at_[k] == k
  int num_inputs_ = 0;
  std::vector<RawRef> prefetch_;  // passed to every index map after the grid indices
  // Per grid axis, empty or a permutation of its points (the checked engine's randomised
  // PARALLEL order): the global coordinate g becomes perm[g].
  std::vector<std::vector<int64_t>> perm_;
  int64_t num_steps_ = 0;
  int64_t step_ = 0;
  bool done_ = false;
  bool identity_ = true;  // no offsets and no permutations: global points are local ones
  bool has_next_ = false;
  SmallVec local_;
  SmallVec next_local_;
  SmallVec global_;       // the global point when not identity_
  SmallVec eval_global_;  // eval's global point (when not identity_)
  std::vector<pl::Indices> cur_;
  std::vector<pl::Indices> next_;
  std::vector<pl::Indices> after_;  // two steps ahead, for step after_step_ (eval_after_next)
  int64_t after_step_ = -1;
  SmallVec after_local_;
  // Per operand slot (at()): whether this step's block differs from the previous step's (true at
  // step 0), and whether the next step's differs from this one's (when has_next_). Compared once
  // per slot and step, however many operands and questions read them.
  std::vector<uint8_t> moved_;
  std::vector<uint8_t> moves_;
  ErrorContext* error_context_ = nullptr;  // the calling thread's (core/error_context.h)
};

/// Remembers which blocks of one output were written back, to detect non-consecutive revisits.
class RevisitTracker {
 public:
  /// Records that `block` was written back after step `step` (first visit began at `first`).
  /// (The predicted block is handled inline: it is every step's case in a grid walked in order.)
  void written_back(const pl::Indices& block, int64_t first, int64_t step) {
    if (sorted_ && expect_valid_ && same_indices(block.v, expect_block_) &&
        step - first == expect_span_ &&
        (expect_first_ >= 0 ? first == expect_first_ : first > log_.back().visit.first)) {
      // The block the last run predicts, at the step it predicts (any later step for the second
      // block of a run): the run grows by one.
      Entry& back = log_.back();
      if (back.axis < 0) {
        back.axis = expect_axis_;
        back.step_stride = first - back.visit.first;
      }
      ++back.length;
      expect_block_[back.axis] += 1;
      expect_first_ = first + back.step_stride;
      return;
    }
    written_back_unpredicted(block, first, step);
  }
  /// If `block` was already written back, the steps of that earlier visit.
  struct Visit {
    int64_t first;
    int64_t last;
  };
  std::optional<Visit> earlier_visit(const pl::Indices& block) const {
    // The block the last run predicts comes after every logged block: never a revisit.
    if (sorted_ && expect_valid_ && same_indices(block.v, expect_block_)) return std::nullopt;
    return earlier_visit_search(block);
  }
  /// Forgets every block, keeping the log's storage (a thread reuses its trackers).
  void reset() noexcept;

 private:
  // Most grids write their output blocks back in increasing (row-major) order of block index.
  // While they do, the log stays sorted: a block after the last one cannot be a revisit, and
  // any other is found by binary search, with no hashing and no allocation per step. The log
  // holds runs: blocks that follow each other along one axis (the last one for a row of blocks,
  // the first for a 1-D grid over rows), visited at evenly spaced steps, share one entry, so a
  // grid walked in order costs one entry per run, not one per step. The first block out of order
  // moves the log into the hash map, which serves from then on.
  struct Entry {
    SmallVec block;  // the run's first block
    Visit visit;     // its visit; block i of the run was visited at visit + i * step_stride
    int64_t length = 1;
    int64_t step_stride = 0;
    int axis = -1;  // the axis along which the run's blocks follow each other (-1: one block)
  };
  // Where `b` lies against the lexicographic range of run `e`, from its first to its last
  // block: -1 before, 1 after, 0 inside (a member or not: see contains()). The runs' ranges are
  // disjoint and in increasing order.
  static int compare(const Entry& e, const SmallVec& b) noexcept;
  // Whether `b` is one of the run's blocks.
  static bool contains(const Entry& e, const SmallVec& b) noexcept;
  struct Hash {
    size_t operator()(const SmallVec& v) const noexcept;
  };
  struct Eq {
    bool operator()(const SmallVec& a, const SmallVec& b) const noexcept { return a == b; }
  };
  void written_back_unpredicted(const pl::Indices& block, int64_t first, int64_t step);
  void written_back_slow(const pl::Indices& block, int64_t first, int64_t step);
  std::optional<Visit> earlier_visit_search(const pl::Indices& block) const;
  bool sorted_ = true;
  std::vector<Entry> log_;  // while sorted_
  // While sorted_: the block that would extend the last run (along its axis, or along the last
  // axis for a run of one block), the step its visit would start at (-1: any step after the
  // run's, for a run of one block) and its length (last - first); a block written back as
  // predicted extends the run without a search.
  bool expect_valid_ = false;
  int expect_axis_ = -1;
  SmallVec expect_block_;
  int64_t expect_first_ = 0;
  int64_t expect_span_ = 0;
  std::unordered_map<SmallVec, Visit, Hash, Eq> done_;  // once not
};

}  // namespace tessera::detail
