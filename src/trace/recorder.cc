// The trace recorder: per-thread event buffers and the session's launch list, behind the
// runtime's EventSink interface (installed while a session records).
#include "trace/recorder.h"

#include <fmt/format.h>
#include <sys/mman.h>

#include <cstdlib>
#include <memory>
#include <mutex>
#include <new>
#include <type_traits>

#include "tessera/error.h"

namespace tessera::trace::detail {

namespace {

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
struct Registry final : tessera::detail::EventSink {
  tessera::detail::LaunchTag begin_launch(const std::string& kernel, int num_cores,
                                          int64_t t0) override;
  void end_launch(tessera::detail::LaunchTag tag, int64_t t1) override;
  void record(const Event& e, tessera::detail::LaunchTag tag) override;

  std::mutex mu;
  bool active = false;
  const char* owner = "";
  uint64_t generation = 0;  // bumped per session; a thread's buffer from an older one is stale
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

tessera::detail::LaunchTag Registry::begin_launch(const std::string& kernel, int num_cores,
                                                  int64_t t0) {
  std::lock_guard<std::mutex> lock(mu);
  if (!active) return {};
  tessera::detail::LaunchTag tag{static_cast<int>(launches.size()), generation};
  launches.push_back(LaunchRecord{kernel, num_cores, t0, t0});
  return tag;
}

void Registry::end_launch(tessera::detail::LaunchTag tag, int64_t t1) {
  std::lock_guard<std::mutex> lock(mu);
  if (active && generation == tag.generation && static_cast<size_t>(tag.id) < launches.size()) {
    launches[static_cast<size_t>(tag.id)].t1 = t1;
  }
}

void Registry::record(const Event& e, tessera::detail::LaunchTag tag) {
  ThreadBuffer* b = buffer();
  // A launch of an earlier session (stopped while it ran, on another host thread) records
  // nothing into a later one: its launch index would name another kernel there.
  if (b == nullptr || b->generation != tag.generation) return;
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
  g_generation.store(r.generation, std::memory_order_release);
  tessera::detail::set_event_sink(&r);
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
  tessera::detail::set_event_sink(nullptr);
  Registry& r = registry();
  std::lock_guard<std::mutex> lock(r.mu);
  // Every launch has returned (stop() is called between launches), so the cores' buffers are
  // complete and visible: a launch's end synchronises with each core's last event.
  c.duration_ns = now_ns();
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

void touch_registry() { (void)registry(); }

}  // namespace tessera::trace::detail
