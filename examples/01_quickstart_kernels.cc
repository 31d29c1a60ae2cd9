// The Pallas TPU quickstart in Tessera: `fill_42` and `iota`.
//
// A TPU kernel computes only on fast per-core VMEM; its inputs and outputs live in large, slow
// HBM. So each kernel computes a block in a VMEM scratch buffer, then copies it to its output
// in HBM with a DMA (`pltpu::sync_copy`). `pl::kernel` runs the body on every core of the mesh.
#include <ostream>
#include <string>

#include "quickstart.h"
#include "usage_error.h"

namespace tessera::examples {

Array<float> fill_42() {
  auto kernel = pl::kernel(pl::out_type<float>({128}), pltpu::TensorCoreMesh("core"),
                           pl::scratch_types(pltpu::VMEM<float>({128})), pl::name("fill_42"))(
      [](pltpu::HbmRef<float> o_ref, pltpu::VmemRef<float> o_vmem) {
        o_vmem = jnp::full_like(o_vmem, 42.0f);  // compute in VMEM (every core does the same)
        // VMEM -> HBM, blocks until done. On a TPU every core may write the same values to
        // o_ref; in C++ two threads writing the same bytes is a data race, so one core writes.
        pltpu::run_on_first_core("core", [&] { pltpu::sync_copy(o_vmem, o_ref); });
      });
  return kernel();
}

Array<float> iota(int num_cores, std::source_location where) {
  if (num_cores < 1) {
    usage_error("iota", "num_cores=" + std::to_string(num_cores) + " is below 1",
                "run it on at least one core", where);
  }
  auto kernel = pl::kernel(
      pl::out_type<float>({128 * int64_t{num_cores}}),
      pltpu::TensorCoreMesh("core", num_cores, where), pl::scratch_types(pltpu::VMEM<float>({128})),
      pl::name("iota"))([](pltpu::HbmRef<float> o_ref, pltpu::VmemRef<float> o_vmem) {
    const int i = lax::axis_index("core");
    o_vmem = jnp::arange<float>(128) + float(i * 128);         // our chunk, in VMEM
    pltpu::sync_copy(o_vmem, o_ref.at(pl::ds(i * 128, 128)));  // to our slice of HBM
  });
  return kernel();
}

Array<float> iota() { return iota(pltpu::get_tpu_info().num_cores); }

bool run_quickstart(std::ostream& out) {
  const Array<float> a = fill_42();
  bool fill_ok = a.size() == 128;
  for (float v : a) fill_ok = fill_ok && v == 42.0f;
  const PrintOptions brief{.threshold = 6, .edgeitems = 3, .linewidth = 75};
  out << "fill_42() -> " << a.to_string(brief) << "  (shape " << a.shape().to_string() << ")  "
      << (fill_ok ? "ok" : "WRONG") << "\n";

  const int cores = pltpu::get_tpu_info().num_cores;
  const Array<float> b = iota(cores);
  bool iota_ok = b.size() == 128 * cores;
  for (int64_t k = 0; k < b.size(); ++k) iota_ok = iota_ok && b[k] == static_cast<float>(k);
  out << "iota()    -> " << b.to_string(brief) << "  (shape " << b.shape().to_string() << ", "
      << cores << (cores == 1 ? " core" : " cores") << ")  " << (iota_ok ? "ok" : "WRONG") << "\n";
  return fill_ok && iota_ok;
}

}  // namespace tessera::examples
