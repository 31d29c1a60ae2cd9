// pl::pallas_call refuses an option it does not take (here emit_pipeline's core_axis_name),
// listing its options.
#include <tessera/tessera.h>

using namespace tessera;

void bad() {
  auto f = pl::pallas_call([](pltpu::VmemRef<float> o) { o = 1.0f; }, pl::out_shape<float>({128}),
                           pltpu::core_axis_name("core"));
  (void)f;
}
