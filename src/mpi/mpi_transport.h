// Internal: the MPI transport (mpi_runtime.h describes the design): this rank is device `rank`
// of the mesh; other devices are reached through the window (same host: load/store; otherwise
// MPI_Put by the engine thread) and through signal messages.
#pragma once

#include <atomic>
#include <exception>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "mpi/mpi_runtime.h"
#include "runtime/transport.h"

namespace tessera::detail::mpi {

class MpiTransport final : public Transport {
 public:
  MpiTransport(MeshInfo mesh, MpiRuntime& runtime);

  void enter(int device, DeviceLaunch& launch, bool barrier) override;
  void leave(int device, DeviceLaunch& launch) noexcept override;
  void put(CoreContext& ctx, const RemoteCopy& copy) override;
  void signal(CoreContext& ctx, DeviceTarget target, int64_t slot, int64_t inc, const char* op,
              std::source_location where, const CheckNote* note) override;
  void fail(int device, std::exception_ptr error) noexcept override;
  void finished(int device) noexcept override;
  std::exception_ptr failure() const override;
  uint64_t entered(int device) const override;
  bool done(int device) const override;
  uint64_t wait_version() const noexcept override { return version_.load(); }
  void stuck(uint64_t version, std::string waits) noexcept override;
  /// Semaphores that outlive a launch (a pallas_call's SemaphoreArray operands) take remote
  /// copies and signals natively: a launch with them ends on every rank together, once
  /// everything sent in it has been applied. (The checked engine refuses them across ranks.)
  void bodies_done(CoreContext& ctx) override;

  /// A signal from rank `from` (the engine thread's, or this rank's own) for this rank's cores,
  /// with the sender's checked-mode note if it has one: applied now, or kept until this rank
  /// enters the launch it belongs to.
  /// `data`: a copy into this rank's VMEM or SMEM, whose bytes are stored just before the signal
  /// is applied.
  void deliver(const Signal& s, int from, std::shared_ptr<const CheckNote> note,
               std::shared_ptr<const DataCopy> data = nullptr, bool mailed = false);
  /// From the engine thread: applies the copies into VMEM or SMEM of the running launch that
  /// arrived before their core had begun (checked mode makes a core's memories as it begins).
  void retry_landings();
  /// Whether copies into cores' memory wait for their cores to begin (retry_landings applies
  /// them; the engine polls while they wait).
  bool landings_waiting() const noexcept { return landings_waiting_.load(); }
  /// From the engine thread: a wait-snapshot message (kTagWaits..kTagWaitsAck) from `rank`.
  void waits_message(int rank, int tag, const std::vector<char>& bytes);
  /// From the engine thread: rank `rank` has entered a launch with a start barrier (the message
  /// names the program and the launch).
  void entered_message(int rank, const std::vector<char>& bytes);
  /// Rank `rank` has entered launch `seq` of the running program, with a start barrier.
  /// `mailed`: the news came as a letter (mpi_mailbox.h), else as a message.
  void entered(int rank, uint64_t seq, bool mailed);
  /// On one host a waiting thread takes the letters of this rank's mailbox (mpi_mailbox.h).
  bool polled() const noexcept override { return rt_.shared_memory(); }
  void sleeping(bool on) noexcept override;
  void poll() override;
  /// From the engine thread: rank `rank` has run every body of a launch (kTagBodies).
  void bodies_message(int rank, const std::vector<char>& bytes);
  /// Rank `rank` has run every body of launch `seq`, having sent this rank `count` messages by
  /// then (this one included), `count_mailed` of them as letters; `mailed` as for entered().
  void bodies(int rank, uint64_t seq, int64_t count, int64_t count_mailed, bool mailed);
  /// From the engine thread: rank `rank` failed with `message`.
  void cancelled_by(int rank, int kind, const std::string& message);
  /// True once this rank or another has failed.
  bool failed() const noexcept { return failed_.load(); }

