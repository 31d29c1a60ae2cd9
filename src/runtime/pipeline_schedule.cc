#include "runtime/pipeline_schedule.h"

#include <algorithm>
#include <utility>

namespace tessera::detail {

PipelineCursor::PipelineCursor(Shape local_grid, SmallVec offset,
                               std::vector<const pl::BlockSpec*> specs, int num_inputs,
                               int64_t begin, int64_t end, std::vector<RawRef> scalar_prefetch,
                               std::vector<std::vector<int64_t>> permutations)
    : grid_(std::move(local_grid)),
      offset_(std::move(offset)),
      specs_(std::move(specs)),
      num_inputs_(num_inputs),
      prefetch_(std::move(scalar_prefetch)),
      perm_(std::move(permutations)) {
  const int64_t total = grid_.size();
  if (end < 0 || end > total) end = total;
  begin = std::min(std::max<int64_t>(begin, 0), end);
  num_steps_ = end - begin;
  done_ = num_steps_ == 0;
  if (done_) return;
  local_ = detail::grid_point(grid_, begin);
  global_ = to_global(local_);
  eval(local_, cur_);
  prev_ = cur_;
  next_local_ = local_;
  has_next_ = num_steps_ > 1 && next_grid_point(grid_, next_local_);
  if (has_next_) eval(next_local_, next_);
}

SmallVec PipelineCursor::to_global(const SmallVec& local) const {
  SmallVec global = local;
  for (int a = 0; a < global.size(); ++a) {
    global[a] += offset_[a];
    if (static_cast<size_t>(a) < perm_.size() && !perm_[static_cast<size_t>(a)].empty()) {
      global[a] = perm_[static_cast<size_t>(a)][static_cast<size_t>(global[a])];
    }
  }
  return global;
}

void PipelineCursor::eval(const SmallVec& local, std::vector<pl::Indices>& out) const {
  const SmallVec global = to_global(local);
  out.resize(specs_.size());
  for (size_t k = 0; k < specs_.size(); ++k) {
    out[k] = specs_[k]->block_indices(global.data(), global.size(), prefetch_.data(),
                                      static_cast<int>(prefetch_.size()));
  }
}

bool PipelineCursor::copy_in(int i) const {
  return step_ == 0 || !(cur_[static_cast<size_t>(i)].v == prev_[static_cast<size_t>(i)].v);
}

bool PipelineCursor::write_back(int o) const {
  const size_t k = static_cast<size_t>(num_inputs_ + o);
  return !has_next_ || !(next_[k].v == cur_[k].v);
}

void PipelineCursor::advance() {
  if (!has_next_) {
    done_ = true;
    return;
  }
  ++step_;
  local_ = next_local_;
  global_ = to_global(local_);
  prev_ = std::move(cur_);
  cur_ = std::move(next_);
  next_ = {};
  has_next_ = step_ + 1 < num_steps_ && next_grid_point(grid_, next_local_);
  if (has_next_) eval(next_local_, next_);
}

size_t RevisitTracker::Hash::operator()(const SmallVec& v) const noexcept {
  size_t h = 0xcbf29ce484222325ull;
  for (int64_t x : v) h = (h ^ static_cast<size_t>(x)) * 0x100000001b3ull;
  return h;
}

namespace {
// Lexicographic order of block indices of one rank.
bool index_less(const SmallVec& a, const SmallVec& b) noexcept {
  return std::lexicographical_compare(a.begin(), a.end(), b.begin(), b.end());
}
}  // namespace

void RevisitTracker::written_back(const pl::Indices& block, int64_t first, int64_t step) {
  if (sorted_) {
    if (log_.empty() || index_less(log_.back().block, block.v)) {
      log_.push_back(Entry{block.v, Visit{first, step}});
      return;
    }
    sorted_ = false;
    done_.reserve(log_.size() * 2);
    for (Entry& e : log_) done_.emplace(std::move(e.block), e.visit);
    log_.clear();
    log_.shrink_to_fit();
  }
  done_.insert_or_assign(block.v, Visit{first, step});
}

std::optional<RevisitTracker::Visit> RevisitTracker::earlier_visit(const pl::Indices& block) const {
  if (sorted_) {
    if (log_.empty() || index_less(log_.back().block, block.v)) return std::nullopt;
    const auto it =
        std::lower_bound(log_.begin(), log_.end(), block.v,
                         [](const Entry& e, const SmallVec& v) { return index_less(e.block, v); });
    if (it == log_.end() || !(it->block == block.v)) return std::nullopt;
    return it->visit;
  }
  auto it = done_.find(block.v);
  if (it == done_.end()) return std::nullopt;
  return it->second;
}

}  // namespace tessera::detail
