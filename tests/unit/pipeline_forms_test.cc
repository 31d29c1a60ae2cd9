// The forms of pltpu::emit_pipeline beyond HBM operands staged in VMEM: operands that already
// live in the block's space (VMEM refs, windows of an enclosing pipeline, HBM blocks), SMEM
// blocks, pl::BoundedSlice, single-buffering of constant blocks; ports of Pallas'
// tpu_pallas_pipeline_test cases, natively and in checked mode, with the errors.
#include <gtest/gtest.h>

#include <optional>
#include <vector>

#include "support/expect_error.h"
#include "tessera/tessera.h"

namespace {
using namespace tessera;

Array<int32_t> iota_i(Shape shape) {
  Array<int32_t> a(std::move(shape));
  for (int64_t i = 0; i < a.size(); ++i) a[i] = static_cast<int32_t>(i);
  return a;
}

// Runs `f` natively and in checked mode.
template <class F>
void both_engines(F&& f) {
  f();
  pltpu::ForceTpuInterpretMode force{pltpu::InterpretParams{}};
  f();
}

TEST(PipelineForms, ComputeSliceMixedBlockDimsVmem) {
  // test_compute_slice_mixed_block_dims_vmem: a pipeline over VMEM refs uses its blocks where
  // they lie (no copies), with squeezed, blocked and pl::Element axes.
  const Array<int32_t> x = iota_i({2, 16, 512});
  both_engines([&] {
    auto f = pl::pallas_call(
        [](pltpu::AnyRef<const int32_t> x_hbm, pltpu::AnyRef<int32_t> o_hbm,
           pltpu::VmemRef<int32_t> x_vmem, pltpu::VmemRef<int32_t> o_vmem) {
          pltpu::sync_copy(x_hbm, x_vmem);
          pltpu::emit_pipeline(
              [](pltpu::VmemRef<int32_t> xv, pltpu::VmemRef<int32_t> ov) { ov = xv * 2 + 1; },
              pltpu::grid({2, 2, 2}),
              pl::in_specs(pl::BlockSpec(
                  {pl::squeezed, 8, 256}, [](int i, int j, int k) { return pl::idx(i, j, k); },
                  pltpu::VMEM)),
              pl::out_specs(pl::BlockSpec(
                  {pl::squeezed, pl::Element(8), 256},
                  [](int i, int j, int k) { return pl::idx(i, j * 8, k); }, pltpu::VMEM)))(x_vmem,
                                                                                           o_vmem);
          pltpu::sync_copy(o_vmem, o_hbm);
        },
        pl::out_shape<int32_t>({2, 16, 512}), pl::in_specs(pl::BlockSpec(pl::ANY)),
        pl::out_specs(pl::BlockSpec(pl::ANY)),
        pl::scratch_shapes(pltpu::VMEM<int32_t>({2, 16, 512}), pltpu::VMEM<int32_t>({2, 16, 512})),
        pltpu::TensorCoreMesh("core", 1));
    const Array<int32_t> o = f(x);
    for (int64_t i = 0; i < x.size(); ++i) ASSERT_EQ(o[i], x[i] * 2 + 1) << i;
  });
}

TEST(PipelineForms, ComputeSliceBoundedSliceVmem) {
  // test_compute_slice_bounded_slice_vmem: the window keeps its static extent (6, 8, 256) and
  // starts at the slice's start, in the VMEM ref itself.
  const Array<int32_t> x = iota_i({16, 8, 512});
  both_engines([&] {
    auto f = pl::pallas_call(
        [](pltpu::AnyRef<const int32_t> x_hbm, pltpu::AnyRef<int32_t> o_hbm,
           pltpu::VmemRef<int32_t> x_vmem, pltpu::VmemRef<int32_t> o_vmem) {
          pltpu::sync_copy(x_hbm, x_vmem);
          o_vmem = jnp::zeros_like(o_vmem);
          const pl::BlockSpec spec(
              {pl::BoundedSlice(6), 8, 256},
              [](int i, int j) { return pl::idx(pl::ds(i * 2, i + 3), 0, j); }, pltpu::VMEM);
          pltpu::emit_pipeline(
              [](pltpu::VmemRef<int32_t> xv, pltpu::VmemRef<int32_t> ov) {
                EXPECT_EQ(xv.shape(), Shape({6, 8, 256}));
                ov = xv + 10;
              },
              pltpu::grid({3, 2}), pl::in_specs(spec), pl::out_specs(spec))(x_vmem, o_vmem);
          pltpu::sync_copy(o_vmem, o_hbm);
        },
        pl::out_shape<int32_t>({16, 8, 512}), pl::in_specs(pl::BlockSpec(pl::ANY)),
        pl::out_specs(pl::BlockSpec(pl::ANY)),
        pl::scratch_shapes(pltpu::VMEM<int32_t>({16, 8, 512}), pltpu::VMEM<int32_t>({16, 8, 512})),
        pltpu::TensorCoreMesh("core", 1));
    const Array<int32_t> y = f(x);
    for (int i = 0; i < 3; ++i) {
      for (int j = 0; j < 2; ++j) {
        for (int r = i * 2; r < i * 2 + i + 3; ++r) {
          for (int c = j * 256; c < j * 256 + 256; ++c) {
            for (int k = 0; k < 8; ++k) ASSERT_EQ(y(r, k, c), x(r, k, c) + 10) << r << "," << c;
          }
        }
      }
    }
  });
}

// Pallas' BoundedSlice tests over HBM: only the slice's elements move, in and out.
Array<int32_t> bounded_copy(const Array<int32_t>& x, const Array<int32_t>& slices) {
  const int64_t n = slices.shape()[0];
  auto k = pl::kernel(pl::out_type<int32_t>(x.shape()), pltpu::TensorCoreMesh("core", 1),
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
      });
  return k(x, slices);
}

