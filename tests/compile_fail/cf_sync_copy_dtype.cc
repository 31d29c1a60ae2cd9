// Must not compile: sync_copy between refs of different dtypes.
// Expected: "sync_copy needs source and destination of the same dtype".
#include <tessera/tessera.h>

#include <cstdint>

using namespace tessera;

void sync_copy_dtype(float* hbm, int32_t* vmem) {
  pltpu::HbmRef<float> h(hbm, {128});      // (128,) HBM, float32
  pltpu::VmemRef<int32_t> v(vmem, {128});  // (128,) VMEM, int32
  // error: float32 -> int32
  pltpu::sync_copy(h, v);
}
