// Must not compile: pl::semaphore_wait on a DMA semaphore.
// Expected: "pl::semaphore_wait needs a REGULAR or BARRIER semaphore".
#include <tessera/tessera.h>

using namespace tessera;

void semaphore_wait_dma() {
  auto k = pl::kernel(
      pltpu::TensorCoreMesh("core", 1),
      pl::scratch_types(pltpu::SemaphoreType::DMA({2})))([](pltpu::DmaSemaphoreRef sems) {
    // error: a DMA semaphore is waited with the copy descriptor's .wait()
    pl::semaphore_wait(sems.at(0), 4096);
  });
  k();
}
