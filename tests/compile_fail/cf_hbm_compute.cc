// Must not compile: an HBM ref in a compute expression (kernels compute on VMEM/SMEM only).
// Expected: "a Ref in HBM/ANY memory cannot appear in a compute expression".
#include <tessera/tessera.h>

using namespace tessera;

void hbm_compute(float* hbm, float* vmem) {
  pltpu::HbmRef<float> h(hbm, {128});    // (128,) HBM
  pltpu::VmemRef<float> v(vmem, {128});  // (128,) VMEM
  // error: h must be copied into VMEM first
  v = h + 1.0f;
}