TEST(PipelineForms, BlockSpecBoundedSliceDynamic) {
  // test_block_spec_bounded_slice_dynamic: the slices cover the array, in reverse order.
  const Array<int32_t> x = iota_i({16, 8, 128});
  const Array<int32_t> slices({4, 2}, {11, 16, 8, 11, 3, 8, 0, 3});
  both_engines([&] {
    const Array<int32_t> y = bounded_copy(x, slices);
    for (int64_t i = 0; i < x.size(); ++i) ASSERT_EQ(y[i], x[i]) << i;
  });
}

TEST(PipelineForms, BlockSpecBoundedSliceInvalidIndex) {
  // test_block_spec_bounded_slice_invalid_index: an integer where a pl::ds belongs.
  const Array<int32_t> x = iota_i({16, 8, 128});
  std::atomic<int> line{0};
  auto k = pl::kernel(pl::out_type<int32_t>({8, 8, 128}),
                      pltpu::TensorCoreMesh("core", 1))([&](pltpu::HbmRef<const int32_t> x_ref,
                                                            pltpu::HbmRef<int32_t> y_ref) {
    line = __LINE__ + 1;
    const pl::BlockSpec spec({pl::BoundedSlice(8), 8, 128}, [](int) { return pl::idx(0, 0, 0); });
    pltpu::emit_pipeline(
        [](pltpu::VmemRef<const int32_t> xv, pltpu::VmemRef<int32_t> ov) { ov = xv; },
        pltpu::grid({1}), pl::in_specs(spec),
        pl::out_specs(pl::BlockSpec({8, 8, 128}, [](int) { return pl::idx(0, 0, 0); })))(x_ref,
                                                                                         y_ref);
  });
  tessera::testing::expect_kernel_error([&] { k(x); }, ErrorKind::kInvalidArgument,
                                        "must return a ds from the index_map for a BoundedSlice",
                                        line);
}

TEST(PipelineForms, NestedPipelineOverAWindow) {
  // An outer pipeline stages (64, 256) blocks; an inner one walks each window in (8, 128)
  // blocks where it lies.
  const Array<int32_t> x = iota_i({128, 512});
  both_engines([&] {
    auto k = pl::kernel(pl::out_type<int32_t>({128, 512}), pltpu::TensorCoreMesh("core", 1))(
        [](pltpu::HbmRef<const int32_t> x_hbm, pltpu::HbmRef<int32_t> o_hbm) {
          const pl::BlockSpec outer({64, 256}, [](int i, int j) { return pl::idx(i, j); });
          pltpu::emit_pipeline(
              [](pltpu::VmemRef<const int32_t> xw, pltpu::VmemRef<int32_t> ow) {
                const int oi = static_cast<int>(pl::program_id(0));
                const pl::BlockSpec inner({8, 128}, [](int a, int b) { return pl::idx(a, b); });
                pltpu::emit_pipeline([oi](pltpu::VmemRef<const int32_t> xv,
                                          pltpu::VmemRef<int32_t> ov) { ov = xv * 3 + oi; },
                                     pltpu::grid({8, 2}), pl::in_specs(inner),
                                     pl::out_specs(inner))(xw, ow);
              },
              pltpu::grid({2, 2}), pl::in_specs(outer), pl::out_specs(outer))(x_hbm, o_hbm);
        });
    const Array<int32_t> o = k(x);
    for (int64_t r = 0; r < 128; ++r) {
      for (int64_t c = 0; c < 512; ++c) ASSERT_EQ(o(r, c), x(r, c) * 3 + r / 64) << r << "," << c;
    }
  });
}

