#include "native/native_engine.h"

#include "runtime/context.h"
#include "runtime/events.h"
#include "runtime/waits.h"

namespace tessera::detail {

void NativeEngine::copy(CoreContext* /*ctx*/, const RawRef& src, const RawRef& dst,
                        const char* /*op*/, std::source_location /*where*/) {
  strided_copy(src, dst);
}

void NativeEngine::dma_start(CoreContext& ctx, const RawRef& src, const RawRef& dst,
                             SemaphoreCell* sem, std::source_location /*made*/,
                             std::source_location /*where*/) {
  // The copy completes here, on the calling core: a CPU core has no DMA engine beside it, and a
  // copy deferred to its wait would only move the same work later.
  {
    const CopyEvent event(src, dst, "async_copy.start");
    strided_copy(src, dst);
  }
  add_dma_bytes(ctx, sem, src.shape.size() * itemsize(src.dtype));
}

void NativeEngine::dma_wait(CoreContext& ctx, SemaphoreCell* sem, int64_t slot, int64_t bytes,
                            const WaitSite& site) {
  block_until(ctx, *sem, slot, bytes, site);
}

void NativeEngine::signal(CoreContext& ctx, int target, int64_t slot, int64_t inc) {
  (target == ctx.core ? *ctx.arena : core_arena(target)).semaphores()[slot].fetch_add(inc);
}

bool NativeEngine::try_take(CoreContext& /*ctx*/, SemaphoreCell& cell, int64_t /*slot*/,
                            int64_t amount, const WaitSite& /*site*/) {
  return take_if_enough(cell, amount);
}

Engine& native_engine() noexcept {
  static NativeEngine engine;
  return engine;
}

}  // namespace tessera::detail
