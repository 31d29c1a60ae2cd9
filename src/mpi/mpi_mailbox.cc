// The mailboxes of ranks on one host (mpi_mailbox.h): sending a letter, taking this rank's, and
// the waiting threads that take them.
#include <atomic>
#include <mutex>

#include "mpi/mpi_runtime.h"
#include "mpi/mpi_transport.h"

namespace tessera::detail::mpi {

Mailbox& MpiRuntime::mailbox(int rank) const noexcept {
  return *reinterpret_cast<Mailbox*>(segment(rank) + kDirectoryPage);
}

bool MpiRuntime::mail(int rank, const Mailbox::Letter& letter) noexcept {
  if (!shm_) return false;
  Mailbox& box = mailbox(rank);
  if (!box.push(letter)) return false;
  // The letter before the look at the sleepers, as a thread counts itself a sleeper before its
  // last look at the mailbox (MpiTransport::sleeping): one of the two sees the other. A rank
  // with no thread asleep takes the letter in its next wait: ringing its engine then would
  // only take a CPU from a kernel (on a 2-vCPU machine each such wake-up held the sender
  // 30-45 µs).
  std::atomic_thread_fence(std::memory_order_seq_cst);
  if (box.sleepers().load() != 0) ring(rank);
  return true;
}

bool MpiRuntime::drain_mail(MpiTransport& t) {
  Mailbox& box = mailbox(rank_);
  const std::lock_guard<std::mutex> lock(mail_mu_);
  bool any = false;
  Mailbox::Letter letter;
  while (box.pop(letter)) {
    any = true;
    // Older programs' letters are stale (no newer program's can come: every rank starts one
    // only after every rank has begun it, MpiRuntime::run_program).
    if (letter.s.program != program_) continue;
    const auto seq = static_cast<uint64_t>(letter.s.seq);
    switch (letter.kind) {
      case Mailbox::Kind::kSignal:
        t.deliver(letter.s, letter.from, nullptr, nullptr, /*mailed=*/true);
        break;
      case Mailbox::Kind::kEnter:
        t.entered(letter.from, seq, true);
        break;
      case Mailbox::Kind::kBodies:
        t.bodies(letter.from, seq, letter.s.core, letter.s.slot, true);
        break;
    }
  }
  return any;
}

void MpiTransport::sleeping(bool on) noexcept {
  std::atomic<int32_t>& sleepers = rt_.mailbox(rank_).sleepers();
  if (!on) {
    sleepers.fetch_sub(1);
    return;
  }
  sleepers.fetch_add(1);
  std::atomic_thread_fence(std::memory_order_seq_cst);  // pairs with the fence in mail()
  // A letter that came before a sender could see this sleeper rang no bell: it is taken here,
  // and what comes after rings the engine, which delivers it and wakes this thread.
  try {
    rt_.drain_mail(*this);
  } catch (...) {
    rt_.wake_engine();  // the engine takes it
  }
}

void MpiTransport::poll() {
  if (rt_.mailbox(rank_).may_hold_letters()) rt_.drain_mail(*this);
}

}  // namespace tessera::detail::mpi
