// A pallas_call body whose parameters do not match the refs it is called with: the error names
// the position (here the output, taken as an int32 window of a float32 output).
#include <tessera/tessera.h>

using namespace tessera;

void bad(const Array<float>& x) {
  auto f = pl::pallas_call(
      [](pltpu::VmemRef<const float> xv, pltpu::VmemRef<int32_t> ov) { (void)xv, (void)ov; },
      pl::out_shape<float>({8, 128}), pltpu::TensorCoreMesh("core", 1));
  (void)f(x);
}
