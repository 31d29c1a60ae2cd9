// Must not compile: shifting a float32 ref.
// Expected: "shifts (<<, >>, shift_right_logical) need integer operands".
#include <tessera/tessera.h>

#include <cstdint>

using namespace tessera;

void shift_float(float* a) {
  pltpu::VmemRef<float> x(a, {128});  // (128,) VMEM, float32
  // error: >> on floats
  x = x >> 1;
}
