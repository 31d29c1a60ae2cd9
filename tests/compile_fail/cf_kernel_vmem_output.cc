// pl::kernel's outputs are arrays: a VMEM output (pltpu::VMEM<T> in out_shape) is for
// pl::pallas_call.
#include <tessera/tessera.h>

using namespace tessera;

void bad() {
  auto k = pl::kernel(pl::out_shape(pltpu::VMEM<float>({8, 128})),
                      pltpu::TensorCoreMesh("core"))([](pltpu::VmemRef<float> o) { (void)o; });
  k();
}
