// Remote copies that stay in flight between calls (docs/devices.md): a pallas_call on every
// device of a mesh starts a remote copy on semaphores it returns, and later calls wait for it,
// wait_send on the sender and wait_recv on the receiver (Pallas' make_async_remote_copy helpers
// of tpu_pallas_async_test). Each case runs natively and in checked mode (every DMA execution
// mode), and each planted bug has a clean twin: a read of the destination or a write of the
// source before the wait in the later call, a copy never waited, a waiting call that does not
// take the destination; and the refusals (a launch without semaphore operands still must take
// everything sent to it before it ends).
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

enum class Bug {
  kNone,
  kReadDestinationBeforeWaitRecv,
  kWriteSourceBeforeWaitSend,
  kNeverWaitRecv,
  kNeverWaitSend,
  kWaitWithoutDestination,
};

// The line of the copy's .start(), written by every device's thread (the same value).
std::atomic<int> g_start_line{0};

// One (1, 8, 128) block per device; the copy goes to the right neighbour.
struct Program {
  std::optional<Params> engine;
  Bug bug = Bug::kNone;
  bool remote_waits = false;  // wait with remote descriptors (wait_send / wait_recv)

  // pallas_call(body, options...)(args...), checked with `engine` when set (an option of the
  // call: every device's calls run at once, so a process-wide force would race).
  template <class Body, class... A, class... O>
  auto call(Body body, const std::tuple<const A&...>& args, O... options) const {
    auto go = [&](const auto& f) { return std::apply(f, args); };
    if (engine) return go(pl::pallas_call(body, options..., *engine));
    return go(pl::pallas_call(body, options...));
  }

  auto start(const Array<float>& x) const {
    return call(
        [](pltpu::AnyRef<const float> x_ref, pltpu::AnyRef<float>, pltpu::AnyRef<float> o_ref,
           pltpu::DmaSemaphoreRef send, pltpu::DmaSemaphoreRef recv) {
          const int n = lax::axis_size("x");
          const int me = lax::axis_index("x");
          auto barrier = pltpu::get_barrier_semaphore();
          pl::semaphore_signal(barrier, 1, pl::device_id((me + n - 1) % n));
          pl::semaphore_wait(barrier, 1);
          g_start_line.store(__LINE__ + 1);
          pltpu::make_async_remote_copy(x_ref, o_ref, send, recv, (me + 1) % n).start();
        },
        std::forward_as_tuple(x),
        pl::out_shape(ShapeDtypeStruct<float>{x.shape()}, ShapeDtypeStruct<float>{x.shape()},
                      pltpu::SemaphoreType::DMA, pltpu::SemaphoreType::DMA),
        pl::in_specs(pl::BlockSpec(pl::ANY)),
        pl::out_specs(pl::BlockSpec(pl::ANY), pl::BlockSpec(pl::ANY),
                      pl::BlockSpec(pltpu::SEMAPHORE), pl::BlockSpec(pltpu::SEMAPHORE)),
        pl::input_output_aliases({{0, 0}}), pltpu::CompilerParams{.collective_id = 0},
        pl::name("copy_start"));
  }

  // Waits for the bytes to leave x (aliased to the output); the bug overwrites x first.
  Array<float> send_done(const Array<float>& x, const pltpu::DmaSemaphoreArray& sem) const {
    return call(
        [bug = bug, remote = remote_waits](pltpu::AnyRef<const float> x_ref,
                                           pltpu::DmaSemaphoreRef s, pltpu::AnyRef<float> o_ref,
                                           pltpu::VmemRef<float> v) {
          v = jnp::zeros_like(v);
          if (bug == Bug::kWriteSourceBeforeWaitSend) pltpu::sync_copy(v, o_ref);
          if (remote) {
            const int n = lax::axis_size("x");
            pltpu::make_async_remote_copy(x_ref, o_ref, s, s, (lax::axis_index("x") + 1) % n)
                .wait_send();
          } else {
            pltpu::make_async_copy(x_ref, o_ref, s).wait();
          }
        },
        std::forward_as_tuple(x, sem), pl::out_shape<float>(x.shape()),
        pl::in_specs(pl::BlockSpec(pl::ANY), pl::BlockSpec(pltpu::SEMAPHORE)),
        pl::out_specs(pl::BlockSpec(pl::ANY)), pl::input_output_aliases({{0, 0}}),
        pl::scratch_shapes(pltpu::VMEM<float>(x.shape())), pl::name("send_done"));
  }

