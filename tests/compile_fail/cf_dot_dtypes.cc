// Must not compile: jnp::dot of a float32 tile and a bfloat16 tile (no implicit promotion).
// Expected: "jnp::dot / lax::dot_general takes float32 x float32, bfloat16 x bfloat16".
#include <tessera/tessera.h>

using namespace tessera;

void dot_dtypes(float* a, bfloat16* b, float* c) {
  pltpu::VmemRef<float> x(a, {8, 128});     // (8, 128) VMEM, float32
  pltpu::VmemRef<bfloat16> y(b, {128, 8});  // (128, 8) VMEM, bfloat16
  pltpu::VmemRef<float> o(c, {8, 8});       // (8, 8) VMEM, float32
  // error: float32 x bfloat16
  o = jnp::dot<float>(x, y);
}
