// Ports of Pallas' tests/pallas/tpu_pallas_pipeline_test.py's
// PallasCallPipelineTransformedRefsTest, the nested families (docs/pallas-parity.md): pipelines
// inside a pipeline's body walk its VMEM windows where they lie, over views of HBM refs. The
// `dynamic_grid` parameter (a traced grid extent) is a run-time value here: each case runs with
// its extents read from a variable. Then PallasCallPipelineTest's prefetched inputs: a window
// filled by an async copy of earlier pallas_calls, bound with BufferedRef::with_window_ref.
#include <gtest/gtest.h>

#include <cstdint>
#include <tuple>
#include <vector>

#include "support/pallas_port.h"
#include "tessera/tessera.h"

namespace {
using namespace tessera;
using namespace tessera::pallas_port;
using pltpu::PARALLEL;

// A copy body: o[...] = x[...].
const auto copy = [](pltpu::VmemRef<const float> x, pltpu::VmemRef<float> o) { o = x; };

// One pipeline over (rows, cols) blocks at (0, i) of its operands, PARALLEL.
template <class Body, class X, class O>
void columns(Body body, int64_t steps, int64_t rows, int64_t cols, const X& x, const O& o) {
  const pl::BlockSpec spec({rows, cols}, [](int i) { return pl::idx(0, i); });
  pltpu::emit_pipeline(body, pltpu::grid({steps}), pl::in_specs(spec), pl::out_specs(spec),
                       pltpu::dimension_semantics(PARALLEL))(x, o);
}

TEST(TpuPallasPipelineTest, TransformedRefsTransformedRefsAsInputsNested) {
  const Array<float> x = arange<float>({2, 16, 512});
  const int64_t two = 2;
  const Array<float> out =
      pl::kernel(pl::out_type<float>({16, 512}), pltpu::TensorCoreMesh("core", 1))(
          [two](pltpu::HbmRef<const float> x_ref, pltpu::HbmRef<float> o_ref) {
            columns([two](pltpu::VmemRef<const float> ox,
                          pltpu::VmemRef<float> oo) { columns(copy, two, 16, 128, ox, oo); },
                    two, 16, 256, x_ref.at(1, pl::all, pl::all), o_ref);
          })(x);
  for (int64_t i = 0; i < out.size(); ++i) ASSERT_EQ(out[i], x[16 * 512 + i]) << i;
}

TEST(TpuPallasPipelineTest, TransformedRefsTransformedRefsAsInputsNestedUneven) {
  // The inner pipeline walks views of the outer windows (a slice of a slice): the first 64 of
  // each 256-row input window go to the first 64 rows of each 128-row output window.
  const Array<float> x = arange<float>({512, 128});
  const int64_t two = 2;
  const Array<float> out =
      pl::kernel(pl::out_type<float>({256, 128}), pltpu::TensorCoreMesh("core", 1))(
          [two](pltpu::HbmRef<const float> x_ref, pltpu::HbmRef<float> o_ref) {
            pltpu::emit_pipeline(
                [two](pltpu::VmemRef<const float> outer_x, pltpu::VmemRef<float> outer_o) {
                  outer_o = jnp::zeros<float>(outer_o.shape());
                  const auto tx = outer_x.at(pl::ds(0, 128), pl::all).at(pl::ds(0, 64), pl::all);
                  const auto to = outer_o.at(pl::ds(0, 64), pl::all);
                  const pl::BlockSpec inner({32, 128}, [](int i) { return pl::idx(i, 0); });
                  pltpu::emit_pipeline(copy, pltpu::grid({two}), pl::in_specs(inner),
                                       pl::out_specs(inner),
                                       pltpu::dimension_semantics(PARALLEL))(tx, to);
                },
                pltpu::grid({two}),
                pl::in_specs(pl::BlockSpec({256, 128}, [](int i) { return pl::idx(i, 0); })),
                pl::out_specs(pl::BlockSpec({128, 128}, [](int i) { return pl::idx(i, 0); })),
                pltpu::dimension_semantics(PARALLEL))(x_ref, o_ref);
          })(x);
  for (int64_t r = 0; r < 256; ++r) {
    for (int64_t c = 0; c < 128; ++c) {
      const float want = r < 64 ? x(r, c) : (r >= 128 && r < 192) ? x(r - 128 + 256, c) : 0.0f;
      ASSERT_EQ(out(r, c), want) << r << "," << c;
    }
  }
}

TEST(TpuPallasPipelineTest, TransformedRefsTransformedRefsAsInputsNested3level) {
  // Three levels; Pallas' (2, 16, 262144) array is scaled down by 16 on the last axis.
  const Array<float> x = arange<float>({2, 16, 16384});
  const int64_t eight = 8;
  const Array<float> out = pl::kernel(pl::out_type<float>({16, 16384}),
                                      pltpu::TensorCoreMesh("core", 1))(
      [eight](pltpu::HbmRef<const float> x_ref, pltpu::HbmRef<float> o_ref) {
        columns(
            [eight](pltpu::VmemRef<const float> ox, pltpu::VmemRef<float> oo) {
              columns([eight](pltpu::VmemRef<const float> mx,
                              pltpu::VmemRef<float> mo) { columns(copy, eight, 16, 32, mx, mo); },
                      eight, 16, 256, ox, oo);
            },
            eight, 16, 2048, x_ref.at(1, pl::all, pl::all), o_ref);
      })(x);
  for (int64_t i = 0; i < out.size(); ++i) ASSERT_EQ(out[i], x[16 * 16384 + i]) << i;
}

TEST(TpuPallasPipelineTest, TransformedRefsTransformedRefsAsInputsNestedHbmPassthrough) {
  // The outer body copies an HBM operand into VMEM scratch that the inner body reads; Pallas'
  // (2, 16, 32768) array is scaled down by 4 on the last axis.
  const Array<float> x = arange<float>({2, 16, 8192});
  const Array<float> y = full<float>({16, 128}, 1.0f);
  const int64_t eight = 8;
  const Array<float> out =
      pl::kernel(pl::out_type<float>({16, 8192}), pltpu::TensorCoreMesh("core", 1),
                 pl::scratch_types(pltpu::VMEM<float>({16, 128})))(
          [eight](pltpu::HbmRef<const float> x_ref, pltpu::HbmRef<const float> y_ref,
                  pltpu::HbmRef<float> o_ref, pltpu::VmemRef<float> y_scratch) {
            columns(
                [&](pltpu::VmemRef<const float> ox, pltpu::VmemRef<float> oo) {
                  pltpu::sync_copy(y_ref, y_scratch);
                  columns([&](pltpu::VmemRef<const float> xv,
                              pltpu::VmemRef<float> ov) { ov = xv + y_scratch; },
                          eight, 16, 128, ox, oo);
                },
                eight, 16, 1024, x_ref.at(1, pl::all, pl::all), o_ref);
          })(x, y);
  for (int64_t i = 0; i < out.size(); ++i) ASSERT_EQ(out[i], x[16 * 8192 + i] + 1.0f) << i;
}

TEST(TpuPallasPipelineTest, TransformedRefsTransformedRefsAsInputsNestedMixedGrids) {
  // A 2-D outer grid over a 1-D inner one; Pallas' (2, 256, 32768) is scaled down to
  // (2, 64, 4096).
  const Array<float> x = arange<float>({2, 64, 4096});
  const int64_t eight = 8;
  const Array<float> out = pl::kernel(pl::out_type<float>({64, 4096}),
                                      pltpu::TensorCoreMesh("core", 1))(
      [eight](pltpu::HbmRef<const float> x_ref, pltpu::HbmRef<float> o_ref) {
        const pl::BlockSpec outer({8, 512}, [](int i, int j) { return pl::idx(i, j); });
        pltpu::emit_pipeline(
            [eight](pltpu::VmemRef<const float> ox, pltpu::VmemRef<float> oo) {
              columns(copy, eight, 8, 64, ox, oo);
            },
            pltpu::grid({eight, eight}), pl::in_specs(outer), pl::out_specs(outer),
            pltpu::dimension_semantics(PARALLEL, PARALLEL))(x_ref.at(1, pl::all, pl::all), o_ref);
      })(x);
  for (int64_t i = 0; i < out.size(); ++i) ASSERT_EQ(out[i], x[64 * 4096 + i]) << i;
}

TEST(TpuPallasPipelineTest, TransformedRefsTransformedRefsAsInputsNestedSequential) {
  // Two inner pipelines in turn through a VMEM temporary: x * 2 + 1. Pallas' (2, 16, 32768) is
  // scaled down by 4 on the last axis.
  const Array<float> x = arange<float>({2, 16, 8192});
  const int64_t eight = 8;
  const Array<float> out =
      pl::kernel(pl::out_type<float>({16, 8192}), pltpu::TensorCoreMesh("core", 1))(
          [eight](pltpu::HbmRef<const float> x_ref, pltpu::HbmRef<float> o_ref) {
            columns(
                [eight](pltpu::VmemRef<const float> ox, pltpu::VmemRef<float> oo) {
                  pl::run_scoped(
                      [&](pltpu::VmemRef<float> tmp) {
                        columns([](pltpu::VmemRef<const float> xv,
                                   pltpu::VmemRef<float> ov) { ov = xv * 2.0f; },
                                eight, 16, 128, ox, tmp);
                        columns([](pltpu::VmemRef<const float> xv,
                                   pltpu::VmemRef<float> ov) { ov = xv + 1.0f; },
                                eight, 16, 128, tmp, oo);
                      },
                      pltpu::VMEM<float>({16, 1024}));
                },
                eight, 16, 1024, x_ref.at(1, pl::all, pl::all), o_ref);
          })(x);
  for (int64_t i = 0; i < out.size(); ++i) {
    ASSERT_EQ(out[i], x[16 * 8192 + i] * 2.0f + 1.0f) << i;
  }
}

// ---- PallasCallPipelineTest: prefetched inputs -----------------------------------------------

struct PrefetchedInputCase {
  const char* name;
  int64_t grid;
  int64_t block_size;
  int buffer_count;
  bool use_lookahead;
  Shape vmem_shape;
  bool first_buffer;  // vmem_slice_type 'first_buffer' (ref.at[0]), else 'full' (ref)
};

void prefetched_input(const PrefetchedInputCase& c) {
  const int64_t grid = c.grid;
  const int64_t block_size = c.block_size;
  const int buffer_count = c.buffer_count;
  const bool use_lookahead = c.use_lookahead;
  const bool first_buffer = c.first_buffer;

  const auto pipeline_body = [](pltpu::VmemRef<const float> x_ref, pltpu::VmemRef<float> o_ref) {
    o_ref = x_ref;
  };
  const auto vmem_slice_fn = [first_buffer](pltpu::VmemRef<float> ref) {
    return first_buffer ? ref.at(0) : ref;
  };
  const auto prefetch_start = [&](pltpu::HbmRef<const float> x_hbm_ref,
                                  pltpu::VmemRef<float> x_vmem_ref, pltpu::DmaSemaphoreRef sem) {
    pltpu::async_copy(x_hbm_ref.at(pl::ds(0, block_size)), vmem_slice_fn(x_vmem_ref), sem);
  };
  const auto prefetch_done = [&](pltpu::HbmRef<const float> x_hbm_ref,
                                 pltpu::VmemRef<float> x_vmem_ref, pltpu::DmaSemaphoreRef sem,
                                 pltpu::VmemRef<float> /*x_vmem_out_ref: alias to x_vmem_ref*/) {
    pltpu::make_async_copy(x_hbm_ref.at(pl::ds(0, block_size)), vmem_slice_fn(x_vmem_ref), sem)
        .wait();
  };
  const auto kernel = [&](pltpu::HbmRef<const float> x_hbm_ref,
                          pltpu::VmemRef<float> x_prefetched_vmem, pltpu::HbmRef<float> o_hbm_ref) {
    auto [pipeline, make_allocs] = pltpu::emit_pipeline_with_allocations(
        pipeline_body, pltpu::grid({grid}),
        pl::in_specs(pl::BlockSpec(
            {block_size}, [](int i) { return pl::idx(i); },
            pl::Buffered{.buffer_count = buffer_count,
                         .use_lookahead = use_lookahead,
                         .prefetched_count = 1})),
        pl::out_specs(pl::BlockSpec({block_size}, [](int i) { return pl::idx(i); })));
    pl::run_scoped(
        [&](std::tuple<pltpu::BufferedRef<float>, pltpu::BufferedRef<float>> allocs) {
          auto [x_bref, o_bref] = allocs;
          allocs = {x_bref.with_window_ref(x_prefetched_vmem), o_bref};
          pipeline(x_hbm_ref, o_hbm_ref, pltpu::allocations(allocs));
        },
        make_allocs(x_hbm_ref, o_hbm_ref));
  };

  const auto run = [&](const Array<float>& x) {
    auto [prefetched, sem] =
        pl::pallas_call(prefetch_start, pl::in_specs(pl::BlockSpec(pltpu::HBM)),
                        pl::out_specs(pl::BlockSpec(pltpu::VMEM), pl::BlockSpec(pltpu::SEMAPHORE)),
                        pl::out_shape(pltpu::VMEM<float>(c.vmem_shape), pltpu::SemaphoreType::DMA),
                        pltpu::TensorCoreMesh("core", 1))(x);
    prefetched = pl::pallas_call(
        prefetch_done,
        pl::in_specs(pl::BlockSpec(pltpu::HBM), pl::BlockSpec(pltpu::VMEM),
                     pl::BlockSpec(pltpu::SEMAPHORE)),
        pl::out_specs(pl::BlockSpec(pltpu::VMEM)), pl::out_shape(pltpu::VMEM<float>(c.vmem_shape)),
        pl::input_output_aliases({{1, 0}}), pltpu::TensorCoreMesh("core", 1))(x, prefetched, sem);
    return pl::pallas_call(
        kernel, pl::in_specs(pl::BlockSpec(pltpu::HBM), pl::BlockSpec(pltpu::VMEM)),
        pl::out_specs(pl::BlockSpec(pltpu::HBM)), pl::out_shape(ShapeDtypeStruct<float>{{512}}),
        pltpu::TensorCoreMesh("core", 1))(x, prefetched);
  };
  const Array<float> x = arange<float>({512});
  const Array<float> out = run(x);
  EXPECT_EQ(out.to_vector(), x.to_vector());
}

TEST(TpuPallasPipelineTest, PipelinePrefetchedInput) {
  // The three named parameters Pallas runs (none is skipped on a TPU without the
  // emit_pipeline primitive, Pallas' default).
  const PrefetchedInputCase cases[] = {
      {"standard", 4, 128, 2, false, Shape{2, 128}, true},
      {"lookahead", 4, 128, 2, true, Shape{2, 128}, true},
      {"trivial_windowing", 1, 512, 1, false, Shape{512}, false},
  };
  for (const PrefetchedInputCase& c : cases) {
    SCOPED_TRACE(c.name);
    prefetched_input(c);
  }
}

TEST(TpuPallasPipelineTest, PipelinePrefetchedInputUnboundError) {
  const auto pipeline_body = [](pltpu::VmemRef<const float> x_ref, pltpu::VmemRef<float> o_ref) {
    o_ref = x_ref;
  };
  const auto kernel = [&](pltpu::HbmRef<const float> x_hbm_ref, pltpu::HbmRef<float> o_hbm_ref) {
    auto [pipeline, make_allocs] = pltpu::emit_pipeline_with_allocations(
        pipeline_body, pltpu::grid({4}),
        pl::in_specs(pl::BlockSpec(
            {128}, [](int i) { return pl::idx(i); },
            pl::Buffered{.buffer_count = 2, .prefetched_count = 1})),
        pl::out_specs(pl::BlockSpec({128}, [](int i) { return pl::idx(i); })));
    pl::run_scoped(
        [&](std::tuple<pltpu::BufferedRef<float>, pltpu::BufferedRef<float>> allocs) {
          // Purposely do not bind window_ref using with_window_ref!
          pipeline(x_hbm_ref, o_hbm_ref, pltpu::allocations(allocs));
        },
        make_allocs(x_hbm_ref, o_hbm_ref));
  };
  const auto run = [&](const Array<float>& x) {
    return pl::pallas_call(
        kernel, pl::in_specs(pl::BlockSpec(pltpu::HBM)), pl::out_specs(pl::BlockSpec(pltpu::HBM)),
        pl::out_shape(ShapeDtypeStruct<float>{{512}}), pltpu::TensorCoreMesh("core", 1))(x);
  };
  const Array<float> x = arange<float>({512});
  // Pallas raises a ValueError whose message starts with these words.
  expect_error<KernelError>([&] { run(x); }, ErrorKind::kInvalidArgument,
                            "expected external window buffer to be bound for prefetched input");
}

}  // namespace
