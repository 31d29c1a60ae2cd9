// Internal: the trace recorder, the EventSink (runtime/events.h) a trace session installs.
// Events go to a buffer owned by the recording thread (a core of the pool, or the launching
// thread), so recording takes no lock: the buffer is registered with the session once per thread
// and session, under a mutex, and read back only by Session::stop, after every launch returned.
#pragma once

#include <cstdint>
#include <source_location>
#include <string>
#include <vector>

#include "runtime/events.h"

namespace tessera::trace::detail {

// The runtime's event vocabulary, by the names the trace layer uses.
using Event = tessera::detail::Event;
using Kind = tessera::detail::EventKind;
using DmaMode = tessera::detail::DmaMode;
using tessera::detail::to_string;

/// One launch of a kernel, recorded by the launching thread.
struct LaunchRecord {
  std::string kernel;
  int num_cores = 0;
  int64_t t0 = 0;
  int64_t t1 = 0;
};

/// ns since the session started.
inline int64_t now_ns() noexcept { return tessera::detail::events_now_ns(); }
/// Starts the session that TESSERA_TRACE asks for, once per process (a no-op without it).
void start_from_env();
/// Constructs the recorder's registry (so that a static made after it is destroyed before it).
void touch_registry();

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
