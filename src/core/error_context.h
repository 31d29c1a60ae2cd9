// Internal: what an error raised on a core thread says about where it happened. The runtime
// makes its per-core context one of these (runtime/context.h) and installs it while a core runs
// a kernel body; detail::raise (core/error.cc) reads it to turn a misuse into a KernelError that
// names the kernel, the core and the grid step, and a UsageError when none is installed.
#pragma once

#include <cstdint>
#include <source_location>
#include <string>
#include <vector>

namespace tessera::detail {

struct ErrorContext {
  int core = -1;
  const std::string* kernel_name = nullptr;
  std::vector<int64_t> grid_step;     // the innermost grid's current point (pipelines)
  std::source_location kernel_where;  // the kernel's definition, for errors with no call site
  // The frame address of the runtime's call into the kernel body: the body's frames lie below it
  // (src/core/symbolize.cc looks for the user's statement there).
  const void* body_frame = nullptr;
};

/// The calling thread's error context, or null outside a kernel body.
ErrorContext* current_error_context() noexcept;
void set_current_error_context(ErrorContext* ctx) noexcept;

}  // namespace tessera::detail
