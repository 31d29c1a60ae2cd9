// A pallas_call argument that is not an operand (here a std::vector): the error lists what an
// input may be (an Array, a VmemArray, an SmemArray, a std::optional<Array> or std::nullopt, a
// SemaphoreArray).
#include <tessera/tessera.h>

#include <vector>

using namespace tessera;

void bad(const std::vector<float>& x) {
  auto f = pl::pallas_call([](auto xv, pltpu::VmemRef<float> ov) { (void)xv, (void)ov; },
                           pl::out_shape<float>({8, 128}), pltpu::TensorCoreMesh("core", 1));
  f(x);
}
