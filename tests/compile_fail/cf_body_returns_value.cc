// Must not compile: a pallas_call body that returns its result instead of writing it to the
// output ref. Expected: "the kernel body returns a value".
#include <tessera/tessera.h>

using namespace tessera;

void returns_value(const Array<float>& x) {
  auto f = pl::pallas_call(
      [](pltpu::VmemRef<const float> xv, pltpu::VmemRef<float> ov) {
        (void)ov;
        return jnp::Value<float>(xv[pl::ellipsis] + 1.0f);  // error: o_ref[...] = ... instead
      },
      pl::out_shape<float>({8, 128}), pltpu::TensorCoreMesh("core", 1));
  (void)f(x);
}
