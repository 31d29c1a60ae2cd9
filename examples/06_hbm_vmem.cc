// Pallas' pipelining doc, "memory spaces": an input left in HBM (pl::BlockSpec(pl::ANY)) is not
// pipelined; the body gets an HBM ref and moves what it needs into VMEM itself with a DMA.
#include <ostream>
#include <random>
#include <string>

#include "grid_examples.h"
#include "usage_error.h"

namespace tessera::examples {

Array<float> hbm_vmem(const Array<float>& x, std::source_location where) {
  if (x.shape().rank() != 2 || x.shape()[0] < 1 || x.shape()[1] < 1) {
    usage_error("hbm_vmem",
                "x is " + x.shape().to_string() + "; the kernel copies its first row, (1, N)",
                "pass a 2-D array with at least one row and column", where);
  }
  auto kernel = pl::pallas_call(
      [](pltpu::AnyRef<const float> x_hbm_ref, pltpu::VmemRef<float> out_vmem_ref,
         pltpu::VmemRef<float> scratch_vmem_ref) {
        pltpu::sync_copy(x_hbm_ref.at(pl::ds(0, 1)), scratch_vmem_ref);  // (1, 128) HBM -> VMEM
        out_vmem_ref = scratch_vmem_ref + 1.0f;
      },
      pl::in_specs(pl::BlockSpec(pl::ANY)), pl::out_shape<float>({1, x.shape()[1]}),
      pl::scratch_shapes(pltpu::VMEM<float>({1, x.shape()[1]})), pl::name("hbm_vmem_kernel"));
  return kernel(x);
}

bool run_hbm_vmem(std::ostream& out) {
  std::mt19937 rng(0);
  std::uniform_real_distribution<float> uniform(0.0f, 1.0f);
  Array<float> x({8, 128});
  for (float& v : x) v = uniform(rng);
  const Array<float> o = hbm_vmem(x);
  int64_t wrong = 0;
  for (int64_t c = 0; c < 128; ++c) wrong += o(0, c) == x(0, c) + 1.0f ? 0 : 1;
  out << "hbm_vmem: x (8, 128) stays in HBM; the body copies row 0 into VMEM and adds 1: shape "
      << o.shape().to_string() << ", " << wrong << " elements differ from x[0:1] + 1  "
      << (wrong == 0 ? "ok" : "WRONG") << "\n";
  return wrong == 0;
}

}  // namespace tessera::examples
