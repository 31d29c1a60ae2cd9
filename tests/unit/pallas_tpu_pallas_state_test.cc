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

// ---- PallasCallStatefulTest -------------------------------------------------------------------
// Pallas runs these under pl.run_state: the kernels close over the state's refs (x, y) and the
// pallas_call has no outputs. Here the refs are the call's operands: x an input, y the output
// the kernel writes (a pallas_call without outputs cannot write an Array it takes).

TEST(TpuPallasStateTest, StatefulBasicStatefulKernel) {
  const Array<int32_t> x = arange<int32_t>({8, 128});
  const Array<int32_t> y = pl::pallas_call(
      [](pltpu::AnyRef<const int32_t> xr, pltpu::AnyRef<int32_t> yr) {
        pl::run_scoped(
            [&](pltpu::DmaSemaphoreRef sem) {
              pltpu::make_async_copy(xr, yr, sem).start();
              pltpu::make_async_copy(xr, yr, sem).wait();
            },
            pltpu::SemaphoreType::DMA);
      },
      pl::in_specs(pl::BlockSpec(pl::ANY)), pl::out_specs(pl::BlockSpec(pl::ANY)),
      pl::out_shape<int32_t>({8, 128}))(x);
  for (int64_t i = 0; i < x.size(); ++i) ASSERT_EQ(y[i], x[i]);
}

TEST(TpuPallasStateTest, StatefulBasicStatefulKernelWithScratchSem) {
  const Array<int32_t> x = arange<int32_t>({8, 128});
  const Array<int32_t> y = pl::pallas_call(
      [](pltpu::AnyRef<const int32_t> xr, pltpu::AnyRef<int32_t> yr, pltpu::DmaSemaphoreRef sem) {
        pltpu::make_async_copy(xr, yr, sem).start();
        pltpu::make_async_copy(xr, yr, sem).wait();
      },
      pl::in_specs(pl::BlockSpec(pl::ANY)), pl::out_specs(pl::BlockSpec(pl::ANY)),
      pl::scratch_shapes(pltpu::SemaphoreType::DMA), pl::out_shape<int32_t>({8, 128}))(x);
  for (int64_t i = 0; i < x.size(); ++i) ASSERT_EQ(y[i], x[i]);
}

TEST(TpuPallasStateTest, StatefulBasicStatefulKernelWithScalarPrefetch) {
  const Array<int32_t> x = arange<int32_t>({1, 8, 128});  // x[None]
  const Array<int32_t> y = pl::pallas_call(
      [](pltpu::SmemRef<int32_t> index, pltpu::AnyRef<const int32_t> xr, pltpu::AnyRef<int32_t> yr,
         pltpu::DmaSemaphoreRef sem) {
        const int32_t i = index(0);
        pltpu::make_async_copy(xr.at(i), yr, sem).start();
        pltpu::make_async_copy(xr.at(i), yr, sem).wait();
      },
      pltpu::PrefetchScalarGridSpec<1>(pl::in_specs(pl::BlockSpec(pl::ANY)),
                                       pl::out_specs(pl::BlockSpec(pl::ANY)),
                                       pl::scratch_shapes(pltpu::SemaphoreType::DMA)),
      pl::out_shape<int32_t>({8, 128}))(Array<int32_t>({1}, {0}), x);
  for (int64_t i = 0; i < y.size(); ++i) ASSERT_EQ(y[i], x[i]);
}

