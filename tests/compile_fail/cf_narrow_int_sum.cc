// Must not compile: jnp.sum of an int4 array (jax raises: the sub-byte integers have no sum
// accumulator dtype). Expected: "jnp.sum of a sub-byte integer array".
#include <tessera/tessera.h>

using namespace tessera;

void narrow_int_sum(int4* a, int32_t* s) {
  pltpu::VmemRef<int4> x(a, {128});   // (128,) VMEM, int4
  pltpu::VmemRef<int32_t> o(s, {1});  // (1,) VMEM, int32
  // error: no sum dtype for int4; write jnp::sum(x.astype<int32_t>())
  o = jnp::sum(x);
}
