// Internal: the mailbox of a rank's directory (mpi_runtime.h), through which ranks on one host
// hand each other semaphore signals and the launches' start-barrier entries and ends of bodies
// without MPI.
//
// A message through MPI passes three threads: the sending core queues it for its rank's engine
// thread, which sends it and rings the target's bell, and the target's engine receives it and
// applies it for the waiting core. On a host whose CPUs all run kernels each of those wake-ups
// waits for a CPU: a signal round trip between two ranks of a 2-vCPU machine took ~155 µs
// (docs/devices.md, "Signals between ranks on one host"). Through the mailbox the sending core
// writes the letter into the target's shared memory itself, and the target takes it in its next
// wait: a core that spins there polls the mailbox (MpiTransport::poll), and a thread about to
// sleep looks once more (MpiTransport::sleeping). The target's engine is rung only while a
// thread of it sleeps; it then takes the letter as it would a message, and wakes the sleeper.
//
// The mailbox is a bounded multi-producer multi-consumer queue (each cell carries the position
// it is ready for, so producers and consumers claim cells by compare-and-swap on the tail and
// head), in memory shared by the processes: only lock-free atomics, no pointers. A full mailbox
// is no error: the sender sends that message through MPI instead. The checked engine's signals
// carry notes of any length and always go through MPI.
#pragma once

#include <atomic>
#include <cstdint>

namespace tessera::detail::mpi {

/// A signal for a core's semaphore: a remote signal, or the bytes a copy added to a receive
/// semaphore.
struct Signal {
  int64_t program;  // the program it belongs to (MpiRuntime::program())
  int64_t seq;      // the launch it belongs to (barrier semaphores: any)
  int64_t core;
  int64_t slot;
  int64_t inc;
};

class Mailbox {
 public:
  enum class Kind : int32_t {
    kSignal,  // `s` is a signal
    kEnter,   // rank `from` has entered launch s.seq of program s.program (its start barrier)
    kBodies,  // rank `from` has run every body of launch s.seq, having sent this rank s.core
              // messages and letters by then, s.slot of them letters (this one included)
  };
  struct Letter {
    Kind kind = Kind::kSignal;
    int32_t from = 0;  // the sending rank
    Signal s{};
  };
  static constexpr uint64_t kCells = 256;

  Mailbox() noexcept {
    for (uint64_t i = 0; i < kCells; ++i) cells_[i].ready.store(i, std::memory_order_relaxed);
  }

  /// Queues `letter`; false when the mailbox is full.
  bool push(const Letter& letter) noexcept {
    uint64_t pos = tail_.v.load(std::memory_order_relaxed);
    for (;;) {
      Cell& c = cells_[pos % kCells];
      const uint64_t ready = c.ready.load(std::memory_order_acquire);
      const auto dif = static_cast<int64_t>(ready - pos);
      if (dif == 0) {
        if (tail_.v.compare_exchange_weak(pos, pos + 1, std::memory_order_relaxed)) {
          c.letter = letter;
          c.ready.store(pos + 1, std::memory_order_release);
          return true;
        }
      } else if (dif < 0) {
        return false;  // the cell still holds a letter from kCells positions ago
      } else {
        pos = tail_.v.load(std::memory_order_relaxed);
      }
    }
  }

  /// Takes the oldest letter into `out`; false when the mailbox is empty.
  bool pop(Letter& out) noexcept {
    uint64_t pos = head_.v.load(std::memory_order_relaxed);
    for (;;) {
      Cell& c = cells_[pos % kCells];
      const uint64_t ready = c.ready.load(std::memory_order_acquire);
      const auto dif = static_cast<int64_t>(ready - (pos + 1));
      if (dif == 0) {
        if (head_.v.compare_exchange_weak(pos, pos + 1, std::memory_order_relaxed)) {
          out = c.letter;
          c.ready.store(pos + kCells, std::memory_order_release);
          return true;
        }
      } else if (dif < 0) {
        return false;
      } else {
        pos = head_.v.load(std::memory_order_relaxed);
      }
    }
  }

  /// Whether a letter may be waiting (a cheap look for a spinning core: two loads).
  bool may_hold_letters() const noexcept {
    return head_.v.load(std::memory_order_relaxed) != tail_.v.load(std::memory_order_relaxed);
  }

  /// The threads of this rank asleep in a wait (MpiTransport::sleeping). A sender that finds
  /// one rings the rank's engine, which takes the letter and wakes them.
  std::atomic<int32_t>& sleepers() noexcept { return sleepers_.v; }

 private:
  // Each on a cache line of its own: producers write the tail, consumers the head, and
  // spinning cores read both. (The window's base is only 8-byte aligned, hence the padding
  // rather than alignas.)
  template <class T>
  struct Padded {
    std::atomic<T> v{0};
    char pad[64 - sizeof(std::atomic<T>)];
  };
  struct Cell {
    std::atomic<uint64_t> ready{0};  // the position whose letter it holds, plus one; or it awaits
    Letter letter;
  };
  Padded<uint64_t> head_;
  Padded<uint64_t> tail_;
  Padded<int32_t> sleepers_;
  Cell cells_[kCells];
};

static_assert(std::atomic<uint64_t>::is_always_lock_free &&
                  std::atomic<int32_t>::is_always_lock_free,
              "the mailbox is shared between processes: its atomics must be lock-free");

}  // namespace tessera::detail::mpi