 private:
  struct Pending {
    Signal s;
    int from;
    std::shared_ptr<const CheckNote> note;
    std::shared_ptr<const DataCopy> data;
    bool mailed = false;
  };
  // Stores `p.data` into `arena`'s VMEM or SMEM; the view it filled (for the checked books).
  RawRef store_data(const Pending& p, CoreArena& arena) const;
  // A copy into the VMEM or SMEM of core `landed.core` of device `target` (put()'s case for
  // them): false when `copy.dst` is in neither of the calling core's.
  bool put_core_memory(CoreContext& ctx, const RemoteCopy& copy, int target, const Signal& landed);
  // Applies `p` to the running launch (under mu_); false when it is not for it. A race the
  // checked books find in it goes to `error`. `entering`: from enter(), for what waited for it.
  bool apply(const Pending& p, std::exception_ptr& error, bool entering = false);
  void deliver_locked(const Pending& p, std::exception_ptr& race);
  void wake_launch() noexcept;  // under mu_: every core of the running launch looks again
  // Sends every other rank a message `tag` (kTagEnter or kTagBodies) naming this program and
  // launch `seq` — a letter to its mailbox on one host; `with_count`: and how many messages this
  // rank has sent to that rank, this one included.
  void tell_others(int tag, uint64_t seq, bool with_count);
  // Deadlock over every rank (checked mode), from wait snapshots: every rank that finds all its
  // cores blocked (in semaphore waits, or for another rank to enter a launch: kind 1), or that
  // waits at a start barrier (kind 3), sends rank 0 what they wait for, with the signal messages
  // it has sent to and received from each rank; a rank whose program has returned says so (kind
  // 2). When every rank is blocked or finished, at least one in kind 1 (ranks that all wait at
  // start barriers are about to pass them), and every message sent has been received, rank 0
  // asks each rank whether anything has reached it since (its wait_version) and whether each of
  // its waits outside semaphore waits is still not ready; when none has moved, at that request
  // every rank was blocked with nothing in flight: a deadlock, reported on every rank. Engine
  // thread only, except publish().
  void publish(int kind, uint64_t version, const std::string& waits);
  void snapshot_arrived(int rank, const std::vector<char>& bytes);
  void evaluate_snapshots();
  void deadlock_found();
  void cancel_launch() noexcept;  // under mu_
  // Something reached this rank (a delivery, a rank's entry, a rank's end of its bodies, a
  // failure): wakes the waits of wait_for.
  void arrived() noexcept;
  void publish_failed() noexcept;  // in the directory: this rank stopped after a failure
  // Waits (sleeping) until `ready()`; raises kCancelled after a failure, kTimeout at the launch's
  // deadline naming `what`. In checked mode the wait takes part in the deadlock detection over
  // every rank, described by `blocked()`: a core's (ctx.engine set) through the engine's books,
  // with the rank's other cores; the start barrier's (no engine: the whole rank waits) as a
  // snapshot of its own. `ready` must be callable from the engine thread while it waits.
  template <class Ready, class What, class Blocked>
  void wait_for(CoreContext& ctx, Ready ready, const char* op, std::source_location where,
                What what, Blocked blocked);
  // The target's copy of the sender's HBM destination `dst` (its window offset), from the
  // target's directory `dir`.
  int64_t target_offset(const CoreContext& ctx, const Directory& dir, int target, const RawRef& dst,
                        const char* op, std::source_location where) const;
  void put_rma(CoreContext& ctx, const RemoteCopy& copy, int64_t offset);

  MpiRuntime& rt_;
  int rank_;
  mutable std::mutex mu_;
  DeviceLaunch* launch_ = nullptr;
  uint64_t entered_ = 0;
  bool done_ = false;
  std::vector<Pending> early_;  // signals of launches not yet entered (or of cores not yet made)
  std::map<uint64_t, int> arrived_at_barrier_;  // launch -> the other ranks that have entered it
  // bodies_done(): per launch, the other ranks that have run every body, and how many messages
  // each had sent to this rank by then; this rank's cores past their bodies in the running launch.
  struct Bodies {
    int ranks = 0;
    std::vector<int64_t> expect;         // messages and letters from each rank
    std::vector<int64_t> expect_mailed;  // of which letters
  };
  std::map<uint64_t, Bodies> bodies_;
  uint64_t local_seq_ = 0;
  int local_bodies_ = 0;
  int local_passed_ = 0;
  std::atomic<bool> landings_waiting_{false};  // early_ holds copies for cores not yet begun
  std::exception_ptr failure_;
  std::atomic<bool> failed_{false};

  // Wait snapshots (see publish()).
  std::atomic<uint32_t> arrivals_{0};         // bumped by arrived(), a futex word
  std::atomic<int32_t> arrival_sleepers_{0};  // wait_for()s asleep on it
  std::atomic<uint64_t> version_{1};  // bumped after every delivery, and when a wait_for ends
  // The waits of this rank outside semaphore waits that a snapshot counts (wait_for): a
  // confirmation asks each whether it is still not ready.
  std::mutex waits_mu_;
  std::vector<const std::function<bool()>*> waiting_;
  std::atomic<bool> published_stuck_{false};
  std::unique_ptr<std::atomic<int64_t>[]> sent_;  // signal messages sent to each rank
  std::vector<int64_t> received_;                 // and received from each (engine thread)
  // Of those, the letters (mpi_mailbox.h). Messages and letters each arrive in the order they
  // were sent, but not in order with each other: bodies_done() counts them apart.
  std::unique_ptr<std::atomic<int64_t>[]> mailed_;
  std::vector<int64_t> received_mailed_;
  // Sends `s` (with `note`, `offset` as MpiRuntime::send_signal) to `target`, counted in sent_
  // before it goes and in mailed_ once it went as a letter.
  void send_signal(int target, const Signal& s, const CheckNote* note, int64_t offset = -1) {
    sent_[static_cast<size_t>(target)].fetch_add(1);
    if (rt_.send_signal(target, s, note, offset)) {
      mailed_[static_cast<size_t>(target)].fetch_add(1);
    }
  }
  struct Snapshot {
    int kind = 0;  // 0: unknown or running, 1: every core blocked, 2: the program has returned
    uint64_t version = 0;
    std::vector<int64_t> sent, received;
    std::string waits;
  };
  std::vector<Snapshot> snapshots_;  // rank 0: the latest of each rank
  int64_t round_ = 0;                // rank 0: the confirmation round in progress (0: none)
  int acks_ = 0;
};

}  // namespace tessera::detail::mpi
