// Must not compile: int4 + int8 (jax.numpy has no implicit promotion for the sub-byte
// integers). Expected: "these operand dtypes have no implicit promotion".
#include <tessera/tessera.h>

using namespace tessera;

void narrow_int_promotion(int4* a, int8_t* b) {
  pltpu::VmemRef<int4> x(a, {128});    // (128,) VMEM, int4
  pltpu::VmemRef<int8_t> y(b, {128});  // (128,) VMEM, int8
  // error: int4 does not promote with int8
  y = x + y;
}
