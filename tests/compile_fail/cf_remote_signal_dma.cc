// Must not compile: a remote semaphore_signal of a DMA semaphore.
// Expected: "pl::semaphore_signal needs a REGULAR or BARRIER semaphore".
#include <tessera/tessera.h>

using namespace tessera;

void remote_signal_dma() {
  auto k = pl::kernel(pltpu::TensorCoreMesh("core", 1),
                      pl::scratch_types(pltpu::SemaphoreType::DMA))([](pltpu::DmaSemaphoreRef s) {
    // error: a DMA semaphore counts the bytes of copies
    pl::semaphore_signal(s, 1, pl::device_id({0}));
  });
  k();
}
