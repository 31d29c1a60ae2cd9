// Run by ctest under mpirun (label mpi): checked mode across MPI ranks. Each planted bug of a
// distributed kernel must raise on every rank (never hang), with a message that names every
// rank's part; each clean twin must pass, repeatedly, in every DMA execution mode.
//   - a deadlock ring, a short byte count, a copy nobody sends: kDeadlock over every rank, by
//     wait snapshots;
//   - a destination read before wait_recv, a source overwritten before wait_send, a remote write
//     before the target entered a kernel with a collective_id: kRace, carried by vector clocks
//     on the transport's messages;
//   - a block computed from never-written VMEM and sent to another rank's output: kUninitialized
//     there, naming the sender's statement and buffer (the definedness travels on the message);
//   - a failure on one rank: every rank stops and reports it.
// Prints "WRONG" for each unmet expectation, "mpi_checked: all passed" otherwise.
#include <tessera/tessera.h>

#include <iostream>
#include <stdexcept>
#include <string>
#include <vector>

#include "mpi_expect.h"

namespace {
using namespace tessera;
using Mode = pltpu::DmaExecutionMode;
using Params = pltpu::InterpretParams;
using namespace mpi_expect;

const Params kModes[] = {{.dma_execution_mode = Mode::eager},
                         {.dma_execution_mode = Mode::on_wait},
                         {.dma_execution_mode = Mode::random, .random_seed = 1}};

// A wait that is not found to be a deadlock fails the test at this timeout instead of hanging.
const pltpu::CompilerParams kParams{.wait_timeout_ms = 20000};
const pltpu::CompilerParams kCollective{.wait_timeout_ms = 20000, .collective_id = 2};

// Every device waits for its left neighbour's block before it sends its own (the bug), or sends
// first.
auto ring_kernel(bool send_first, const Params& mode) {
  return pl::kernel(pl::out_type<float>({8, 128}), pltpu::TensorCoreMesh("core", 1),
                    pl::scratch_types(pltpu::VMEM<float>({8, 128}), pltpu::SemaphoreType::DMA,
                                      pltpu::SemaphoreType::DMA),
                    mode, kParams, pl::name("ring"))(
      [send_first](pltpu::HbmRef<float> o, pltpu::VmemRef<float> v, pltpu::DmaSemaphoreRef send,
                   pltpu::DmaSemaphoreRef recv) {
        const int n = lax::axis_size("x");
        const int me = lax::axis_index("x");
        v = jnp::full_like(v, static_cast<float>(me));
        auto copy = pltpu::make_async_remote_copy(v, o, send, recv, {(me + 1) % n});
        if (!send_first) copy.wait_recv();
        copy.start();
        copy.wait_send();
        if (send_first) copy.wait_recv();
      });
}

// The receiver waits for the whole block where half of it is sent (the bug).
auto byte_count_kernel(bool bug, const Params& mode) {
  return pl::kernel(pl::out_type<float>({8, 128}), pltpu::TensorCoreMesh("core", 1),
                    pl::scratch_types(pltpu::VMEM<float>({8, 128}), pltpu::SemaphoreType::DMA,
                                      pltpu::SemaphoreType::DMA),
                    mode, kParams, pl::name("byte_count"))(
      [bug](pltpu::HbmRef<float> o, pltpu::VmemRef<float> v, pltpu::DmaSemaphoreRef send,
            pltpu::DmaSemaphoreRef recv) {
        const int n = lax::axis_size("x");
        const int me = lax::axis_index("x");
        v = jnp::zeros_like(v);
        pltpu::sync_copy(v.at(pl::ds(4, 4)), o.at(pl::ds(4, 4)));  // the rows nobody sends
        auto half = pltpu::make_async_remote_copy(v.at(pl::ds(0, 4)), o.at(pl::ds(0, 4)), send,
                                                  recv, {(me + 1) % n});
        half.start();
        half.wait_send();
        if (bug) {
          pltpu::make_async_remote_copy(v, o, send, recv, {(me + 1) % n}).wait_recv();
        } else {
          half.wait_recv();
        }
      });
}

// The receiver reads the destination of its left neighbour's copy before wait_recv (the bug),
// or after.
auto early_read_kernel(bool bug, const Params& mode) {
  return pl::kernel(pl::out_type<float>({8, 128}), pltpu::TensorCoreMesh("core", 1),
                    pl::scratch_types(pltpu::VMEM<float>({8, 128}), pltpu::VMEM<float>({8, 128}),
                                      pltpu::SemaphoreType::DMA, pltpu::SemaphoreType::DMA),
                    mode, kParams, pl::name("early_read"))(
      [bug](pltpu::HbmRef<float> o, pltpu::VmemRef<float> v, pltpu::VmemRef<float> w,
            pltpu::DmaSemaphoreRef send, pltpu::DmaSemaphoreRef recv) {
        const int n = lax::axis_size("x");
        const int me = lax::axis_index("x");
        v = jnp::full_like(v, static_cast<float>(me));
        auto copy = pltpu::make_async_remote_copy(v, o, send, recv, {(me + 1) % n});
        copy.start();
        if (bug) pltpu::sync_copy(o, w);
        copy.wait_send();
        copy.wait_recv();
        if (!bug) pltpu::sync_copy(o, w);
      });
}

// Each device sends its right neighbour's output a block computed from a VMEM scratch it never
// wrote (the bug: the garbage reaches the neighbour's output), or wrote first.
constexpr int kGarbageLine = __LINE__ + 1;
void scaled(pltpu::VmemRef<float> v, pltpu::VmemRef<float> w) { v = w * 2.0f; }
auto garbage_kernel(bool bug, Params mode) {
  mode.allow_uninitialized_reads = false;  // definedness is tracked
  return pl::kernel(pl::out_type<float>({8, 128}), pltpu::TensorCoreMesh("core", 1),
                    pl::scratch_types(pltpu::VMEM<float>({8, 128}), pltpu::VMEM<float>({8, 128}),
                                      pltpu::SemaphoreType::DMA, pltpu::SemaphoreType::DMA),
                    mode, kParams, pl::name("garbage"))(
      [bug](pltpu::HbmRef<float> o, pltpu::VmemRef<float> v, pltpu::VmemRef<float> w,
            pltpu::DmaSemaphoreRef send, pltpu::DmaSemaphoreRef recv) {
        const int n = lax::axis_size("x");
        const int me = lax::axis_index("x");
        if (!bug) w = jnp::full_like(w, static_cast<float>(me));
        scaled(v, w);
        auto copy = pltpu::make_async_remote_copy(v, o, send, recv, {(me + 1) % n});
        copy.start();
        copy.wait_send();
        copy.wait_recv();
      });
}

// The sender overwrites the source of its copy before wait_send (the bug), or after.
auto early_overwrite_kernel(bool bug, const Params& mode) {
  return pl::kernel(pl::out_type<float>({8, 128}), pltpu::TensorCoreMesh("core", 1),
                    pl::scratch_types(pltpu::VMEM<float>({8, 128}), pltpu::SemaphoreType::DMA,
                                      pltpu::SemaphoreType::DMA),
                    mode, kParams, pl::name("early_overwrite"))(
      [bug](pltpu::HbmRef<float> o, pltpu::VmemRef<float> v, pltpu::DmaSemaphoreRef send,
            pltpu::DmaSemaphoreRef recv) {
        const int n = lax::axis_size("x");
        const int me = lax::axis_index("x");
        v = jnp::full_like(v, static_cast<float>(me));
        auto copy = pltpu::make_async_remote_copy(v, o, send, recv, {(me + 1) % n});
        copy.start();
        if (bug) v = jnp::zeros_like(v);
        copy.wait_send();
        if (!bug) v = jnp::zeros_like(v);
        copy.wait_recv();
      });
}

// A kernel with a collective_id writes its right neighbour without waiting for the neighbour's
// signal on the barrier semaphore (the bug), or after the tutorial's barrier.
auto entered_kernel(bool barrier_first, const Params& mode) {
  return pl::kernel(pl::out_type<float>({8, 128}), pltpu::TensorCoreMesh("core", 1),
                    pl::scratch_types(pltpu::VMEM<float>({8, 128}), pltpu::SemaphoreType::DMA,
                                      pltpu::SemaphoreType::DMA),
                    mode, kCollective, pl::name("early"))(
      [barrier_first](pltpu::HbmRef<float> o, pltpu::VmemRef<float> v, pltpu::DmaSemaphoreRef send,
                      pltpu::DmaSemaphoreRef recv) {
        const int n = lax::axis_size("x");
        const int me = lax::axis_index("x");
        if (barrier_first) {
          auto sem = pltpu::get_barrier_semaphore();
          for (const int d : {(me + n - 1) % n, (me + 1) % n}) {
            pl::semaphore_signal(sem, 1, pl::device_id({d}));
          }
          pl::semaphore_wait(sem, 2);
        }
        v = jnp::full_like(v, static_cast<float>(me));
        auto copy = pltpu::make_async_remote_copy(v, o, send, recv, {(me + 1) % n});
        copy.start();
        copy.wait();
      });
}

// Device 0 waits for a copy that nobody sends (the bug: the others finish their programs), or
// device 1 sends it.
auto lonely_kernel(bool sent, const Params& mode) {
  return pl::kernel(pl::out_type<float>({8, 128}), pltpu::TensorCoreMesh("core", 1),
                    pl::scratch_types(pltpu::VMEM<float>({8, 128}), pltpu::SemaphoreType::DMA,
                                      pltpu::SemaphoreType::DMA),
                    mode, kParams, pl::name("lonely"))(
      [sent](pltpu::HbmRef<float> o, pltpu::VmemRef<float> v, pltpu::DmaSemaphoreRef send,
             pltpu::DmaSemaphoreRef recv) {
        const int me = lax::axis_index("x");
        v = jnp::zeros_like(v);
        auto copy = pltpu::make_async_remote_copy(v, o, send, recv, {0});
        if (me == 1 && sent) {
          copy.start();
          copy.wait_send();
        }
        if (me == 0) copy.wait_recv();
      });
}

// The tutorial's double barrier in consecutive kernels with one collective_id, then a copy to
// the right neighbour: the barrier semaphore's clocks carry across launches and ranks.
auto double_barrier_kernel(const Params& mode) {
  return pl::kernel(pl::out_type<float>({8, 128}), pltpu::TensorCoreMesh("core", 1),
                    pl::scratch_types(pltpu::VMEM<float>({8, 128}), pltpu::SemaphoreType::DMA,
                                      pltpu::SemaphoreType::DMA),
                    mode, kCollective, pl::name("double_barrier"))(
      [](pltpu::HbmRef<float> o, pltpu::VmemRef<float> v, pltpu::DmaSemaphoreRef send,
         pltpu::DmaSemaphoreRef recv) {
        const int n = lax::axis_size("x");
        const int me = lax::axis_index("x");
        auto sem = pltpu::get_barrier_semaphore();
        for (const int d : {(me + n - 1) % n, (me + 1) % n}) {
          pl::semaphore_signal(sem, 1, pl::device_id({d}));
        }
        pl::semaphore_wait(sem, 2);
        pl::run_scoped(
            [&](pltpu::SemaphoreRef second) {
              for (const int d : {(me + n - 1) % n, (me + 1) % n}) {
                pl::semaphore_signal(second, 1, pl::device_id({d}));
              }
              pl::semaphore_wait(second, 2);
            },
            pltpu::SemaphoreType::REGULAR);
        v = jnp::full_like(v, static_cast<float>(me));
        auto copy = pltpu::make_async_remote_copy(v, o, send, recv, {(me + 1) % n});
        copy.start();
        copy.wait();
      });
}

// Device 1's body throws while the others wait for its copy.
auto failing_kernel() {
  return pl::kernel(pl::out_type<float>({8, 128}), pltpu::TensorCoreMesh("core", 1),
                    pl::scratch_types(pltpu::VMEM<float>({8, 128}), pltpu::SemaphoreType::DMA,
                                      pltpu::SemaphoreType::DMA),
                    Params{}, kParams, pl::name("fails"))(
      [](pltpu::HbmRef<float> o, pltpu::VmemRef<float> v, pltpu::DmaSemaphoreRef send,
         pltpu::DmaSemaphoreRef recv) {
        const int n = lax::axis_size("x");
        const int me = lax::axis_index("x");
        if (me == 1) throw std::runtime_error("device 1 gives up");
        v = jnp::zeros_like(v);
        auto copy = pltpu::make_async_remote_copy(v, o, send, recv, {(me + 1) % n});
        copy.start();
        copy.wait();
      });
}

}  // namespace

