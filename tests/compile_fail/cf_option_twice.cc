// An option given twice is refused (here two names of one kernel).
#include <tessera/tessera.h>

using namespace tessera;

void bad() {
  auto k = pl::kernel(pltpu::TensorCoreMesh("core"), pl::name("a"), pl::name("b"))([] {});
  k();
}
