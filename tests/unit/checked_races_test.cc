// Checked mode (docs/checked-mode.md), races: compute against an in-flight DMA, copies
// against each other, cores against each other on HBM; and the execution order (randomised
// PARALLEL axes, DMA execution modes). One buggy kernel per detector and variant, each with a
// clean twin that passes with the right output (Pallas' race-test pattern), under both DMA
// execution modes where copies are involved. Assertions name the kind, the line, the core and
// the grid step.
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

// ---- races: compute vs an in-flight DMA -------------------------------------------------------

// Pallas' test_race_detection: dma.start(); read the destination; dma.wait().
Array<float> read_during_copy(const Array<float>& x, Mode m, bool buggy) {
  return pl::kernel(
      pl::out_type<float>({128}), pltpu::TensorCoreMesh("core", 1),
      pl::scratch_types(pltpu::VMEM<float>({128}), pltpu::VMEM<float>({128}),
                        pltpu::SemaphoreType::DMA),
      checked(m))([buggy](pltpu::HbmRef<const float> x_hbm, pltpu::HbmRef<float> o,
                          pltpu::VmemRef<float> t, pltpu::VmemRef<float> ov, DmaSem sem) {
    auto cp = pltpu::make_async_copy(x_hbm, t, sem);
    cp.start();
    if (buggy) {
      // clang-format off
      MARK_LINE; float first = t(0);
      // clang-format on
      static_cast<void>(first);
    }
    cp.wait();
    ov = t + 1.0f;
    pltpu::sync_copy(ov, o);
  })(x);
}

TEST(CheckedRace, ReadOfInFlightDmaDestination) {
  const Array<float> x = ramp({128});
  for (Mode m : kModes) {
    const Array<float> o = read_during_copy(x, m, false);
    for (int64_t i = 0; i < 128; ++i) ASSERT_EQ(o[i], x[i] + 1.0f);
    expect_bug([&] { read_during_copy(x, m, true); },
               {ErrorKind::kRace, kMarked, 0, {}, "may still be writing it"});
    expect_bug([&] { read_during_copy(x, m, true); },
               {ErrorKind::kRace, kMarked, 0, {}, "VMEM scratch #0"});
  }
}

// The same race through a vector assignment (the whole destination read by compute).
TEST(CheckedRace, VectorReadOfInFlightDmaDestination) {
  const Array<float> x = ramp({8, 128});
  for (Mode m : kModes) {
    for (bool buggy : {false, true}) {
      auto run = [&] {
        return pl::kernel(
            pl::out_type<float>({8, 128}), pltpu::TensorCoreMesh("core", 1),
            pl::scratch_types(pltpu::VMEM<float>({8, 128}), pltpu::VMEM<float>({8, 128}),
                              pltpu::SemaphoreType::DMA),
            checked(m), pl::name("vec_race"))(
            [buggy](pltpu::HbmRef<const float> x_hbm, pltpu::HbmRef<float> o,
                    pltpu::VmemRef<float> t, pltpu::VmemRef<float> ov, DmaSem sem) {
              auto cp = pltpu::make_async_copy(x_hbm, t, sem);
              cp.start();
              if (!buggy) cp.wait();
              ov = t * 2.0f;
              if (buggy) cp.wait();
              pltpu::sync_copy(ov, o);
            })(x);
      };
      if (!buggy) {
        const Array<float> o = run();
        for (int64_t i = 0; i < o.size(); ++i) ASSERT_EQ(o[i], 2.0f * x[i]);
      } else {
        auto e = tessera::testing::catch_error<KernelError>(run);
        ASSERT_TRUE(e);
        maybe_print(*e);
        EXPECT_EQ(e->kind(), ErrorKind::kRace) << e->what();
        EXPECT_EQ(e->kernel_name(), "vec_race");
        EXPECT_EQ(e->core(), 0);
        EXPECT_NE(std::string(e->what()).find("async copy started at"), std::string::npos);
      }
    }
  }
}

