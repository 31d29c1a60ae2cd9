// A pipeline step that stores its output with streaming stores leaves them unfenced
// (CoreContext::streams_pending, src/runtime/context.h); every point where another thread may
// then read this core's memory must fence them first. Each test marks streams pending inside a
// kernel, passes one such point, and checks that the mark is gone: a publication point that
// lost its settle_streams() call fails here.
#include <gtest/gtest.h>

#include <atomic>

#include "runtime/context.h"
#include "tessera/tessera.h"

namespace {
using namespace tessera;

void mark_pending() { detail::current_context()->streams_pending = true; }
bool pending() { return detail::current_context()->streams_pending; }

TEST(SettleStreams, SemaphoreSignal) {
  std::atomic<int> settled{0};
  pl::kernel(pltpu::TensorCoreMesh("core", 1),
             pl::scratch_types(pltpu::SemaphoreType::REGULAR))([&](pltpu::SemaphoreRef s) {
    mark_pending();
    pl::semaphore_signal(s, 1);
    settled += pending() ? 0 : 1;
    pl::semaphore_wait(s, 1);
  })();
  EXPECT_EQ(settled, 1);
}

TEST(SettleStreams, CoreBarrier) {
  std::atomic<int> settled{0};
  pl::kernel(pltpu::TensorCoreMesh("core", 2),
             pl::scratch_types(pltpu::SemaphoreType::REGULAR))([&](pltpu::SemaphoreRef bar) {
    mark_pending();
    pltpu::core_barrier(bar, "core");
    settled += pending() ? 0 : 1;
  })();
  EXPECT_EQ(settled, 2);
}

TEST(SettleStreams, DmaStart) {
  std::atomic<int> settled{0};
  const Array<float> o =
      pl::kernel(pl::out_type<float>({128}), pltpu::TensorCoreMesh("core", 1),
                 pl::scratch_types(pltpu::VMEM<float>({128}), pltpu::SemaphoreType::DMA))(
          [&](pltpu::HbmRef<float> o_hbm, pltpu::VmemRef<float> v, pltpu::DmaSemaphoreRef sem) {
            v = jnp::full_like(v, 3.0f);
            mark_pending();
            auto copy = pltpu::make_async_copy(v, o_hbm, sem);
            copy.start();
            settled += pending() ? 0 : 1;
            copy.wait();
          })();
  EXPECT_EQ(settled, 1);
  EXPECT_EQ(o[127], 3.0f);
}

TEST(SettleStreams, EndOfPipeline) {
  std::atomic<int> pending_in_steps{0}, settled{0};
  const Array<float> x({64, 128}, 1.0f);
  (void)pl::kernel(pl::out_type<float>({64, 128}), pltpu::TensorCoreMesh("core", 1))(
      [&](pltpu::HbmRef<const float> x_hbm, pltpu::HbmRef<float> o_hbm) {
        const pl::BlockSpec spec({8, 128}, [](int i) { return pl::idx(i, 0); });
        pltpu::emit_pipeline(
            [&](pltpu::VmemRef<const float> a, pltpu::VmemRef<float> b) {
              pending_in_steps += pending() ? 1 : 0;  // each step's mark survives to the next
              b = a + 1.0f;
              mark_pending();
            },
            pltpu::grid({8}), pl::in_specs(spec), pl::out_specs(spec))(x_hbm, o_hbm);
        settled += pending() ? 0 : 1;
      })(x);
  EXPECT_EQ(pending_in_steps, 7);
  EXPECT_EQ(settled, 1);
}

TEST(SettleStreams, RemoteCopyAndSignal) {
  std::atomic<int> settled{0};
  auto kernel =
      pl::kernel(pl::out_type<float>({8, 128}), pltpu::TensorCoreMesh("core", 1),
                 pl::scratch_types(pltpu::VMEM<float>({8, 128}), pltpu::SemaphoreType::DMA,
                                   pltpu::SemaphoreType::DMA, pltpu::SemaphoreType::REGULAR))(
          [&](pltpu::HbmRef<float> o, pltpu::VmemRef<float> v, pltpu::DmaSemaphoreRef send,
              pltpu::DmaSemaphoreRef recv, pltpu::SemaphoreRef done) {
            const int n = lax::axis_size("x");
            const int me = lax::axis_index("x");
            v = jnp::full_like(v, static_cast<float>(me));
            mark_pending();
            auto copy = pltpu::make_async_remote_copy(v, o, send, recv, {(me + 1) % n});
            copy.start();
            settled += pending() ? 0 : 1;
            copy.wait();
            mark_pending();
            pl::semaphore_signal(done, 1, pl::device_id({(me + 1) % n}));
            settled += pending() ? 0 : 1;
            pl::semaphore_wait(done, 1);
          });
  const Mesh mesh = jax::make_mesh({2}, {"x"});
  jax::shard_map([&](const Array<float>&) { (void)kernel(); }, mesh, P("x"),
                 {})(Array<float>({2}, 0.0f));
  EXPECT_EQ(settled, 4);  // two points on each of the two devices
}

}  // namespace
