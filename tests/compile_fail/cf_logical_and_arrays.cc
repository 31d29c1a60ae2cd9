// Must not compile: && between arrays (Python's `and` on arrays; the elementwise op is &).
// Expected: "&& on arrays is not elementwise".
#include <tessera/tessera.h>

using namespace tessera;

void logical_and_arrays(float* a, bool* c) {
  pltpu::VmemRef<float> x(a, {8, 128});  // (8, 128) VMEM
  pltpu::VmemRef<bool> m(c, {8, 128});   // (8, 128) VMEM
  // error: write (x > 0.0f) & (x < 1.0f)
  (x > 0.0f) && (x < 1.0f);
  m = x > 0.0f;
}
