// emit_pipeline refuses an option it does not take (here a kernel's name), listing its options.
#include <tessera/tessera.h>

using namespace tessera;

void bad(pltpu::HbmRef<float> o) {
  const pl::BlockSpec spec({128}, [](int i) { return pl::idx(i); });
  pltpu::emit_pipeline([](pltpu::VmemRef<float> ov) { ov = 1.0f; }, pltpu::grid({2}),
                       pl::out_specs(spec), pl::name("p"))(o);
}
