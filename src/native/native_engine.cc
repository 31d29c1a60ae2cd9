#include "native/native_engine.h"

#include <algorithm>
#include <cstdint>
#include <cstring>

#include "runtime/context.h"
#include "runtime/events.h"
#include "runtime/waits.h"

namespace tessera::detail {

void NativeEngine::copy(CoreContext* /*ctx*/, const RawRef& src, const RawRef& dst,
                        const char* /*op*/, std::source_location /*where*/) {
  strided_copy(src, dst);
}

namespace {

// The first byte of a view laid out row-major without gaps (each element once, in order), or
// null for any other layout.
const std::byte* dense_bytes(const RawRef& r) noexcept {
  return is_row_major(r.shape, r.strides) ? static_cast<const std::byte*>(r.data) : nullptr;
}

// Copies held back to be made together are at most this large: each is a few pages' worth, whose
// lines the hardware prefetchers stop fetching at every 4 KiB page boundary.
constexpr int64_t kMaxPendingBytes = int64_t{64} << 10;

}  // namespace

void flush_copies(CoreContext& ctx) noexcept {
  const int n = ctx.num_pending_copies;
  if (n == 0) return;
  ctx.num_pending_copies = 0;
  CoreContext::PendingCopy* c = ctx.pending_copies;
  // A line of each copy in turn: up to four streams of misses in flight instead of one. 64 random
  // 4 KiB pages out of 128 MiB, one core of a Sapphire Rapids class Xeon: one memcpy after the
  // other 36-42 us, four at a time line by line 26-28 us (docs/performance.md, "Paged attention,
  // ported").
  constexpr int64_t kLine = 64;
  int64_t longest = 0;
  for (int i = 0; i < n; ++i) longest = std::max(longest, c[i].bytes);
  for (int64_t at = 0; at < longest; at += kLine) {
    for (int i = 0; i < n; ++i) {
      if (at + kLine <= c[i].bytes) {
        std::memcpy(c[i].dst + at, c[i].src + at, kLine);
      } else if (at < c[i].bytes) {
        std::memcpy(c[i].dst + at, c[i].src + at, static_cast<size_t>(c[i].bytes - at));
      }
    }
  }
  for (int i = 0; i < n; ++i) add_dma_bytes(ctx, c[i].sem, c[i].bytes);
}

void NativeEngine::dma_start(CoreContext& ctx, const RawRef& src, const RawRef& dst,
                             SemaphoreCell* sem, std::source_location /*made*/,
                             std::source_location /*where*/) {
  // A CPU core has no DMA engine beside it: the copy is made by the calling core, here or, for a
  // small contiguous one, together with the next few (flush_copies). A correct kernel cannot
  // tell the difference: it touches the destination (or the semaphore) only after the copy's
  // wait, and everything that waits or reads a semaphore makes the held copies first. Traced
  // copies are made here, each timed on its own.
  const int64_t bytes = src.shape.size() * itemsize(src.dtype);
  const std::byte* from = dense_bytes(src);
  const std::byte* to = dense_bytes(dst);
  const auto apart = [bytes](const std::byte* a, const std::byte* b) {
    return reinterpret_cast<uintptr_t>(a) + static_cast<uintptr_t>(bytes) <=
           reinterpret_cast<uintptr_t>(b);
  };
  if (from != nullptr && to != nullptr && bytes > 0 && bytes <= kMaxPendingBytes &&
      (apart(from, to) || apart(to, from)) && !events_on()) {
    ctx.pending_copies[ctx.num_pending_copies++] =
        CoreContext::PendingCopy{from, const_cast<std::byte*>(to), bytes, sem};
    if (ctx.num_pending_copies == CoreContext::kMaxPendingCopies) flush_copies(ctx);
    return;
  }
  flush_copies(ctx);  // the copies started before this one land first
  {
    const CopyEvent event(src, dst, "async_copy.start");
    strided_copy(src, dst);
  }
  add_dma_bytes(ctx, sem, bytes);
}

void NativeEngine::dma_wait(CoreContext& ctx, SemaphoreCell* sem, int64_t slot, int64_t bytes,
                            const WaitSite& site) {
  flush_copies(ctx);
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
