#include "runtime/core_pool.h"

#include <chrono>
#include <thread>

#include "runtime/spin.h"

namespace tessera::detail {

namespace {
// How long an idle thread spins before it sleeps. Long enough to cover the gap between
// back-to-back launches (benchmarks, a loop of small kernels), short enough not to burn a core
// when the program does something else.
constexpr auto kSpinFor = std::chrono::microseconds(200);

// Spins until pred() or the deadline; true if pred() became true.
template <class Pred>
bool spin_until(Pred pred) {
  const auto deadline = std::chrono::steady_clock::now() + kSpinFor;
  for (;;) {
    for (int i = 0; i < 64; ++i) {
      if (pred()) return true;
      cpu_relax();
    }
    if (std::chrono::steady_clock::now() > deadline) return pred();
  }
}
}  // namespace

CorePool& CorePool::instance() {
  // Never destroyed: worker threads may still be asleep at exit, and a kernel launched from a
  // static destructor must still find the pool. The pointer keeps the memory reachable.
  static CorePool* pool = new CorePool();
  return *pool;
}

void CorePool::ensure_cores(int n) {
  if (arenas_.empty()) arenas_.push_back(std::make_unique<CoreArena>());  // core 0: the caller
  if (slots_ == nullptr) {
    // Workers keep pointers to their slots, so the slots are allocated once, for the largest
    // mesh a launch may have (check_num_cores bounds n).
    slot_capacity_ = kMaxCores + 1;
    slots_ = std::make_unique<Slot[]>(static_cast<size_t>(slot_capacity_));
  }
  const int have = static_cast<int>(workers_.size()) + 1;
  if (n <= have) return;
  arenas_.resize(static_cast<size_t>(n));
  const int before = ready_.load();
  for (int core = have; core < n; ++core) {
    workers_.emplace_back([this, core] { worker_main(core, &slots_[static_cast<size_t>(core)]); });
  }
  // Wait until each new worker has built (and first-touched) its arena.
  const int want = before + (n - have);
  for (int r = ready_.load(); r < want; r = ready_.load()) futex_wait(ready_, r);
  const unsigned hw = std::thread::hardware_concurrency();
  spin_.store(hw == 0 || static_cast<unsigned>(workers_.size() + 1) <= hw,
              std::memory_order_relaxed);
}

void CorePool::worker_main(int core, Slot* slot) {
  // Read the slot before announcing readiness: the launcher may bump it as soon as this worker
  // counts as ready, and that bump must look new.
  uint32_t seen = slot->seq.load();
  arenas_[static_cast<size_t>(core)] = std::make_unique<CoreArena>();
  ready_.fetch_add(1);
  futex_wake(ready_, true);
  for (;;) {
    if (!spin_.load(std::memory_order_relaxed) ||
        !spin_until([&] { return slot->seq.load(std::memory_order_acquire) != seen; })) {
      // Dekker-style handshake with run(): both sides use seq_cst, so either the launcher sees
      // sleeping == 1 and notifies, or this thread's load below sees the new seq.
      slot->sleeping.store(1);
      while (slot->seq.load() == seen) futex_wait(slot->seq, seen);
      slot->sleeping.store(0);
    }
    seen = slot->seq.load();
    if (slot->taken.exchange(1) != 0) continue;  // the launcher ran this core's job itself
    slot->job(core);
    // seq_cst (hence also release): publishes this core's writes to the launcher, and pairs with
    // the launcher's seq_cst store of launcher_sleeping_ so that a sleeping launcher is woken.
    if (remaining_.fetch_sub(1) == 1) {
      if (launcher_sleeping_.load() != 0) futex_wake(remaining_, false);
    }
  }
}

void CorePool::run(int n, FunctionRef<void(int)> job) {
  std::lock_guard<std::mutex> lock(launch_mu_);
  run_locked(n, job);
}

void CorePool::run(int n, FunctionRef<void(int)> job, FunctionRef<void()> after) {
  std::lock_guard<std::mutex> lock(launch_mu_);
  run_locked(n, job);
  after();
}

void CorePool::run_locked(int n, FunctionRef<void(int)> job) {
  ensure_cores(n);
  if (n == 1) {
    job(0);
    return;
  }
  remaining_.store(n - 1);
  for (int core = 1; core < n; ++core) {
    Slot& s = slots_[static_cast<size_t>(core)];
    s.job = job;
    // Release: a worker that claims the job (taken 0 -> 1) sees `job`, even one that woke for
    // an earlier launch whose job the launcher ran itself and claims this launch's instead.
    s.taken.store(0, std::memory_order_release);
    s.seq.fetch_add(1);
    if (s.sleeping.load() != 0) futex_wake(s.seq, false);
  }
  job(0);
  // Cores whose workers have not started yet run here, one after another: a core's job starts
  // only once every core below it has finished or been started by its worker, so a job that
  // waits for another core's signal still finds that core running.
  for (int core = 1; core < n; ++core) {
    Slot& s = slots_[static_cast<size_t>(core)];
    if (s.taken.exchange(1) != 0) continue;
    job(core);
    remaining_.fetch_sub(1);
  }
  auto done = [&] { return remaining_.load(std::memory_order_acquire) == 0; };
  if (!spin_.load(std::memory_order_relaxed) || !spin_until(done)) {
    launcher_sleeping_.store(1);
    for (int r = remaining_.load(); r != 0; r = remaining_.load()) futex_wait(remaining_, r);
    launcher_sleeping_.store(0);
  }
}

}  // namespace tessera::detail