// Compute overwriting the source of an in-flight VMEM -> HBM copy.
Array<float> write_during_copy_out(Mode m, bool buggy) {
  return pl::kernel(
      pl::out_type<float>({128}), pltpu::TensorCoreMesh("core", 1),
      pl::scratch_types(pltpu::VMEM<float>({128}), pltpu::SemaphoreType::DMA),
      checked(m))([buggy](pltpu::HbmRef<float> o, pltpu::VmemRef<float> v, DmaSem sem) {
    v = jnp::full_like(v, 3.0f);
    auto cp = pltpu::make_async_copy(v, o, sem);
    cp.start();
    if (buggy) {
      // clang-format off
      MARK_LINE; v(5) = 7.0f;
      // clang-format on
    }
    cp.wait();
    if (!buggy) v(5) = 7.0f;
  })();
}

TEST(CheckedRace, WriteOfInFlightDmaSource) {
  for (Mode m : kModes) {
    const Array<float> o = write_during_copy_out(m, false);
    for (int64_t i = 0; i < 128; ++i) ASSERT_EQ(o[i], 3.0f);
    expect_bug([&] { write_during_copy_out(m, true); },
               {ErrorKind::kRace, kMarked, 0, {}, "element (5,)"});
  }
}

// Two copies in flight into the same VMEM bytes.
Array<float> overlapping_copies(const Array<float>& x, Mode m, bool buggy) {
  return pl::kernel(pl::out_type<float>({128}), pltpu::TensorCoreMesh("core", 1),
                    pl::scratch_types(pltpu::VMEM<float>({128}), pltpu::SemaphoreType::DMA({2})),
                    checked(m))([buggy](pltpu::HbmRef<const float> x_hbm, pltpu::HbmRef<float> o,
                                        pltpu::VmemRef<float> v, DmaSem sems) {
    auto a = pltpu::make_async_copy(x_hbm.at(pl::ds(0, 64)), v.at(pl::ds(0, 64)), sems.at(0));
    auto b = pltpu::make_async_copy(x_hbm.at(pl::ds(64, 64)), v.at(pl::ds(buggy ? 32 : 64, 64)),
                                    sems.at(1));
    a.start();
    // clang-format off
    MARK_LINE; b.start();
    // clang-format on
    a.wait();
    b.wait();
    pltpu::sync_copy(v, o);
  })(x);
}

TEST(CheckedRace, OverlappingDmas) {
  const Array<float> x = ramp({128});
  for (Mode m : kModes) {
    const Array<float> o = overlapping_copies(x, m, false);
    for (int64_t i = 0; i < 128; ++i) ASSERT_EQ(o[i], x[i]);
    expect_bug([&] { overlapping_copies(x, m, true); },
               {ErrorKind::kRace, kMarked, 0, {}, "both write"});
  }
}

// A sync copy into bytes an async copy is still writing.
TEST(CheckedRace, SyncCopyOverInFlightDma) {
  const Array<float> x = ramp({128});
  for (Mode m : kModes) {
    for (bool buggy : {false, true}) {
      auto run = [&] {
        return pl::kernel(
            pl::out_type<float>({128}), pltpu::TensorCoreMesh("core", 1),
            pl::scratch_types(pltpu::VMEM<float>({128}), pltpu::SemaphoreType::DMA),
            checked(m))([buggy](pltpu::HbmRef<const float> x_hbm, pltpu::HbmRef<float> o,
                                pltpu::VmemRef<float> v, DmaSem sem) {
          auto cp = pltpu::make_async_copy(x_hbm, v, sem);
          cp.start();
          if (!buggy) cp.wait();
          // clang-format off
          MARK_LINE; pltpu::sync_copy(v, o);
          // clang-format on
          if (buggy) cp.wait();
        })(x);
      };
      if (!buggy) {
        const Array<float> o = run();
        for (int64_t i = 0; i < 128; ++i) ASSERT_EQ(o[i], x[i]);
      } else {
        expect_bug(run, {ErrorKind::kRace, kMarked, 0, {}, "reads what the other writes"});
      }
    }
  }
}

// ---- races: core vs core on HBM ---------------------------------------------------------------

// Both cores write the same HBM bytes with nothing ordering them (write/write).
Array<float> both_cores_write(bool buggy) {
  return pl::kernel(pl::out_type<float>({256}), pltpu::TensorCoreMesh("core", 2),
                    pl::scratch_types(pltpu::VMEM<float>({128})),
                    checked())([buggy](pltpu::HbmRef<float> o, pltpu::VmemRef<float> v) {
    const int c = lax::axis_index("core");
    v = jnp::full_like(v, 1.0f);
    // clang-format off
        MARK_LINE; pltpu::sync_copy(v, o.at(pl::ds(buggy ? 0 : c * 128, 128)));
    // clang-format on
    if (buggy) pltpu::sync_copy(v, o.at(pl::ds(128, 128)));
  })();
}

