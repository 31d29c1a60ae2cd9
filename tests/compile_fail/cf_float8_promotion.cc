// Must not compile: float8_e4m3fn + float32 (jax.numpy has no implicit promotion for them).
// Expected: "these operand dtypes have no implicit promotion".
#include <tessera/tessera.h>

using namespace tessera;

void float8_promotion(float8_e4m3fn* a, float* b) {
  pltpu::VmemRef<float8_e4m3fn> x(a, {128});  // (128,) VMEM, float8_e4m3fn
  pltpu::VmemRef<float> y(b, {128});          // (128,) VMEM, float32
  // error: a float8 does not promote with another float
  y = x + y;
}
