// Internal: the per-core stack of a running kernel's VMEM, SMEM and semaphore memory.
//
// Each region starts above the kernel's scratch (laid out once per kernel, launch.cc); whatever a
// construct holds for a while — a run_scoped scope's buffers, a pipeline's windows, the
// temporaries of one vector assignment — is pushed on top and released in stack order through a
// StackScope, so nested scopes stack and a finished one's space is reused. The capacities are
// resolved when the core starts (the kernel's VMEM limit, SMEM, the semaphore region, capped by
// the engine's budget: a checked chip's VMEM and SMEM), and every allocation that does not fit
// raises the same kCapacityExceeded message, naming what asked, its bytes, what is in use and by
// whom, and a hint.
#pragma once

#include <cstddef>
#include <cstdint>
#include <source_location>
#include <string>

#include "tessera/detail/runtime.h"
#include "tessera/memory_space.h"

namespace tessera::detail {

class CoreArena;
struct CoreBudget;
struct ValueHeap;

/// Who holds stack memory, for capacity messages.
enum class StackUse : uint8_t { kScope, kWindow, kTemporary };

class ArenaStack {
 public:
  static constexpr int64_t kAlign = 64;
  static constexpr int kRegions = 3;  // VMEM, SMEM, semaphores
  static constexpr int kUses = 3;

  /// Where the stack stands: restoring it releases everything pushed since.
  struct Mark {
    int64_t top[kRegions];
    int64_t held[kRegions][kUses];
  };

  /// At core start: the kernel's scratch uses the first `*_used` bytes of each region. `budget`
  /// must outlive the core's run: its chip names are read only for a capacity message.
  void reset(CoreArena& arena, int64_t vmem_used, int64_t smem_used, int64_t semaphore_used,
             const CoreBudget& budget);

  /// `bytes` (64-byte aligned) of `space` for `use`, above everything held. Throws
  /// kCapacityExceeded (at `where`, as `op`) when they do not fit, naming the request by
  /// `subject` ("a pipeline window") and `detail` ("(VMEM<float32>(128, 128) x 2 buffers)"),
  /// which is only called then.
  std::byte* push(MemorySpace space, int64_t bytes, StackUse use, const char* subject,
                  FunctionRef<std::string()> detail, const char* op, std::source_location where);
  /// Throws as push would for `bytes` more of `space`, without pushing (to check a group of
  /// requests before any of them is made).
  void require(MemorySpace space, int64_t bytes, const char* subject,
               FunctionRef<std::string()> detail, const char* op, std::source_location where) const;

  /// A block of `bytes` (a multiple of 64) of VMEM for an in-kernel value, from the top of the
  /// budget down (value_heap.h); throws kCapacityExceeded as push does. Returns its offset.
  int64_t push_value(int64_t bytes, FunctionRef<std::string()> detail, const char* op,
                     std::source_location where);
  /// The core's value heap (valid after reset).
  ValueHeap& values() const noexcept { return *values_; }

  Mark mark() const noexcept;
  void release(const Mark& m) noexcept;

  /// The first free byte of `space`'s region (an offset from its base).
  int64_t top(MemorySpace space) const noexcept { return top_[index(space)]; }
  /// The region's capacity (the kernel's VMEM budget for VMEM).
  int64_t limit(MemorySpace space) const noexcept { return limit_[index(space)]; }
  /// Where the stack of `space` must end: VMEM's ends at the lowest value, the others at the
  /// limit.
  int64_t end(MemorySpace space) const noexcept;

  static int64_t align_up(int64_t v) noexcept { return (v + kAlign - 1) / kAlign * kAlign; }

 private:
  static int index(MemorySpace s) noexcept {
    return s == MemorySpace::SMEM ? 1 : s == MemorySpace::SEMAPHORE ? 2 : 0;
  }
  [[noreturn]] void over_capacity(MemorySpace space, int64_t bytes, const char* subject,
                                  FunctionRef<std::string()> detail, const char* op,
                                  std::source_location where) const;

  std::byte* base_[kRegions] = {};
  int64_t scratch_[kRegions] = {};  // the kernel's scratch at the bottom
  int64_t top_[kRegions] = {};
  int64_t limit_[kRegions] = {};
  int64_t held_[kRegions][kUses] = {};
  ValueHeap* values_ = nullptr;
  // The core's budget, for its chip names (set when a checked chip's capacity is the budget:
  // "the v4 chip's"). Kept by address: a core starts by reading only the two limits, so the
  // lines of its job holding the names stay unread (launch.cc, CoreJob).
  const CoreBudget* budget_ = nullptr;
};

/// Holds what is pushed on a core's stack while it lives; releases it when it ends.
class StackScope {
 public:
  explicit StackScope(ArenaStack& s) noexcept : stack_(s), mark_(s.mark()) {}
  ~StackScope() { stack_.release(mark_); }
  StackScope(const StackScope&) = delete;
  StackScope& operator=(const StackScope&) = delete;
  ArenaStack& stack() noexcept { return stack_; }
  /// Releases what was pushed since the scope began (the scope stays).
  void release() noexcept { stack_.release(mark_); }

 private:
  ArenaStack& stack_;
  ArenaStack::Mark mark_;
};

}  // namespace tessera::detail
