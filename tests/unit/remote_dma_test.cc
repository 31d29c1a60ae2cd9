// Remote DMAs, remote signals and barrier semaphores (remote_dma.h) on in-process device meshes:
// device ids in every form, Pallas' byte counting, destinations in HBM and VMEM, and the errors.
#include <gtest/gtest.h>

#include <atomic>
#include <mutex>
#include <string>
#include <vector>

#include "support/expect_error.h"
#include "tessera/tessera.h"

namespace {
using namespace tessera;

constexpr pltpu::CompilerParams kShortTimeout{.wait_timeout_ms = 200};

bool contains(const std::string& s, const std::string& part) {
  return s.find(part) != std::string::npos;
}

// Runs `kernel` (taking no inputs) on every device of `mesh`.
template <class K>
void on_devices(const Mesh& mesh, const K& kernel) {
  jax::shard_map([&](const Array<float>&) { (void)kernel(); }, mesh, P("x"),
                 {})(Array<float>({mesh.size()}, 0.0f));
}

TEST(DeviceId, EveryFormResolves) {
  const Mesh mesh = jax::make_mesh({2, 3}, {"x", "y"});
  std::mutex mu;
  std::vector<std::vector<int>> got(6);
  auto kernel = pl::kernel(pltpu::TensorCoreMesh("core", 1),
                           pl::scratch_types(pltpu::VMEM<float>({8}), pltpu::SemaphoreType::DMA))(
      [&](pltpu::VmemRef<float> v, pltpu::DmaSemaphoreRef s) {
        const int me = lax::axis_index("x") * 3 + lax::axis_index("y");
        auto id = [&](pl::DeviceId d, pl::DeviceIdType t = pl::DeviceIdType::MESH) {
          return pltpu::make_async_remote_copy(v, v, s, s, std::move(d), t).device_id();
        };
        std::vector<int> r = {id({1, 2}),
                              id({{"y", 0}}),
                              id({{"x", 0}, {"y", 1}}),
                              id({{{"x", "y"}, 4}}),
                              id(5, pl::DeviceIdType::LOGICAL),
                              id(std::vector<int>{0, 0})};
        std::lock_guard<std::mutex> lock(mu);
        got[static_cast<size_t>(me)] = r;
      });
  on_devices(mesh, kernel);
  // Device (1, 2) = 5: the dict keeps x = 1; the joint axis 4 is (1, 1) = 4.
  EXPECT_EQ(got[5], (std::vector<int>{5, 3, 1, 4, 5, 0}));
  EXPECT_EQ(got[0], (std::vector<int>{5, 0, 1, 4, 5, 0}));
}

TEST(DeviceId, BadIdsRaiseAtTheirLine) {
  const Mesh mesh = jax::make_mesh({2, 2}, {"x", "y"});
  std::atomic<int> line{0};
  std::atomic<int> which{0};
  auto kernel = pl::kernel(pltpu::TensorCoreMesh("core", 1),
                           pl::scratch_types(pltpu::VMEM<float>({8}), pltpu::SemaphoreType::DMA))(
      [&](pltpu::VmemRef<float> v, pltpu::DmaSemaphoreRef s) {
        switch (which.load()) {
          case 0:
            line = __LINE__ + 1;
            (void)pltpu::make_async_remote_copy(v, v, s, s, {1});
            break;
          case 1:
            line = __LINE__ + 1;
            (void)pltpu::make_async_remote_copy(v, v, s, s, {0, 2});
            break;
          case 2:
            line = __LINE__ + 1;
            (void)pltpu::make_async_remote_copy(v, v, s, s, {{"x", 0}}, pl::DeviceIdType::LOGICAL);
            break;
          case 3:
            line = __LINE__ + 1;
            (void)pltpu::make_async_remote_copy(v, v, s, s, {{"z", 0}});
            break;
          default:
            line = __LINE__ + 1;
            (void)pltpu::make_async_remote_copy(v, v, s, s, 4, pl::DeviceIdType::LOGICAL);
        }
      });
  const char* says[] = {"has 1 coordinate but the mesh has 2 axes",
                        "coordinate 2 on mesh axis \"y\" is outside 0..1", "a LOGICAL device id",
                        "names the axis \"z\"", "LOGICAL device id 4 is outside 0..3"};
  const ErrorKind kinds[] = {ErrorKind::kInvalidArgument, ErrorKind::kOutOfBounds,
                             ErrorKind::kInvalidArgument, ErrorKind::kUnknownAxis,
                             ErrorKind::kOutOfBounds};
  for (int i = 0; i < 5; ++i) {
    which = i;
    tessera::testing::expect_kernel_error([&] { on_devices(mesh, kernel); }, kinds[i], says[i],
                                          line);
  }
}

TEST(DeviceId, NeedsADeviceMesh) {
  std::atomic<int> line{0};
  auto kernel = pl::kernel(pltpu::TensorCoreMesh("core", 1),
                           pl::scratch_types(pltpu::VMEM<float>({8}), pltpu::SemaphoreType::DMA))(
      [&](pltpu::VmemRef<float> v, pltpu::DmaSemaphoreRef s) {
        line = __LINE__ + 1;
        (void)pltpu::make_async_remote_copy(v, v, s, s, {0});
      });
  tessera::testing::expect_kernel_error([&] { kernel(); }, ErrorKind::kInvalidArgument,
                                        "runs on no device mesh", line);
}

// Device 0 sends two (8,) copies to device 1 on one recv semaphore; device 1 takes both with one
// wait_recv of a (16,) descriptor: DMA semaphores count bytes.
TEST(RemoteCopy, OneWaitAbsorbsTwoCopies) {
  const Mesh mesh = jax::make_mesh({2}, {"x"});
  auto kernel = pl::kernel(pl::out_type<float>({16}), pltpu::TensorCoreMesh("core", 1),
                           pl::scratch_types(pltpu::VMEM<float>({16}), pltpu::SemaphoreType::DMA,
                                             pltpu::SemaphoreType::DMA))(
      [](pltpu::HbmRef<float> o, pltpu::VmemRef<float> v, pltpu::DmaSemaphoreRef send,
         pltpu::DmaSemaphoreRef recv) {
        if (lax::axis_index("x") == 0) {
          v = jnp::arange<float>(16);
          auto a = pltpu::make_async_remote_copy(v.at(pl::ds(0, 8)), o.at(pl::ds(0, 8)), send, recv,
                                                 {1});
          auto b = pltpu::make_async_remote_copy(v.at(pl::ds(8, 8)), o.at(pl::ds(8, 8)), send, recv,
                                                 {1});
          a.start();
          b.start();
          a.wait_send();
          b.wait_send();
          pltpu::sync_copy(v, o);
        } else {
          pltpu::make_async_remote_copy(v, o, send, recv, {0}).wait_recv();
        }
      });
  auto f = [&](const Array<float>&) { return kernel(); };
  const Array<float> out = jax::shard_map(f, mesh, P("x"), P("x"))(Array<float>({2}, 0.0f));
  for (int i = 0; i < 32; ++i) EXPECT_EQ(out[i], static_cast<float>(i % 16)) << i;
}

// A remote copy into the neighbour's VMEM scratch (symmetric: same buffer, same core), and a
// device sending to itself.
TEST(RemoteCopy, IntoVmemScratchAndToItself) {
  const Mesh mesh = jax::make_mesh({3}, {"x"});
  auto kernel = pl::kernel(pl::out_type<float>({2, 8}), pltpu::TensorCoreMesh("core", 2),
                           pl::scratch_types(pltpu::VMEM<float>({8}), pltpu::VMEM<float>({8}),
                                             pltpu::SemaphoreType::DMA, pltpu::SemaphoreType::DMA))(
      [](pltpu::HbmRef<float> o, pltpu::VmemRef<float> mine, pltpu::VmemRef<float> in,
         pltpu::DmaSemaphoreRef send, pltpu::DmaSemaphoreRef recv) {
        const int me = lax::axis_index("x");
        const int core = lax::axis_index("core");
        mine = jnp::full_like(mine, static_cast<float>(10 * me + core));
        auto right = pltpu::make_async_remote_copy(mine, in, send, recv, {(me + 1) % 3});
        right.start();
        right.wait();
        pltpu::sync_copy(in, o.at(core));  // core c of the left neighbour's value
        auto self = pltpu::make_async_remote_copy(mine, in, send, recv, {me});
        self.start();
        self.wait();
      });
  auto f = [&](const Array<float>&) { return kernel(); };
  const Array<float> out = jax::shard_map(f, mesh, P("x"), P("x"))(Array<float>({3}, 0.0f));
  for (int d = 0; d < 3; ++d) {
    for (int c = 0; c < 2; ++c) {
      EXPECT_EQ(out(d * 2 + c, 0), static_cast<float>(10 * ((d + 2) % 3) + c));
    }
  }
}

TEST(RemoteCopy, ShortCountTimesOutNamingTheSemaphore) {
  const Mesh mesh = jax::make_mesh({2}, {"x"});
  std::atomic<int> line{0};
  auto kernel =
      pl::kernel(pl::out_type<float>({16}), pltpu::TensorCoreMesh("core", 1),
                 pl::scratch_types(pltpu::VMEM<float>({16}), pltpu::SemaphoreType::DMA,
                                   pltpu::SemaphoreType::DMA),
                 kShortTimeout)([&](pltpu::HbmRef<float> o, pltpu::VmemRef<float> v,
                                    pltpu::DmaSemaphoreRef send, pltpu::DmaSemaphoreRef recv) {
        v = jnp::zeros_like(v);
        if (lax::axis_index("x") == 0) {
          auto half = pltpu::make_async_remote_copy(v.at(pl::ds(0, 8)), o.at(pl::ds(0, 8)), send,
                                                    recv, {1});
          half.start();
          half.wait_send();
        } else {
          line = __LINE__ + 1;
          pltpu::make_async_remote_copy(v, o, send, recv, {0}).wait_recv();
        }
      });
  auto f = [&](const Array<float>&) { (void)kernel(); };
  tessera::testing::expect_kernel_error(
      [&] { jax::shard_map(f, mesh, P("x"), {})(Array<float>({2}, 0.f)); }, ErrorKind::kTimeout,
      "holds 32 bytes", line);
}

TEST(RemoteCopy, ExcessBytesLeakAtExit) {
  const Mesh mesh = jax::make_mesh({2}, {"x"});
  auto kernel =
      pl::kernel(pl::out_type<float>({16}), pltpu::TensorCoreMesh("core", 1),
                 pl::scratch_types(pltpu::VMEM<float>({16}), pltpu::SemaphoreType::DMA,
                                   pltpu::SemaphoreType::DMA),
                 pl::name("excess"))([&](pltpu::HbmRef<float> o, pltpu::VmemRef<float> v,
                                         pltpu::DmaSemaphoreRef send, pltpu::DmaSemaphoreRef recv) {
        v = jnp::zeros_like(v);
        auto all = pltpu::make_async_remote_copy(v, o, send, recv, {1 - lax::axis_index("x")});
        all.start();
        all.wait_send();
        // Waits for half of what arrives.
        pltpu::make_async_remote_copy(v.at(pl::ds(0, 8)), o.at(pl::ds(0, 8)), send, recv, {0})
            .wait_recv();
      });
  auto f = [&](const Array<float>&) { (void)kernel(); };
  auto e = tessera::testing::catch_error<KernelError>(
      [&] { jax::shard_map(f, mesh, P("x"), {})(Array<float>({2}, 0.f)); });
  ASSERT_TRUE(e);
  EXPECT_EQ(e->kind(), ErrorKind::kSemaphoreLeak);
  EXPECT_TRUE(contains(e->what(), "scratch #2 SemaphoreType.DMA holds 32 bytes")) << e->what();
}

TEST(RemoteSignal, ReachesTheNamedCore) {
  const Mesh mesh = jax::make_mesh({2}, {"x"});
  std::atomic<int> done{0};
  auto kernel =
      pl::kernel(pltpu::TensorCoreMesh("core", 2),
                 pl::scratch_types(pltpu::SemaphoreType::REGULAR))([&](pltpu::SemaphoreRef s) {
        const int me = lax::axis_index("x");
        const int core = lax::axis_index("core");
        if (core == 0) {
          // Core 1 of the other device, once by core_index, once by the dict's core axis.
          pl::semaphore_signal(s, 1, pl::device_id({1 - me}), pl::core_index(1));
          pl::semaphore_signal(s, 2, pl::device_id({{"x", 1 - me}, {"core", 1}}));
        } else {
          pl::semaphore_wait(s, 3);
          ++done;
        }
      });
  on_devices(mesh, kernel);
  EXPECT_EQ(done.load(), 2);
}

TEST(BarrierSemaphore, NeedsACollectiveId) {
  const Mesh mesh = jax::make_mesh({2}, {"x"});
  std::atomic<int> line{0};
  auto kernel = pl::kernel(pltpu::TensorCoreMesh("core", 1), pl::name("no_id"))([&] {
    line = __LINE__ + 1;
    (void)pltpu::get_barrier_semaphore();
  });
  tessera::testing::expect_kernel_error([&] { on_devices(mesh, kernel); },
                                        ErrorKind::kInvalidArgument,
                                        "kernel 'no_id' has no collective_id", line);
  EXPECT_TESSERA_ERROR(pl::kernel(pltpu::TensorCoreMesh("core", 1),
                                  pltpu::CompilerParams{.collective_id = 32})([] {}),
                       UsageError, ErrorKind::kInvalidArgument, "collective_id=32 is outside 0..31",
                       __LINE__ - 3);
}

TEST(BarrierSemaphore, PersistsAcrossKernelsAndMustEndAtZero) {
  const Mesh mesh = jax::make_mesh({2}, {"x"});
  // The first kernel signals the neighbour's barrier; the second consumes it.
  auto signal =
      pl::kernel(pltpu::TensorCoreMesh("core", 1), pltpu::CompilerParams{.collective_id = 3})([] {
        pl::semaphore_signal(pltpu::get_barrier_semaphore(), 1,
                             pl::device_id({1 - lax::axis_index("x")}));
      });
  auto wait =
      pl::kernel(pltpu::TensorCoreMesh("core", 1), pltpu::CompilerParams{.collective_id = 3})(
          [] { pl::semaphore_wait(pltpu::get_barrier_semaphore(), 1); });
  jax::shard_map([&](const Array<float>&) { signal(), wait(); }, mesh, P("x"),
                 {})(Array<float>({2}, 0.f));
  // Left over: reported when the program ends, and cleared.
  auto e = tessera::testing::catch_error<UsageError>([&] {
    jax::shard_map([&](const Array<float>&) { signal(); }, mesh, P("x"),
                   {})(Array<float>({2}, 0.f));
  });
  ASSERT_TRUE(e);
  EXPECT_EQ(e->kind(), ErrorKind::kSemaphoreLeak);
  EXPECT_TRUE(contains(e->what(), "the barrier semaphore of collective_id 3 holds 1")) << e->what();
  jax::shard_map([&](const Array<float>&) { signal(), wait(); }, mesh, P("x"),
                 {})(Array<float>({2}, 0.f));
}

// Device 1 leaves the kernel and, in its next kernel, tells device 0 (on the barrier semaphore,
// which outlives kernels); device 0 then sends to device 1's first kernel, which is gone.
TEST(RemoteCopy, ToADeviceThatHasLeftIsAnError) {
  const Mesh mesh = jax::make_mesh({2}, {"x"});
  std::atomic<int> line{0};
  auto first = pl::kernel(pl::out_type<float>({8}), pltpu::TensorCoreMesh("core", 1),
                          pl::scratch_types(pltpu::VMEM<float>({8}), pltpu::SemaphoreType::DMA,
                                            pltpu::SemaphoreType::DMA),
                          pltpu::CompilerParams{.wait_timeout_ms = 2000, .collective_id = 0})(
      [&](pltpu::HbmRef<float> o, pltpu::VmemRef<float> v, pltpu::DmaSemaphoreRef send,
          pltpu::DmaSemaphoreRef recv) {
        v = jnp::zeros_like(v);
        pltpu::sync_copy(v, o);
        if (lax::axis_index("x") == 0) {
          pl::semaphore_wait(pltpu::get_barrier_semaphore(), 1);
          line = __LINE__ + 1;
          pltpu::make_async_remote_copy(v, o, send, recv, {1}).start();
        }
      });
  auto second =
      pl::kernel(pltpu::TensorCoreMesh("core", 1), pltpu::CompilerParams{.collective_id = 0})([] {
        if (lax::axis_index("x") == 1) {
          pl::semaphore_signal(pltpu::get_barrier_semaphore(), 1, pl::device_id({0}));
        }
      });
  auto f = [&](const Array<float>&) {
    (void)first();
    second();
  };
  tessera::testing::expect_kernel_error(
      [&] { jax::shard_map(f, mesh, P("x"), {})(Array<float>({2}, 0.f)); },
      ErrorKind::kInvalidArgument, "has already left kernel", line);
}

}  // namespace
