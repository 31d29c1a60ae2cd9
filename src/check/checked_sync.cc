// The checked engine's copies and semaphores: DMA execution modes, race detection (vector
// clocks, HBM access history, in-flight copies against compute and each other), signals, and
// blocking waits with deadlock detection.
//
// Race model. Each core has a vector clock; its own entry ticks at every DMA start, DMA wait,
// sync copy and signal. A signal joins the signaller's clock into the semaphore's clock, a
// successful wait joins the semaphore's clock into the waiter's (core_barrier is signals plus a
// wait). HBM is only touched by DMAs: a DMA's accesses are recorded when it completes, with the
// issuer's clock at its start and the issuer's epoch at its completion; an earlier access E and
// a new access N (at least one a write, bytes overlapping) are ordered iff E.end <=
// N.start[E.core]. Within a core, compute and DMAs race when compute touches bytes of a copy that
// was started and not yet waited (whatever the execution mode: on a TPU the copy may land at any
// time in between), and two in-flight copies race when one writes bytes the other reads or writes.
#include <fmt/format.h>

#include <algorithm>
#include <chrono>
#include <cstring>
#include <mutex>
#include <span>
#include <thread>
#include <utility>

#include "check/checked_state.h"
#include "core/messages.h"
#include "native/native_engine.h"
#include "runtime/waits.h"
#include "tessera/error.h"

