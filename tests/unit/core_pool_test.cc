// The core pool (src/runtime/core_pool.cc): every core of every launch runs exactly once, whether
// its worker starts it or the launching thread does (after finishing core 0, it runs any core
// whose worker has not started yet); cores that wait for a signal from core 0 or for each other
// still complete. Launches are back to back so that both ways occur (on a busy machine the
// launching thread takes over often; on a quiet one the workers start first).
#include <gtest/gtest.h>
#include <sched.h>

#include <atomic>
#include <cstdint>
#include <vector>

#include "runtime/core_pool.h"
#include "tessera/tessera.h"

namespace {
using namespace tessera;

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

}  // namespace

// spread_out (src/runtime/core_pool.h): a thread on a CPU another thread of its launch is on
// moves to an allowed CPU that none of them is on, and keeps its affinity mask; one on a CPU of
// its own stays. Needs two allowed CPUs (skipped otherwise).
TEST(CorePool, SpreadOutMovesAThreadOffATakenCpu) {
#if defined(__linux__)
  cpu_set_t allowed;
  CPU_ZERO(&allowed);
  ASSERT_EQ(::sched_getaffinity(0, sizeof allowed, &allowed), 0);
  int count = 0;
  for (int c = 0; c < 64; ++c) count += CPU_ISSET(c, &allowed) ? 1 : 0;
  if (count < 2 || ::sched_getcpu() < 0 || ::sched_getcpu() >= 64) {
    GTEST_SKIP() << "needs two allowed CPUs below 64";
  }
  // A CPU of its own: stays, and its CPU is added.
  for (int attempt = 0;; ++attempt) {
    std::atomic<uint64_t> cpus{0};
    const int before = ::sched_getcpu();
    ASSERT_EQ(detail::spread_out(cpus), -1);
    // The scheduler may have moved the thread between the two reads; then try again.
    if (cpus.load() == uint64_t{1} << before || attempt == 100) {
      EXPECT_EQ(cpus.load(), uint64_t{1} << before);
      break;
    }
  }
  // Its CPU taken by another thread of the launch: moves to another allowed CPU.
  for (int attempt = 0;; ++attempt) {
    const int before = ::sched_getcpu();
    std::atomic<uint64_t> cpus{uint64_t{1} << before};
    const int moved = detail::spread_out(cpus);
    if (moved < 0 && attempt < 100) continue;  // moved by the scheduler in between
    ASSERT_GE(moved, 0);
    EXPECT_NE(moved, before);
    EXPECT_TRUE(CPU_ISSET(moved, &allowed));
    EXPECT_EQ(cpus.load(), (uint64_t{1} << before) | (uint64_t{1} << moved));
    break;
  }
  cpu_set_t after;
  CPU_ZERO(&after);
  ASSERT_EQ(::sched_getaffinity(0, sizeof after, &after), 0);
  EXPECT_TRUE(CPU_EQUAL(&after, &allowed)) << "the affinity mask was not restored";
  // Every allowed CPU taken: stays.
  std::atomic<uint64_t> all{0};
  for (int c = 0; c < 64; ++c) {
    if (CPU_ISSET(c, &allowed)) all.fetch_or(uint64_t{1} << c);
  }
  EXPECT_EQ(detail::spread_out(all), -1);
#else
  GTEST_SKIP() << "Linux only";
#endif
}
