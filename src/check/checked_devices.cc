// The checked engine on a device mesh: one set of books for the same launch on every device
// (vector clocks over all devices' cores, every device's arrays, every copy), remote copies in
// the DMA execution modes, remote signals, and barrier semaphores whose clocks outlive launches.
//
// Books. The first device to enter launch n makes its books (Transport::launch_books); each
// device adds its arrays and its cores' entry clocks; a checked launch starts once every device
// has done so, so that no core runs while another device's arrays are still being added. Cores
// are numbered device * cores + core in the books.
//
// Clocks across launches. A core's clock persists through the program (CheckedProgram::clocks,
// sparse over (device, core)): it enters each launch with what it knew at the end of the last
// one, and the implicit start barrier of a kernel without a collective_id joins every core's
// entry clock. So a remote write to a device is ordered after that device entered the launch
// only through the barrier, or through a signal of that device (e.g. on the barrier semaphore):
// otherwise it is a race ("write before the target entered").
//
// Barrier semaphores keep their clocks in the program's books too. A signal on a barrier
// semaphore must be ordered after the target's last wait on it: a device that signals it from
// its next kernel without having heard from the target since that wait could satisfy the
// target's wait of the previous kernel early (the reuse of a collective_id that a double barrier
// prevents).
#include <fmt/format.h>

#include <chrono>
#include <map>
#include <thread>
#include <tuple>

#include "check/checked_engine.h"
#include "check/checked_state.h"
#include "core/messages.h"
#include "native/native_engine.h"
#include "runtime/core_pool.h"
#include "runtime/devices.h"
#include "runtime/waits.h"
#include "tessera/error.h"

