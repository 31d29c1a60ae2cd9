// Internal: the trace recorder. Hooks in the runtime call into here at coarse points (a launch,
// a core's body, a grid step, a DMA, a semaphore wait, a VPU or MXU op); each hook first reads
// one relaxed atomic flag and does nothing else when no trace session is active. With the
// CMake option TESSERA_ENABLE_TRACE=OFF, `on()` is a constant false and the hooks compile away.
//
// Events go to a buffer owned by the recording thread (a core of the pool, or the launching
// thread), so recording takes no lock: the buffer is registered with the session once per thread
// and session, under a mutex, and read back only by Session::stop, after every launch returned.
#pragma once

#include <atomic>
#include <chrono>
#include <cstdint>
#include <source_location>
#include <string>
#include <vector>

#include "tessera/memory_space.h"

#ifndef TESSERA_TRACE_COMPILED
#define TESSERA_TRACE_COMPILED 1
#endif

namespace tessera::detail {
struct PrefetchQueue;
struct RawRef;
struct ExprProgram;
}  // namespace tessera::detail

namespace tessera::trace::detail {

/// What an event records. The order is the export's lane order within a core.
enum class Kind : uint8_t {
  kCore,        // a core ran the launch's body: [t0, t1)
  kStep,        // one grid step of a pipeline
  kVpu,         // an elementwise/reduction expression evaluated into a ref
  kMxu,         // a jnp::dot / lax::dot_general tile product
  kWait,        // a semaphore or DMA wait; its duration is the stall
  kDma,         // a DMA: copied, elided (block used where it lies) or prefetched
  kWholeArray,  // marker: a pipeline operand whose block is its whole array (for a lint)
};

/// How the native engine carried out a DMA the kernel asked for.
enum class DmaMode : uint8_t {
  kCopied,      // bytes were copied (start to end of the copy)
  kElided,      // the block was used where it lies in HBM: nothing was copied
  kPrefetched,  // elided, and its lines were prefetched during the previous grid step
};
const char* to_string(DmaMode m) noexcept;

struct Event {
  Kind kind = Kind::kCore;
  DmaMode mode = DmaMode::kCopied;
  MemorySpace src = MemorySpace::HBM;
  MemorySpace dst = MemorySpace::VMEM;
  bool dma_wait = false;  // kWait: a DMA semaphore's wait (counts as DMA stall)
  int32_t core = 0;
  int32_t launch = 0;  // index into the session's launches
  int64_t t0 = 0;      // ns since the session started
  int64_t t1 = 0;
  int64_t bytes = 0;
  int64_t flops = 0;
  int64_t step = -1;           // kStep: this core's step count within the pipeline
  const void* addr = nullptr;  // kWholeArray / kDma: the HBM side, for the re-copy lint
  const char* name = "";       // a string literal (op names) with static storage
};

/// One launch of a kernel, recorded by the launching thread.
struct LaunchRecord {
  std::string kernel;
  int num_cores = 0;
  int64_t t0 = 0;
  int64_t t1 = 0;
};

#if TESSERA_TRACE_COMPILED
extern std::atomic<bool> g_on;
/// True while a trace session records. Relaxed: a hook that misses the flip by a few events
/// only records less; the events it records are published to the session by the launch's own
/// synchronisation (every core finishes before launch() returns, and stop() runs after).
inline bool on() noexcept { return g_on.load(std::memory_order_relaxed); }
#else
constexpr bool on() noexcept { return false; }
#endif

/// ns since the session started.
int64_t now_ns() noexcept;
/// Appends to the calling thread's buffer (tags it with the thread's current core and launch).
void record(Event e);
/// Starts the session that TESSERA_TRACE asks for, once per process (a no-op without it).
void start_from_env();

// --- hooks: each is one line in the runtime ---

/// In launch(), on the launching thread: the launch's span and its index for the cores.
class LaunchScope {
 public:
  LaunchScope(const std::string& kernel, int num_cores);
  ~LaunchScope();
  LaunchScope(const LaunchScope&) = delete;
  LaunchScope& operator=(const LaunchScope&) = delete;
  int id() const noexcept { return id_; }
  uint64_t generation() const noexcept { return generation_; }

 private:
  int id_ = -1;
  uint64_t generation_ = 0;  // the session it belongs to (a later one must not take its events)
};

/// Around one core's body: sets the thread's core and launch for the events it records.
class CoreScope {
 public:
  CoreScope(const LaunchScope& launch, int core);
  ~CoreScope();
  CoreScope(const CoreScope&) = delete;
  CoreScope& operator=(const CoreScope&) = delete;

