// Must not compile: `i /= 2` on an int32 ref is true division, whose float32 result cannot be
// stored into the int32 ref (numpy raises for the same in-place op).
// Expected: "the assigned expression's dtype differs from the destination".
#include <tessera/tessera.h>

#include <cstdint>

using namespace tessera;

void compound_dtype(int32_t* a) {
  pltpu::VmemRef<int32_t> i(a, {128});  // (128,) VMEM, int32
  // error: int32 /= int -> float32
  i /= 2;
}
