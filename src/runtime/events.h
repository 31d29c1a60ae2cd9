// Internal: the events the runtime and the engines report while a kernel runs (a launch, a
// core's body, a grid step, a DMA, a semaphore wait, a VPU or MXU op), for whoever records them.
// The runtime only reports; a recorder (the trace layer, src/trace/recorder.cc) installs itself
// as the EventSink when a session starts. Each hook first reads one relaxed atomic flag and does
// nothing else while nothing records. With the CMake option TESSERA_ENABLE_TRACE=OFF, `on()` is
// a constant false and the hooks compile away.
#pragma once

#include <atomic>
#include <cstdint>
#include <string>

#include "tessera/memory_space.h"

#ifndef TESSERA_TRACE_COMPILED
#define TESSERA_TRACE_COMPILED 1
#endif

namespace tessera::detail {

struct PrefetchQueue;
struct RawRef;
struct ExprProgram;

/// What an event records. The order is the export's lane order within a core.
enum class EventKind : uint8_t {
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
  EventKind kind = EventKind::kCore;
  DmaMode mode = DmaMode::kCopied;
  MemorySpace src = MemorySpace::HBM;
  MemorySpace dst = MemorySpace::VMEM;
  bool dma_wait = false;  // kWait: a DMA semaphore's wait (counts as DMA stall)
  int32_t core = 0;
  int32_t launch = 0;  // index into the session's launches
  int64_t t0 = 0;      // ns since the sink was installed
  int64_t t1 = 0;
  int64_t bytes = 0;
  int64_t flops = 0;
  int64_t step = -1;           // kStep: this core's step count within the pipeline
  const void* addr = nullptr;  // kWholeArray / kDma: the HBM side, for the re-copy lint
  const char* name = "";       // a string literal (op names) with static storage
};

/// A launch as the sink numbered it: its index in the sink's session (-1: not recorded) and the
/// session it belongs to (a later session must not take its events).
struct LaunchTag {
  int id = -1;
  uint64_t generation = 0;
};

/// Where events go while something records. Called from core threads and launching threads
/// concurrently: an implementation synchronises what it shares.
class EventSink {
 public:
  /// A launch of `kernel` on `num_cores` cores starts at `t0`.
  virtual LaunchTag begin_launch(const std::string& kernel, int num_cores, int64_t t0) = 0;
  virtual void end_launch(LaunchTag tag, int64_t t1) = 0;
  /// An event the calling thread recorded for the launch `tag` (e.core and e.launch are set).
  virtual void record(const Event& e, LaunchTag tag) = 0;

 protected:
  ~EventSink() = default;
};

#if TESSERA_TRACE_COMPILED
extern std::atomic<bool> g_events_on;
/// True while a sink records. Relaxed: a hook that misses the flip by a few events only records
/// less; what it records is published to the sink by the launch's own synchronisation.
inline bool events_on() noexcept { return g_events_on.load(std::memory_order_relaxed); }
#else
constexpr bool events_on() noexcept { return false; }
#endif

/// Installs `sink` (which must outlive every launch that may report to it) and starts
/// reporting, with time 0 now; `nullptr` stops reporting.
void set_event_sink(EventSink* sink) noexcept;
/// ns since the sink was installed.
int64_t events_now_ns() noexcept;

// --- hooks: each is one line at the place it describes ---

/// In launch(), on the launching thread: the launch's span and its tag for the cores.
class LaunchEvents {
 public:
  LaunchEvents(const std::string& kernel, int num_cores) {
    if (events_on()) begin(kernel, num_cores);
  }
  ~LaunchEvents() {
    if (tag_.id >= 0) end();
  }
  LaunchEvents(const LaunchEvents&) = delete;
  LaunchEvents& operator=(const LaunchEvents&) = delete;
  const LaunchTag& tag() const noexcept { return tag_; }

