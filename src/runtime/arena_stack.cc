#include "runtime/arena_stack.h"

#include <fmt/format.h>

#include <algorithm>
#include <cstring>

#include "core/check.h"
#include "runtime/arena.h"
#include "runtime/engine.h"
#include "runtime/value_heap.h"

namespace tessera::detail {

void ArenaStack::reset(CoreArena& arena, int64_t vmem_used, int64_t smem_used,
                       int64_t semaphore_used, const CoreBudget& budget) {
  base_[0] = arena.vmem();
  base_[1] = arena.smem();
  base_[2] = reinterpret_cast<std::byte*>(arena.semaphores());
  scratch_[0] = top_[0] = vmem_used;
  scratch_[1] = top_[1] = smem_used;
  scratch_[2] = top_[2] = semaphore_used;
  limit_[0] = budget.vmem;
  limit_[1] = budget.smem;
  limit_[2] = semaphore_capacity() * int64_t{sizeof(SemaphoreCell)};
  std::memset(held_, 0, sizeof(held_));
  values_ = &arena.values();
  values_->reset(limit_[0]);
  budget_ = &budget;
}

int64_t ArenaStack::end(MemorySpace space) const noexcept {
  const int r = index(space);
  return r == 0 && values_ != nullptr ? values_->floor : limit_[r];
}

void ArenaStack::require(MemorySpace space, int64_t bytes, const char* subject,
                         FunctionRef<std::string()> detail, const char* op,
                         std::source_location where) const {
  const int r = index(space);
  const int64_t start = align_up(top_[r]);
  const int64_t stop = end(space);
  if (bytes < 0 || bytes > stop - std::min(start, stop)) {
    over_capacity(space, bytes, subject, detail, op, where);
  }
}

int64_t ArenaStack::push_value(int64_t bytes, FunctionRef<std::string()> detail, const char* op,
                               std::source_location where) {
  const int64_t offset = values_->allocate(bytes, align_up(top_[0]));
  if (offset < 0) over_capacity(MemorySpace::VMEM, bytes, "a jnp::Value", detail, op, where);
  return offset;
}

std::byte* ArenaStack::push(MemorySpace space, int64_t bytes, StackUse use, const char* subject,
                            FunctionRef<std::string()> detail, const char* op,
                            std::source_location where) {
  require(space, bytes, subject, detail, op, where);
  const int r = index(space);
  const int64_t start = align_up(top_[r]);
  held_[r][static_cast<int>(use)] += start + bytes - top_[r];
  top_[r] = start + bytes;
  return base_[r] + start;
}

ArenaStack::Mark ArenaStack::mark() const noexcept {
  Mark m;
  std::memcpy(m.top, top_, sizeof(top_));
  std::memcpy(m.held, held_, sizeof(held_));
  return m;
}

void ArenaStack::release(const Mark& m) noexcept {
  // Marks are released in stack order: a mark above the top would be one released twice, or out
  // of order (a scope that outlived an inner one).
  for (int r = 0; r < kRegions; ++r) {
    TESSERA_DCHECK(m.top[r] <= top_[r], "an arena stack mark was released out of stack order");
  }
  std::memcpy(top_, m.top, sizeof(top_));
  std::memcpy(held_, m.held, sizeof(held_));
}

void ArenaStack::over_capacity(MemorySpace space, int64_t bytes, const char* subject,
                               FunctionRef<std::string()> detail, const char* op,
                               std::source_location where) const {
  const int r = index(space);
  const int64_t stop = end(space);
  const int64_t start = std::min(align_up(top_[r]), stop);
  static const std::string kNoChip;
  const std::string& vmem_chip = budget_ != nullptr ? budget_->vmem_chip : kNoChip;
  const std::string& smem_chip = budget_ != nullptr ? budget_->smem_chip : kNoChip;
  std::string budget;
  std::string hint;
  switch (space) {
    case MemorySpace::SMEM:
      budget = smem_chip.empty() ? std::string("SMEM") : fmt::format("{} SMEM", smem_chip);
      hint = "SMEM holds scalars: keep large buffers in VMEM";
      break;
    case MemorySpace::SEMAPHORE:
      budget = fmt::format("semaphore memory ({} semaphores of {} bytes)", semaphore_capacity(),
                           sizeof(SemaphoreCell));
      hint = "use fewer semaphores";
      break;
    default:
      budget = vmem_chip.empty() ? std::string("the kernel's VMEM budget")
                                 : fmt::format("{} VMEM per TensorCore", vmem_chip);
      hint = vmem_chip.empty()
                 ? "use smaller blocks or buffers, pl::Buffered(1), or raise "
                   "pltpu::CompilerParams{.vmem_limit_bytes = ...}"
                 : "use smaller blocks or buffers, or pl::Buffered(1) (this kernel would not fit "
                   "on that chip)";
      break;
  }
  // In use: the kernel's scratch, then what the live windows and temporaries hold (when they
  // hold anything), then the enclosing run_scoped scopes.
  const int64_t* h = held_[r];
  std::string in_use = fmt::format("the kernel's scratch uses {}", scratch_[r]);
  if (const int64_t w = h[static_cast<int>(StackUse::kWindow)]) {
    in_use += fmt::format(", pipeline windows {}", w);
  }
  if (const int64_t t = h[static_cast<int>(StackUse::kTemporary)]) {
    in_use += fmt::format(", expression temporaries {}", t);
  }
  in_use += fmt::format(", enclosing run_scoped scopes {}", h[static_cast<int>(StackUse::kScope)]);
  if (r == 0 && values_ != nullptr && values_->held > 0) {
    in_use += fmt::format(", {} live jnp::Value(s) {}", values_->live, values_->held);
  }
  raise(ErrorKind::kCapacityExceeded, op, where,
        fmt::format("{} needs {} bytes of {} {} but only {} of the {} bytes of {} are free ({}); "
                    "{}",
                    subject, bytes, to_string(space), detail(), stop - start, limit_[r], budget,
                    in_use, hint));
}

}  // namespace tessera::detail
