// Semaphores: scratch types and views, signal / wait / read (Pallas' semantics, with blocking
// waits), signals between cores, core_barrier, and every error: wait
// timeout, cancellation by a failing core, leak at exit, core_index out of range, misuse.
#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <optional>
#include <stdexcept>
#include <string>
#include <type_traits>
#include <vector>

#include "support/expect_error.h"
#include "tessera/tessera.h"

namespace {
using namespace tessera;

// Waits in error tests give up after 50 ms; no correct test comes near it.
constexpr pltpu::CompilerParams kShortTimeout{.wait_timeout_ms = 50};

bool contains(const std::string& s, const std::string& part) {
  return s.find(part) != std::string::npos;
}

static_assert(
    std::is_same_v<decltype(pltpu::SemaphoreType::DMA)::ref_type, pltpu::DmaSemaphoreRef>);
static_assert(
    std::is_same_v<decltype(pltpu::SemaphoreType::REGULAR({4}))::ref_type, pltpu::SemaphoreRef>);
static_assert(is_scratch_type_v<std::decay_t<decltype(pltpu::SemaphoreType::BARRIER)>>);
static_assert(is_scratch_type_v<decltype(pltpu::SemaphoreType::BARRIER({2}))>);
static_assert(is_semaphore_ref_v<pltpu::BarrierSemaphoreRef>);

TEST(Semaphore, ScratchTypesGiveViewsOfTheirShape) {
  int ran = 0;
  auto k = pl::kernel(
      pltpu::TensorCoreMesh("core", 1),
      pl::scratch_types(pltpu::VMEM<float>({8}), pltpu::SemaphoreType::DMA,
                        pltpu::SemaphoreType::REGULAR({4, 3}), pltpu::SemaphoreType::BARRIER({2})))(
      [&](pltpu::VmemRef<float>, pltpu::DmaSemaphoreRef d, pltpu::SemaphoreRef r,
          pltpu::BarrierSemaphoreRef b) {
        EXPECT_EQ(d.shape(), Shape{});
        EXPECT_EQ(r.shape(), Shape({4, 3}));
        EXPECT_EQ(r.at(1).shape(), Shape({3}));
        EXPECT_EQ(r.at(1).at(2).shape(), Shape{});
        EXPECT_EQ(r.at(1, 2).data(), r.at(1).at(2).data());
        EXPECT_EQ(r.at(pl::ds(1, 2)).shape(), Shape({2, 3}));
        EXPECT_EQ(r.at(pl::all, 2).shape(), Shape({4}));
        EXPECT_EQ(b.at(1).shape(), Shape{});
        EXPECT_EQ(pl::semaphore_read(d), 0);  // every semaphore starts at zero
        for (int i = 0; i < 4; ++i)
          for (int j = 0; j < 3; ++j) EXPECT_EQ(pl::semaphore_read(r.at(i, j)), 0);
        EXPECT_EQ(pl::semaphore_read(b.at(0)), 0);
        ++ran;
      });
  k();
  EXPECT_EQ(ran, 1);
}

// §6.4 item 31 (test_can_wait_on_semaphore): signal 1 / 2 / 3 times, wait as much, end at 0.
TEST(Semaphore, SignalsAndWaitsBalanceToZero) {
  auto k = pl::kernel(pl::out_type<int32_t>({4}), pltpu::TensorCoreMesh("core", 1),
                      pl::scratch_types(pltpu::SMEM<int32_t>({4}), pltpu::SemaphoreType::REGULAR))(
      [](pltpu::HbmRef<int32_t> o, pltpu::SmemRef<int32_t> s, pltpu::SemaphoreRef sem) {
        pl::semaphore_signal(sem);
        pl::semaphore_wait(sem);
        pl::semaphore_signal(sem, 2);
        s(0) = pl::semaphore_read(sem);
        pl::semaphore_wait(sem, 2);
        for (int i = 0; i < 3; ++i) pl::semaphore_signal(sem);
        s(1) = pl::semaphore_read(sem);
        pl::semaphore_wait(sem, 3);
        s(2) = pl::semaphore_read(sem);
        pl::semaphore_signal(sem, 5);
        pl::semaphore_wait(sem, 2);  // a wait takes only what it asks for
        s(3) = pl::semaphore_read(sem);
        pl::semaphore_wait(sem, 3);
        pltpu::sync_copy(s, o);
      });
  const Array<int32_t> o = k();
  EXPECT_EQ(o.to_vector(), (std::vector<int32_t>{2, 3, 0, 3}));
}

// §6.4 item 31 (..._array, ..._array_with_dynamic_index): arrays indexed with the core index.
TEST(Semaphore, ArraysIndexedByCore) {
  for (int cores : {1, 3, 4}) {
    auto k =
        pl::kernel(pl::out_type<int32_t>({4}), pltpu::TensorCoreMesh("core", cores),
                   pl::scratch_types(pltpu::SMEM<int32_t>({1}), pltpu::SemaphoreType::REGULAR({3}),
                                     pltpu::SemaphoreType::REGULAR({4, 3})))(
            [](pltpu::HbmRef<int32_t> o, pltpu::SmemRef<int32_t> s, pltpu::SemaphoreRef a,
               pltpu::SemaphoreRef b) {
              const int i = lax::axis_index("core");
              pl::semaphore_signal(a.at(i % 3));
              pl::semaphore_signal(b.at(i, 0), 2);
              pl::semaphore_signal(b.at(i).at(2), 3);
              s(0) = pl::semaphore_read(a.at(i % 3)) * 100 + pl::semaphore_read(b.at(i, 0)) * 10 +
                     pl::semaphore_read(b.at(i, 2));
              pl::semaphore_wait(a.at(i % 3));
              pl::semaphore_wait(b.at(i, 0), 2);
              pl::semaphore_wait(b.at(i, 2), 3);
              pltpu::sync_copy(s, o.at(pl::ds(i, 1)));
            });
    const Array<int32_t> o = k();
    for (int i = 0; i < cores; ++i) EXPECT_EQ(o[i], 123) << cores;
  }
}

// §6.4 item 32 (test_can_read_semaphore): after signal(sems.at(r, c), 3r + c), reads give
// arange(6).
TEST(Semaphore, ReadGivesTheSignalledValues) {
  auto k = pl::kernel(
      pl::out_type<int32_t>({2, 3}), pltpu::TensorCoreMesh("core", 1),
      pl::scratch_types(pltpu::SMEM<int32_t>({2, 3}), pltpu::SemaphoreType::REGULAR({2, 3})))(
      [](pltpu::HbmRef<int32_t> o, pltpu::SmemRef<int32_t> s, pltpu::SemaphoreRef sems) {
        for (int r = 0; r < 2; ++r)
          for (int c = 0; c < 3; ++c) pl::semaphore_signal(sems.at(r, c), 3 * r + c);
        for (int r = 0; r < 2; ++r)
          for (int c = 0; c < 3; ++c) s(r, c) = pl::semaphore_read(sems.at(r, c));
        for (int r = 0; r < 2; ++r)
          for (int c = 0; c < 3; ++c) pl::semaphore_wait(sems.at(r, c), 3 * r + c);
        pltpu::sync_copy(s, o);
      });
  const Array<int32_t> o = k();
  EXPECT_EQ(o.to_vector(), (std::vector<int32_t>{0, 1, 2, 3, 4, 5}));
}

// §6.4 item 38 (test_interpreter_semaphore_counting), with blocking waits: signals 1, 2, 3, 4
// read back as [1, 2, 3, 4]; waits of the same amounts leave [0, 0, 0, 0].
TEST(Semaphore, CountingOnAnArray) {
  auto k = pl::kernel(
      pl::out_type<int32_t>({2, 4}), pltpu::TensorCoreMesh("core", 1),
      pl::scratch_types(pltpu::SMEM<int32_t>({2, 4}), pltpu::SemaphoreType::REGULAR({4})))(
      [](pltpu::HbmRef<int32_t> o, pltpu::SmemRef<int32_t> s, pltpu::SemaphoreRef sems) {
        for (int i = 0; i < 4; ++i) pl::semaphore_signal(sems.at(i), i + 1);
        for (int i = 0; i < 4; ++i) s(0, i) = pl::semaphore_read(sems.at(i));
        for (int i = 0; i < 4; ++i) pl::semaphore_wait(sems.at(i), i + 1);
        for (int i = 0; i < 4; ++i) s(1, i) = pl::semaphore_read(sems.at(i));
        pltpu::sync_copy(s, o);
      });
  const Array<int32_t> o = k();
  EXPECT_EQ(o.to_vector(), (std::vector<int32_t>{1, 2, 3, 4, 0, 0, 0, 0}));
}

// Core 0 produces one block per round for every other core and signals it (pl::core_index);
// each consumer waits, reads the block from HBM, accumulates it and acknowledges on core 0,
// which waits for every acknowledgement before it overwrites the blocks in the next round.
TEST(Semaphore, ProducerConsumerAcrossCores) {
  constexpr int kRounds = 25;
  for (int cores : {2, 3, 4}) {
    // Row 0 of the output carries the blocks, row 1 the consumers' sums.
    auto k =
        pl::kernel(pl::out_type<float>({2, 4 * 128}), pltpu::TensorCoreMesh("core", cores),
                   pl::scratch_types(pltpu::VMEM<float>({128}), pltpu::VMEM<float>({128}),
                                     pltpu::SemaphoreType::REGULAR, pltpu::SemaphoreType::REGULAR))(
            [cores](pltpu::HbmRef<float> out, pltpu::VmemRef<float> v, pltpu::VmemRef<float> acc,
                    pltpu::SemaphoreRef ready, pltpu::SemaphoreRef ack) {
              const auto blocks = out.at(0);  // (512,) HBM
              const auto sums = out.at(1);    // (512,) HBM
              const int me = lax::axis_index("core");
              if (me == 0) {
                for (int r = 0; r < kRounds; ++r) {
                  for (int c = 1; c < cores; ++c) {
                    // (128,) VMEM -> block c of HBM, then tell core c.
                    v = jnp::arange<float>(128) + static_cast<float>(1000 * c + r);
                    pltpu::sync_copy(v, blocks.at(pl::ds(c * 128, 128)));
                    pl::semaphore_signal(ready, 1, pl::core_index(c));
                  }
                  pl::semaphore_wait(ack, cores - 1);
                }
              } else {
                acc = jnp::zeros_like(acc);
                for (int r = 0; r < kRounds; ++r) {
                  pl::semaphore_wait(ready);
                  pltpu::sync_copy(blocks.at(pl::ds(me * 128, 128)), v);
                  acc = acc + v;
                  pl::semaphore_signal(ack, pl::core_index(0));
                }
                pltpu::sync_copy(acc, sums.at(pl::ds(me * 128, 128)));
              }
            });
    const Array<float> out = k();
    for (int c = 1; c < cores; ++c) {
      for (int j = 0; j < 128; ++j) {
        // sum over r of (j + 1000c + r)
        const float want =
            static_cast<float>(kRounds * (j + 1000 * c) + kRounds * (kRounds - 1) / 2);
        ASSERT_EQ(out(1, c * 128 + j), want) << cores << " cores, core " << c << ", j " << j;
      }
    }
  }
}

// Every core writes its value, meets the others at a barrier, reads every value, and meets
// them again before the next round overwrites anything; for 2, 3 and 4 cores and both
// REGULAR and BARRIER semaphores.
template <class Sem, class SemType>
void barrier_rounds(int cores, SemType sem_type) {
  constexpr int kRounds = 20;
  std::atomic<int> bad{0};
  auto k =
      pl::kernel(pl::out_type<int32_t>({4}), pltpu::TensorCoreMesh("core", cores),
                 pl::scratch_types(pltpu::SMEM<int32_t>({1}), pltpu::SMEM<int32_t>({4}), sem_type))(
          [&](pltpu::HbmRef<int32_t> slots, pltpu::SmemRef<int32_t> mine,
              pltpu::SmemRef<int32_t> all, Sem sem) {
            const int me = lax::axis_index("core");
            for (int r = 0; r < kRounds; ++r) {
              mine(0) = 100 * r + me;
              pltpu::sync_copy(mine, slots.at(pl::ds(me, 1)));
              pltpu::core_barrier(sem, "core");
              pltpu::sync_copy(slots.at(pl::ds(0, cores)), all.at(pl::ds(0, cores)));
              for (int c = 0; c < cores; ++c) {
                if (all(c) != 100 * r + c) bad.fetch_add(1);
              }
              pltpu::core_barrier(sem, "core");
            }
          });
  const Array<int32_t> slots = k();
  EXPECT_EQ(bad.load(), 0) << cores << " cores";
  for (int c = 0; c < cores; ++c) EXPECT_EQ(slots[c], 100 * (kRounds - 1) + c);
}

TEST(Semaphore, CoreBarrierOnTwoThreeAndFourCores) {
  for (int cores : {2, 3, 4}) {
    barrier_rounds<pltpu::SemaphoreRef>(cores, pltpu::SemaphoreType::REGULAR);
    barrier_rounds<pltpu::BarrierSemaphoreRef>(cores, pltpu::SemaphoreType::BARRIER);
  }
}

TEST(Semaphore, CoreBarrierOnOneCoreDoesNothing) {
  auto k = pl::kernel(pl::out_type<int32_t>({1}), pltpu::TensorCoreMesh("core", 1),
                      pl::scratch_types(pltpu::SMEM<int32_t>({1}), pltpu::SemaphoreType::REGULAR))(
      [](pltpu::HbmRef<int32_t> o, pltpu::SmemRef<int32_t> s, pltpu::SemaphoreRef sem) {
        pltpu::core_barrier(sem, "core");
        s(0) = pl::semaphore_read(sem);
        pltpu::sync_copy(s, o);
      });
  EXPECT_EQ(k()[0], 0);
}

// ---- errors ------------------------------------------------------------------------------

TEST(SemaphoreErrors, OperationsNeedASingleSemaphore) {
  int line = 0;
  auto k = pl::kernel(
      pltpu::TensorCoreMesh("core", 1),
      pl::scratch_types(pltpu::SemaphoreType::REGULAR({4})))([&](pltpu::SemaphoreRef sems) {
    line = __LINE__ + 1;
    pl::semaphore_signal(sems);
  });
  auto err = tessera::testing::catch_error<KernelError>([&] { k(); });
  ASSERT_TRUE(err);
  EXPECT_EQ(err->kind(), ErrorKind::kShapeMismatch);
  EXPECT_EQ(static_cast<int>(err->where().line()), line);
  EXPECT_TRUE(contains(err->what(), "pl::semaphore_signal at semaphore_test.cc:")) << err->what();
  EXPECT_TRUE(contains(err->what(),
                       "needs a single semaphore (shape ()), but this REGULAR "
                       "semaphore view has shape (4,); pick one with .at(...)"))
      << err->what();

  auto k2 = pl::kernel(
      pltpu::TensorCoreMesh("core", 1),
      pl::scratch_types(pltpu::SemaphoreType::REGULAR({2, 2})))([&](pltpu::SemaphoreRef sems) {
    line = __LINE__ + 1;
    static_cast<void>(pl::semaphore_read(sems.at(1)));
  });
  auto err2 = tessera::testing::catch_error<KernelError>([&] { k2(); });
  ASSERT_TRUE(err2);
  EXPECT_EQ(err2->kind(), ErrorKind::kShapeMismatch);
  EXPECT_EQ(static_cast<int>(err2->where().line()), line);
  EXPECT_TRUE(contains(err2->what(), "has shape (2,)")) << err2->what();
}

TEST(SemaphoreErrors, AtOutOfRange) {
  int line = 0;
  auto k = pl::kernel(
      pltpu::TensorCoreMesh("core", 2),
      pl::scratch_types(pltpu::SemaphoreType::REGULAR({4, 3})))([&](pltpu::SemaphoreRef sems) {
    if (lax::axis_index("core") == 1) {
      line = __LINE__ + 1;
      pl::semaphore_signal(sems.at(1).at(3));
    }
  });
  auto err = tessera::testing::catch_error<KernelError>([&] { k(); });
  ASSERT_TRUE(err);
  EXPECT_EQ(err->kind(), ErrorKind::kOutOfBounds);
  EXPECT_EQ(err->core(), 1);
  EXPECT_EQ(static_cast<int>(err->where().line()), line);
  EXPECT_TRUE(contains(err->what(),
                       "at(3) on a SEMAPHORE ref of shape (3,): index 3 is outside "
                       "0..2 on axis 0"))
      << err->what();
}

TEST(SemaphoreErrors, WaitTimesOut) {
  int line = 0;
  auto k = pl::kernel(pltpu::TensorCoreMesh("core", 1), kShortTimeout, pl::name("stuck"),
                      pl::scratch_types(pltpu::SemaphoreType::REGULAR))([&](pltpu::SemaphoreRef s) {
    line = __LINE__ + 1;
    pl::semaphore_wait(s);
  });
  auto err = tessera::testing::catch_error<KernelError>([&] { k(); });
  ASSERT_TRUE(err);
  EXPECT_EQ(err->kind(), ErrorKind::kTimeout);
  EXPECT_EQ(err->core(), 0);
  EXPECT_EQ(static_cast<int>(err->where().line()), line);
  EXPECT_TRUE(contains(err->what(), "pl::semaphore_wait at semaphore_test.cc:")) << err->what();
  EXPECT_TRUE(contains(err->what(), "(kernel 'stuck', core 0)")) << err->what();
  EXPECT_TRUE(contains(err->what(),
                       "scratch #0 SemaphoreType.REGULAR holds 0 after 50 ms, short "
                       "of the 1 this wait needs (wait_timeout_ms=50)"))
      << err->what();
  EXPECT_TRUE(contains(err->what(), "a signal that never came")) << err->what();
}

TEST(SemaphoreErrors, WaitTimesOutNamingTheElementAndTheCore) {
  int line = 0;
  auto k = pl::kernel(
      pltpu::TensorCoreMesh("core", 2), kShortTimeout,
      pl::scratch_types(pltpu::SMEM<int32_t>({4}), pltpu::SemaphoreType::REGULAR({2, 4})))(
      [&](pltpu::SmemRef<int32_t>, pltpu::SemaphoreRef sems) {
        if (lax::axis_index("core") == 1) {
          pl::semaphore_signal(sems.at(1, 2));
          line = __LINE__ + 1;
          pl::semaphore_wait(sems.at(1, 2), 3);
        }
      });
  auto err = tessera::testing::catch_error<KernelError>([&] { k(); });
  ASSERT_TRUE(err);
  EXPECT_EQ(err->kind(), ErrorKind::kTimeout);
  EXPECT_EQ(err->core(), 1);
  EXPECT_EQ(static_cast<int>(err->where().line()), line);
  EXPECT_TRUE(contains(err->what(),
                       "scratch #1 SemaphoreType.REGULAR((2, 4)) element (1, 2) "
                       "holds 1 after 50 ms, short of the 3"))
      << err->what();
}

// Core 1 fails while core 0 waits on a semaphore nobody signals: core 0 is woken at once and the
// launch rethrows core 1's exception, long before the 20 s timeout.
TEST(SemaphoreErrors, AFailingCoreCancelsWaits) {
  for (int cores : {2, 4}) {
    auto k = pl::kernel(
        pltpu::TensorCoreMesh("core", cores), pltpu::CompilerParams{.wait_timeout_ms = 20000},
        pl::scratch_types(pltpu::SemaphoreType::REGULAR, pltpu::SemaphoreType::REGULAR))(
        [](pltpu::SemaphoreRef never, pltpu::SemaphoreRef go) {
          const int me = lax::axis_index("core");
          if (me == 1) {
            pl::semaphore_wait(go);  // core 0 is about to block
            throw std::runtime_error("core one failed");
          }
          if (me == 0) pl::semaphore_signal(go, 1, pl::core_index(1));
          pl::semaphore_wait(never);  // every core but 1 blocks here
        });
    const auto start = std::chrono::steady_clock::now();
    try {
      k();
      ADD_FAILURE() << "did not throw";
    } catch (const Error& e) {
      ADD_FAILURE() << "a Tessera error instead of core 1's exception: " << e.what();
    } catch (const std::runtime_error& e) {
      EXPECT_STREQ(e.what(), "core one failed");
    }
    const auto elapsed = std::chrono::steady_clock::now() - start;
    EXPECT_LT(elapsed, std::chrono::seconds(10)) << "the waits were not cancelled";
  }
  // The pool and the semaphores are fine afterwards.
  auto after =
      pl::kernel(pl::out_type<int32_t>({2}), pltpu::TensorCoreMesh("core", 2),
                 pl::scratch_types(pltpu::SMEM<int32_t>({1}), pltpu::SemaphoreType::REGULAR,
                                   pltpu::SemaphoreType::REGULAR))(
          [](pltpu::HbmRef<int32_t> o, pltpu::SmemRef<int32_t> s, pltpu::SemaphoreRef a,
             pltpu::SemaphoreRef b) {
            const int me = lax::axis_index("core");
            s(0) = pl::semaphore_read(a) + pl::semaphore_read(b);
            pltpu::sync_copy(s, o.at(pl::ds(me, 1)));
          });
  const Array<int32_t> o = after();
  EXPECT_EQ(o[0], 0);
  EXPECT_EQ(o[1], 0);
}

TEST(SemaphoreErrors, AKernelErrorOnOneCoreReleasesABarrier) {
  int line = 0;
  auto k =
      pl::kernel(pltpu::TensorCoreMesh("core", 3), pltpu::CompilerParams{.wait_timeout_ms = 20000},
                 pl::scratch_types(pltpu::VMEM<float>({8}), pltpu::SemaphoreType::REGULAR))(
          [&](pltpu::VmemRef<float> v, pltpu::SemaphoreRef sem) {
            if (lax::axis_index("core") == 2) {
              line = __LINE__ + 1;
              v.at(pl::ds(4, 8));  // out of bounds: core 2 never reaches the barrier
            }
            pltpu::core_barrier(sem, "core");
          });
  auto err = tessera::testing::catch_error<KernelError>([&] { k(); });
  ASSERT_TRUE(err);
  EXPECT_EQ(err->kind(), ErrorKind::kOutOfBounds);
  EXPECT_EQ(err->core(), 2);
  EXPECT_EQ(static_cast<int>(err->where().line()), line);
}

TEST(SemaphoreErrors, LeakAtKernelExit) {
  bool returned = false;
  auto b =
      pl::kernel(pl::out_type<float>({8}), pltpu::TensorCoreMesh("core", 2), pl::name("leaky"),
                 pl::scratch_types(pltpu::VMEM<float>({8}), pltpu::SemaphoreType::REGULAR({2})));
  const int line = __LINE__ + 1;
  auto k = b([](pltpu::HbmRef<float>, pltpu::VmemRef<float>, pltpu::SemaphoreRef sems) {
    if (lax::axis_index("core") == 1) pl::semaphore_signal(sems.at(1), 3);  // never waited
  });
  auto err = tessera::testing::catch_error<KernelError>([&] {
    auto out = k();
    returned = true;
    static_cast<void>(out);
  });
  EXPECT_FALSE(returned);
  ASSERT_TRUE(err);
  EXPECT_EQ(err->kind(), ErrorKind::kSemaphoreLeak);
  EXPECT_EQ(err->core(), 1);
  EXPECT_EQ(err->kernel_name(), "leaky");
  EXPECT_EQ(static_cast<int>(err->where().line()), line);
  EXPECT_TRUE(contains(err->what(), "pl::kernel at semaphore_test.cc:")) << err->what();
  EXPECT_TRUE(contains(err->what(),
                       "(kernel 'leaky', core 1): scratch #1 "
                       "SemaphoreType.REGULAR((2,)) element (1,) holds 3 at kernel "
                       "exit; every semaphore must be 0 when the kernel ends"))
      << err->what();

  // The next launch starts from zero again.
  auto check = pl::kernel(pl::out_type<int32_t>({2}), pltpu::TensorCoreMesh("core", 2),
                          pl::scratch_types(pltpu::VMEM<float>({8}), pltpu::SMEM<int32_t>({1}),
                                            pltpu::SemaphoreType::REGULAR({2})))(
      [](pltpu::HbmRef<int32_t> o, pltpu::VmemRef<float>, pltpu::SmemRef<int32_t> s,
         pltpu::SemaphoreRef sems) {
        const int me = lax::axis_index("core");
        s(0) = pl::semaphore_read(sems.at(0)) + pl::semaphore_read(sems.at(1));
        pltpu::sync_copy(s, o.at(pl::ds(me, 1)));
      });
  const Array<int32_t> o = check();
  EXPECT_EQ(o[0], 0);
  EXPECT_EQ(o[1], 0);
}

TEST(SemaphoreErrors, LeakOfARemoteSignalIsReportedOnTheTargetCore) {
  auto k = pl::kernel(
      pltpu::TensorCoreMesh("core", 3),
      pl::scratch_types(pltpu::SemaphoreType::BARRIER))([](pltpu::BarrierSemaphoreRef sem) {
    if (lax::axis_index("core") == 0) pl::semaphore_signal(sem, 1, pl::core_index(2));
  });
  auto err = tessera::testing::catch_error<KernelError>([&] { k(); });
  ASSERT_TRUE(err);
  EXPECT_EQ(err->kind(), ErrorKind::kSemaphoreLeak);
  EXPECT_EQ(err->core(), 2);
  EXPECT_TRUE(contains(err->what(), "scratch #0 SemaphoreType.BARRIER holds 1 at kernel exit"))
      << err->what();
}

TEST(SemaphoreErrors, CoreIndexOutOfRange) {
  for (int bad : {2, -1}) {
    int line = 0;
    auto k =
        pl::kernel(pltpu::TensorCoreMesh("core", 2),
                   pl::scratch_types(pltpu::SemaphoreType::REGULAR))([&](pltpu::SemaphoreRef sem) {
          if (lax::axis_index("core") == 0) {
            line = __LINE__ + 1;
            pl::semaphore_signal(sem, 1, pl::core_index(bad));
          }
        });
    auto err = tessera::testing::catch_error<KernelError>([&] { k(); });
    ASSERT_TRUE(err);
    EXPECT_EQ(err->kind(), ErrorKind::kOutOfBounds);
    EXPECT_EQ(err->core(), 0);
    EXPECT_EQ(static_cast<int>(err->where().line()), line);
    EXPECT_TRUE(contains(err->what(), "core_index=" + std::to_string(bad) +
                                          " is outside 0..1: the mesh axis \"core\" has 2 cores"))
        << err->what();
  }
}

TEST(SemaphoreErrors, NegativeCounts) {
  int line = 0;
  auto k = pl::kernel(pltpu::TensorCoreMesh("core", 1),
                      pl::scratch_types(pltpu::SemaphoreType::REGULAR))([&](pltpu::SemaphoreRef s) {
    line = __LINE__ + 1;
    pl::semaphore_signal(s, -2);
  });
  auto err = tessera::testing::catch_error<KernelError>([&] { k(); });
  ASSERT_TRUE(err);
  EXPECT_EQ(err->kind(), ErrorKind::kInvalidArgument);
  EXPECT_EQ(static_cast<int>(err->where().line()), line);
  EXPECT_TRUE(contains(err->what(), "inc=-2 is negative")) << err->what();

  auto k2 =
      pl::kernel(pltpu::TensorCoreMesh("core", 1),
                 pl::scratch_types(pltpu::SemaphoreType::REGULAR))([&](pltpu::SemaphoreRef s) {
        line = __LINE__ + 1;
        pl::semaphore_wait(s, -1);
      });
  auto err2 = tessera::testing::catch_error<KernelError>([&] { k2(); });
  ASSERT_TRUE(err2);
  EXPECT_EQ(err2->kind(), ErrorKind::kInvalidArgument);
  EXPECT_EQ(static_cast<int>(err2->where().line()), line);
  EXPECT_TRUE(contains(err2->what(), "value=-1 is negative")) << err2->what();
}

TEST(SemaphoreErrors, OutsideAKernel) {
  detail::SemaphoreCell cell{0};
  pltpu::SemaphoreRef sem(&cell, Shape{});
  const int line_1 = __LINE__ + 1;
  EXPECT_TESSERA_ERROR(pl::semaphore_signal(sem), UsageError, ErrorKind::kOutsideKernel,
                       "pl::semaphore_signal was called outside a kernel body", line_1);
  const int line_2 = __LINE__ + 1;
  EXPECT_TESSERA_ERROR(pl::semaphore_wait(sem), UsageError, ErrorKind::kOutsideKernel,
                       "pl::semaphore_wait was called outside a kernel body", line_2);
  const int line_3 = __LINE__ + 1;
  EXPECT_TESSERA_ERROR(static_cast<void>(pl::semaphore_read(sem)), UsageError,
                       ErrorKind::kOutsideKernel, "outside a kernel body", line_3);
  EXPECT_EQ(cell.load(), 0);
}

// A semaphore view captured from another core is refused: each core has its own semaphores.
TEST(SemaphoreErrors, AViewOfAnotherCoresSemaphore) {
  int line = 0;
  std::optional<pltpu::SemaphoreRef> shared;  // core 0's view, handed to core 1 by reference
  auto k =
      pl::kernel(pltpu::TensorCoreMesh("core", 2),
                 pl::scratch_types(pltpu::SemaphoreType::REGULAR))([&](pltpu::SemaphoreRef sem) {
        if (lax::axis_index("core") == 0) {
          shared = sem;
          pl::semaphore_signal(sem, 1, pl::core_index(1));  // publishes `shared` to core 1
        } else {
          pl::semaphore_wait(sem);
          line = __LINE__ + 1;
          static_cast<void>(pl::semaphore_read(*shared));
        }
      });
  auto err = tessera::testing::catch_error<KernelError>([&] { k(); });
  ASSERT_TRUE(err);
  EXPECT_EQ(err->kind(), ErrorKind::kInvalidArgument);
  EXPECT_EQ(err->core(), 1);
  EXPECT_EQ(static_cast<int>(err->where().line()), line);
  EXPECT_TRUE(contains(err->what(), "this semaphore view does not belong to core 1"))
      << err->what();
}

TEST(SemaphoreErrors, CoreBarrierNeedsTheMeshAxis) {
  int line = 0;  // one core, so one writer (the axis is checked before the one-core shortcut)
  auto k =
      pl::kernel(pltpu::TensorCoreMesh("core", 1),
                 pl::scratch_types(pltpu::SemaphoreType::REGULAR))([&](pltpu::SemaphoreRef sem) {
        line = __LINE__ + 1;
        pltpu::core_barrier(sem, "x");
      });
  auto err = tessera::testing::catch_error<KernelError>([&] { k(); });
  ASSERT_TRUE(err);
  EXPECT_EQ(err->kind(), ErrorKind::kUnknownAxis);
  EXPECT_EQ(static_cast<int>(err->where().line()), line);
  EXPECT_TRUE(contains(err->what(), "the mesh has no axis \"x\"")) << err->what();
}

TEST(SemaphoreErrors, BadWaitTimeout) {
  auto b =
      pl::kernel(pltpu::TensorCoreMesh("core", 1), pltpu::CompilerParams{.wait_timeout_ms = 0});
  const int line = __LINE__ + 1;
  EXPECT_TESSERA_ERROR(b([] {}), UsageError, ErrorKind::kInvalidArgument,
                       "wait_timeout_ms=0 must be at least 1", line);
}

TEST(SemaphoreErrors, TooManySemaphores) {
  std::atomic<int> ran{0};
  auto b = pl::kernel(pltpu::TensorCoreMesh("core", 1),
                      pl::scratch_types(pltpu::SemaphoreType::DMA({20000})));
  const int line = __LINE__ + 1;
  auto k = b([&](pltpu::DmaSemaphoreRef) { ran++; });
  EXPECT_TESSERA_ERROR(k(), UsageError, ErrorKind::kCapacityExceeded,
                       "#0 SemaphoreType.DMA((20000,)) = 160000 bytes", line);
  EXPECT_EQ(ran.load(), 0);
}

}  // namespace
