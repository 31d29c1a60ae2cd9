// Must not compile: int4 array * a float scalar (jax.numpy has no implicit promotion for the
// sub-byte integers). Expected: "a sub-byte integer (int4, uint4, int2, uint2) array has no
// implicit promotion with a float scalar".
#include <tessera/tessera.h>

using namespace tessera;

void narrow_int_float_scalar(int4* a, float* b) {
  pltpu::VmemRef<int4> x(a, {128});   // (128,) VMEM, int4
  pltpu::VmemRef<float> y(b, {128});  // (128,) VMEM, float32
  // error: an int4 array does not promote with a Python float
  y = x * 0.5f;
}