TEST(PipelineForms, SmemBlocks) {
  // An SMEM block of an HBM ref: each step gets its (1, 8) row of scales in SMEM.
  const Array<int32_t> s = iota_i({4, 8});
  const Array<int32_t> x = iota_i({32, 128});
  both_engines([&] {
    auto k = pl::kernel(pl::out_type<int32_t>({32, 128}), pltpu::TensorCoreMesh("core", 1))(
        [](pltpu::HbmRef<const int32_t> s_hbm, pltpu::HbmRef<const int32_t> x_hbm,
           pltpu::HbmRef<int32_t> o_hbm) {
          pltpu::emit_pipeline(
              [](pltpu::SmemRef<int32_t> sv, pltpu::VmemRef<const int32_t> xv,
                 pltpu::VmemRef<int32_t> ov) { ov = xv * static_cast<int32_t>(sv(0, 3)); },
              pltpu::grid({4}),
              pl::in_specs(pl::BlockSpec(
                               {1, 8}, [](int i) { return pl::idx(i, 0); }, pltpu::SMEM),
                           pl::BlockSpec({8, 128}, [](int i) { return pl::idx(i, 0); })),
              pl::out_specs(pl::BlockSpec({8, 128}, [](int i) { return pl::idx(i, 0); })))(
              s_hbm, x_hbm, o_hbm);
        });
    const Array<int32_t> o = k(s, x);
    for (int64_t r = 0; r < 32; ++r) {
      for (int64_t c = 0; c < 128; ++c) ASSERT_EQ(o(r, c), x(r, c) * s(r / 8, 3)) << r << "," << c;
    }
  });
}

TEST(PipelineForms, HbmOutputBlock) {
  // test_hbm_output: an output block in HBM (memory_space=pltpu.HBM) is the HBM ref itself; the
  // body copies each input block into its part.
  const Array<int32_t> x = iota_i({8, 512});
  both_engines([&] {
    auto f = pl::pallas_call(
        [](pltpu::AnyRef<const int32_t> x_hbm, pltpu::AnyRef<int32_t> o_hbm) {
          pltpu::emit_pipeline(
              [](pltpu::VmemRef<const int32_t> xv, pltpu::HbmRef<int32_t> o) {
                const int i = static_cast<int>(pl::program_id(0));
                pltpu::sync_copy(xv, o.at(pl::all, pl::ds(i * 128, 128)));
              },
              pltpu::grid({4}),
              pl::in_specs(pl::BlockSpec({8, 128}, [](int i) { return pl::idx(0, i); })),
              pl::out_specs(pl::BlockSpec(
                  {8, 512}, [](int) { return pl::idx(0, 0); }, pltpu::HBM)))(x_hbm, o_hbm);
        },
        pl::out_shape<int32_t>({8, 512}), pl::in_specs(pl::BlockSpec(pltpu::HBM)),
        pl::out_specs(pl::BlockSpec(pltpu::HBM)), pltpu::TensorCoreMesh("core", 1));
    const Array<int32_t> o = f(x);
    for (int64_t i = 0; i < x.size(); ++i) ASSERT_EQ(o[i], x[i]) << i;
  });
}

TEST(PipelineForms, AnyBlockTakesTheRefWhereItLies) {
  // pl::ANY means "wherever it lies": over a VMEM ref the body gets that ref (as an AnyRef).
  const Array<int32_t> x = iota_i({8, 128});
  both_engines([&] {
    auto k = pl::kernel(pl::out_type<int32_t>({8, 128}), pltpu::TensorCoreMesh("core", 1),
                        pl::scratch_types(pltpu::VMEM<int32_t>({8, 128})))(
        [](pltpu::HbmRef<const int32_t> x_hbm, pltpu::HbmRef<int32_t> o_hbm,
           pltpu::VmemRef<int32_t> v) {
          pltpu::sync_copy(x_hbm, v);
          pltpu::emit_pipeline([&](pltpu::AnyRef<int32_t> vv) { pltpu::sync_copy(vv, o_hbm); },
                               pltpu::grid({1}), pl::in_specs(pl::BlockSpec(pl::ANY)))(v);
        });
    const Array<int32_t> o = k(x);
    for (int64_t i = 0; i < x.size(); ++i) ASSERT_EQ(o[i], x[i]) << i;
  });
}

