// Internal: the persistent pool of core threads.
//
// A launch of n cores runs core 0 on the calling thread and cores 1..n-1 on pool workers, which
// are created once (the pool grows to the largest mesh seen) and then reused: a launch costs a
// wake-up, not a thread start. A core whose worker has not started its job by the time the
// calling thread has finished core 0 is run by the calling thread (Slot::taken). Idle workers spin
// briefly (so back-to-back launches cost well under a microsecond to start) and then sleep on a
// futex (std::atomic::wait). Launches are serialised by a mutex, which makes concurrent launches
// from several host threads safe.
#pragma once

#include <atomic>
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

class CorePool {
 public:
  static CorePool& instance();

  /// Runs job(core) for every core in [0, n) and returns when all have returned. `job` must not
  /// throw. Serialised with other calls.
  void run(int n, FunctionRef<void(int)> job);
  /// The same, then `after()` on the calling thread once every core has returned, still inside
  /// the serialised section (so no other launch can touch the arenas meanwhile). `after` must
  /// not throw.
  void run(int n, FunctionRef<void(int)> job, FunctionRef<void()> after);

  /// True when idle or waiting threads should spin before they sleep (the pool has no more
  /// threads than the machine has hardware threads). Only a hint.
  bool spinning() const noexcept { return spin_.load(std::memory_order_relaxed); }

  /// The arena of `core`; valid during run() for cores < n.
  CoreArena& arena(int core) { return *arenas_[static_cast<size_t>(core)]; }

 private:
  // One slot per worker, each on its own cache line, holding everything a worker needs to start:
  // the sequence number it waits on and a copy of the job. The launcher writes `job`, then bumps
  // the `seq` of exactly the workers the launch needs (seq_cst RMW: releases `job`); a worker that
  // sees its seq change reads `job` from the same line (its seq_cst load acquires), so starting
  // costs one cache-line transfer, not a chain of them. Workers outside the launch are not woken
  // and never read their slot's job.
  // `seq` is 32 bits on purpose: std::atomic<T>::wait sleeps on a futex of T's own address only
  // when T is 4 bytes; for 8 bytes libstdc++ 12 waits on a shared proxy counter instead, and
  // there a notify could be missed until an unrelated wake (launches took ~400 µs instead of
  // ~10). Wrap-around is harmless: a worker only compares for inequality.
  // `taken` says who runs this launch's job for the slot's core: the worker, or the launcher
  // itself when it has finished its own core before the worker started (a worker descheduled
  // on a busy machine would otherwise hold up every launch for a time slice); whichever
  // exchanges it from 0 to 1 runs the job.
  struct alignas(64) Slot {
    std::atomic<uint32_t> seq{0};
    std::atomic<int> sleeping{0};
    std::atomic<int> taken{1};
    FunctionRef<void(int)> job;
  };

  CorePool() = default;
  void ensure_cores(int n);
  void worker_main(int core, Slot* slot);
  void run_locked(int n, FunctionRef<void(int)> job);

  std::mutex launch_mu_;
  std::vector<std::thread> workers_;                // workers_[k] runs core k + 1
  std::vector<std::unique_ptr<CoreArena>> arenas_;  // arenas_[c]: core c
  std::unique_ptr<Slot[]> slots_;                   // slots_[c] for core c >= 1 (index 0 unused)
  int slot_capacity_ = 0;
  std::atomic<int> remaining_{0};
  std::atomic<int> launcher_sleeping_{0};
  std::atomic<int> ready_{0};
  // False when the pool has more threads than the machine. Only a hint (relaxed): a stale value
  // changes how long a thread spins, never correctness.
  std::atomic<bool> spin_{true};
};

}  // namespace tessera::detail