TEST(CheckedRace, TwoCoresWriteSameHbmBytes) {
  const Array<float> o = both_cores_write(false);
  for (int64_t i = 0; i < 256; ++i) ASSERT_EQ(o[i], 1.0f);
  auto e = tessera::testing::catch_error<KernelError>([] { both_cores_write(true); });
  ASSERT_TRUE(e);
  maybe_print(*e);
  EXPECT_EQ(e->kind(), ErrorKind::kRace) << e->what();
  EXPECT_EQ(static_cast<int>(e->where().line()), g_line.load());
  EXPECT_TRUE(e->core() == 0 || e->core() == 1);
  EXPECT_NE(std::string(e->what()).find("HBM output 0"), std::string::npos) << e->what();
  EXPECT_NE(std::string(e->what()).find("no happens-before"), std::string::npos) << e->what();
}

// Two cores write interleaved columns (core c the columns c, c + 2, ...) or interleaved rows of
// one output: disjoint element sets whose bounding boxes overlap. The buggy twin gives both cores
// the same columns.
Array<float> interleaved_writes(bool rows, bool buggy) {
  return pl::kernel(pl::out_type<float>({8, 256}), pltpu::TensorCoreMesh("core", 2),
                    pl::scratch_types(pltpu::VMEM<float>({8, 128}), pltpu::VMEM<float>({4, 256})),
                    checked())([rows, buggy](pltpu::HbmRef<float> o, pltpu::VmemRef<float> cols,
                                             pltpu::VmemRef<float> half) {
    const int c = lax::axis_index("core");
    const int first = buggy ? 0 : c;
    if (rows) {
      half = jnp::full_like(half, static_cast<float>(c + 1));
      // clang-format off
      MARK_LINE; pltpu::sync_copy(half, o.at(pl::ds(first, 4, 2)));
      // clang-format on
      if (buggy) {
        pltpu::run_on_first_core("core", [&] { pltpu::sync_copy(half, o.at(pl::ds(1, 4, 2))); });
      }
    } else {
      cols = jnp::full_like(cols, static_cast<float>(c + 1));
      // clang-format off
      MARK_LINE; pltpu::sync_copy(cols, o.at(pl::all, pl::ds(first, 128, 2)));
      // clang-format on
      if (buggy) {
        pltpu::run_on_first_core("core",
                                 [&] { pltpu::sync_copy(cols, o.at(pl::all, pl::ds(1, 128, 2))); });
      }
    }
  })();
}

TEST(CheckedRace, InterleavedColumnsAndRowsOfTwoCoresAreDisjoint) {
  for (bool rows : {false, true}) {
    for (int trial = 0; trial < 20; ++trial) {
      const Array<float> o = interleaved_writes(rows, false);
      for (int64_t r = 0; r < 8; ++r) {
        for (int64_t col = 0; col < 256; ++col) {
          const float want = static_cast<float>((rows ? r : col) % 2 + 1);
          ASSERT_EQ(o[r * 256 + col], want) << rows << " " << r << " " << col;
        }
      }
    }
    auto e = tessera::testing::catch_error<KernelError>([&] { interleaved_writes(rows, true); });
    ASSERT_TRUE(e) << rows;
    maybe_print(*e);
    EXPECT_EQ(e->kind(), ErrorKind::kRace) << e->what();
    EXPECT_NE(std::string(e->what()).find("no happens-before"), std::string::npos) << e->what();
  }
}

// Core 1 reads what core 0 writes; the clean twin orders them with a semaphore signal/wait.
Array<float> handoff(bool buggy) {
  return pl::kernel(pl::out_type<float>({256}), pltpu::TensorCoreMesh("core", 2),
                    pl::scratch_types(pltpu::VMEM<float>({128}), pltpu::SemaphoreType::REGULAR),
                    checked())(
      [buggy](pltpu::HbmRef<float> o, pltpu::VmemRef<float> v, pltpu::SemaphoreRef ready) {
        if (lax::axis_index("core") == 0) {
          v = jnp::full_like(v, 5.0f);
          pltpu::sync_copy(v, o.at(pl::ds(0, 128)));
          if (!buggy) pl::semaphore_signal(ready, 1, pl::core_index(1));
        } else {
          if (!buggy) pl::semaphore_wait(ready);
          // clang-format off
      MARK_LINE; pltpu::sync_copy(o.at(pl::ds(0, 128)), v);
          // clang-format on
          pltpu::sync_copy(v, o.at(pl::ds(128, 128)));
        }
      })();
}