TEST(PipelineForms, TrivialWindowingMatchedVmem) {
  // test_trivial_windowing_matched_vmem / _mismatched_input / _mismatched_output: whole-array
  // blocks over VMEM and HBM refs mixed.
  const Array<int32_t> x = iota_i({8, 512});
  both_engines([&] {
    auto f = pl::pallas_call(
        [](pltpu::AnyRef<const int32_t> x_hbm, pltpu::AnyRef<int32_t> o_hbm,
           pltpu::VmemRef<int32_t> x_vmem) {
          pltpu::sync_copy(x_hbm, x_vmem);
          const pl::BlockSpec spec(
              {8, 512}, [](int) { return pl::idx(0, 0); }, pltpu::VMEM);
          pltpu::emit_pipeline(
              [](pltpu::VmemRef<int32_t> xv, pltpu::VmemRef<int32_t> ov) { ov = xv; },
              pltpu::grid({4}), pl::in_specs(spec), pl::out_specs(spec))(x_vmem, o_hbm);
        },
        pl::out_shape<int32_t>({8, 512}), pl::in_specs(pl::BlockSpec(pl::ANY)),
        pl::out_specs(pl::BlockSpec(pl::ANY)), pl::scratch_shapes(pltpu::VMEM<int32_t>({8, 512})),
        pltpu::TensorCoreMesh("core", 1));
    const Array<int32_t> o = f(x);
    for (int64_t i = 0; i < x.size(); ++i) ASSERT_EQ(o[i], x[i]) << i;
  });
}

TEST(PipelineForms, ConstantBlockUsesOneBuffer) {
  // A block whose index never changes takes one window: 9 MiB fits a 16 MiB budget.
  constexpr int64_t rows = 9 * 1024 * 1024 / (4 * 128);
  const Array<int32_t> w = iota_i({rows, 128});
  auto k = pl::kernel(pl::out_type<int32_t>({8, 128}), pltpu::TensorCoreMesh("core", 1))(
      [](pltpu::HbmRef<const int32_t> w_hbm, pltpu::HbmRef<int32_t> o_hbm) {
        pltpu::emit_pipeline(
            [](pltpu::VmemRef<const int32_t> wv, pltpu::VmemRef<int32_t> ov) {
              if (pl::program_id(0) == 0) ov = jnp::zeros_like(ov);
              ov += wv.at(pl::ds(0, 8), pl::all);
            },
            pltpu::grid({3}),
            pl::in_specs(pl::BlockSpec({rows, 128}, [](int) { return pl::idx(0, 0); })),
            pl::out_specs(pl::BlockSpec({8, 128})))(w_hbm, o_hbm);
      });
  const Array<int32_t> o = k(w);
  for (int64_t i = 0; i < o.size(); ++i) ASSERT_EQ(o[i], 3 * w[i]) << i;
}

TEST(PipelineForms, ResidentBlocksMustLieInsideTheRef) {
  // A partial edge block of a VMEM ref cannot be used where it lies.
  std::atomic<int> line{0};
  auto k = pl::kernel(pl::out_type<int32_t>({8, 128}), pltpu::TensorCoreMesh("core", 1),
                      pl::scratch_types(pltpu::VMEM<int32_t>({12, 128})))(
      [&](pltpu::HbmRef<int32_t>, pltpu::VmemRef<int32_t> v) {
        line = __LINE__ + 1;
        const pl::BlockSpec spec({8, 128}, [](int i) { return pl::idx(i, 0); });
        pltpu::emit_pipeline([](pltpu::VmemRef<int32_t> b) { b = jnp::zeros_like(b); },
                             pltpu::grid({2}), pl::out_specs(spec))(v);
      });
  tessera::testing::expect_kernel_error(
      [&] { k(); }, ErrorKind::kOutOfBounds,
      "is used where it lies, so all of it must lie inside the ref", line);
}

TEST(PipelineForms, SpaceErrors) {
  // An HBM block of a VMEM ref, and a body that takes another space than its spec.
  std::atomic<int> line{0};
  auto k = pl::kernel(pl::out_type<int32_t>({8, 128}), pltpu::TensorCoreMesh("core", 1),
                      pl::scratch_types(pltpu::VMEM<int32_t>(
                          {8, 128})))([&](pltpu::HbmRef<int32_t>, pltpu::VmemRef<int32_t> v) {
    line = __LINE__ + 2;
    const pl::BlockSpec spec(
        {8, 128}, [](int) { return pl::idx(0, 0); }, pltpu::HBM);
    pltpu::emit_pipeline([](pltpu::HbmRef<int32_t>) {}, pltpu::grid({1}), pl::out_specs(spec))(v);
  });
  tessera::testing::expect_kernel_error([&] { k(); }, ErrorKind::kInvalidArgument,
                                        "asks for an HBM block, but the ref lives in VMEM", line);
  auto g = pl::kernel(pl::out_type<int32_t>({8, 128}),
                      pltpu::TensorCoreMesh("core", 1))([&](pltpu::HbmRef<int32_t> o) {
    line = __LINE__ + 2;
    const pl::BlockSpec spec(
        {8, 128}, [](int) { return pl::idx(0, 0); }, pltpu::SMEM);
    pltpu::emit_pipeline([](pltpu::VmemRef<int32_t>) {}, pltpu::grid({1}), pl::out_specs(spec))(o);
  });
  tessera::testing::expect_kernel_error([&] { g(); }, ErrorKind::kInvalidArgument,
                                        "puts it in SMEM but the body takes it as a VMEM ref",
                                        line);
}

}  // namespace
