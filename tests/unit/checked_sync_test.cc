// Checked mode (docs/checked-mode.md), semaphores: copies never waited, semaphores
// non-zero at exit, and deadlocks (on one core, across cores, DMA waits with no copy, mismatched
// barriers). One buggy kernel per detector and variant, each with a clean twin that passes with
// the right output, under both DMA execution modes where copies are involved. Assertions name the
// kind, the line, the core and the grid step.
#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <string>
#include <vector>

#include "support/checked_support.h"
#include "tessera/tessera.h"

namespace {
using namespace tessera;
using namespace tessera::checked_testing;

// ---- semaphores -------------------------------------------------------------------------------

Array<float> never_waited(const Array<float>& x, Mode m, bool buggy) {
  return pl::kernel(pl::out_type<float>({128}), pltpu::TensorCoreMesh("core", 1),
                    pl::scratch_types(pltpu::VMEM<float>({128}), pltpu::SemaphoreType::DMA({2})),
                    checked(m))([buggy](pltpu::HbmRef<const float> x_hbm, pltpu::HbmRef<float> o,
                                        pltpu::VmemRef<float> v, DmaSem sems) {
    pltpu::sync_copy(x_hbm, v);
    pltpu::sync_copy(v, o);
    auto extra = pltpu::make_async_copy(x_hbm, v, sems.at(1));
    // clang-format off
    MARK_LINE; extra.start();
    // clang-format on
    if (!buggy) extra.wait();
  })(x);
}

TEST(CheckedSemaphore, CopyStartedAndNeverWaited) {
  const Array<float> x = ramp({128});
  for (Mode m : kModes) {
    const Array<float> o = never_waited(x, m, false);
    for (int64_t i = 0; i < 128; ++i) ASSERT_EQ(o[i], x[i]);
    expect_bug([&] { never_waited(x, m, true); },
               {ErrorKind::kSemaphoreLeak, kMarked, 0, {}, "never waited"});
  }
}

Array<float> signal_leak(bool buggy) {
  return pl::kernel(
      pl::out_type<float>({128}), pltpu::TensorCoreMesh("core", 1),
      pl::scratch_types(pltpu::VMEM<float>({128}), pltpu::SemaphoreType::REGULAR),
      checked())([buggy](pltpu::HbmRef<float> o, pltpu::VmemRef<float> v, pltpu::SemaphoreRef s) {
    v = jnp::full_like(v, 1.0f);
    pltpu::sync_copy(v, o);
    pl::semaphore_signal(s, 2);
    pl::semaphore_wait(s, buggy ? 1 : 2);
  })();
}

TEST(CheckedSemaphore, NonZeroAtExit) {
  EXPECT_EQ(signal_leak(false)[0], 1.0f);
  auto e = tessera::testing::catch_error<KernelError>([] { signal_leak(true); });
  ASSERT_TRUE(e);
  maybe_print(*e);
  EXPECT_EQ(e->kind(), ErrorKind::kSemaphoreLeak) << e->what();
  EXPECT_EQ(e->core(), 0);
  EXPECT_NE(std::string(e->what()).find("holds 1 at kernel exit"), std::string::npos) << e->what();
}

// A wait nobody will ever satisfy: reported at once as a deadlock, not after a timeout.
Array<float> lonely_wait(bool buggy) {
  return pl::kernel(pl::out_type<float>({128}), pltpu::TensorCoreMesh("core", 1),
                    pl::scratch_types(pltpu::VMEM<float>({128}), pltpu::SemaphoreType::REGULAR),
                    pltpu::CompilerParams{.wait_timeout_ms = 60000}, checked())(
      [buggy](pltpu::HbmRef<float> o, pltpu::VmemRef<float> v, pltpu::SemaphoreRef s) {
        if (!buggy) pl::semaphore_signal(s);
        // clang-format off
        MARK_LINE; pl::semaphore_wait(s);
        // clang-format on
        v = jnp::full_like(v, 1.0f);
        pltpu::sync_copy(v, o);
      })();
}

TEST(CheckedSemaphore, DeadlockOnOneCore) {
  EXPECT_EQ(lonely_wait(false)[0], 1.0f);
  expect_bug([] { lonely_wait(true); },
             {ErrorKind::kDeadlock, kMarked, 0, {}, "core 0 waits in pl::semaphore_wait"});
}

// Each core waits for the other before signalling it.
Array<float> crossed_waits(bool buggy) {
  return pl::kernel(pl::out_type<float>({256}), pltpu::TensorCoreMesh("core", 2),
                    pl::scratch_types(pltpu::VMEM<float>({128}), pltpu::SemaphoreType::REGULAR),
                    pltpu::CompilerParams{.wait_timeout_ms = 60000}, checked())(
      [buggy](pltpu::HbmRef<float> o, pltpu::VmemRef<float> v, pltpu::SemaphoreRef s) {
        const int c = lax::axis_index("core");
        if (!buggy) pl::semaphore_signal(s, 1, pl::core_index(1 - c));
        // clang-format off
        MARK_LINE; pl::semaphore_wait(s);
        // clang-format on
        if (buggy) pl::semaphore_signal(s, 1, pl::core_index(1 - c));
        v = jnp::full_like(v, static_cast<float>(c));
        pltpu::sync_copy(v, o.at(pl::ds(c * 128, 128)));
      })();
}

TEST(CheckedSemaphore, DeadlockAcrossCores) {
  const Array<float> o = crossed_waits(false);
  EXPECT_EQ(o[0], 0.0f);
  EXPECT_EQ(o[200], 1.0f);
  auto e = tessera::testing::catch_error<KernelError>([] { crossed_waits(true); });
  ASSERT_TRUE(e);
  maybe_print(*e);
  EXPECT_EQ(e->kind(), ErrorKind::kDeadlock) << e->what();
  EXPECT_EQ(static_cast<int>(e->where().line()), g_line.load());
  const std::string what = e->what();
  EXPECT_NE(what.find("core 0 waits in pl::semaphore_wait"), std::string::npos) << what;
  EXPECT_NE(what.find("core 1 waits in pl::semaphore_wait"), std::string::npos) << what;
}

// A DMA wait with no copy started on its semaphore.
Array<float> wait_without_start(const Array<float>& x, Mode m, bool buggy) {
  return pl::kernel(pl::out_type<float>({128}), pltpu::TensorCoreMesh("core", 1),
                    pl::scratch_types(pltpu::VMEM<float>({128}), pltpu::SemaphoreType::DMA),
                    pltpu::CompilerParams{.wait_timeout_ms = 60000},
                    checked(m))([buggy](pltpu::HbmRef<const float> x_hbm, pltpu::HbmRef<float> o,
                                        pltpu::VmemRef<float> v, DmaSem sem) {
    auto cp = pltpu::make_async_copy(x_hbm, v, sem);
    if (!buggy) cp.start();
    // clang-format off
        MARK_LINE; cp.wait();
    // clang-format on
    pltpu::sync_copy(v, o);
  })(x);
}

TEST(CheckedSemaphore, DmaWaitWithoutStartIsADeadlock) {
  const Array<float> x = ramp({128});
  for (Mode m : kModes) {
    EXPECT_EQ(wait_without_start(x, m, false)[7], 7.0f);
    expect_bug([&] { wait_without_start(x, m, true); },
               {ErrorKind::kDeadlock, kMarked, 0, {}, "async_copy.wait"});
  }
}

// Core 0 passes a barrier twice, core 1 once.
Array<float> barrier_mismatch(bool buggy) {
  return pl::kernel(pl::out_type<float>({256}), pltpu::TensorCoreMesh("core", 2),
                    pl::scratch_types(pltpu::VMEM<float>({128}), pltpu::SemaphoreType::REGULAR),
                    pltpu::CompilerParams{.wait_timeout_ms = 60000}, checked())(
      [buggy](pltpu::HbmRef<float> o, pltpu::VmemRef<float> v, pltpu::SemaphoreRef bar) {
        const int c = lax::axis_index("core");
        v = jnp::full_like(v, 1.0f);
        pltpu::sync_copy(v, o.at(pl::ds(c * 128, 128)));
        pltpu::core_barrier(bar, "core");
        if (buggy && c == 0) {
          // clang-format off
          MARK_LINE; pltpu::core_barrier(bar, "core");
          // clang-format on
        }
      })();
}

TEST(CheckedSemaphore, BarrierMismatchIsADeadlock) {
  EXPECT_EQ(barrier_mismatch(false)[255], 1.0f);
  expect_bug([] { barrier_mismatch(true); },
             {ErrorKind::kDeadlock, kMarked, 0, {}, "core 1 has finished"});
}

}  // namespace
