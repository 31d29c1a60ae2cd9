// Must not compile: an async copy whose completion is counted on a REGULAR semaphore.
// Expected: "make_async_copy needs a DMA semaphore".
#include <tessera/tessera.h>

using namespace tessera;

void async_copy_regular_semaphore() {
  auto k = pl::kernel(pl::out_type<float>({128}), pltpu::TensorCoreMesh("core", 1),
                      pl::scratch_types(pltpu::VMEM<float>({128}), pltpu::SemaphoreType::REGULAR))(
      [](pltpu::HbmRef<float> o, pltpu::VmemRef<float> v, pltpu::SemaphoreRef sem) {
        v = jnp::zeros_like(v);
        // error: the copy's .wait() needs a DMA semaphore (pltpu::SemaphoreType::DMA)
        auto copy = pltpu::make_async_copy(v, o, sem);
        copy.start();
        copy.wait();
      });
  k();
}