TEST(TpuPallasStateTest, StatefulBasicStatefulKernelWithIoAliasing) {
  const Array<int32_t> x = arange<int32_t>({8, 128});
  const auto [x_out, y] = pl::pallas_call(
      [](pltpu::AnyRef<const int32_t> xr, pltpu::AnyRef<int32_t>, pltpu::AnyRef<int32_t> yr,
         pltpu::DmaSemaphoreRef sem) {
        pltpu::make_async_copy(xr, yr, sem).start();
        pltpu::make_async_copy(xr, yr, sem).wait();
      },
      pl::in_specs(pl::BlockSpec(pl::ANY)),
      pl::out_specs(pl::BlockSpec(pl::ANY), pl::BlockSpec(pl::ANY)),
      pl::scratch_shapes(pltpu::SemaphoreType::DMA),
      pl::out_shape(ShapeDtypeStruct<int32_t>{{8, 128}}, ShapeDtypeStruct<int32_t>{{8, 128}}),
      pl::input_output_aliases({{0, 0}}))(x);
  for (int64_t i = 0; i < x.size(); ++i) {
    ASSERT_EQ(y[i], x[i]);
    ASSERT_EQ(x_out[i], x[i]);  // o_ref[...] = x (the aliased input, unchanged)
  }
}

TEST(TpuPallasStateTest, StatefulStatefulMatmul) {
  // Scaled down from 512 x 512 x 512 (the same 128 blocks, a 2 x 2 x 2 grid).
  constexpr int64_t m = 256, k = 256, n = 256, bm = 128, bk = 128, bn = 128;
  const Array<float> x = random_array<float>({m, k}, 0);
  const Array<float> y = random_array<float>({k, n}, 1);
  const Array<float> o = pl::pallas_call(
      [](pltpu::AnyRef<const float> xh, pltpu::AnyRef<const float> yh, pltpu::AnyRef<float> oh,
         pltpu::VmemRef<float> acc) {
        pltpu::emit_pipeline(
            [&acc](pltpu::VmemRef<const float> xv, pltpu::VmemRef<const float> yv,
                   pltpu::VmemRef<float> ov) {
              if (pl::program_id(2) == 0) acc = jnp::zeros_like(acc);
              acc += jnp::dot<float>(xv, yv);
              if (pl::program_id(2) == pl::num_programs(2) - 1) ov = acc;
            },
            pltpu::grid({m / bm, n / bn, k / bk}),
            pl::in_specs(
                pl::BlockSpec({bm, bk}, [](int i, int, int kk) { return pl::idx(i, kk); }),
                pl::BlockSpec({bk, bn}, [](int, int j, int kk) { return pl::idx(kk, j); })),
            pl::out_specs(pl::BlockSpec(
                {bm, bn}, [](int i, int j, int) { return pl::idx(i, j); })))(xh, yh, oh);
      },
      pl::in_specs(pl::BlockSpec(pl::ANY), pl::BlockSpec(pl::ANY)),
      pl::out_specs(pl::BlockSpec(pl::ANY)), pl::scratch_shapes(pltpu::VMEM<float>({bm, bn})),
      pl::out_shape<float>({m, n}))(x, y);
  for (int64_t i = 0; i < m; ++i) {
    for (int64_t j = 0; j < n; ++j) {
      double want = 0;
      for (int64_t q = 0; q < k; ++q) want += static_cast<double>(x(i, q)) * y(q, j);
      ASSERT_NEAR(o(i, j), want, 1e-4) << i << "," << j;
    }
  }
}

// ---- CoreMapTest: pl.kernel ---------------------------------------------------------------------

TEST(TpuPallasStateTest, CoreMapKernelHelperBasic) {
  const Array<int32_t> x = arange<int32_t>({8, 128});
  const pltpu::TensorCoreMesh mesh("x", 1);
  const auto body = [](pltpu::HbmRef<const int32_t> xr, pltpu::HbmRef<int32_t> o) {
    pltpu::sync_copy(xr, o);
  };
  const Array<int32_t> a = pl::kernel(body, pl::out_type<int32_t>({8, 128}), mesh)(x);
  const Array<int32_t> b = pl::kernel(pl::out_type<int32_t>({8, 128}), mesh)(body)(x);
  for (int64_t i = 0; i < x.size(); ++i) {
    ASSERT_EQ(a[i], x[i]);
    ASSERT_EQ(b[i], x[i]);
  }
}