 private:
  void begin(const std::string& kernel, int num_cores);
  void end();
  LaunchTag tag_;
};

/// Around one core's body: the thread's core and launch for the events it records.
class CoreEvents {
 public:
  CoreEvents(const LaunchEvents& launch, int core) : CoreEvents(launch.tag(), core) {}
  CoreEvents(const LaunchTag& tag, int core) {
    if (tag.id >= 0) begin(tag, core);
  }
  ~CoreEvents() {
    if (t0_ >= 0) end();
  }
  CoreEvents(const CoreEvents&) = delete;
  CoreEvents& operator=(const CoreEvents&) = delete;

 private:
  void begin(const LaunchTag& tag, int core);
  void end();
  int64_t t0_ = -1;
  int saved_core_ = 0;
  LaunchTag saved_tag_;
};

/// A span of kind `kind` (grid step, semaphore wait), recorded when it ends.
class SpanEvent {
 public:
  SpanEvent(EventKind kind, const char* name, int64_t step = -1, bool dma_wait = false) {
    if (events_on()) begin(kind, name, step, dma_wait);
  }
  ~SpanEvent() {
    if (t0_ >= 0) end();
  }
  SpanEvent(const SpanEvent&) = delete;
  SpanEvent& operator=(const SpanEvent&) = delete;

 private:
  void begin(EventKind kind, const char* name, int64_t step, bool dma_wait);
  void end();
  int64_t t0_ = -1;
  EventKind kind_ = EventKind::kStep;
  bool dma_wait_ = false;
  int64_t step_ = -1;
  const char* name_ = "";
};

/// A copy of src into dst, after its checks; recorded when it ends.
class CopyEvent {
 public:
  CopyEvent(const RawRef& src, const RawRef& dst, const char* op) {
    if (events_on()) begin(src, dst, op);
  }
  ~CopyEvent() {
    if (t0_ >= 0) end();
  }
  CopyEvent(const CopyEvent&) = delete;
  CopyEvent& operator=(const CopyEvent&) = delete;

 private:
  void begin(const RawRef& src, const RawRef& dst, const char* op);
  void end();
  int64_t t0_ = -1;
  Event e_;
};

/// A VPU expression into dst (FLOPs and bytes counted from its nodes).
class VpuEvent {
 public:
  VpuEvent(const ExprProgram& prog, const RawRef& dst) {
    if (events_on()) begin(prog, dst);
  }
  ~VpuEvent() {
    if (t0_ >= 0) end();
  }
  VpuEvent(const VpuEvent&) = delete;
  VpuEvent& operator=(const VpuEvent&) = delete;

 private:
  void begin(const ExprProgram& prog, const RawRef& dst);
  void end();
  int64_t t0_ = -1;
  Event e_;
};

/// An (m, k) x (k, n) product; `bytes` read and written.
class MxuEvent {
 public:
  MxuEvent(const char* op, int64_t m, int64_t n, int64_t k, int64_t bytes) {
    if (events_on()) begin(op, m, n, k, bytes);
  }
  ~MxuEvent() {
    if (t0_ >= 0) end();
  }
  MxuEvent(const MxuEvent&) = delete;
  MxuEvent& operator=(const MxuEvent&) = delete;

 private:
  void begin(const char* op, int64_t m, int64_t n, int64_t k, int64_t bytes);
  void end();
  int64_t t0_ = -1;
  Event e_;
};

/// A pipeline used a block where it lies instead of copying it (`input`: read at copy-in; else
/// written, at write-back). `queue` is the prefetch queue of the previous step, which says
/// whether the block's lines were prefetched (queued by that step, or by the one before it).
void record_block_in_place(const void* block, int64_t bytes, bool input,
                           const PrefetchQueue* queue);
inline void block_in_place_event(const void* block, int64_t bytes, bool input,
                                 const PrefetchQueue* queue) {
  if (events_on()) record_block_in_place(block, bytes, input, queue);
}
/// A pipeline operand `array` (of `array_bytes`) has a window of `window_bytes`.
void record_pipeline_operand(const void* array, int64_t window_bytes, int64_t array_bytes);
inline void pipeline_operand_event(const void* array, int64_t window_bytes, int64_t array_bytes) {
  if (events_on()) record_pipeline_operand(array, window_bytes, array_bytes);
}

}  // namespace tessera::detail
