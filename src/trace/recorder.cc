// The trace recorder: per-thread event buffers, the session's launch list, and the hooks'
// out-of-line halves (they run only while a session records).
#include "trace/recorder.h"

#include <fmt/format.h>
#include <sys/mman.h>

#include <cstdlib>
#include <memory>
#include <mutex>
#include <new>
#include <type_traits>

#include "runtime/context.h"
#include "tessera/detail/expr_program.h"
#include "tessera/error.h"
#include "tessera/ref.h"

namespace tessera::trace::detail {

#if TESSERA_TRACE_COMPILED
std::atomic<bool> g_on{false};
#endif

namespace {

using Clock = std::chrono::steady_clock;

// One thread's events, in chunks: appending never moves what was recorded (a growing vector
// would copy it all, and fault in twice the memory, in the middle of the kernel it records).
// A chunk is 4 MiB mapped with MAP_POPULATE: one system call fills its pages, where touching
// them one by one would take a page fault per 4 KiB inside the recorded kernel (measured: most of
// what recording cost on the add benchmark). Aligned to its own cache lines: the buffers of
// different cores are allocated next to each other, and a shared line would bounce between
// the cores on every event.
struct alignas(128) ThreadBuffer {
  static constexpr size_t kChunkBytes = size_t{4} << 20;
  static constexpr size_t kChunk = kChunkBytes / sizeof(Event);
  struct Unmap {
    void operator()(Event* p) const noexcept { ::munmap(p, kChunkBytes); }
  };
  std::vector<std::unique_ptr<Event, Unmap>> chunks;
  size_t used = kChunk;  // events in the last chunk
  int64_t dropped = 0;   // events lost because no chunk could be mapped
  uint64_t generation = 0;

