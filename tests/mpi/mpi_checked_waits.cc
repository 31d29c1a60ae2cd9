// Run by ctest under mpirun (label mpi): checked mode across MPI ranks, for what happens between
// kernels. Each planted bug must raise on every rank at once (never end at a timeout), and each
// clean twin must pass, repeatedly.
//   - A deadlock in which a rank waits outside a semaphore wait: device 1 waits for a signal
//     device 0 never sends, while device 0 goes on into the next kernel and waits at its implicit
//     start barrier, or in a remote copy's start for device 1 to enter that kernel: kDeadlock,
//     naming every rank's wait.
//   - A collective_id reused by consecutive kernels with a single barrier (an early barrier):
//     device 0's signal for the second kernel reaches device 1 before device 1's wait of the
//     first kernel (device 1 reads its barrier semaphore until it has), or after it (a barrier
//     of the test, MPI_Barrier outside Tessera, holds device 0 back until device 1 has waited):
//     kRace either way. The clean twin adds the tutorial's second barrier, with the same forced
//     orders (the first one then only delays device 1's wait).
// Prints "WRONG" for each unmet expectation, "mpi_checked_waits: all passed" otherwise.
#include <mpi.h>
#include <tessera/tessera.h>

#include <chrono>
#include <iostream>
#include <string>
#include <thread>

#include "mpi_expect.h"

namespace {
using namespace tessera;
using namespace mpi_expect;

// A wait that is not found to be a deadlock fails the test at this timeout instead of hanging.
const pltpu::CompilerParams kParams{.wait_timeout_ms = 20000};
const pltpu::CompilerParams kCollective{.wait_timeout_ms = 20000, .collective_id = 2};
const pltpu::InterpretParams kChecked{};

// Device 1 waits for a signal from device 0, which forgets it (the bug) or sends it.
auto forgetful_kernel(bool forgets) {
  return pl::kernel(
      pl::out_type<float>({8, 128}), pltpu::TensorCoreMesh("core", 1),
      pl::scratch_types(pltpu::SemaphoreType::REGULAR), kChecked, kParams,
      pl::name("forgetful"))([forgets](pltpu::HbmRef<float> /*o*/, pltpu::SemaphoreRef sem) {
    const int me = lax::axis_index("x");
    if (me == 0 && !forgets) pl::semaphore_signal(sem, 1, pl::device_id({1}));
    if (me == 1) pl::semaphore_wait(sem, 1);
  });
}

// A kernel without a collective_id: it starts with the implicit barrier over every device.
auto next_kernel() {
  return pl::kernel(pl::out_type<float>({8, 128}), pltpu::TensorCoreMesh("core", 1), kChecked,
                    kParams, pl::name("next"))([](pltpu::HbmRef<float> /*o*/) {});
}

// A kernel with a collective_id in which device 0 copies into device 1: after device 1's signal
// on the barrier semaphore (`handshake`), or at once (which waits for device 1 to enter it).
auto copy_kernel(bool handshake) {
  return pl::kernel(pl::out_type<float>({8, 128}), pltpu::TensorCoreMesh("core", 1),
                    pl::scratch_types(pltpu::VMEM<float>({8, 128}), pltpu::SemaphoreType::DMA,
                                      pltpu::SemaphoreType::DMA),
                    kChecked, kCollective, pl::name("copy_next"))(
      [handshake](pltpu::HbmRef<float> o, pltpu::VmemRef<float> v, pltpu::DmaSemaphoreRef send,
                  pltpu::DmaSemaphoreRef recv) {
        const int me = lax::axis_index("x");
        if (me > 1) return;
        if (handshake) {
          auto barrier = pltpu::get_barrier_semaphore();
          if (me == 1) pl::semaphore_signal(barrier, 1, pl::device_id({0}));
          if (me == 0) pl::semaphore_wait(barrier, 1);
        }
        auto copy = pltpu::make_async_remote_copy(v, o, send, recv, {1});
        if (me == 0) {
          v = jnp::ones_like(v);
          copy.start();
          copy.wait_send();
        } else {
          copy.wait_recv();
        }
      });
}

// Where device 0's signal for the second kernel reaches device 1.
enum class Order { kBeforeWait, kAfterWait };

// Devices 0 and 1 meet on the barrier semaphore of collective_id 2, once (the bug when the
// kernel runs twice in a row) or with the tutorial's second barrier after it. `launch`: the
// kernel's place in the program (0, 1), for the forced order.
auto reuse_kernel(bool second_barrier, Order order, int launch) {
  return pl::kernel(pl::out_type<float>({8, 128}), pltpu::TensorCoreMesh("core", 1), kChecked,
                    kCollective, pl::name("reuse"))([=](pltpu::HbmRef<float> /*o*/) {
    const int me = lax::axis_index("x");
    if (me > 1) {
      if (order == Order::kAfterWait && launch == 1) MPI_Barrier(MPI_COMM_WORLD);
      return;
    }
    auto barrier = pltpu::get_barrier_semaphore();
    if (order == Order::kAfterWait && launch == 1 && me == 0) MPI_Barrier(MPI_COMM_WORLD);
    pl::semaphore_signal(barrier, 1, pl::device_id({1 - me}));
    if (order == Order::kBeforeWait && launch == 0 && me == 1) {
      // Until device 0's signal for the next kernel has arrived (it cannot with the second
      // barrier: then this only delays the wait).
      const auto until = std::chrono::steady_clock::now() +
                         std::chrono::milliseconds(second_barrier ? 100 : 10000);
      while (pl::semaphore_read(barrier) < 2 && std::chrono::steady_clock::now() < until) {
        std::this_thread::sleep_for(std::chrono::microseconds(200));
      }
    }
    pl::semaphore_wait(barrier, 1);
    if (second_barrier) {
      pl::run_scoped(
          [&](pltpu::SemaphoreRef second) {
            pl::semaphore_signal(second, 1, pl::device_id({1 - me}));
            pl::semaphore_wait(second, 1);
          },
          pltpu::SemaphoreType::REGULAR);
    }
    if (order == Order::kAfterWait && launch == 0 && me == 1) MPI_Barrier(MPI_COMM_WORLD);
  });
}

void run_reuse(bool second_barrier, Order order) {
  const auto first = reuse_kernel(second_barrier, order, 0);
  const auto second = reuse_kernel(second_barrier, order, 1);
  run_program([&] {
    (void)first();
    (void)second();
  });
}

}  // namespace

