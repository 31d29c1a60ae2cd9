// Must not compile: pltpu::core_barrier on a DMA semaphore.
// Expected: "pltpu::core_barrier needs a REGULAR or BARRIER semaphore".
#include <tessera/tessera.h>

using namespace tessera;

void core_barrier_dma() {
  auto k = pl::kernel(pltpu::TensorCoreMesh("core", 2),
                      pl::scratch_types(pltpu::SemaphoreType::DMA))([](pltpu::DmaSemaphoreRef sem) {
    // error: a barrier counts signals from the other cores, not DMA bytes
    pltpu::core_barrier(sem, "core");
  });
  k();
}
