// Must not compile: Ref.bitcast to bool from a type of another width (a bool element is not bits
// of a number; the width-changing bitcasts take the byte-sized numeric types only).
// Expected: "a bitcast that changes the element width does not take bool".
#include <tessera/tessera.h>

using namespace tessera;

void bitcast_width(float* a) {
  pltpu::VmemRef<float> x(a, {8, 128});  // (8, 128) VMEM, float32
  // error: float32 -> bool
  auto y = x.bitcast<bool>();
  (void)y;
}
