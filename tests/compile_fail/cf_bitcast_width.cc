// Must not compile: lax::bitcast_convert_type between dtypes of different widths.
// Expected: "lax.bitcast_convert_type here converts between dtypes of one width".
#include <tessera/tessera.h>

using namespace tessera;

void bitcast_width(float* a, int16_t* b) {
  pltpu::VmemRef<float> x(a, {128});    // (128,) VMEM, float32
  pltpu::VmemRef<int16_t> y(b, {128});  // (128,) VMEM, int16
  // error: 32-bit float to 16-bit int
  y = lax::bitcast_convert_type<int16_t>(x);
}
