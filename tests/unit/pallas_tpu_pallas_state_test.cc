// Ports of Pallas' tpu_pallas_state_test.py (CoreMapTest) and tpu_pallas_memory_space_test.py
// (docs/pallas-parity.md). `pl.core_map(mesh)` over refs made with jax.new_ref is
// `pl::kernel(pl::out_type, mesh)`; a BlockSpec's memory space decides where the body's ref lives.
#include <gtest/gtest.h>

#include <cstdint>

#include "support/pallas_port.h"
#include "tessera/tessera.h"

namespace {
using namespace tessera;
using namespace tessera::pallas_port;

// ---- CoreMapTest ------------------------------------------------------------------------------

TEST(TpuPallasStateTest, CoreMapCanCreateTensorcoreMesh) {
  const pltpu::TensorCoreMesh mesh("x");
  EXPECT_EQ(mesh.axis_name(), "x");
  EXPECT_GE(mesh.num_cores(), 1);  // the device's TensorCores: this machine's by default
  const pltpu::TensorCoreMesh mesh2("x", 4);
  EXPECT_EQ(mesh2.num_cores(), 4);
}

// test_can_signal_cores: every core signals every core, waits for all, then copies x to y.
// Deliberately different: every core writing the same bytes of y is a data race in C++ (checked
// mode reports it, kRace), harmless on a TPU; the port lets the first core copy.
TEST(TpuPallasStateTest, CoreMapCanSignalCores) {
  const Array<int32_t> x = arange<int32_t>({8, 128});
  constexpr int kCores = 2;
  const Array<int32_t> y =
      pl::kernel(pl::out_type<int32_t>({8, 128}), pltpu::TensorCoreMesh("x", kCores))(
          [](pltpu::HbmRef<const int32_t> xh, pltpu::HbmRef<int32_t> yh) {
            pl::run_scoped(
                [&](pltpu::SemaphoreRef sem) {
                  const int s = kCores;  // jax.lax.axis_size("x")
                  for (int i = 0; i < s; ++i) pl::semaphore_signal(sem, 1, pl::core_index(i));
                  pl::semaphore_wait(sem, s);
                  pltpu::run_on_first_core("x", [&] { pltpu::sync_copy(xh, yh); });
                },
                pltpu::SemaphoreType::REGULAR);
          })(x);
  for (int64_t i = 0; i < x.size(); ++i) ASSERT_EQ(y[i], x[i]);
}

TEST(TpuPallasStateTest, CoreMapCanQueryCoreIndex) {
  constexpr int kCores = 2;
  constexpr int64_t slc_size = 16 / kCores;
  const Array<int32_t> x = arange<int32_t>({16, 128});
  const Array<int32_t> y = pl::kernel(
      pl::out_type<int32_t>({16, 128}), pltpu::TensorCoreMesh("x", kCores),
      pl::scratch_types(pltpu::VMEM<int32_t>({slc_size, 128}),
                        pltpu::VMEM<int32_t>({slc_size, 128}), pltpu::SemaphoreType::DMA))(
      [](pltpu::HbmRef<const int32_t> xh, pltpu::HbmRef<int32_t> yh, pltpu::VmemRef<int32_t> xv,
         pltpu::VmemRef<int32_t> yv, pltpu::DmaSemaphoreRef sem) {
        const int core_index = lax::axis_index("x");
        const auto slc = pl::ds(core_index * slc_size, slc_size);
        pltpu::async_copy(xh.at(slc), xv, sem).wait();
        yv = xv + lax::axis_index("x");
        pltpu::async_copy(yv, yh.at(slc), sem).wait();
      })(x);
  for (int64_t i = 0; i < x.size(); ++i) ASSERT_EQ(y[i], x[i] + (i / 128) / slc_size);
}

TEST(TpuPallasStateTest, CoreMapCaptureScalar) {
  const Array<int32_t> x = arange<int32_t>({4, 8, 128});
  const pltpu::TensorCoreMesh mesh("x", 1);
  for (int64_t i = 0; i < 4; ++i) {
    const Array<int32_t> out = pl::kernel(pl::out_type<int32_t>({1, 8, 128}), mesh)(
        [i](pltpu::HbmRef<const int32_t> xh, pltpu::HbmRef<int32_t> oh) {
          const int idx = lax::axis_index("x");  // always 0
          pltpu::sync_copy(xh.at(i), oh.at(idx));
        })(x);
    for (int64_t k = 0; k < 8 * 128; ++k) ASSERT_EQ(out[k], x[i * 8 * 128 + k]);
  }
  for (int64_t i = 0; i < 3; ++i) {
    const Array<int32_t> out = pl::kernel(pl::out_type<int32_t>({2, 8, 128}), mesh)(
        [i](pltpu::HbmRef<const int32_t> xh, pltpu::HbmRef<int32_t> oh) {
          pltpu::sync_copy(xh.at(pl::ds(i, 2)), oh);
        })(x);
    for (int64_t k = 0; k < 2 * 8 * 128; ++k) ASSERT_EQ(out[k], x[i * 8 * 128 + k]);
  }
}

// ---- TPUPallasCallMemorySpaceTest (the values; the HLO memory-space colours are XLA's) --------

template <MemorySpace S>
void input_in(const Array<float>& x) {
  const Array<float> y = pl::pallas_call(
      [](pl::Ref<const float, S> xr, pltpu::AnyRef<float> yh) { pltpu::sync_copy(xr, yh); },
      pl::out_shape<float>({8, 128}), pl::in_specs(pl::BlockSpec(S)),
      pl::out_specs(pl::BlockSpec(pl::ANY)))(x);
  for (float v : y) ASSERT_EQ(v, 1.0f);
}

TEST(TpuPallasMemorySpaceTest, BasicInputMemorySpaceConstraint) {
  const Array<float> x = full<float>({8, 128}, 1.0f);
  input_in<MemorySpace::VMEM>(x);
  input_in<MemorySpace::SMEM>(x);
  input_in<MemorySpace::HBM>(x);
  input_in<MemorySpace::ANY>(x);
}

template <MemorySpace S>
void output_in(const Array<float>& x) {
  const Array<float> y = pl::pallas_call(
      [](pltpu::AnyRef<const float> xh, pl::Ref<float, S> yr) { pltpu::sync_copy(xh, yr); },
      pl::out_shape<float>({8, 128}), pl::in_specs(pl::BlockSpec(pl::ANY)),
      pl::out_specs(pl::BlockSpec(S)))(x);
  for (float v : y) ASSERT_EQ(v, 1.0f);
}

TEST(TpuPallasMemorySpaceTest, BasicOutputMemorySpaceConstraint) {
  const Array<float> x = full<float>({8, 128}, 1.0f);
  output_in<MemorySpace::VMEM>(x);
  output_in<MemorySpace::SMEM>(x);
  output_in<MemorySpace::HBM>(x);
  output_in<MemorySpace::ANY>(x);
}

TEST(TpuPallasMemorySpaceTest, TupleOutputMemorySpaceConstraint) {
  const Array<float> x = full<float>({8, 128}, 1.0f);
  const auto [y, z] = pl::pallas_call(
      [](pltpu::AnyRef<const float> xh, pltpu::VmemRef<float> yr, pltpu::VmemRef<float> zr) {
        pltpu::sync_copy(xh, yr);
        pltpu::sync_copy(xh, zr);
      },
      pl::out_shape(ShapeDtypeStruct<float>{{8, 128}}, ShapeDtypeStruct<float>{{8, 128}}),
      pl::in_specs(pl::BlockSpec(pl::ANY)),
      pl::out_specs(pl::BlockSpec(MemorySpace::VMEM), pl::BlockSpec(MemorySpace::VMEM)))(x);
  for (int64_t i = 0; i < x.size(); ++i) {
    ASSERT_EQ(y[i], 1.0f);
    ASSERT_EQ(z[i], 1.0f);
  }
}

}  // namespace
