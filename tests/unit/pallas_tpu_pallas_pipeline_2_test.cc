// Ports of Pallas' tests/pallas/tpu_pallas_pipeline_test.py, continued from
// pallas_tpu_pallas_pipeline_test.cc (docs/pallas-parity.md): emit_pipeline over VMEM refs and
// HBM blocks, nested pipelines over transformed refs, BufferedRef allocations, BoundedSlice,
// SMEM blocks with axis queries, and the padded matmul.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <tuple>
#include <type_traits>
#include <vector>

#include "support/pallas_port.h"
#include "tessera/tessera.h"

namespace {
using namespace tessera;
using namespace tessera::pallas_port;
using pltpu::ARBITRARY;
using pltpu::PARALLEL;

// ---- PallasCallPipelineTest -------------------------------------------------------------------

TEST(TpuPallasPipelineTest, PipelineHbmOutput) {
  // An output block in HBM is the HBM ref itself; the body copies each input block into its part.
  const Array<int32_t> x = arange<int32_t>({8, 512});
  const Array<int32_t> o = pl::pallas_call(
      [](pltpu::AnyRef<const int32_t> x_hbm, pltpu::AnyRef<int32_t> o_hbm) {
        pltpu::emit_pipeline(
            [](pltpu::VmemRef<const int32_t> xv, pltpu::HbmRef<int32_t> ov) {
              const int i = static_cast<int>(pl::program_id(0));
              pltpu::sync_copy(xv, ov.at(pl::all, pl::ds(i * 128, 128)));
            },
            pltpu::grid({4}),
            pl::in_specs(pl::BlockSpec({8, 128}, [](int i) { return pl::idx(0, i); })),
            pl::out_specs(pl::BlockSpec(
                {8, 512}, [](int) { return pl::idx(0, 0); }, pltpu::HBM)))(x_hbm, o_hbm);
      },
      pl::out_shape<int32_t>({8, 512}), pl::in_specs(pl::BlockSpec(pltpu::HBM)),
      pl::out_specs(pl::BlockSpec(pltpu::HBM)))(x);
  EXPECT_EQ(o.to_vector(), x.to_vector());
}

TEST(TpuPallasPipelineTest, PipelineEmitPipelineInputHbmMemorySpace) {
  // Two inputs stay in HBM (one with a squeezed axis); the body copies them where it wants.
  const Array<float> x = arange<float>({64, 128});
  const Array<float> y = arange<float>({64, 128});
  const Array<float> z = arange<float>({8, 8, 128});
  const Array<float> out = pl::kernel(pl::out_type<float>({64, 128}),
                                      pltpu::TensorCoreMesh("core", 1),
                                      pl::scratch_types(pltpu::VMEM<float>({8, 128})))(
      [](pltpu::HbmRef<const float> x_hbm, pltpu::HbmRef<const float> y_hbm,
         pltpu::HbmRef<const float> z_hbm, pltpu::HbmRef<float> o_hbm,
         pltpu::VmemRef<float> scratch) {
        pltpu::emit_pipeline(
            [&](pltpu::VmemRef<const float> xr, pltpu::HbmRef<const float> yr,
                pltpu::HbmRef<const float> zr, pltpu::VmemRef<float> o) {
              EXPECT_EQ(yr.shape(), Shape({8, 128}));
              EXPECT_EQ(zr.shape(), Shape({8, 128}));
              pltpu::sync_copy(yr, o);
              pltpu::sync_copy(zr, scratch);
              o = o + xr + 2.0f * scratch;
            },
            pltpu::grid({8}),
            pl::in_specs(
                pl::BlockSpec({8, 128}, [](int i) { return pl::idx(i, 0); }),
                pl::BlockSpec(
                    {8, 128}, [](int i) { return pl::idx(i, 0); }, pltpu::HBM),
                pl::BlockSpec(
                    {pl::squeezed, 8, 128}, [](int i) { return pl::idx(i, 0, 0); }, pltpu::HBM)),
            pl::out_specs(pl::BlockSpec({8, 128}, [](int i) { return pl::idx(i, 0); })))(
            x_hbm, y_hbm, z_hbm, o_hbm);
      })(x, y, z);
  for (int64_t i = 0; i < out.size(); ++i) ASSERT_EQ(out[i], x[i] + y[i] + 2.0f * z[i]) << i;
}

TEST(TpuPallasPipelineTest, PipelineTrivialWindowingMatchedVmem) {
  const Array<int32_t> x = arange<int32_t>({8, 512});
  const Array<int32_t> out = pl::pallas_call(
      [](pltpu::AnyRef<const int32_t> x_hbm, pltpu::AnyRef<int32_t> o_hbm) {
        pl::run_scoped(
            [&](pltpu::VmemRef<int32_t> x_vmem, pltpu::VmemRef<int32_t> o_vmem) {
              pltpu::sync_copy(x_hbm, x_vmem);
              const pl::BlockSpec spec(
                  {8, 512}, [](int) { return pl::idx(0, 0); }, pltpu::VMEM);
              pltpu::emit_pipeline(
                  [](pltpu::VmemRef<const int32_t> xv, pltpu::VmemRef<int32_t> ov) { ov = xv; },
                  pltpu::grid({4}), pl::in_specs(spec), pl::out_specs(spec))(x_vmem, o_vmem);
              pltpu::sync_copy(o_vmem, o_hbm);
            },
            pltpu::VMEM<int32_t>({8, 512}), pltpu::VMEM<int32_t>({8, 512}));
      },
      pl::out_shape<int32_t>({8, 512}), pl::in_specs(pl::BlockSpec(pl::ANY)),
      pl::out_specs(pl::BlockSpec(pl::ANY)))(x);
  EXPECT_EQ(out.to_vector(), x.to_vector());
}

// test_trivial_windowing_mismatched_input / _output: a pallas_call's operands are in VMEM by
// default; a VMEM-space pipeline mixes them with run_scoped VMEM buffers.
TEST(TpuPallasPipelineTest, PipelineTrivialWindowingMismatchedInput) {
  const Array<int32_t> x({3}, std::vector<int32_t>{1, 2, 3});
  const pl::BlockSpec spec(
      {3}, [](int) { return pl::idx(0); }, pltpu::VMEM);
  const Array<int32_t> out = pl::pallas_call(
      [&](pltpu::VmemRef<const int32_t> x_ref, pltpu::VmemRef<int32_t> o_ref) {
        pl::run_scoped(
            [&](pltpu::VmemRef<int32_t> o_vmem) {
              pltpu::emit_pipeline(
                  [](pltpu::VmemRef<const int32_t> xv, pltpu::VmemRef<int32_t> ov) { ov = xv; },
                  pltpu::grid({1}), pl::in_specs(spec), pl::out_specs(spec))(x_ref, o_vmem);
              pltpu::sync_copy(o_vmem, o_ref);
            },
            pltpu::VMEM<int32_t>({3}));
      },
      pl::out_shape<int32_t>({3}))(x);
  EXPECT_EQ(out.to_vector(), x.to_vector());
}

TEST(TpuPallasPipelineTest, PipelineTrivialWindowingMismatchedOutput) {
  const Array<int32_t> x({3}, std::vector<int32_t>{1, 2, 3});
  const pl::BlockSpec spec(
      {3}, [](int) { return pl::idx(0); }, pltpu::VMEM);
  const Array<int32_t> out = pl::pallas_call(
      [&](pltpu::VmemRef<const int32_t> x_ref, pltpu::VmemRef<int32_t> o_ref) {
        pl::run_scoped(
            [&](pltpu::VmemRef<int32_t> x_vmem) {
              pltpu::sync_copy(x_ref, x_vmem);
              pltpu::emit_pipeline(
                  [](pltpu::VmemRef<const int32_t> xv, pltpu::VmemRef<int32_t> ov) { ov = xv; },
                  pltpu::grid({1}), pl::in_specs(spec), pl::out_specs(spec))(x_vmem, o_ref);
            },
            pltpu::VMEM<int32_t>({3}));
      },
      pl::out_shape<int32_t>({3}))(x);
  EXPECT_EQ(out.to_vector(), x.to_vector());
}

// test_squeezed_block_spec_has_correct_shape / test_trivial_window_representation_strips_all_
// none_dimensions: squeezed axes of a VMEM block leave the body's ref without them.
TEST(TpuPallasPipelineTest, PipelineSqueezedBlockSpecHasCorrectShape) {
  int bodies = 0;
  pl::pallas_call(
      [&](pltpu::VmemRef<const float> x_ref, pltpu::VmemRef<float>) {
        pltpu::emit_pipeline(
            [&](pltpu::VmemRef<const float> xv) {
              EXPECT_EQ(xv.shape(), Shape({128, 64}));
              ++bodies;
            },
            pltpu::grid({1}),
            pl::in_specs(pl::BlockSpec(
                {pl::squeezed, 128, 64}, [](int) { return pl::idx(0, 0, 0); }, pltpu::VMEM)))(
            x_ref);
      },
      pl::out_shape<float>({1}))(full<float>({1, 128, 64}, 0.0f));
  EXPECT_EQ(bodies, 1);
}

TEST(TpuPallasPipelineTest, PipelineTrivialWindowRepresentationStripsAllNoneDimensions) {
  int bodies = 0;
  pl::pallas_call(
      [&](pltpu::VmemRef<const float> x_ref, pltpu::VmemRef<float>) {
        pltpu::emit_pipeline(
            [&](pltpu::VmemRef<const float> xv) {
              EXPECT_EQ(xv.shape(), Shape({128, 64}));
              ++bodies;
            },
            pltpu::grid({1}),
            pl::in_specs(pl::BlockSpec(
                {pl::squeezed, pl::squeezed, 128, 64}, [](int) { return pl::idx(0, 0, 0, 0); },
                pltpu::VMEM)))(x_ref);
      },
      pl::out_shape<float>({1}))(full<float>({1, 1, 128, 64}, 0.0f));
  EXPECT_EQ(bodies, 1);
}

TEST(TpuPallasPipelineTest, PipelineUnbufferedVmemOutputFlushesToHbm) {
  // The pipeline writes the pallas_call's VMEM output where it lies; the call returns it.
  const Array<float> out = pl::pallas_call(
      [](pltpu::VmemRef<float> o_ref) {
        pltpu::emit_pipeline(
            [](pltpu::VmemRef<float> ov) {
              ov = jnp::ones<float>({128, 64});
            },
            pltpu::grid({1}),
            pl::out_specs(pl::BlockSpec(
                {128, 64}, [](int) { return pl::idx(0, 0); }, pltpu::VMEM)))(o_ref);
      },
      pl::out_shape<float>({128, 64}))();
  for (float v : out) ASSERT_EQ(v, 1.0f);
}

// test_compute_slice_mixed_block_dims_vmem: squeezed, blocked and pl::Element axes of VMEM refs.
// no_pipelining=True (deliberately different: no such flag) is run as pl::Buffered(1) blocks,
// the unpipelined schedule, with the same result.
TEST(TpuPallasPipelineTest, PipelineComputeSliceMixedBlockDimsVmem) {
  const Array<int32_t> x = arange<int32_t>({2, 16, 512});
  for (int buffers : {2, 1}) {
    const Array<int32_t> out = pl::pallas_call(
        [buffers](pltpu::AnyRef<const int32_t> x_hbm, pltpu::AnyRef<int32_t> o_hbm,
                  pltpu::VmemRef<int32_t> x_vmem, pltpu::VmemRef<int32_t> o_vmem) {
          pltpu::sync_copy(x_hbm, x_vmem);
          pltpu::emit_pipeline(
              [](pltpu::VmemRef<const int32_t> xv, pltpu::VmemRef<int32_t> ov) { ov = xv * 2 + 1; },
              pltpu::grid({2, 2, 2}),
              pl::in_specs(pl::BlockSpec(
                  {pl::squeezed, 8, 256}, [](int i, int j, int k) { return pl::idx(i, j, k); },
                  pltpu::VMEM, pl::Buffered(buffers))),
              pl::out_specs(pl::BlockSpec(
                  {pl::squeezed, pl::Element(8), 256},
                  [](int i, int j, int k) { return pl::idx(i, j * 8, k); }, pltpu::VMEM,
                  pl::Buffered(buffers))))(x_vmem, o_vmem);
          pltpu::sync_copy(o_vmem, o_hbm);
        },
        pl::out_shape<int32_t>({2, 16, 512}), pl::in_specs(pl::BlockSpec(pl::ANY)),
        pl::out_specs(pl::BlockSpec(pl::ANY)),
        pl::scratch_shapes(pltpu::VMEM<int32_t>({2, 16, 512}), pltpu::VMEM<int32_t>({2, 16, 512})))(
        x);
    for (int64_t i = 0; i < x.size(); ++i) ASSERT_EQ(out[i], x[i] * 2 + 1) << i;
  }
}

TEST(TpuPallasPipelineTest, PipelineComputeSliceBoundedSliceVmem) {
  // The window keeps its static extent (6, 8, 256) and starts at the slice's start.
  const Array<int32_t> x = arange<int32_t>({16, 8, 512});
  for (int buffers : {2, 1}) {
    const Array<int32_t> y = pl::pallas_call(
        [buffers](pltpu::AnyRef<const int32_t> x_hbm, pltpu::AnyRef<int32_t> o_hbm,
                  pltpu::VmemRef<int32_t> x_vmem, pltpu::VmemRef<int32_t> o_vmem) {
          pltpu::sync_copy(x_hbm, x_vmem);
          const pl::BlockSpec spec(
              {pl::BoundedSlice(6), 8, 256},
              [](int i, int j) { return pl::idx(pl::ds(i * 2, i + 3), 0, j); }, pltpu::VMEM,
              pl::Buffered(buffers));
          pltpu::emit_pipeline(
              [](pltpu::VmemRef<const int32_t> xv, pltpu::VmemRef<int32_t> ov) {
                EXPECT_EQ(xv.shape(), Shape({6, 8, 256}));
                EXPECT_EQ(ov.shape(), Shape({6, 8, 256}));
                ov = xv + 10;
              },
              pltpu::grid({3, 2}), pl::in_specs(spec), pl::out_specs(spec))(x_vmem, o_vmem);
          pltpu::sync_copy(o_vmem, o_hbm);
        },
        pl::out_shape<int32_t>({16, 8, 512}), pl::in_specs(pl::BlockSpec(pl::ANY)),
        pl::out_specs(pl::BlockSpec(pl::ANY)),
        pl::scratch_shapes(pltpu::VMEM<int32_t>({16, 8, 512}), pltpu::VMEM<int32_t>({16, 8, 512})))(
        x);
    for (int i = 0; i < 3; ++i) {
      for (int j = 0; j < 2; ++j) {
        for (int r = i * 2; r < i * 2 + i + 3; ++r) {
          for (int k = 0; k < 8; ++k) {
            for (int c = j * 256; c < j * 256 + 256; ++c) {
              ASSERT_EQ(y(r, k, c), x(r, k, c) + 10) << r << "," << c;
            }
          }
        }
      }
    }
  }
}

TEST(TpuPallasPipelineTest, PipelinePipelineMatmulNoPipelining) {
  // no_pipelining=True, deliberately different: emit_pipeline has no such flag; one buffer per
  // block (pl::Buffered(1)) is the unpipelined schedule, and the product is the same.
  const Array<float> x = arange<float>({256, 256});
  const Array<float> y = full<float>({256, 256}, 0.5f);
  const Array<float> z = pl::pallas_call(
      [](pltpu::AnyRef<const float> xh, pltpu::AnyRef<const float> yh, pltpu::AnyRef<float> zh) {
        pltpu::emit_pipeline(
            [](pltpu::VmemRef<const float> xv, pltpu::VmemRef<const float> yv,
               pltpu::VmemRef<float> zv) {
              if (pl::program_id(2) == 0) zv = jnp::zeros<float>({128, 128});
              zv += jnp::dot(xv, yv);
            },
            pltpu::grid({2, 2, 2}),
            pl::in_specs(
                pl::BlockSpec(
                    {128, 128}, [](int i, int, int k) { return pl::idx(i, k); }, pl::Buffered(1)),
                pl::BlockSpec(
                    {128, 128}, [](int, int j, int k) { return pl::idx(k, j); }, pl::Buffered(1))),
            pl::out_specs(pl::BlockSpec(
                {128, 128}, [](int i, int j, int) { return pl::idx(i, j); }, pl::Buffered(1))))(
            xh, yh, zh);
      },
      pl::out_shape<float>({256, 256}),
      pl::in_specs(pl::BlockSpec(pl::ANY), pl::BlockSpec(pl::ANY)),
      pl::out_specs(pl::BlockSpec(pl::ANY)))(x, y);
  for (int64_t i = 0; i < 256; ++i) {
    // Row i of x holds 256 i .. 256 i + 255; times 0.5 summed: exact in float32.
    const float want = 0.5f * static_cast<float>(256 * 256 * i + 255 * 256 / 2);
    for (int64_t j = 0; j < 256; ++j) ASSERT_EQ(z(i, j), want) << i << "," << j;
  }
}

// ---- PallasCallMultipleBufferedPipelineTest ---------------------------------------------------

TEST(TpuPallasPipelineTest, MultipleBufferedMatmulWithInputOutput) {
  // BufferedRefs as pallas_call scratch; the output an input_output BufferedRef.
  constexpr int64_t M = 256, N = 256, K = 256, bm = 128, bn = 128, bk = 128;
  const Array<float> x = random_array<float>({M, K}, 10);
  const Array<float> y = random_array<float>({K, N}, 11);
  const Array<float> out = pl::pallas_call(
      [](pltpu::AnyRef<const float> x_hbm, pltpu::AnyRef<const float> y_hbm,
         pltpu::AnyRef<float> o_hbm, pltpu::BufferedRef<float> x_bref,
         pltpu::BufferedRef<float> y_bref, pltpu::BufferedRef<float> o_bref) {
        pltpu::emit_pipeline(
            [](pltpu::VmemRef<const float> xr, pltpu::VmemRef<const float> yr,
               pltpu::VmemRef<float> o) {
              pl::when(pl::program_id(2) == 0, [&] { o = jnp::zeros_like(o); });
              o += jnp::dot(xr, yr);
            },
            pltpu::grid({M / bm, N / bn, K / bk}))(x_hbm, y_hbm, o_hbm,
                                                   pltpu::allocations(x_bref, y_bref, o_bref));
      },
      pl::out_shape<float>({M, N}), pl::in_specs(pl::BlockSpec(pl::ANY), pl::BlockSpec(pl::ANY)),
      pl::out_specs(pl::BlockSpec(pl::ANY)),
      pl::scratch_shapes(pltpu::BufferedRef<float>::input(pl::BlockSpec(
                             {bm, bk}, [](int, int m, int k) { return pl::idx(m, k); })),
                         pltpu::BufferedRef<float>::input(pl::BlockSpec(
                             {bk, bn}, [](int n, int, int k) { return pl::idx(k, n); })),
                         pltpu::BufferedRef<float>::input_output(pl::BlockSpec(
                             {bm, bn}, [](int n, int m, int) { return pl::idx(m, n); }))))(x, y);
  for (int64_t i = 0; i < M; ++i) {
    for (int64_t j = 0; j < N; ++j) {
      double want = 0;
      for (int64_t k = 0; k < K; ++k) want += double(x(i, k)) * double(y(k, j));
      ASSERT_NEAR(out(i, j), want, 5e-5 + 1e-5 * std::abs(want)) << i << "," << j;
    }
  }
}

// ---- PallasCallMegacoreTest -------------------------------------------------------------------

TEST(TpuPallasPipelineTest, MegacorePipelineAxisQueries) {
  // An SMEM output block per step records program_id, num_programs, axis_size and axis_index of
  // a pipeline split across the cores: num_programs is the whole grid, as Pallas' emit_pipeline
  // primitive reports it (its older implementation reported each core's share).
  for (int cores : {1, 2}) {
    constexpr int grid_size = 8;
    const Array<int32_t> out =
        pl::kernel(pl::out_type<int32_t>({grid_size, 128}),
                   pltpu::TensorCoreMesh("core", cores))([](pltpu::HbmRef<int32_t> o_ref) {
          pltpu::emit_pipeline(
              [](pltpu::SmemRef<int32_t> o_smem) {
                o_smem(0) = static_cast<int32_t>(pl::program_id(0));
                o_smem(1) = static_cast<int32_t>(pl::num_programs(0));
                o_smem(2) = static_cast<int32_t>(lax::axis_size("core"));
                o_smem(3) = static_cast<int32_t>(lax::axis_index("core"));
              },
              pltpu::grid({grid_size}),
              pl::out_specs(pl::BlockSpec(
                  {pl::squeezed, 128}, [](int i) { return pl::idx(i, 0); }, pltpu::SMEM)),
              pltpu::core_axis_name("core"), pltpu::dimension_semantics(PARALLEL))(o_ref);
        })();
    for (int i = 0; i < grid_size; ++i) {
      EXPECT_EQ(out(i, 0), i);
      EXPECT_EQ(out(i, 1), grid_size);
      EXPECT_EQ(out(i, 2), cores);
      EXPECT_EQ(out(i, 3), i / (grid_size / cores));
    }
  }
}

// ---- PaddedPipelineEmitterTest ----------------------------------------------------------------

// matmul(x, y, bm, bk, bn): a pipelined matmul whose k blocks need not divide k; the last block's
// padding is masked with iotas before the product, accumulated in a run_scoped VMEM scratch of
// the accumulator type A (float32, or int32 for int8).
template <class T, class A>
Array<T> padded_matmul(const Array<T>& x, const Array<T>& y, int64_t bm, int64_t bk, int64_t bn) {
  const int64_t m = x.shape()[0], k = x.shape()[1], n = y.shape()[1];
  auto body = [=](pltpu::VmemRef<A> acc, pltpu::VmemRef<const T> lhs, pltpu::VmemRef<const T> rhs,
                  pltpu::VmemRef<T> out) {
    const auto k_index = static_cast<int32_t>(pl::program_id(2));
    pl::when(k_index == 0, [&] { acc = jnp::zeros_like(acc); });
    if (k % bk == 0) {
      acc += jnp::dot<A>(lhs, rhs);
    } else {
      const auto kb = static_cast<int32_t>(bk), kk = static_cast<int32_t>(k);
      jnp::Value<T> l =
          jnp::where(k_index * kb + lax::broadcasted_iota<int32_t>(lhs.shape(), 1) < kk,
                     lhs[pl::ellipsis].template astype<A>(), A{})
              .template astype<T>();
      jnp::Value<T> r =
          jnp::where(k_index * kb + lax::broadcasted_iota<int32_t>(rhs.shape(), 0) < kk,
                     rhs[pl::ellipsis].template astype<A>(), A{})
              .template astype<T>();
      acc += jnp::dot<A>(l, r);
    }
    pl::when(k_index == pl::num_programs(2) - 1, [&] { out = acc.template astype<T>(); });
  };
  return pl::pallas_call(
      [=](pltpu::AnyRef<const T> x_hbm, pltpu::AnyRef<const T> y_hbm, pltpu::AnyRef<T> o_hbm) {
        pl::run_scoped(
            [&](pltpu::VmemRef<A> acc) {
              pltpu::emit_pipeline(
                  [&](pltpu::VmemRef<const T> lhs, pltpu::VmemRef<const T> rhs,
                      pltpu::VmemRef<T> out) { body(acc, lhs, rhs, out); },
                  pl::in_specs(
                      pl::BlockSpec({bm, bk}, [](int i, int, int kk) { return pl::idx(i, kk); }),
                      pl::BlockSpec({bk, bn}, [](int, int j, int kk) { return pl::idx(kk, j); })),
                  pl::out_specs(
                      pl::BlockSpec({bm, bn}, [](int i, int j, int) { return pl::idx(i, j); })),
                  pltpu::grid({pl::cdiv(m, bm), pl::cdiv(n, bn), pl::cdiv(k, bk)}),
                  pltpu::dimension_semantics(PARALLEL, PARALLEL, ARBITRARY))(x_hbm, y_hbm, o_hbm);
            },
            pltpu::VMEM<A>({bm, bn}));
      },
      pl::out_shape<T>({m, n}), pl::in_specs(pl::BlockSpec(pl::ANY), pl::BlockSpec(pl::ANY)),
      pl::out_specs(pl::BlockSpec(pl::ANY)), pl::grid({1}))(x, y);
}

// Small values of T: Pallas' normal draws cast to T (int8 ones are -1, 0 or 1).
template <class T>
Array<T> small_values(Shape shape, uint64_t seed) {
  Random r(seed);
  Array<T> a(std::move(shape));
  for (int64_t i = 0; i < a.size(); ++i) {
    if constexpr (std::is_integral_v<T>) {
      a[i] = static_cast<T>(r.uniform_int(-1, 2));
    } else {
      a[i] = static_cast<T>(r.uniform());
    }
  }
  return a;
}

template <class T, class A>
void check_padded_matmul(double tol) {
  // Pallas draws (m, bm), (k, bk), (n, bn) with hypothesis; these cover divisible and partial
  // blocks on every axis.
  const std::vector<std::tuple<int64_t, int64_t, int64_t, int64_t, int64_t, int64_t>> cases = {
      {32, 32, 128, 128, 128, 128}, {100, 32, 300, 128, 200, 128}, {129, 128, 256, 256, 130, 256}};
  uint64_t seed = 20;
  for (const auto& [m, bm, k, bk, n, bn] : cases) {
    const Array<T> x = small_values<T>({m, k}, seed++);
    const Array<T> y = small_values<T>({k, n}, seed++);
    const Array<T> out = padded_matmul<T, A>(x, y, bm, bk, bn);
    for (int64_t i = 0; i < m; ++i) {
      for (int64_t j = 0; j < n; ++j) {
        double want = 0;
        for (int64_t p = 0; p < k; ++p) {
          want += static_cast<double>(static_cast<float>(x(i, p))) *
                  static_cast<double>(static_cast<float>(y(p, j)));
        }
        if constexpr (std::is_integral_v<T>) {
          ASSERT_EQ(out(i, j), static_cast<T>(static_cast<int32_t>(want)));
        } else {
          ASSERT_NEAR(static_cast<float>(out(i, j)), want, tol + tol * std::abs(want))
              << m << "," << k << "," << n;
        }
      }
    }
  }
}

TEST(TpuPallasPipelineTest, PaddedPipelineEmitterPaddedMatmul) {
  check_padded_matmul<float, float>(1e-4);
  check_padded_matmul<bfloat16, float>(1e-2);
  check_padded_matmul<int8_t, int32_t>(0);
}

// ---- PallasCallBoundedSliceIndexingTest -------------------------------------------------------

TEST(TpuPallasPipelineTest, BoundedSliceIndexingBlockSpecBoundedSliceStatic) {
  const Array<int32_t> x = arange<int32_t>({16, 8, 128});
  const Array<int32_t> y =
      pl::kernel(pl::out_type<int32_t>({8, 8, 128}), pltpu::TensorCoreMesh("core", 1))(
          [](pltpu::HbmRef<const int32_t> x_ref, pltpu::HbmRef<int32_t> y_ref) {
            pltpu::emit_pipeline(
                [](pltpu::VmemRef<const int32_t> xv, pltpu::VmemRef<int32_t> ov) { ov = xv; },
                pltpu::grid({1}),
                pl::in_specs(pl::BlockSpec({pl::BoundedSlice(8), 8, 128},
                                           [](int) { return pl::idx(pl::ds(4, 8), 0, 0); })),
                pl::out_specs(pl::BlockSpec({8, 8, 128}, [](int) { return pl::idx(0, 0, 0); })))(
                x_ref, y_ref);
          })(x);
  for (int64_t i = 0; i < y.size(); ++i) ASSERT_EQ(y[i], x[4 * 8 * 128 + i]) << i;  // x[4:12]
}

// Copies x through (BoundedSlice(16), 8, 128) blocks at the rows [s[i, 0], s[i, 1]).
Array<int32_t> bounded_copy(const Array<int32_t>& x, const Array<int32_t>& slices) {
  const int64_t n = slices.shape()[0];
  return pl::kernel(pl::out_type<int32_t>(x.shape()), pltpu::TensorCoreMesh("core", 1),
                    pl::scratch_types(pltpu::SMEM<int32_t>(slices.shape())))(
      [n](pltpu::HbmRef<const int32_t> x_ref, pltpu::HbmRef<const int32_t> s_hbm,
          pltpu::HbmRef<int32_t> y_ref, pltpu::SmemRef<int32_t> s) {
        pltpu::sync_copy(s_hbm, s);
        const pl::BlockSpec spec({pl::BoundedSlice(16), 8, 128}, [s](int i) {
          return pl::idx(pl::ds(s(i, 0), s(i, 1) - s(i, 0)), 0, 0);
        });
        pltpu::emit_pipeline(
            [](pltpu::VmemRef<const int32_t> xv, pltpu::VmemRef<int32_t> ov) { ov = xv; },
            pltpu::grid({n}), pl::in_specs(spec), pl::out_specs(spec))(x_ref, y_ref);
      })(x, slices);
}

TEST(TpuPallasPipelineTest, BoundedSliceIndexingBlockSpecBoundedSliceDynamic) {
  const Array<int32_t> x = arange<int32_t>({16, 8, 128});
  const Array<int32_t> slices({4, 2}, std::vector<int32_t>{11, 16, 8, 11, 3, 8, 0, 3});
  const Array<int32_t> y = bounded_copy(x, slices);
  EXPECT_EQ(y.to_vector(), x.to_vector());
}

TEST(TpuPallasPipelineTest, BoundedSliceIndexingBlockSpecBoundedSliceInvalidIndex) {
  // An integer where the BoundedSlice axis needs a pl::ds.
  const Array<int32_t> x = arange<int32_t>({16, 8, 128});
  auto k = pl::kernel(pl::out_type<int32_t>({8, 8, 128}), pltpu::TensorCoreMesh("core", 1))(
      [](pltpu::HbmRef<const int32_t> x_ref, pltpu::HbmRef<int32_t> y_ref) {
        pltpu::emit_pipeline(
            [](pltpu::VmemRef<const int32_t> xv, pltpu::VmemRef<int32_t> ov) { ov = xv; },
            pltpu::grid({1}),
            pl::in_specs(
                pl::BlockSpec({pl::BoundedSlice(8), 8, 128}, [](int) { return pl::idx(0, 0, 0); })),
            pl::out_specs(pl::BlockSpec({8, 8, 128}, [](int) { return pl::idx(0, 0, 0); })))(x_ref,
                                                                                             y_ref);
      });
  expect_error<KernelError>([&] { k(x); }, ErrorKind::kInvalidArgument,
                            "must return a ds from the index_map for a BoundedSlice");
}

// ---- EmitPipelineVmapTest (without vmap) ------------------------------------------------------

TEST(TpuPallasPipelineTest, EmitPipelineVmapCoreIndex) {
  // Each core copies its 128 columns into VMEM and pipelines over them, adding its core index.
  for (int cores : {1, 2}) {
    const Array<float> x = arange<float>({16, 128 * cores});
    const Array<float> out =
        pl::kernel(pl::out_type<float>({16, 128 * cores}), pltpu::TensorCoreMesh("core", cores),
                   pl::scratch_types(pltpu::VMEM<float>({16, 128}), pltpu::VMEM<float>({16, 128})))(
            [](pltpu::HbmRef<const float> x_ref, pltpu::HbmRef<float> o_ref,
               pltpu::VmemRef<float> scratch_src, pltpu::VmemRef<float> scratch_dst) {
              const int core_idx = lax::axis_index("core");
              pltpu::sync_copy(x_ref.at(pl::all, pl::ds(128 * core_idx, 128)), scratch_src);
              const pl::BlockSpec spec({16, 128}, [](int i) { return pl::idx(0, i); });
              pltpu::emit_pipeline(
                  [](pltpu::VmemRef<const float> xv, pltpu::VmemRef<float> ov) {
                    ov = xv + static_cast<float>(lax::axis_index("core"));
                  },
                  pltpu::grid({1}), pl::in_specs(spec), pl::out_specs(spec),
                  pltpu::dimension_semantics(ARBITRARY))(scratch_src, scratch_dst);
              pltpu::sync_copy(scratch_dst, o_ref.at(pl::all, pl::ds(128 * core_idx, 128)));
            })(x);
    for (int64_t r = 0; r < 16; ++r) {
      for (int64_t c = 0; c < 128 * cores; ++c) {
        ASSERT_EQ(out(r, c), x(r, c) + static_cast<float>(c / 128)) << cores;
      }
    }
  }
}

TEST(TpuPallasPipelineTest, EmitPipelineVmapCopyWithAllocations) {
  // Pallas skips it in both of its emit_pipeline implementations; here it runs.
  const Array<float> x = arange<float>({512});
  for (int64_t steps : {2, 2}) {  // dynamic_grid: the same extent as a run-time value
    const Array<float> out =
        pl::kernel(pl::out_type<float>({512}), pltpu::TensorCoreMesh("core", 1))(
            [steps](pltpu::HbmRef<const float> x_ref, pltpu::HbmRef<float> o_ref) {
              auto [pipeline, make_allocations] = pltpu::emit_pipeline_with_allocations(
                  [](pltpu::VmemRef<const float> xv, pltpu::VmemRef<float> ov) { ov = xv; },
                  pltpu::grid({steps}),
                  pl::in_specs(pl::BlockSpec({256}, [](int i) { return pl::idx(i); })),
                  pl::out_specs(pl::BlockSpec({256}, [](int i) { return pl::idx(i); })));
              pl::run_scoped(
                  [&](std::tuple<pltpu::BufferedRef<float>, pltpu::BufferedRef<float>> allocs) {
                    pipeline(x_ref, o_ref, pltpu::allocations(allocs));
                  },
                  make_allocations(x_ref, o_ref));
            })(x);
    EXPECT_EQ(out.to_vector(), x.to_vector());
  }
}

}  // namespace
