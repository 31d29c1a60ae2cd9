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

// cf_semaphore_signal_dma, cf_semaphore_wait_dma, cf_async_copy_regular_semaphore,
// cf_core_barrier_dma: REGULAR semaphores are signalled and waited, DMA semaphores count async
// copies, a barrier uses a REGULAR (or BARRIER) semaphore.
void control_semaphores() {
  auto k = pl::kernel(pl::out_type<float>({128}), pltpu::TensorCoreMesh("core", 2),
                      pl::scratch_types(pltpu::VMEM<float>({128}), pltpu::SemaphoreType::REGULAR,
                                        pltpu::SemaphoreType::DMA({2})))(
      [](pltpu::HbmRef<float> o, pltpu::VmemRef<float> v, pltpu::SemaphoreRef sem,
         pltpu::DmaSemaphoreRef dma) {
        v = jnp::zeros_like(v);
        pl::semaphore_signal(sem);
        pl::semaphore_wait(sem);
        pltpu::core_barrier(sem, "core");
        pltpu::run_on_first_core("core", [&] {
          auto copy = pltpu::make_async_copy(v, o, dma.at(0));
          copy.start();
          copy.wait();
        });
        const int32_t left = pl::semaphore_read(dma.at(1));
        static_cast<void>(left);
        pl::run_scoped([&](pltpu::VmemRef<float> tmp,
                           pltpu::DmaSemaphoreRef s) { pltpu::async_copy(v, tmp, s).wait(); },
                       pltpu::VMEM<float>({128}), pltpu::SemaphoreType::DMA);
      });
  Array<float> result = k();
  static_cast<void>(result);
}

// cf_bitwise_float, cf_shift_float, cf_compound_assign_dtype: bitwise ops and shifts on
// integers, compound assignment that keeps the ref's dtype.
void control_vector_ops(float* vmem, int32_t* ivmem) {
  pltpu::VmemRef<float> v(vmem, {128});     // (128,) VMEM
  pltpu::VmemRef<int32_t> i(ivmem, {128});  // (128,) VMEM
  i = (i & 0xff) >> 1;
  i = lax::shift_right_logical(i, 2) | (i << 3);
  i += 1;
  v /= 2.0f;
  v = jnp::where(i > 0, jnp::maximum(v, 0.0f), i.astype<float>());
  v = jnp::sum(v) + jnp::max(v, 0, true);
}

// cf_dot_dtypes, cf_dot_acc_dtype: dot operands of one dtype; a float32 accumulator takes a
// bfloat16 dot through the preferred element type.
void control_dot(bfloat16* a, bfloat16* b, float* c) {
  pltpu::VmemRef<bfloat16> x(a, {8, 128});  // (8, 128) VMEM, bfloat16
  pltpu::VmemRef<bfloat16> y(b, {128, 8});  // (128, 8) VMEM, bfloat16
  pltpu::VmemRef<float> acc(c, {8, 8});     // (8, 8) VMEM, float32
  acc = jnp::dot<float>(x, y);
  acc += jnp::dot<float>(x, y);
}

// cf_named_ref_expression, cf_value_write, cf_logical_and_arrays: values hold what a ref held
// when they were made, pure expressions are named freely, elementwise logic uses & and |.
void control_values(float* a, float* c, bool* m) {
  pltpu::VmemRef<float> x(a, {8, 128});  // (8, 128) VMEM
  pltpu::VmemRef<float> o(c, {8, 128});  // (8, 128) VMEM
  pltpu::VmemRef<bool> mask(m, {8, 128});
  jnp::Value twice = x * 2.0f;
  auto plus_one = twice + 1.0f;  // pure: reads a value only
  x = jnp::zeros_like(x);
  o = plus_one + x[pl::ellipsis];
  mask = (x > 0.0f) & (x < 1.0f);
  jnp::Value s = jnp::dot(twice, jnp::transpose(twice));
  static_cast<void>(s);
}

// cf_float8_promotion, cf_ref_bitcast_width: a float8 mixes with another float after an
// explicit astype; a bitcast keeps the element size, or changes it between numeric types.
void control_dtypes(float8_e4m3fn* a, float* b) {
  pltpu::VmemRef<float8_e4m3fn> x(a, {128});  // (128,) VMEM, float8_e4m3fn
  pltpu::VmemRef<float> y(b, {128});          // (128,) VMEM, float32
  y = x.astype<float>() + y;
  auto u = y.bitcast<uint32_t>();
  u = u & 0x7fffffffu;
}

// cf_ref_bitcast_width, cf_narrow_int_sum: a width-changing bitcast of a 2-D float ref; the sum
// of an int4 array after astype.
void control_width_bitcast(float* a, int4* b, int32_t* c) {
  pltpu::VmemRef<float> x(a, {8, 128});  // (8, 128) VMEM, float32
  pltpu::VmemRef<int4> y(b, {128});      // (128,) VMEM, int4
  pltpu::VmemRef<int32_t> s(c, {1});     // (1,) VMEM, int32
  x.bitcast<int16_t>()[pl::ellipsis] = x.bitcast<int16_t>()[pl::ellipsis] + int16_t{1};
  s = jnp::sum(y.astype<int32_t>());
}

// cf_dot_float8_mixed: a mixed float8 product with its preferred element type.
void control_dot_float8_mixed(bfloat16* a, float8_e4m3b11fnuz* b, float* c) {
  pltpu::VmemRef<bfloat16> x(a, {8, 128});            // (8, 128) VMEM, bfloat16
  pltpu::VmemRef<float8_e4m3b11fnuz> w(b, {128, 8});  // (128, 8) VMEM, float8_e4m3b11fnuz
  pltpu::VmemRef<float> o(c, {8, 8});                 // (8, 8) VMEM, float32
  o = jnp::dot<float>(x, w);
}
