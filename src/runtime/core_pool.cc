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

// Core threads of every pool together (workers, plus each pool's launching thread): when they
// outnumber the hardware threads, nobody spins. Only a hint (relaxed): a stale value changes
// how long a thread spins, never correctness.
std::atomic<int> g_threads{0};

thread_local CorePool* t_pool = nullptr;

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
    if (slot->taken.exchange(1) != 0) continue;  // the launcher ran this core's job itself
    slot->job(core);
    // seq_cst (hence also release): publishes this core's writes to the launcher, and pairs with
    // the launcher's seq_cst store of launcher_sleeping_ so that a sleeping launcher is woken.
    if (remaining_.fetch_sub(1) == 1) {
      if (launcher_sleeping_.load() != 0) futex_wake(remaining_, false);
    }
  }
}

void CorePool::reserve(int n) {
  std::lock_guard<std::mutex> lock(launch_mu_);
  ensure_cores(n);
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
  if (!spinning() || !spin_until(done)) {
    launcher_sleeping_.store(1);
    for (int r = remaining_.load(); r != 0; r = remaining_.load()) futex_wait(remaining_, r);
    launcher_sleeping_.store(0);
  }
}

}  // namespace tessera::detail
