// Run by ctest under mpirun (label mpi): a remote copy on semaphores a pallas_call returns stays
// in flight into later calls (docs/devices.md), with the program of the in-process tests
// (tests/support/remote_in_flight.h), each rank one device: natively and checked, several rounds
// in a row, each device's block landing on its right neighbour; checked, the planted bugs are
// reported on every rank (a read of the destination before wait_recv or a write of the source
// before wait_send in the later call, a copy never waited, a waiting call that does not take the
// destination); and the same program on an in-process mesh (mesh.in_process()).
#include <tessera/tessera.h>

#include <iostream>
#include <optional>
#include <string>

#include "mpi_expect.h"
#include "support/remote_in_flight.h"

namespace {
using namespace tessera;
using mpi_expect::expect_error;
using mpi_expect::wrong;
using tessera::testing::Bug;
using Program = tessera::testing::RemoteInFlightProgram;

constexpr int64_t kBlock = 8 * 128;

// The program on `mesh`, `rounds` rounds. Under MPI each rank passes its own shard (block
// `rank`); in process the whole array. `between` sees the semaphores' counts between calls.
Array<float> run(const Program& p, const Mesh& mesh, int rounds,
                 const std::function<void(int64_t, int64_t)>& between = {}) {
  const bool ranks = !mesh.is_in_process();
  Array<float> x({ranks ? 1 : mesh.size(), 8, 128});
  const int64_t first = ranks ? int64_t{jax::process_index()} * x.size() : 0;
  for (int64_t i = 0; i < x.size(); ++i) x[i] = static_cast<float>(first + i);
  return jax::shard_map([&](const Array<float>& xs) { return p.device(xs, rounds, between); }, mesh,
                        P("x"), P("x"))(x);
}

// After `rounds` rounds block b holds block b - rounds's values.
void expect_rolled(const std::string& how, const Array<float>& y, int rounds) {
  const int rank = jax::process_index();
  const int64_t first = y.shape()[0] == 1 ? static_cast<int64_t>(rank) * kBlock : 0;
  const int64_t total = static_cast<int64_t>(jax::device_count()) * kBlock;
  for (int64_t i = 0; i < y.size(); ++i) {
    const int64_t g = first + i;
    const int64_t want = ((g - rounds * kBlock) % total + total) % total;
    if (y[i] != static_cast<float>(want)) {
      wrong(how + ": value at " + std::to_string(i) + " is " + std::to_string(y[i]) +
            ", expected " + std::to_string(want));
      return;
    }
  }
}

// A remote signal on a semaphore a pallas_call returns, waited for in a later call: each device
// signals its right neighbour's, whose count holds the signal between the calls.
void signalled(const std::string& how, std::optional<pltpu::InterpretParams> engine) {
  mpi_expect::expect_clean(how, [&] {
    mpi_expect::run_program([&] {
      auto body = [](pltpu::SemaphoreRef sem) {
        const int n = lax::axis_size("x");
        pl::semaphore_signal(sem, 1, pl::device_id((lax::axis_index("x") + 1) % n));
      };
      auto signal = [&](auto... options) {
        return pl::pallas_call(body, pl::out_shape(pltpu::SemaphoreType::REGULAR),
                               pl::out_specs(pl::BlockSpec(pltpu::SEMAPHORE)), pl::name("signal"),
                               options...)();
      };
      const pltpu::RegularSemaphoreArray sem = engine ? signal(*engine) : signal();
      if (sem.value() != 1) wrong(how + ": count " + std::to_string(sem.value()) + ", expected 1");
      auto wait = [](pltpu::SemaphoreRef s) { pl::semaphore_wait(s, 1); };
      auto waiter = [&](auto... options) {
        pl::pallas_call(wait, pl::in_specs(pl::BlockSpec(pltpu::SEMAPHORE)), pl::name("wait"),
                        options...)(sem);
      };
      engine ? waiter(*engine) : waiter();
      if (sem.value() != 0) wrong(how + ": count " + std::to_string(sem.value()) + " after wait");
    });
  });
}

void clean(const std::string& how, const Program& p, const Mesh& mesh, int rounds) {
  mpi_expect::expect_clean(how, [&] { expect_rolled(how, run(p, mesh, rounds), rounds); });
}

}  // namespace

