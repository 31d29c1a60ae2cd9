// Must not compile: the kernel body takes an int32 VMEM ref where Tessera passes the float VMEM
// scratch buffer.
// Expected: "kernel body parameter does not accept the ref Tessera passes".
#include <tessera/tessera.h>

#include <cstdint>

using namespace tessera;

void body_signature() {
  auto k = pl::kernel(pl::out_type<float>({128}), pltpu::TensorCoreMesh("core"),
                      pl::scratch_types(pltpu::VMEM<float>({128})))(
      [](pltpu::HbmRef<float> o_ref, pltpu::VmemRef<int32_t> o_vmem) {  // error: position 1
        o_vmem = jnp::full_like(o_vmem, 42);
        static_cast<void>(o_ref);
      });
  k();
}