 private:
  int64_t t0_ = -1;
  int saved_core_ = 0;
  int saved_launch_ = -1;
  uint64_t saved_generation_ = 0;
};

/// A span of kind `kind` (grid step, semaphore wait), recorded when it ends.
class SpanScope {
 public:
  SpanScope(Kind kind, const char* name, int64_t step = -1, bool dma_wait = false) {
    if (on()) begin(kind, name, step, dma_wait);
  }
  ~SpanScope() {
    if (t0_ >= 0) end();
  }
  SpanScope(const SpanScope&) = delete;
  SpanScope& operator=(const SpanScope&) = delete;

 private:
  void begin(Kind kind, const char* name, int64_t step, bool dma_wait);
  void end();
  int64_t t0_ = -1;
  Kind kind_ = Kind::kStep;
  bool dma_wait_ = false;
  int64_t step_ = -1;
  const char* name_ = "";
};

/// In dma_copy, after its checks: a copy of src into dst, recorded when it ends.
class CopyScope {
 public:
  CopyScope(const tessera::detail::RawRef& src, const tessera::detail::RawRef& dst,
            const char* op) {
    if (on()) begin(src, dst, op);
  }
  ~CopyScope() {
    if (t0_ >= 0) end();
  }
  CopyScope(const CopyScope&) = delete;
  CopyScope& operator=(const CopyScope&) = delete;

 private:
  void begin(const tessera::detail::RawRef& src, const tessera::detail::RawRef& dst,
             const char* op);
  void end();
  int64_t t0_ = -1;
  Event e_;
};

/// In evaluate(): a VPU expression into dst (FLOPs and bytes counted from its nodes).
class VpuScope {
 public:
  VpuScope(const tessera::detail::ExprProgram& prog, const tessera::detail::RawRef& dst) {
    if (on()) begin(prog, dst);
  }
  ~VpuScope() {
    if (t0_ >= 0) end();
  }
  VpuScope(const VpuScope&) = delete;
  VpuScope& operator=(const VpuScope&) = delete;

 private:
  void begin(const tessera::detail::ExprProgram& prog, const tessera::detail::RawRef& dst);
  void end();
  int64_t t0_ = -1;
  Event e_;
};

/// In dot_evaluate(): an (m, k) x (k, n) product; `bytes` read and written.
class MxuScope {
 public:
  MxuScope(const char* op, int64_t m, int64_t n, int64_t k, int64_t bytes) {
    if (on()) begin(op, m, n, k, bytes);
  }
  ~MxuScope() {
    if (t0_ >= 0) end();
  }
  MxuScope(const MxuScope&) = delete;
  MxuScope& operator=(const MxuScope&) = delete;

 private:
  void begin(const char* op, int64_t m, int64_t n, int64_t k, int64_t bytes);
  void end();
  int64_t t0_ = -1;
  Event e_;
};

/// In run_pipeline: a block the engine used where it lies instead of copying it (`input`: read
/// at copy-in; else written, at write-back). `queue` is the prefetch queue of the previous step,
/// which says whether the block's lines were prefetched.
void record_block_in_place(const void* block, int64_t bytes, bool input,
                           const tessera::detail::PrefetchQueue* queue);
inline void block_in_place(const void* block, int64_t bytes, bool input,
                           const tessera::detail::PrefetchQueue* queue) {
  if (on()) record_block_in_place(block, bytes, input, queue);
}
/// In run_pipeline: operand `array` (of `array_bytes`) has a window of `window_bytes`.
void record_pipeline_operand(const void* array, int64_t window_bytes, int64_t array_bytes);
inline void pipeline_operand(const void* array, int64_t window_bytes, int64_t array_bytes) {
  if (on()) record_pipeline_operand(array, window_bytes, array_bytes);
}

// --- what a session collects ---
struct Collected {
  std::vector<LaunchRecord> launches;
  std::vector<Event> events;  // every thread's, in no particular order
  int64_t duration_ns = 0;
  int64_t dropped = 0;  // events lost because no buffer memory could be mapped
};

/// Starts recording (throws UsageError when a session is already active).
void begin_session(const char* who, std::source_location where);
/// Stops recording and takes everything recorded since begin_session.
Collected end_session();

}  // namespace tessera::trace::detail