namespace tessera::detail {

namespace {

Box box_of(const HbmBuffer& b, const RawRef& r) {
  Box x;
  const int R = b.shape.rank();
  if (R < 1 || R > 8 || r.shape.size() == 0) return x;
  const int64_t item = itemsize(b.dtype);
  int64_t A[8];
  A[R - 1] = 1;
  for (int d = R - 2; d >= 0; --d) A[d] = A[d + 1] * b.shape[d + 1];
  int64_t off = static_cast<int64_t>(reinterpret_cast<uintptr_t>(r.data) - b.region.base) / item;
  x.rank = R;
  for (int d = 0; d < R; ++d) {
    x.lo[d] = off / A[d];
    off -= x.lo[d] * A[d];
    x.step[d] = 1;
    x.count[d] = 1;
  }
  bool used[8] = {};
  for (int a = 0; a < r.shape.rank(); ++a) {
    const int64_t n = r.shape[a];
    const int64_t s = r.strides[a];
    if (n <= 1) continue;
    if (s <= 0) return x;
    int axis = -1;
    for (int d = 0; d < R; ++d) {
      if (!used[d] && s % A[d] == 0 && (axis < 0 || A[d] > A[axis])) axis = d;
    }
    if (axis < 0) return x;
    used[axis] = true;
    x.step[axis] = s / A[axis];
    x.count[axis] = n;
    if (x.lo[axis] + (n - 1) * x.step[axis] >= b.shape[axis]) return x;
  }
  x.ok = true;
  return x;
}

// 128-bit arithmetic for the congruences below (products of two int64 strides). GCC's
// __int128 is an extension; __extension__ says so to -Wpedantic.
__extension__ typedef __int128 Int128;

// The smallest coordinate two progressions of one axis share, or -1: x = lo_p + i * s_p =
// lo_q + j * s_q within both, solved as a pair of congruences (their moduli need not be coprime).
int64_t common_coordinate(int64_t lo_p, int64_t s_p, int64_t n_p, int64_t lo_q, int64_t s_q,
                          int64_t n_q) {
  const int64_t first = std::max(lo_p, lo_q);
  const int64_t last = std::min(lo_p + (n_p - 1) * s_p, lo_q + (n_q - 1) * s_q);
  if (first > last) return -1;
  // Extended Euclid on (s_p, s_q): g = s_p * u + s_q * v.
  Int128 r0 = s_p, r1 = s_q, u0 = 1, u1 = 0;
  while (r1 != 0) {
    const Int128 q = r0 / r1;
    const Int128 r2 = r0 - q * r1;
    r0 = r1;
    r1 = r2;
    const Int128 u2 = u0 - q * u1;
    u0 = u1;
    u1 = u2;
  }
  const Int128 g = r0;
  const Int128 diff = static_cast<Int128>(lo_q) - lo_p;
  if (diff % g != 0) return -1;
  const Int128 l = s_p / g * static_cast<Int128>(s_q);  // lcm
  // x = lo_p + s_p * t with s_p * t = diff (mod s_q): t = u0 * diff / g (mod s_q / g).
  const Int128 m = s_q / g;
  Int128 t = (u0 % m) * ((diff / g) % m) % m;
  if (t < 0) t += m;
  Int128 x = lo_p + static_cast<Int128>(s_p) * t;  // a common value, maybe below `first`
  if (x < first) x += (first - x + l - 1) / l * l;
  if (x > first) x -= (x - first) / l * l;
  return x <= last ? static_cast<int64_t>(x) : -1;
}

// The address of the first element both views cover (per axis, the smallest shared coordinate),
// or 0.
uintptr_t box_overlap(const HbmBuffer& b, const Box& p, const Box& q) {
  int64_t flat = 0;
  for (int d = 0; d < p.rank; ++d) {
    const int64_t x =
        common_coordinate(p.lo[d], p.step[d], p.count[d], q.lo[d], q.step[d], q.count[d]);
    if (x < 0) return 0;
    flat = flat * b.shape[d] + x;
  }
  return b.region.base + static_cast<uintptr_t>(flat * itemsize(b.dtype));
}

}  // namespace

// Compute reading (`write` false) or writing `runs` against the core's in-flight copies.
void check_compute_vs_dma(CoreContext& ctx, const Runs& runs, bool write, const char* op,
                          SourceLocation where) {
  CheckedCore& cc = core_of(ctx);
  if (!cc.launch->params.detect_races) return;
  if (keeps_history(cc)) remember_access(cc, runs, write, op, where);
  if (cc.launch->remote_live.load(std::memory_order_relaxed) != 0) {
    check_vs_remote(ctx, runs, write, op, where);
  }
  for (const Dma& d : cc.inflight) {
    if (const uintptr_t p = overlap(runs, d.dst_runs)) {
      raise(ErrorKind::kRace, op, where,
            fmt::format("{} {} while {} may still be writing it (started, not yet waited); on a "
                        "TPU the copy lands at any moment until its .wait() returns: wait on the "
                        "copy before touching its destination",
                        write ? "writes" : "reads", describe(ctx, p), dma_text(ctx, d)));
    }
    if (write) {
      if (const uintptr_t p = overlap(runs, d.src_runs)) {
        raise(ErrorKind::kRace, op, where,
              fmt::format("writes {} while {} may still be reading it (started, not yet "
                          "waited); wait on the copy before overwriting its source",
                          describe(ctx, p), dma_text(ctx, d)));
      }
    }
  }
}
namespace {

// A new copy (src_runs -> dst_runs) against the core's in-flight copies.
void check_dma_vs_dma(CoreContext& ctx, const Runs& src_runs, const Runs& dst_runs, const char* op,
                      SourceLocation where) {
  CheckedCore& cc = core_of(ctx);
  if (!cc.launch->params.detect_races) return;
  if (cc.launch->remote_live.load(std::memory_order_relaxed) != 0) {
    check_vs_remote(ctx, src_runs, false, op, where);
    check_vs_remote(ctx, dst_runs, true, op, where);
  }
  for (const Dma& d : cc.inflight) {
    uintptr_t p = overlap(dst_runs, d.dst_runs);
    const char* how = "both write";
    if (p == 0) {
      p = overlap(dst_runs, d.src_runs);
      how = "this copy writes what the other reads:";
    }
    if (p == 0) {
      p = overlap(src_runs, d.dst_runs);
      how = "this copy reads what the other writes:";
    }
    if (p != 0) {
      raise(ErrorKind::kRace, op, where,
            fmt::format("overlaps {}, which is still in flight: {} {}; two copies in flight may "
                        "land in either order, so wait on the first before starting the second",
                        dma_text(ctx, d), how, describe(ctx, p)));
    }
  }
}

}  // namespace

// Records DMA accesses of HBM (under the launch mutex) and checks them against other accesses.
void record_hbm(CoreContext& ctx, int core, const RawRef& view, const Runs& runs, bool write,
                const VC& start, uint32_t end, const char* op, SourceLocation where) {
  CheckedCore& cc = core_of(ctx);
  CheckedLaunch& L = *cc.launch;
  if (runs.empty() || !L.params.detect_races) return;
  HbmBuffer* b = hbm_of(L, runs.lo);
  // Inputs are read-only (HbmRef<const T>; an aliased input is its output's buffer), and reads
  // only race with writes: nothing to record.
  if (b == nullptr || !b->is_output) return;
  const Box box = box_of(*b, view);
  for (const HbmAccess& e : b->history) {
    if (!(e.write || write)) continue;
    if (e.end <= start[static_cast<size_t>(e.core)]) continue;  // ordered before this access
    const uintptr_t p = box.ok && e.box.ok ? box_overlap(*b, box, e.box) : overlap(runs, e.runs);
    if (p != 0) {
      const std::string other =
          e.core == core
              ? fmt::format("an earlier {} of this core at {}", e.op, format_location(e.where))
              : fmt::format("{}'s {} at {}", core_name(L, e.core), e.op, format_location(e.where));
      const std::string who = core == cc.core && L.mesh == nullptr
                                  ? std::string("this copy")
                                  : fmt::format("{}'s copy", core_name(L, core));
      raise(ErrorKind::kRace, op, where,
            fmt::format("{} {} {}, which {} {} with no happens-before order between them "
                        "(no semaphore signal/wait or core_barrier orders the two); order them "
                        "with a semaphore or core_barrier, or give each core its own part",
                        who, write ? "writes" : "reads", describe(ctx, p), other,
                        e.write ? "writes" : "reads"));
    }
  }
  if (b->history.size() >= b->prune_at) {
    // An access every live core's clock has passed is ordered before all future ones.
    std::vector<HbmAccess>& h = b->history;
    h.erase(
        std::remove_if(h.begin(), h.end(),
                       [&](const HbmAccess& e) {
                         for (int c = 0; c < L.num_cores; ++c) {
                           if (L.finished[static_cast<size_t>(c)]) continue;
                           if (L.vc[static_cast<size_t>(c)][static_cast<size_t>(e.core)] < e.end)
                             return false;
                         }
                         return true;
                       }),
        h.end());
    if (h.size() >= kHistoryHardCap)
      h.erase(h.begin(), h.begin() + static_cast<long>(h.size() / 2));
    b->prune_at = std::max(kHistorySoftCap, 2 * h.size());
  }
  HbmAccess acc{box, {}, core, end, start, write, where, op};
  if (!box.ok) acc.runs = runs;  // boxes are enough where they exist
  b->history.push_back(std::move(acc));
}

// ---- hooks -----------------------------------------------------------------------------------

void checked_pipeline_begins(CoreContext& ctx) { core_of(ctx).pipelines.emplace_back(); }

void checked_pipeline_step_begins(CoreContext& ctx) {
  CheckedCore& cc = core_of(ctx);
  CheckedCore::PipelineBooks& p = cc.pipelines.back();
  ++p.step;
  std::erase_if(p.write_backs,
                [&](const CheckedCore::WriteBack& w) { return w.step < p.step - 2; });
  // The runtime sets the step's global grid point (what pl::program_id reports) before this hook.
  if (const auto& record = cc.launch->params.grid_point_recorder) {
    const std::lock_guard<std::mutex> lock(cc.launch->recorder_mu);
    record(std::span<const int64_t>(ctx.grid_step), ctx.core);
  }
}

void checked_pipeline_ends(CoreContext& ctx) noexcept {
  if (ctx.engine_core == nullptr) return;
  CheckedCore& cc = core_of(ctx);
  if (!cc.pipelines.empty()) cc.pipelines.pop_back();
}

namespace {
// A pipeline's copy-in against the write-backs of its last two steps (CheckedCore::pipelines).
void check_copy_in_vs_write_backs(CoreContext& ctx, const Runs& src, const char* op,
                                  SourceLocation where) {
  CheckedCore& cc = core_of(ctx);
  if (cc.pipelines.empty() || !cc.launch->params.detect_races) return;
  for (const CheckedCore::WriteBack& w : cc.pipelines.back().write_backs) {
    const uintptr_t p = overlap(src, w.runs);
    if (p == 0) continue;
    raise(ErrorKind::kRace, op, where,
          fmt::format("the copy-in of grid step ({}) reads {}, which the write-back after grid "
                      "step ({}) wrote (the input is aliased to an output); on a TPU the "
                      "pipeline prefetches a step's inputs while the last steps' outputs are "
                      "still being written back, so the read may see the old value: read each "
                      "aliased block before any step writes it back, or read it in a later "
                      "pallas_call",
                      fmt::join(ctx.grid_step, ", "), describe(ctx, p),
                      fmt::join(w.grid_step, ", ")));
  }
}
}  // namespace

void checked_sync_copy(CoreContext& ctx, const RawRef& src, const RawRef& dst, const char* op,
                       SourceLocation where) {
  CheckedCore& cc = core_of(ctx);
  CheckedLaunch& L = *cc.launch;
  const Runs sr = runs_of(src);
  const Runs dr = runs_of(dst);
  check_dma_vs_dma(ctx, sr, dr, op, where);
  if (keeps_history(cc)) {
    remember_access(cc, sr, false, op, where);
    remember_access(cc, dr, true, op, where);
  }
  if (!cc.pipelines.empty()) {
    if (std::strcmp(op, "emit_pipeline copy-in") == 0) {
      check_copy_in_vs_write_backs(ctx, sr, op, where);
    } else if (std::strcmp(op, "emit_pipeline write-back") == 0) {
      cc.pipelines.back().write_backs.push_back(
          CheckedCore::WriteBack{dr, cc.pipelines.back().step, ctx.grid_step});
    }
  }
  const bool hbm = is_hbm(cc, sr.lo) || is_hbm(cc, dr.lo);
  if (hbm && L.params.detect_races) {
    std::lock_guard<std::mutex> lock(L.mu);
    VC& mine = L.vc[static_cast<size_t>(cc.core)];
    const uint32_t e = ++mine[static_cast<size_t>(cc.core)];
    const VC start = mine;
    record_hbm(ctx, cc.core, src, sr, false, start, e, op, where);
    record_hbm(ctx, cc.core, dst, dr, true, start, e, op, where);
  }
  move_bytes(ctx, src, dst, sr, dr, where);
}

void checked_dma_start(CoreContext& ctx, const RawRef& src, const RawRef& dst, SemaphoreCell* sem,
                       SourceLocation made, SourceLocation where) {
  CheckedCore& cc = core_of(ctx);
  CheckedLaunch& L = *cc.launch;
  Dma d;
  d.src = src;
  d.dst = dst;
  d.sem = sem;
  d.bytes = src.shape.size() * itemsize(src.dtype);
  d.made = made;
  d.started = where;
  d.src_runs = runs_of(src);
  d.dst_runs = runs_of(dst);
  check_dma_vs_dma(ctx, d.src_runs, d.dst_runs, "async_copy.start", where);
  {
    std::lock_guard<std::mutex> lock(L.mu);
    d.id = L.next_dma++;
    VC& mine = L.vc[static_cast<size_t>(cc.core)];
    ++mine[static_cast<size_t>(cc.core)];
    d.vc_start = mine;
  }
  if (keeps_history(cc)) {
    remember_access(cc, d.src_runs, false, "async copy", where, d.id);
    remember_access(cc, d.dst_runs, true, "async copy", where, d.id);
  }
  bool now = L.params.dma_execution_mode == pltpu::DmaExecutionMode::eager;
  if (L.params.dma_execution_mode == pltpu::DmaExecutionMode::random) now = (cc.rng() & 1) != 0;
  cc.inflight.push_back(std::move(d));
  if (now) execute(ctx, cc.inflight.back());
}

void checked_carry_out(CoreContext& ctx, SemaphoreCell* sem, std::vector<CarriedCopy>& out) {
  CheckedCore& cc = core_of(ctx);
  CheckedLaunch& L = *cc.launch;
  for (size_t i = 0; i < cc.inflight.size();) {
    Dma& d = cc.inflight[i];
    const bool local = d.half == CarriedCopy::Half::kLocal;
    HbmBuffer* src = d.src_runs.empty() ? nullptr : hbm_of(L, d.src_runs.lo);
    HbmBuffer* dst = d.dst_runs.empty() ? nullptr : hbm_of(L, d.dst_runs.lo);
    // A copy into or out of scratch cannot outlive the kernel: checked_core_end reports it. The
    // halves of a remote copy carried in found their arrays when they came in.
    // On MPI ranks a remote copy started in this kernel is the sender's half (its destination
    // is another rank's); like a device mesh's, it is carried when its source is an array.
    const bool sent_here = L.ranks && d.half == CarriedCopy::Half::kSend && d.carried_id == 0;
    if (d.sem != sem || (local && (src == nullptr || dst == nullptr)) ||
        (sent_here && src == nullptr)) {
      ++i;
      continue;
    }
    if (!d.executed && dst != nullptr && dst->region.init != nullptr) {
      std::lock_guard<std::mutex> lock(L.mu);  // HBM shadows are shared by the cores
      mark(dst->region, d.dst_runs, kDefined);
    }
    CarriedCopy c{d.src, d.dst, d.bytes, d.made, d.started, d.executed};
    c.half = d.half;
    c.staging = std::move(d.staging);
    c.what = d.remote;
    c.id = d.carried_id;
    c.source_known = d.half != CarriedCopy::Half::kSend || !d.src_runs.empty();
    if (sent_here) rank_sent_half(L, cc.core, c);
    out.push_back(std::move(c));
    cc.inflight.erase(cc.inflight.begin() + static_cast<long>(i));
  }
  if (L.program && !L.ranks) carry_remote_out(ctx, sem, out);
  if (L.ranks) rank_carry_out(ctx, sem, out);
}

void checked_carry_in(CoreContext& ctx, SemaphoreCell* sem, const std::vector<CarriedCopy>& in) {
  CheckedCore& cc = core_of(ctx);
  CheckedLaunch& L = *cc.launch;
  using Half = CarriedCopy::Half;
  for (const CarriedCopy& c : in) {
    Dma d;
    d.src = c.src;
    d.dst = c.dst;
    d.sem = sem;
    d.bytes = c.bytes;
    d.made = c.made;
    d.started = c.started;
    d.executed = c.executed;
    d.half = c.half;
    d.remote = c.what;
    d.carried_id = c.id;
    d.staging = c.staging;
    // A sending half reads its source until the wait; a receiving half writes its destination,
    // from its staged bytes when it has not landed yet.
    if (c.half != Half::kRecv && (c.half == Half::kLocal || c.source_known)) {
      d.src_runs = runs_of(c.src);
    }
    if (c.half == Half::kSend) d.dst = c.src;
    if (c.half != Half::kSend) d.dst_runs = runs_of(c.dst);
    if (c.half == Half::kRecv && d.staging) {
      d.src = RawRef{d.staging->data(), c.dst.dtype, MemorySpace::VMEM, c.dst.shape,
                     row_major_strides(c.dst.shape)};
    }
    {
      // Started before this kernel: ordered after nothing of it.
      std::lock_guard<std::mutex> lock(L.mu);
      d.id = L.next_dma++;
      d.vc_start.assign(L.vc[static_cast<size_t>(cc.core)].size(), 0);
    }
    cc.inflight.push_back(std::move(d));
  }
}

void run_pending_copies(CoreContext& ctx, SemaphoreCell* sem, int64_t bytes) {
  CheckedCore& cc = core_of(ctx);
  CheckedLaunch& L = *cc.launch;
  for (;;) {
    if (sem->load() >= bytes) break;
    std::vector<size_t> pending;
    for (size_t i = 0; i < cc.inflight.size(); ++i) {
      if (cc.inflight[i].sem == sem && !cc.inflight[i].executed) pending.push_back(i);
    }
    if (pending.empty()) break;
    size_t pick = pending.back();  // on_wait: the latest first (out of order)
    if (L.params.dma_execution_mode == pltpu::DmaExecutionMode::random) {
      pick = pending[static_cast<size_t>(cc.rng() % pending.size())];
    }
    execute(ctx, cc.inflight[pick]);
  }
  if (!L.program || L.ranks) return;
  std::lock_guard<std::mutex> lock(L.mu);
  while (sem->load() < bytes && run_pending_remote(ctx, *sem)) {
  }
}

void complete_copies(CoreContext& ctx, SemaphoreCell* sem, int64_t bytes, RemoteKinds kinds,
                     SourceLocation where) {
  CheckedCore& cc = core_of(ctx);
  CheckedLaunch& L = *cc.launch;
  using Half = CarriedCopy::Half;
  // A descriptor's wait takes any copy on the semaphore; wait_send / wait_recv take the halves of
  // remote copies carried in from an earlier call, sending or receiving.
  auto matches = [&](const Dma& d) {
    return kinds == RemoteKinds::kBoth ||
           d.half == (kinds == RemoteKinds::kSend ? Half::kSend : Half::kRecv);
  };
  // The copies this wait completes: executed ones on the semaphore, oldest first.
  std::vector<Dma> done;
  int64_t left = bytes;
  for (size_t i = 0; i < cc.inflight.size() && left > 0;) {
    Dma& d = cc.inflight[i];
    if (d.sem == sem && d.executed && matches(d)) {
      left -= d.bytes;
      if (d.carried_id != 0 && L.transport != nullptr) L.transport->waited(d.carried_id);
      done.push_back(std::move(d));
      cc.inflight.erase(cc.inflight.begin() + static_cast<long>(i));
    } else {
      ++i;
    }
  }
  std::vector<Runs> landed;  // remote copies into this core's memory that this wait takes
  if (left > 0 && L.program && !L.ranks) {
    std::lock_guard<std::mutex> lock(L.mu);
    take_remote(L, cc.core, sem, left, kinds, keeps_history(cc) ? &landed : nullptr);
  }
  if (!L.params.detect_races) return;
  std::lock_guard<std::mutex> lock(L.mu);
  VC& mine = L.vc[static_cast<size_t>(cc.core)];
  const uint32_t e = ++mine[static_cast<size_t>(cc.core)];
  // Their landings are writes at this wait: another copy into those bytes must start after it.
  for (const Runs& runs : landed) {
    remember_access(cc, runs, true, "landing of a remote copy taken by the wait_recv", where);
  }
  for (const Dma& d : done) {
    // The copy's accesses of VMEM and SMEM are ordered before what follows this wait.
    if (cc.history_pending != 0) remembered_copy_done(cc, d.id, e);
    // A remote copy on MPI ranks read its source at start() (the transport moved the bytes
    // then): the read is recorded as of its start, as a device mesh's read half records it
    // (checked_devices.cc), so that a write ordered after the copy's landing on its target (and
    // so after the read) is not taken for a race with it.
    const uint32_t read_at =
        L.ranks && !d.remote.empty() ? d.vc_start[static_cast<size_t>(cc.core)] : e;
    record_hbm(ctx, cc.core, d.src, d.src_runs, false, d.vc_start, read_at, "async copy",
               d.started);
    record_hbm(ctx, cc.core, d.dst, d.dst_runs, true, d.vc_start, e, "async copy", d.started);
  }
}

void checked_dma_wait(CoreContext& ctx, SemaphoreCell* sem, int64_t slot, int64_t bytes,
                      const WaitSite& site) {
  // Run pending copies on this semaphore, as late as possible: only while the count is short.
  run_pending_copies(ctx, sem, bytes);
  block_until(ctx, *sem, slot, bytes, site);
  complete_copies(ctx, sem, bytes, RemoteKinds::kBoth, site.where);
}

void checked_signal(CoreContext& ctx, int target, int64_t slot, int64_t inc) {
  CheckedCore& cc = core_of(ctx);
  CheckedLaunch& L = *cc.launch;
  std::lock_guard<std::mutex> lock(L.mu);
  VC& mine = L.vc[static_cast<size_t>(cc.core)];
  const int target_core = cc.core - cc.local + target;  // in the launch's books
  if (L.program && slot >= static_cast<int64_t>(kSemaphoresPerCore - kBarrierSemaphores)) {
    barrier_signalled(L, cc.core, cc.device, target, slot, inc, SourceLocation{});
  } else {
    VC& s = L.sem_vc[{target_core, slot}];
    if (s.empty()) s.assign(mine.size(), 0);
    join(s, mine);
  }
  ++mine[static_cast<size_t>(cc.core)];
  (target == ctx.core ? *ctx.arena : core_arena(target)).semaphores()[slot].fetch_add(inc);
}

bool checked_try_take(CoreContext& ctx, SemaphoreCell& cell, int64_t slot, int64_t amount,
                      const WaitSite& site) {
  CheckedCore& cc = core_of(ctx);
  CheckedLaunch& L = *cc.launch;
  // Under the lock that signals take: a core that is recorded as blocked is, in every state the
  // deadlock check can see, still short of its amount.
  std::lock_guard<std::mutex> lock(L.mu);
  if (!take_if_enough(cell, amount)) return false;
  L.blocked[static_cast<size_t>(cc.core)].on = false;
  if (L.ranks) rank_taken(L, cc.core, slot, amount);
  if (L.program && slot >= static_cast<int64_t>(kSemaphoresPerCore - kBarrierSemaphores)) {
    if (L.ranks) rank_barrier_taken(ctx, slot, site);
    barrier_taken(ctx, slot, amount, SourceLocation{});
  } else if (L.params.detect_races) {
    auto it = L.sem_vc.find({cc.core, slot});
    if (it != L.sem_vc.end()) join(L.vc[static_cast<size_t>(cc.core)], it->second);
  }
  return true;
}

namespace {
// What every core waits on (under the mutex); on MPI ranks, this rank's cores.
std::vector<std::string> wait_parts(const CheckedLaunch& L) {
  std::vector<std::string> parts;
  for (int c = 0; c < L.num_cores; ++c) {
    if (L.ranks && c / L.cores_per_device != L.rank) continue;
    const Blocked& b = L.blocked[static_cast<size_t>(c)];
    if (L.finished[static_cast<size_t>(c)]) {
      parts.push_back(fmt::format("{} has finished", core_name(L, c)));
    } else if (b.on && b.cell == nullptr) {
      parts.push_back(b.what);  // a wait in the transport, described by it
    } else if (b.on) {
      std::string step;
      if (!b.step.empty()) step = fmt::format(" at grid step ({})", fmt::join(b.step, ", "));
      std::string arrived;
      if (L.ranks) {
        arrived = rank_arrivals(L, c, b.slot);
      } else if (L.program) {
        arrived = remote_arrivals(L, b.cell);
      }
      parts.push_back(fmt::format("{} waits in {} at {}{} on {} (holds {}{}, needs {}{})",
                                  core_name(L, c), b.op, format_location(b.where), step, b.what,
                                  b.cell->load(), b.unit, b.amount, arrived));
    }
  }
  return parts;
}

// Whether every core but `core` is blocked on a wait nothing can satisfy any more, or finished
// (under the mutex). A core waiting in the transport (MPI ranks: for another rank to enter a
// launch) counts as blocked: the transport decides over every rank.
bool others_stuck(const CheckedLaunch& L, int core) {
  for (int c = 0; c < L.num_cores; ++c) {
    if (c == core || L.finished[static_cast<size_t>(c)]) continue;
    const Blocked& b = L.blocked[static_cast<size_t>(c)];
    if (!b.on) return false;
    if (b.cell == nullptr) continue;
    if (b.cell->load() >= b.amount || (L.program && remote_may_satisfy(L, c, b.cell, b.slot))) {
      return false;
    }
  }
  return true;
}

// The message of a deadlock (under the mutex).
std::string deadlock_text(const CheckedLaunch& L) {
  const std::vector<std::string> parts = wait_parts(L);
  return fmt::format(
      "deadlock: every core {} is blocked or finished, so no signal can ever come: {}. Each wait "
      "needs matching signals (or started copies) from a core that is still running; check which "
      "core signals whom, and loop bounds",
      L.mesh != nullptr ? "of every device of the mesh" : "of the mesh", fmt::join(parts, "; "));
}
}  // namespace

void checked_blocked(CoreContext& ctx, SemaphoreCell& cell, int64_t slot, int64_t amount,
                     const WaitSite& site) {
  CheckedCore& cc = core_of(ctx);
  CheckedLaunch& L = *cc.launch;
  std::string deadlock;
  std::string waits;  // MPI ranks: every core of this rank is blocked
  // Read before the counters: a signal that arrives after them changes it (Transport::stuck).
  const uint64_t version = L.ranks ? L.transport->wait_version() : 0;
  {
    std::lock_guard<std::mutex> lock(L.mu);
    // A remote copy that would satisfy this wait has been started meanwhile: it lands now (on a
    // TPU it lands on its own) and the wait looks again.
    if (L.program && run_pending_remote(ctx, cell)) return;
    Blocked& me = L.blocked[static_cast<size_t>(cc.core)];
    if (!me.on) {
      me.on = true;
      me.cell = &cell;
      me.slot = slot;
      me.amount = amount;
      me.what = name_semaphore(*ctx.launch->spec, &ctx, slot);
      if (site.dma_src != nullptr) {
        me.what += fmt::format(" (the DMA semaphore of a copy of {} {})",
                               dtype_name(site.dma_src->dtype), site.dma_src->shape.to_string());
      }
      me.op = site.op;
      me.unit = site.unit();
      me.where = site.where;
      me.step = ctx.grid_step;
    }
    // A deadlock is certain when this wait and every other core's are short, and every core is
    // blocked or finished: the counters of blocked cores only change under this lock, by
    // signals of running cores (of which there are none), and their copies were run before they
    // blocked. On a device mesh the cores of every device count, a device that has not entered
    // the launch is running, and a remote copy not yet landed or a device already in a later
    // launch (for a barrier semaphore) may still satisfy a wait. On MPI ranks other ranks'
    // cores count as finished here: a rank whose cores are all stuck tells the transport, which
    // decides over every rank.
    const bool stuck = (!L.partial || L.ranks) && !L.deadlock_reported && cell.load() < amount &&
                       !(L.program && remote_may_satisfy(L, cc.core, &cell, slot)) &&
                       others_stuck(L, cc.core);
    if (stuck && L.ranks) {
      waits = fmt::format("{}", fmt::join(wait_parts(L), "; "));
    } else if (stuck) {
      L.deadlock_reported = true;
      deadlock = deadlock_text(L);
    }
  }
  if (!waits.empty()) L.transport->stuck(version, std::move(waits));
  if (!deadlock.empty()) raise(ErrorKind::kDeadlock, site.op, site.where, deadlock);
}

void checked_transport_blocked(CoreContext& ctx, const std::string& what) {
  CheckedCore& cc = core_of(ctx);
  CheckedLaunch& L = *cc.launch;
  if (!L.ranks) return;
  std::string waits;
  const uint64_t version = L.transport->wait_version();  // before the state it vouches for
  {
    std::lock_guard<std::mutex> lock(L.mu);
    Blocked& me = L.blocked[static_cast<size_t>(cc.core)];
    me.on = true;
    me.cell = nullptr;
    me.what = what;
    if (!L.deadlock_reported && others_stuck(L, cc.core)) {
      waits = fmt::format("{}", fmt::join(wait_parts(L), "; "));
    }
  }
  if (!waits.empty()) L.transport->stuck(version, std::move(waits));
}

void settle_before_uninitialized(CoreContext& ctx, uint8_t state, const char* op,
                                 SourceLocation where) {
  CheckedCore& cc = core_of(ctx);
  CheckedLaunch& L = *cc.launch;
  if (L.num_cores == 1) return;
  {
    std::lock_guard<std::mutex> lock(L.mu);
    const Origin* o = origin_of(L, state);
    if (o == nullptr || !o->early_hbm_read) return;
  }
  LaunchState& launch = *ctx.launch;
  const auto deadline = std::chrono::steady_clock::now() +
                        std::chrono::milliseconds(std::min<int64_t>(launch.wait_timeout_ms, 60000));
  while (std::chrono::steady_clock::now() < deadline) {
    if (launch.cancelled.load()) {
      raise(ErrorKind::kCancelled, op, where,
            "stopped here, having read data another core had not written yet, while that core's "
            "error (the race) is the one the launch reports");
    }
    bool others_done = true;
    {
      std::lock_guard<std::mutex> lock(L.mu);
      for (int c = 0; c < L.num_cores && others_done; ++c) {
        if (c == cc.core || L.finished[static_cast<size_t>(c)]) continue;
        others_done = L.blocked[static_cast<size_t>(c)].on;
      }
    }
    if (others_done) return;
    std::this_thread::sleep_for(std::chrono::microseconds(50));
  }
}

void checked_unblocked(CoreContext& ctx) noexcept {
  CheckedCore& cc = core_of(ctx);
  std::lock_guard<std::mutex> lock(cc.launch->mu);
  cc.launch->blocked[static_cast<size_t>(cc.core)].on = false;
}
}  // namespace tessera::detail
