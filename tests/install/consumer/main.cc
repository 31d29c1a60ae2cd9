// A consumer of the installed Tessera package: runs the fill-42 kernel from kernel.h's file
// comment and checks every element. Prints "consumer: ok" only when the output is right.
#include <tessera/tessera.h>

#include <cstdio>
#include <exception>

using namespace tessera;

int main() {
  try {
    auto fill_42 = pl::kernel(pl::out_type<float>({128}), pltpu::TensorCoreMesh("core"),
                              pl::scratch_types(pltpu::VMEM<float>({128})))(
        [](pltpu::HbmRef<float> o_ref, pltpu::VmemRef<float> o_vmem) {
          o_vmem = jnp::full_like(o_vmem, 42.0f);  // (128,) VMEM
          pltpu::sync_copy(o_vmem, o_ref);         // VMEM -> HBM
        });
    Array<float> result = fill_42();  // (128,) HBM

    if (result.size() != 128) {
      std::fprintf(stderr, "consumer: expected 128 elements, got %lld\n",
                   static_cast<long long>(result.size()));
      return 1;
    }
    const float* data = result.data();
    for (int i = 0; i < 128; ++i) {
      if (data[i] != 42.0f) {
        std::fprintf(stderr, "consumer: element %d is %g, expected 42\n", i,
                     static_cast<double>(data[i]));
        return 1;
      }
    }
  } catch (const std::exception& e) {
    std::fprintf(stderr, "consumer: %s\n", e.what());
    return 1;
  }
  std::puts("consumer: ok");
  return 0;
}
