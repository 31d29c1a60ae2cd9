// DMAs as the kernel calls them: sync_copy and a pipeline's copies (dma_copy), and async copy
// descriptors. The runtime validates (shapes, dtypes, the semaphore's core, one start per wait)
// and reports the event; the engine moves the bytes and counts them on the semaphore.
#include "tessera/dma.h"

#include <fmt/format.h>

#include <iterator>
#include <utility>

#include "core/messages.h"
#include "runtime/context.h"
#include "runtime/copy_check.h"
#include "runtime/engine.h"
#include "runtime/events.h"
#include "runtime/waits.h"

namespace tessera::detail {

void check_copy_sides(const Shape& src_shape, DType src_dtype, MemorySpace src_space,
                      const Shape& dst_shape, DType dst_dtype, MemorySpace dst_space,
                      const char* op, std::source_location where) {
  if (src_shape != dst_shape) {
    raise(ErrorKind::kShapeMismatch, op, where,
          fmt::format("source {} ref of shape {} and destination {} ref of shape {} differ; a "
                      "copy needs equal shapes (slice one side with .at(...))",
                      to_string(src_space), src_shape.to_string(), to_string(dst_space),
                      dst_shape.to_string()));
  }
  if (src_dtype != dst_dtype) {
    raise(ErrorKind::kDtypeMismatch, op, where,
          fmt::format("source dtype {} and destination dtype {} differ", dtype_name(src_dtype),
                      dtype_name(dst_dtype)));
  }
}

namespace {
void validate_copy(const RawRef& src, const RawRef& dst, const char* op,
                   std::source_location where) {
  check_copy_sides(src.shape, src.dtype, src.space, dst.shape, dst.dtype, dst.space, op, where);
}
}  // namespace

void dma_copy(const RawRef& src, const RawRef& dst, const char* op, std::source_location where) {
  validate_copy(src, dst, op, where);
  const CopyEvent event(src, dst, op);
  CoreContext* ctx = current_context();
  (ctx != nullptr ? *ctx->engine : native_engine()).copy(ctx, src, dst, op, where);
}

}  // namespace tessera::detail

namespace tessera::pltpu {

AsyncCopyDescriptor::AsyncCopyDescriptor(detail::RawRef src, detail::RawRef dst,
                                         detail::SemaphoreCell* sem, std::source_location made)
    : src_(std::move(src)), dst_(std::move(dst)), sem_(sem), made_(made) {}

AsyncCopyDescriptor::AsyncCopyDescriptor(
    std::vector<std::pair<detail::RawRef, detail::RawRef>> parts, detail::SemaphoreCell* sem,
    std::source_location made)
    : src_(std::move(parts.front().first)),
      dst_(std::move(parts.front().second)),
      more_(std::make_move_iterator(parts.begin() + 1), std::make_move_iterator(parts.end())),
      sem_(sem),
      made_(made) {}

int64_t AsyncCopyDescriptor::nbytes() const noexcept {
  int64_t bytes = src_.shape.size() * itemsize(src_.dtype);
  for (const auto& part : more_) bytes += part.first.shape.size() * itemsize(part.first.dtype);
  return bytes;
}

void AsyncCopyDescriptor::start(std::source_location where) {
  constexpr const char* op = "async_copy.start";
  detail::CoreContext& ctx = detail::context_for(op, where);
  detail::own_slot(ctx, sem_, op, where);
  if (in_flight_) {
    detail::raise(
        ErrorKind::kInvalidArgument, op, where,
        fmt::format("this descriptor (made at {}) was started at {} and has not been "
                    "waited since; each .start() needs a .wait() before the next one "
                    "(for a second copy in flight, make a second descriptor)",
                    detail::format_location(made_), detail::format_location(started_at_)));
  }
  detail::validate_copy(src_, dst_, op, where);
  for (const auto& [s, d] : more_) detail::validate_copy(s, d, op, where);
  settle_streams(ctx);
  ctx.engine->dma_start(ctx, src_, dst_, sem_, made_, where);
  for (const auto& [s, d] : more_) ctx.engine->dma_start(ctx, s, d, sem_, made_, where);
  in_flight_ = true;
  started_at_ = where;
}

void AsyncCopyDescriptor::wait(std::source_location where) {
  constexpr const char* op = "async_copy.wait";
  detail::CoreContext& ctx = detail::context_for(op, where);
  const int64_t slot = detail::own_slot(ctx, sem_, op, where);
  detail::WaitSite site{op, where};
  site.dma_src = &src_;
  ctx.engine->dma_wait(ctx, sem_, slot, nbytes(), site);
  in_flight_ = false;
}

}  // namespace tessera::pltpu
