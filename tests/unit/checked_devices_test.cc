// Checked mode on device meshes: planted bugs of distributed kernels, each with a clean twin that
// must pass (repeatedly, in every DMA execution mode): a missing wait_recv, a wrong byte count,
// one receive semaphore shared by two copies in flight, run-ahead without a capacity semaphore,
// a collective_id reused by consecutive kernels, a write before the target entered, a deadlock
// ring; and a failure on one device cancelling the others.
#include <gtest/gtest.h>

#include <atomic>
#include <string>

#include "support/expect_error.h"
#include "tessera/tessera.h"

namespace {
using namespace tessera;

bool contains(const std::string& s, const std::string& part) {
  return s.find(part) != std::string::npos;
}

using Mode = pltpu::DmaExecutionMode;
using Params = pltpu::InterpretParams;

// Every DMA execution mode, random with two seeds.
const Params kModes[] = {{.dma_execution_mode = Mode::eager},
                         {.dma_execution_mode = Mode::on_wait},
                         {.dma_execution_mode = Mode::random, .random_seed = 1},
                         {.dma_execution_mode = Mode::random, .random_seed = 2}};

// Runs `kernel` (which takes no inputs) once on every device of a 1-D mesh of `n` devices.
template <class K>
void run(int n, const K& kernel, int launches = 1) {
  const Mesh mesh = jax::make_mesh({n}, {"x"});
  jax::shard_map(
      [&](const Array<float>&) {
        for (int i = 0; i < launches; ++i) (void)kernel();
      },
      mesh, P("x"), {})(Array<float>({n}, 0.0f));
}

// Expects `f` to raise a KernelError of `kind` whose message contains every one of `says`.
template <class F>
void expect_error(F&& f, ErrorKind kind, std::initializer_list<const char*> says) {
  auto e = tessera::testing::catch_error<KernelError>(f);
  ASSERT_TRUE(e);
  EXPECT_EQ(e->kind(), kind) << e->what();
  for (const char* s : says)
    EXPECT_TRUE(contains(e->what(), s)) << e->what() << "\nexpected: " << s;
}

// Each device sends its (8, 128) block to its right neighbour's output. `bug`: the receiver
// never calls wait_recv (a neighbour's signal after its wait_send orders the landing first).
auto permute_kernel(bool bug, const Params& mode) {
  return pl::kernel(pl::out_type<float>({8, 128}), pltpu::TensorCoreMesh("core", 1),
                    pl::scratch_types(pltpu::VMEM<float>({8, 128}), pltpu::SemaphoreType::DMA,
                                      pltpu::SemaphoreType::DMA, pltpu::SemaphoreType::REGULAR),
                    mode, pl::name("permute"))(
      [bug](pltpu::HbmRef<float> o, pltpu::VmemRef<float> v, pltpu::DmaSemaphoreRef send,
            pltpu::DmaSemaphoreRef recv, pltpu::SemaphoreRef done) {
        const int n = lax::axis_size("x");
        const int me = lax::axis_index("x");
        v = jnp::full_like(v, static_cast<float>(me));
        auto copy = pltpu::make_async_remote_copy(v, o, send, recv, {(me + 1) % n});
        copy.start();
        if (bug) {
          copy.wait_send();
          pl::semaphore_signal(done, 1, pl::device_id({(me + 1) % n}));
          pl::semaphore_wait(done, 1);
        } else {
          copy.wait();
        }
      });
}

TEST(CheckedDevices, MissingWaitRecv) {
  for (const Params& mode : kModes) {
    expect_error([&] { run(2, permute_kernel(true, mode)); }, ErrorKind::kSemaphoreLeak,
                 {"ends the kernel without taking 4096 bytes sent to it with wait_recv",
                  "the remote copy of float32 (8, 128) from device", "started at"});
    run(2, permute_kernel(false, mode));
    run(3, permute_kernel(false, mode));
  }
}

// The receiver waits for more bytes than the sender sends (a descriptor of the whole block for
// a copy of half of it): every device ends up blocked, which names what arrived and from where.
auto byte_count_kernel(bool bug, const Params& mode) {
  return pl::kernel(pl::out_type<float>({8, 128}), pltpu::TensorCoreMesh("core", 1),
                    pl::scratch_types(pltpu::VMEM<float>({8, 128}), pltpu::SemaphoreType::DMA,
                                      pltpu::SemaphoreType::DMA),
                    mode, pl::name("byte_count"))(
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

TEST(CheckedDevices, WrongByteCount) {
  for (const Params& mode : kModes) {
    expect_error(
        [&] { run(2, byte_count_kernel(true, mode)); }, ErrorKind::kDeadlock,
        {"deadlock: every core of every device of the mesh is blocked or finished",
         "device 0 core 0 waits in remote_copy.wait_recv", "holds 2048 bytes", "needs 4096",
         "arrived and not taken: 2048 bytes (float32 (4, 128)) from device 1 "
         "core 0"});
    run(2, byte_count_kernel(false, mode));
  }
}

// Two copies in flight to the right neighbour, both counted on one receive semaphore: the first
// wait_recv may take the bytes of the second copy, so the block it then reads may not have
// landed. The twin gives each copy its own semaphore.
auto shared_sem_kernel(bool bug, const Params& mode) {
  return pl::kernel(
      pl::out_type(ShapeDtypeStruct<float>{{16, 128}}, ShapeDtypeStruct<float>{{2, 8, 128}}),
      pltpu::TensorCoreMesh("core", 1),
      pl::scratch_types(pltpu::VMEM<float>({8, 128}), pltpu::SemaphoreType::DMA,
                        pltpu::SemaphoreType::DMA({2}), pltpu::SemaphoreType::DMA),
      mode, pl::name("shared_recv_sem"))([bug](pltpu::HbmRef<float> o, pltpu::HbmRef<float> slots,
                                               pltpu::VmemRef<float> v, pltpu::DmaSemaphoreRef send,
                                               pltpu::DmaSemaphoreRef recv,
                                               pltpu::DmaSemaphoreRef local) {
    const int n = lax::axis_size("x");
    const int me = lax::axis_index("x");
    const int right = (me + 1) % n;
    v = jnp::full_like(v, static_cast<float>(me));
    auto a = pltpu::make_async_remote_copy(v, slots.at(0), send, recv.at(0), {right});
    auto b = pltpu::make_async_remote_copy(v, slots.at(1), send, recv.at(bug ? 0 : 1), {right});
    a.start();
    b.start();
    a.wait_send();
    b.wait_send();
    a.wait_recv();
    pltpu::async_copy(slots.at(0), o.at(pl::ds(0, 8)), local).wait();
    b.wait_recv();
    pltpu::async_copy(slots.at(1), o.at(pl::ds(8, 8)), local).wait();
  });
}

TEST(CheckedDevices, OneRecvSemForTwoCopiesInFlight) {
  // on_wait lands the later copy first: the first wait takes its bytes.
  expect_error([&] { run(2, shared_sem_kernel(true, kModes[1])); }, ErrorKind::kRace,
               {"'s HBM output 1 float32(2, 8, 128) element (0, 0, 0)",
                "the remote copy of float32 (8, 128) from device", "checked_devices_test.cc:"});
  for (const Params& mode : kModes) run(2, shared_sem_kernel(false, mode));
}

// The barrier of the distributed tutorial: signal both neighbours' barrier semaphore and wait
// for theirs; with `twice`, a second round on a run_scoped semaphore.
void barrier(bool twice) {
  const int n = lax::axis_size("x");
  const int me = lax::axis_index("x");
  auto sem = pltpu::get_barrier_semaphore();
  for (const int d : {(me + n - 1) % n, (me + 1) % n}) {
    pl::semaphore_signal(sem, 1, pl::device_id({d}));
  }
  pl::semaphore_wait(sem, 2);
  if (!twice) return;
  pl::run_scoped(
      [&](pltpu::SemaphoreRef second) {
        for (const int d : {(me + n - 1) % n, (me + 1) % n}) {
          pl::semaphore_signal(second, 1, pl::device_id({d}));
        }
        pl::semaphore_wait(second, 2);
      },
      pltpu::SemaphoreType::REGULAR);
}

// The tutorial's all-reduce loop: each step passes the partial sum in the working slot of the
// HBM double buffer to the right neighbour's receiving slot while accumulating it. `capacity`:
// the receiver tells its left neighbour when it has read its working slot; without that a
// sender can run a step ahead and overwrite the slot being read.
auto all_reduce_kernel(bool capacity, const Params& mode) {
  return pl::kernel(
      pl::out_type(ShapeDtypeStruct<float>{{8, 128}}, ShapeDtypeStruct<float>{{2, 8, 128}}),
      pltpu::TensorCoreMesh("core", 1),
      pl::scratch_types(pltpu::VMEM<float>({8, 128}), pltpu::VMEM<float>({8, 128}),
                        pltpu::VMEM<float>({8, 128}), pltpu::SemaphoreType::DMA,
                        pltpu::SemaphoreType::DMA, pltpu::SemaphoreType::DMA,
                        pltpu::SemaphoreType::REGULAR),
      mode, pltpu::CompilerParams{.collective_id = 1}, pl::name("all_reduce"))(
      [capacity](pltpu::HbmRef<float> o, pltpu::HbmRef<float> hbm, pltpu::VmemRef<float> x,
                 pltpu::VmemRef<float> acc, pltpu::VmemRef<float> received,
                 pltpu::DmaSemaphoreRef copy_sem, pltpu::DmaSemaphoreRef send,
                 pltpu::DmaSemaphoreRef recv, pltpu::SemaphoreRef capacity_sem) {
        const int n = lax::axis_size("x");
        const int me = lax::axis_index("x");
        const int right = (me + 1) % n;
        const int left = (me + n - 1) % n;
        barrier(true);
        x = jnp::full_like(x, static_cast<float>(me + 1));
        acc = jnp::zeros_like(acc);
        auto initial = pltpu::make_async_remote_copy(x, hbm.at(0), send, recv, {right});
        initial.start();
        initial.wait();
        for (int step = 0; step < n; ++step) {
          const int working = step % 2;
          if (capacity) pl::semaphore_signal(capacity_sem, 1, pl::device_id({left}));
          auto local = pltpu::make_async_copy(hbm.at(working), received, copy_sem);
          local.start();
          if (capacity) pl::semaphore_wait(capacity_sem, 1);
          auto remote = pltpu::make_async_remote_copy(hbm.at(working), hbm.at(1 - working), send,
                                                      recv, {right});
          remote.start();
          local.wait();
          acc += received;
          remote.wait();
        }
        pltpu::sync_copy(acc, o);
      });
}

TEST(CheckedDevices, RunAheadWithoutCapacitySemaphore) {
  for (const Params& mode : kModes) {
    expect_error([&] { run(2, all_reduce_kernel(false, mode)); }, ErrorKind::kRace,
                 {"HBM output 1 float32(2, 8, 128) element (", "device 0 core 0", "device 1",
                  "checked_devices_test.cc:"});
    run(2, all_reduce_kernel(true, mode));
    run(3, all_reduce_kernel(true, mode));
  }
}

// Each device passes its block on to the right after a barrier on the barrier semaphore, in two
// consecutive kernels with the same collective_id. With a single barrier a device can leave the
// first kernel before its right neighbour's barrier wait and signal that neighbour's barrier
// from the second kernel; the tutorial's double barrier prevents it.
auto reuse_kernel(bool double_barrier, const Params& mode) {
  return pl::kernel(pl::out_type<float>({8, 128}), pltpu::TensorCoreMesh("core", 1),
                    pl::scratch_types(pltpu::VMEM<float>({8, 128}), pltpu::SemaphoreType::DMA,
                                      pltpu::SemaphoreType::DMA),
                    mode, pltpu::CompilerParams{.collective_id = 0}, pl::name("reuse"))(
      [double_barrier](pltpu::HbmRef<float> o, pltpu::VmemRef<float> v, pltpu::DmaSemaphoreRef send,
                       pltpu::DmaSemaphoreRef recv) {
        const int n = lax::axis_size("x");
        const int me = lax::axis_index("x");
        barrier(double_barrier);
        v = jnp::full_like(v, static_cast<float>(me));
        auto copy = pltpu::make_async_remote_copy(v, o, send, recv, {(me + 1) % n});
        copy.start();
        copy.wait();
      });
}

TEST(CheckedDevices, CollectiveIdReusedByConsecutiveKernels) {
  for (const Params& mode : kModes) {
    expect_error([&] { run(3, reuse_kernel(false, mode), 2); }, ErrorKind::kRace,
                 {"the barrier semaphore of collective_id 0 in kernel 'reuse' (launch #2)",
                  "last wait on it, in kernel 'reuse' (launch #1)",
                  "collective_id reused by consecutive kernels"});
    run(3, reuse_kernel(true, mode), 3);
    run(2, reuse_kernel(true, mode), 2);
  }
}

// A kernel with a collective_id starts without the device barrier: writing a neighbour before
// anything says it has entered is a race; the twin waits on the barrier semaphore first.
auto entered_kernel(bool barrier_first, const Params& mode) {
  return pl::kernel(pl::out_type<float>({8, 128}), pltpu::TensorCoreMesh("core", 1),
                    pl::scratch_types(pltpu::VMEM<float>({8, 128}), pltpu::SemaphoreType::DMA,
                                      pltpu::SemaphoreType::DMA),
                    mode, pltpu::CompilerParams{.collective_id = 2}, pl::name("early"))(
      [barrier_first](pltpu::HbmRef<float> o, pltpu::VmemRef<float> v, pltpu::DmaSemaphoreRef send,
                      pltpu::DmaSemaphoreRef recv) {
        const int n = lax::axis_size("x");
        const int me = lax::axis_index("x");
        if (barrier_first) barrier(false);
        v = jnp::full_like(v, static_cast<float>(me));
        auto copy = pltpu::make_async_remote_copy(v, o, send, recv, {(me + 1) % n});
        copy.start();
        copy.wait();
      });
}

TEST(CheckedDevices, WriteBeforeTheTargetEntered) {
  for (const Params& mode : kModes) {
    expect_error(
        [&] { run(2, entered_kernel(false, mode)); }, ErrorKind::kRace,
        {"writes a remote copy into the memory of device", "with nothing ordering it after device",
         "entered kernel 'early'", "pltpu::get_barrier_semaphore()"});
    run(2, entered_kernel(true, mode));
    run(4, entered_kernel(true, mode));
  }
}

// Every device waits for its left neighbour's block before it sends its own: nobody sends.
auto ring_kernel(bool send_first, const Params& mode) {
  return pl::kernel(pl::out_type<float>({8, 128}), pltpu::TensorCoreMesh("core", 1),
                    pl::scratch_types(pltpu::VMEM<float>({8, 128}), pltpu::SemaphoreType::DMA,
                                      pltpu::SemaphoreType::DMA),
                    mode, pl::name("ring"))(
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

TEST(CheckedDevices, DeadlockRing) {
  for (const Params& mode : kModes) {
    expect_error([&] { run(3, ring_kernel(false, mode)); }, ErrorKind::kDeadlock,
                 {"device 0 core 0 waits in remote_copy.wait_recv",
                  "device 1 core 0 waits in remote_copy.wait_recv",
                  "device 2 core 0 waits in remote_copy.wait_recv"});
    run(3, ring_kernel(true, mode));
  }
}

// A body that throws on device 1 stops the devices waiting for it (at once, natively and
// checked), and the program rethrows device 1's error.
TEST(CheckedDevices, AFailureCancelsEveryDevice) {
  for (const bool check : {false, true}) {
    auto kernel = pl::kernel(
        pl::out_type<float>({8, 128}), pltpu::TensorCoreMesh("core", 2),
        pl::scratch_types(pltpu::VMEM<float>({8, 128}), pltpu::SemaphoreType::DMA,
                          pltpu::SemaphoreType::DMA),
        pl::name("fails"))([](pltpu::HbmRef<float> o, pltpu::VmemRef<float> v,
                              pltpu::DmaSemaphoreRef send, pltpu::DmaSemaphoreRef recv) {
      const int me = lax::axis_index("x");
      if (me == 1) throw std::runtime_error("device 1 gives up");
      v = jnp::zeros_like(v);
      // Each core sends its own rows (both sending all of `o` would race on the target).
      const auto rows = pl::ds(4 * lax::axis_index("core"), 4);
      auto copy = pltpu::make_async_remote_copy(v.at(rows), o.at(rows), send, recv, {(me + 1) % 3});
      copy.start();
      copy.wait();  // device 2 waits for device 1, which never sends
    });
    std::optional<pltpu::ForceTpuInterpretMode> force;
    if (check) force.emplace();
    try {
      run(3, kernel);
      ADD_FAILURE() << "did not throw";
    } catch (const std::runtime_error& e) {
      EXPECT_TRUE(contains(e.what(), "device 1 gives up")) << e.what();
    }
  }
}

}  // namespace
