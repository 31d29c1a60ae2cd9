// The core pool (src/runtime/core_pool.cc): every core of every launch runs exactly once, whether
// its worker starts it or the launching thread does (after finishing core 0, it runs any core
// whose worker has not started yet); cores that wait for a signal from core 0 or for each other
// still complete. Launches are back to back so that both ways occur (on a busy machine the
// launching thread takes over often; on a quiet one the workers start first). The launcher runs
// the cores it runs through a job reference of its own.
#include "runtime/core_pool.h"

#include <gtest/gtest.h>
#include <sched.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdint>
#include <thread>
#include <vector>

#include "tessera/tessera.h"

namespace {
using namespace tessera;

// An in-process device number no other test uses (CorePool::for_device makes its pool).
constexpr int kPoolOfThisTest = 97;

TEST(CorePool, EveryCoreOfEveryLaunchRunsOnce) {
  for (const int cores : {2, 3}) {
    std::vector<std::atomic<int>> runs(static_cast<size_t>(cores));
    auto k = pl::kernel(pl::out_type<int32_t>({cores}), pltpu::TensorCoreMesh("core", cores),
                        pl::scratch_types(pltpu::SMEM<int32_t>({1})))(
        [&](pltpu::HbmRef<int32_t> o, pltpu::SmemRef<int32_t> s) {
          const int i = lax::axis_index("core");
          runs[static_cast<size_t>(i)].fetch_add(1);
          s(0) = 10 * i + 1;
          pltpu::sync_copy(s, o.at(pl::ds(i, 1)));
        });
    constexpr int kLaunches = 300;
    for (int l = 0; l < kLaunches; ++l) {
      const Array<int32_t> o = k();
      for (int i = 0; i < cores; ++i) ASSERT_EQ(o[i], 10 * i + 1) << "launch " << l;
    }
    for (int i = 0; i < cores; ++i) EXPECT_EQ(runs[static_cast<size_t>(i)].load(), kLaunches);
  }
}

TEST(CorePool, CoresWaitingForCoreZeroOrEachOtherComplete) {
  // Core 0 signals core 1 and finishes; core 1 waits for it (it may run after core 0 on the
  // launching thread). Cores 1 and 2 then exchange signals, so they must run at the same time.
  auto k = pl::kernel(pl::out_type<int32_t>({3}), pltpu::TensorCoreMesh("core", 3),
                      pl::scratch_types(pltpu::SMEM<int32_t>({1}), pltpu::SemaphoreType::REGULAR))(
      [](pltpu::HbmRef<int32_t> o, pltpu::SmemRef<int32_t> s, pltpu::SemaphoreRef sem) {
        const int i = lax::axis_index("core");
        if (i == 0) {
          pl::semaphore_signal(sem, 1, pl::core_index(1));
        } else {
          if (i == 1) pl::semaphore_wait(sem);
          pl::semaphore_signal(sem, 1, pl::core_index(3 - i));  // 1 <-> 2
          pl::semaphore_wait(sem);
        }
        s(0) = i + 7;
        pltpu::sync_copy(s, o.at(pl::ds(i, 1)));
      });
  for (int l = 0; l < 200; ++l) {
    const Array<int32_t> o = k();
    for (int i = 0; i < 3; ++i) ASSERT_EQ(o[i], i + 7) << "launch " << l;
  }
}

// Busy threads on all CPUs but one make workers wake late, so that the launcher often runs a
// worker's job itself (on a 2-vCPU VM, 35-80% of the jobs), and a worker that woke for one
// launch may claim the next one's job: each launch still waits for exactly its own cores, each
// core of each launch runs once, and no launch waits for a job that already ran (it would hang
// until the test's timeout; a worker that reported the launch it woke for instead of the one it
// ran hung this test in 2 of 5 runs). A pool of its own (an in-process device's), so that other
// tests' launches do not mix in.
TEST(CorePool, LateWorkersAndStolenJobsCompleteEveryLaunchOnce) {
  detail::CorePool& pool = detail::CorePool::for_device(kPoolOfThisTest);
  constexpr int kCores = 3;
  constexpr int kLaunches = 20000;
  // Stopped and joined however the test leaves (a failed ASSERT returns early).
  struct Busy {
    std::atomic<bool> stop{false};
    std::vector<std::thread> threads;
    ~Busy() {
      stop.store(true);
      for (std::thread& t : threads) t.join();
    }
  } busy;
  const unsigned cpus = std::max(1u, std::thread::hardware_concurrency());
  for (unsigned t = 0; t + 1 < cpus; ++t) {
    busy.threads.emplace_back([&busy] {
      while (!busy.stop.load(std::memory_order_relaxed)) {
      }
    });
  }
  std::vector<int> runs(static_cast<size_t>(kLaunches) * kCores, 0);
  for (int l = 0; l < kLaunches; ++l) {
    // Each core writes only its own element, and the launch's end publishes them.
    auto job = [&](int core) {
      ++runs[static_cast<size_t>(l) * kCores + static_cast<size_t>(core)];
      // Core 0 works a few microseconds (varying), so that workers start some jobs in time.
      if (core == 0) {
        const auto until = std::chrono::steady_clock::now() + std::chrono::microseconds(l % 7);
        while (std::chrono::steady_clock::now() < until) {
        }
      }
    };
    pool.run(kCores, job);
    for (int c = 0; c < kCores; ++c) {
      ASSERT_EQ(runs[static_cast<size_t>(l) * kCores + static_cast<size_t>(c)], 1)
          << "launch " << l << ", core " << c;
    }
  }
}

// The launching thread runs its cores (core 0, and any whose worker started late) through the
// job reference meant for it, and the workers theirs through the other: a launch passes two copies
// of its job so that the launcher never reads the lines a worker has read (src/runtime/launch.cc).
// Every core still runs once, and `after` runs once, after all of them.
TEST(CorePool, TheLauncherRunsItsCoresThroughItsOwnJob) {
  detail::CorePool& pool = detail::CorePool::for_device(kPoolOfThisTest);
  constexpr int kCores = 3;
  constexpr int kLaunches = 5000;
  const std::thread::id launcher = std::this_thread::get_id();
  int by_launcher = 0;
  int by_workers = 0;
  for (int l = 0; l < kLaunches; ++l) {
    // Each core writes only its own elements, and the launch's end publishes them.
    int runs[kCores] = {};
    bool own[kCores] = {};
    bool on_launcher[kCores] = {};
    auto job = [&](int core) {
      ++runs[core];
      on_launcher[core] = std::this_thread::get_id() == launcher;
    };
    auto own_job = [&](int core) {
      job(core);
      own[core] = true;
      // Core 0 works a few microseconds (varying), so that workers start some jobs in time and
      // the launcher takes over others.
      if (core == 0) {
        const auto until = std::chrono::steady_clock::now() + std::chrono::microseconds(l % 5);
        while (std::chrono::steady_clock::now() < until) {
        }
      }
    };
    int afters = 0;
    bool all_ran_before_after = false;
    auto after = [&] {
      ++afters;
      all_ran_before_after = std::all_of(runs, runs + kCores, [](int r) { return r == 1; });
    };
    pool.run(kCores, job, own_job, after, detail::JobLines{});
    ASSERT_EQ(afters, 1) << "launch " << l;
    ASSERT_TRUE(all_ran_before_after) << "launch " << l;
    ASSERT_TRUE(own[0]) << "launch " << l;
    for (int c = 0; c < kCores; ++c) {
      ASSERT_EQ(runs[c], 1) << "launch " << l << ", core " << c;
      // A core ran on the launching thread exactly when it ran through the launcher's job.
      ASSERT_EQ(own[c], on_launcher[c]) << "launch " << l << ", core " << c;
      if (c > 0) (own[c] ? by_launcher : by_workers) += 1;
    }
  }
  // The workers started some cores: the test would not see their side otherwise.
  EXPECT_GT(by_workers, 0) << by_launcher << " cores of workers ran on the launcher";
}

}  // namespace

