// A lazy expression returned from pl::run_scoped would read the scope's buffers after they are
// freed: refused at compile time.
#include <tessera/tessera.h>

using namespace tessera;

void bad() {
  auto k = pl::kernel(pltpu::TensorCoreMesh("core", 1))([] {
    auto e =
        pl::run_scoped([](pltpu::VmemRef<float> t) { return t + 1.0f; }, pltpu::VMEM<float>({128}));
    (void)e;
  });
  k();
}
