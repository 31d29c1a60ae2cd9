// Internal: VMEM that a runtime construct (a pipeline's windows) holds for a scope, taken from
// the core's arena above the kernel's scratch and any enclosing scopes, counted against the
// kernel's VMEM budget, and released when the scope ends.
#pragma once

#include <fmt/format.h>

#include <algorithm>
#include <cstdint>
#include <source_location>
#include <string>
#include <vector>

#include "check/checked.h"
#include "runtime/context.h"

namespace tessera::detail {

class ScopedVmem {
 public:
  ScopedVmem(CoreContext& ctx, const char* op, std::source_location where)
      : ctx_(ctx), op_(op), where_(where), saved_top_(ctx.vmem_top) {}
  ~ScopedVmem() { ctx_.vmem_top = saved_top_; }
  ScopedVmem(const ScopedVmem&) = delete;
  ScopedVmem& operator=(const ScopedVmem&) = delete;

  /// `bytes` of 64-byte aligned VMEM; throws KernelError kCapacityExceeded over the budget,
  /// naming what this scope holds.
  void* allocate(int64_t bytes, const char* what) {
    const int64_t start = (ctx_.vmem_top + 63) / 64 * 64;
    if (start + bytes > ctx_.vmem_limit) {
      std::string held;
      for (const auto& [name, size] : held_) held += fmt::format("{} of {} bytes, ", name, size);
      if (ctx_.checked != nullptr && checked_chip(ctx_) != nullptr) {
        held += fmt::format("checked against the {} chip's {} bytes of VMEM per TensorCore, ",
                            checked_params(ctx_).chip, checked_chip(ctx_)->vmem_capacity_bytes);
      }
      raise(ErrorKind::kCapacityExceeded, op_, where_,
            fmt::format("{} needs {} more bytes of VMEM on this core, but {} of the {} byte "
                        "budget are in use ({}the kernel's scratch and enclosing scopes); use "
                        "smaller blocks, pl::Buffered(1), or raise "
                        "pltpu::CompilerParams{{.vmem_limit_bytes}}",
                        what, bytes, start, ctx_.vmem_limit, held));
    }
    ctx_.vmem_top = start + bytes;
    held_.emplace_back(what, bytes);
    return ctx_.arena->vmem() + start;
  }

 private:
  CoreContext& ctx_;
  const char* op_;
  std::source_location where_;
  int64_t saved_top_;
  std::vector<std::pair<std::string, int64_t>> held_;
};

/// The same for SMEM (pallas_call operands staged in SMEM).
class ScopedSmem {
 public:
  ScopedSmem(CoreContext& ctx, const char* op, std::source_location where)
      : ctx_(ctx), op_(op), where_(where), saved_top_(ctx.smem_top) {}
  ~ScopedSmem() { ctx_.smem_top = saved_top_; }
  ScopedSmem(const ScopedSmem&) = delete;
  ScopedSmem& operator=(const ScopedSmem&) = delete;

  void* allocate(int64_t bytes, const char* what) {
    const int64_t start = (ctx_.smem_top + 63) / 64 * 64;
    int64_t capacity = smem_capacity_bytes();
    const pltpu::TpuInfo* chip = ctx_.checked != nullptr ? checked_chip(ctx_) : nullptr;
    if (chip != nullptr) capacity = std::min(capacity, chip->smem_capacity_bytes);
    if (start + bytes > capacity) {
      raise(ErrorKind::kCapacityExceeded, op_, where_,
            fmt::format("{} needs {} bytes of SMEM on this core, but {} of the {} bytes{} are in "
                        "use; SMEM is for scalars: keep large operands in VMEM",
                        what, bytes, start, capacity,
                        chip != nullptr
                            ? fmt::format(" (the {} chip's SMEM)", checked_params(ctx_).chip)
                            : std::string()));
    }
    ctx_.smem_top = start + bytes;
    return ctx_.arena->smem() + start;
  }

 private:
  CoreContext& ctx_;
  const char* op_;
  std::source_location where_;
  int64_t saved_top_;
};

}  // namespace tessera::detail
