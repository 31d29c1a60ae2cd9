// Internal: the runtime side of tessera/resident.h, the semaphores a pallas_call leaves for the
// next one. A SemaphoreArray's state holds its counts between calls and, in checked mode, the
// copies still in flight on it (CarriedCopy). During a call its counts live in semaphore scratch
// of core 0 (pallas_call.cc lays it out): load_semaphores puts the counts and the carried copies
// there before the body, save_semaphores takes them back after it.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "runtime/engine.h"
#include "tessera/ref.h"

namespace tessera::detail {

struct CoreContext;

/// The counters of a SemaphoreArray between calls, and per semaphore the copies in flight on it.
struct SemaphoreState {
  std::vector<int64_t> counts;
  std::vector<std::vector<CarriedCopy>> copies;
};

/// One semaphore operand of a call, as its core-0 scratch holds it.
struct ResidentSemaphore {
  SemaphoreState* state = nullptr;
  SemaphoreCell* cells = nullptr;  // `count` cells in core 0's semaphore region
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

/// Before core 0's body: the counts into the cells, and the copies carried in flight into the
/// engine's books, their arrays moved to where this call's kernel sees them. Raises (KernelError)
/// for a copy whose source or destination is not an array of this call: on a TPU its memory may
/// have been reused.
void load_semaphores(CoreContext& ctx, const std::vector<ResidentSemaphore>& sems,
                     const std::vector<ArrayPlace>& places);
/// After core 0's body returned: the counts and the engine's copies still in flight on them,
/// into `out` (one state per semaphore operand, committed to the SemaphoreArrays when the call
/// succeeds); the cells are zeroed, so the exit check passes them.
void save_semaphores(CoreContext& ctx, const std::vector<ResidentSemaphore>& sems,
                     std::vector<SemaphoreState>& out);

}  // namespace tessera::detail
