// Must not compile: assigning a float32 expression to an int32 VMEM ref (no silent narrowing).
// Expected: "the assigned expression's dtype differs from the destination".
#include <tessera/tessera.h>

#include <cstdint>

using namespace tessera;

void assign_dtype(float* fvmem, int32_t* ivmem) {
  pltpu::VmemRef<float> f(fvmem, {128});    // (128,) VMEM, float32
  pltpu::VmemRef<int32_t> i(ivmem, {128});  // (128,) VMEM, int32
  // error: float32 expression into an int32 ref
  i = f + 1.0f;
}