// The clean twin ordered by pltpu::core_barrier instead of a semaphore (the barrier's signals and
// wait are happens-before edges too).
TEST(CheckedRace, CoreBarrierOrdersHbmHandoff) {
  for (Mode m : kModes) {
    const Array<float> o = pl::kernel(
        pl::out_type<float>({256}), pltpu::TensorCoreMesh("core", 2),
        pl::scratch_types(pltpu::VMEM<float>({128}), pltpu::SemaphoreType::REGULAR), checked(m))(
        [](pltpu::HbmRef<float> o_hbm, pltpu::VmemRef<float> v, pltpu::SemaphoreRef bar) {
          const int c = lax::axis_index("core");
          if (c == 0) {
            v = jnp::full_like(v, 9.0f);
            pltpu::sync_copy(v, o_hbm.at(pl::ds(0, 128)));
          }
          pltpu::core_barrier(bar, "core");
          if (c == 1) {
            pltpu::sync_copy(o_hbm.at(pl::ds(0, 128)), v);
            pltpu::sync_copy(v, o_hbm.at(pl::ds(128, 128)));
          }
        })();
    for (int64_t i = 0; i < 256; ++i) ASSERT_EQ(o[i], 9.0f);
  }
}

TEST(CheckedRace, CoreReadsOtherCoresWriteUnordered) {
  const Array<float> o = handoff(false);
  for (int64_t i = 0; i < 256; ++i) ASSERT_EQ(o[i], 5.0f);
  // Whichever core comes second reports (core 1's read, or core 0's write after it); the
  // read may also see the poison first (then it is the output check's job); run until a race.
  auto e = tessera::testing::catch_error<KernelError>([] { handoff(true); });
  ASSERT_TRUE(e);
  maybe_print(*e);
  EXPECT_EQ(e->kind(), ErrorKind::kRace) << e->what();
  EXPECT_NE(std::string(e->what()).find("no happens-before"), std::string::npos) << e->what();
}

// Pallas' test_two_cores_along_parallel_dimension_with_race: a whole-array output block written
// back by both cores of a PARALLEL grid.
Array<float> parallel_whole_output(const Array<float>& x, bool buggy) {
  const pl::BlockSpec rows({8, 128}, [](int i) { return pl::idx(i, 0); });
  const pl::BlockSpec whole({16, 128}, [](int) { return pl::idx(0, 0); });
  return pl::pallas_call(
      [](pltpu::VmemRef<const float> xv, pltpu::VmemRef<float> ov) { ov = xv * 2.0f; },
      pl::out_shape<float>({16, 128}), pl::grid({2}), pl::in_specs(buggy ? whole : rows),
      pl::out_specs(buggy ? whole : rows), pltpu::TensorCoreMesh("core", 2),
      pltpu::CompilerParams{.dimension_semantics = {pltpu::PARALLEL}}, checked())(x);
}

TEST(CheckedRace, ParallelGridWholeOutputOnTwoCores) {
  const Array<float> x = ramp({16, 128});
  const Array<float> o = parallel_whole_output(x, false);
  for (int64_t i = 0; i < o.size(); ++i) ASSERT_EQ(o[i], 2.0f * x[i]);
  auto e = tessera::testing::catch_error<KernelError>([&] { parallel_whole_output(x, true); });
  ASSERT_TRUE(e);
  maybe_print(*e);
  EXPECT_EQ(e->kind(), ErrorKind::kRace) << e->what();
  EXPECT_EQ(e->grid_step(), std::vector<int64_t>{e->core()}) << e->what();
  EXPECT_NE(std::string(e->what()).find("write-back"), std::string::npos) << e->what();
}

