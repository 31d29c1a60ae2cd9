// Checked mode on device meshes in process: a remote copy into another device's VMEM races with
// the target's accesses of the destination that nothing orders before its start(), also those
// that came before the start() in time (src/check/checked_history.cc), and with another copy into
// the same bytes that the target has not waited for, or has waited for at a point nothing orders
// before the second copy's start(). An atomic flag of the test, outside Tessera, holds the
// sender's start() back until the target's access has happened, so that the access surely comes
// first. Each planted bug has a clean twin that passes in every DMA execution mode.
#include <gtest/gtest.h>

#include <atomic>
#include <string>
#include <thread>

#include "support/expect_error.h"
#include "tessera/tessera.h"

namespace {
using namespace tessera;
using Mode = pltpu::DmaExecutionMode;
using Params = pltpu::InterpretParams;

const Params kModes[] = {{.dma_execution_mode = Mode::eager},
                         {.dma_execution_mode = Mode::on_wait},
                         {.dma_execution_mode = Mode::random, .random_seed = 1},
                         {.dma_execution_mode = Mode::random, .random_seed = 2}};

// Runs `kernel` once on every device of a 1-D mesh of `n` devices; returns device 1's output.
template <class K>
Array<float> run(int n, const K& kernel) {
  const Mesh mesh = jax::make_mesh({n}, {"x"});
  return jax::shard_map([&](const Array<float>&) { return kernel(); }, mesh, P("x"),
                        P("x"))(Array<float>({n}, 0.0f));
}

void wait_for(const std::atomic<int>& flag) {
  while (flag.load() == 0) std::this_thread::yield();
}

template <class F>
void expect_race(F&& f, std::initializer_list<std::string> says) {
  auto e = tessera::testing::catch_error<KernelError>(f);
  ASSERT_TRUE(e);
  EXPECT_EQ(e->kind(), ErrorKind::kRace) << e->what();
  for (const std::string& s : says) {
    EXPECT_NE(std::string(e->what()).find(s), std::string::npos)
        << e->what() << "\nexpected: " << s;
  }
}

constexpr int kTouchLine = __LINE__ + 1;
void touch(pltpu::VmemRef<float> buf) { buf = jnp::full_like(buf, -1.0f); }

// Device 0 copies 5s into device 1's `buf` once device 1 has signalled that it is free; device 1
// writes `buf` before that signal (`ordered`) or after it, and then sets `touched`, which device 0
// waits for before its start().
auto touch_kernel(bool ordered, std::atomic<int>* touched, const Params& mode) {
  return pl::kernel(pl::out_type<float>({8, 128}), pltpu::TensorCoreMesh("core", 1),
                    pl::scratch_types(pltpu::VMEM<float>({8, 128}), pltpu::VMEM<float>({8, 128}),
                                      pltpu::SemaphoreType::DMA, pltpu::SemaphoreType::DMA,
                                      pltpu::SemaphoreType::REGULAR),
                    mode, pl::name("touch"))(
      [=](pltpu::HbmRef<float> o, pltpu::VmemRef<float> v, pltpu::VmemRef<float> buf,
          pltpu::DmaSemaphoreRef send, pltpu::DmaSemaphoreRef recv, pltpu::SemaphoreRef free) {
        const int me = lax::axis_index("x");
        auto copy = pltpu::make_async_remote_copy(v, buf, send, recv, {1});
        if (me == 0) {
          pl::semaphore_wait(free, 1);
          wait_for(*touched);
          v = jnp::full_like(v, 5.0f);
          copy.start();
          copy.wait_send();
        } else {
          if (ordered) touch(buf);
          pl::semaphore_signal(free, 1, pl::device_id({0}));
          if (!ordered) touch(buf);
          touched->store(1);
          copy.wait_recv();
        }
        if (me == 1) pltpu::sync_copy(buf, o);
      });
}

TEST(CheckedLanding, AnAccessBeforeTheStartThatNothingOrders) {
  for (const Params& mode : kModes) {
    for (int i = 0; i < 2; ++i) {
      std::atomic<int> touched{0};
      const Array<float> out = run(2, touch_kernel(true, &touched, mode));
      EXPECT_EQ(out(8 + 3, 7), 5.0f);
    }
  }
  std::atomic<int> touched{0};
  expect_race([&] { run(2, touch_kernel(false, &touched, kModes[0])); },
              {"device 0 core 0's remote copy writes device 1 core 0's VMEM scratch #1 "
               "VMEM<float32>(8, 128) element (0, 0), which device 1 core 0's vector assignment "
               "at checked_landing_test.cc:" +
                   std::to_string(kTouchLine) + " writes with no happens-before order",
               "remote_copy.start at checked_landing_test.cc:"});
}

// Devices 0 (copy A) and 2 (copy B) copy into device 1's `buf`. kInFlight: both start at once and
// device 1 waits for both afterwards. kAfterWait: device 1 takes A, then B starts (held back by
// the flag only). kOrdered: as kAfterWait, with a signal from device 1 to device 2 after its
// wait_recv of A, which device 2 waits for before its start() (clean).
enum class Second { kInFlight, kAfterWait, kOrdered };

auto two_copies_kernel(Second how, std::atomic<int>* flag, const Params& mode) {
  return pl::kernel(pl::out_type<float>({8, 128}), pltpu::TensorCoreMesh("core", 1),
                    pl::scratch_types(pltpu::VMEM<float>({8, 128}), pltpu::VMEM<float>({8, 128}),
                                      pltpu::SemaphoreType::DMA, pltpu::SemaphoreType::DMA,
                                      pltpu::SemaphoreType::DMA, pltpu::SemaphoreType::REGULAR),
                    mode, pl::name("two_copies"))(
      [=](pltpu::HbmRef<float> o, pltpu::VmemRef<float> v, pltpu::VmemRef<float> buf,
          pltpu::DmaSemaphoreRef send, pltpu::DmaSemaphoreRef recv_a, pltpu::DmaSemaphoreRef recv_b,
          pltpu::SemaphoreRef go) {
        const int me = lax::axis_index("x");
        auto a = pltpu::make_async_remote_copy(v, buf, send, recv_a, {1});
        auto b = pltpu::make_async_remote_copy(v, buf, send, recv_b, {1});
        v = jnp::full_like(v, static_cast<float>(10 * (me + 1)));
        if (me == 0) {
          a.start();
          a.wait_send();
          if (how == Second::kInFlight) flag->store(1);
        } else if (me == 2) {
          if (how == Second::kOrdered) pl::semaphore_wait(go, 1);
          wait_for(*flag);
          b.start();
          b.wait_send();
        } else {
          if (how != Second::kInFlight) {
            a.wait_recv();
            if (how == Second::kOrdered) pl::semaphore_signal(go, 1, pl::device_id({2}));
            flag->store(1);
          }
          if (how == Second::kInFlight) a.wait_recv();
          b.wait_recv();
          pltpu::sync_copy(buf, o);
        }
      });
}

TEST(CheckedLanding, TwoCopiesIntoOneBuffer) {
  for (const Params& mode : kModes) {
    for (int i = 0; i < 2; ++i) {
      std::atomic<int> flag{0};
      const Array<float> out = run(3, two_copies_kernel(Second::kOrdered, &flag, mode));
      EXPECT_EQ(out(8 + 2, 9), 30.0f);  // B, from device 2, lands last
    }
  }
  std::atomic<int> in_flight{0};
  expect_race([&] { run(3, two_copies_kernel(Second::kInFlight, &in_flight, kModes[0])); },
              {"device 2 core 0's remote copy writes device 1 core 0's VMEM scratch #1",
               "remote_copy.start at checked_landing_test.cc:"});
  std::atomic<int> after{0};
  expect_race([&] { run(3, two_copies_kernel(Second::kAfterWait, &after, kModes[0])); },
              {"device 2 core 0's remote copy writes device 1 core 0's VMEM scratch #1 "
               "VMEM<float32>(8, 128) element (0, 0), which device 1 core 0's landing of a remote "
               "copy taken by the wait_recv at checked_landing_test.cc:"});
}

}  // namespace
