// Must not compile: jnp::dot of an elementwise expression (a dot takes refs: tiles in VMEM).
// Expected: "jnp::dot / lax::dot_general takes 2-D refs in VMEM".
#include <tessera/tessera.h>

using namespace tessera;

void dot_expression(float* a, float* b, float* c) {
  pltpu::VmemRef<float> x(a, {8, 128});  // (8, 128) VMEM
  pltpu::VmemRef<float> y(b, {128, 8});  // (128, 8) VMEM
  pltpu::VmemRef<float> o(c, {8, 8});    // (8, 8) VMEM
  // error: x * 2.0f is an expression, not a ref
  o = jnp::dot(x * 2.0f, y);
}
