// The checked engine on MPI ranks: each core's recent accesses of its VMEM and SMEM, which a
// remote copy landing there is checked against (checked_ranks.cc).
//
// A copy from another rank into a core's VMEM or SMEM arrives as a message, processed by the
// rank's engine thread at some moment after the sender's start() (src/mpi/mpi_core_memory.cc).
// On a TPU it may land at any moment from that start() on, so every access of the core to the
// destination that nothing orders before the start() races with it, also those that came before
// the message: the landing writes, so a read races as much as a write. The message carries the
// sender's vector clock at its start() (CheckNote::clock); an access of core g at epoch e (the
// core's own clock entry at the access) is ordered before the start() iff the sender's clock
// holds e for g: a release of g after the access (a signal, a copy's start) carries at least e,
// and g's own entry has ticked past e by then (fill_note ticks after a note as well as before).
//
// The history holds, per core, the byte runs of its compute's reads and writes, of its sync
// copies, and of its async copies (local, or remote copies it sends, whose sources they read);
// an async copy's entry stands at "never ordered" until the wait that completes it, which gives
// it the epoch after that wait. Accesses of the same bytes keep only the newest (any landing the
// older one races with, the newer one races with too: epochs only grow), and accesses of one
// statement at one epoch that repeat or continue a recent entry merge into it (an element loop
// keeps one entry per statement). The history is bounded: it forgets its oldest half when full,
// which may miss a race but never invents one. It is kept only where a copy can land from a
// message: on MPI ranks, with more than one core in the launch's books.
#include <fmt/format.h>

#include <algorithm>
#include <cstring>
#include <limits>
#include <mutex>

#include "check/checked_state.h"
#include "core/messages.h"
#include "tessera/error.h"

