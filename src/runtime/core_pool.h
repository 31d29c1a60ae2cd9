// Internal: the persistent pool of core threads.
//
// A launch of n cores runs core 0 on the calling thread and cores 1..n-1 on pool workers, which
// are created once (the pool grows to the largest mesh seen) and then reused: a launch costs a
// wake-up, not a thread start. A core whose worker has not started its job by the time the
// calling thread has finished core 0 is run by the calling thread (Slot::taken). Idle workers spin
// briefly (so back-to-back launches cost well under a microsecond to start) and then sleep on a
// futex (std::atomic::wait). Launches are serialised by a mutex, which makes concurrent launches
// from several host threads safe.
//
// One pool serves every kernel of the process; an in-process device of a mesh (devices.h) has a
// pool of its own (`for_device`), whose threads are that device's cores. A thread's `current()`
// pool is the one it belongs to: a worker's own, the device's on a device thread, else the
// process-wide one.
#pragma once

#if defined(__linux__)
#include <sched.h>
#include <sys/types.h>
#endif

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <mutex>
#include <thread>
#include <vector>

#include "runtime/arena.h"
#include "tessera/detail/runtime.h"

namespace tessera::detail {

/// The most cores a mesh may have.
inline constexpr int kMaxCores = 256;

#if defined(__linux__)
/// Moves the calling thread, worker `core` (>= 1) of a launch started on `launcher_cpu`, off that
/// CPU when it is on it: to the (core - 1)-th, cyclically, of the other CPUs in `allowed` (its
/// affinity mask, pinned there for a moment and then `allowed` again). Returns the CPU it moved
/// to, or -1 when it stayed (on another CPU already, or no other CPU allowed).
int spread_out(int launcher_cpu, int core, const cpu_set_t& allowed) noexcept;
#endif

/// Lines of memory a pool worker reads as soon as it starts its job and that the launching thread
/// has just written (the job's captures on its stack). A worker reading them
/// one after another waits for one cross-core transfer each (measured ~80-200 ns apiece on a
/// 2-vCPU VM: a 2-core tiny launch's worker ran its job in ~650 ns against the launcher's ~230
/// ns; docs/performance.md, "The worker's first reads"); asked for all at once as it wakes, they
/// arrive together. The job object's own first two lines are always asked for. Only a hint:
/// null entries are skipped, and a line may be anything (a prefetch never faults).
struct JobLines {
  static constexpr int kMax = 2;
  const void* line[kMax] = {};
};

class CorePool {
 public:
  static CorePool& instance();
  /// The pool of in-process device `device` (>= 1; device 0 uses instance()), made on first use
  /// and never destroyed.
  static CorePool& for_device(int device);
  /// The calling thread's pool: its own for a worker, the one set by set_current() (a device
  /// thread), else instance().
  static CorePool& current() noexcept;
  /// Makes `pool` the calling thread's current pool (null: back to instance()).
  static void set_current(CorePool* pool) noexcept;

  /// Runs job(core) for every core in [0, n) and returns when all have returned. `job` must not
  /// throw. Serialised with other calls.
  void run(int n, FunctionRef<void(int)> job, const JobLines& lines = {});
  /// The same, then `after()` on the calling thread once every core has returned, still inside
  /// the serialised section (so no other launch can touch the arenas meanwhile). `after` must
  /// not throw.
  void run(int n, FunctionRef<void(int)> job, FunctionRef<void()> after,
           const JobLines& lines = {});
  /// The same, with `own_job` (doing what `job` does) for the cores the calling thread runs
  /// itself: core 0, and a core whose worker started late. A line another core has read costs
  /// its writer a transfer when it next touches it, even to read it (measured on a 2-vCPU VM:
  /// ~100 ns for the launcher's first read of its job object after core 0's body, once a worker
  /// had read that object); a job object of the launcher's own stays in its cache.
  void run(int n, FunctionRef<void(int)> job, FunctionRef<void(int)> own_job,
           FunctionRef<void()> after, const JobLines& lines);

  /// True when idle or waiting threads should spin before they sleep (the pool has no more
  /// threads than the machine has hardware threads). Only a hint.
  bool spinning() const noexcept;

  /// Makes the threads and arenas of cores [0, n) now (run() makes them when it first needs
  /// them): a device publishes its launch to the others before it runs it, and they may reach
  /// its cores' arenas from then on.
  void reserve(int n);

  /// The arena of `core`; valid during run() for cores < n.
  CoreArena& arena(int core) { return *arenas_[static_cast<size_t>(core)]; }
  /// The arena of `core` if this pool has made it yet (any thread may ask; arenas, once made,
  /// live as long as the pool), else null.
  CoreArena* arena_if_made(int core) const noexcept {
    return core < arenas_made_.load(std::memory_order_acquire)
               ? arenas_[static_cast<size_t>(core)].get()
               : nullptr;
  }

