// The MPI transport's deadlock detection over every rank, by wait snapshots (mpi_transport.h:
// publish()): each rank's snapshot, rank 0's evaluation and confirmation round, the report.
#include <fmt/format.h>

#include <cstring>
#include <thread>

#include "mpi/mpi_transport.h"
#include "tessera/error.h"

namespace tessera::detail::mpi {

void MpiTransport::stuck(uint64_t version, std::string waits) noexcept {
  try {
    published_stuck_.store(true);
    rt_.post([this, version, waits = std::move(waits)] { publish(1, version, waits); });
  } catch (...) {
    // Out of memory: no snapshot; the wait ends at its timeout instead.
  }
}

void MpiTransport::publish(int kind, uint64_t version, const std::string& waits) {
  if (std::this_thread::get_id() != rt_.engine_id()) {
    rt_.post([this, kind, version, waits] { publish(kind, version, waits); });
    return;
  }
  if (version != version_.load()) {
    // Something arrived since the cores found themselves blocked: they look again (and publish
    // again if they still are).
    std::lock_guard<std::mutex> lock(mu_);
    wake_launch();
    return;
  }
  std::vector<char> msg;
  put_i64(msg, rt_.program());
  put_i64(msg, kind);
  put_i64(msg, static_cast<int64_t>(version));
  for (int r = 0; r < mesh_.size; ++r) put_i64(msg, sent_[static_cast<size_t>(r)].load());
  for (int r = 0; r < mesh_.size; ++r) put_i64(msg, received_[static_cast<size_t>(r)]);
  msg.insert(msg.end(), waits.begin(), waits.end());
  if (rank_ == 0) {
    snapshot_arrived(0, msg);
  } else {
    rt_.send_bytes(0, kTagWaits, std::move(msg));
  }
}

void MpiTransport::waits_message(int rank, int tag, const std::vector<char>& bytes) {
  size_t at = 0;
  if (get_i64(bytes, at) != rt_.program()) return;  // an earlier program's
  if (tag == kTagWaits) {
    snapshot_arrived(rank, bytes);
  } else if (tag == kTagWaitsConfirm) {
    // Rank 0 asks whether anything has reached this rank since the snapshot it holds, and
    // whether a wait outside semaphore waits has become ready meanwhile (a barrier completed,
    // a target entered its launch): first the waits, then the version, which a wait that
    // ended (and left waiting_) has bumped.
    const int64_t round = get_i64(bytes, at);
    const auto version = static_cast<uint64_t>(get_i64(bytes, at));
    bool still = true;
    {
      std::lock_guard<std::mutex> lock(waits_mu_);
      for (const std::function<bool()>* ready : waiting_) still = still && !(*ready)();
    }
    // A copy waiting to land in a core that has begun since is about to be stored (the engine
    // retries it): not stuck.
    still = still && version == version_.load() && !landings_waiting_.load();
    std::vector<char> ack;
    put_i64(ack, rt_.program());
    put_i64(ack, round);
    put_i64(ack, still ? 1 : 0);
    rt_.send_bytes(0, kTagWaitsAck, std::move(ack));
  } else if (tag == kTagWaitsAck && rank_ == 0) {
    const int64_t round = get_i64(bytes, at);
    const bool still = get_i64(bytes, at) != 0;
    if (round != round_) return;  // an older round's
    if (!still) {
      snapshots_[static_cast<size_t>(rank)].kind = 0;  // it moved on: wait for a new snapshot
      round_ = 0;
      return;
    }
    if (++acks_ == mesh_.size) deadlock_found();
  }
}

void MpiTransport::snapshot_arrived(int rank, const std::vector<char>& bytes) {
  Snapshot& s = snapshots_[static_cast<size_t>(rank)];
  size_t at = sizeof(int64_t);  // after the program
  s.kind = static_cast<int>(get_i64(bytes, at));
  s.version = static_cast<uint64_t>(get_i64(bytes, at));
  s.sent.resize(static_cast<size_t>(mesh_.size));
  s.received.resize(static_cast<size_t>(mesh_.size));
  for (int64_t& v : s.sent) v = get_i64(bytes, at);
  for (int64_t& v : s.received) v = get_i64(bytes, at);
  s.waits.assign(bytes.begin() + static_cast<long>(std::min(at, bytes.size())), bytes.end());
  round_ = 0;  // a new snapshot: any round in progress is moot
  evaluate_snapshots();
}

void MpiTransport::evaluate_snapshots() {
  if (failed_.load()) return;
  // Kind 1: every core blocked; 2: the program has returned; 3: at a start barrier.
  bool blocked = false;
  for (const Snapshot& s : snapshots_) {
    if (s.kind == 0) return;
    blocked |= s.kind == 1;
  }
  // Every program has returned (the end, not a deadlock), or every rank that has not waits at
  // a start barrier, which they are about to pass (or one that matches a returned program's).
  if (!blocked) return;
  const auto n = static_cast<size_t>(mesh_.size);
  for (size_t i = 0; i < n; ++i) {
    for (size_t j = 0; j < n; ++j) {
      if (snapshots_[i].sent[j] != snapshots_[j].received[i]) return;  // a message in flight
    }
  }
  // Ask every rank whether it is still where its snapshot says: at the moment each receives
  // the question (all after every snapshot was taken) nothing had reached it since.
  static int64_t rounds = 0;
  round_ = ++rounds;
  acks_ = 0;
  for (int r = 0; r < mesh_.size; ++r) {
    std::vector<char> q;
    put_i64(q, rt_.program());
    put_i64(q, round_);
    put_i64(q, static_cast<int64_t>(snapshots_[static_cast<size_t>(r)].version));
    if (r == 0) {
      waits_message(0, kTagWaitsConfirm, q);
    } else {
      rt_.send_bytes(r, kTagWaitsConfirm, std::move(q));
    }
  }
}

void MpiTransport::deadlock_found() {
  round_ = 0;
  std::vector<std::string> parts;
  for (const Snapshot& s : snapshots_) parts.push_back(s.waits);
  fail(rank_, std::make_exception_ptr(KernelError(
                  ErrorKind::kDeadlock,
                  fmt::format("tessera: deadlock over the MPI ranks: every core of every device "
                              "is blocked (in a wait, at a kernel's start barrier, or for another "
                              "device to enter a kernel) or its device has finished its program, "
                              "and no message is in flight between them, so no signal can ever "
                              "come: {}. Each wait needs matching signals (or remote copies) from "
                              "a core that is still running, and every device must launch the "
                              "same kernels in the same order; check which device signals whom, "
                              "and loop bounds",
                              fmt::join(parts, "; ")),
                  SourceLocation{})));
}

}  // namespace tessera::detail::mpi