int main(int argc, char** argv) {
  if (argc > 1) g_only = argv[1];
  const std::string here = "mpi_checked_waits.cc:";
  const std::string wait = "device 1 core 0 waits in pl::semaphore_wait at " + here;
  expect_error(
      "deadlock at a start barrier",
      [&] {
        run_program([&] {
          (void)forgetful_kernel(true)();
          (void)next_kernel()();
        });
      },
      ErrorKind::kDeadlock,
      {"deadlock over the MPI ranks", wait,
       "device 0 waits at the implicit start barrier of kernel 'next' (launch #2) at " + here});
  expect_error(
      "deadlock at a remote copy's start",
      [&] {
        run_program([&] {
          (void)forgetful_kernel(true)();
          (void)copy_kernel(false)();
        });
      },
      ErrorKind::kDeadlock,
      {"deadlock over the MPI ranks", wait, "device 0 core 0 waits in remote_copy.start at " + here,
       "for device 1 to enter kernel 'copy_next' (launch #2)"});
  expect_error("reuse, early signal before the wait", [&] { run_reuse(false, Order::kBeforeWait); },
               ErrorKind::kRace,
               {"device 1 core 0 takes from the barrier semaphore of collective_id 2 in "
                "kernel 'reuse' (launch #1) after a signal of a later kernel reached it",
                "device 0 core 0 signalled it at " + here, "in its launch #2",
                "a collective_id reused by consecutive kernels"});
  expect_error("reuse, early signal after the wait", [&] { run_reuse(false, Order::kAfterWait); },
               ErrorKind::kRace,
               {"signals the barrier semaphore of collective_id 2 of device ", "in its launch #2",
                "after that device's last wait on it, in kernel 'reuse' (launch #1)",
                "a collective_id reused by consecutive kernels", here});
  // The clean twins, repeatedly.
  for (int i = 0; i < 3; ++i) {
    expect_clean("no deadlock at a start barrier", [&] {
      run_program([&] {
        (void)forgetful_kernel(false)();
        (void)next_kernel()();
      });
    });
    expect_clean("no deadlock at a remote copy's start", [&] {
      run_program([&] {
        (void)forgetful_kernel(false)();
        (void)copy_kernel(true)();
      });
    });
    expect_clean("second barrier, early signal before the wait",
                 [&] { run_reuse(true, Order::kBeforeWait); });
    expect_clean("second barrier, early signal after the wait",
                 [&] { run_reuse(true, Order::kAfterWait); });
  }
  if (g_wrong == 0) {
    std::cout << "rank " << jax::process_index() << ": mpi_checked_waits: all passed\n";
  }
  return g_wrong == 0 ? 0 : 1;
}