// A missing core_barrier: core 1 reads (and reduces) what core 0 writes, with nothing ordering
// them. Whichever core gets there first, the launch reports the race, not the garbage core 1 read
// (the buggy twin runs with either core delayed).
Array<float> handoff_then_reduce(bool buggy, int slow_core) {
  return pl::kernel(pl::out_type<float>({256}), pltpu::TensorCoreMesh("core", 2),
                    pl::scratch_types(pltpu::VMEM<float>({128}), pltpu::VMEM<float>({128}),
                                      pltpu::SemaphoreType::REGULAR),
                    pltpu::CompilerParams{.wait_timeout_ms = 60000}, checked())(
      [buggy, slow_core](pltpu::HbmRef<float> o, pltpu::VmemRef<float> v, pltpu::VmemRef<float> s,
                         pltpu::SemaphoreRef barrier) {
        const int c = lax::axis_index("core");
        if (c == slow_core) {
          v = jnp::full_like(v, 0.0f);
          for (int i = 0; i < 2000; ++i) v = v + 1.0f;  // arrive late
        }
        if (c == 0) {
          v = jnp::full_like(v, 5.0f);
          pltpu::sync_copy(v, o.at(pl::ds(0, 128)));
        }
        if (!buggy) pltpu::core_barrier(barrier, "core");
        if (c == 1) {
          pltpu::sync_copy(o.at(pl::ds(0, 128)), v);
          s = jnp::full_like(s, 0.0f) + jnp::sum(v);
          pltpu::sync_copy(s, o.at(pl::ds(128, 128)));
        }
      })();
}

TEST(CheckedRace, MissingBarrierIsReportedAsTheRace) {
  for (int slow : {0, 1}) {
    const Array<float> o = handoff_then_reduce(false, slow);
    EXPECT_EQ(o[0], 5.0f);
    EXPECT_EQ(o[200], 640.0f);
    for (int trial = 0; trial < 5; ++trial) {
      auto e = tessera::testing::catch_error<KernelError>([&] { handoff_then_reduce(true, slow); });
      ASSERT_TRUE(e);
      maybe_print(*e);
      EXPECT_EQ(e->kind(), ErrorKind::kRace) << "slow core " << slow << ": " << e->what();
      EXPECT_NE(std::string(e->what()).find("no happens-before"), std::string::npos) << e->what();
    }
  }
}

// An input aliased to the output, read at step i from block i (the clean twin: a block not yet
// written back) or from block i - 1 (written back after the previous step: on a TPU that
// write-back and this step's prefetch are DMAs in flight at once).
Array<float> aliased_reads(const Array<float>& x, bool buggy) {
  const pl::BlockSpec out({8, 128}, [](int i) { return pl::idx(i, 0); });
  const pl::BlockSpec in =
      buggy ? pl::BlockSpec({8, 128}, [](int i) { return pl::idx(i > 0 ? i - 1 : 0, 0); }) : out;
  // clang-format off
  g_line.store(__LINE__); const auto grid = pl::grid({4});
  // clang-format on
  return pl::pallas_call(
      [](pltpu::VmemRef<const float> xv, pltpu::VmemRef<float> ov) { ov = xv + 1.0f; },
      pl::out_shape<float>({32, 128}), grid, pl::in_specs(in), pl::out_specs(out),
      pl::input_output_aliases({{0, 0}}), pltpu::TensorCoreMesh("core", 1), checked())(x);
}

TEST(CheckedRace, AliasedInputReadAfterItsBlockWasWrittenBack) {
  const Array<float> x = ramp({32, 128});
  const Array<float> o = aliased_reads(x, false);
  for (int64_t i = 0; i < o.size(); ++i) ASSERT_EQ(o[i], x[i] + 1.0f);
  auto e = tessera::testing::catch_error<KernelError>([&] { aliased_reads(x, true); });
  ASSERT_TRUE(e);
  maybe_print(*e);
  EXPECT_EQ(e->kind(), ErrorKind::kRace) << e->what();
  EXPECT_EQ(e->grid_step(), (std::vector<int64_t>{2})) << e->what();
  EXPECT_NE(std::string(e->what()).find("copy-in of grid step (2) reads"), std::string::npos)
      << e->what();
  EXPECT_NE(std::string(e->what()).find("write-back after grid step (1)"), std::string::npos)
      << e->what();
}

// ---- execution order --------------------------------------------------------------------------

