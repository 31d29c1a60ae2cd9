// Must not compile: writing through a view of a value (values never change).
// Expected: "a jnp::Value never changes".
#include <tessera/tessera.h>

using namespace tessera;

void value_write(float* a) {
  pltpu::VmemRef<float> x(a, {8, 128});  // (8, 128) VMEM
  jnp::Value v = x * 2.0f;
  // error: v.at(0) is a new value, not a place to write
  v.at(0) = jnp::zeros<float>({128});
}
