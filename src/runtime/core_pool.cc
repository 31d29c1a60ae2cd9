#include "runtime/core_pool.h"

#include <sched.h>

#include <chrono>
#include <cstdint>
#include <thread>

#include "runtime/spin.h"

namespace tessera::detail {

namespace {
// How long an idle thread spins before it sleeps. Long enough to cover the gap between
// back-to-back launches (benchmarks, a loop of small kernels), short enough not to burn a core
// when the program does something else.
constexpr auto kSpinFor = std::chrono::microseconds(200);

// Core threads of every pool together (workers, plus each pool's launching thread): when they
// outnumber the hardware threads, nobody spins. Only a hint (relaxed): a stale value changes
// how long a thread spins, never correctness.
std::atomic<int> g_threads{0};

thread_local CorePool* t_pool = nullptr;

// At most how long a worker that woke after the launcher took its job stays awake for the rest
// of that launch (worker_main).
constexpr auto kLateSpinFor = std::chrono::milliseconds(5);

// Spins until pred() or the deadline (default: kSpinFor from now); true if pred() became true.
template <class Pred>
bool spin_until(Pred pred,
                std::chrono::steady_clock::time_point deadline = std::chrono::steady_clock::now() +
                                                                 kSpinFor) {
  for (;;) {
    for (int i = 0; i < 64; ++i) {
      if (pred()) return true;
      cpu_relax();
    }
    if (std::chrono::steady_clock::now() > deadline) return pred();
  }
}
}  // namespace

// Asks for the lines a worker reads first in its job (Slot::ahead), all at once.
void CorePool::prefetch_job(const Slot& slot) noexcept {
  for (const std::atomic<const void*>& a : slot.ahead) {
    if (const void* line = a.load(std::memory_order_relaxed); line != nullptr) {
      __builtin_prefetch(line);
    }
  }
}

// Moves the calling worker off its launcher's CPU when it finds itself there. Two threads of a
// launch sharing one CPU run it one after the other, and the scheduler may keep them so for
// hundreds of launches: each launch wakes the worker, and the wake-up may place it beside its
// waker again (measured on a 2-vCPU VM: a 512³ matmul at 2.0-2.6 ms per call for whole
// stretches with both threads on one CPU, 0.85-0.95 ms on two; docs/performance.md, "Two
// threads on one CPU"). Worker `core` goes to the (core - 1)-th of the other allowed CPUs,
// cyclically, so that workers moved together do not land on one CPU. Pinning for a moment moves
// the thread at once; its mask comes back right away, so the scheduler stays free to move it.
int spread_out(int launcher_cpu, int core, const cpu_set_t& allowed) noexcept {
  if (launcher_cpu < 0 || launcher_cpu >= CPU_SETSIZE || ::sched_getcpu() != launcher_cpu) {
    return -1;
  }
  const int others = CPU_COUNT(&allowed) - (CPU_ISSET(launcher_cpu, &allowed) ? 1 : 0);
  if (others <= 0) return -1;
  int skip = (core - 1) % others;
  for (int cpu = 0; cpu < CPU_SETSIZE; ++cpu) {
    if (cpu == launcher_cpu || !CPU_ISSET(cpu, &allowed) || skip-- > 0) continue;
    cpu_set_t one;
    CPU_ZERO(&one);
    CPU_SET(cpu, &one);
    if (::sched_setaffinity(0, sizeof one, &one) != 0) return -1;
    (void)::sched_setaffinity(0, sizeof allowed, &allowed);
    return cpu;
  }
  return -1;
}

CorePool& CorePool::instance() {
  // Never destroyed: worker threads may still be asleep at exit, and a kernel launched from a
  // static destructor must still find the pool. The pointer keeps the memory reachable.
  static CorePool* pool = new CorePool();
  return *pool;
}

CorePool& CorePool::for_device(int device) {
  // Devices' pools live as long as the process, like instance() (their threads sleep between
  // programs).
  static std::mutex mu;
  static std::vector<CorePool*>* pools = new std::vector<CorePool*>();
  if (device == 0) return instance();
  std::lock_guard<std::mutex> lock(mu);
  if (pools->size() < static_cast<size_t>(device)) pools->resize(static_cast<size_t>(device));
  CorePool*& p = (*pools)[static_cast<size_t>(device - 1)];
  if (p == nullptr) p = new CorePool();
  return *p;
}

CorePool& CorePool::current() noexcept { return t_pool != nullptr ? *t_pool : instance(); }
void CorePool::set_current(CorePool* pool) noexcept { t_pool = pool; }

bool CorePool::spinning() const noexcept {
  // Read once: glibc answers hardware_concurrency() by opening and parsing
  // /sys/devices/system/cpu/online, which costs microseconds on every launch and wait.
  static const unsigned hw = std::thread::hardware_concurrency();
  return hw == 0 || static_cast<unsigned>(g_threads.load(std::memory_order_relaxed)) <= hw;
}

void CorePool::ensure_cores(int n) {
  if (arenas_ == nullptr) {
    arenas_ = std::make_unique<std::unique_ptr<CoreArena>[]>(static_cast<size_t>(kMaxCores));
    arenas_[0] = std::make_unique<CoreArena>();  // core 0: the caller
    arenas_made_.store(1, std::memory_order_release);
    g_threads.fetch_add(1, std::memory_order_relaxed);
  }
  if (slots_ == nullptr) {
    // Workers keep pointers to their slots, so the slots are allocated once, for the largest
    // mesh a launch may have (check_num_cores bounds n).
    slot_capacity_ = kMaxCores + 1;
    slots_ = std::make_unique<Slot[]>(static_cast<size_t>(slot_capacity_));
  }
  const int have = static_cast<int>(workers_.size()) + 1;
  if (n <= have) return;
  const int before = ready_.load();
  for (int core = have; core < n; ++core) {
    workers_.emplace_back([this, core] { worker_main(core, &slots_[static_cast<size_t>(core)]); });
  }
  // Wait until each new worker has built (and first-touched) its arena.
  const int want = before + (n - have);
  for (int r = ready_.load(); r < want; r = ready_.load()) futex_wait(ready_, r);
  arenas_made_.store(n, std::memory_order_release);
  g_threads.fetch_add(n - have, std::memory_order_relaxed);
}

void CorePool::worker_main(int core, Slot* slot) {
  // Read the slot before announcing readiness: the launcher may bump it as soon as this worker
  // counts as ready, and that bump must look new.
  uint32_t seen = slot->seq.load();
#if defined(__linux__)
  slot->tid = ::gettid();
  if (::sched_getaffinity(0, sizeof slot->allowed, &slot->allowed) != 0) CPU_ZERO(&slot->allowed);
#endif
  t_pool = this;
  arenas_[static_cast<size_t>(core)] = std::make_unique<CoreArena>();
  ready_.fetch_add(1);
  futex_wake(ready_, true);
  for (;;) {
    if (!spinning() ||
        !spin_until([&] { return slot->seq.load(std::memory_order_acquire) != seen; })) {
      // Dekker-style handshake with run(): both sides use seq_cst, so either the launcher sees
      // sleeping == 1 and notifies, or this thread's load below sees the new seq.
      slot->sleeping.store(1);
      while (slot->seq.load() == seen) futex_wait(slot->seq, seen);
      slot->sleeping.store(0);
    }
    seen = slot->seq.load();
    prefetch_job(*slot);
#if defined(__linux__)
    // The launcher kept this thread off its CPU while waking it (narrow_before_wake): every
    // allowed CPU again. (Read first: the flag is rarely set, and a write would cost the
    // launcher a transfer of this line at its next launch.)
    if (slot->narrowed.load(std::memory_order_relaxed) && slot->narrowed.exchange(false)) {
      (void)::sched_setaffinity(0, sizeof slot->allowed, &slot->allowed);
    }
#endif
    if (slot->taken.exchange(1) != 0) {
      // The launcher ran this core's job itself: this thread woke late (a halted virtual CPU
      // can take a millisecond to wake). Spinning only kSpinFor from now, it would be asleep
      // again when the next launch comes, wake late again, and every launch would run on the
      // launcher alone (measured: stretches of a 512³ matmul at ~2x). So it stays awake until
      // this launch ends or the next one starts (kLateSpinFor at most), then spins as usual.
      move_off_launcher(core, *slot);
      if (spinning()) {
        const auto until = std::chrono::steady_clock::now() + kLateSpinFor;
        (void)spin_until(
            [&] {
              return !running_.load(std::memory_order_acquire) ||
                     slot->seq.load(std::memory_order_acquire) != seen;
            },
            until);
      }
      continue;
    }
    // The claim (seq_cst) ordered this read after the launcher's store of `posted`.
    const uint32_t launch = slot->posted.load(std::memory_order_relaxed);
    slot->job(core);
    // seq_cst (hence also release): publishes this core's writes to the launcher, and pairs with
    // the launcher's seq_cst store of launcher_sleeping_ so that a sleeping launcher is woken.
    slot->done.store(launch);
    if (launcher_sleeping_.load() != 0) {
      finished_.fetch_add(1);
      futex_wake(finished_, false);
    }
    move_off_launcher(core, *slot);
  }
}

// After a job, off the launch's critical path (sched_getcpu costs tens of nanoseconds): a worker
// that ran on its launcher's CPU moves off it for the next launch (spread_out).
void CorePool::move_off_launcher(int core, const Slot& slot) noexcept {
#if defined(__linux__)
  if (spinning()) {
    (void)spread_out(slot.launcher_cpu.load(std::memory_order_relaxed), core, slot.allowed);
  }
#else
  (void)core;
  (void)slot;
#endif
}

void CorePool::reserve(int n) {
  std::lock_guard<std::mutex> lock(launch_mu_);
  ensure_cores(n);
}

void CorePool::run(int n, FunctionRef<void(int)> job, const JobLines& lines) {
  std::lock_guard<std::mutex> lock(launch_mu_);
  run_locked(n, job, job, lines);
}

void CorePool::run(int n, FunctionRef<void(int)> job, FunctionRef<void()> after,
                   const JobLines& lines) {
  std::lock_guard<std::mutex> lock(launch_mu_);
  run_locked(n, job, job, lines);
  after();
}

void CorePool::run(int n, FunctionRef<void(int)> job, FunctionRef<void(int)> own_job,
                   FunctionRef<void()> after, const JobLines& lines) {
  std::lock_guard<std::mutex> lock(launch_mu_);
  run_locked(n, job, own_job, lines);
  after();
}

// A sleeping worker is woken where the scheduler judges cheapest, which may be beside its waker:
// there it waits until the launcher yields the CPU, and on a 2-vCPU VM that took 2-3 ms
// (measured: a 2048² add's first launch after a pause at 2.9-3.6 ms instead of 1.6-2.0, the
// worker woken on the launcher's CPU 1.9-2.8 ms after the launch; docs/performance.md, "Two
// threads on one CPU"). So the launcher takes its own CPU out of the worker's mask before the
// wake-up, and the worker puts its mask back as it starts. Not when the worker may run nowhere
// else, nor when the pool's threads outnumber the CPUs (launcher_cpu < 0 then).
void CorePool::narrow_before_wake(Slot& s, int launcher_cpu) noexcept {
#if defined(__linux__)
  if (launcher_cpu < 0 || launcher_cpu >= CPU_SETSIZE || !CPU_ISSET(launcher_cpu, &s.allowed) ||
      CPU_COUNT(&s.allowed) < 2) {
    return;
  }
  cpu_set_t others = s.allowed;
  CPU_CLR(launcher_cpu, &others);
  if (::sched_setaffinity(s.tid, sizeof others, &others) == 0) s.narrowed.store(true);
#else
  (void)s;
  (void)launcher_cpu;
#endif
}

void CorePool::run_locked(int n, FunctionRef<void(int)> job, FunctionRef<void(int)> own_job,
                          const JobLines& lines) {
  ensure_cores(n);
  if (n == 1) {
    own_job(0);
    return;
  }
  running_.store(true, std::memory_order_relaxed);
#if defined(__linux__)
  [[maybe_unused]] const int launcher_cpu = spinning() ? ::sched_getcpu() : -1;
#else
  const int launcher_cpu = -1;
#endif
  for (int core = 1; core < n; ++core) {
    Slot& s = slots_[static_cast<size_t>(core)];
    s.job = job;
    const auto* obj = static_cast<const char*>(job.object());
    s.ahead[0].store(obj, std::memory_order_relaxed);
    s.ahead[1].store(obj + 64, std::memory_order_relaxed);
    for (int i = 0; i < JobLines::kMax; ++i) {
      s.ahead[2 + i].store(lines.line[i], std::memory_order_relaxed);
    }
    s.posted.store(s.seq.load(std::memory_order_relaxed) + 1, std::memory_order_relaxed);
    // Release: a worker that claims the job (taken 0 -> 1) sees `job` and `posted`, even one
    // that woke for an earlier launch whose job the launcher ran itself and claims this launch's
    // instead.
    s.taken.store(0, std::memory_order_release);
    s.launcher_cpu.store(static_cast<int16_t>(launcher_cpu), std::memory_order_relaxed);
    if (s.sleeping.load() != 0) narrow_before_wake(s, launcher_cpu);
    s.seq.fetch_add(1);
    if (s.sleeping.load() != 0) futex_wake(s.seq, false);
  }
  own_job(0);
  // Cores whose workers have not started yet run here, one after another: a core's job starts
  // only once every core below it has finished or been started by its worker, so a job that
  // waits for another core's signal still finds that core running.
  for (int core = 1; core < n; ++core) {
    Slot& s = slots_[static_cast<size_t>(core)];
    if (s.taken.exchange(1) != 0) continue;
    own_job(core);
    s.done.store(s.posted.load(std::memory_order_relaxed), std::memory_order_relaxed);
  }
  // seq_cst loads: in the sleeping handshake they pair with the workers' stores of `done`.
  auto done = [&] {
    for (int core = 1; core < n; ++core) {
      const Slot& s = slots_[static_cast<size_t>(core)];
      if (s.done.load() != s.posted.load(std::memory_order_relaxed)) {
        return false;
      }
    }
    return true;
  };
  if (!spinning() || !spin_until(done)) {
    launcher_sleeping_.store(1);
    for (uint32_t f = finished_.load(); !done(); f = finished_.load()) futex_wait(finished_, f);
    launcher_sleeping_.store(0);
  }
  running_.store(false, std::memory_order_release);
}

}  // namespace tessera::detail