TEST(TpuPallasStateTest, CoreMapKernelHelperWithScratch) {
  const Array<int32_t> x = arange<int32_t>({8, 128});
  const Array<int32_t> r = pl::kernel(
      [](pltpu::HbmRef<const int32_t> xr, pltpu::HbmRef<int32_t> o, pltpu::VmemRef<int32_t> s) {
        pltpu::sync_copy(xr, s);
        s += 1;
        pltpu::sync_copy(s, o);
      },
      pl::out_type<int32_t>({8, 128}), pltpu::TensorCoreMesh("x", 1),
      pl::scratch_types(pltpu::VMEM<int32_t>({8, 128})))(x);
  for (int64_t i = 0; i < x.size(); ++i) ASSERT_EQ(r[i], x[i] + 1);
}

TEST(TpuPallasStateTest, CoreMapKernelHelperWithOutTree) {
  const Array<int32_t> x = arange<int32_t>({8, 128});
  const auto [r1, r2] = pl::kernel(
      [](pltpu::HbmRef<const int32_t> xr, pltpu::HbmRef<int32_t> o1, pltpu::HbmRef<int32_t> o2,
         pltpu::VmemRef<int32_t> s) {
        pltpu::sync_copy(xr, o1);
        pltpu::sync_copy(xr, s);
        s += 1;
        pltpu::sync_copy(s, o2);
      },
      pl::out_type(ShapeDtypeStruct<int32_t>{{8, 128}}, ShapeDtypeStruct<int32_t>{{8, 128}}),
      pltpu::TensorCoreMesh("x", 1), pl::scratch_types(pltpu::VMEM<int32_t>({8, 128})))(x);
  for (int64_t i = 0; i < x.size(); ++i) {
    ASSERT_EQ(r1[i], x[i]);
    ASSERT_EQ(r2[i], x[i] + 1);
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

// ---- TPUCoreMapMemorySpaceTest ------------------------------------------------------------------
// Pallas makes the refs with jax.new_ref / pl.empty_ref_like in a memory space and runs kernels
// (core_map or pallas_call) that close over them; here each ref is an operand in that space and
// a ref a later kernel updates is the earlier kernel's output, taken again and aliased.

template <MemorySpace S>
void ref_in(const Array<float>& x, bool use_core_map) {
  Array<float> y;
  if (use_core_map && (S == MemorySpace::HBM || S == MemorySpace::ANY)) {
    // pl::kernel's operands are HBM refs.
    y = pl::kernel(pl::out_type<float>({8, 128}), pltpu::TensorCoreMesh("core", 1))(
        [](pltpu::HbmRef<const float> xr, pltpu::HbmRef<float> yr) { pltpu::sync_copy(xr, yr); })(
        x);
  } else {
    y = pl::pallas_call(
        [](pl::Ref<const float, S> xr, pl::Ref<float, S> yr) {
          if constexpr (S == MemorySpace::VMEM) {
            yr[pl::ellipsis] = xr[pl::ellipsis];
          } else {
            pltpu::sync_copy(xr, yr);
          }
        },
        pl::in_specs(pl::BlockSpec(S)), pl::out_specs(pl::BlockSpec(S)),
        pl::out_shape<float>({8, 128}), pltpu::TensorCoreMesh("core", 1))(x);
  }
  for (int64_t i = 0; i < x.size(); ++i) ASSERT_EQ(y[i], x[i]);
}

TEST(TpuPallasMemorySpaceTest, CoreMapBasicRefMemorySpaceConstraint) {
  const Array<float> x = arange<float>({8, 128});
  for (bool use_core_map : {true, false}) {
    ref_in<MemorySpace::VMEM>(x, use_core_map);
    ref_in<MemorySpace::SMEM>(x, use_core_map);
    ref_in<MemorySpace::HBM>(x, use_core_map);
    ref_in<MemorySpace::ANY>(x, use_core_map);
  }
}

// y_ref[i] = i, then y_ref[i] += 1 in a second kernel: an SMEM (8,) array.
Array<int32_t> smem_fill_then_increment() {
  const pl::BlockSpec smem(pltpu::SMEM);
  const Array<int32_t> y0 = pl::pallas_call(
      [](pltpu::SmemRef<int32_t> y) {
        for (int i = 0; i < 8; ++i) y(i) = i;
      },
      pl::out_specs(smem), pl::out_shape<int32_t>({8}), pltpu::TensorCoreMesh("core", 1))();
  return pl::pallas_call(
      [](pltpu::SmemRef<const int32_t> y_in, pltpu::SmemRef<int32_t> y) {
        // y_ref[i] = y_ref[i] + 1: the ref read is the input, the ref written its aliased output
        // (an output block is not loaded from the aliased input).
        for (int i = 0; i < 8; ++i) y(i) = y_in(i) + 1;
      },
      pl::in_specs(smem), pl::out_specs(smem), pl::out_shape<int32_t>({8}),
      pl::input_output_aliases({{0, 0}}), pltpu::TensorCoreMesh("core", 1))(y0);
}

TEST(TpuPallasMemorySpaceTest, CoreMapSmemCopy) {
  const Array<int32_t> y = smem_fill_then_increment();
  for (int i = 0; i < 8; ++i) ASSERT_EQ(y[i], i + 1);
}

// test_smem_async_copy: the SMEM ref made once (pl.empty_ref_like(pltpu.SMEM((8,), jnp.int32)))
// is an SMEM array that stays on the chip between calls (pltpu::SmemArray). The first two
// kernels fill and increment it, a third starts its copy into an HBM array on a semaphore it
// returns, a fourth waits for the copy; in checked mode the copy is still in flight between them.
TEST(TpuPallasMemorySpaceTest, CoreMapSmemAsyncCopy) {
  const pl::BlockSpec smem(pltpu::SMEM);
  const pltpu::TensorCoreMesh mesh("core", 1);
  auto fill = pl::pallas_call(
      [](pltpu::SmemRef<int32_t> y) {
        for (int i = 0; i < 8; ++i) y(i) = i;
      },
      pl::out_shape(pltpu::SMEM<int32_t>({8})), pl::out_specs(smem), mesh);
  auto increment = pl::pallas_call(
      [](pltpu::SmemRef<const int32_t> y_in, pltpu::SmemRef<int32_t> y) {
        for (int i = 0; i < 8; ++i) y(i) = y_in(i) + 1;
      },
      pl::out_shape(pltpu::SMEM<int32_t>({8})), pl::in_specs(smem), pl::out_specs(smem),
      pl::input_output_aliases({{0, 0}}), mesh);
  const pltpu::SmemArray<int32_t> y = increment(fill());
  auto start = pl::pallas_call(
      [](pltpu::SmemRef<const int32_t> y_ref, pltpu::AnyRef<int32_t> y_out,
         pltpu::DmaSemaphoreRef sem) { pltpu::make_async_copy(y_ref, y_out, sem).start(); },
      pl::out_shape(ShapeDtypeStruct<int32_t>{{8}}, pltpu::SemaphoreType::DMA), pl::in_specs(smem),
      pl::out_specs(pl::BlockSpec(pl::ANY), pl::BlockSpec(pltpu::SEMAPHORE)), mesh);
  auto [y_out, sem] = start(y);
  auto wait = pl::pallas_call(
      [](pltpu::SmemRef<const int32_t> y_ref, pltpu::AnyRef<const int32_t>,
         pltpu::DmaSemaphoreRef sem_ref, pltpu::AnyRef<int32_t> y_out_ref) {
        pltpu::make_async_copy(y_ref, y_out_ref, sem_ref).wait();
      },
      pl::out_shape<int32_t>({8}),
      pl::in_specs(smem, pl::BlockSpec(pl::ANY), pl::BlockSpec(pltpu::SEMAPHORE)),
      pl::out_specs(pl::BlockSpec(pl::ANY)), pl::input_output_aliases({{1, 0}}), mesh);
  const Array<int32_t> out = wait(y, y_out, sem);
  for (int i = 0; i < 8; ++i) ASSERT_EQ(out[i], i + 1);
}

// test_smem_async_copy_megacore: every core has its own SMEM (1, n) array (the SmemArray holds
// one copy per core); core i writes i * n + 0..n-1 into its copy and copies it to y_out[i].
// `pl.core_map` runs the body once on every core: here a grid of one PARALLEL point per core.
TEST(TpuPallasMemorySpaceTest, CoreMapSmemAsyncCopyMegacore) {
  constexpr int kCores = 2;
  constexpr int64_t n = 256;
  const pl::BlockSpec smem(pltpu::SMEM);
  const pltpu::TensorCoreMesh mesh("core", kCores);
  const pltpu::CompilerParams parallel{.dimension_semantics = {pltpu::PARALLEL}};
  auto fill = pl::pallas_call(
      [](pltpu::SmemRef<int32_t> y) {
        const int core_i = lax::axis_index("core");
        for (int64_t i = 0; i < n; ++i) y(0, i) = static_cast<int32_t>(i + core_i * n);
      },
      pl::out_shape(pltpu::SMEM<int32_t>({1, n})), pl::out_specs(smem), pl::grid({kCores}),
      parallel, mesh);
  auto increment = pl::pallas_call(
      [](pltpu::SmemRef<const int32_t> y_in, pltpu::SmemRef<int32_t> y) {
        for (int64_t i = 0; i < n; ++i) y(0, i) = y_in(0, i) + 1;
      },
      pl::out_shape(pltpu::SMEM<int32_t>({1, n})), pl::in_specs(smem), pl::out_specs(smem),
      pl::input_output_aliases({{0, 0}}), pl::grid({kCores}), parallel, mesh);
  const pltpu::SmemArray<int32_t> y = increment(fill());
  auto start = pl::pallas_call(
      [](pltpu::SmemRef<const int32_t> y_ref, pltpu::AnyRef<int32_t> y_out,
         pltpu::DmaSemaphoreRef sem) {
        const int core_i = lax::axis_index("core");
        pltpu::make_async_copy(y_ref, y_out.at(core_i), sem).start();
      },
      pl::out_shape(ShapeDtypeStruct<int32_t>{{kCores, 1, n}}, pltpu::SemaphoreType::DMA),
      pl::in_specs(smem), pl::out_specs(pl::BlockSpec(pl::ANY), pl::BlockSpec(pltpu::SEMAPHORE)),
      pl::grid({kCores}), parallel, mesh);
  auto [y_out, sem] = start(y);
  auto wait = pl::pallas_call(
      [](pltpu::SmemRef<const int32_t> y_ref, pltpu::AnyRef<const int32_t>,
         pltpu::DmaSemaphoreRef sem_ref, pltpu::AnyRef<int32_t> y_out_ref) {
        const int core_i = lax::axis_index("core");
        pltpu::make_async_copy(y_ref, y_out_ref.at(core_i), sem_ref).wait();
      },
      pl::out_shape<int32_t>({kCores, 1, n}),
      pl::in_specs(smem, pl::BlockSpec(pl::ANY), pl::BlockSpec(pltpu::SEMAPHORE)),
      pl::out_specs(pl::BlockSpec(pl::ANY)), pl::input_output_aliases({{1, 0}}), pl::grid({kCores}),
      parallel, mesh);
  const Array<int32_t> out = wait(y, y_out, sem);
  for (int64_t i = 0; i < kCores * n; ++i) ASSERT_EQ(out[i], i + 1) << i;
}

}  // namespace
