// Must not compile: jnp::dot of a bfloat16 tile and a float8_e4m3b11fnuz tile without a
// preferred element type (jax.numpy has no promotion between them).
// Expected: "a product of a float8 and another dtype needs a preferred element type".
#include <tessera/tessera.h>

using namespace tessera;

void dot_float8_mixed(bfloat16* a, float8_e4m3b11fnuz* b, bfloat16* c) {
  pltpu::VmemRef<bfloat16> x(a, {8, 128});            // (8, 128) VMEM, bfloat16
  pltpu::VmemRef<float8_e4m3b11fnuz> w(b, {128, 8});  // (128, 8) VMEM, float8_e4m3b11fnuz
  pltpu::VmemRef<bfloat16> o(c, {8, 8});              // (8, 8) VMEM, bfloat16
  // error: no preferred element type for bfloat16 x float8_e4m3b11fnuz
  o = jnp::dot(x, w);
}