 private:
  // One slot per worker, holding everything a worker needs to start in its first cache line: the
  // sequence number it waits on, a copy of the job and the lines to prefetch. The launcher writes
  // `job` and `ahead`, then bumps the `seq` of exactly the workers the launch needs (seq_cst RMW:
  // releases them); a worker that sees its seq change reads them from the same line (its seq_cst
  // load acquires), so starting costs one cache-line transfer, not a chain of them. Workers
  // outside the launch are not woken and never read their slot's job. `ahead` (the job object's
  // first two lines, then the caller's JobLines) is read before the worker has claimed the job,
  // when a late worker may read it while the launcher writes the next launch's: atomics, read
  // only as prefetch hints; `job` itself is read only after the claim.
  // `seq` is 32 bits on purpose: std::atomic<T>::wait sleeps on a futex of T's own address only
  // when T is 4 bytes; for 8 bytes libstdc++ 12 waits on a shared proxy counter instead, and
  // there a notify could be missed until an unrelated wake (launches took ~400 µs instead of
  // ~10). Wrap-around is harmless: a worker only compares for inequality.
  // `taken` says who runs this launch's job for the slot's core: the worker, or the launcher
  // itself when it has finished its own core before the worker started (a worker descheduled
  // on a busy machine would otherwise hold up every launch for a time slice); whichever
  // exchanges it from 0 to 1 runs the job. `posted` is the seq of the launch whose job `job`
  // is, written before `taken` is released, so that a worker that claims a job knows which
  // launch it finished (one that woke for an earlier launch may claim the next one's job).
  // The second line is the worker's own: `done`, the posted number of the last job it finished,
  // which the launcher waits on. A count shared by all cores would cost two transfers at each
  // end (the worker's RMW fetches the line the launcher wrote, then the launcher fetches it
  // back); a line only the worker writes costs the launcher one read.
  // The third line holds what the worker writes only when it goes to sleep (`sleeping`) or
  // starts (`tid`, `allowed`: its thread id and affinity mask), which the launcher reads on
  // every launch: kept off the first two, the launcher finds it in its own cache.
  // `narrowed` and `launcher_cpu` serve narrow_before_wake and spread_out.
  struct alignas(64) Slot {
    std::atomic<uint32_t> seq{0};
    std::atomic<int> taken{1};
    std::atomic<uint32_t> posted{0};
    std::atomic<int16_t> launcher_cpu{-1};  // the CPU the launch started on (-1: unknown)
    std::atomic<bool> narrowed{false};
    FunctionRef<void(int)> job;
    std::atomic<const void*> ahead[2 + JobLines::kMax] = {};
    alignas(64) std::atomic<uint32_t> done{0};
    alignas(64) std::atomic<int> sleeping{0};
#if defined(__linux__)
    pid_t tid = 0;
    cpu_set_t allowed{};
#endif
  };

  static_assert(offsetof(Slot, done) == 64, "a slot's first line holds all a worker starts with");

  CorePool() = default;
  void ensure_cores(int n);
  void worker_main(int core, Slot* slot);
  static void prefetch_job(const Slot& slot) noexcept;
  void move_off_launcher(int core, const Slot& slot) noexcept;
  void run_locked(int n, FunctionRef<void(int)> job, FunctionRef<void(int)> own_job,
                  const JobLines& lines);
  // Takes `launcher_cpu` out of the sleeping worker's affinity mask until it wakes (-1: nothing).
  static void narrow_before_wake(Slot& s, int launcher_cpu) noexcept;

  std::mutex launch_mu_;
  std::vector<std::thread> workers_;  // workers_[k] runs core k + 1
  // arenas_[c]: core c, for c < kMaxCores; allocated once so that arena_if_made may read it from
  // other threads while the pool grows. arenas_made_: the arenas below it exist (each worker's
  // is made before it counts as ready; release, paired with arena_if_made's acquire).
  std::unique_ptr<std::unique_ptr<CoreArena>[]> arenas_;
  std::atomic<int> arenas_made_{0};
  std::unique_ptr<Slot[]> slots_;  // slots_[c] for core c >= 1 (index 0 unused)
  int slot_capacity_ = 0;
  // Set while the launcher sleeps for its workers' `done` (run_locked): a worker that finishes
  // then bumps `finished_` and wakes it. Both are written rarely (only around a sleep), so
  // workers keep the line in their caches.
  alignas(64) std::atomic<int> launcher_sleeping_{0};
  std::atomic<uint32_t> finished_{0};
  // True from the start of a launch of several cores to its end (a worker that woke too late for
  // its job watches it), on a line of its own: the launcher writes it twice per launch.
  alignas(64) std::atomic<bool> running_{false};
  alignas(64) std::atomic<int> ready_{0};
};

}  // namespace tessera::detail
