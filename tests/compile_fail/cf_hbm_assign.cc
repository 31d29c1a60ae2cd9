// Must not compile: assigning to an HBM ref (writing HBM takes a DMA, pltpu::sync_copy).
// Expected: "... which kernels cannot read, write or compute on".
#include <tessera/tessera.h>

using namespace tessera;

void hbm_assign(float* hbm, float* vmem) {
  pltpu::HbmRef<float> h(hbm, {128});    // (128,) HBM
  pltpu::VmemRef<float> v(vmem, {128});  // (128,) VMEM
  // error: use pltpu::sync_copy(v, h)
  h = v;
}