int main(int argc, char** argv) {
  if (argc > 1) g_only = argv[1];
  const int n = jax::device_count();
  std::vector<std::string> every_wait;
  for (int d = 0; d < n; ++d) {
    every_wait.push_back("device " + std::to_string(d) + " core 0 waits in remote_copy.wait_recv");
  }
  for (const Params& mode : kModes) {
    expect_error("deadlock ring", [&] { run(ring_kernel(false, mode)); }, ErrorKind::kDeadlock,
                 {"deadlock over the MPI ranks", "mpi_checked.cc:", every_wait[0], every_wait[1],
                  every_wait[static_cast<size_t>(n - 1)]});
    expect_error("short byte count", [&] { run(byte_count_kernel(true, mode)); },
                 ErrorKind::kDeadlock,
                 {"deadlock over the MPI ranks", "holds 2048 bytes", "needs 4096",
                  "arrived and not taken: 2048 bytes (float32 (4, 128)) from device ",
                  " core 0 started at "});
    expect_error("read before wait_recv", [&] { run(early_read_kernel(true, mode)); },
                 ErrorKind::kRace,
                 {"HBM output 0 float32(8, 128) element (0, 0)", "'s copy",
                  "with no happens-before order", "mpi_checked.cc:"});
    expect_error("overwrite before wait_send", [&] { run(early_overwrite_kernel(true, mode)); },
                 ErrorKind::kRace,
                 {"the remote copy of float32 (8, 128) from device ", "may still be reading it",
                  "mpi_checked.cc:"});
    expect_error(
        "write before the target entered", [&] { run(entered_kernel(false, mode)); },
        ErrorKind::kRace,
        {"writes a remote copy into the memory of device", "with nothing ordering it after device",
         "entered kernel 'early'", "pltpu::get_barrier_semaphore()"});
    expect_error("garbage sent to another rank", [&] { run(garbage_kernel(true, mode)); },
                 ErrorKind::kUninitialized,
                 {"computes from device ",
                  " core 0's VMEM scratch #1 VMEM<float32>(8, 128) "
                  "element (0, 0), which nothing had written",
                  "and the result reached output 0 float32(8, 128)"});
    expect_error(
        "nobody sends", [&] { run(lonely_kernel(false, mode)); }, ErrorKind::kDeadlock,
        {"deadlock over the MPI ranks", every_wait[0], "device 1 has finished its program"});
    // The clean twins, repeatedly.
    for (int i = 0; i < 3; ++i) {
      expect_clean("ring", [&] { run(ring_kernel(true, mode)); });
      expect_clean("byte count", [&] { run(byte_count_kernel(false, mode)); });
      expect_clean("read after wait_recv", [&] { run(early_read_kernel(false, mode)); });
      expect_clean("overwrite after wait_send", [&] { run(early_overwrite_kernel(false, mode)); });
      expect_clean("barrier first", [&] { run(entered_kernel(true, mode)); });
      expect_clean("device 1 sends", [&] { run(lonely_kernel(true, mode)); });
      expect_clean("defined data sent", [&] { run(garbage_kernel(false, mode)); });
      expect_clean("double barrier", [&] {
        const auto kernel = double_barrier_kernel(mode);
        run_program([&] {
          for (int k = 0; k < 3; ++k) (void)kernel();
        });
      });
    }
  }
  // Device 1 rethrows its own exception; the others report it as device 1's error.
  for (int i = 0; i < 2 && wanted("a failing device"); ++i) {
    try {
      run(failing_kernel());
      wrong("a failing device: no error");
    } catch (const std::exception& e) {
      if (std::string(e.what()).find("device 1 gives up") == std::string::npos) {
        wrong(std::string("a failing device: ") + e.what());
      }
    }
  }
  if (g_wrong == 0) std::cout << "rank " << jax::process_index() << ": mpi_checked: all passed\n";
  return g_wrong == 0 ? 0 : 1;
}