  // Waits for the bytes to land in `out` (aliased to the output), then reads them; the bug reads
  // first.
  Array<float> recv_done(const Array<float>& x, const Array<float>& out,
                         const pltpu::DmaSemaphoreArray& sem) const {
    return call(
        [bug = bug, remote = remote_waits](pltpu::AnyRef<const float> x_ref,
                                           pltpu::AnyRef<const float>, pltpu::DmaSemaphoreRef s,
                                           pltpu::AnyRef<float> o_ref, pltpu::VmemRef<float> v) {
          if (bug == Bug::kReadDestinationBeforeWaitRecv) pltpu::sync_copy(o_ref, v);
          if (remote) {
            const int n = lax::axis_size("x");
            pltpu::make_async_remote_copy(x_ref, o_ref, s, s, (lax::axis_index("x") + 1) % n)
                .wait_recv();
          } else {
            pltpu::make_async_copy(x_ref, o_ref, s).wait();
          }
          pltpu::sync_copy(o_ref, v);
        },
        std::forward_as_tuple(x, out, sem), pl::out_shape<float>(x.shape()),
        pl::in_specs(pl::BlockSpec(pl::ANY), pl::BlockSpec(pl::ANY),
                     pl::BlockSpec(pltpu::SEMAPHORE)),
        pl::out_specs(pl::BlockSpec(pl::ANY)), pl::input_output_aliases({{1, 0}}),
        pl::scratch_shapes(pltpu::VMEM<float>(x.shape())), pl::name("recv_done"));
  }

  // A wait that takes the semaphore but not the destination (the descriptor names scratch).
  void recv_done_without_destination(const Array<float>& x,
                                     const pltpu::DmaSemaphoreArray& sem) const {
    call([](pltpu::AnyRef<const float> x_ref, pltpu::DmaSemaphoreRef s,
            pltpu::VmemRef<float> v) { pltpu::make_async_copy(x_ref, v, s).wait(); },
         std::forward_as_tuple(x, sem),
         pl::in_specs(pl::BlockSpec(pl::ANY), pl::BlockSpec(pltpu::SEMAPHORE)),
         pl::scratch_shapes(pltpu::VMEM<float>(x.shape())), pl::name("recv_done_no_dst"));
  }

  // One device's part: `rounds` times start, send_done, recv_done (the result carried round).
  Array<float> device(const Array<float>& xs, int rounds) const {
    Array<float> carry = xs;
    for (int i = 0; i < rounds; ++i) {
      auto [x1, out, send, recv] = start(carry);
      if (!engine) {
        // Natively the copy moved at its start: both semaphores hold its bytes between calls.
        EXPECT_EQ(send.value(), 4096);
        EXPECT_EQ(recv.value(), 4096);
      }
      Array<float> x2 = x1;
      if (bug != Bug::kNeverWaitSend) x2 = send_done(x1, send);
      if (bug == Bug::kNeverWaitRecv) return x2;
      if (bug == Bug::kWaitWithoutDestination) {
        recv_done_without_destination(x2, recv);
        return out;
      }
      carry = recv_done(x2, out, recv);
    }
    return carry;
  }

  // The program on `n` devices, `rounds` rounds; returns the joined result.
  Array<float> run(const Array<float>& x, int n, int rounds = 1) const {
    return jax::shard_map([&](const Array<float>& xs) { return device(xs, rounds); },
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
