// The in-process transport: devices as thread groups of this process (transport_inprocess.h).
#include "runtime/transport_inprocess.h"

#include <fmt/format.h>

#include <algorithm>
#include <chrono>

#if defined(__linux__)
#include <sched.h>
#endif

#include "core/byte_span.h"
#include "core/messages.h"
#include "runtime/context.h"
#include "runtime/core_pool.h"
#include "runtime/devices.h"
#include "runtime/engine.h"
#include "runtime/events.h"
#include "runtime/spin.h"
#include "tessera/error.h"

namespace tessera::detail {

Transport::~Transport() = default;

void view_span(const RawRef& r, uintptr_t& lo, uintptr_t& hi) {
  const ByteSpan s = byte_span(r);
  lo = reinterpret_cast<uintptr_t>(s.first);
  hi = reinterpret_cast<uintptr_t>(s.last);
}

namespace {

[[noreturn]] void raise_cancelled(int failed_device, const MeshInfo& mesh, const char* op,
                                  std::source_location where) {
  raise(ErrorKind::kCancelled, op, where,
        fmt::format("cancelled: device {} of the mesh failed, and its error is the one the "
                    "program reports",
                    failed_device >= 0 ? mesh.name(failed_device) : std::string("?")));
}
}  // namespace

InProcessTransport::InProcessTransport(MeshInfo mesh)
    : devices_(std::make_unique<Device[]>(static_cast<size_t>(mesh.size))) {
  mesh_ = std::move(mesh);
}

InProcessTransport::~InProcessTransport() = default;

void InProcessTransport::bump() noexcept {
  event_.fetch_add(1);
  futex_wake(event_, true);
}

template <class Ready>
void InProcessTransport::wait_for(LaunchState* state, int64_t timeout_ms, Ready ready,
                                  const char* op, std::source_location where,
                                  FunctionRef<std::string()> what) {
  const auto start = std::chrono::steady_clock::now();
  const auto deadline = start + std::chrono::milliseconds(timeout_ms);
  // Spins a while first, as a blocked semaphore wait does (semaphore.cc): a device that enters
  // a launch or ends its body a few microseconds after this one then costs no futex round trip
  // (measured: an empty 2-device kernel's start barrier ~35 us a launch when both sleep).
  const auto spin_end = CorePool::current().spinning() ? start + kSpinBeforeSleep : start;
  for (;;) {
    const uint32_t seen = event_.load();
    if (ready()) return;
    if (failed_.load()) {
      std::lock_guard<std::mutex> lock(mu_);
      raise_cancelled(failed_device_, mesh_, op, where);
    }
    if (state != nullptr && state->cancelled.load()) {
      raise(ErrorKind::kCancelled, op, where,
            "cancelled: another core of this launch failed, and its error is the one the "
            "program reports");
    }
    const auto now = std::chrono::steady_clock::now();
    if (now >= deadline) {
      if (ready()) return;
      raise(ErrorKind::kTimeout, op, where,
            fmt::format("{} for {} ms (wait_timeout_ms); {}", what(), timeout_ms,
                        "every device must run the same kernels in the same order, and a kernel "
                        "with a collective_id must not write another device before that device "
                        "has signalled that it entered"));
    }
    if (now < spin_end) {
      for (int i = 0; i < 64; ++i) cpu_relax();
      continue;
    }
    // The event word changes at every entry, exit, failure and finish; wake-ups are periodic as
    // well (1 ms), so a missed one only delays.
    futex_wait_for(
        event_, seen,
        std::min<int64_t>(
            1000000, std::chrono::duration_cast<std::chrono::nanoseconds>(deadline - now).count()));
  }
}

// Two devices' threads on one CPU take turns there while another CPU idles, and every exchange
// between them waits for a switch (measured on a 2-vCPU VM: the ring all-reduce at 1 MiB on 2
// devices 0.3-0.9 ms a launch with both threads on one CPU, 0.10-0.15 ms on two). The scheduler
// puts them together when one wakes the other; a program's start spreads them (DeviceThreads,
// devices.cc), and each launch moves a device that finds itself on device 0's CPU, as a pool's
// worker moves off its launcher's (spread_out), while the process has no more threads than CPUs.
void InProcessTransport::keep_apart(int device) noexcept {
#if defined(__linux__)
  if (!CorePool::current().spinning()) return;
  const int cpu = ::sched_getcpu();
  Device& me = devices_[static_cast<size_t>(device)];
  if (device != 0 && cpu >= 0 && cpu == devices_[0].cpu.load(std::memory_order_relaxed)) {
    cpu_set_t allowed;
    if (::sched_getaffinity(0, sizeof allowed, &allowed) == 0) {
      const int moved = spread_out(cpu, device, allowed);
      me.cpu.store(moved >= 0 ? moved : cpu, std::memory_order_relaxed);
      return;
    }
  }
  me.cpu.store(cpu, std::memory_order_relaxed);
#else
  (void)device;
#endif
}

void InProcessTransport::enter(int device, DeviceLaunch& launch, bool barrier) {
  Device& me = devices_[static_cast<size_t>(device)];
  keep_apart(device);
  me.bodies.store(0);  // the previous launch's cores have all returned
  me.launch.store(&launch);
  me.entered.store(launch.seq);
  bump();
  // Published before failed_ is read, and fail() sets failed_ before it looks at the published
  // launches (all seq_cst): either fail() cancels this launch or this sees the failure.
  try {
    if (failed_.load()) {
      std::lock_guard<std::mutex> lock(mu_);
      raise_cancelled(failed_device_, mesh_, launch.spec->entry, launch.spec->where);
    }
    if (!barrier) return;
    int missing = -1;
    wait_for(
        launch.state, launch.state->wait_timeout_ms,
        [&] {
          for (int d = 0; d < mesh_.size; ++d) {
            const Device& other = devices_[static_cast<size_t>(d)];
            if (other.entered.load() >= launch.seq) continue;
            if (other.done.load()) {
              raise(ErrorKind::kInvalidArgument, launch.spec->entry, launch.spec->where,
                    fmt::format("device {} waits at the start of kernel '{}' (its launch #{}) for "
                                "device {}, whose program has finished after {} launch{}; every "
                                "device must launch the same kernels",
                                mesh_.name(device), launch.spec->name, launch.seq, mesh_.name(d),
                                other.entered.load(), other.entered.load() == 1 ? "" : "es"));
            }
            missing = d;
            return false;
          }
          return true;
        },
        launch.spec->entry, launch.spec->where,
        [&] {
          return fmt::format(
              "device {} waited at the start barrier of kernel '{}' (its launch "
              "#{}) for device {}, which has not entered it",
              mesh_.name(device), launch.spec->name, launch.seq, mesh_.name(missing));
        });
  } catch (...) {
    leave(device, launch);
    throw;
  }
}

void InProcessTransport::leave(int device, DeviceLaunch& /*launch*/) noexcept {
  Device& me = devices_[static_cast<size_t>(device)];
  me.launch.store(nullptr);
  bump();
  // Writers that found the launch published finish before its memory is released (see
  // access(): they count themselves before they look).
  while (me.writers.load() != 0) {
    const uint32_t seen = event_.load();
    if (me.writers.load() == 0) break;
    futex_wait_for(event_, seen, 1000000);
  }
}

DeviceLaunch& InProcessTransport::access(CoreContext& ctx, int target, const char* op,
                                         std::source_location where) {
  const DeviceLaunch& mine = *ctx.device->launch;
  const uint64_t seq = mine.seq;
  Device& t = devices_[static_cast<size_t>(target)];
  for (;;) {
    wait_for(
        ctx.launch, ctx.launch->wait_timeout_ms,
        [&] { return t.entered.load() >= seq || t.done.load(); }, op, where,
        [&] {
          return fmt::format(
              "device {} has not entered kernel '{}' (launch #{}; it is at launch "
              "#{}), so this remote operation cannot reach it",
              mesh_.name(target), mine.spec->name, seq, t.entered.load());
        });
    // Count this writer, then look (leave() unpublishes, then waits for writers: seq_cst on both
    // sides, so either the launch seen here stays alive until release() or it is seen gone).
    t.writers.fetch_add(1);
    DeviceLaunch* to = t.launch.load();
    if (to != nullptr && to->seq == seq) {
      if (to->spec->name != mine.spec->name) {
        release(target);
        raise(ErrorKind::kInvalidArgument, op, where,
              fmt::format("device {}'s launch #{} is kernel '{}', but this device's is '{}'; "
                          "every device must launch the same kernels in the same order",
                          mesh_.name(target), seq, to->spec->name, mine.spec->name));
      }
      return *to;
    }
    release(target);
    const uint64_t entered = t.entered.load();
    // Entered before launched is published, so a target at this launch or later whose launch is
    // not this one has left it.
    if (entered >= seq) {
      raise(ErrorKind::kInvalidArgument, op, where,
            fmt::format("device {} has already left kernel '{}' (launch #{}): nothing there "
                        "waits for this any more (a device must wait_recv / semaphore_wait for "
                        "everything sent to it before its kernel ends, or receive it on a "
                        "semaphore the pallas_call returns, which a later call waits on)",
                        mesh_.name(target), mine.spec->name, seq));
    }
    if (t.done.load() && entered < seq) {
      raise(
          ErrorKind::kInvalidArgument, op, where,
          fmt::format("device {}'s program has finished after {} launch{}; it never enters "
                      "kernel '{}' (launch #{})",
                      mesh_.name(target), entered, entered == 1 ? "" : "es", mine.spec->name, seq));
    }
  }
}

void InProcessTransport::bodies_done(CoreContext& ctx) {
  const DeviceLaunch& mine = *ctx.device->launch;
  const int device = ctx.device->device;
  Device& me = devices_[static_cast<size_t>(device)];
  if (me.bodies.fetch_add(1) + 1 == mine.spec->num_cores) {
    me.bodies_seq.store(mine.seq);
    bump();
  }
  int missing = -1;
  wait_for(
      ctx.launch, ctx.launch->wait_timeout_ms,
      [&] {
        for (int d = 0; d < mesh_.size; ++d) {
          const Device& other = devices_[static_cast<size_t>(d)];
          if (other.bodies_seq.load() >= mine.seq) continue;
          if (other.done.load()) {
            raise(ErrorKind::kInvalidArgument, mine.spec->entry, ctx.kernel_where,
                  fmt::format("device {} waits at the end of kernel '{}' (its launch #{}) for "
                              "device {}, whose program has finished after {} launch{}; every "
                              "device must launch the same kernels",
                              mesh_.name(device), mine.spec->name, mine.seq, mesh_.name(d),
                              other.entered.load(), other.entered.load() == 1 ? "" : "es"));
          }
          missing = d;
          return false;
        }
        return true;
      },
      mine.spec->entry, ctx.kernel_where,
      [&] {
        return fmt::format(
            "device {} waited at the end of kernel '{}' (launch #{}) for device {}, which has "
            "not finished its body there (a kernel whose semaphores outlive it, pallas_call "
            "semaphore operands, ends on every device together, so that all it sends arrives)",
            mesh_.name(device), mine.spec->name, mine.seq, mesh_.name(missing));
      });
}

void InProcessTransport::release(int target) noexcept {
  if (devices_[static_cast<size_t>(target)].writers.fetch_sub(1) == 1) bump();
}

RawRef InProcessTransport::translate(const CoreContext& ctx, const DeviceLaunch& to, int target,
                                     int core, const RawRef& dst, const char* op,
                                     std::source_location where) const {
  const DeviceLaunch& from = *ctx.device->launch;
  uintptr_t lo = 0;
  uintptr_t hi = 0;
  view_span(dst, lo, hi);
  RawRef out = dst;
  auto rebase = [&](uintptr_t base, std::byte* target_base) {
    out.data = target_base + (reinterpret_cast<uintptr_t>(dst.data) - base);
  };
  for (size_t k = 0; k < from.buffers.size(); ++k) {
    const LaunchBuffer& b = from.buffers[k];
    const auto base = reinterpret_cast<uintptr_t>(b.data);
    if (lo < base || hi > base + static_cast<uintptr_t>(b.bytes) || b.bytes == 0) continue;
    const LaunchBuffer& t = to.buffers[k];
    if (to.buffers.size() != from.buffers.size() || t.bytes != b.bytes) {
      raise(ErrorKind::kShapeMismatch, op, where,
            fmt::format("the destination is {} {} {}{} here but {}{} on device {}: remote copies "
                        "address the same buffer on every device, so every device's shards must "
                        "have the same shapes",
                        b.is_output ? "output" : "input", b.index, dtype_name(b.dtype),
                        b.shape.to_string(), dtype_name(t.dtype), t.shape.to_string(),
                        mesh_.name(target)));
    }
    rebase(base, static_cast<std::byte*>(const_cast<void*>(t.data)));
    return out;
  }
  CoreArena& arena = to.pool->arena(core);
  const auto vmem = reinterpret_cast<uintptr_t>(ctx.arena->vmem());
  const auto smem = reinterpret_cast<uintptr_t>(ctx.arena->smem());
  if (lo >= vmem && hi <= vmem + static_cast<uintptr_t>(max_vmem_limit_bytes())) {
    rebase(vmem, arena.vmem());
    return out;
  }
  if (lo >= smem && hi <= smem + static_cast<uintptr_t>(smem_capacity_bytes())) {
    rebase(smem, arena.smem());
    return out;
  }
  raise(ErrorKind::kInvalidArgument, op, where,
        "the destination is none of this kernel's outputs, scratch buffers or run_scoped "
        "buffers, so no other device has it (a remote copy writes the same buffer on the target "
        "device: an output, an aliased input, VMEM/SMEM scratch or a run_scoped buffer; inputs "
        "are read-only)");
}

SemaphoreCell& InProcessTransport::cell(const DeviceLaunch& to, int core, int64_t slot) const {
  return to.pool->arena(core).semaphores()[slot];
}

namespace {
void check_core(const CoreContext& ctx, const DeviceLaunch& to, int core, const MeshInfo& mesh,
                int target, const char* op, std::source_location where) {
  if (core < to.spec->num_cores) return;
  raise(ErrorKind::kOutOfBounds, op, where,
        fmt::format("core {} is outside device {}'s mesh of {} core{} (axis \"{}\")", core,
                    mesh.name(target), to.spec->num_cores, to.spec->num_cores == 1 ? "" : "s",
                    ctx.axis_name != nullptr ? *ctx.axis_name : ""));
}
}  // namespace

void InProcessTransport::put(CoreContext& ctx, const RemoteCopy& copy) {
  constexpr const char* op = "remote_copy.start";
  DeviceLaunch& to = access(ctx, copy.target.device, op, copy.where);
  struct Release {
    InProcessTransport* t;
    int target;
    ~Release() { t->release(target); }
  } guard{this, copy.target.device};
  const int core = copy.target.core >= 0 ? copy.target.core : ctx.core;
  check_core(ctx, to, core, mesh_, copy.target.device, op, copy.where);
  const RawRef dst = translate(ctx, to, copy.target.device, core, copy.dst, op, copy.where);
  {
    const CopyEvent event(copy.src, dst, op);
    native_engine().copy(nullptr, copy.src, dst, op, copy.where);
  }
  // seq_cst: releases the copied bytes to the core whose wait takes them.
  cell(to, core, copy.recv_slot).fetch_add(copy.bytes);
  to.pool->arena(core).wait_queue().wake();
}

void InProcessTransport::signal(CoreContext& ctx, DeviceTarget target, int64_t slot, int64_t inc,
                                const char* op, std::source_location where,
                                const CheckNote* /*note*/) {
  const int core = target.core >= 0 ? target.core : ctx.core;
  if (slot >= first_barrier_slot()) {
    // Barrier semaphores outlive kernels: the target need not have entered this launch. Its
    // core's arena exists once that device has run a kernel of as many cores.
    CorePool& pool = CorePool::for_device(target.device);
    CoreArena* arena = nullptr;
    wait_for(
        ctx.launch, ctx.launch->wait_timeout_ms,
        [&] { return (arena = pool.arena_if_made(core)) != nullptr; }, op, where,
        [&] {
          return fmt::format("device {} has not started core {} yet", mesh_.name(target.device),
                             core);
        });
    arena->semaphores()[slot].fetch_add(inc);
    arena->wait_queue().wake();
    return;
  }
  DeviceLaunch& to = access(ctx, target.device, op, where);
  struct Release {
    InProcessTransport* t;
    int target;
    ~Release() { t->release(target); }
  } guard{this, target.device};
  check_core(ctx, to, core, mesh_, target.device, op, where);
  cell(to, core, slot).fetch_add(inc);
  to.pool->arena(core).wait_queue().wake();
}

void InProcessTransport::fail(int device, std::exception_ptr error) noexcept {
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (!failure_) {
      failure_ = std::move(error);
      failed_device_ = device;
    }
  }
  failed_.store(true);
  // Cancel every published launch: its waits raise kCancelled when they wake.
  for (int d = 0; d < mesh_.size; ++d) {
    Device& t = devices_[static_cast<size_t>(d)];
    t.writers.fetch_add(1);
    if (DeviceLaunch* l = t.launch.load(); l != nullptr) {
      l->state->cancelled.store(true);
      for (int c = 0; c < l->spec->num_cores; ++c) l->pool->arena(c).wait_queue().wake();
    }
    release(d);
  }
  bump();
}

