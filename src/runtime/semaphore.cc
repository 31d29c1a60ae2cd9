// Semaphores: signal, wait, read and core_barrier as the kernel calls them, the one blocking wait
// both engines use (spin briefly where the engine allows, then sleep on the core's futex word with
// a deadline; woken by signals, DMA completions and cancellation), the byte counts of async
// copies, and the check at kernel exit. The engine (runtime/engine.h) decides how a signal adds
// and a wait takes; everything else is here.
//
// Every counter operation is seq_cst. Signals must release the signaller's writes and waits
// must acquire them (acq_rel would do for that), but the sleep protocol of SemaphoreWaitQueue
// also needs the counter update and the `sleepers` check to be ordered in one total order with
// the waiter's `sleepers` increment and counter check (a Dekker pattern), which only seq_cst
// gives. The cost is the same on x86 (every RMW is a full barrier there).
#include "tessera/semaphore.h"

#include <fmt/format.h>

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <cstdlib>
#include <limits>
#include <string>
#include <thread>
#include <vector>

#include "core/input_checks.h"
#include "core/messages.h"
#include "runtime/context.h"
#include "runtime/core_pool.h"
#include "runtime/devices.h"
#include "runtime/engine.h"
#include "runtime/events.h"
#include "runtime/spin.h"
#include "runtime/waits.h"

