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
#include <vector>

#include "runtime/arena.h"
#include "tessera/detail/runtime.h"
#include "tessera/ref.h"

namespace tessera::detail {

/// What the cores of one launch share. Lives on the launcher's stack for the launch.
struct CheckedLaunch;
struct CheckedCore;

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
  CheckedLaunch* checked = nullptr;  // set when the launch runs checked (src/check)
};

/// A semaphore buffer of a live `pl::run_scoped` scope, for naming it in errors.
struct ScopedSemaphore {
  int64_t offset = 0;  // bytes within the core's semaphore region
  Shape shape;
  SemaphoreKind kind = SemaphoreKind::REGULAR;
  int position = 0;  // among the scope's types
  std::source_location where;
};

/// What the running core knows about itself. Set by the runtime around each core's body.
struct CoreContext {
  int core = -1;
  int num_cores = 0;
  const std::string* axis_name = nullptr;
  const std::string* kernel_name = nullptr;
  std::vector<int64_t> grid_step;    // the innermost grid's current point (pipelines)
  std::vector<int64_t> grid_extent;  // the innermost grid's extents; empty outside a grid
  LaunchState* launch = nullptr;
  std::source_location kernel_where;  // the kernel's definition, for errors with no call site
  CoreArena* arena = nullptr;         // this core's VMEM, SMEM and semaphores
  int64_t vmem_limit = 0;             // the kernel's VMEM budget per core
  // The first free byte of each region: the kernel's scratch, then live run_scoped scopes.
  int64_t vmem_top = 0;
  int64_t smem_top = 0;
  int64_t semaphore_top = 0;
  std::vector<ScopedSemaphore> scoped_semaphores;  // innermost scope last
  CheckedCore* checked = nullptr;  // the checked engine's books for this core, or null (native)
};

/// The lines of the next grid step's input blocks, which the native engine prefetches a few at a
/// time while the current step computes (the vector evaluator drains it tile by tile), so that
/// the next blocks arrive while this one is worked on, as a TPU's DMA engine would overlap them.
struct PrefetchQueue {
  struct Block {
    const std::byte* base = nullptr;
    int64_t row_bytes = 0;   // the contiguous innermost run
    int64_t n1 = 1, s1 = 0;  // rows: n1 x n2, at byte strides s1 (inner) and s2 (outer)
    int64_t n2 = 1, s2 = 0;
  };
  static constexpr int kMaxBlocks = 8;
  Block blocks[kMaxBlocks];
  int num = 0;
  // Position of the next line to prefetch.
  int cur = 0;
  int64_t r1 = 0, r2 = 0, byte = 0;
  // Lines to prefetch per 64 bytes the evaluator stores, in 1/256 units, and the carry.
  int64_t ratio_q8 = 0;
  int64_t credit = 0;
  // The blocks are queued lazily, on the first drain: an evaluation that never drains (the
  // fused register path) costs the step nothing for them.
  void (*fill)(const void* ctx, PrefetchQueue& q) noexcept = nullptr;
  const void* fill_ctx = nullptr;
  bool active() const noexcept { return cur < num || fill != nullptr; }
  void clear() noexcept {
    num = cur = 0;
    r1 = r2 = byte = credit = ratio_q8 = 0;
    fill = nullptr;
    fill_ctx = nullptr;
  }
};

/// Prefetches the lines that `stored_bytes` of evaluator output pay for (see PrefetchQueue).
void drain_prefetch(PrefetchQueue& q, int64_t stored_bytes) noexcept;

/// What a running pipeline step tells the vector evaluator (native engine only).
struct StepHints {
  /// Output blocks written in place and visited for this one step: stores into them stream past
  /// the caches (non-temporal), since nothing reads them back soon.
  static constexpr int kMaxSpans = 8;
  const std::byte* stream_lo[kMaxSpans] = {};
  const std::byte* stream_hi[kMaxSpans] = {};
  int num_stream = 0;
  bool streamed = false;  // a streaming store happened: fence before the step ends
  PrefetchQueue prefetch;
};

/// The calling thread's step hints, or null when no pipeline step runs on it.
StepHints* step_hints() noexcept;

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

/// Wakes every core of the launch that sleeps in a semaphore wait (after `cancelled` was set).
void wake_semaphore_waiters(int num_cores);

/// After every core of a launch has finished: unless the launch already failed, checks that each
/// semaphore of every core is zero and records a kSemaphoreLeak KernelError in
/// state.first_error otherwise; then zeroes the semaphores the launch used, on every core.
void finish_semaphores(const LaunchSpec& spec, LaunchState& state) noexcept;

/// The DMA side of async copies (used by src/native/dma.cc). check_dma_semaphore raises
/// kOutsideKernel outside a kernel and kInvalidArgument for a semaphore of another core;
/// dma_semaphore_add adds the bytes of a completed copy; dma_semaphore_wait blocks until the
/// semaphore holds `bytes`, then takes them (kTimeout / kCancelled as semaphore_wait).
void check_dma_semaphore(const SemaphoreCell* cell, const char* op, std::source_location where);
void dma_semaphore_add(SemaphoreCell* cell, int64_t bytes);
void dma_semaphore_wait(SemaphoreCell* cell, int64_t bytes, const RawRef& src, const char* op,
                        std::source_location where);

/// Names the semaphore `cell` of the calling core ("scratch #1 SemaphoreType.DMA((2,)) element
/// (0,)"), as errors do.
std::string describe_semaphore(const CoreContext& ctx, const SemaphoreCell* cell);

/// Raises `state.semaphore_high` to at least `bytes`.
void raise_semaphore_high(LaunchState& state, int64_t bytes) noexcept;

}  // namespace tessera::detail
