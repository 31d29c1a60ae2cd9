// Internal: the native engine (runtime/engine.h) — cores compute at the machine's speed, a copy
// is a strided memmove on the calling core, an async copy completes inside its start, semaphores
// are bare atomic counters, and nothing is checked beyond what the runtime checks for every
// engine. Its pipelines may use blocks where they lie in HBM (runtime/pipeline.cc).
#pragma once

#include <source_location>
#include <vector>

#include "runtime/engine.h"
#include "tessera/detail/expr_program.h"

namespace tessera::detail {

class NativeEngine final : public Engine {
 public:
  void copy(CoreContext* ctx, const RawRef& src, const RawRef& dst, const char* op,
            std::source_location where) override;
  void dma_start(CoreContext& ctx, const RawRef& src, const RawRef& dst, SemaphoreCell* sem,
                 std::source_location made, std::source_location where) override;
  void dma_wait(CoreContext& ctx, SemaphoreCell* sem, int64_t slot, int64_t bytes,
                const WaitSite& site) override;
  void signal(CoreContext& ctx, int target, int64_t slot, int64_t inc) override;
  bool try_take(CoreContext& ctx, SemaphoreCell& cell, int64_t slot, int64_t amount,
                const WaitSite& site) override;
  bool spin_before_sleep() const noexcept override { return true; }
};

/// Copies the elements of `src` into `dst` (equal shapes and dtypes; overlapping views copy as
/// memmove does run by run). The one copy both engines move bytes with.
void strided_copy(const RawRef& src, const RawRef& dst);

/// Copies `n` bytes from `src` to `dst` (not overlapping), storing the whole 64-byte lines of
/// `dst` with streaming (non-temporal) stores on x86 and the ends with memcpy; memcpy elsewhere.
/// The caller fences (_mm_sfence) before it publishes the bytes. strided_copy uses it for
/// copies that do not stay in the caches.
void streaming_copy(void* dst, const void* src, size_t n);

/// Evaluates an expression's nodes (in ExprProgram order) into `dst` with the native evaluator,
/// without the engine's hooks. `stack_temporaries`: inside a kernel, the temporaries of
/// non-elementwise nodes come from the core's stack and count against its VMEM budget (a
/// kernel's own assignment); false: from the heap (the checked engine's evaluations of its books,
/// which are not the kernel's).
void evaluate_nodes(const std::vector<ExprNode>& nodes, std::source_location where,
                    const RawRef& dst, bool stack_temporaries);

/// Takes `amount` from `cell` if it holds that much (one compare-and-swap loop).
inline bool take_if_enough(SemaphoreCell& cell, int64_t amount) noexcept {
  int64_t v = cell.load();
  while (v >= amount) {
    if (cell.compare_exchange_weak(v, v - amount)) return true;
  }
  return false;
}

}  // namespace tessera::detail
