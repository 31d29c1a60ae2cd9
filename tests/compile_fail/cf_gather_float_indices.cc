// Must not compile: jnp::take_along_axis with float32 indices (jax rejects them too).
// Expected: "gather indices must have an integer dtype".
#include <tessera/tessera.h>

using namespace tessera;

void gather_float_indices(float* a, float* i) {
  pltpu::VmemRef<float> x(a, {8, 128});    // (8, 128) VMEM, float32
  pltpu::VmemRef<float> idx(i, {8, 128});  // float32 "indices"
  // error: indices must be integers
  x = jnp::take_along_axis(x, idx, 0);
}
