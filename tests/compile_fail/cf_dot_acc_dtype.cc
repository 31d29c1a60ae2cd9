// Must not compile: accumulating a bfloat16 dot (the operands' dtype, as jnp.dot) into a float32
// accumulator; jnp::dot<float>(x, y) asks for float32, as preferred_element_type does.
// Expected: "the dot's result dtype differs from the accumulator's dtype".
#include <tessera/tessera.h>

using namespace tessera;

void dot_acc_dtype(bfloat16* a, bfloat16* b, float* c) {
  pltpu::VmemRef<bfloat16> x(a, {8, 128});  // (8, 128) VMEM, bfloat16
  pltpu::VmemRef<bfloat16> y(b, {128, 8});  // (128, 8) VMEM, bfloat16
  pltpu::VmemRef<float> acc(c, {8, 8});     // (8, 8) VMEM, float32
  // error: the dot's result is bfloat16
  acc += jnp::dot(x, y);
}
