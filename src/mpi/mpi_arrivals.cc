// What reaches a rank from the others besides signals (mpi_transport.h): their entries at a
// launch's start barrier and their ends of bodies, as messages or as letters (mpi_mailbox.h).
#include <mutex>

#include "mpi/mpi_runtime.h"
#include "mpi/mpi_transport.h"
#include "runtime/spin.h"

namespace tessera::detail::mpi {

void MpiTransport::entered_message(int rank, const std::vector<char>& bytes) {
  size_t at = 0;
  const int64_t program = get_i64(bytes, at);
  const auto seq = static_cast<uint64_t>(get_i64(bytes, at));
  if (program != rt_.program()) return;  // an earlier program's
  entered(rank, seq, false);
}

void MpiTransport::entered(int rank, uint64_t seq, bool mailed) {
  {
    std::lock_guard<std::mutex> lock(mu_);
    ++received_[static_cast<size_t>(rank)];
    if (mailed) ++received_mailed_[static_cast<size_t>(rank)];
    ++arrived_at_barrier_[seq];  // (kept until this rank passes that launch's barrier)
    // A snapshot sent before counted one message less from `rank`: blocked cores look again
    // and send a new one.
    version_.fetch_add(1);
    arrived();
    if (published_stuck_.load()) wake_launch();
  }
}

void MpiTransport::bodies_message(int rank, const std::vector<char>& bytes) {
  size_t at = 0;
  const int64_t program = get_i64(bytes, at);
  const auto seq = static_cast<uint64_t>(get_i64(bytes, at));
  const int64_t count = get_i64(bytes, at);
  const int64_t count_mailed = get_i64(bytes, at);
  if (program != rt_.program()) return;  // an earlier program's
  bodies(rank, seq, count, count_mailed, false);
}

void MpiTransport::bodies(int rank, uint64_t seq, int64_t count, int64_t count_mailed,
                          bool mailed) {
  {
    std::lock_guard<std::mutex> lock(mu_);
    ++received_[static_cast<size_t>(rank)];
    if (mailed) ++received_mailed_[static_cast<size_t>(rank)];
    Bodies& b = bodies_[seq];
    if (b.expect.empty()) {
      b.expect.assign(static_cast<size_t>(mesh_.size), 0);
      b.expect_mailed.assign(static_cast<size_t>(mesh_.size), 0);
    }
    b.expect[static_cast<size_t>(rank)] = count;
    b.expect_mailed[static_cast<size_t>(rank)] = count_mailed;
    ++b.ranks;
    version_.fetch_add(1);
    arrived();
    if (published_stuck_.load()) wake_launch();
  }
}

void MpiTransport::arrived() noexcept {
  arrivals_.fetch_add(1);
  if (arrival_sleepers_.load() != 0) futex_wake(arrivals_, true);
}

}  // namespace tessera::detail::mpi