// Pallas' test_randomization_of_parallel_dimensions: the PARALLEL axis runs in a seeded order;
// the results do not change, the visiting order does.
TEST(CheckedOrder, ParallelAxisOrderIsRandomised) {
  std::vector<int> order;
  auto run = [&](std::optional<uint64_t> seed) {
    order.clear();
    pltpu::InterpretParams p = checked();
    p.parallel_order_seed = seed;
    const pl::BlockSpec spec({8, 128}, [](int i, int) { return pl::idx(i, 0); });
    return pl::pallas_call(
        [&order](pltpu::VmemRef<const float> xv, pltpu::VmemRef<float> ov) {
          if (pl::program_id(1) == 0) {
            order.push_back(static_cast<int>(pl::program_id(0)));
            ov = jnp::zeros_like(ov);
          }
          ov += xv;
        },
        pl::out_shape<float>({64, 128}), pl::grid({8, 4}), pl::in_specs(spec), pl::out_specs(spec),
        pltpu::TensorCoreMesh("core", 1),
        pltpu::CompilerParams{.dimension_semantics = {pltpu::PARALLEL, pltpu::ARBITRARY}},
        p)(ramp({64, 128}));
  };
  const Array<float> plain = run(std::nullopt);
  EXPECT_EQ(order, (std::vector<int>{0, 1, 2, 3, 4, 5, 6, 7}));
  const Array<float> shuffled = run(12345);
  EXPECT_NE(order, (std::vector<int>{0, 1, 2, 3, 4, 5, 6, 7}));
  std::vector<int> sorted = order;
  std::sort(sorted.begin(), sorted.end());
  EXPECT_EQ(sorted, (std::vector<int>{0, 1, 2, 3, 4, 5, 6, 7}));
  for (int64_t i = 0; i < plain.size(); ++i) ASSERT_EQ(plain[i], shuffled[i]);
}

// Random DMA execution: a correct double-buffered kernel gives the same answer for every seed.
TEST(CheckedOrder, RandomDmaModeKeepsCorrectKernelsCorrect) {
  const Array<float> x = ramp({8, 128});
  for (uint64_t seed : {1u, 2u, 3u, 4u}) {
    pltpu::InterpretParams p = checked(Mode::random);
    p.random_seed = seed;
    const Array<float> o =
        pl::kernel(pl::out_type<float>({8, 128}), pltpu::TensorCoreMesh("core", 1),
                   pl::scratch_types(pltpu::VMEM<float>({2, 128}), pltpu::VMEM<float>({128}),
                                     pltpu::SemaphoreType::DMA({2})),
                   p)([](pltpu::HbmRef<const float> x_hbm, pltpu::HbmRef<float> o_hbm,
                         pltpu::VmemRef<float> buf, pltpu::VmemRef<float> ov, DmaSem sems) {
          auto fetch = [&](int r) {
            return pltpu::make_async_copy(x_hbm.at(r), buf.at(r % 2), sems.at(r % 2));
          };
          fetch(0).start();
          for (int r = 0; r < 8; ++r) {
            if (r + 1 < 8) fetch(r + 1).start();
            fetch(r).wait();
            ov = buf.at(r % 2) + 1.0f;
            pltpu::sync_copy(ov, o_hbm.at(r));
          }
        })(x);
    for (int64_t i = 0; i < o.size(); ++i) ASSERT_EQ(o[i], x[i] + 1.0f) << seed;
  }
}

// A kernel that reads a destination without waiting sees the poison under on_wait (the copy has
// not run yet) — and the race detector names it first.
TEST(CheckedOrder, OnWaitRunsCopiesLate) {
  const Array<float> x = ramp({128});
  pltpu::InterpretParams p = checked(Mode::on_wait);
  p.detect_races = false;
  p.allow_uninitialized_reads = true;
  const Array<float> o =
      pl::kernel(pl::out_type<float>({128}), pltpu::TensorCoreMesh("core", 1),
                 pl::scratch_types(pltpu::VMEM<float>({128}), pltpu::VMEM<float>({128}),
                                   pltpu::SemaphoreType::DMA),
                 p)([](pltpu::HbmRef<const float> x_hbm, pltpu::HbmRef<float> o_hbm,
                       pltpu::VmemRef<float> t, pltpu::VmemRef<float> ov, DmaSem sem) {
        auto cp = pltpu::make_async_copy(x_hbm, t, sem);
        cp.start();
        ov = t + 0.0f;
        cp.wait();
        pltpu::sync_copy(ov, o_hbm);
      })(x);
  EXPECT_TRUE(std::isnan(o[3]));
}

}  // namespace
