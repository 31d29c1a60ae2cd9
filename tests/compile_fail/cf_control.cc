// Control for the compile-fail snippets: the same APIs used correctly. Must compile (warning-free
// in the ci preset). Each cf_<x>.cc breaks one rule that this file keeps.
#include <tessera/tessera.h>

#include <cstdint>

using namespace tessera;

// cf_hbm_compute, cf_hbm_element_access, cf_hbm_assign, cf_sync_copy_dtype, cf_assign_dtype:
// HBM data moves by DMA only; compute and element access happen in VMEM, dtypes match.
void control_refs(float* hbm, float* vmem, int32_t* ivmem) {
  pltpu::HbmRef<float> h(hbm, {128});       // (128,) HBM
  pltpu::VmemRef<float> v(vmem, {128});     // (128,) VMEM
  pltpu::VmemRef<int32_t> i(ivmem, {128});  // (128,) VMEM
  pltpu::sync_copy(h, v);
  v = v + 1.0f;
  v(0) = 2.0f;
  i = jnp::full_like(i, 7);
  i = i + 1;
  pltpu::sync_copy(v, h);
}

// cf_body_signature: the body's parameters match the output and scratch refs Tessera passes.
void control_kernel() {
  auto fill_42 = pl::kernel(pl::out_type<float>({128}), pltpu::TensorCoreMesh("core"),
                            pl::scratch_types(pltpu::VMEM<float>({128})))(
      [](pltpu::HbmRef<float> o_ref, pltpu::VmemRef<float> o_vmem) {
        o_vmem = jnp::full_like(o_vmem, 42.0f);
        pltpu::sync_copy(o_vmem, o_ref);
      });
  Array<float> result = fill_42();
  static_cast<void>(result);
}
