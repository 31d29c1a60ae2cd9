// SMEM arrays that stay on the chip between pallas_calls (pltpu::SmemArray, tessera/resident.h):
// one copy per core, taken where it lies with pl::BlockSpec(pltpu::SMEM), counted against each
// core's SMEM, and the source or destination of a copy left in flight from one call to the next.
// Every case runs natively and in checked mode (copies completing at the wait, or at once); every
// planted bug has a clean twin that passes.
#include <gtest/gtest.h>

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "support/expect_error.h"
#include "tessera/tessera.h"

namespace {
using namespace tessera;

using Engine = std::optional<pltpu::InterpretParams>;

std::vector<Engine> engines() {
  pltpu::InterpretParams eager;
  eager.dma_execution_mode = pltpu::DmaExecutionMode::eager;
  return {std::nullopt, pltpu::InterpretParams{}, eager};
}
bool copies_wait(const Engine& e) {  // a copy is still in flight between the calls
  return e && e->dma_execution_mode == pltpu::DmaExecutionMode::on_wait;
}

template <class F>
auto under(const Engine& e, F&& f) {
  std::optional<pltpu::ForceTpuInterpretMode> force;
  if (e) force.emplace(*e);
  return f();
}

constexpr int64_t kN = 16;

pltpu::CompilerParams parallel() { return {.dimension_semantics = {pltpu::PARALLEL}}; }

// One kernel per core (a PARALLEL grid point each) fills its copy: core c writes c * 100 + i.
pltpu::SmemArray<int32_t> fill(int cores) {
  return pl::pallas_call(
      [](pltpu::SmemRef<int32_t> y) {
        const int c = lax::axis_index("core");
        for (int64_t i = 0; i < kN; ++i) y(i) = static_cast<int32_t>(c * 100 + i);
      },
      pl::out_shape(pltpu::SMEM<int32_t>({kN})), pl::out_specs(pl::BlockSpec(pltpu::SMEM)),
      pl::grid({cores}), parallel(), pltpu::TensorCoreMesh("core", cores))();
}

// Each core starts copying its copy of `y` to out[core] on a semaphore the call returns.
auto start_out(const pltpu::SmemArray<int32_t>& y, int cores) {
  return pl::pallas_call(
      [](pltpu::SmemRef<const int32_t> y_ref, pltpu::AnyRef<int32_t> out,
         pltpu::DmaSemaphoreRef sem) {
        pltpu::make_async_copy(y_ref, out.at(lax::axis_index("core")), sem).start();
      },
      pl::out_shape(ShapeDtypeStruct<int32_t>{{cores, kN}}, pltpu::SemaphoreType::DMA),
      pl::in_specs(pl::BlockSpec(pltpu::SMEM)),
      pl::out_specs(pl::BlockSpec(pl::ANY), pl::BlockSpec(pltpu::SEMAPHORE)), pl::grid({cores}),
      parallel(), pltpu::TensorCoreMesh("core", cores))(y);
}

// Each core waits for its copy; the call takes the copy's source `y` and aliases `out`.
Array<int32_t> wait_out(const pltpu::SmemArray<int32_t>& y, const Array<int32_t>& out,
                        const pltpu::DmaSemaphoreArray& sem, int cores) {
  return pl::pallas_call(
      [](pltpu::SmemRef<const int32_t> y_ref, pltpu::AnyRef<const int32_t>,
         pltpu::DmaSemaphoreRef s, pltpu::AnyRef<int32_t> o) {
        pltpu::make_async_copy(y_ref, o.at(lax::axis_index("core")), s).wait();
      },
      pl::out_shape<int32_t>({cores, kN}),
      pl::in_specs(pl::BlockSpec(pltpu::SMEM), pl::BlockSpec(pl::ANY),
                   pl::BlockSpec(pltpu::SEMAPHORE)),
      pl::out_specs(pl::BlockSpec(pl::ANY)), pl::input_output_aliases({{1, 0}}), pl::grid({cores}),
      parallel(), pltpu::TensorCoreMesh("core", cores))(y, out, sem);
}

void expect_filled(const Array<int32_t>& out, int cores, int plus = 0) {
  for (int c = 0; c < cores; ++c) {
    for (int64_t i = 0; i < kN; ++i)
      ASSERT_EQ(out[c * kN + i], c * 100 + i + plus) << c << "," << i;
  }
}

TEST(SmemArrays, CopyFromTheArrayStaysInFlightBetweenCalls) {
  for (int cores : {1, 2}) {
    for (const Engine& e : engines()) {
      under(e, [&] {
        const pltpu::SmemArray<int32_t> y = fill(cores);
        auto [out, sem] = start_out(y, cores);
        for (int c = 0; c < cores; ++c) {
          // Natively (and eagerly) the copy has landed and its bytes wait on the core's
          // semaphore; on_wait it is still in flight.
          EXPECT_EQ(sem.value(0, c), copies_wait(e) ? 0 : kN * 4) << c;
        }
        expect_filled(wait_out(y, out, sem, cores), cores);
        for (int c = 0; c < cores; ++c) EXPECT_EQ(sem.value(0, c), 0);
      });
    }
  }
}

TEST(SmemArrays, EachCoreHasItsOwnCopy) {
  for (const Engine& e : engines()) {
    under(e, [&] {
      const pltpu::SmemArray<int32_t> y = fill(2);
      ASSERT_EQ(y.num_cores(), 2);
      ASSERT_EQ(y.shape(), Shape({kN}));
      for (int64_t i = 0; i < kN; ++i) {
        ASSERT_EQ(y[i], i);  // the array itself is core 0's copy
        ASSERT_EQ(y.core(1)[i], 100 + i);
      }
      // An increment aliased in place: each core adds its index + 1 to its own copy.
      auto add = [](int cores) {
        return pl::pallas_call(
            [](pltpu::SmemRef<const int32_t> in, pltpu::SmemRef<int32_t> o) {
              for (int64_t i = 0; i < kN; ++i) o(i) = in(i) + lax::axis_index("core") + 1;
            },
            pl::out_shape(pltpu::SMEM<int32_t>({kN})), pl::in_specs(pl::BlockSpec(pltpu::SMEM)),
            pl::out_specs(pl::BlockSpec(pltpu::SMEM)), pl::input_output_aliases({{0, 0}}),
            pl::grid({cores}), parallel(), pltpu::TensorCoreMesh("core", cores));
      };
      const pltpu::SmemArray<int32_t> z = add(2)(y);
      for (int64_t i = 0; i < kN; ++i) {
        ASSERT_EQ(z.core(0)[i], i + 1);
        ASSERT_EQ(z.core(1)[i], 100 + i + 2);
      }
      // A call on fewer cores works on the first copies (and its outputs have as many).
      auto [out, sem] = start_out(z, 1);
      const Array<int32_t> o = wait_out(z, out, sem, 1);
      for (int64_t i = 0; i < kN; ++i) ASSERT_EQ(o[i], i + 1);
      const pltpu::SmemArray<int32_t> w = add(1)(z);
      ASSERT_EQ(w.num_cores(), 1);
      for (int64_t i = 0; i < kN; ++i) ASSERT_EQ(w[i], i + 2);
    });
  }
}

TEST(SmemArrays, WaitingWithoutTheArrayRaises) {
  // Planted bug: the call that waits for the copy does not take its source, the SMEM array; on a
  // TPU that SMEM may already hold something else. Its twin takes it and passes. Natively the
  // copy completed within the first call, and both run.
  auto wait_without_y = [](const Array<int32_t>& out, const pltpu::DmaSemaphoreArray& sem) {
    return pl::pallas_call(
        [](pltpu::AnyRef<const int32_t>, pltpu::DmaSemaphoreRef s, pltpu::AnyRef<int32_t> o,
           pltpu::SmemRef<int32_t> stand_in) {
          pltpu::make_async_copy(stand_in, o.at(0), s).wait();  // sizes the wait: kN * 4 bytes
        },
        pl::out_shape<int32_t>({1, kN}),
        pl::in_specs(pl::BlockSpec(pl::ANY), pl::BlockSpec(pltpu::SEMAPHORE)),
        pl::out_specs(pl::BlockSpec(pl::ANY)), pl::input_output_aliases({{0, 0}}),
        pl::scratch_shapes(pltpu::SMEM<int32_t>({kN})), pltpu::TensorCoreMesh("core", 1))(out, sem);
  };
  for (const Engine& e : engines()) {
    for (int twin = 0; twin < 2; ++twin) {
      under(e, [&] {
        const pltpu::SmemArray<int32_t> y = fill(1);
        auto [out, sem] = start_out(y, 1);
        if (twin == 1) return expect_filled(wait_out(y, out, sem, 1), 1);
        if (!e) return expect_filled(wait_without_y(out, sem), 1);
        auto err = tessera::testing::catch_error<KernelError>([&] { wait_without_y(out, sem); });
        ASSERT_TRUE(err);
        EXPECT_EQ(err->kind(), ErrorKind::kInvalidArgument);
        EXPECT_NE(std::string(err->what()).find("does not take its source array (int32 (16,))"),
                  std::string::npos)
            << err->what();
      });
    }
  }
}

// A copy from HBM into a fresh SMEM array (an output), left in flight on the semaphore returned.
auto start_in(const Array<int32_t>& x) {
  return pl::pallas_call(
      [](pltpu::AnyRef<const int32_t> x_ref, pltpu::SmemRef<int32_t> y,
         pltpu::DmaSemaphoreRef sem) { pltpu::make_async_copy(x_ref, y, sem).start(); },
      pl::out_shape(pltpu::SMEM<int32_t>({kN}), pltpu::SemaphoreType::DMA),
      pl::in_specs(pl::BlockSpec(pl::ANY)),
      pl::out_specs(pl::BlockSpec(pltpu::SMEM), pl::BlockSpec(pltpu::SEMAPHORE)),
      pltpu::TensorCoreMesh("core", 1))(x);
}

TEST(SmemArrays, ReadingTheArrayBeforeTheCopyIntoItIsWaitedRaises) {
  // Planted bug: the next call reads the SMEM array while the copy into it may still be landing.
  // Its twin waits first. Natively the copy landed within the first call, and both read x.
  const Array<int32_t> x(Shape{kN}, std::vector<int32_t>(kN, 7));
  for (const Engine& e : engines()) {
    for (bool wait_first : {true, false}) {
      under(e, [&] {
        auto [y, sem] = start_in(x);
        int line = 0;
        auto f = pl::pallas_call(
            [&](pltpu::AnyRef<const int32_t> x_ref, pltpu::SmemRef<const int32_t> y_in,
                pltpu::DmaSemaphoreRef s, pltpu::SmemRef<int32_t> y_out) {
              auto copy = pltpu::make_async_copy(x_ref, y_out, s);
              if (wait_first) copy.wait();
              line = __LINE__ + 1;
              const int32_t first = y_in(0);
              if (!wait_first) copy.wait();
              y_out(0) = first + 1;
            },
            pl::out_shape(pltpu::SMEM<int32_t>({kN})),
            pl::in_specs(pl::BlockSpec(pl::ANY), pl::BlockSpec(pltpu::SMEM),
                         pl::BlockSpec(pltpu::SEMAPHORE)),
            pl::out_specs(pl::BlockSpec(pltpu::SMEM)), pl::input_output_aliases({{1, 0}}),
            pltpu::TensorCoreMesh("core", 1));
        if (wait_first || !e) {
          const pltpu::SmemArray<int32_t> z = f(x, y, sem);
          EXPECT_EQ(z[0], 8);
          EXPECT_EQ(z[kN - 1], 7);
          return;
        }
        auto err = tessera::testing::catch_error<KernelError>([&] { f(x, y, sem); });
        ASSERT_TRUE(err);
        EXPECT_EQ(err->kind(), ErrorKind::kRace) << err->what();
        EXPECT_EQ(static_cast<int>(err->where().line()), line) << err->what();
        EXPECT_NE(std::string(err->what()).find("reads SMEM output 0"), std::string::npos)
            << err->what();
      });
    }
  }
}

TEST(SmemArrays, WritingTheArrayBeforeTheCopyFromItIsWaitedRaises) {
  // Planted bug: the call that waits for the copy out of the SMEM array first overwrites the
  // array. Its twin waits first.
  for (const Engine& e : engines()) {
    for (bool wait_first : {true, false}) {
      under(e, [&] {
        const pltpu::SmemArray<int32_t> y = fill(1);
        auto [out, sem] = start_out(y, 1);
        int line = 0;
        auto f = pl::pallas_call(
            [&](pltpu::SmemRef<const int32_t>, pltpu::AnyRef<const int32_t>,
                pltpu::DmaSemaphoreRef s, pltpu::SmemRef<int32_t> y_ref, pltpu::AnyRef<int32_t> o) {
              auto copy = pltpu::make_async_copy(y_ref, o.at(0), s);
              if (wait_first) copy.wait();
              line = __LINE__ + 1;
              y_ref(0) = -1;
              if (!wait_first) copy.wait();
            },
            pl::out_shape(pltpu::SMEM<int32_t>({kN}), ShapeDtypeStruct<int32_t>{{1, kN}}),
            pl::in_specs(pl::BlockSpec(pltpu::SMEM), pl::BlockSpec(pl::ANY),
                         pl::BlockSpec(pltpu::SEMAPHORE)),
            pl::out_specs(pl::BlockSpec(pltpu::SMEM), pl::BlockSpec(pl::ANY)),
            pl::input_output_aliases({{0, 0}, {1, 1}}), pltpu::TensorCoreMesh("core", 1));
        if (wait_first || !e) {
          auto [y2, o] = f(y, out, sem);
          EXPECT_EQ(y2[0], -1);
          expect_filled(o, 1);  // natively the copy had landed before the write
          return;
        }
        auto err = tessera::testing::catch_error<KernelError>([&] { f(y, out, sem); });
        ASSERT_TRUE(err);
        EXPECT_EQ(err->kind(), ErrorKind::kRace) << err->what();
        EXPECT_EQ(static_cast<int>(err->where().line()), line) << err->what();
        EXPECT_NE(std::string(err->what()).find("may still be reading it"), std::string::npos)
            << err->what();
      });
    }
  }
}

// Runs f, expecting a UsageError of `kind` saying `says`, located in this file between lines lo
// and hi (a pallas_call's errors point at its pl::grid, else its pl::out_shape, else its mesh).
template <class F>
void expect_usage(F&& f, ErrorKind kind, const std::string& says, int lo, int hi) {
  auto e = tessera::testing::catch_error<UsageError>(f);
  ASSERT_TRUE(e);
  EXPECT_EQ(e->kind(), kind) << e->what();
  EXPECT_NE(std::string(e->what()).find(says), std::string::npos)
      << e->what() << "\nexpected: " << says;
  EXPECT_GE(static_cast<int>(e->where().line()), lo) << e->what();
  EXPECT_LE(static_cast<int>(e->where().line()), hi) << e->what();
  EXPECT_NE(std::string(e->where().file_name()).find("resident_smem_test.cc"), std::string::npos);
}

TEST(SmemArrays, CountAgainstEachCoresSmem) {
  // 300000 int32 (1.2 MB) do not fit a core's 1 MiB of SMEM.
  const int big_line = __LINE__ + 1;
  auto big = pl::pallas_call(
      [](pltpu::SmemRef<int32_t> y) { y(0) = 1; }, pl::out_shape(pltpu::SMEM<int32_t>({300000})),
      pl::out_specs(pl::BlockSpec(pltpu::SMEM)), pltpu::TensorCoreMesh("core", 1));
  expect_usage([&] { big(); }, ErrorKind::kCapacityExceeded,
               "largest buffers: output 0: the SMEM array SMEM<int32>(300000,) = 1200000 bytes",
               big_line, big_line + 3);
  // 32 KiB fit here but not in a v3 TensorCore's 16 KiB of SMEM.
  const int mid_line = __LINE__ + 1;
  auto mid = pl::pallas_call(
      [](pltpu::SmemRef<int32_t> y) { y(0) = 1; }, pl::out_shape(pltpu::SMEM<int32_t>({8192})),
      pl::out_specs(pl::BlockSpec(pltpu::SMEM)), pltpu::TensorCoreMesh("core", 1));
  EXPECT_EQ(mid()[0], 1);
  pltpu::InterpretParams v3;
  v3.chip = "v3";
  expect_usage([&] { under(v3, [&] { return mid(); }); }, ErrorKind::kCapacityExceeded,
               "a v3 TensorCore has 16384 bytes; largest buffers: output 0: the SMEM array "
               "SMEM<int32>(8192,) = 32768 bytes",
               mid_line, mid_line + 3);
  // The array and SMEM scratch share the core's SMEM: 600 KB of each do not fit.
  const int both_line = __LINE__ + 1;
  auto both = pl::pallas_call(
      [](pltpu::SmemRef<float>, pltpu::SmemRef<float>) {},
      pl::out_shape(pltpu::SMEM<float>({150000})), pl::out_specs(pl::BlockSpec(pltpu::SMEM)),
      pl::scratch_shapes(pltpu::SMEM<float>({150000})), pltpu::TensorCoreMesh("core", 1));
  expect_usage([&] { both(); }, ErrorKind::kCapacityExceeded,
               "scratch needs 1200000 bytes of SMEM per core", both_line, both_line + 4);
}

TEST(SmemArrays, MisuseIsReportedBeforeLaunch) {
  const pltpu::SmemArray<int32_t> y = fill(1);
  const pl::BlockSpec smem(pltpu::SMEM);
  auto copy_first = [](pltpu::SmemRef<const int32_t> in, pltpu::SmemRef<int32_t> o) {
    o(0) = in(0);
  };
  // Taken by a call on more cores than have a copy.
  const int two_line = __LINE__ + 1;
  auto two = pl::pallas_call(copy_first, pl::out_shape(pltpu::SMEM<int32_t>({1})),
                             pl::in_specs(smem), pl::out_specs(smem), pl::grid({2}), parallel(),
                             pltpu::TensorCoreMesh("core", 2));
  expect_usage([&] { two(y); }, ErrorKind::kInvalidArgument,
               "input 0 is an SMEM array with 1 copy (one per core of the call that made it), "
               "but this call runs on 2 cores",
               two_line, two_line + 2);
  // A copy assigned an array of another shape.
  pltpu::SmemArray<int32_t> odd = fill(2);
  odd.core(1) = Array<int32_t>(Shape{3});
  expect_usage([&] { two(odd); }, ErrorKind::kShapeMismatch,
               "the SmemArray's copy for core 1 has shape (3,) but core 0's has (16,)", two_line,
               two_line + 2);
  // Taken in VMEM: it lives in SMEM.
  const pl::BlockSpec vmem(pltpu::VMEM);
  const int vmem_line = __LINE__ - 1;
  auto in_vmem =
      pl::pallas_call([](pltpu::VmemRef<const int32_t>, pltpu::SmemRef<int32_t> o) { o(0) = 0; },
                      pl::out_shape(pltpu::SMEM<int32_t>({1})), pl::in_specs(vmem),
                      pl::out_specs(smem), pltpu::TensorCoreMesh("core", 1));
  expect_usage([&] { in_vmem(y); }, ErrorKind::kInvalidArgument,
               "input 0 is an SMEM array (each core's copy lives in its SMEM), but its BlockSpec "
               "puts it in VMEM",
               vmem_line, vmem_line);
  // Aliased to an output that is not an SMEM array.
  const int alias_line = __LINE__ + 1;
  auto to_hbm =
      pl::pallas_call([](pltpu::SmemRef<const int32_t>, pltpu::SmemRef<int32_t> o) { o(0) = 0; },
                      pl::out_shape<int32_t>({kN}), pl::in_specs(smem), pl::out_specs(smem),
                      pl::input_output_aliases({{0, 0}}), pltpu::TensorCoreMesh("core", 1));
  expect_usage([&] { to_hbm(y); }, ErrorKind::kInvalidArgument,
               "input_output_aliases {0: 0}: input 0 is an SMEM array but output 0 is not",
               alias_line, alias_line + 3);
  // A core without a copy, a negative core.
  const int core_line = __LINE__ + 1;
  EXPECT_TESSERA_ERROR(y.core(1), UsageError, ErrorKind::kOutOfBounds,
                       "core 1 is outside 0..0; 1 core of the call that made the array has a copy",
                       core_line);
  const pltpu::DmaSemaphoreArray sem(Shape{});
  EXPECT_EQ(sem.value(0, 3), 0);  // no call ran there
  const int sem_line = __LINE__ + 1;
  EXPECT_TESSERA_ERROR(sem.value(0, -1), UsageError, ErrorKind::kOutOfBounds, "core -1 is negative",
                       sem_line);
}

}  // namespace
