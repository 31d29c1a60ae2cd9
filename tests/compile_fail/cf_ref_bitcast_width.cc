// Must not compile: Ref.bitcast to a type of another width (a TPU bitcast that changes the width
// repacks tiles, which is not a view of a row-major buffer).
// Expected: "Ref.bitcast<U> keeps the element size".
#include <tessera/tessera.h>

using namespace tessera;

void bitcast_width(float* a) {
  pltpu::VmemRef<float> x(a, {8, 128});  // (8, 128) VMEM, float32
  // error: float32 -> int16 changes the element size
  auto y = x.bitcast<int16_t>();
  (void)y;
}
