// Remote copies that stay in flight between calls (docs/devices.md): a pallas_call on every
// device of a mesh starts a remote copy on semaphores it returns, and later calls wait for it,
// wait_send on the sender and wait_recv on the receiver (Pallas' make_async_remote_copy helpers
// of tpu_pallas_async_test). Each case runs natively and in checked mode (every DMA execution
// mode), and each planted bug has a clean twin: a read of the destination or a write of the
// source before the wait in the later call, a copy never waited, a waiting call that does not
// take the destination; and the refusals (a launch without semaphore operands still must take
// everything sent to it before it ends).
#include "support/remote_in_flight.h"

#include <gtest/gtest.h>

#include <atomic>
#include <cstdlib>
#include <iostream>
#include <optional>
#include <string>
#include <tuple>
#include <vector>

#include "support/expect_error.h"
#include "tessera/tessera.h"

namespace {
using namespace tessera;

using Mode = pltpu::DmaExecutionMode;
using Params = pltpu::InterpretParams;

// Natively, then checked in every DMA execution mode (random with two seeds).
const std::optional<Params> kEngines[] = {
    std::nullopt, Params{.dma_execution_mode = Mode::eager},
    Params{.dma_execution_mode = Mode::on_wait},
    Params{.dma_execution_mode = Mode::random, .random_seed = 1},
    Params{.dma_execution_mode = Mode::random, .random_seed = 2}};

bool contains(const std::string& s, const std::string& part) {
  return s.find(part) != std::string::npos;
}

using Bug = tessera::testing::Bug;
using tessera::testing::g_start_line;

// The shared program (tests/support/remote_in_flight.h), joined over `n` in-process devices.
struct Program : tessera::testing::RemoteInFlightProgram {
  Program(std::optional<Params> e, Bug b = Bug::kNone, bool remote = false)
      : RemoteInFlightProgram{e, b, remote} {}

