// Checked mode (issue #5, docs/checked-mode.md): one buggy kernel per detector and variant, each
// with a clean twin that passes with the right output (Pallas' race-test pattern), under both
// DMA execution modes where copies are involved. Assertions name the kind, the line, the core
// and the grid step.
#include <gtest/gtest.h>

#include <atomic>
#include <cmath>
#include <cstdlib>
#include <iostream>
#include <limits>
#include <string>
#include <vector>

#include "support/expect_error.h"
#include "tessera/tessera.h"

namespace {
using namespace tessera;
using Mode = pltpu::DmaExecutionMode;

constexpr Mode kModes[] = {Mode::eager, Mode::on_wait};

pltpu::InterpretParams checked(Mode m = Mode::on_wait) {
  pltpu::InterpretParams p;
  p.dma_execution_mode = m;
  return p;
}

pltpu::InterpretParams on_chip(const char* chip) {
  pltpu::InterpretParams p;
  p.chip = chip;
  return p;
}

// The line of the statement that should fail, set on that line from inside the body (atomic:
// several cores may set it).
std::atomic<int> g_line{0};
// `MARK_LINE; statement;` on one line records it (clang-format is off around each such line).
#define MARK_LINE g_line.store(__LINE__)

// Want::line: the line MARK_LINE recorded while the buggy kernel ran.
constexpr int kMarked = -1;

struct Want {
  ErrorKind kind;
  int line;
  int core = 0;
  std::vector<int64_t> step = {};
  std::string text = {};
};

// TESSERA_PRINT_DIAGNOSTICS=1 prints each message (docs/checked-mode.md quotes them).
void maybe_print(const Error& e) {
  if (std::getenv("TESSERA_PRINT_DIAGNOSTICS") != nullptr) std::cerr << e.what() << "\n\n";
}

template <class E = KernelError, class F>
void expect_bug(F&& f, const Want& w) {
  auto e = tessera::testing::catch_error<E>(f);
  ASSERT_TRUE(e.has_value());
  maybe_print(*e);
  EXPECT_EQ(e->kind(), w.kind) << e->what();
  EXPECT_EQ(static_cast<int>(e->where().line()), w.line == kMarked ? g_line.load() : w.line)
      << e->what();
  EXPECT_NE(std::string(e->where().file_name()).find("checked_test.cc"), std::string::npos)
      << e->what();
  EXPECT_EQ(e->core(), w.core) << e->what();
  EXPECT_EQ(e->grid_step(), w.step) << e->what();
  if (!w.text.empty()) {
    EXPECT_NE(std::string(e->what()).find(w.text), std::string::npos)
        << e->what() << "\nexpected to contain: " << w.text;
  }
}

Array<float> ramp(Shape shape, float scale = 1.0f) {
  Array<float> a(std::move(shape));
  for (int64_t i = 0; i < a.size(); ++i) a[i] = static_cast<float>(i) * scale;
  return a;
}

using DmaSem = pltpu::DmaSemaphoreRef;

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

// ---- uninitialised memory ---------------------------------------------------------------------

Array<float> read_fresh_scratch(bool buggy, pltpu::InterpretParams p = checked()) {
  return pl::kernel(pl::out_type<float>({128}), pltpu::TensorCoreMesh("core", 1),
                    pl::scratch_types(pltpu::VMEM<float>({128}), pltpu::VMEM<float>({128})), p)(
      [buggy](pltpu::HbmRef<float> o, pltpu::VmemRef<float> acc, pltpu::VmemRef<float> ov) {
        if (!buggy) acc = jnp::zeros_like(acc);
        // clang-format off
        MARK_LINE; ov = acc + jnp::full_like(acc, 1.0f);
        // clang-format on
        pltpu::sync_copy(ov, o);
      })();
}

TEST(CheckedUninitialized, ReadOfFreshScratch) {
  const Array<float> o = read_fresh_scratch(false);
  for (int64_t i = 0; i < 128; ++i) ASSERT_EQ(o[i], 1.0f);
  expect_bug([] { read_fresh_scratch(true); },
             {ErrorKind::kUninitialized, kMarked, 0, {}, "VMEM scratch #0"});
  // Allowed: the read sees the poison (NaN), or zeros.
  pltpu::InterpretParams allow = checked();
  allow.allow_uninitialized_reads = true;
  EXPECT_TRUE(std::isnan(read_fresh_scratch(true, allow)[0]));
  allow.uninitialized_memory = pltpu::UninitializedMemory::zero;
  EXPECT_EQ(read_fresh_scratch(true, allow)[0], 1.0f);
}

// An accumulator output window not initialised at the first step of its visit.
Array<float> row_sums(const Array<float>& x, bool buggy) {
  // An operator assignment has no call site of its own: errors name the pallas_call (its grid).
  // clang-format off
  g_line.store(__LINE__); const auto grid = pl::grid({2, 3});
  // clang-format on
  return pl::pallas_call(
      [buggy](pltpu::VmemRef<const float> xv, pltpu::VmemRef<float> ov) {
        if (!buggy && pl::program_id(1) == 0) ov = jnp::zeros_like(ov);
        ov += xv;
      },
      pl::out_shape<float>({16, 128}), grid,
      pl::in_specs(pl::BlockSpec({8, 128}, [](int i, int j) { return pl::idx(i, j); })),
      pl::out_specs(pl::BlockSpec({8, 128}, [](int i, int) { return pl::idx(i, 0); })),
      checked())(x);
}

TEST(CheckedUninitialized, AccumulatorNotInitialised) {
  const Array<float> x = ramp({16, 384});
  const Array<float> o = row_sums(x, false);
  for (int64_t r = 0; r < 16; ++r) {
    for (int64_t c = 0; c < 128; ++c) {
      ASSERT_EQ(o[r * 128 + c], x[r * 384 + c] + x[r * 384 + 128 + c] + x[r * 384 + 256 + c]);
    }
  }
  expect_bug([&] { row_sums(x, true); },
             {ErrorKind::kUninitialized, g_line.load(), 0, {0, 0}, "the VMEM window of output 0"});
}

// An output that the kernel leaves partly unwritten.
Array<float> half_written(bool buggy) {
  return pl::kernel(pl::out_type<float>({256}), pltpu::TensorCoreMesh("core", 1),
                    pl::scratch_types(pltpu::VMEM<float>({128})), checked(),
                    pl::name("half"))([buggy](pltpu::HbmRef<float> o, pltpu::VmemRef<float> v) {
    v = jnp::full_like(v, 2.0f);
    pltpu::sync_copy(v, o.at(pl::ds(0, 128)));
    if (!buggy) pltpu::sync_copy(v, o.at(pl::ds(128, 128)));
  })();
}

TEST(CheckedUninitialized, OutputNeverWritten) {
  const Array<float> o = half_written(false);
  for (int64_t i = 0; i < 256; ++i) ASSERT_EQ(o[i], 2.0f);
  auto e = tessera::testing::catch_error<KernelError>([] { half_written(true); });
  ASSERT_TRUE(e);
  maybe_print(*e);
  EXPECT_EQ(e->kind(), ErrorKind::kUninitialized);
  EXPECT_EQ(e->kernel_name(), "half");
  EXPECT_NE(std::string(e->what()).find("element (128,) was never written"), std::string::npos)
      << e->what();
  EXPECT_NE(std::string(e->what()).find("128 of its 256 elements"), std::string::npos) << e->what();
}

// A run_scoped buffer read before anything is written to it.
Array<float> scoped_read(bool buggy) {
  return pl::kernel(pl::out_type<float>({128}), pltpu::TensorCoreMesh("core", 1),
                    checked())([buggy](pltpu::HbmRef<float> o) {
    pl::run_scoped(
        [&](pltpu::VmemRef<float> t) {
          if (!buggy) t = jnp::full_like(t, 4.0f);
          pltpu::sync_copy(t, o);
        },
        pltpu::VMEM<float>({128}));
  })();
}

TEST(CheckedUninitialized, RunScopedBufferCopiedOutUnwritten) {
  const Array<float> o = scoped_read(false);
  for (int64_t i = 0; i < 128; ++i) ASSERT_EQ(o[i], 4.0f);
  // The copy itself moves the poison; the output check reports it.
  auto e = tessera::testing::catch_error<KernelError>([] { scoped_read(true); });
  ASSERT_TRUE(e);
  maybe_print(*e);
  EXPECT_EQ(e->kind(), ErrorKind::kUninitialized) << e->what();
  EXPECT_NE(std::string(e->what()).find("output 0"), std::string::npos) << e->what();
}

// A scalar read of unwritten SMEM through a ref of const elements.
Array<int32_t> smem_read(bool buggy) {
  return pl::kernel(pl::out_type<int32_t>({8}), pltpu::TensorCoreMesh("core", 1),
                    pl::scratch_types(pltpu::SMEM<int32_t>({8}), pltpu::VMEM<int32_t>({8})),
                    checked())(
      [buggy](pltpu::HbmRef<int32_t> o, pltpu::SmemRef<int32_t> s, pltpu::VmemRef<int32_t> v) {
        if (!buggy) s(3) = 11;
        const pltpu::SmemRef<const int32_t> cs = s;
        // clang-format off
    MARK_LINE; const int32_t got = cs(3);
        // clang-format on
        v = jnp::full_like(v, got);
        pltpu::sync_copy(v, o);
      })();
}

TEST(CheckedUninitialized, ScalarReadOfUnwrittenSmem) {
  const Array<int32_t> o = smem_read(false);
  for (int64_t i = 0; i < 8; ++i) ASSERT_EQ(o[i], 11);
  expect_bug([] { smem_read(true); },
             {ErrorKind::kUninitialized, kMarked, 0, {}, "SMEM scratch #0"});
}

// acc += dot(x, y) into an accumulator nobody initialised.
Array<float> dot_acc(bool buggy) {
  return pl::kernel(pl::out_type<float>({8, 128}), pltpu::TensorCoreMesh("core", 1),
                    pl::scratch_types(pltpu::VMEM<float>({8, 128}), pltpu::VMEM<float>({128, 128}),
                                      pltpu::VMEM<float>({8, 128})),
                    checked())([buggy](pltpu::HbmRef<float> o, pltpu::VmemRef<float> x,
                                       pltpu::VmemRef<float> y, pltpu::VmemRef<float> acc) {
    x = jnp::full_like(x, 1.0f);
    y = jnp::full_like(y, 0.5f);
    if (!buggy) acc = jnp::zeros_like(acc);
    // clang-format off
    MARK_LINE; acc += jnp::dot(x, y);
    // clang-format on
    pltpu::sync_copy(acc, o);
  })();
}

TEST(CheckedUninitialized, DotAccumulatorNotInitialised) {
  const Array<float> o = dot_acc(false);
  for (int64_t i = 0; i < o.size(); ++i) ASSERT_EQ(o[i], 64.0f);
  expect_bug([] { dot_acc(true); }, {ErrorKind::kUninitialized, kMarked, 0, {}, "dot"});
}

// Partial edge blocks: the padding is poison; computing on it is fine, and only valid elements
// reach the output. A kernel that reduces over the padding sees NaN.
TEST(CheckedUninitialized, PartialEdgeBlocksArePaddedWithPoison) {
  const Array<float> x = ramp({10, 128});
  const pl::BlockSpec spec({8, 128}, [](int i) { return pl::idx(i, 0); });
  auto add1 = pl::pallas_call(
      [](pltpu::VmemRef<const float> xv, pltpu::VmemRef<float> ov) { ov = xv + 1.0f; },
      pl::out_shape<float>({10, 128}), pl::grid({2}), pl::in_specs(spec), pl::out_specs(spec),
      checked());
  const Array<float> o = add1(x);
  for (int64_t i = 0; i < o.size(); ++i) ASSERT_EQ(o[i], x[i] + 1.0f);
  auto sums = pl::pallas_call(
      [](pltpu::VmemRef<const float> xv, pltpu::VmemRef<float> ov) { ov = jnp::sum(xv, 0); },
      pl::out_shape<float>({256}), pl::grid({2}), pl::in_specs(spec),
      pl::out_specs(pl::BlockSpec({128}, [](int i) { return pl::idx(i); })), checked());
  const Array<float> s = sums(x);
  EXPECT_FALSE(std::isnan(s[0]));
  EXPECT_TRUE(std::isnan(s[128]));  // the second block's rows 10..15 are padding
}

// ---- bounds -----------------------------------------------------------------------------------

Array<float> slice_oob(const Array<float>& x, bool buggy) {
  return pl::kernel(pl::out_type<float>({16}), pltpu::TensorCoreMesh("core", 1),
                    pl::scratch_types(pltpu::VMEM<float>({16})), checked())(
      [buggy](pltpu::HbmRef<const float> x_hbm, pltpu::HbmRef<float> o, pltpu::VmemRef<float> v) {
        // clang-format off
        MARK_LINE; pltpu::sync_copy(x_hbm.at(pl::ds(buggy ? 120 : 112, 16)), v);
        // clang-format on
        pltpu::sync_copy(v, o);
      })(x);
}

TEST(CheckedBounds, DmaSliceOutOfBounds) {
  const Array<float> x = ramp({128});
  const Array<float> o = slice_oob(x, false);
  for (int64_t i = 0; i < 16; ++i) ASSERT_EQ(o[i], x[112 + i]);
  expect_bug([&] { slice_oob(x, true); }, {ErrorKind::kOutOfBounds, kMarked, 0, {}, "120"});
}

TEST(CheckedBounds, BlockIndexOutOfBounds) {
  const Array<float> x = ramp({32, 128});
  const pl::BlockSpec spec({8, 128}, [](int i) { return pl::idx(i, 0); });
  auto run = [&](bool buggy) {
    const pl::BlockSpec in({8, 128}, [buggy](int i) { return pl::idx(buggy ? i + 1 : i, 0); });
    return pl::pallas_call(
        [](pltpu::VmemRef<const float> xv, pltpu::VmemRef<float> ov) { ov = xv; },
        pl::out_shape<float>({32, 128}), pl::grid({4}), pl::in_specs(in), pl::out_specs(spec),
        checked())(x);
  };
  const Array<float> o = run(false);
  for (int64_t i = 0; i < o.size(); ++i) ASSERT_EQ(o[i], x[i]);
  auto e = tessera::testing::catch_error<KernelError>([&] { run(true); });
  ASSERT_TRUE(e);
  maybe_print(*e);
  EXPECT_EQ(e->kind(), ErrorKind::kOutOfBounds) << e->what();
  EXPECT_EQ(e->grid_step(), (std::vector<int64_t>{3})) << e->what();
}

// ---- capacity and TPU rules -------------------------------------------------------------------

TEST(CheckedCapacity, ScratchOverChipVmem) {
  auto run = [](const char* chip) {
    return pl::kernel(
        pl::out_type<float>({128}), pltpu::TensorCoreMesh("core", 1),
        pl::scratch_types(pltpu::VMEM<float>({20, 1024, 1024}), pltpu::VMEM<float>({128})),
        pltpu::CompilerParams{.vmem_limit_bytes = int64_t{96} << 20},
        on_chip(chip))([](pltpu::HbmRef<float> o, pltpu::VmemRef<float>, pltpu::VmemRef<float> v) {
      v = jnp::full_like(v, 1.0f);
      pltpu::sync_copy(v, o);
    })();
  };
  EXPECT_EQ(run("v5e")[0], 1.0f);  // 128 MiB of VMEM
  auto e = tessera::testing::catch_error<UsageError>([&] { run("v4"); });
  ASSERT_TRUE(e);
  maybe_print(*e);
  EXPECT_EQ(e->kind(), ErrorKind::kCapacityExceeded) << e->what();
  EXPECT_NE(std::string(e->what()).find("#0 VMEM<float32>(20, 1024, 1024)"), std::string::npos)
      << e->what();
  EXPECT_NE(std::string(e->what()).find("v4"), std::string::npos) << e->what();
}

TEST(CheckedCapacity, PipelineWindowsOverChipVmem) {
  const Array<float> x({4096, 1024}, 1.0f);
  auto run = [&](const char* chip) {
    const pl::BlockSpec spec({2048, 1024}, [](int i) { return pl::idx(i, 0); });
    return pl::pallas_call(
        [](pltpu::VmemRef<const float> xv, pltpu::VmemRef<float> ov) { ov = xv + 1.0f; },
        pl::out_shape<float>({4096, 1024}), pl::grid({2}), pl::in_specs(spec), pl::out_specs(spec),
        pltpu::TensorCoreMesh("core", 1),
        pltpu::CompilerParams{.vmem_limit_bytes = int64_t{64} << 20}, on_chip(chip))(x);
  };
  EXPECT_EQ(run("v5e")[5], 2.0f);
  auto e = tessera::testing::catch_error<KernelError>([&] { run("v4"); });
  ASSERT_TRUE(e);
  maybe_print(*e);
  EXPECT_EQ(e->kind(), ErrorKind::kCapacityExceeded) << e->what();
  EXPECT_NE(std::string(e->what()).find("pipeline window"), std::string::npos) << e->what();
}

TEST(CheckedCapacity, MeshLargerThanChip) {
  auto run = [](int cores) {
    return pl::kernel(pl::out_type<float>({128}), pltpu::TensorCoreMesh("core", cores),
                      pl::scratch_types(pltpu::VMEM<float>({128})),
                      on_chip("v5e"))([](pltpu::HbmRef<float> o, pltpu::VmemRef<float> v) {
      v = jnp::full_like(v, 1.0f);
      if (lax::axis_index("core") == 0) pltpu::sync_copy(v, o);
    })();
  };
  EXPECT_EQ(run(1)[0], 1.0f);
  auto e = tessera::testing::catch_error<UsageError>([&] { run(2); });
  ASSERT_TRUE(e);
  maybe_print(*e);
  EXPECT_EQ(e->kind(), ErrorKind::kUnsupported) << e->what();
  EXPECT_NE(std::string(e->what()).find("v5e chip has 1 TensorCore"), std::string::npos)
      << e->what();
}

Array<float> blocked_copy(const Array<float>& x, int64_t rows, const char* chip = "v5e") {
  const pl::BlockSpec spec({rows, 128}, [](int i) { return pl::idx(i, 0); });
  return pl::pallas_call([](pltpu::VmemRef<const float> xv, pltpu::VmemRef<float> ov) { ov = xv; },
                         pl::out_shape<float>(x.shape()), pl::grid({x.shape()[0] / rows}),
                         pl::in_specs(spec), pl::out_specs(spec), pltpu::TensorCoreMesh("core", 1),
                         on_chip(chip))(x);
}

TEST(CheckedRules, BlockShapeLastTwoDims) {
  const Array<float> x = ramp({16, 128});
  const Array<float> o = blocked_copy(x, 8);
  for (int64_t i = 0; i < o.size(); ++i) ASSERT_EQ(o[i], x[i]);
  // Without a chip, blocks of any shape run (this CPU has no tiling rule).
  const Array<float> o4 = blocked_copy(x, 4, "");
  for (int64_t i = 0; i < o4.size(); ++i) ASSERT_EQ(o4[i], x[i]);
  auto e = tessera::testing::catch_error<KernelError>([&] { blocked_copy(x, 4); });
  ASSERT_TRUE(e);
  maybe_print(*e);
  EXPECT_EQ(e->kind(), ErrorKind::kBlockShape) << e->what();
  EXPECT_NE(std::string(e->what()).find("divisible by 8 and 128"), std::string::npos) << e->what();
  EXPECT_NE(std::string(e->what()).find("second-to-last dimension 4"), std::string::npos)
      << e->what();
}

TEST(CheckedRules, BlockShapeRankOne) {
  auto run = [](int64_t n, int64_t b) {
    Array<float> x = ramp({n});
    const pl::BlockSpec spec({b}, [](int i) { return pl::idx(i); });
    return pl::pallas_call(
        [](pltpu::VmemRef<const float> xv, pltpu::VmemRef<float> ov) { ov = xv; },
        pl::out_shape<float>({n}), pl::grid({n / b}), pl::in_specs(spec), pl::out_specs(spec),
        pltpu::TensorCoreMesh("core", 1), on_chip("v6e"))(x);
  };
  EXPECT_EQ(run(1024, 128)[1000], 1000.0f);  // a power of 2 >= 128
  EXPECT_EQ(run(4096, 2048)[4000], 4000.0f);
  auto e = tessera::testing::catch_error<KernelError>([&] { run(128, 64); });
  ASSERT_TRUE(e);
  maybe_print(*e);
  EXPECT_EQ(e->kind(), ErrorKind::kBlockShape) << e->what();
  EXPECT_NE(std::string(e->what()).find("rank-1 block (64,)"), std::string::npos) << e->what();
}

TEST(CheckedRules, MatmulDtypePerGeneration) {
  auto run = [](const char* chip) {
    return pl::kernel(
        pl::out_type<float>({8, 128}), pltpu::TensorCoreMesh("core", 1),
        pl::scratch_types(pltpu::VMEM<bfloat16>({8, 128}), pltpu::VMEM<bfloat16>({128, 128}),
                          pltpu::VMEM<float>({8, 128})),
        on_chip(chip))([](pltpu::HbmRef<float> o, pltpu::VmemRef<bfloat16> x,
                          pltpu::VmemRef<bfloat16> y, pltpu::VmemRef<float> acc) {
      x = jnp::full_like(x, bfloat16(1.0f));
      y = jnp::full_like(y, bfloat16(1.0f));
      // clang-format off
      MARK_LINE; acc = jnp::dot<float>(x, y);
      // clang-format on
      pltpu::sync_copy(acc, o);
    })();
  };
  EXPECT_EQ(run("v5e")[0], 128.0f);
  expect_bug([&] { run("v3"); }, {ErrorKind::kUnsupported, kMarked, 0, {}, "v3"});
}

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

// ---- output revisits --------------------------------------------------------------------------

Array<float> revisit(const Array<float>& x, bool buggy) {
  // grid (2, 2); output block i (buggy: j) — with j the inner axis, block j is revisited at
  // step (1, 0) after being written back at (0, 0).
  return pl::pallas_call(
      [](pltpu::VmemRef<const float> xv, pltpu::VmemRef<float> ov) { ov = xv; },
      pl::out_shape<float>({16, 128}), pl::grid({2, 2}),
      pl::in_specs(pl::BlockSpec({8, 128}, [](int i, int) { return pl::idx(i, 0); })),
      pl::out_specs(
          pl::BlockSpec({8, 128}, [buggy](int i, int j) { return pl::idx(buggy ? j : i, 0); })),
      checked())(x);
}

TEST(CheckedRevisit, NonConsecutiveOutputRevisit) {
  const Array<float> x = ramp({16, 128});
  const Array<float> o = revisit(x, false);
  for (int64_t i = 0; i < o.size(); ++i) ASSERT_EQ(o[i], x[i]);
  auto e = tessera::testing::catch_error<KernelError>([&] { revisit(x, true); });
  ASSERT_TRUE(e);
  maybe_print(*e);
  EXPECT_EQ(e->kind(), ErrorKind::kRevisit) << e->what();
  EXPECT_EQ(e->grid_step(), (std::vector<int64_t>{1, 0})) << e->what();
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

namespace {
// pltpu::ForceTpuInterpretMode runs a kernel that names no InterpretParams checked.
TEST(CheckedForce, ForceTpuInterpretModeChecksUnchangedKernels) {
  auto k = pl::kernel(pl::out_type<float>({128}), pltpu::TensorCoreMesh("core", 1),
                      pl::scratch_types(pltpu::VMEM<float>({128}), pltpu::VMEM<float>({128})))(
      [](pltpu::HbmRef<float> o, pltpu::VmemRef<float> acc, pltpu::VmemRef<float> ov) {
        // clang-format off
        MARK_LINE; ov = acc + jnp::full_like(acc, 1.0f);
        // clang-format on
        pltpu::sync_copy(ov, o);
      });
  static_cast<void>(k());  // native: garbage in, no error
  const pltpu::ForceTpuInterpretMode force;
  expect_bug([&] { k(); }, {ErrorKind::kUninitialized, kMarked, 0, {}, "VMEM scratch #0"});
}
}  // namespace