namespace tessera::detail {

namespace {

constexpr uint32_t kNeverOrdered = std::numeric_limits<uint32_t>::max();
constexpr size_t kHistoryCap = 4096;  // entries per core; beyond, the oldest half is forgotten
constexpr size_t kLookBack = 8;       // entries searched for the same bytes

using Access = CheckedCore::Access;

bool same_bytes(const Access& a, const Runs& b) {
  if (a.lo != b.lo || a.hi != b.hi) return false;
  if (a.runs.empty()) return b.v.size() == 1;
  if (a.runs.v.size() != b.v.size()) return false;
  for (size_t i = 0; i < b.v.size(); ++i) {
    if (a.runs.v[i].lo != b.v[i].lo || a.runs.v[i].hi != b.v[i].hi) return false;
  }
  return true;
}

// The first byte of `runs` that access `a` touched, or 0.
uintptr_t overlap(const Access& a, const Runs& runs) {
  if (!a.runs.empty()) return overlap(a.runs, runs);
  if (runs.hi <= a.lo || a.hi <= runs.lo) return 0;
  for (const Run& r : runs.v) {
    if (r.lo < a.hi && a.lo < r.hi) return std::max(r.lo, a.lo);
  }
  return 0;
}

bool same_statement(const SourceLocation& a, const SourceLocation& b) {
  return a.address() == b.address() && a.line() == b.line() && a.column() == b.column() &&
         (a.file_name() == b.file_name() || std::strcmp(a.file_name(), b.file_name()) == 0);
}

// Whether access `a` (of one range) is one by the same statement at the same epoch that already
// covers `runs` (one run), or that `runs` continues: then `a` grows to cover it.
bool absorbs(Access& a, const Runs& runs, bool write, const char* op, const SourceLocation& where,
             uint32_t epoch) {
  if (a.dma != 0 || a.epoch != epoch || a.write != write || a.op != op || !a.runs.empty() ||
      runs.v.size() != 1 || runs.lo > a.hi || runs.hi < a.lo || !same_statement(a.where, where)) {
    return false;
  }
  a.lo = std::min(a.lo, runs.lo);
  a.hi = std::max(a.hi, runs.hi);
  return true;
}

// Names the byte at `p` of a core's VMEM or SMEM (starting at `base`) from the kernel's scratch
// layout alone (the core's own names of its fresh buffers are its thread's); empty when no
// scratch buffer holds it.
std::string scratch_text(const CheckedLaunch& L, MemorySpace space, uintptr_t base, uintptr_t p) {
  const auto off = static_cast<int64_t>(p - base);
  const LaunchSpec& spec = *L.spec;
  for (size_t i = 0; i < spec.scratch.size(); ++i) {
    const ScratchRequest& r = spec.scratch[i];
    if (r.space != space || p < base || off < spec.offsets[i] || off >= spec.offsets[i] + r.bytes) {
      continue;
    }
    return fmt::format(
        "{} scratch #{} {}<{}>{}{}", to_string(space), i, to_string(space), dtype_name(r.dtype),
        r.shape.to_string(),
        elem_at(p, base + static_cast<uintptr_t>(spec.offsets[i]), r.dtype, r.shape));
  }
  return {};
}

// Names the byte at `p` of core `cc`'s VMEM or SMEM. Another core's regions are read under
// regions_mu; a core that has not begun has none yet, and then its arena (`arena`, when given)
// tells where its VMEM and SMEM lie.
std::string memory_text(CheckedLaunch& L, const CheckedCore& cc, uintptr_t p,
                        const CoreArena* arena = nullptr) {
  bool vmem = false;
  bool known = false;
  uintptr_t base = 0;
  {
    std::lock_guard<std::mutex> lock(L.regions_mu);
    vmem = cc.vmem.contains(p);
    known = vmem || cc.smem.contains(p);
    base = vmem ? cc.vmem.base : cc.smem.base;
  }
  if (!known && arena != nullptr) {
    for (const MemorySpace space : {MemorySpace::VMEM, MemorySpace::SMEM}) {
      const auto* b = space == MemorySpace::VMEM ? arena->vmem() : arena->smem();
      std::string text = scratch_text(L, space, reinterpret_cast<uintptr_t>(b), p);
      if (!text.empty()) return text;
    }
    return "VMEM";
  }
  const MemorySpace space = vmem ? MemorySpace::VMEM : MemorySpace::SMEM;
  std::string text = scratch_text(L, space, base, p);
  if (!text.empty()) return text;
  return fmt::format("{} at byte offset {}", to_string(space), p - base);
}

}  // namespace

void remember_access(CheckedCore& cc, const Runs& runs, bool write, const char* op,
                     SourceLocation where, uint64_t dma) {
  if (runs.empty() || !keeps_history(cc)) return;
  if (!cc.vmem.contains(runs.lo) && !cc.smem.contains(runs.lo)) return;
  CheckedLaunch& L = *cc.launch;
  // The core's own clock entry: only its own thread moves it, so it is read without the mutex.
  const uint32_t epoch =
      dma != 0 ? kNeverOrdered : L.vc[static_cast<size_t>(cc.core)][static_cast<size_t>(cc.core)];
  where = statement_site(where);
  std::lock_guard<std::mutex> lock(cc.history_mu);
  std::vector<Access>& h = cc.history;
  if (dma == 0) {
    const size_t stop = h.size() > kLookBack ? h.size() - kLookBack : 0;
    for (size_t i = h.size(); i > stop; --i) {
      if (absorbs(h[i - 1], runs, write, op, where, epoch)) return;
    }
    for (size_t i = h.size(); i > stop; --i) {
      Access& a = h[i - 1];
      if (a.dma != 0 || !same_bytes(a, runs)) continue;
      a.epoch = epoch;
      a.write = write;
      a.op = op;
      a.where = where;
      return;
    }
  }
  if (h.size() >= kHistoryCap) {
    h.erase(h.begin(), h.begin() + static_cast<long>(h.size() / 2));
    cc.history_pending = static_cast<size_t>(
        std::count_if(h.begin(), h.end(), [](const Access& a) { return a.dma != 0; }));
  }
  Access a{runs.lo, runs.hi, {}, epoch, write, dma, op, where};
  if (runs.v.size() > 1) a.runs = runs;
  h.push_back(std::move(a));
  if (dma != 0) ++cc.history_pending;
}

void remembered_copy_done(CheckedCore& cc, uint64_t dma, uint32_t epoch) {
  std::lock_guard<std::mutex> lock(cc.history_mu);
  for (size_t i = cc.history.size(); i > 0 && cc.history_pending > 0; --i) {
    Access& a = cc.history[i - 1];
    if (a.dma != dma) continue;
    a.dma = 0;
    a.epoch = epoch;
    --cc.history_pending;
  }
}

void check_landing_vs_history(CheckedLaunch& L, int g, const Runs& runs, const CheckNote& note,
                              const std::string& sender) {
  check_landing_vs_history(L, g, runs, note.clock, note.where, sender);
}

void check_landing_vs_history(CheckedLaunch& L, int g, const Runs& runs, const VC& clock,
                              SourceLocation where, const std::string& sender) {
  CheckedCore& cc = *L.cores[static_cast<size_t>(g)];
  // Another rank's copy that landed here and that no wait_recv has taken yet: the two may land
  // in either order (nothing of the target orders them, as it has not waited for the first).
  for (const RemoteDma& d : L.remote) {
    if (d.to != g || d.received) continue;
    const uintptr_t p = overlap(d.dst_runs, runs);
    if (p == 0) continue;
    raise(ErrorKind::kRace, "remote_copy.start", where,
          fmt::format("{}'s remote copy writes {}'s {}, which the remote copy from {} started at "
                      "{} also writes, and no wait_recv has taken that one yet: two copies in "
                      "flight may land in either order. Wait (wait_recv on the target) for the "
                      "first before the second is started, e.g. with a signal back to its sender",
                      sender, core_name(L, g), memory_text(L, cc, p, d.target_arena),
                      core_name(L, d.from), format_location(d.started)));
  }
  const uint32_t known = clock[static_cast<size_t>(g)];
  std::lock_guard<std::mutex> lock(cc.history_mu);
  for (const Access& a : cc.history) {
    if (a.epoch <= known) continue;  // ordered before the start()
    const uintptr_t p = overlap(a, runs);
    if (p == 0) continue;
    const std::string target = core_name(L, g);
    raise(
        ErrorKind::kRace, "remote_copy.start", where,
        fmt::format("{}'s remote copy writes {}'s {}, which {}'s {} at {} {}{} with no "
                    "happens-before order between them: nothing orders that access before this "
                    "start(), and on a TPU the copy may land at any moment from its start() "
                    "on. Have the target signal that the buffer is free after its last access "
                    "(e.g. on a capacity semaphore), and wait for that signal before starting "
                    "the copy",
                    sender, target, memory_text(L, cc, p), target, a.op, format_location(a.where),
                    a.write ? "writes" : "reads", a.dma != 0 ? " (started, not yet waited)" : ""));
  }
}

}  // namespace tessera::detail
