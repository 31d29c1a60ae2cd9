// Must not compile: bitwise and on float32 refs (jax.numpy rejects it too).
// Expected: "bitwise ops (&, |, ^, ~) need integer or bool operands".
#include <tessera/tessera.h>

using namespace tessera;

void bitwise_float(float* a, float* b) {
  pltpu::VmemRef<float> x(a, {128});  // (128,) VMEM, float32
  pltpu::VmemRef<float> y(b, {128});  // (128,) VMEM, float32
  // error: & on floats
  x = x & y;
}
