// Internal: the per-core state of a running kernel, reachable from the core's thread.
#pragma once

#include <atomic>
#include <cstdint>
#include <source_location>
#include <string>
#include <vector>

namespace tessera::detail {

struct LaunchState;

/// What the running core knows about itself. Set by the runtime around each core's body.
struct CoreContext {
  int core = -1;
  int num_cores = 0;
  const std::string* axis_name = nullptr;
  const std::string* kernel_name = nullptr;
  std::vector<int64_t> grid_step;  // filled by grid walkers (pipelines)
  LaunchState* launch = nullptr;
  std::source_location kernel_where;  // the kernel's definition, for errors with no call site
};

/// The calling thread's context, or null outside a kernel body.
CoreContext* current_context() noexcept;
void set_current_context(CoreContext* ctx) noexcept;

}  // namespace tessera::detail
