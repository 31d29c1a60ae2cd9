// Pallas' pipelining doc, "megacore": mark independent grid axes PARALLEL and the grid is split
// over the TensorCores (here: the mesh's cores), each taking a contiguous chunk of grid points.
#include <ostream>

#include "grid_examples.h"

namespace tessera::examples {

bool run_megacore_add(std::ostream& out) {
  Array<float> x({512, 640});
  Array<float> y({512, 640});
  for (int64_t i = 0; i < x.size(); ++i) {
    x[i] = static_cast<float>(i % 101);
    y[i] = static_cast<float>(i % 7) * -0.5f;
  }
  const pl::BlockSpec spec({128, 128}, [](int i, int j) { return pl::idx(i, j); });
  auto megacore_add = pl::pallas_call(
      [](pltpu::VmemRef<float> x_ref, pltpu::VmemRef<float> y_ref, pltpu::VmemRef<float> o_ref) {
        o_ref = x_ref + y_ref;
      },
      pl::out_shape<float>({512, 640}), pl::grid({4, 5}), pl::in_specs(spec, spec),
      pl::out_specs(spec),
      pltpu::CompilerParams{.dimension_semantics = {pltpu::PARALLEL, pltpu::PARALLEL}},
      pl::name("megacore_add"));
  const Array<float> o = megacore_add(x, y);
  int64_t wrong = 0;
  for (int64_t i = 0; i < o.size(); ++i) wrong += o[i] == x[i] + y[i] ? 0 : 1;
  out << "megacore_add: (512, 640) in (128, 128) blocks on " << pltpu::get_tpu_info().num_cores
      << " cores, " << wrong << " elements differ from a plain loop  "
      << (wrong == 0 ? "ok" : "WRONG") << "\n";
  return wrong == 0;
}

}  // namespace tessera::examples
