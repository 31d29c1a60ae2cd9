// Internal: the runtime side of tessera/resident.h, the semaphores a pallas_call leaves for the
// next one. A SemaphoreArray's state holds, per core, its counts between calls and, in checked
// mode, the copies still in flight on them (CarriedCopy). During a call each core's counts live
// in that core's semaphore scratch (pallas_call.cc lays it out): load_semaphores puts the counts
// and the carried copies there before the core's body, save_semaphores takes them back after it.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "runtime/engine.h"
#include "tessera/ref.h"

namespace tessera::detail {

struct CoreContext;

/// One core's counters of a SemaphoreArray between calls, and per semaphore the copies in flight
/// on it.
struct CoreSemaphores {
  std::vector<int64_t> counts;
  std::vector<std::vector<CarriedCopy>> copies;
};
/// A SemaphoreArray's counters: `count` per core, for the cores calls have run on (a core past
/// the end holds zeros).
struct SemaphoreState {
  int64_t count = 0;
  std::vector<CoreSemaphores> cores;
};

/// One semaphore operand of a call, as a core's scratch holds it.
struct ResidentSemaphore {
  SemaphoreState* state = nullptr;
  SemaphoreCell* cells = nullptr;  // `count` cells in the core's semaphore region
  int64_t count = 0;
  std::string what;  // "input 2" / "output 1", for messages
};

/// Where a call's kernel sees a caller's array: `caller` bytes [caller, caller + bytes) appear at
/// `kernel` (an input aliased to an output is read from the output's buffer).
struct ArrayPlace {
  const void* caller = nullptr;
  void* kernel = nullptr;
  int64_t bytes = 0;
};

/// Before core `core`'s body: its counts into the cells, and its copies carried in flight into
/// the engine's books, their arrays moved to where this call's kernel sees them. Raises
/// (KernelError) for a copy whose source or destination is not an array of this call: on a TPU
/// its memory may have been reused.
void load_semaphores(CoreContext& ctx, int core, const std::vector<ResidentSemaphore>& sems,
                     const std::vector<ArrayPlace>& places);
/// After a core's body returned: the counts and the engine's copies still in flight on them,
/// into `out` (one per semaphore operand, committed to the SemaphoreArrays when the call
/// succeeds); the cells are zeroed, so the exit check passes them.
void save_semaphores(CoreContext& ctx, const std::vector<ResidentSemaphore>& sems,
                     std::vector<CoreSemaphores>& out);

}  // namespace tessera::detail
