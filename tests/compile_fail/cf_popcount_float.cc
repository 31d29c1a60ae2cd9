// Must not compile: lax::population_count of float32 (jax.lax rejects it too).
// Expected: "lax.population_count and lax.clz need integer operands".
#include <tessera/tessera.h>

using namespace tessera;

void popcount_float(float* a) {
  pltpu::VmemRef<float> x(a, {128});  // (128,) VMEM, float32
  // error: population_count on floats
  x = lax::population_count(x);
}
