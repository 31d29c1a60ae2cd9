// Must not compile: a remote copy whose receive semaphore is a REGULAR one.
// Expected: "make_async_remote_copy needs DMA semaphores".
#include <tessera/tessera.h>

using namespace tessera;

void remote_copy_regular_semaphore() {
  auto k = pl::kernel(pl::out_type<float>({128}), pltpu::TensorCoreMesh("core", 1),
                      pl::scratch_types(pltpu::VMEM<float>({128}), pltpu::SemaphoreType::DMA,
                                        pltpu::SemaphoreType::REGULAR))(
      [](pltpu::HbmRef<float> o, pltpu::VmemRef<float> v, pltpu::DmaSemaphoreRef send,
         pltpu::SemaphoreRef recv) {
        v = jnp::zeros_like(v);
        // error: send_sem and recv_sem count bytes (pltpu::SemaphoreType::DMA)
        auto copy = pltpu::make_async_remote_copy(v, o, send, recv, {0});
        copy.start();
        copy.wait();
      });
  k();
}
