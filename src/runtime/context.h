// Internal: the per-core state of a running kernel, reachable from the core's thread, and the
// state one launch shares between its cores.
#pragma once

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <exception>
#include <mutex>
#include <source_location>
#include <string>
#include <string_view>
#include <vector>

#include "core/error_context.h"
#include "runtime/arena.h"
#include "runtime/arena_stack.h"
#include "tessera/detail/runtime.h"
#include "tessera/ref.h"

namespace tessera::detail {

class Engine;
struct DeviceContext;

/// What the cores of one launch share. Lives on the launcher's stack for the launch.
struct LaunchState {
  const LaunchSpec* spec = nullptr;
  int64_t wait_timeout_ms = 0;  // resolved: the kernel's, else the default
  /// Set (seq_cst) once a core has failed; blocking waits then throw kCancelled. Pairs with the
  /// waiters' SemaphoreWaitQueue::sleepers as described there.
  std::atomic<bool> cancelled{false};
  /// Bytes of the semaphore region that any core of the launch has used (scratch, then
  /// run_scoped scopes raise it). The launcher checks and clears [0, semaphore_high) on every
  /// core after the launch.
  std::atomic<int64_t> semaphore_high{0};
  std::mutex mu;
  std::exception_ptr first_error;
};

/// A semaphore buffer of a live `pl::run_scoped` scope, for naming it in errors.
struct ScopedSemaphore {
  int64_t offset = 0;  // bytes within the core's semaphore region
  Shape shape;
  SemaphoreKind kind = SemaphoreKind::REGULAR;
  int position = 0;  // among the scope's types
  std::source_location where;
};

/// What the running core knows about itself. Set by the runtime around each core's body. The
/// ErrorContext part (core, kernel name, grid step, kernel location) is what errors report.
struct CoreContext : ErrorContext {
  int num_cores = 0;
  const std::string* axis_name = nullptr;
  std::vector<int64_t> grid_extent;  // the innermost grid's extents; empty outside a grid
  // The innermost grid's axis names (a named grid, pl::grid({{"i", 4}})), else null.
  const std::vector<std::string>* grid_names = nullptr;
  LaunchState* launch = nullptr;
  CoreArena* arena = nullptr;  // this core's VMEM, SMEM and semaphores
  ArenaStack stack;            // what the kernel's scratch and live scopes hold of them
  std::vector<ScopedSemaphore> scoped_semaphores;  // innermost scope last
  Engine* engine = nullptr;                        // how this launch runs
  void* engine_core = nullptr;                     // the engine's books for this core
  DeviceContext* device = nullptr;  // the device of a device mesh this core is part of, or null
  // Streaming (non-temporal) stores of this core that no store fence has ordered yet: a pipeline
  // step that streams its output sets it, and settle_streams() fences before anything that lets
  // another thread read this core's memory (signals, DMA starts, the core's end).
  bool streams_pending = false;
  // Async copies the native engine has started but not made yet (NativeEngine::dma_start,
  // src/native/native_engine.cc): small contiguous copies wait here until four are pending and
  // are then made together, a line of each in turn, so that their sources' lines (pages
  // scattered over HBM, in paged attention) are read in parallel. flush_copies() makes them
  // before anything could observe their bytes or their semaphores.
  struct PendingCopy {
    const std::byte* src;
    std::byte* dst;
    int64_t bytes;
    SemaphoreCell* sem;
  };
  static constexpr int kMaxPendingCopies = 4;
  int num_pending_copies = 0;
  PendingCopy pending_copies[kMaxPendingCopies];
};

/// Orders this core's pending streaming stores before its next store (a semaphore's count, a
/// queued message), so that a thread that synchronises with it sees them. Streaming stores are
/// weakly ordered on x86; a fence per pipeline step cost (8, 128) blocks 1.3x their time
/// (docs/performance.md), so the pipeline leaves it to the points that publish.
void settle_streams(CoreContext& ctx) noexcept;

/// Makes the async copies this core started and the native engine still holds
/// (CoreContext::pending_copies), adding their bytes to their semaphores: before a wait or a read
/// of a semaphore, before a scope's semaphores are checked or released, and when the body ends.
void flush_copies(CoreContext& ctx) noexcept;

/// The running step's index on the innermost grid's axis named `name` (pl::grid({{"i", 4}}),
/// pipeline.cc), or -1 when the innermost grid has no such name (lax::axis_index then tries the
/// mesh's axis).
int grid_axis_index(std::string_view name) noexcept;
int grid_axis_size(std::string_view name) noexcept;

/// The calling thread's context, or null outside a kernel body.
CoreContext* current_context() noexcept;
void set_current_context(CoreContext* ctx) noexcept;

/// The arena of `core` in the running launch.
CoreArena& core_arena(int core);

/// "#2 VMEM<float32>(8, 128) = 4096 bytes", "#0 SemaphoreType.DMA((2,)) = 16 bytes".
std::string describe_scratch(const ScratchRequest& r, size_t index);
/// The (up to three) largest scratch buffers of `space`, described and joined by ", ".
std::string largest_scratch(const LaunchSpec& spec, MemorySpace space);
/// "SemaphoreType.DMA", "SemaphoreType.REGULAR((4, 3))": the Pallas spelling of a semaphore type.
std::string semaphore_type_name(SemaphoreKind kind, const Shape& shape);

/// "(1, 2)": the row-major multi-index of element `flat` of `shape` (rank >= 1).
std::string unravel_index(int64_t flat, const Shape& shape);

}  // namespace tessera::detail
