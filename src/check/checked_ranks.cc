// The checked engine on MPI ranks: each rank keeps the books of its own part of a launch, laid
// out over every device's cores as in process (checked_devices.cc), and the vector clocks travel
// with the transport's messages.
//
// Sending. A remote copy or signal ticks the sender's clock and hands the transport a CheckNote
// (its core, line and clock; for a copy, where it lands), which the transport carries on the
// message that adds to the target's semaphore. The copy's bytes leave at start() (the transport
// moves them then), but until its wait_send the copy stays in the sender's books as in flight
// (a Dma with `remote` set), so that overwriting its source before wait_send is a race, as on a
// TPU where the bytes may leave at any moment until then.
//
// Arriving. The target's transport hands the note to RankBooks::arrived before the semaphore
// gains the bytes: the landing is recorded as a write of the target's HBM with the sender's clock
// (so a read or write of the destination that nothing orders with it, e.g. before wait_recv, is
// a race naming both devices, cores, lines and the element), the sender's clock joins the
// semaphore's (a wait that takes it is ordered after the sender), and a remote write or signal to
// a kernel with a collective_id must be ordered after the target entered it (a signal of the
// target, e.g. on the barrier semaphore). Barrier semaphores keep their clocks in the rank's
// program books: a signal not ordered after the target's last wait on it in an earlier kernel is
// the reuse of a collective_id.
//
// Between calls. On a semaphore the pallas_call returns, each rank carries the half of a remote
// copy it holds into the call that takes the semaphore: the sender's copy, in flight in its
// books until wait_send (checked_carry_out), and the receiver's landings that no wait took,
// kept per semaphore with their destinations until then (rank_carry_out).
//
// Deadlocks. A rank whose cores are all blocked tells the transport what they wait for
// (Transport::stuck); the transport concludes a deadlock over every rank from the ranks'
// snapshots (src/mpi/mpi_transport.h).
#include <fmt/format.h>

#include <algorithm>
#include <atomic>
#include <memory>
#include <mutex>

#include "check/checked_engine.h"
#include "check/checked_state.h"
#include "core/error_context.h"
#include "core/messages.h"
#include "runtime/devices.h"
#include "runtime/waits.h"
#include "tessera/error.h"

namespace tessera::detail {

namespace {

constexpr const char* kStart = "remote_copy.start";

bool barrier_slot(int64_t slot) { return slot >= first_barrier_slot(); }

// A rank's books for what reaches it: the program's clocks and barrier semaphores, and the
// books of the launch it runs.
class RankBooks final : public ArrivalObserver {
 public:
  explicit RankBooks(int rank) : rank_(rank), program_(std::make_shared<CheckedProgram>()) {}
  std::shared_ptr<CheckedProgram> program() const { return program_; }
  std::atomic<bool> observing{false};
  void running(std::shared_ptr<CheckedLaunch> L) {
    std::lock_guard<std::mutex> lock(mu_);
    current_ = std::move(L);
  }
  std::exception_ptr arrived(int from_device, uint64_t seq, const CheckNote& note, int core,
                             int64_t slot, int64_t inc) noexcept override;
  bool core_begun(int core) noexcept override {
    std::shared_ptr<CheckedLaunch> L;
    {
      std::lock_guard<std::mutex> lock(mu_);
      L = current_;
    }
    if (!L) return false;
    const size_t g = static_cast<size_t>(rank_ * L->cores_per_device + core);
    return g < L->cores.size() && L->cores[g]->memories_made.load(std::memory_order_acquire);
  }

 private:
  void arrived_at_barrier(int from_device, uint64_t seq, const CheckNote& note, int core,
                          int64_t slot);
  void arrived_in_launch(CheckedLaunch& L, int from_device, const CheckNote& note, int core,
                         int64_t slot);

