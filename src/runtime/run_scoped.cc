// pl::run_scoped: a stack of scopes per core. Each region (VMEM, SMEM, semaphores) has a top in
// the core's context, starting above the kernel's scratch; a scope bumps the tops and restores
// them when it ends, so nested scopes stack and a finished scope's space is reused.
#include "tessera/run_scoped.h"

#include <fmt/format.h>

#include <string>
#include <vector>

#include "check/checked.h"
#include "core/messages.h"
#include "runtime/context.h"

namespace tessera::detail {

namespace {
constexpr int64_t kAlign = 64;
constexpr int64_t kCell = sizeof(SemaphoreCell);

int64_t align_up(int64_t v) { return (v + kAlign - 1) / kAlign * kAlign; }

int64_t& top_of(CoreContext& ctx, MemorySpace space) {
  switch (space) {
    case MemorySpace::SMEM:
      return ctx.smem_top;
    case MemorySpace::SEMAPHORE:
      return ctx.semaphore_top;
    default:
      return ctx.vmem_top;
  }
}

[[noreturn]] void over_capacity(const CoreContext& ctx, const ScratchRequest* requests, int n,
                                MemorySpace space, int64_t base, int64_t need, int64_t limit,
                                const char* budget, const char* hint, std::source_location where) {
  std::vector<std::string> parts;
  for (int i = 0; i < n; ++i) {
    if (requests[i].space == space) {
      parts.push_back(describe_scratch(requests[i], static_cast<size_t>(i)));
    }
  }
  const int64_t kernel_used = space == MemorySpace::SMEM        ? ctx.launch->spec->smem_used
                              : space == MemorySpace::SEMAPHORE ? ctx.launch->spec->semaphore_used
                                                                : ctx.launch->spec->vmem_used;
  raise(ErrorKind::kCapacityExceeded, "pl::run_scoped", where,
        fmt::format("the scope needs {} bytes of {} ({}) but only {} of the {} bytes of {} are "
                    "free (the kernel's scratch uses {}, enclosing run_scoped scopes {}); {}",
                    need, to_string(space), fmt::join(parts, ", "),
                    std::max<int64_t>(0, limit - base), limit, budget, kernel_used,
                    base - kernel_used, hint));
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
  saved_vmem_ = ctx->vmem_top;
  saved_smem_ = ctx->smem_top;
  saved_semaphore_ = ctx->semaphore_top;
  saved_scoped_ = ctx->scoped_semaphores.size();
  // Lay the scope out first and check every region before anything changes, so a failing
  // scope leaves the core as it was.
  int64_t tops[3] = {saved_vmem_, saved_smem_, saved_semaphore_};
  size_t semaphores = 0;
  auto index = [](MemorySpace s) {
    return s == MemorySpace::SMEM ? 1 : s == MemorySpace::SEMAPHORE ? 2 : 0;
  };
  for (int i = 0; i < n; ++i) {
    int64_t& top = tops[index(requests[i].space)];
    top = align_up(top + requests[i].bytes);
    if (requests[i].space == MemorySpace::SEMAPHORE) ++semaphores;
  }
  const int64_t semaphore_bytes = semaphore_capacity() * kCell;
  if (tops[0] > ctx->vmem_limit) {
    over_capacity(*ctx, requests, n, MemorySpace::VMEM, saved_vmem_, tops[0] - saved_vmem_,
                  ctx->vmem_limit, "the kernel's VMEM budget",
                  "shrink the buffers or raise pltpu::CompilerParams{.vmem_limit_bytes = ...}",
                  where);
  }
  if (tops[1] > smem_capacity_bytes()) {
    over_capacity(*ctx, requests, n, MemorySpace::SMEM, saved_smem_, tops[1] - saved_smem_,
                  smem_capacity_bytes(), "SMEM", "move large buffers to VMEM (SMEM holds scalars)",
                  where);
  }
  if (tops[2] > semaphore_bytes) {
    over_capacity(*ctx, requests, n, MemorySpace::SEMAPHORE, saved_semaphore_,
                  tops[2] - saved_semaphore_, semaphore_bytes, "semaphore memory",
                  "use fewer semaphores", where);
  }
  ctx->scoped_semaphores.reserve(saved_scoped_ + semaphores);  // the only step that may throw
  for (int i = 0; i < n; ++i) {
    const ScratchRequest& r = requests[i];
    int64_t& top = top_of(*ctx, r.space);
    std::byte* base = r.space == MemorySpace::SMEM ? ctx->arena->smem()
                      : r.space == MemorySpace::SEMAPHORE
                          ? reinterpret_cast<std::byte*>(ctx->arena->semaphores())
                          : ctx->arena->vmem();
    ptrs[i] = base + top;
    if (r.space == MemorySpace::SEMAPHORE) {
      ctx->scoped_semaphores.push_back(ScopedSemaphore{top, r.shape, r.semaphore_kind, i, where});
    } else if (ctx->checked != nullptr) {
      checked_fresh(
          *ctx, ptrs[i], r.bytes, r.dtype,  // poison, never written
          fmt::format("run_scoped buffer #{} {}<{}>{} (scope at {})", i, to_string(r.space),
                      dtype_name(r.dtype), r.shape.to_string(), format_location(where)));
    }
    top = align_up(top + r.bytes);
  }
  // The launcher clears every semaphore below this mark when the launch ends.
  if (ctx->semaphore_top > saved_semaphore_) {
    raise_semaphore_high(*ctx->launch, ctx->semaphore_top);
  }
  open_ = true;
}

ScopedScratch::~ScopedScratch() {
  if (open_) release(true);
}

void ScopedScratch::close() {
  CoreContext& ctx = *current_context();
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
  ctx.vmem_top = saved_vmem_;
  ctx.smem_top = saved_smem_;
  ctx.semaphore_top = saved_semaphore_;
}

}  // namespace tessera::detail