namespace tessera::detail {

namespace {

constexpr int64_t kDefaultWaitTimeoutMs = 10000;
// Deadlines beyond this are treated as this (about 34 years): steady_clock + the timeout must
// not overflow.
constexpr int64_t kMaxWaitTimeoutMs = int64_t{1} << 40;
constexpr int64_t kCell = sizeof(SemaphoreCell);

std::string element_of(std::string base, int64_t element, const Shape& shape) {
  if (shape.rank() == 0) return base;
  return fmt::format("{} element {}", base, unravel_index(element, shape));
}

[[noreturn]] void throw_cancelled(const CoreContext& ctx, int64_t slot, const WaitSite& site) {
  raise(ErrorKind::kCancelled, site.op, site.where,
        fmt::format("cancelled while waiting on {}: another core of this launch failed, and its "
                    "error is the one the launch reports",
                    name_semaphore(*ctx.launch->spec, &ctx, slot)));
}

[[noreturn]] void throw_timeout(const CoreContext& ctx, const SemaphoreCell& cell, int64_t slot,
                                int64_t amount, const WaitSite& site, int64_t timeout_ms) {
  std::string hint = site.hint;
  if (site.dma_src != nullptr && hint.empty()) {
    hint = fmt::format(
        "a DMA that never came: this descriptor's source is {} {} ({} bytes), and each .wait() "
        "needs started copies (.start() or pltpu::async_copy) of as many bytes on this semaphore",
        dtype_name(site.dma_src->dtype), site.dma_src->shape.to_string(), amount);
  }
  raise(ErrorKind::kTimeout, site.op, site.where,
        fmt::format("{} holds {}{} after {} ms, short of the {}{} this wait needs "
                    "(wait_timeout_ms={}); {}",
                    name_semaphore(*ctx.launch->spec, &ctx, slot), cell.load(), site.unit(),
                    timeout_ms, amount, site.unit(), timeout_ms, hint));
}

void check_amount(int64_t v, const char* what, const char* op, std::source_location where) {
  if (v < 0) {
    raise(ErrorKind::kInvalidArgument, op, where,
          fmt::format("{}={} is negative; signals add and waits subtract counts >= 0", what, v));
  }
  // A TPU semaphore holds a 32-bit count; the bound also keeps the 64-bit counters here from
  // ever wrapping, however many signals add up.
  if (v > std::numeric_limits<int32_t>::max()) {
    raise(ErrorKind::kInvalidArgument, op, where,
          fmt::format("{}={} is more than a semaphore holds (a TPU semaphore is a 32-bit count, "
                      "at most {}); signal and wait in smaller amounts",
                      what, v, std::numeric_limits<int32_t>::max()));
  }
}

}  // namespace

CoreContext& context_for(const char* op, std::source_location where) {
  CoreContext* ctx = current_context();
  if (ctx == nullptr) {
    raise(ErrorKind::kOutsideKernel, op, where,
          fmt::format("{} was called outside a kernel body; semaphores belong to the cores of a "
                      "running kernel, so call it inside the body passed to pl::kernel",
                      op));
  }
  return *ctx;
}

// The index of `cell` in the calling core's semaphore region. A view from another core (one
// captured by reference and shared) would make waits sleep on the wrong queue, so it is refused.
int64_t own_slot(const CoreContext& ctx, const SemaphoreCell* cell, const char* op,
                 std::source_location where) {
  const auto base = reinterpret_cast<uintptr_t>(ctx.arena->semaphores());
  const auto p = reinterpret_cast<uintptr_t>(cell);
  if (p < base || p >= base + static_cast<uintptr_t>(kSemaphoresPerCore * kCell)) {
    raise(ErrorKind::kInvalidArgument, op, where,
          fmt::format("this semaphore view does not belong to core {}; semaphores are per core: "
                      "use the semaphore ref this core's body received (to signal another "
                      "core's copy of it, pass pl::core_index(k))",
                      ctx.core));
  }
  return static_cast<int64_t>((p - base) / static_cast<uintptr_t>(kCell));
}

bool semaphore_outlives_launch(const LaunchSpec& spec, int64_t slot) noexcept {
  const int64_t byte = slot * kCell;
  for (size_t i = 0; i < spec.scratch.size(); ++i) {
    const ScratchRequest& r = spec.scratch[i];
    if (r.space == MemorySpace::SEMAPHORE && r.outlives_launch && byte >= spec.offsets[i] &&
        byte < spec.offsets[i] + r.bytes) {
      return true;
    }
  }
  return false;
}

std::string name_semaphore(const LaunchSpec& spec, const CoreContext* ctx, int64_t slot,
                           SemaphoreKind* kind) {
  const int64_t byte = slot * kCell;
  for (size_t i = 0; i < spec.scratch.size(); ++i) {
    const ScratchRequest& r = spec.scratch[i];
    if (r.space != MemorySpace::SEMAPHORE) continue;
    if (byte >= spec.offsets[i] && byte < spec.offsets[i] + r.bytes) {
      if (kind != nullptr) *kind = r.semaphore_kind;
      return element_of(
          fmt::format("scratch #{} {}", i, semaphore_type_name(r.semaphore_kind, r.shape)),
          (byte - spec.offsets[i]) / kCell, r.shape);
    }
  }
  if (ctx != nullptr) {
    for (auto it = ctx->scoped_semaphores.rbegin(); it != ctx->scoped_semaphores.rend(); ++it) {
      const int64_t bytes = it->shape.size() * kCell;
      if (byte >= it->offset && byte < it->offset + bytes) {
        if (kind != nullptr) *kind = it->kind;
        return element_of(
            fmt::format("run_scoped #{} {} (scope at {})", it->position,
                        semaphore_type_name(it->kind, it->shape), format_location(it->where)),
            (byte - it->offset) / kCell, it->shape);
      }
    }
  }
  if (std::string barrier = barrier_semaphore_name(slot); !barrier.empty()) {
    if (kind != nullptr) *kind = SemaphoreKind::BARRIER;
    return barrier;
  }
  return fmt::format("a run_scoped semaphore (slot {})", slot);
}

void block_until(CoreContext& ctx, SemaphoreCell& cell, int64_t slot, int64_t amount,
                 const WaitSite& site) {
  const SpanEvent wait_event(EventKind::kWait, site.op, -1, site.dma_src != nullptr);
  Engine& engine = *ctx.engine;
  if (engine.try_take(ctx, cell, slot, amount, site)) return;
  LaunchState& state = *ctx.launch;
  const auto start = std::chrono::steady_clock::now();
  if (engine.spin_before_sleep() && CorePool::current().spinning()) {
    const auto spin_end = start + kSpinBeforeSleep;
    // What another device sends may be this core's to take while it spins (MPI ranks on one
    // host); it is the transport's own thread's once the core sleeps.
    Transport* polled = ctx.device != nullptr ? ctx.device->transport : nullptr;
    if (polled != nullptr && !polled->polled()) polled = nullptr;
    do {
      for (int i = 0; i < 64; ++i) {
        if (polled != nullptr) polled->poll();
        if (engine.try_take(ctx, cell, slot, amount, site)) return;
        // Relaxed: only a hint here; the sleeping phase below re-reads it with seq_cst.
        if (state.cancelled.load(std::memory_order_relaxed)) throw_cancelled(ctx, slot, site);
        cpu_relax();
      }
    } while (std::chrono::steady_clock::now() < spin_end);
  }
  const int64_t timeout_ms = std::min(state.wait_timeout_ms, kMaxWaitTimeoutMs);
  const auto deadline = start + std::chrono::milliseconds(timeout_ms);
  SemaphoreWaitQueue& queue = ctx.arena->wait_queue();
  const Transport::Asleep asleep(ctx.device != nullptr ? ctx.device->transport : nullptr);
  queue.sleepers.fetch_add(1);
  struct Leave {
    SemaphoreWaitQueue& q;
    Engine& e;
    CoreContext& c;
    int64_t slot;
    bool taken = false;
    ~Leave() {
      q.sleepers.fetch_sub(1);
      e.unblocked(c, slot, taken);
    }
  } leave{queue, engine, ctx, slot};
  for (;;) {
    const uint32_t seen = queue.seq.load();
    if (engine.try_take(ctx, cell, slot, amount, site)) {
      leave.taken = true;
      return;
    }
    if (state.cancelled.load()) throw_cancelled(ctx, slot, site);
    engine.blocked(ctx, cell, slot, amount, site);  // the checked engine may raise kDeadlock here
    const auto now = std::chrono::steady_clock::now();
    if (now >= deadline) {
      if (engine.try_take(ctx, cell, slot, amount, site)) {
        leave.taken = true;
        return;
      }
      throw_timeout(ctx, cell, slot, amount, site, timeout_ms);
    }
    futex_wait_for(queue.seq, seen,
                   std::chrono::duration_cast<std::chrono::nanoseconds>(deadline - now).count());
  }
}

void SemaphoreWaitQueue::wake() noexcept {
  if (sleepers.load() != 0) {
    seq.fetch_add(1);
    futex_wake(seq, true);
  }
}

std::string unravel_index(int64_t flat, const Shape& shape) {
  std::vector<int64_t> idx(static_cast<size_t>(shape.rank()));
  for (int a = shape.rank() - 1; a >= 0; --a) {
    const int64_t extent = std::max<int64_t>(shape[a], 1);
    idx[static_cast<size_t>(a)] = flat % extent;
    flat /= extent;
  }
  if (idx.size() == 1) return fmt::format("({},)", idx[0]);
  return fmt::format("({})", fmt::join(idx, ", "));
}

int64_t default_wait_timeout_ms(std::source_location where) {
  static EnvCached<int64_t> cached;
  return cached.get([&] {
    return env_integer("TESSERA_WAIT_TIMEOUT_MS", 1, kMaxWaitTimeoutMs, "a timeout in milliseconds",
                       "kernel launch", where)
        .value_or(kDefaultWaitTimeoutMs);
  });
}

void check_single_semaphore(const Shape& shape, SemaphoreKind kind, const char* op,
                            std::source_location where) {
  if (shape.rank() != 0) {
    raise(ErrorKind::kShapeMismatch, op, where,
          fmt::format("needs a single semaphore (shape ()), but this {} semaphore view has shape "
                      "{}; pick one with .at(...)",
                      to_string(kind), shape.to_string()));
  }
}

void semaphore_signal(SemaphoreCell* cell, const Shape& shape, SemaphoreKind kind, int64_t inc,
                      std::optional<int> core_index, std::source_location where) {
  constexpr const char* op = "pl::semaphore_signal";
  CoreContext& ctx = context_for(op, where);
  check_single_semaphore(shape, kind, op, where);
  check_amount(inc, "inc", op, where);
  const int64_t slot = own_slot(ctx, cell, op, where);
  const int target = core_index.value_or(ctx.core);
  if (target < 0 || target >= ctx.num_cores) {
    raise(ErrorKind::kOutOfBounds, op, where,
          fmt::format("core_index={} is outside 0..{}: the mesh axis \"{}\" has {} core{}; signal "
                      "a core of this kernel's mesh",
                      target, ctx.num_cores - 1, ctx.axis_name != nullptr ? *ctx.axis_name : "",
                      ctx.num_cores, ctx.num_cores == 1 ? "" : "s"));
  }
  flush_copies(ctx);  // a signal publishes this core's earlier writes, a started copy's too
  settle_streams(ctx);
  ctx.engine->signal(ctx, target, slot, inc);
  (target == ctx.core ? *ctx.arena : core_arena(target)).wait_queue().wake();
}

void semaphore_wait(SemaphoreCell* cell, const Shape& shape, SemaphoreKind kind, int64_t value,
                    std::source_location where) {
  constexpr const char* op = "pl::semaphore_wait";
  CoreContext& ctx = context_for(op, where);
  check_single_semaphore(shape, kind, op, where);
  check_amount(value, "value", op, where);
  const int64_t slot = own_slot(ctx, cell, op, where);
  block_until(ctx, *cell, slot, value,
              WaitSite{op, where,
                       "a signal that never came: every pl::semaphore_wait needs matching "
                       "pl::semaphore_signal calls on this core's semaphore (from this core, or "
                       "from another with pl::core_index)"});
}

int32_t semaphore_read(const SemaphoreCell* cell, const Shape& shape, SemaphoreKind kind,
                       std::source_location where) {
  constexpr const char* op = "pl::semaphore_read";
  CoreContext& ctx = context_for(op, where);
  check_single_semaphore(shape, kind, op, where);
  own_slot(ctx, cell, op, where);
  flush_copies(ctx);
  const int64_t v = cell->load();
  return static_cast<int32_t>(std::clamp<int64_t>(v, std::numeric_limits<int32_t>::min(),
                                                  std::numeric_limits<int32_t>::max()));
}

void core_barrier(SemaphoreCell* cell, const Shape& shape, SemaphoreKind kind,
                  std::string_view axis_name, std::source_location where) {
  constexpr const char* op = "pltpu::core_barrier";
  CoreContext& ctx = context_for(op, where);
  if (ctx.axis_name == nullptr || axis_name != *ctx.axis_name) {
    raise(ErrorKind::kUnknownAxis, op, where,
          fmt::format("the mesh has no axis \"{}\"; its only axis is \"{}\" (the name given to "
                      "pltpu::TensorCoreMesh)",
                      axis_name, ctx.axis_name == nullptr ? "" : *ctx.axis_name));
  }
  check_single_semaphore(shape, kind, op, where);
  const int64_t slot = own_slot(ctx, cell, op, where);
  const int n = ctx.num_cores;
  if (n == 1) return;
  flush_copies(ctx);
  settle_streams(ctx);
  for (int k = 0; k < n; ++k) {
    if (k == ctx.core) continue;
    ctx.engine->signal(ctx, k, slot, 1);
    core_arena(k).wait_queue().wake();
  }
  block_until(ctx, *cell, slot, n - 1,
              WaitSite{op, where,
                       "a core that never reached the barrier: every core of the mesh must call "
                       "pltpu::core_barrier with this semaphore as often as this one"});
}

void add_dma_bytes(CoreContext& ctx, SemaphoreCell* cell, int64_t bytes) {
  cell->fetch_add(bytes);  // releases the copy's writes to the core that waits for them
  ctx.arena->wait_queue().wake();
}

std::string describe_semaphore(const CoreContext& ctx, const SemaphoreCell* cell) {
  const auto base = reinterpret_cast<uintptr_t>(ctx.arena->semaphores());
  const auto slot = static_cast<int64_t>((reinterpret_cast<uintptr_t>(cell) - base) /
                                         static_cast<uintptr_t>(kCell));
  return name_semaphore(*ctx.launch->spec, &ctx, slot);
}

void raise_semaphore_high(LaunchState& state, int64_t bytes) noexcept {
  int64_t cur = state.semaphore_high.load();
  while (cur < bytes && !state.semaphore_high.compare_exchange_weak(cur, bytes)) {
  }
}

void wake_semaphore_waiters(int num_cores) {
  for (int c = 0; c < num_cores; ++c) core_arena(c).wait_queue().wake();
}

void finish_semaphores(const LaunchSpec& spec, LaunchState& state) noexcept {
  const int64_t slots = state.semaphore_high.load() / kCell;
  if (slots == 0) return;
  // Every core has returned (the pool's completion count acquired their writes, including
  // signals they sent to other cores), so relaxed loads and stores see and leave final values.
  if (!state.first_error) {
    try {
      for (int c = 0; c < spec.num_cores && !state.first_error; ++c) {
        const SemaphoreCell* cells = core_arena(c).semaphores();
        for (int64_t s = 0; s < slots; ++s) {
          const int64_t v = cells[s].load(std::memory_order_relaxed);
          if (v == 0) continue;
          SemaphoreKind kind = SemaphoreKind::REGULAR;
          const std::string name = name_semaphore(spec, nullptr, s, &kind);
          state.first_error = std::make_exception_ptr(KernelError(
              ErrorKind::kSemaphoreLeak,
              fmt::format("tessera: {} at {} (kernel '{}', core {}): {} holds {}{} at "
                          "kernel exit; every semaphore must be 0 when the kernel ends: each "
                          "pl::semaphore_signal needs a matching pl::semaphore_wait and each "
                          "started async copy a .wait() (check loop bounds and which core "
                          "waits)",
                          spec.entry, format_location(spec.where), spec.name, c, name, v,
                          kind == SemaphoreKind::DMA ? " bytes" : ""),
              spec.where, c, {}, spec.name));
          break;
        }
      }
    } catch (...) {
      if (!state.first_error) state.first_error = std::current_exception();
    }
  }
  for (int c = 0; c < spec.num_cores; ++c) {
    SemaphoreCell* cells = core_arena(c).semaphores();
    for (int64_t s = 0; s < slots; ++s) cells[s].store(0, std::memory_order_relaxed);
  }
}

}  // namespace tessera::detail
