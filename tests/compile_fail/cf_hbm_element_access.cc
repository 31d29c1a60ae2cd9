// Must not compile: element access on an HBM ref.
// Expected: "... which kernels cannot read, write or compute on".
#include <tessera/tessera.h>

using namespace tessera;

float hbm_element_access(float* hbm) {
  pltpu::HbmRef<float> h(hbm, {128});  // (128,) HBM
  // error: HBM elements are reachable by DMA only
  return h(0);
}
