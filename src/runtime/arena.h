// Internal: per-core VMEM, SMEM and semaphore arenas.
//
// Each mesh core owns one arena: a virtual reservation of the largest VMEM a kernel may ask for
// plus the SMEM capacity. Pages materialise on first write, and the first writer is the core's
// own thread (workers create and pre-touch their arena when they start), so on a multi-socket
// machine the memory lands near the core that uses it. Scratch buffers are laid out at fixed
// offsets computed once per launch; nothing is allocated per launch.
//
// The semaphore region is an array of 64-bit atomic counters. It is zero when a launch starts:
// zeroed when the arena is made, and re-zeroed by the launcher after every launch (never at the
// start of one, where another core could already have signalled a counter).
#pragma once

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <memory>

#include "runtime/value_heap.h"

namespace tessera::detail {

/// One semaphore: a counter that other cores may signal.
using SemaphoreCell = std::atomic<int64_t>;

/// Semaphores per core: 128 KiB of counters. The last kBarrierSemaphores are the core's barrier
/// semaphores (pltpu::get_barrier_semaphore, one per collective_id), which outlive launches; the
/// rest hold scratch and run_scoped semaphores.
inline constexpr int64_t kSemaphoresPerCore = 16384;
inline constexpr int64_t kBarrierSemaphores = 32;

/// Where a core sleeps while it waits on one of its semaphores: a futex word that wakers bump.
/// A waiter raises `sleepers` (seq_cst), reads `seq`, then looks at its counter and, if it is
/// short, sleeps while `seq` still holds what it read. A waker changes the counter (seq_cst), then
/// reads `sleepers` and, only when it is non-zero, bumps `seq` and wakes the sleepers. In the
/// single order of seq_cst operations, a waiter that missed the change read `seq` before the
/// waker bumped it, so its sleep returns at once: no wake-up is lost, and no lock is taken.
struct alignas(64) SemaphoreWaitQueue {
  std::atomic<uint32_t> seq{0};
  std::atomic<int> sleepers{0};

  /// Wakes the core if it sleeps in a wait (after a signal, a DMA or a cancellation).
  void wake() noexcept;
};

class CoreArena {
 public:
  CoreArena();
  ~CoreArena();
  CoreArena(const CoreArena&) = delete;
  CoreArena& operator=(const CoreArena&) = delete;

  std::byte* vmem() const noexcept { return vmem_; }
  std::byte* smem() const noexcept { return smem_; }
  /// kSemaphoresPerCore counters, zero between launches.
  SemaphoreCell* semaphores() const noexcept { return semaphores_.get(); }
  SemaphoreWaitQueue& wait_queue() noexcept { return wait_queue_; }
  /// The blocks of the in-kernel values living in this core's VMEM (value_heap.h).
  ValueHeap& values() noexcept { return values_; }

 private:
  std::byte* base_ = nullptr;
  size_t bytes_ = 0;
  std::byte* vmem_ = nullptr;
  std::byte* smem_ = nullptr;
  std::unique_ptr<SemaphoreCell[]> semaphores_;
  SemaphoreWaitQueue wait_queue_;
  ValueHeap values_;
};

/// Bytes of VMEM pre-touched by the owning core when its arena is made.
inline constexpr int64_t kPretouchBytes = int64_t{1} << 20;

}  // namespace tessera::detail