// A worker woken from sleep runs its core with the affinity mask it had before the launcher took
// the launcher's CPU out of it (narrow_before_wake, src/runtime/core_pool.cc): the narrowing
// lasts only for the wake-up. Each launch follows a pause long enough for the worker to sleep.
TEST(CorePool, AWokenWorkerRunsWithItsWholeMask) {
#if defined(__linux__)
  cpu_set_t allowed;
  CPU_ZERO(&allowed);
  ASSERT_EQ(::sched_getaffinity(0, sizeof allowed, &allowed), 0);
  std::atomic<int> narrowed{0};
  std::atomic<int> ran{0};
  // Core 0 waits for core 1, so the launching thread cannot run core 1 itself: the worker does.
  auto k = pl::kernel(pl::out_type<int32_t>({2}), pltpu::TensorCoreMesh("core", 2),
                      pl::scratch_types(pltpu::SemaphoreType::REGULAR))(
      [&](pltpu::HbmRef<int32_t>, pltpu::SemaphoreRef sem) {
        if (lax::axis_index("core") == 0) {
          pl::semaphore_wait(sem);
          return;
        }
        pl::semaphore_signal(sem, 1, pl::core_index(0));
        cpu_set_t mine;
        CPU_ZERO(&mine);
        if (::sched_getaffinity(0, sizeof mine, &mine) != 0 || !CPU_EQUAL(&mine, &allowed)) {
          narrowed.fetch_add(1);
        }
        ran.fetch_add(1);
      });
  for (int l = 0; l < 20; ++l) {
    std::this_thread::sleep_for(std::chrono::milliseconds(2));  // the worker sleeps after 200 µs
    (void)k();
  }
  EXPECT_EQ(ran.load(), 20);
  EXPECT_EQ(narrowed.load(), 0) << "a worker ran its core with a narrowed affinity mask";
#else
  GTEST_SKIP() << "Linux only";
#endif
}

