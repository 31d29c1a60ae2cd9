// pl::kernel refuses an option it does not take (here a pipeline's grid), listing its options.
#include <tessera/tessera.h>

using namespace tessera;

void bad() {
  auto k = pl::kernel(pltpu::TensorCoreMesh("core"), pltpu::grid({4}))([] {});
  k();
}