  void push(const Event& e) {
    if (used == kChunk) {
      void* p = ::mmap(nullptr, kChunkBytes, PROT_READ | PROT_WRITE,
                       MAP_PRIVATE | MAP_ANONYMOUS | MAP_POPULATE, -1, 0);
      if (p == MAP_FAILED) {
        ++dropped;
        return;
      }
      chunks.emplace_back(static_cast<Event*>(p));
      used = 0;
    }
    new (chunks.back().get() + used) Event(e);  // Event is trivially destructible
    ++used;
  }
  size_t size() const { return chunks.empty() ? 0 : (chunks.size() - 1) * kChunk + used; }
  template <class F>
  void for_each(F&& f) const {
    for (size_t c = 0; c < chunks.size(); ++c) {
      const size_t n = c + 1 == chunks.size() ? used : kChunk;
      for (size_t i = 0; i < n; ++i) f(chunks[c].get()[i]);
    }
  }
};
static_assert(std::is_trivially_destructible_v<Event>);

// What every thread shares. Function-local static: constructed before the first session (also
// the one TESSERA_TRACE starts, whose destructor runs at exit) and so destroyed after it.
struct Registry {
  std::mutex mu;
  bool active = false;
  const char* owner = "";
  uint64_t generation = 0;  // bumped per session; a thread's buffer from an older one is stale
  std::atomic<int64_t> start_ns{0};
  std::vector<std::shared_ptr<ThreadBuffer>> buffers;
  std::vector<LaunchRecord> launches;
};

Registry& registry() {
  static Registry r;
  return r;
}

// The generation of the active session, published with release by begin_session.
std::atomic<uint64_t> g_generation{0};

thread_local std::shared_ptr<ThreadBuffer> t_buffer;
thread_local int t_core = 0;
thread_local int t_launch = -1;  // the launch this thread's core works for; -1: not recording
thread_local uint64_t t_generation = 0;  // the session that launch belongs to

int64_t steady_ns() noexcept {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(Clock::now().time_since_epoch())
      .count();
}

ThreadBuffer* buffer() {
  const uint64_t gen = g_generation.load(std::memory_order_acquire);
  if (t_buffer != nullptr && t_buffer->generation == gen) return t_buffer.get();
  Registry& r = registry();
  std::lock_guard<std::mutex> lock(r.mu);
  if (!r.active || r.generation != gen) return nullptr;  // the session ended meanwhile
  t_buffer = std::make_shared<ThreadBuffer>();
  t_buffer->generation = gen;
  r.buffers.push_back(t_buffer);
  return t_buffer.get();
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

int64_t now_ns() noexcept {
  return steady_ns() - registry().start_ns.load(std::memory_order_relaxed);
}

void record(Event e) {
  if (t_launch < 0) return;
  ThreadBuffer* b = buffer();
  // A launch of an earlier session (stopped while it ran, on another host thread) records
  // nothing into a later one: its launch index would name another kernel there.
  if (b == nullptr || b->generation != t_generation) return;
  e.core = t_core;
  e.launch = t_launch;
  b->push(e);
}

void begin_session(const char* who, std::source_location where) {
#if TESSERA_TRACE_COMPILED
  Registry& r = registry();
  std::lock_guard<std::mutex> lock(r.mu);
  if (r.active) {
    throw UsageError(ErrorKind::kInvalidArgument,
                     fmt::format("tessera: {}: a trace session is already recording (started by "
                                 "{}); one session records at a time: stop the first one (or "
                                 "unset TESSERA_TRACE) before starting another",
                                 who, r.owner),
                     where);
  }
  r.active = true;
  r.owner = who;
  r.generation = g_generation.load(std::memory_order_relaxed) + 1;
  r.buffers.clear();
  r.launches.clear();
  r.start_ns.store(steady_ns(), std::memory_order_relaxed);
  g_generation.store(r.generation, std::memory_order_release);
  g_on.store(true, std::memory_order_relaxed);
#else
  throw UsageError(ErrorKind::kInvalidArgument,
                   fmt::format("tessera: {}: tracing was compiled out of this build "
                               "(TESSERA_ENABLE_TRACE=OFF); reconfigure with "
                               "-DTESSERA_ENABLE_TRACE=ON to record traces",
                               who),
                   where);
#endif
}

Collected end_session() {
  Collected c;
#if TESSERA_TRACE_COMPILED
  g_on.store(false, std::memory_order_relaxed);
  Registry& r = registry();
  std::lock_guard<std::mutex> lock(r.mu);
  // Every launch has returned (stop() is called between launches), so the cores' buffers are
  // complete and visible: a launch's end synchronises with each core's last event.
  c.duration_ns = steady_ns() - r.start_ns.load(std::memory_order_relaxed);
  c.launches = std::move(r.launches);
  size_t n = 0;
  for (const auto& b : r.buffers) n += b->size();
  c.events.reserve(n);
  for (const auto& b : r.buffers) {
    b->for_each([&](const Event& e) { c.events.push_back(e); });
    c.dropped += b->dropped;
    b->chunks.clear();
    b->used = ThreadBuffer::kChunk;
    b->dropped = 0;
  }
  r.buffers.clear();
  r.launches.clear();
  r.active = false;
  r.owner = "";
#endif
  return c;
}

LaunchScope::LaunchScope(const std::string& kernel, int num_cores) {
  if (!on()) {
    start_from_env();
    if (!on()) return;
  }
  Registry& r = registry();
  const int64_t t0 = now_ns();
  std::lock_guard<std::mutex> lock(r.mu);
  if (!r.active) return;
  id_ = static_cast<int>(r.launches.size());
  generation_ = r.generation;
  r.launches.push_back(LaunchRecord{kernel, num_cores, t0, t0});
}

LaunchScope::~LaunchScope() {
  if (id_ < 0) return;
  Registry& r = registry();
  const int64_t t1 = now_ns();
  std::lock_guard<std::mutex> lock(r.mu);
  if (r.active && r.generation == generation_ && static_cast<size_t>(id_) < r.launches.size()) {
    r.launches[static_cast<size_t>(id_)].t1 = t1;
  }
}

CoreScope::CoreScope(const LaunchScope& launch, int core) {
  if (launch.id() < 0) return;
  saved_core_ = t_core;
  saved_launch_ = t_launch;
  saved_generation_ = t_generation;
  t_core = core;
  t_launch = launch.id();
  t_generation = launch.generation();
  t0_ = now_ns();
}

CoreScope::~CoreScope() {
  if (t0_ < 0) return;
  Event e;
  e.kind = Kind::kCore;
  e.t0 = t0_;
  e.t1 = now_ns();
  e.name = "core";
  record(e);
  t_core = saved_core_;
  t_launch = saved_launch_;
  t_generation = saved_generation_;
}

void SpanScope::begin(Kind kind, const char* name, int64_t step, bool dma_wait) {
  if (t_launch < 0) return;
  kind_ = kind;
  name_ = name;
  step_ = step;
  dma_wait_ = dma_wait;
  t0_ = now_ns();
}

void SpanScope::end() {
  Event e;
  e.kind = kind_;
  e.t0 = t0_;
  e.t1 = now_ns();
  e.step = step_;
  e.dma_wait = dma_wait_;
  e.name = name_;
  record(e);
}

void CopyScope::begin(const tessera::detail::RawRef& src, const tessera::detail::RawRef& dst,
                      const char* op) {
  if (t_launch < 0) return;
  e_.kind = Kind::kDma;
  e_.mode = DmaMode::kCopied;
  e_.src = src.space;
  e_.dst = dst.space;
  e_.bytes = src.shape.size() * itemsize(src.dtype);
  e_.addr = src.space == MemorySpace::HBM || src.space == MemorySpace::ANY ? src.data : dst.data;
  e_.name = op;
  t0_ = now_ns();
}

void CopyScope::end() {
  e_.t0 = t0_;
  e_.t1 = now_ns();
  record(e_);
}

void VpuScope::begin(const tessera::detail::ExprProgram& prog, const tessera::detail::RawRef& dst) {
  using tessera::detail::OpCode;
  if (t_launch < 0 || prog.nodes.empty()) return;
  const int64_t n = dst.shape.size();
  int64_t flops = 0;
  int64_t bytes = n * itemsize(dst.dtype);
  for (const tessera::detail::ExprNode& node : prog.nodes) {
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
  e_.kind = Kind::kVpu;
  e_.flops = flops;
  e_.bytes = bytes;
  e_.name = tessera::detail::op_name(prog.nodes.back().op);
  t0_ = now_ns();
}

void VpuScope::end() {
  e_.t0 = t0_;
  e_.t1 = now_ns();
  record(e_);
}

void MxuScope::begin(const char* op, int64_t m, int64_t n, int64_t k, int64_t bytes) {
  if (t_launch < 0) return;
  e_.kind = Kind::kMxu;
  e_.flops = 2 * m * n * k;
  e_.bytes = bytes;
  e_.name = op;
  t0_ = now_ns();
}

void MxuScope::end() {
  e_.t0 = t0_;
  e_.t1 = now_ns();
  record(e_);
}

void record_block_in_place(const void* block, int64_t bytes, bool input,
                           const tessera::detail::PrefetchQueue* queue) {
  if (t_launch < 0) return;
  Event e;
  e.kind = Kind::kDma;
  e.mode = DmaMode::kElided;
  if (input && queue != nullptr) {
    for (int i = 0; i < queue->num; ++i) {
      if (queue->blocks[i].base == block) e.mode = DmaMode::kPrefetched;
    }
  }
  e.src = input ? MemorySpace::HBM : MemorySpace::VMEM;
  e.dst = input ? MemorySpace::VMEM : MemorySpace::HBM;
  e.bytes = bytes;
  e.addr = block;
  e.name = input ? "emit_pipeline copy-in" : "emit_pipeline write-back";
  e.t0 = e.t1 = now_ns();
  record(e);
}

void record_pipeline_operand(const void* array, int64_t window_bytes, int64_t array_bytes) {
  if (t_launch < 0 || window_bytes != array_bytes || array_bytes == 0) return;
  Event e;
  e.kind = Kind::kWholeArray;
  e.bytes = array_bytes;
  e.addr = array;
  e.name = "whole-array block";
  e.t0 = e.t1 = now_ns();
  record(e);
}

}  // namespace tessera::trace::detail
