#include "runtime/pipeline_schedule.h"

#include <algorithm>
#include <utility>

#include "core/error_context.h"

namespace tessera::detail {

PipelineCursor::PipelineCursor(const Shape& local_grid, const SmallVec& offset,
                               const std::vector<const pl::BlockSpec*>& specs, int num_inputs,
                               int64_t begin, int64_t end,
                               const std::vector<RawRef>& scalar_prefetch,
                               std::vector<std::vector<int64_t>> permutations) {
  reset(local_grid, offset, specs, num_inputs, begin, end, scalar_prefetch,
        std::move(permutations));
}

void PipelineCursor::reset(const Shape& local_grid, const SmallVec& offset,
                           const std::vector<const pl::BlockSpec*>& specs, int num_inputs,
                           int64_t begin, int64_t end, const std::vector<RawRef>& scalar_prefetch,
                           std::vector<std::vector<int64_t>> permutations) {
  grid_ = local_grid;
  offset_ = offset;
  specs_.assign(specs.begin(), specs.end());
  num_inputs_ = num_inputs;
  prefetch_.assign(scalar_prefetch.begin(), scalar_prefetch.end());
  perm_ = std::move(permutations);
  step_ = 0;
  has_next_ = false;
  const int64_t total = grid_.size();
  if (end < 0 || end > total) end = total;
  begin = std::min(std::max<int64_t>(begin, 0), end);
  num_steps_ = end - begin;
  done_ = num_steps_ == 0;
  identity_ = true;
  for (const int64_t o : offset_) identity_ = identity_ && o == 0;
  for (const auto& p : perm_) identity_ = identity_ && p.empty();
  at_.resize(specs_.size());
  for (size_t k = 0; k < specs_.size(); ++k) {
    at_[k] = k;
    const void* id = specs_[k]->index_map_identity();
    for (size_t j = 0; j < k && id != nullptr; ++j) {
      if (specs_[j]->index_map_identity() == id) {
        at_[k] = j;
        break;
      }
    }
  }
  // The error context stays the same while the cursor walks (one core's pipeline run).
  error_context_ = current_error_context();
  slots_.clear();
  for (size_t k = 0; k < specs_.size(); ++k) {
    if (at_[k] == k) slots_.push_back(k);
  }
  cur_.clear();
  next_.clear();
  cur_.resize(specs_.size());
  next_.resize(specs_.size());
  after_.resize(specs_.size());
  after_step_ = -1;
  moved_.assign(specs_.size(), 1);  // step 0 copies every input in
  moves_.assign(specs_.size(), 1);
  if (done_) return;
  local_ = detail::grid_point(grid_, begin);
  global_ = local_;
  if (!identity_) to_global(local_, global_);
  eval(local_, cur_);
  next_local_ = local_;
  has_next_ = num_steps_ > 1 && next_grid_point(grid_, next_local_);
  if (has_next_) {
    eval(next_local_, next_);
    compare_next();
  }
}

void PipelineCursor::compare_next() {
  for (const size_t k : slots_) moves_[k] = same_indices(next_[k].v, cur_[k].v) ? 0 : 1;
}

void PipelineCursor::to_global(const SmallVec& local, SmallVec& global) const {
  if (global.size() != local.size()) global.resize(local.size());  // same rank: no allocation
  for (int a = 0; a < local.size(); ++a) {
    int64_t g = local[a] + offset_[a];
    if (static_cast<size_t>(a) < perm_.size() && !perm_[static_cast<size_t>(a)].empty()) {
      g = perm_[static_cast<size_t>(a)][static_cast<size_t>(g)];
    }
    global[a] = g;
  }
}

void PipelineCursor::eval(const SmallVec& local, std::vector<pl::Indices>& out) {
  if (!identity_) to_global(local, eval_global_);
  const SmallVec& global = identity_ ? local : eval_global_;
  // The index maps run for the step at `local`, which is ahead of the running one when they
  // are evaluated for prefetching: errors raised in them name that step (the one that asked).
  // It is left there: the pipeline's step loop (src/runtime/pipeline.cc) writes the running
  // step's point before anything else reads it, and restores an outer grid's when it returns.
  if (error_context_ != nullptr) write_grid_step(global, error_context_->grid_step);
  for (size_t k = 0; k < specs_.size(); ++k) {
    // An operand with an earlier one's map reads that one's indices (at()): not evaluated.
    if (at_[k] != k) continue;
    // (A move: no allocation while the indices fit SmallVec's inline storage.)
    out[k] = specs_[k]->map_block(global.data(), prefetch_.data());
  }
}

bool PipelineCursor::eval_after_next() {
  if (!has_next_ || step_ + 2 >= num_steps_) return false;
  if (after_step_ == step_) return true;
  after_local_ = next_local_;
  if (!next_grid_point(grid_, after_local_)) return false;
  if (!identity_) to_global(after_local_, eval_global_);
  const SmallVec& global = identity_ ? after_local_ : eval_global_;
  for (const size_t k : slots_) after_[k] = specs_[k]->map_block(global.data(), prefetch_.data());
  after_step_ = step_;
  return true;
}

void PipelineCursor::advance() {
  if (!has_next_) {
    done_ = true;
    return;
  }
  ++step_;
  copy_indices(next_local_.data(), next_local_.size(), local_.data());  // same rank
  if (!identity_) to_global(local_, global_);  // (else grid_point() is local_ itself)
  // Rotate the index vectors (eval overwrites next_'s elements in place): no allocation per
  // step. What moved from the last step to this one is what was to move.
  std::swap(cur_, next_);
  std::swap(moved_, moves_);
  has_next_ = step_ + 1 < num_steps_ && next_grid_point(grid_, next_local_);
  if (has_next_) {
    eval(next_local_, next_);
    compare_next();
  }
}

size_t RevisitTracker::Hash::operator()(const SmallVec& v) const noexcept {
  size_t h = 0xcbf29ce484222325ull;
  for (int64_t x : v) h = (h ^ static_cast<size_t>(x)) * 0x100000001b3ull;
  return h;
}

int RevisitTracker::compare(const Entry& e, const SmallVec& b) noexcept {
  // Lexicographic (row-major) order against the run's first and last blocks.
  const int rank = e.block.size();
  for (int d = 0; d < rank; ++d) {
    if (b[d] != e.block[d]) {
      if (b[d] < e.block[d]) return -1;
      break;
    }
  }
  for (int d = 0; d < rank; ++d) {
    const int64_t last = d == e.axis ? e.block[d] + e.length - 1 : e.block[d];
    if (b[d] != last) return b[d] > last ? 1 : 0;
  }
  return 0;
}

bool RevisitTracker::contains(const Entry& e, const SmallVec& b) noexcept {
  const int rank = e.block.size();
  for (int d = 0; d < rank; ++d) {
    if (d == e.axis) {
      if (b[d] < e.block[d] || b[d] >= e.block[d] + e.length) return false;
    } else if (b[d] != e.block[d]) {
      return false;
    }
  }
  return true;
}

void RevisitTracker::written_back_unpredicted(const pl::Indices& block, int64_t first,
                                              int64_t step) {
  written_back_slow(block, first, step);
  expect_valid_ = false;
  if (sorted_ && !log_.empty()) {
    const Entry& back = log_.back();
    // A run of one block may grow along any axis; the last one is predicted (a row of blocks).
    expect_axis_ = back.axis >= 0 ? back.axis : back.block.size() - 1;
    if (expect_axis_ < 0) return;
    expect_block_ = back.block;
    expect_block_[expect_axis_] += back.length;
    expect_first_ = back.axis >= 0 ? back.visit.first + back.length * back.step_stride : -1;
    expect_span_ = back.visit.last - back.visit.first;
    expect_valid_ = true;
  }
}

void RevisitTracker::reset() noexcept {
  sorted_ = true;
  log_.clear();
  expect_valid_ = false;
  done_.clear();
}

void RevisitTracker::written_back_slow(const pl::Indices& block, int64_t first, int64_t step) {
  if (sorted_) {
    if (log_.empty()) {
      log_.push_back(Entry{block.v, Visit{first, step}});
      return;
    }
    Entry& back = log_.back();
    if (compare(back, block.v) > 0) {
      // Extend the run when this block is the next one along the run's axis (any one axis for a
      // run of one block), visited for as many steps as the run's blocks, at the run's step
      // spacing.
      const int rank = block.v.size();
      int axis = -1;
      bool next_block = rank > 0;
      for (int d = 0; d < rank && next_block; ++d) {
        const int64_t last = d == back.axis ? back.block[d] + back.length - 1 : back.block[d];
        if (block.v[d] == last) continue;
        const bool along = (back.length == 1 || d == back.axis) && block.v[d] == last + 1;
        next_block = along && axis < 0;
        axis = d;
      }
      next_block = next_block && axis >= 0;
      const int64_t gap = first - (back.visit.first + (back.length - 1) * back.step_stride);
      const bool same_visit = step - first == back.visit.last - back.visit.first;
      if (next_block && same_visit && gap > 0 && (back.length == 1 || gap == back.step_stride)) {
        back.axis = axis;
        back.step_stride = gap;
        ++back.length;
        return;
      }
      log_.push_back(Entry{block.v, Visit{first, step}});
      return;
    }
    sorted_ = false;
    size_t blocks = 0;
    for (const Entry& e : log_) blocks += static_cast<size_t>(e.length);
    done_.reserve(blocks * 2);
    for (const Entry& e : log_) {
      for (int64_t i = 0; i < e.length; ++i) {
        SmallVec b = e.block;
        if (e.axis >= 0) b[e.axis] += i;
        done_.emplace(std::move(b),
                      Visit{e.visit.first + i * e.step_stride, e.visit.last + i * e.step_stride});
      }
    }
    log_.clear();
    log_.shrink_to_fit();
  }
  done_.insert_or_assign(block.v, Visit{first, step});
}

std::optional<RevisitTracker::Visit> RevisitTracker::earlier_visit_search(
    const pl::Indices& block) const {
  if (sorted_) {
    // After the last run (the next row of blocks, the second block of a run): never a revisit,
    // found without searching the log.
    if (log_.empty() || compare(log_.back(), block.v) > 0) return std::nullopt;
    // The last run that does not start after `block`.
    const auto it =
        std::upper_bound(log_.begin(), log_.end(), block.v,
                         [](const SmallVec& v, const Entry& e) { return compare(e, v) < 0; });
    if (it == log_.begin()) return std::nullopt;
    const Entry& e = *(it - 1);
    if (compare(e, block.v) != 0 || !contains(e, block.v)) return std::nullopt;
    const int64_t i = e.axis < 0 ? 0 : block.v[e.axis] - e.block[e.axis];
    return Visit{e.visit.first + i * e.step_stride, e.visit.last + i * e.step_stride};
  }
  auto it = done_.find(block.v);
  if (it == done_.end()) return std::nullopt;
  return it->second;
}

}  // namespace tessera::detail