  // The program on `n` devices, `rounds` rounds; returns the joined result.
  Array<float> run(const Array<float>& x, int n, int rounds = 1) const {
    const bool native = !engine;
    auto counts = [native](int64_t send, int64_t recv) {
      if (!native) return;
      // Natively the copy moved at its start: both semaphores hold its bytes between calls.
      EXPECT_EQ(send, 4096);
      EXPECT_EQ(recv, 4096);
    };
    return jax::shard_map([&](const Array<float>& xs) { return device(xs, rounds, counts); },
                          jax::make_mesh({n}, {"x"}), P("x"), P("x"))(x);
  }
};

Array<float> input(int n) {
  Array<float> x({n, 8, 128});
  for (int64_t i = 0; i < x.size(); ++i) x[i] = static_cast<float>(i % 1000) * 0.25f - 7.0f;
  return x;
}

// After `rounds` rounds every block has moved `rounds` devices to the right.
void expect_rolled(const Array<float>& y, const Array<float>& x, int n, int rounds) {
  const int64_t row = 8 * 128;
  for (int64_t d = 0; d < n; ++d) {
    const int64_t from = ((d - rounds) % n + n) % n;
    for (int64_t k = 0; k < row; ++k) ASSERT_EQ(y[d * row + k], x[from * row + k]) << d << "," << k;
  }
}

TEST(RemoteInFlight, StartedInOneCallWaitedInLaterOnes) {
  for (const auto& engine : kEngines) {
    for (int n : {2, 3}) {
      for (bool remote_waits : {false, true}) {
        const Program p{engine, Bug::kNone, remote_waits};
        const Array<float> x = input(n);
        expect_rolled(p.run(x, n, 3), x, n, 3);
      }
    }
  }
}

TEST(RemoteInFlight, OneDeviceSendsToItself) {
  for (const auto& engine : kEngines) {
    const Program p{engine};
    const Array<float> x = input(1);
    expect_rolled(p.run(x, 1, 2), x, 1, 2);
  }
}

// A copy a checked call left in flight completes when a native call takes it in.
TEST(RemoteInFlight, ANativeCallCompletesWhatACheckedOneCarried) {
  const Program checked{Params{.dma_execution_mode = Mode::on_wait}};
  const Program native{std::nullopt};
  const Array<float> x = input(2);
  const Array<float> y = jax::shard_map(
      [&](const Array<float>& xs) {
        auto [x1, out, send, recv] = checked.start(xs);
        const Array<float> x2 = native.send_done(x1, send);
        return native.recv_done(x2, out, recv);
      },
      jax::make_mesh({2}, {"x"}), P("x"), P("x"))(x);
  expect_rolled(y, x, 2, 1);
}

// Expects `f` to raise E of `kind` at `line` whose message contains every one of `says`.
template <class E = KernelError, class F>
void expect_error(F&& f, ErrorKind kind, int line, std::initializer_list<const char*> says) {
  auto e = tessera::testing::catch_error<E>(f);
  ASSERT_TRUE(e);
  // TESSERA_PRINT_DIAGNOSTICS=1 prints each message (docs/devices.md quotes them).
  if (std::getenv("TESSERA_PRINT_DIAGNOSTICS") != nullptr) std::cerr << e->what() << "\n\n";
  EXPECT_EQ(e->kind(), kind) << e->what();
  if (line > 0) {
    EXPECT_EQ(static_cast<int>(e->where().line()), line) << e->what();
  }
  for (const char* s : says)
    EXPECT_TRUE(contains(e->what(), s)) << e->what() << "\nexpected: " << s;
}

// Checked, in every mode: the bug is reported; its twin (the same statement after the wait)
// passes, and natively the buggy program runs (nothing there tells a copy in flight).
template <class Check>
void planted(Bug bug, Check&& check) {
  const Array<float> x = input(2);
  for (const auto& engine : kEngines) {
    if (!engine) {
      (void)Program{engine, bug}.run(x, 2);
      continue;
    }
    check(Program{*engine, bug}, x);
    expect_rolled(Program{*engine}.run(x, 2), x, 2, 1);
  }
}

TEST(RemoteInFlight, ReadingTheDestinationBeforeWaitRecvInTheNextCallIsARace) {
  planted(Bug::kReadDestinationBeforeWaitRecv, [](const Program& p, const Array<float>& x) {
    expect_error([&] { p.run(x, 2); }, ErrorKind::kRace, 0,
                 {"this copy reads what the other writes",
                  "the remote copy of float32 (1, 8, 128) from device", "still in flight"});
  });
}

TEST(RemoteInFlight, WritingTheSourceBeforeWaitSendInTheNextCallIsARace) {
  planted(Bug::kWriteSourceBeforeWaitSend, [](const Program& p, const Array<float>& x) {
    expect_error([&] { p.run(x, 2); }, ErrorKind::kRace, 0,
                 {"this copy writes what the other reads",
                  "the remote copy of float32 (1, 8, 128) from device"});
  });
}

TEST(RemoteInFlight, ACopyNeverWaitRecvedLeaksAtTheEndOfTheProgram) {
  planted(Bug::kNeverWaitRecv, [](const Program& p, const Array<float>& x) {
    expect_error<UsageError>([&] { p.run(x, 2); }, ErrorKind::kSemaphoreLeak, g_start_line.load(),
                             {"the program ends with the remote copy of float32 (1, 8, 128)",
                              "'s recv_sem: no wait_recv took its 4096 bytes",
                              "every remote copy needs a wait_send on its sender and a wait_recv "
                              "on its receiver"});
  });
}

TEST(RemoteInFlight, ACopyNeverWaitSentLeaksAtTheEndOfTheProgram) {
  planted(Bug::kNeverWaitSend, [](const Program& p, const Array<float>& x) {
    expect_error<UsageError>([&] { p.run(x, 2); }, ErrorKind::kSemaphoreLeak, g_start_line.load(),
                             {"'s send_sem: no wait_send took its 4096 bytes"});
  });
}

TEST(RemoteInFlight, TheWaitingCallMustTakeTheDestination) {
  planted(Bug::kWaitWithoutDestination, [](const Program& p, const Array<float>& x) {
    expect_error([&] { p.run(x, 2); }, ErrorKind::kInvalidArgument, g_start_line.load(),
                 {"is still in flight on semaphore 0 of input 1",
                  "this call does not take its destination array (float32 (1, 8, 128))"});
  });
}

// A kernel whose semaphores are scratch still must take everything sent to it before it ends:
// the device that receives and leaves at once is gone when the copy comes.
TEST(RemoteInFlight, WithScratchSemaphoresTheReceiverMustWaitInTheKernel) {
  auto k = pl::kernel(
      pl::out_type<float>({8, 128}), pltpu::TensorCoreMesh("core", 1),
      pl::scratch_types(pltpu::VMEM<float>({8, 128}), pltpu::SemaphoreType::DMA,
                        pltpu::SemaphoreType::DMA),
      pl::name("leaves_early"))([](pltpu::HbmRef<float> o, pltpu::VmemRef<float> v,
                                   pltpu::DmaSemaphoreRef send, pltpu::DmaSemaphoreRef recv) {
    v = jnp::ones_like(v);
    if (lax::axis_index("x") == 0) {
      auto copy = pltpu::make_async_remote_copy(v, o, send, recv, 1);
      copy.start();
      copy.wait_send();
    }
    // Device 1 ends here without wait_recv.
  });
  auto e = tessera::testing::catch_error<Error>([&] {
    jax::shard_map([&] { (void)k(); }, jax::make_mesh({2}, {"x"}),
                   PartitionSpecs(std::vector<PartitionSpec>{}),
                   PartitionSpecs(std::vector<PartitionSpec>{}))();
  });
  // Natively device 1 may leave before or after the copy lands: an error either way (it lands
  // on a semaphore left non-zero, or finds the device gone).
  ASSERT_TRUE(e);
  EXPECT_TRUE(e->kind() == ErrorKind::kSemaphoreLeak || e->kind() == ErrorKind::kInvalidArgument)
      << e->what();
}

// Two cores per device, each sending its half of the block on its own semaphores; each core of
// the later calls waits for its own half.
TEST(RemoteInFlight, EveryCoreCarriesItsOwnCopies) {
  const int n = 2;
  Array<float> x({n, 16, 128});
  for (int64_t i = 0; i < x.size(); ++i) x[i] = static_cast<float>(i);
  const auto half_spec = pl::BlockSpec(pl::ANY);
  const pltpu::CompilerParams parallel{.dimension_semantics = {pltpu::PARALLEL}};
  for (const auto& engine : kEngines) {
    const Program p{engine};
    auto start = [&](const Array<float>& xs) {
      return p.call(
          [](pltpu::AnyRef<const float> x_ref, pltpu::AnyRef<float>, pltpu::AnyRef<float> o_ref,
             pltpu::DmaSemaphoreRef send, pltpu::DmaSemaphoreRef recv) {
            const int64_t c = pl::program_id(0);
            const int me = lax::axis_index("x");
            const auto rows = pl::ds(8 * c, 8);
            pltpu::make_async_remote_copy(x_ref.at(0, rows), o_ref.at(0, rows), send, recv,
                                          (me + 1) % 2)
                .start();
          },
          std::forward_as_tuple(xs),
          pl::out_shape(ShapeDtypeStruct<float>{{1, 16, 128}},
                        ShapeDtypeStruct<float>{{1, 16, 128}}, pltpu::SemaphoreType::DMA,
                        pltpu::SemaphoreType::DMA),
          pl::grid({2}), pl::in_specs(half_spec),
          pl::out_specs(half_spec, half_spec, pl::BlockSpec(pltpu::SEMAPHORE),
                        pl::BlockSpec(pltpu::SEMAPHORE)),
          pl::input_output_aliases({{0, 0}}), parallel, pltpu::TensorCoreMesh("core", 2));
    };
    auto done = [&](const Array<float>& x1, const Array<float>& out,
                    const pltpu::DmaSemaphoreArray& send, const pltpu::DmaSemaphoreArray& recv) {
      return p.call(
          [](pltpu::AnyRef<const float> x_ref, pltpu::AnyRef<const float>,
             pltpu::DmaSemaphoreRef send_sem, pltpu::DmaSemaphoreRef recv_sem,
             pltpu::AnyRef<float> o_ref) {
            const auto rows = pl::ds(8 * pl::program_id(0), 8);
            pltpu::make_async_copy(x_ref.at(0, rows), o_ref.at(0, rows), send_sem).wait();
            pltpu::make_async_copy(x_ref.at(0, rows), o_ref.at(0, rows), recv_sem).wait();
          },
          std::forward_as_tuple(x1, out, send, recv), pl::out_shape<float>({1, 16, 128}),
          pl::grid({2}),
          pl::in_specs(half_spec, half_spec, pl::BlockSpec(pltpu::SEMAPHORE),
                       pl::BlockSpec(pltpu::SEMAPHORE)),
          pl::out_specs(half_spec), pl::input_output_aliases({{1, 0}}), parallel,
          pltpu::TensorCoreMesh("core", 2));
    };
    const Array<float> y = jax::shard_map(
        [&](const Array<float>& xs) {
          auto [x1, out, send, recv] = start(xs);
          return done(x1, out, send, recv);
        },
        jax::make_mesh({n}, {"x"}), P("x"), P("x"))(x);
    for (int64_t i = 0; i < x.size(); ++i) {
      ASSERT_EQ(y[i], x[(i + 16 * 128) % x.size()]) << i << (engine ? " checked" : " native");
    }
  }
}

}  // namespace
