// Internal: the part of a core's VMEM that holds in-kernel values (jnp::Value).
//
// The kernel's VMEM budget is one range of the core's arena. Its stack (arena_stack.h: scratch,
// run_scoped scopes, pipeline windows, expression temporaries) grows up from the bottom; values
// take blocks from the top down. A value's lifetime is its C++ object's, which need not nest
// with other values' (a loop rebinds `acc = acc + x`: the new value is made before the old one is
// freed), so freed blocks go to a free list that later values reuse, adjacent free blocks merge,
// and the floor rises again when the lowest block is freed. Both ends count against the same
// budget: the stack may grow up to the lowest value, a value may go down to the stack's top.
//
// The heap lives in the core's arena (which outlives every launch) and is reset when a core
// starts a kernel; each reset starts a new epoch of this heap, so a value that outlived its
// kernel is known to be dead (value_storage.h).
#pragma once

#include <cstdint>
#include <map>

namespace tessera::detail {

struct ValueHeap {
  uint64_t epoch = 0;
  int64_t floor = 0;  // values occupy [floor, limit) of the VMEM region; floor == limit: none
  int64_t limit = 0;
  int64_t held = 0;                 // bytes of live blocks
  int64_t live = 0;                 // live blocks
  std::map<int64_t, int64_t> free;  // offset -> bytes of the free ranges above floor

  /// Empties the heap for a kernel whose VMEM budget is `limit` bytes; starts a new epoch.
  void reset(int64_t limit) noexcept;
  /// The offset of `bytes` (a multiple of 64) for a new block, taken from the free list or below
  /// the floor without going under `stack_top`; -1 when they do not fit.
  int64_t allocate(int64_t bytes, int64_t stack_top);
  /// Frees the block at `offset`.
  void release(int64_t offset, int64_t bytes) noexcept;
};

struct CoreContext;
/// After a core's body returned normally: raises when values made on the core are still alive
/// (a value kept in a variable outside the body outlives the kernel it belongs to).
void check_values_released(CoreContext& ctx);

}  // namespace tessera::detail
