// The runtime's event hooks: their out-of-line halves (they run only while a sink records), the
// calling thread's core and launch, and the clock events are stamped with.
#include "runtime/events.h"

#include <chrono>

#include "runtime/step_hints.h"
#include "tessera/detail/expr_program.h"
#include "tessera/ref.h"

namespace tessera::detail {

#if TESSERA_TRACE_COMPILED
std::atomic<bool> g_events_on{false};
#endif

namespace {

std::atomic<EventSink*> g_sink{nullptr};
std::atomic<int64_t> g_epoch_ns{0};

thread_local int t_core = 0;
thread_local LaunchTag t_tag;  // the launch this thread's core works for; id -1: not recording

int64_t steady_ns() noexcept {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(
             std::chrono::steady_clock::now().time_since_epoch())
      .count();
}

void record(Event e) {
  if (t_tag.id < 0) return;
  EventSink* sink = g_sink.load(std::memory_order_acquire);
  if (sink == nullptr) return;
  e.core = t_core;
  e.launch = t_tag.id;
  sink->record(e, t_tag);
}

}  // namespace

const char* to_string(DmaMode m) noexcept {
  switch (m) {
    case DmaMode::kCopied:
      return "copied";
    case DmaMode::kElided:
      return "elided";
    case DmaMode::kPrefetched:
      return "prefetched";
  }
  return "?";
}

void set_event_sink(EventSink* sink) noexcept {
#if TESSERA_TRACE_COMPILED
  if (sink != nullptr) {
    g_epoch_ns.store(steady_ns(), std::memory_order_relaxed);
    g_sink.store(sink, std::memory_order_release);
    g_events_on.store(true, std::memory_order_relaxed);
  } else {
    g_events_on.store(false, std::memory_order_relaxed);
  }
#else
  (void)sink;
#endif
}

int64_t events_now_ns() noexcept {
  return steady_ns() - g_epoch_ns.load(std::memory_order_relaxed);
}

void LaunchEvents::begin(const std::string& kernel, int num_cores) {
  if (EventSink* sink = g_sink.load(std::memory_order_acquire)) {
    tag_ = sink->begin_launch(kernel, num_cores, events_now_ns());
  }
}

void LaunchEvents::end() {
  if (EventSink* sink = g_sink.load(std::memory_order_acquire)) {
    sink->end_launch(tag_, events_now_ns());
  }
}

void CoreEvents::begin(const LaunchTag& tag, int core) {
  saved_core_ = t_core;
  saved_tag_ = t_tag;
  t_core = core;
  t_tag = tag;
  t0_ = events_now_ns();
}

void CoreEvents::end() {
  Event e;
  e.kind = EventKind::kCore;
  e.t0 = t0_;
  e.t1 = events_now_ns();
  e.name = "core";
  record(e);
  t_core = saved_core_;
  t_tag = saved_tag_;
}

void SpanEvent::begin(EventKind kind, const char* name, int64_t step, bool dma_wait) {
  if (t_tag.id < 0) return;
  kind_ = kind;
  name_ = name;
  step_ = step;
  dma_wait_ = dma_wait;
  t0_ = events_now_ns();
}

void SpanEvent::end() {
  Event e;
  e.kind = kind_;
  e.t0 = t0_;
  e.t1 = events_now_ns();
  e.step = step_;
  e.dma_wait = dma_wait_;
  e.name = name_;
  record(e);
}

void CopyEvent::begin(const RawRef& src, const RawRef& dst, const char* op) {
  if (t_tag.id < 0) return;
  e_.kind = EventKind::kDma;
  e_.mode = DmaMode::kCopied;
  e_.src = src.space;
  e_.dst = dst.space;
  e_.bytes = src.shape.size() * itemsize(src.dtype);
  e_.addr = src.space == MemorySpace::HBM || src.space == MemorySpace::ANY ? src.data : dst.data;
  e_.name = op;
  t0_ = events_now_ns();
}

void CopyEvent::end() {
  e_.t0 = t0_;
  e_.t1 = events_now_ns();
  record(e_);
}

void VpuEvent::begin(const ExprProgram& prog, const RawRef& dst) {
  if (t_tag.id < 0 || prog.nodes.empty()) return;
  const int64_t n = dst.shape.size();
  int64_t flops = 0;
  int64_t bytes = n * itemsize(dst.dtype);
  for (const ExprNode& node : prog.nodes) {
    switch (node.op) {
      case OpCode::kLoad:
        bytes += node.shape.size() * itemsize(node.dtype);
        break;
      case OpCode::kConst:
      case OpCode::kIota:
      case OpCode::kConvert:
      case OpCode::kTranspose:
      case OpCode::kReshape:
      case OpCode::kRoll:
        break;
      case OpCode::kReduceSum:
      case OpCode::kReduceMax:
      case OpCode::kReduceMin:
      case OpCode::kArgMax:
      case OpCode::kArgMin:
        flops += node.shape.size();  // one combine per operand element
        break;
      default:
        flops += n;  // elementwise: one op per destination element
        break;
    }
  }
  e_.kind = EventKind::kVpu;
  e_.flops = flops;
  e_.bytes = bytes;
  e_.name = op_name(prog.nodes.back().op);
  t0_ = events_now_ns();
}

void VpuEvent::end() {
  e_.t0 = t0_;
  e_.t1 = events_now_ns();
  record(e_);
}

void MxuEvent::begin(const char* op, int64_t m, int64_t n, int64_t k, int64_t bytes) {
  if (t_tag.id < 0) return;
  e_.kind = EventKind::kMxu;
  e_.flops = 2 * m * n * k;
  e_.bytes = bytes;
  e_.name = op;
  t0_ = events_now_ns();
}

void MxuEvent::end() {
  e_.t0 = t0_;
  e_.t1 = events_now_ns();
  record(e_);
}

void record_block_in_place(const void* block, int64_t bytes, bool input,
                           const PrefetchQueue* queue) {
  if (t_tag.id < 0) return;
  Event e;
  e.kind = EventKind::kDma;
  e.mode = DmaMode::kElided;
  if (input && queue != nullptr) {
    for (int i = 0; i < queue->num; ++i) {
      if (queue->blocks[i].base == block) e.mode = DmaMode::kPrefetched;
    }
    for (int i = 0; i < queue->num_earlier; ++i) {  // queued two steps ahead
      if (queue->earlier[i] == block) e.mode = DmaMode::kPrefetched;
    }
  }
  e.src = input ? MemorySpace::HBM : MemorySpace::VMEM;
  e.dst = input ? MemorySpace::VMEM : MemorySpace::HBM;
  e.bytes = bytes;
  e.addr = block;
  e.name = input ? "emit_pipeline copy-in" : "emit_pipeline write-back";
  e.t0 = e.t1 = events_now_ns();
  record(e);
}

void record_pipeline_operand(const void* array, int64_t window_bytes, int64_t array_bytes) {
  if (t_tag.id < 0 || window_bytes != array_bytes || array_bytes == 0) return;
  Event e;
  e.kind = EventKind::kWholeArray;
  e.bytes = array_bytes;
  e.addr = array;
  e.name = "whole-array block";
  e.t0 = e.t1 = events_now_ns();
  record(e);
}

}  // namespace tessera::detail
