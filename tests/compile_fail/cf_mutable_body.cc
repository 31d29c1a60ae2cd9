// A kernel body may not be a mutable lambda: it runs on every core at once.
#include <tessera/tessera.h>

using namespace tessera;

void bad() {
  int steps = 0;
  auto k = pl::kernel(pltpu::TensorCoreMesh("core"))([steps]() mutable { ++steps; });
  k();
}