void InProcessTransport::finished(int device) noexcept {
  devices_[static_cast<size_t>(device)].done.store(true);
  bump();
}

std::exception_ptr InProcessTransport::failure() const {
  std::lock_guard<std::mutex> lock(mu_);
  return failure_;
}

uint64_t InProcessTransport::entered(int device) const {
  return devices_[static_cast<size_t>(device)].entered.load();
}

bool InProcessTransport::done(int device) const {
  return devices_[static_cast<size_t>(device)].done.load();
}

// ---- the transport's defaults and shared books
// ---------------------------------------------------

DeviceLaunch& Transport::access(CoreContext& /*ctx*/, int /*target*/, const char* op,
                                std::source_location where) {
  raise(ErrorKind::kInternal, op, where, "this transport has no load/store access to devices");
}
void Transport::release(int /*target*/) noexcept {}

uint64_t Transport::carried(SourceLocation started, std::string what) {
  std::lock_guard<std::mutex> lock(books_mu_);
  carried_.emplace(next_carried_, Carried{started, std::move(what)});
  return next_carried_++;
}
void Transport::waited(uint64_t id) noexcept {
  std::lock_guard<std::mutex> lock(books_mu_);
  carried_.erase(id);
}
std::vector<Transport::Carried> Transport::never_waited() {
  std::lock_guard<std::mutex> lock(books_mu_);
  std::vector<Carried> left;
  for (auto& [id, c] : carried_) left.push_back(std::move(c));
  carried_.clear();
  return left;
}
RawRef Transport::translate(const CoreContext& /*ctx*/, const DeviceLaunch& /*to*/, int /*target*/,
                            int /*core*/, const RawRef& dst, const char* /*op*/,
                            std::source_location /*where*/) const {
  return dst;
}

ArrivalObserver::~ArrivalObserver() = default;

void Transport::observe(std::shared_ptr<ArrivalObserver> observer) {
  std::lock_guard<std::mutex> lock(books_mu_);
  observer_ = std::move(observer);
}
std::shared_ptr<ArrivalObserver> Transport::observer() {
  std::lock_guard<std::mutex> lock(books_mu_);
  return observer_;
}
void Transport::stuck(uint64_t /*version*/, std::string /*waits*/) noexcept {}

std::shared_ptr<void> Transport::program_books(FunctionRef<std::shared_ptr<void>()> make) {
  std::lock_guard<std::mutex> lock(books_mu_);
  if (!program_books_) program_books_ = make();
  return program_books_;
}

std::shared_ptr<void> Transport::launch_books(uint64_t seq,
                                              FunctionRef<std::shared_ptr<void>()> make) {
  std::lock_guard<std::mutex> lock(books_mu_);
  auto it = launch_books_.find(seq);
  if (it == launch_books_.end()) it = launch_books_.emplace(seq, std::make_pair(make(), 0)).first;
  std::shared_ptr<void> books = it->second.first;
  if (++it->second.second == mesh_.size) launch_books_.erase(it);
  return books;
}

}  // namespace tessera::detail