namespace tessera::detail {

namespace {

constexpr const char* kStart = "remote_copy.start";

int64_t first_barrier() { return kSemaphoresPerCore - kBarrierSemaphores; }

}  // namespace

void join_sparse(SparseClock& into, const CheckedLaunch& L, const VC& from) {
  const int C = L.cores_per_device;
  for (size_t g = 0; g < from.size(); ++g) {
    if (from[g] == 0) continue;
    uint32_t& e = into[{static_cast<int>(g) / C, static_cast<int>(g) % C}];
    e = std::max(e, from[g]);
  }
}

namespace {

// Joins a sparse clock into core `core`'s clock of the launch; entries for cores this launch
// does not have go straight to the core's persistent clock, so that nothing it learnt is lost.
void join_dense(CheckedLaunch& L, int core, const SparseClock& from) {
  const int C = L.cores_per_device;
  VC& v = L.vc[static_cast<size_t>(core)];
  SparseClock* keep = nullptr;
  for (const auto& [key, e] : from) {
    if (key.second < C && key.first < L.devices) {
      auto& x = v[static_cast<size_t>(key.first * C + key.second)];
      x = std::max(x, e);
    } else {
      if (keep == nullptr) keep = &L.program->clocks[{core / C, core % C}];
      uint32_t& x = (*keep)[key];
      x = std::max(x, e);
    }
  }
}

// Raises kRace when core `from` writes core `to`'s device without anything ordering the write
// after that device entered the launch.
void check_entered(CoreContext& ctx, const CheckedLaunch& L, int from, int to, const char* what,
                   const char* op, SourceLocation where) {
  const uint32_t entry = L.entry[static_cast<size_t>(to)][static_cast<size_t>(to)];
  if (L.vc[static_cast<size_t>(from)][static_cast<size_t>(to)] >= entry) return;
  (void)ctx;
  raise(ErrorKind::kRace, op, where,
        fmt::format("{} {} of {} with nothing ordering it after device {} entered kernel '{}' "
                    "(launch #{}): on a TPU the target may still be running its previous kernel "
                    "there. The kernel has a collective_id, so it starts without the implicit "
                    "device barrier: first wait on the barrier semaphore for a signal from that "
                    "device (pltpu::get_barrier_semaphore())",
                    core_name(L, from), what, core_name(L, to),
                    L.mesh->name(to / L.cores_per_device), L.spec->name, L.seq));
}

std::string remote_text(const CheckedLaunch& L, const RemoteDma& r) {
  return fmt::format("the remote copy of {} {} from {} to {} started at {}",
                     dtype_name(r.src.dtype), r.src.shape.to_string(), core_name(L, r.from),
                     core_name(L, r.to), format_location(r.started));
}

// A copy into another core's VMEM or SMEM waits until that core has begun: its beginning poisons
// them and makes their shadows, which either half of the copy writes. The target has entered
// the launch (Transport::access), so its cores begin without waiting for anything. Returns
// whether the destination is such memory.
bool wait_for_memories(const CoreContext& ctx, CheckedLaunch& L, const RemoteDma& r) {
  {
    std::lock_guard<std::mutex> lock(L.mu);
    if (r.dst_runs.empty() || hbm_of(L, r.dst_runs.lo) != nullptr) return false;
  }
  const CheckedCore& target = *L.cores[static_cast<size_t>(r.to)];
  while (!target.memories_made.load(std::memory_order_acquire)) {
    if (ctx.launch->cancelled.load()) {
      raise(ErrorKind::kCancelled, kStart, r.started,
            "cancelled: a device of the mesh failed, and its error is the one the program "
            "reports");
    }
    std::this_thread::yield();
  }
  return true;
}

// The first half of remote copy `r` (under the mutex): its bytes leave the source (a read of
// HBM recorded with the sender's clock at its start), into the copy's staging buffer, their
// shadow goes to the destination's, and send_sem gains them.
void read_half(CoreContext& ctx, CheckedLaunch& L, RemoteDma& r) {
  const uint32_t e = r.vc_start[static_cast<size_t>(r.from)];
  if (L.params.detect_races) {
    record_hbm(ctx, r.from, r.src, r.src_runs, false, r.vc_start, e, "remote copy", r.started);
  }
  copy_shadow(ctx, r.src, r.dst, r.dst_runs, r.started);
  r.staging.resize(static_cast<size_t>(r.bytes));
  RawRef staged{r.staging.data(), r.src.dtype, MemorySpace::VMEM, r.src.shape,
                row_major_strides(r.src.shape)};
  strided_copy(r.src, staged);
  r.read = true;
  VC& s = L.sem_vc[{r.from, r.send_slot}];
  if (s.empty()) s.assign(r.vc_start.size(), 0);
  join(s, r.vc_start);
  r.send_sem->fetch_add(r.bytes);
  if (CoreArena* a = L.arenas[static_cast<size_t>(r.from)]) a->wait_queue().wake();
}

// The second half (under the mutex): the bytes land (a write of HBM recorded with the sender's
// clock at its start) and recv_sem gains them, its clock the sender's.
void land(CoreContext& ctx, CheckedLaunch& L, RemoteDma& r) {
  if (!r.read) read_half(ctx, L, r);
  // A core that has run its body may still receive on a semaphore that outlives the kernel: it
  // carries the copy into a later call (carry_remote_out).
  if (L.finished[static_cast<size_t>(r.to)] && !semaphore_outlives_launch(*L.spec, r.recv_slot)) {
    raise(ErrorKind::kInvalidArgument, kStart, r.started,
          fmt::format("{} cannot land: {} has finished the kernel without taking it with "
                      "wait_recv",
                      remote_text(L, r), core_name(L, r.to)));
  }
  const uint32_t e = r.vc_start[static_cast<size_t>(r.from)];
  if (L.params.detect_races) {
    record_hbm(ctx, r.from, r.dst, r.dst_runs, true, r.vc_start, e, "remote copy", r.started);
  }
  const RawRef staged{r.staging.data(), r.src.dtype, MemorySpace::VMEM, r.src.shape,
                      row_major_strides(r.src.shape)};
  strided_copy(staged, r.dst);
  r.staging.clear();
  r.staging.shrink_to_fit();
  r.executed = true;
  VC& s = L.sem_vc[{r.to, r.recv_slot}];
  if (s.empty()) s.assign(r.vc_start.size(), 0);
  join(s, r.vc_start);
  r.recv_sem->fetch_add(r.bytes);
  r.target_arena->wait_queue().wake();
}

// Runs one pending half that would add to `cell` (core `core`'s), as the execution mode picks:
// the latest started first (on_wait: out of order), or at random. On a receive semaphore the
// copy lands (both halves); on a send semaphore its bytes leave the source.
bool land_one(CoreContext& ctx, CheckedLaunch& L, int core, const SemaphoreCell* cell) {
  std::vector<size_t> pending;
  for (size_t i = 0; i < L.remote.size(); ++i) {
    const RemoteDma& r = L.remote[i];
    if ((r.recv_sem == cell && !r.executed) || (r.from == core && r.send_sem == cell && !r.read)) {
      pending.push_back(i);
    }
  }
  if (pending.empty()) return false;
  size_t pick = pending.back();
  if (L.params.dma_execution_mode == pltpu::DmaExecutionMode::random) {
    pick = pending[static_cast<size_t>(L.cores[static_cast<size_t>(core)]->rng() % pending.size())];
  }
  RemoteDma& r = L.remote[pick];
  if (r.recv_sem == cell) {
    land(ctx, L, r);
  } else {
    read_half(ctx, L, r);
  }
  return true;
}

}  // namespace

int64_t take_remote(CheckedLaunch& L, int core, const SemaphoreCell* cell, int64_t bytes,
                    RemoteKinds kinds, std::vector<Runs>* received) {
  int64_t left = bytes;
  for (RemoteDma& r : L.remote) {
    if (left <= 0) break;
    if (kinds != RemoteKinds::kSend && r.recv_sem == cell && r.executed && !r.received) {
      r.received = true;
      left -= r.bytes;
      if (received != nullptr) received->push_back(r.dst_runs);
    } else if (kinds != RemoteKinds::kRecv && r.from == core && r.send_sem == cell && r.read &&
               !r.sent) {
      r.sent = true;
      left -= r.bytes;
    }
  }
  std::erase_if(L.remote, [](const RemoteDma& r) { return r.sent && r.received; });
  L.remote_live.store(static_cast<int>(L.remote.size()), std::memory_order_relaxed);
  return left;
}

void carry_remote_out(CoreContext& ctx, SemaphoreCell* sem, std::vector<CarriedCopy>& out) {
  CheckedCore& cc = core_of(ctx);
  CheckedLaunch& L = *cc.launch;
  std::lock_guard<std::mutex> lock(L.mu);
  for (RemoteDma& r : L.remote) {
    const bool send = r.from == cc.core && r.send_sem == sem && !r.sent && !r.src_runs.empty() &&
                      hbm_of(L, r.src_runs.lo) != nullptr;
    const bool recv = r.to == cc.core && r.recv_sem == sem && !r.received && !r.dst_runs.empty() &&
                      hbm_of(L, r.dst_runs.lo) != nullptr;
    if (!send && !recv) continue;
    // On a TPU the bytes may leave the source at any moment until wait_send; here they have left
    // by the end of the kernel (into the staging buffer), and the source stays in flight.
    if (!r.read) read_half(ctx, L, r);
    const std::string copy = remote_text(L, r);
    CarriedCopy c{r.src, r.dst, r.bytes, r.made, r.started, true};
    c.what = copy;
    if (send) {
      c.half = CarriedCopy::Half::kSend;
      c.dst = r.src;
      c.id = L.transport->carried(
          r.started, fmt::format("{} still in flight on {}'s send_sem: no wait_send took its {} "
                                 "bytes",
                                 copy, core_name(L, r.from), r.bytes));
      r.sent = true;
      out.push_back(c);
    }
    if (recv) {
      c.half = CarriedCopy::Half::kRecv;
      c.src = r.dst;
      c.dst = r.dst;
      c.executed = r.executed;
      if (!r.executed) {
        c.staging = std::make_shared<std::vector<std::byte>>(std::move(r.staging));
        r.executed = true;  // it lands in the call that carries it now
      }
      c.id = L.transport->carried(
          r.started, fmt::format("{} still in flight on {}'s recv_sem: no wait_recv took its {} "
                                 "bytes",
                                 copy, core_name(L, r.to), r.bytes));
      r.received = true;
      out.push_back(std::move(c));
    }
  }
  std::erase_if(L.remote, [](const RemoteDma& r) { return r.sent && r.received; });
  L.remote_live.store(static_cast<int>(L.remote.size()), std::memory_order_relaxed);
}

std::shared_ptr<CheckedLaunch> make_books(const LaunchSpec& spec,
                                          const pltpu::InterpretParams& params, int64_t vmem_limit,
                                          DeviceContext& dev, uint64_t seq,
                                          std::shared_ptr<CheckedProgram> program) {
  auto L = std::make_shared<CheckedLaunch>();
  L->spec_copy = spec;
  L->spec = &L->spec_copy;
  L->params = params;
  checked_check_chip(*L, spec, vmem_limit);
  checked_add_cores(*L, dev.mesh->size, spec.num_cores);
  L->transport = dev.transport;
  L->mesh = dev.mesh;
  L->seq = seq;
  L->implicit_barrier = spec.collective_id < 0 && !spec.skip_device_barrier;
  L->program = std::move(program);
  L->entry.assign(static_cast<size_t>(L->num_cores), VC());
  return L;
}

// Device `device` joins the books: its arrays, and its cores' clocks as they enter.
void attach(CheckedLaunch& L, int device, const DeviceLaunch& launch) {
  std::lock_guard<std::mutex> lock(L.mu);
  checked_add_buffers(L, launch.buffers.data(), static_cast<int>(launch.buffers.size()), device);
  std::lock_guard<std::mutex> program(L.program->mu);
  const int C = L.cores_per_device;
  for (int c = 0; c < C; ++c) {
    const int g = device * C + c;
    VC& v = L.vc[static_cast<size_t>(g)];
    for (const auto& [key, e] : L.program->clocks[{device, c}]) {
      if (key.second < C && key.first < L.devices) {
        v[static_cast<size_t>(key.first * C + key.second)] = e;
      }
    }
    ++v[static_cast<size_t>(g)];
    L.entry[static_cast<size_t>(g)] = v;
  }
}

namespace {

// Waits until every device has joined the books (a checked launch on a mesh starts together).
void wait_for_all(CheckedLaunch& L, const LaunchSpec& spec, DeviceContext& dev) {
  const int64_t timeout_ms =
      spec.wait_timeout_ms > 0 ? spec.wait_timeout_ms : default_wait_timeout_ms(spec.where);
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::milliseconds(timeout_ms);
  for (;;) {
    int missing = -1;
    {
      std::lock_guard<std::mutex> lock(L.mu);
      for (int d = 0; d < L.devices && missing < 0; ++d) {
        if (L.entry[static_cast<size_t>(d * L.cores_per_device)].empty()) missing = d;
      }
    }
    if (missing < 0) return;
    if (dev.transport->failure()) {
      raise(ErrorKind::kCancelled, spec.entry, spec.where,
            "cancelled: a device of the mesh failed, and its error is the one the program reports");
    }
    if (dev.transport->done(missing) || std::chrono::steady_clock::now() >= deadline) {
      raise(ErrorKind::kInvalidArgument, spec.entry, spec.where,
            fmt::format("device {} never entered kernel '{}' (launch #{}) while device {} waited "
                        "for it; every device must launch the same kernels in the same order",
                        dev.mesh->name(missing), spec.name, L.seq, dev.mesh->name(dev.device)));
    }
    std::this_thread::sleep_for(std::chrono::microseconds(200));
  }
}

}  // namespace

std::string core_name(const CheckedLaunch& L, int core) {
  if (L.mesh == nullptr) return fmt::format("core {}", core);
  return fmt::format("device {} core {}", L.mesh->name(core / L.cores_per_device),
                     core % L.cores_per_device);
}

void wake_all(CheckedLaunch& L) noexcept {
  std::vector<CoreArena*> arenas;
  {
    std::lock_guard<std::mutex> lock(L.mu);
    arenas = L.arenas;
  }
  for (CoreArena* a : arenas) {
    if (a != nullptr) a->wait_queue().wake();
  }
}

std::unique_ptr<Engine> make_checked_device_engine(const LaunchSpec& spec,
                                                   const pltpu::InterpretParams& params,
                                                   int64_t vmem_limit, DeviceContext& dev,
                                                   const DeviceLaunch& launch) {
  Transport& t = *dev.transport;
  // Under a transport without load/store access (MPI ranks) each device keeps its own books.
  if (!t.direct()) return make_checked_rank_engine(spec, params, vmem_limit, dev, launch);
  auto program = std::static_pointer_cast<CheckedProgram>(
      t.program_books([] { return std::make_shared<CheckedProgram>(); }));
  auto L = std::static_pointer_cast<CheckedLaunch>(t.launch_books(
      launch.seq, [&] { return make_books(spec, params, vmem_limit, dev, launch.seq, program); }));
  if (L->spec->name != spec.name || L->cores_per_device != spec.num_cores) {
    raise(ErrorKind::kInvalidArgument, spec.entry, spec.where,
          fmt::format("device {}'s launch #{} is kernel '{}' on {} cores, but another device's is "
                      "'{}' on {}; every device must launch the same kernels in the same order",
                      dev.mesh->name(dev.device), launch.seq, spec.name, spec.num_cores,
                      L->spec->name, L->cores_per_device));
  }
  attach(*L, dev.device, launch);
  wait_for_all(*L, spec, dev);
  return make_engine_for(L, dev.device * spec.num_cores, dev.device);
}

void checked_device_core_begins(CheckedLaunch& L, int core) {
  if (!L.implicit_barrier) return;
  VC& v = L.vc[static_cast<size_t>(core)];
  for (const VC& e : L.entry) join(v, e);
}

void checked_device_core_finished(CheckedLaunch& L, int core) noexcept {
  std::lock_guard<std::mutex> program(L.program->mu);
  const int C = L.cores_per_device;
  join_sparse(L.program->clocks[{core / C, core % C}], L, L.vc[static_cast<size_t>(core)]);
  // Copies whose bytes never left this core's memory cannot move any more (it is gone).
  std::erase_if(L.remote, [&](const RemoteDma& r) { return r.from == core && !r.read; });
  L.remote_live.store(static_cast<int>(L.remote.size()), std::memory_order_relaxed);
}

// ---- remote operations --------------------------------------------------------------------------

void checked_remote_dma_start(CoreContext& ctx, const RemoteCopy& c) {
  CheckedCore& cc = core_of(ctx);
  CheckedLaunch& L = *cc.launch;
  Transport& t = *L.transport;
  const int core = c.target.core >= 0 ? c.target.core : ctx.core;
  RemoteDma r;
  {
    DeviceLaunch& to = t.access(ctx, c.target.device, kStart, c.where);
    struct Release {
      Transport& t;
      int d;
      ~Release() { t.release(d); }
    } guard{t, c.target.device};
    if (core >= to.spec->num_cores) {
      raise(ErrorKind::kOutOfBounds, kStart, c.where,
            fmt::format("core {} is outside device {}'s mesh of {} cores", core,
                        L.mesh->name(c.target.device), to.spec->num_cores));
    }
    r.dst = t.translate(ctx, to, c.target.device, core, c.dst, kStart, c.where);
    r.target_arena = &to.pool->arena(core);
    r.recv_sem = &r.target_arena->semaphores()[c.recv_slot];
  }
  r.from = cc.core;
  r.to = c.target.device * L.cores_per_device + core;
  r.src = c.src;
  r.src_runs = runs_of(r.src);
  r.dst_runs = runs_of(r.dst);
  r.send_sem = c.send_sem;
  r.send_slot = own_slot(ctx, c.send_sem, kStart, c.where);
  r.recv_slot = c.recv_slot;
  r.bytes = c.bytes;
  r.made = c.made;
  r.started = c.where;
  const bool core_memory = wait_for_memories(ctx, L, r);
  std::lock_guard<std::mutex> lock(L.mu);
  check_entered(ctx, L, r.from, r.to, "writes a remote copy into the memory", kStart, c.where);
  VC& mine = L.vc[static_cast<size_t>(cc.core)];
  ++mine[static_cast<size_t>(cc.core)];
  r.vc_start = mine;
  r.id = L.next_remote++;
  // Into another core's VMEM or SMEM: the target's accesses there that nothing orders before
  // this start(), and copies in flight into the same bytes, race with the landing
  // (checked_history.cc); later accesses meet the copy in flight (check_vs_remote).
  if (core_memory && keeps_history(*L.cores[static_cast<size_t>(r.to)])) {
    check_landing_vs_history(L, r.to, r.dst_runs, r.vc_start, c.where, core_name(L, r.from));
  }
  // eager: both halves now; random: the read half now or later, then the landing now or later.
  const pltpu::DmaExecutionMode mode = L.params.dma_execution_mode;
  const bool read = mode == pltpu::DmaExecutionMode::eager ||
                    (mode == pltpu::DmaExecutionMode::random && (cc.rng() & 1) != 0);
  const bool lands = read && (mode == pltpu::DmaExecutionMode::eager || (cc.rng() & 1) != 0);
  L.remote.push_back(std::move(r));
  L.remote_live.store(static_cast<int>(L.remote.size()), std::memory_order_relaxed);
  if (read) read_half(ctx, L, L.remote.back());
  if (lands) {
    land(ctx, L, L.remote.back());
  } else {
    L.remote.back().target_arena->wait_queue().wake();  // a receiver blocked on it looks again
  }
}

void checked_remote_dma_wait(CoreContext& ctx, SemaphoreCell* sem, int64_t slot, int64_t bytes,
                             const WaitSite& site, bool recv) {
  // Land pending copies on this semaphore, as late as possible: only while it is short (also
  // halves carried in from an earlier call).
  run_pending_copies(ctx, sem, bytes);
  block_until(ctx, *sem, slot, bytes, site);
  complete_copies(ctx, sem, bytes, recv ? RemoteKinds::kRecv : RemoteKinds::kSend, site.where);
}

bool run_pending_remote(CoreContext& ctx, SemaphoreCell& cell) {
  CheckedCore& cc = core_of(ctx);
  return land_one(ctx, *cc.launch, cc.core, &cell);
}

void checked_remote_signal(CoreContext& ctx, const DeviceTarget& target, int64_t slot, int64_t inc,
                           std::source_location where) {
  constexpr const char* op = "pl::semaphore_signal";
  CheckedCore& cc = core_of(ctx);
  CheckedLaunch& L = *cc.launch;
  const int core = target.core >= 0 ? target.core : ctx.core;
  if (slot >= first_barrier()) {
    {
      std::lock_guard<std::mutex> lock(L.mu);
      barrier_signalled(L, cc.core, target.device, core, slot, inc, where);
      ++L.vc[static_cast<size_t>(cc.core)][static_cast<size_t>(cc.core)];
    }
    L.transport->signal(ctx, target, slot, inc, op, where);
    return;
  }
  Transport& t = *L.transport;
  DeviceLaunch& to = t.access(ctx, target.device, op, where);
  struct Release {
    Transport& t;
    int d;
    ~Release() { t.release(d); }
  } guard{t, target.device};
  const int g = target.device * L.cores_per_device + core;
  CoreArena& arena = to.pool->arena(core);
  {
    std::lock_guard<std::mutex> lock(L.mu);
    check_entered(ctx, L, cc.core, g, "signals a semaphore", op, where);
    VC& mine = L.vc[static_cast<size_t>(cc.core)];
    VC& s = L.sem_vc[{g, slot}];
    if (s.empty()) s.assign(mine.size(), 0);
    join(s, mine);
    ++mine[static_cast<size_t>(cc.core)];
    arena.semaphores()[slot].fetch_add(inc);
  }
  arena.wait_queue().wake();
}

// ---- barrier semaphores
// --------------------------------------------------------------------------

void barrier_signalled(CheckedLaunch& L, int from, int device, int core, int64_t slot, int64_t inc,
                       SourceLocation where) {
  (void)inc;
  std::lock_guard<std::mutex> program(L.program->mu);
  CheckedProgram::Barrier& b = L.program->barriers[{device, core, slot}];
  const int g = device * L.cores_per_device + core;
  const VC& mine = L.vc[static_cast<size_t>(from)];
  if (b.waited && b.wait_seq < L.seq && mine[static_cast<size_t>(g)] < b.wait_epoch &&
      L.params.detect_races) {
    raise(ErrorKind::kRace, "pl::semaphore_signal", where,
          fmt::format("{} signals {}'s {} in kernel '{}' (launch #{}) with nothing ordering the "
                      "signal after that device's last wait on it, in kernel '{}' (launch #{}): "
                      "this device may have left that kernel before the target's wait, and its "
                      "signal can then satisfy the wait of the earlier kernel (a collective_id "
                      "reused by consecutive kernels). Add a second barrier on a run_scoped "
                      "semaphore after the barrier semaphore's, or use a distinct collective_id",
                      core_name(L, from), core_name(L, g), barrier_semaphore_name(slot),
                      L.spec->name, L.seq, b.kernel, b.wait_seq));
  }
  join_sparse(b.clock, L, mine);
}

void barrier_taken(CoreContext& ctx, int64_t slot, int64_t /*amount*/, SourceLocation /*where*/) {
  CheckedCore& cc = core_of(ctx);
  CheckedLaunch& L = *cc.launch;
  std::lock_guard<std::mutex> program(L.program->mu);
  CheckedProgram::Barrier& b = L.program->barriers[{cc.device, cc.local, slot}];
  join_dense(L, cc.core, b.clock);
  VC& mine = L.vc[static_cast<size_t>(cc.core)];
  b.waited = true;
  b.wait_epoch = ++mine[static_cast<size_t>(cc.core)];
  b.wait_seq = L.seq;
  b.kernel = L.spec->name;
}

// ---- checks
// --------------------------------------------------------------------------------------

bool remote_may_satisfy(const CheckedLaunch& L, int core, const SemaphoreCell* cell,
                        int64_t /*slot*/) {
  for (const RemoteDma& r : L.remote) {
    if ((r.recv_sem == cell && !r.executed) || (r.from == core && r.send_sem == cell && !r.read)) {
      return true;
    }
  }
  return false;
}

void check_vs_remote(CoreContext& ctx, const Runs& runs, bool write, const char* op,
                     SourceLocation where) {
  CheckedCore& cc = core_of(ctx);
  CheckedLaunch& L = *cc.launch;
  std::lock_guard<std::mutex> lock(L.mu);
  for (const RemoteDma& r : L.remote) {
    if (r.to == cc.core && !r.received) {
      if (const uintptr_t p = overlap(runs, r.dst_runs)) {
        raise(ErrorKind::kRace, op, where,
              fmt::format("{} {} while {} may still be writing it (this device has not taken it "
                          "with wait_recv); on a TPU the copy lands at any moment until then: "
                          "wait_recv before touching its destination",
                          write ? "writes" : "reads", describe(ctx, p), remote_text(L, r)));
      }
    }
    if (write && r.from == cc.core && !r.sent) {
      if (const uintptr_t p = overlap(runs, r.src_runs)) {
        raise(ErrorKind::kRace, op, where,
              fmt::format("writes {} while {} may still be reading it (started, not yet "
                          "wait_send()-ed); wait_send before overwriting its source",
                          describe(ctx, p), remote_text(L, r)));
      }
    }
  }
}

std::string remote_arrivals(const CheckedLaunch& L, const SemaphoreCell* cell) {
  std::vector<std::string> parts;
  int64_t bytes = 0;
  for (const RemoteDma& r : L.remote) {
    if (r.recv_sem != cell || !r.executed || r.received) continue;
    bytes += r.bytes;
    parts.push_back(fmt::format("{} bytes ({} {}) from {} started at {}", r.bytes,
                                dtype_name(r.src.dtype), r.src.shape.to_string(),
                                core_name(L, r.from), format_location(r.started)));
  }
  if (parts.empty()) return {};
  return fmt::format("; arrived and not taken: {}", fmt::join(parts, ", "));
}

void checked_remote_core_end(CoreContext& ctx) {
  CheckedCore& cc = core_of(ctx);
  CheckedLaunch& L = *cc.launch;
  std::lock_guard<std::mutex> lock(L.mu);
  for (const RemoteDma& r : L.remote) {
    if (r.from == cc.core && !r.sent) {
      raise(ErrorKind::kSemaphoreLeak, kStart, r.started,
            fmt::format("{} was never wait_send()-ed before the kernel ended; every started "
                        "remote copy needs a wait_send (or wait) on its descriptor, or its "
                        "send_sem is left non-zero",
                        remote_text(L, r)));
    }
    if (r.to == cc.core && !r.received) {
      raise(ErrorKind::kSemaphoreLeak, "remote_copy.wait_recv", ctx.kernel_where,
            fmt::format("{} ends the kernel without taking {} bytes sent to it with wait_recv: "
                        "{}{}; every copy that lands on a device needs a wait_recv of its size "
                        "there (on a TPU the bytes are left on recv_sem{})",
                        core_name(L, cc.core), r.bytes, remote_text(L, r),
                        r.executed ? " landed here" : " has not landed yet",
                        r.executed ? "" : ", or land after the kernel has ended"));
    }
  }
}

}  // namespace tessera::detail