  int rank_;
  std::shared_ptr<CheckedProgram> program_;
  std::mutex mu_;
  std::shared_ptr<CheckedLaunch> current_;
  bool detect_races_ = true;
};

std::string sender_name(const MeshInfo& mesh, int device, int core) {
  return fmt::format("device {} core {}", mesh.name(device), core);
}

std::exception_ptr RankBooks::arrived(int from_device, uint64_t seq, const CheckNote& note,
                                      int core, int64_t slot, int64_t /*inc*/) noexcept {
  // What is found here is raised as a KernelError of the sender's statement (this is the
  // transport's engine thread, outside any kernel body).
  ErrorContext sender;
  sender.core = note.from_core;
  struct Scope {
    explicit Scope(ErrorContext* c) { set_current_error_context(c); }
    ~Scope() { set_current_error_context(nullptr); }
  } scope(&sender);
  try {
    std::shared_ptr<CheckedLaunch> L;
    {
      std::lock_guard<std::mutex> lock(mu_);
      L = current_;
      if (L) detect_races_ = L->params.detect_races;
    }
    if (L) {
      sender.kernel_name = &L->spec->name;
      sender.kernel_where = L->spec->where;
    }
    if (barrier_slot(slot)) {
      arrived_at_barrier(from_device, seq, note, core, slot);
    } else if (L && L->seq == seq && core < L->cores_per_device &&
               note.cores_per_device == L->cores_per_device &&
               note.clock.size() == static_cast<size_t>(L->num_cores)) {
      arrived_in_launch(*L, from_device, note, core, slot);
    }
    return nullptr;
  } catch (...) {
    return std::current_exception();
  }
}

void RankBooks::arrived_at_barrier(int from_device, uint64_t seq, const CheckNote& note, int core,
                                   int64_t slot) {
  std::lock_guard<std::mutex> lock(program_->mu);
  CheckedProgram::Barrier& b = program_->barriers[{rank_, core, slot}];
  const int C = note.cores_per_device;
  const auto g = static_cast<size_t>(rank_ * C + core);
  const uint32_t known = g < note.clock.size() ? note.clock[g] : 0;
  if (detect_races_ && b.waited && b.wait_seq < seq && note.barrier_seq <= b.wait_seq &&
      known < b.wait_epoch) {
    raise(ErrorKind::kRace, "pl::semaphore_signal", note.where,
          fmt::format("device {} core {} signals {} of device {} core {} in its launch #{} with "
                      "nothing ordering the signal after that device's last wait on it, in "
                      "kernel '{}' (launch #{}): the sender may have left that kernel before the "
                      "target's wait, and its signal can then satisfy the wait of the earlier "
                      "kernel (a collective_id reused by consecutive kernels). Add a second "
                      "barrier on a run_scoped semaphore after the barrier semaphore's, or use a "
                      "distinct collective_id",
                      from_device, note.from_core, barrier_semaphore_name(slot), rank_, core, seq,
                      b.kernel, b.wait_seq));
  }
  for (size_t i = 0; i < note.clock.size(); ++i) {
    if (note.clock[i] == 0) continue;
    uint32_t& e = b.clock[{static_cast<int>(i) / C, static_cast<int>(i) % C}];
    e = std::max(e, note.clock[i]);
  }
  // A wait of this device in a launch before `seq` that takes from the semaphore after this
  // arrival could take this signal (rank_barrier_taken).
  if (detect_races_) b.early.push_back({seq, from_device, note.from_core, note.where});
}

namespace {

// Calls f(address) for each element of `r`, in row-major order of its shape.
template <class F>
void for_each_address(const RawRef& r, F f) {
  const int64_t item = itemsize(r.dtype);
  const auto base = reinterpret_cast<uintptr_t>(r.data);
  for_each_element(r.shape, r.strides,
                   [&](int64_t off, int64_t) { f(base + static_cast<uintptr_t>(off * item)); });
}

// The landing of a copy from `sender` in `reg` (under the launch's mutex): its elements take the
// states the sender's source had (note.states; all defined when it sent none), so that garbage
// sent from another rank is found where it matters here, as a device mesh's copies carry it.
void land_states(CheckedLaunch& L, Region& reg, const Runs& runs, const CheckNote& note,
                 const std::string& sender) {
  if (note.states.empty() ||
      note.states.size() != static_cast<size_t>(std::max<int64_t>(note.dst.shape.size(), 1))) {
    mark(reg, runs, kDefined);
    return;
  }
  std::vector<uint8_t> local;  // the sender's origins as this launch's
  for (const CheckNote::Origin& o : note.origins) {
    local.push_back(add_origin_locked(L, Origin{o.where, o.core, {}, sender + "'s " + o.source}));
  }
  const int64_t item = itemsize(note.dst.dtype);
  size_t k = 0;
  for_each_address(note.dst, [&](uintptr_t p) {
    uint8_t state = note.states[k++];
    if (state >= kFirstOrigin) {
      const size_t o = state - kFirstOrigin;
      state = o < local.size() ? local[o] : kDefined;
    }
    mark_range(reg, p, p + static_cast<uintptr_t>(item), state);
  });
}

// A copy into core `g`'s VMEM or SMEM (`r`; under the launch's mutex): its bytes came in the
// message, and the core has begun (src/mpi/mpi_core_memory.cc). They are written, with the
// sender's definedness; the target core reads them after the wait that takes this landing,
// which is ordered after this (the semaphore's count).
void land_in_core_memory(CheckedLaunch& L, Region& r, int g, int from, const CheckNote& note,
                         const Runs& runs, int64_t slot, const std::string& sender) {
  // The core's accesses of the destination that nothing orders before the sender's start():
  // the copy may have landed on them (checked_history.cc).
  if (keeps_history(*L.cores[static_cast<size_t>(g)])) {
    check_landing_vs_history(L, g, runs, note, sender);
  }
  if (r.init == nullptr) return;
  land_states(L, r, runs, note, sender);
  if (!L.params.detect_races || L.arenas[static_cast<size_t>(g)] == nullptr) return;
  // Until a wait_recv of the core takes it, the landing is in flight, as a device mesh's landed
  // copy is: the core's reads and writes of the destination race with it (check_vs_remote). Its
  // source is the sender's, in no book here.
  RemoteDma d;
  d.from = from;
  d.to = g;
  d.src = note.dst;
  d.dst = note.dst;
  d.dst_runs = runs;
  d.target_arena = L.arenas[static_cast<size_t>(g)];
  d.recv_sem = &d.target_arena->semaphores()[slot];
  d.recv_slot = slot;
  d.bytes = note.bytes;
  d.vc_start = note.clock;
  d.started = note.where;
  d.read = d.executed = d.sent = true;
  L.remote.push_back(std::move(d));
  L.remote_live.store(static_cast<int>(L.remote.size()), std::memory_order_relaxed);
}

}  // namespace

void RankBooks::arrived_in_launch(CheckedLaunch& L, int from_device, const CheckNote& note,
                                  int core, int64_t slot) {
  std::lock_guard<std::mutex> lock(L.mu);
  const int C = L.cores_per_device;
  const int g = rank_ * C + core;
  const int from = from_device * C + note.from_core;
  const std::string sender = sender_name(*L.mesh, from_device, note.from_core);
  const char* op = note.copy ? kStart : "pl::semaphore_signal";
  if (L.params.detect_races && !L.implicit_barrier &&
      note.clock[static_cast<size_t>(g)] <
          L.entry[static_cast<size_t>(g)][static_cast<size_t>(g)]) {
    raise(ErrorKind::kRace, op, note.where,
          fmt::format("{} {} of {} with nothing ordering it after device {} entered kernel '{}' "
                      "(launch #{}): on a TPU the target may still be running its previous "
                      "kernel there. The kernel has a collective_id, so it starts without the "
                      "implicit device barrier: first wait on the barrier semaphore for a signal "
                      "from that device (pltpu::get_barrier_semaphore())",
                      sender,
                      note.copy ? "writes a remote copy into the memory" : "signals a semaphore",
                      core_name(L, g), L.mesh->name(rank_), L.spec->name, L.seq));
  }
  if (note.copy && note.dst.data != nullptr) {
    CoreContext books;
    books.engine_core = L.cores[static_cast<size_t>(g)].get();
    const Runs runs = runs_of(note.dst);
    HbmBuffer* hbm = runs.empty() ? nullptr : hbm_of(L, runs.lo);
    if (hbm != nullptr) {
      // The landing: a write of this device's HBM with the sender's clock at its start, its
      // elements taking the definedness of the sender's.
      record_hbm(books, from, note.dst, runs, true, note.clock,
                 note.clock[static_cast<size_t>(from)], "remote copy", note.where);
      if (hbm->region.init != nullptr) land_states(L, hbm->region, runs, note, sender);
    } else if (Region* r = runs.empty() ? nullptr : region_of(books, runs.lo)) {
      land_in_core_memory(L, *r, g, from, note, runs, slot, sender);
    }
  }
  VC& s = L.sem_vc[{g, slot}];
  if (s.empty()) s.assign(note.clock.size(), 0);
  join(s, note.clock);
  if (note.copy) {
    L.arrivals[{g, slot}].push_back(
        CheckedLaunch::Arrival{note.bytes,
                               fmt::format("{} bytes ({} {}) from {} started at {}", note.bytes,
                                           dtype_name(note.dst.dtype), note.dst.shape.to_string(),
                                           sender, format_location(note.where)),
                               note.dst, note.where,
                               fmt::format("the remote copy of {} {} from {} to {} started at {}",
                                           dtype_name(note.dst.dtype), note.dst.shape.to_string(),
                                           sender, core_name(L, g), format_location(note.where))});
  }
}

// The note a core sends (under the mutex), filled in place: its clock, ticked.
void fill_note(CheckedCore& cc, SourceLocation where, CheckNote& note) {
  CheckedLaunch& L = *cc.launch;
  note.from_core = cc.local;
  note.cores_per_device = L.cores_per_device;
  note.where = where;
  {
    std::lock_guard<std::mutex> program(L.program->mu);
    note.barrier_seq = L.program->last_barrier_seq;
  }
  VC& mine = L.vc[static_cast<size_t>(cc.core)];
  ++mine[static_cast<size_t>(cc.core)];
  note.clock = mine;
  // And once more: the core's accesses after this operation are at an epoch the note does not
  // hold (checked_history.cc compares an access's epoch with a note's clock).
  ++mine[static_cast<size_t>(cc.core)];
}

}  // namespace

std::unique_ptr<Engine> make_checked_rank_engine(const LaunchSpec& spec,
                                                 const pltpu::InterpretParams& params,
                                                 int64_t vmem_limit, DeviceContext& dev,
                                                 const DeviceLaunch& launch) {
  Transport& t = *dev.transport;
  auto rank = std::static_pointer_cast<RankBooks>(
      t.program_books([&] { return std::make_shared<RankBooks>(dev.device); }));
  if (!rank->observing.exchange(true)) t.observe(rank);
  auto L = make_books(spec, params, vmem_limit, dev, launch.seq, rank->program());
  L->partial = true;
  L->ranks = true;
  L->rank = dev.device;
  if (L->implicit_barrier) {
    std::lock_guard<std::mutex> lock(L->program->mu);
    L->program->last_barrier_seq = launch.seq;
  }
  attach(*L, dev.device, launch);
  // Other ranks' cores are not here: finished, for every check that waits for running cores.
  for (int c = 0; c < L->num_cores; ++c) {
    if (c / spec.num_cores != dev.device) L->finished[static_cast<size_t>(c)] = 1;
  }
  // Other ranks' copies into this rank's arrays bring their definedness with the landing
  // (land_states), so the arrays keep their shadows as in process.
  rank->running(L);
  return make_engine_for(L, dev.device * spec.num_cores, dev.device);
}

namespace {

// The definedness of a remote copy's source, for the note (empty when every element is
// defined). Under the launch's mutex: HBM shadows and the origins are shared.
void note_states(CoreContext& ctx, const RawRef& src, CheckNote& note) {
  CheckedCore& cc = core_of(ctx);
  CheckedLaunch& L = *cc.launch;
  const auto lo = reinterpret_cast<uintptr_t>(src.data);
  std::lock_guard<std::mutex> lock(L.mu);
  const Region* reg = region_of(ctx, lo);
  if (reg == nullptr || reg->init == nullptr || first_unwritten(*reg, runs_of(src)) == 0) return;
  const int item = static_cast<int>(itemsize(src.dtype));
  std::vector<uint8_t> origin_index(256, 0);  // a state of this launch -> 1 + its note origin
  for_each_address(src, [&](uintptr_t p) {
    uint8_t state = shadow_state(*reg, p, item);
    if (state >= kFirstOrigin) {
      uint8_t& mapped = origin_index[state];
      if (mapped == 0) {
        const Origin* o = origin_of(L, state);
        note.origins.push_back(CheckNote::Origin{o != nullptr ? o->where : SourceLocation{},
                                                 o != nullptr ? o->core : 0,
                                                 o != nullptr ? o->source : std::string()});
        mapped = static_cast<uint8_t>(note.origins.size());
      }
      state = static_cast<uint8_t>(kFirstOrigin + mapped - 1);
    }
    note.states.push_back(state);
  });
}

}  // namespace

void checked_rank_dma_start(CoreContext& ctx, const RemoteCopy& copy) {
  CheckedCore& cc = core_of(ctx);
  CheckedLaunch& L = *cc.launch;
  Dma d;
  d.src = copy.src;
  d.dst = copy.dst;
  d.sem = copy.send_sem;
  d.bytes = copy.bytes;
  d.made = copy.made;
  d.started = copy.where;
  d.src_runs = runs_of(copy.src);  // the destination is the target's, not in these books
  // The sender's half: on a semaphore the pallas_call returns it is carried into the call that
  // takes the semaphore (checked_carry_out), as a device mesh carries it.
  d.half = CarriedCopy::Half::kSend;
  check_compute_vs_dma(ctx, d.src_runs, false, kStart, copy.where);
  CheckNote note;
  {
    std::lock_guard<std::mutex> lock(L.mu);
    fill_note(cc, copy.where, note);
    d.id = L.next_dma++;
    d.vc_start = note.clock;
  }
  // Its source is read until its wait_send (a copy landing here from another rank races with it).
  if (keeps_history(cc)) remember_access(cc, d.src_runs, false, "remote copy", copy.where, d.id);
  note.copy = true;
  note.dst = copy.dst;
  note.bytes = copy.bytes;
  note_states(ctx, copy.src, note);
  const int core = copy.target.core >= 0 ? copy.target.core : ctx.core;
  d.remote =
      fmt::format("the remote copy of {} {} from {} to device {} core {} started at {}",
                  dtype_name(copy.src.dtype), copy.src.shape.to_string(), core_name(L, cc.core),
                  L.mesh->name(copy.target.device), core, format_location(copy.where));
  RemoteCopy sent = copy;
  sent.note = &note;
  L.transport->put(ctx, sent);
  add_dma_bytes(ctx, copy.send_sem, copy.bytes);  // the bytes have left (the transport moved them)
  d.executed = true;
  cc.inflight.push_back(std::move(d));
}

void checked_rank_dma_wait(CoreContext& ctx, SemaphoreCell* sem, int64_t slot, int64_t bytes,
                           const WaitSite& site, bool recv) {
  if (recv) {
    block_until(ctx, *sem, slot, bytes, site);
    // Copies into this core's VMEM or SMEM that the wait takes are no longer in flight. Their
    // landings join the core's access history as writes at this wait: another rank's copy into
    // the same bytes must be started after it (checked_history.cc).
    CheckedCore& cc = core_of(ctx);
    CheckedLaunch& L = *cc.launch;
    // Receiving halves carried in from an earlier call on this semaphore (rank_carry_out).
    const bool carried = std::any_of(cc.inflight.begin(), cc.inflight.end(), [&](const Dma& d) {
      return d.sem == sem && d.half == CarriedCopy::Half::kRecv;
    });
    if (carried) complete_copies(ctx, sem, bytes, RemoteKinds::kRecv, site.where);
    if (L.remote_live.load(std::memory_order_relaxed) != 0) {
      std::vector<Runs> landed;
      std::lock_guard<std::mutex> lock(L.mu);
      const bool keep = keeps_history(cc);
      take_remote(L, cc.core, sem, bytes, RemoteKinds::kRecv, keep ? &landed : nullptr);
      for (const Runs& runs : landed) {
        remember_access(cc, runs, true, "landing of a remote copy taken by the wait_recv",
                        site.where);
      }
    }
    return;
  }
  // wait_send: completes this core's copies on the semaphore (their sources may change again).
  checked_dma_wait(ctx, sem, slot, bytes, site);
}

void checked_rank_signal(CoreContext& ctx, const DeviceTarget& target, int64_t slot, int64_t inc,
                         std::source_location where) {
  CheckedCore& cc = core_of(ctx);
  CheckedLaunch& L = *cc.launch;
  CheckNote note;
  {
    std::lock_guard<std::mutex> lock(L.mu);
    fill_note(cc, where, note);
  }
  L.transport->signal(ctx, target, slot, inc, "pl::semaphore_signal", where, &note);
}

void rank_barrier_taken(CoreContext& ctx, int64_t slot, const WaitSite& site) {
  CheckedCore& cc = core_of(ctx);
  CheckedLaunch& L = *cc.launch;
  std::lock_guard<std::mutex> program(L.program->mu);
  CheckedProgram::Barrier& b = L.program->barriers[{cc.device, cc.local, slot}];
  // Signals of this launch or earlier ones are this wait's to take (or a later one's).
  std::erase_if(b.early, [&](const CheckedProgram::Barrier::Early& e) { return e.seq <= L.seq; });
  if (b.early.empty() || !L.params.detect_races) return;
  const CheckedProgram::Barrier::Early& e = b.early.front();
  raise(ErrorKind::kRace, site.op, site.where,
        fmt::format("{} takes from {} in kernel '{}' (launch #{}) after a signal of a later "
                    "kernel reached it: device {} core {} signalled it at {} in its launch #{}, "
                    "having left this kernel before this wait, so the signal meant for the next "
                    "kernel can satisfy this wait (a collective_id reused by consecutive kernels). "
                    "Add a second barrier on a run_scoped semaphore after the barrier "
                    "semaphore's, or use a distinct collective_id",
                    core_name(L, cc.core), barrier_semaphore_name(slot), L.spec->name, L.seq,
                    L.mesh->name(e.device), e.core, format_location(e.where), e.seq));
}

void rank_taken(CheckedLaunch& L, int core, int64_t slot, int64_t amount) {
  auto it = L.arrivals.find({core, slot});
  if (it == L.arrivals.end()) return;
  std::vector<CheckedLaunch::Arrival>& v = it->second;
  size_t n = 0;
  for (int64_t left = amount; n < v.size() && left > 0; ++n) left -= v[n].bytes;
  v.erase(v.begin(), v.begin() + static_cast<long>(n));
  if (v.empty()) L.arrivals.erase(it);
}

void rank_carry_out(CoreContext& ctx, SemaphoreCell* sem, std::vector<CarriedCopy>& out) {
  CheckedCore& cc = core_of(ctx);
  CheckedLaunch& L = *cc.launch;
  const int64_t slot = sem - ctx.arena->semaphores();  // a pallas_call's cells are the core's
  std::lock_guard<std::mutex> lock(L.mu);
  auto it = L.arrivals.find({cc.core, slot});
  if (it == L.arrivals.end()) return;
  // Every message of the launch has been applied here (Transport::bodies_done), so these are
  // all the copies that landed on the semaphore and that no wait took. One into this core's
  // VMEM or SMEM cannot outlive the kernel: it stays in the books, which report it.
  for (const CheckedLaunch::Arrival& a : it->second) {
    const Runs runs = runs_of(a.dst);
    if (runs.empty() || hbm_of(L, runs.lo) == nullptr) continue;
    CarriedCopy c{a.dst, a.dst, a.bytes, a.started, a.started, true};
    c.half = CarriedCopy::Half::kRecv;
    c.what = a.copy;
    c.id = L.transport->carried(
        a.started, fmt::format("{} still in flight on {}'s recv_sem: no wait_recv took its {} "
                               "bytes",
                               a.copy, core_name(L, cc.core), a.bytes));
    out.push_back(std::move(c));
  }
  L.arrivals.erase(it);
}

void rank_sent_half(CheckedLaunch& L, int core, CarriedCopy& c) {
  c.dst = c.src;  // the destination is another rank's
  c.id = L.transport->carried(
      c.started, fmt::format("{} still in flight on {}'s send_sem: no wait_send took its {} bytes",
                             c.what, core_name(L, core), c.bytes));
}

std::string rank_arrivals(const CheckedLaunch& L, int core, int64_t slot) {
  auto it = L.arrivals.find({core, slot});
  if (it == L.arrivals.end()) return {};
  std::vector<std::string> parts;
  for (const CheckedLaunch::Arrival& a : it->second) parts.push_back(a.what);
  return fmt::format("; arrived and not taken: {}", fmt::join(parts, ", "));
}

}  // namespace tessera::detail
