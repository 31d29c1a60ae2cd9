// Internal: the cache sizes the CPU reports (pltpu::get_tpu_info().cpu), for the engine's
// choices that follow them (the GEMM's blocks, the pipelines' prefetches).
#pragma once

#include <cstdint>
#include <optional>

#include "tessera/tpu_info.h"

namespace tessera::detail {

/// The cache size `field` of pltpu::CpuInfo as this CPU reports it, or `otherwise` when it
/// reports none (or the report cannot be read). Callers keep the answer in a static.
inline int64_t reported_cache_bytes(int64_t pltpu::CpuInfo::*field, int64_t otherwise) noexcept {
  int64_t b = 0;
  try {
    const std::optional<pltpu::CpuInfo> cpu = pltpu::get_tpu_info().cpu;
    b = cpu ? (*cpu).*field : 0;
  } catch (...) {
  }
  return b > 0 ? b : otherwise;
}

}  // namespace tessera::detail
