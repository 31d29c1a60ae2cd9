// Must not compile: pl::semaphore_signal on a DMA semaphore.
// Expected: "pl::semaphore_signal needs a REGULAR or BARRIER semaphore".
#include <tessera/tessera.h>

using namespace tessera;

void semaphore_signal_dma() {
  auto k = pl::kernel(pltpu::TensorCoreMesh("core", 1),
                      pl::scratch_types(pltpu::SemaphoreType::DMA))([](pltpu::DmaSemaphoreRef sem) {
    // error: DMA semaphores count the bytes of async copies; only copies add to them
    pl::semaphore_signal(sem);
  });
  k();
}
