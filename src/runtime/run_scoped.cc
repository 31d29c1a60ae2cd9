// pl::run_scoped: a scope's buffers and semaphores, pushed on the core's stack (arena_stack.h)
// above the kernel's scratch and any enclosing scope, and released when the scope ends, so nested
// scopes stack and a finished scope's space is reused.
#include "tessera/run_scoped.h"

#include <fmt/format.h>

#include <cstring>
#include <string>
#include <utility>
#include <vector>

#include "core/messages.h"
#include "runtime/context.h"
#include "runtime/engine.h"
#include "runtime/waits.h"

namespace tessera::detail {

namespace {
static_assert(sizeof(ArenaStack::Mark) == sizeof(int64_t) * 12,
              "ScopedScratch keeps an ArenaStack::Mark in 12 words");

// "(#0 VMEM<float32>(8, 128) = 4096 bytes, #2 ...)": the scope's requests of one space.
std::string scope_text(const ScratchRequest* requests, int n, MemorySpace space) {
  std::vector<std::string> parts;
  for (int i = 0; i < n; ++i) {
    if (requests[i].space == space) {
      parts.push_back(describe_scratch(requests[i], static_cast<size_t>(i)));
    }
  }
  return fmt::format("({})", fmt::join(parts, ", "));
}
}  // namespace

ScopedScratch::ScopedScratch(const ScratchRequest* requests, int n, void** ptrs,
                             std::source_location where)
    : where_(where) {
  CoreContext* ctx = current_context();
  if (ctx == nullptr) {
    raise(ErrorKind::kOutsideKernel, "pl::run_scoped", where,
          "run_scoped allocates the running core's VMEM, SMEM and semaphores, so it only runs "
          "inside a kernel body");
  }
  ArenaStack& stack = ctx->stack;
  const ArenaStack::Mark mark = stack.mark();
  std::memcpy(saved_mark_, &mark, sizeof(mark));
  saved_scoped_ = ctx->scoped_semaphores.size();
  // Check every region for the whole scope before anything changes, so that a failing scope
  // leaves the core as it was and its message names all of the scope's buffers of that space.
  int64_t need[3] = {0, 0, 0};
  size_t semaphores = 0;
  for (int i = 0; i < n; ++i) {
    const MemorySpace s = requests[i].space;
    int64_t& total = need[s == MemorySpace::SMEM ? 1 : s == MemorySpace::SEMAPHORE ? 2 : 0];
    total = ArenaStack::align_up(total) + requests[i].bytes;
    if (s == MemorySpace::SEMAPHORE) ++semaphores;
  }
  const MemorySpace spaces[3] = {MemorySpace::VMEM, MemorySpace::SMEM, MemorySpace::SEMAPHORE};
  for (int r = 0; r < 3; ++r) {
    if (need[r] == 0) continue;
    stack.require(
        spaces[r], need[r], "the scope", [&] { return scope_text(requests, n, spaces[r]); },
        "pl::run_scoped", where);
  }
  ctx->scoped_semaphores.reserve(saved_scoped_ + semaphores);  // the only step that may throw
  for (int i = 0; i < n; ++i) {
    const ScratchRequest& r = requests[i];
    const int64_t offset = ArenaStack::align_up(stack.top(r.space));
    ptrs[i] = stack.push(
        r.space, r.bytes, StackUse::kScope, "the scope",
        [&] { return scope_text(requests, n, r.space); }, "pl::run_scoped", where);
    if (r.space == MemorySpace::SEMAPHORE) {
      ctx->scoped_semaphores.push_back(
          ScopedSemaphore{offset, r.shape, r.semaphore_kind, i, where});
    } else {
      ctx->engine->fresh(*ctx, ptrs[i], r.bytes, r.dtype, [&] {
        return fmt::format("run_scoped buffer #{} {}<{}>{} (scope at {})", i, to_string(r.space),
                           dtype_name(r.dtype), r.shape.to_string(), format_location(where));
      });
    }
  }
  // The launcher clears every semaphore below this mark when the launch ends.
  if (stack.top(MemorySpace::SEMAPHORE) > mark.top[2]) {
    raise_semaphore_high(*ctx->launch, stack.top(MemorySpace::SEMAPHORE));
  }
  open_ = true;
}

void ScopedScratch::check_escape(const void* data) const {
  const CoreContext& ctx = *current_context();
  ArenaStack::Mark mark;
  std::memcpy(&mark, saved_mark_, sizeof(mark));
  const auto p = reinterpret_cast<const std::byte*>(data);
  const std::pair<MemorySpace, const std::byte*> regions[] = {
      {MemorySpace::VMEM, ctx.arena->vmem()}, {MemorySpace::SMEM, ctx.arena->smem()}};
  for (const auto& [space, base] : regions) {
    const int r = space == MemorySpace::SMEM ? 1 : 0;
    if (p >= base + mark.top[r] && p < base + ctx.stack.top(space)) {
      raise(ErrorKind::kInvalidArgument, "pl::run_scoped", where_,
            fmt::format("the function returns a {} ref into one of the scope's own buffers, "
                        "which run_scoped frees when it returns (the ref would view memory the "
                        "next scope reuses); copy what it holds into a ref of the caller inside "
                        "the scope, or return a value",
                        to_string(space)));
    }
  }
}

ScopedScratch::~ScopedScratch() {
  if (open_) release(true);
}

void ScopedScratch::close() {
  CoreContext& ctx = *current_context();
  flush_copies(ctx);  // the copies into the scope's buffers and onto its semaphores land first
  for (size_t k = saved_scoped_; k < ctx.scoped_semaphores.size(); ++k) {
    const ScopedSemaphore& s = ctx.scoped_semaphores[k];
    const auto* cells = reinterpret_cast<const SemaphoreCell*>(
        reinterpret_cast<const std::byte*>(ctx.arena->semaphores()) + s.offset);
    for (int64_t e = 0; e < s.shape.size(); ++e) {
      const int64_t v = cells[e].load();
      if (v == 0) continue;
      const std::string element =
          s.shape.rank() == 0 ? std::string() : " element " + unravel_index(e, s.shape);
      const std::string what = fmt::format(
          "run_scoped #{} {}{} holds {}{} when the scope ends; semaphores allocated "
          "by run_scoped must be 0 when it returns: each signal needs a matching "
          "wait and each started async copy a .wait() inside the scope",
          s.position, semaphore_type_name(s.kind, s.shape), element, v,
          s.kind == SemaphoreKind::DMA ? " bytes" : "");
      release(true);
      raise(ErrorKind::kSemaphoreLeak, "pl::run_scoped", where_, what);
    }
  }
  release(false);
}

void ScopedScratch::release(bool zero_semaphores) noexcept {
  open_ = false;
  CoreContext& ctx = *current_context();
  flush_copies(ctx);
  if (zero_semaphores) {
    // Only after a failure (f threw, or a leak): a later scope on this core must start at zero.
    for (size_t k = saved_scoped_; k < ctx.scoped_semaphores.size(); ++k) {
      const ScopedSemaphore& s = ctx.scoped_semaphores[k];
      auto* cells = reinterpret_cast<SemaphoreCell*>(
          reinterpret_cast<std::byte*>(ctx.arena->semaphores()) + s.offset);
      for (int64_t e = 0; e < s.shape.size(); ++e) cells[e].store(0);
    }
  }
  ctx.scoped_semaphores.resize(saved_scoped_);
  ArenaStack::Mark mark;
  std::memcpy(&mark, saved_mark_, sizeof(mark));
  ctx.stack.release(mark);
}

}  // namespace tessera::detail
