// Must not compile: a named expression that reads a ref, used after it was named (it would read
// the ref where it is used, not where it was written).
// Expected: "this named expression reads refs".
#include <tessera/tessera.h>

using namespace tessera;

void named_ref_expression(float* a, float* c) {
  pltpu::VmemRef<float> x(a, {8, 128});  // (8, 128) VMEM
  pltpu::VmemRef<float> o(c, {8, 128});  // (8, 128) VMEM
  auto twice = x * 2.0f;
  x = jnp::zeros_like(x);
  // error: `twice` would read x now (zeros), not the x of the line that named it
  o = twice + 1.0f;
}