// spread_out (src/runtime/core_pool.h): a worker on its launcher's CPU moves to another allowed
// CPU, the (core - 1)-th of them, and keeps its affinity mask; one on another CPU stays, and so
// does one allowed no other CPU. Needs two allowed CPUs (skipped otherwise).
TEST(CorePool, SpreadOutMovesAWorkerOffItsLaunchersCpu) {
#if defined(__linux__)
  cpu_set_t allowed;
  CPU_ZERO(&allowed);
  ASSERT_EQ(::sched_getaffinity(0, sizeof allowed, &allowed), 0);
  std::vector<int> cpus;
  for (int c = 0; c < CPU_SETSIZE; ++c) {
    if (CPU_ISSET(c, &allowed)) cpus.push_back(c);
  }
  if (cpus.size() < 2 || ::sched_getcpu() < 0) GTEST_SKIP() << "needs two allowed CPUs";
  if (::sched_setaffinity(0, sizeof allowed, &allowed) != 0) {
    GTEST_SKIP() << "this process may not set its threads' affinity";
  }
  const int other = ::sched_getcpu() == cpus[0] ? cpus[1] : cpus[0];
  EXPECT_EQ(detail::spread_out(other, 1, allowed), -1) << "moved although on another CPU";
  for (const int core : {1, 2, 3}) {
    for (int attempt = 0;; ++attempt) {
      const int launcher = ::sched_getcpu();
      const int moved = detail::spread_out(launcher, core, allowed);
      if (moved < 0 && attempt < 100) continue;  // the scheduler moved it in between
      ASSERT_GE(moved, 0) << "core " << core;
      // The (core - 1)-th allowed CPU other than the launcher's, cyclically.
      std::vector<int> others;
      for (const int c : cpus) {
        if (c != launcher) others.push_back(c);
      }
      EXPECT_EQ(moved, others[static_cast<size_t>(core - 1) % others.size()]) << "core " << core;
      break;
    }
  }
  cpu_set_t after;
  CPU_ZERO(&after);
  ASSERT_EQ(::sched_getaffinity(0, sizeof after, &after), 0);
  EXPECT_TRUE(CPU_EQUAL(&after, &allowed)) << "the affinity mask was not restored";
  cpu_set_t one;
  CPU_ZERO(&one);
  CPU_SET(::sched_getcpu(), &one);
  EXPECT_EQ(detail::spread_out(::sched_getcpu(), 1, one), -1) << "moved with no other CPU";
#else
  GTEST_SKIP() << "Linux only";
#endif
}