int main(int argc, char** argv) {
  if (argc > 1) mpi_expect::g_only = argv[1];
  const int n = jax::device_count();
  const int rank = jax::process_index();
  const Mesh mesh = jax::make_mesh({n}, {"x"});
  const pltpu::InterpretParams checked{};
  // Natively the copy moved at its start: both semaphores hold its bytes between the calls.
  auto counts = [](int64_t send, int64_t recv) {
    if (send != 4096 || recv != 4096) {
      wrong("native counts between calls: send " + std::to_string(send) + ", recv " +
            std::to_string(recv) + ", expected 4096 each");
    }
  };
  mpi_expect::expect_clean("native", [&] {
    for (int i = 0; i < 3; ++i) expect_rolled("native", run(Program{}, mesh, 2, counts), 2);
  });
  clean("checked", Program{checked}, mesh, 3);
  signalled("signal, native", std::nullopt);
  signalled("signal, checked", checked);
  clean("checked, remote waits", Program{checked, Bug::kNone, true}, mesh, 3);
  const std::string copy = "the remote copy of float32 (1, 8, 128) from device";
  expect_error("read before wait_recv",
               [&] {
                 run(Program{checked, Bug::kReadDestinationBeforeWaitRecv}, mesh, 1);
               },
               ErrorKind::kRace,
               {"this copy reads what the other writes", copy, "still in flight"});
  expect_error("write before wait_send",
               [&] {
                 run(Program{checked, Bug::kWriteSourceBeforeWaitSend}, mesh, 1);
               },
               ErrorKind::kRace, {"this copy writes what the other reads", copy});
  expect_error("never wait_recv",
               [&] {
                 run(Program{checked, Bug::kNeverWaitRecv}, mesh, 1);
               },
               ErrorKind::kSemaphoreLeak,
               {"the program ends with " + copy, "'s recv_sem: no wait_recv took its 4096 bytes",
                "every remote copy needs a wait_send on its sender and a wait_recv on its "
                "receiver"});
  expect_error("never wait_send",
               [&] {
                 run(Program{checked, Bug::kNeverWaitSend}, mesh, 1);
               },
               ErrorKind::kSemaphoreLeak, {"'s send_sem: no wait_send took its 4096 bytes"});
  // Only rank 0 leaves its half: every other rank, whose program is clean, fails with it.
  expect_error("never wait_send on rank 0",
               [&] {
                 run(Program{checked, rank == 0 ? Bug::kNeverWaitSend : Bug::kNone}, mesh, 1);
               },
               ErrorKind::kSemaphoreLeak,
               {"device 0 core 0's send_sem: no wait_send took its 4096 bytes"});
  expect_error("wait without destination",
               [&] {
                 run(Program{checked, Bug::kWaitWithoutDestination}, mesh, 1);
               },
               ErrorKind::kInvalidArgument,
               {"is still in flight on semaphore 0 of input 1",
                "this call does not take its destination array (float32 (1, 8, 128))"});
  // The bugs' runs left nothing behind: the clean program runs again.
  clean("checked again", Program{checked}, mesh, 1);
  // A copy a checked call left in flight completes when native calls take it in (and is not
  // reported as never waited when the program ends).
  mpi_expect::expect_clean("checked start, native waits", [&] {
    const Program check{checked};
    const Program native{};
    Array<float> x({1, 8, 128});
    for (int64_t i = 0; i < x.size(); ++i) x[i] = static_cast<float>(rank * kBlock + i);
    const Array<float> y = jax::shard_map(
        [&](const Array<float>& xs) {
          auto [x1, out, send, recv] = check.start(xs);
          return native.recv_done(native.send_done(x1, send), out, recv);
        },
        mesh, P("x"), P("x"))(x);
    expect_rolled("checked start, native waits", y, 1);
  });
  // The same program on an in-process mesh (every rank runs it whole), natively and checked.
  clean("in process", Program{}, mesh.in_process(), 2);
  clean("in process, checked", Program{checked}, mesh.in_process(), 2);
  if (mpi_expect::g_wrong == 0) std::cout << "rank " << rank << ": mpi_between_calls: all passed\n";
  return mpi_expect::g_wrong == 0 ? 0 : 1;
}
