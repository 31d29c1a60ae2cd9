// Ports of Pallas' tests/pallas/tpu_pallas_pipeline_test.py (docs/pallas-parity.md):
// emit_pipeline inside pallas_call and pl::kernel, multiple buffering, megacore splits.
// `pl.core_map(mesh)` over refs made with jax.new_ref is `pl::kernel(pl::out_type, mesh)`; the
// TPUs Pallas runs the single-core cases on have one TensorCore, so those use a mesh of one.
#include <gtest/gtest.h>

#include <array>
#include <cmath>
#include <cstdint>
#include <limits>
#include <vector>

#include "support/pallas_port.h"
#include "tessera/tessera.h"

namespace {
using namespace tessera;
using namespace tessera::pallas_port;
using pltpu::ARBITRARY;
using pltpu::PARALLEL;

// x @ y in double, for the matmul ports. Pallas compares with jnp.dot's float32 result (atol
// 5e-5); against the exact product a float32 sum of k terms is within about k * 2^-24 relative.
std::vector<double> exact_matmul(const Array<float>& x, const Array<float>& y) {
  const int64_t m = x.shape()[0], k = x.shape()[1], n = y.shape()[1];
  std::vector<double> z(static_cast<size_t>(m * n), 0.0);
  for (int64_t i = 0; i < m; ++i) {
    for (int64_t p = 0; p < k; ++p) {
      const double a = x(i, p);
      for (int64_t j = 0; j < n; ++j) z[static_cast<size_t>(i * n + j)] += a * double(y(p, j));
    }
  }
  return z;
}

void expect_near(const Array<float>& z, const std::vector<double>& want, double atol) {
  for (int64_t i = 0; i < z.size(); ++i) {
    const double w = want[static_cast<size_t>(i)];
    ASSERT_NEAR(z[i], w, atol + 1e-5 * std::abs(w)) << i;
  }
}

void expect_matmul(const Array<float>& z, const Array<float>& x, const Array<float>& y,
                   double atol) {
  expect_near(z, exact_matmul(x, y), atol);
}

Array<float> uniform01(Shape shape, uint64_t seed) {
  Array<float> a = random_array<float>(std::move(shape), seed);
  for (float& v : a) v = 0.5f * (v + 1.0f);
  return a;
}

// ---- PallasCallPipelineTest -------------------------------------------------------------------

TEST(TpuPallasPipelineTest, PipelineEmptyGrid) {
  for (const Shape& grid : {Shape{0, 2}, Shape{2, -1}}) {
    auto run = [&] {
      pl::pallas_call(
          [grid](pltpu::AnyRef<float> o_hbm) {
            pltpu::emit_pipeline(
                [](pltpu::VmemRef<float> o) {
                  o = jnp::zeros<float>({128, 128});
                },
                pltpu::grid(grid), pl::out_specs(pl::BlockSpec({128, 128}, [](int i, int j) {
                  return pl::idx(i, j);
                })))(o_hbm);
          },
          pl::out_shape<float>({256, 256}), pl::out_specs(pl::BlockSpec(pl::ANY)))();
    };
    expect_error<Error>(run, ErrorKind::kInvalidArgument, "grid");
  }
}

TEST(TpuPallasPipelineTest, PipelineWithoutInputs) {
  const Array<int32_t> out = pl::pallas_call(
      [](pltpu::AnyRef<int32_t> o_hbm) {
        pltpu::emit_pipeline(
            [](pltpu::VmemRef<int32_t> o) { o = jnp::full_like(o, 42); }, pltpu::grid({4}),
            pl::out_specs(pl::BlockSpec({8, 128}, [](int i) { return pl::idx(0, i); })))(o_hbm);
      },
      pl::out_shape<int32_t>({8, 512}), pl::out_specs(pl::BlockSpec(pl::ANY)))();
  for (int32_t v : out) ASSERT_EQ(v, 42);
}

TEST(TpuPallasPipelineTest, PipelineTrivialWindowingElidesDoubleBuffering) {
  const Array<float> x = arange<float>({8, 512});
  const Array<float> y = full<float>({8, 128}, 1.0f);
  const Array<float> out = pl::pallas_call(
      [](pltpu::AnyRef<const float> xh, pltpu::AnyRef<const float> yh, pltpu::AnyRef<float> oh) {
        pltpu::emit_pipeline(
            [](pltpu::VmemRef<const float> xv, pltpu::VmemRef<const float> yv,
               pltpu::VmemRef<float> ov) { ov = xv + yv; },
            pltpu::grid({4, 1}),
            pl::in_specs(pl::BlockSpec({8, 128}, [](int i, int) { return pl::idx(0, i); }),
                         pl::BlockSpec({8, 128}, [](int, int j) { return pl::idx(0, j); })),
            pl::out_specs(pl::BlockSpec({8, 128}, [](int i, int) { return pl::idx(0, i); })))(
            xh, yh, oh);
      },
      pl::out_shape<float>({8, 512}), pl::in_specs(pl::BlockSpec(pl::ANY), pl::BlockSpec(pl::ANY)),
      pl::out_specs(pl::BlockSpec(pl::ANY)))(x, y);
  for (int64_t i = 0; i < x.size(); ++i) ASSERT_EQ(out[i], x[i] + 1.0f);  // x + tile(y, (1, 4))
}

TEST(TpuPallasPipelineTest, PipelineTrivialWindowingWithExplicitBuffering) {
  const Array<float> x = arange<float>({8, 512});
  const Array<float> out = pl::pallas_call(
      [](pltpu::AnyRef<const float> xh, pltpu::AnyRef<float> oh) {
        pltpu::emit_pipeline(
            [](pltpu::VmemRef<const float> xv, pltpu::VmemRef<float> ov) { ov = xv; },
            pltpu::grid({1}),
            pl::in_specs(pl::BlockSpec(
                {8, 512}, [](int) { return pl::idx(0, 0); }, pl::Buffered(2))),
            pl::out_specs(pl::BlockSpec({8, 512}, [](int) { return pl::idx(0, 0); })))(xh, oh);
      },
      pl::in_specs(pl::BlockSpec(pl::ANY)), pl::out_specs(pl::BlockSpec(pl::ANY)),
      pl::out_shape<float>({8, 512}))(x);
  for (int64_t i = 0; i < x.size(); ++i) ASSERT_EQ(out[i], x[i]);
}

// One pipelined matmul over ANY operands (test_pipeline_matmul; test_matmul of
// PallasCallMultipleBufferedPipelineTest with its buffer counts).
Array<float> pipeline_matmul(const Array<float>& x, const Array<float>& y, int xb, int yb) {
  return pl::pallas_call(
      [xb, yb](pltpu::AnyRef<const float> xh, pltpu::AnyRef<const float> yh,
               pltpu::AnyRef<float> zh) {
        pltpu::emit_pipeline(
            [](pltpu::VmemRef<const float> xv, pltpu::VmemRef<const float> yv,
               pltpu::VmemRef<float> zv) {
              if (pl::program_id(2) == 0) zv = jnp::zeros<float>({128, 128});
              zv += jnp::dot(xv, yv);
            },
            pltpu::grid({4, 4, 4}),
            pl::in_specs(
                pl::BlockSpec(
                    {128, 128}, [](int i, int, int k) { return pl::idx(i, k); }, pl::Buffered(xb)),
                pl::BlockSpec(
                    {128, 128}, [](int, int j, int k) { return pl::idx(k, j); }, pl::Buffered(yb))),
            pl::out_specs(pl::BlockSpec(
                {128, 128}, [](int i, int j, int) { return pl::idx(i, j); })))(xh, yh, zh);
      },
      pl::out_shape<float>({512, 512}),
      pl::in_specs(pl::BlockSpec(pl::ANY), pl::BlockSpec(pl::ANY)),
      pl::out_specs(pl::BlockSpec(pl::ANY)))(x, y);
}

TEST(TpuPallasPipelineTest, PipelinePipelineMatmul) {
  const Array<float> x = uniform01({512, 512}, 1);
  const Array<float> y = uniform01({512, 512}, 2);
  expect_matmul(pipeline_matmul(x, y, 2, 2), x, y, 5e-5);
}

TEST(TpuPallasPipelineTest, PipelineUnalignedSliceHbm3d) {
  const Array<float> x = arange<float>({2, 32, 5});
  const Array<float> out = pl::pallas_call(
      [](pltpu::VmemRef<const float> xr, pltpu::VmemRef<float> o) {
        pltpu::sync_copy(xr.at(0, pl::all, pl::all), o);
      },
      pl::out_shape<float>({32, 5}), pl::grid({}))(x);
  for (int64_t i = 0; i < out.size(); ++i) ASSERT_EQ(out[i], x[i]);
}

// ---- PallasCallPipelinePoisonTest -------------------------------------------------------------

// test_poison_buffers: deliberately different. Mosaic's poison for integers is the dtype's min;
// checked mode fills an output window with TPU interpret mode's poison, the max (and NaN).
// `buffers` = 1 is no_pipelining=True's schedule (deliberately different: emit_pipeline has no
// such flag; one buffer per block is the unpipelined schedule).
template <class T>
void pipeline_poison(int buffers) {
  const Array<T> x = full<T>({8, 128}, static_cast<T>(1.0f));
  const Array<T> out = pl::kernel(
      pl::out_type<T>({8, 128}), pltpu::TensorCoreMesh("core", 1),
      pltpu::InterpretParams{})([buffers](pltpu::HbmRef<const T> xh, pltpu::HbmRef<T> oh) {
    const pl::BlockSpec spec(
        {8, 128}, [](int) { return pl::idx(0, 0); }, pl::Buffered(buffers));
    pltpu::emit_pipeline(
        [](pltpu::VmemRef<const T> xv, pltpu::VmemRef<T> ov) {
          ov.at(pl::ds(0, 4), pl::all) = xv.at(pl::ds(0, 4), pl::all);
        },
        pltpu::grid({1}), pl::in_specs(spec), pl::out_specs(spec))(xh, oh);
  })(x);
  for (int64_t r = 0; r < 8; ++r) {
    for (int64_t c = 0; c < 128; ++c) {
      if (r < 4) {
        ASSERT_EQ(static_cast<float>(out(r, c)), 1.0f);
      } else if constexpr (!std::is_integral_v<T>) {
        ASSERT_TRUE(std::isnan(static_cast<float>(out(r, c))));
      } else {
        ASSERT_EQ(out(r, c), std::numeric_limits<T>::max());  // Mosaic: min
      }
    }
  }
}

TEST(TpuPallasPipelineTest, PipelinePoisonPoisonBuffers) {
  for (int buffers : {2, 1}) {
    pipeline_poison<float>(buffers);
    pipeline_poison<int32_t>(buffers);
    pipeline_poison<int8_t>(buffers);
    pipeline_poison<float8_e4m3fn>(buffers);
  }
}

// ---- PallasCallMultipleBufferedPipelineTest ---------------------------------------------------

TEST(TpuPallasPipelineTest, MultipleBufferedCopy) {
  const Array<int32_t> x = arange<int32_t>({512, 512});
  for (int in_buffers : {2, 4}) {
    const Array<int32_t> out = pl::pallas_call(
        [in_buffers](pltpu::AnyRef<const int32_t> xh, pltpu::AnyRef<int32_t> oh) {
          pltpu::emit_pipeline(
              [](pltpu::VmemRef<const int32_t> xv, pltpu::VmemRef<int32_t> ov) { ov = xv; },
              pltpu::grid({4, 4}),
              pl::in_specs(pl::BlockSpec(
                  {128, 128}, [](int i, int j) { return pl::idx(i, j); },
                  pl::Buffered(in_buffers))),
              pl::out_specs(pl::BlockSpec(
                  {128, 128}, [](int i, int j) { return pl::idx(i, j); }, pl::Buffered(2))))(xh,
                                                                                             oh);
        },
        pl::out_shape<int32_t>({512, 512}), pl::in_specs(pl::BlockSpec(pl::ANY)),
        pl::out_specs(pl::BlockSpec(pl::ANY)))(x);
    for (int64_t i = 0; i < x.size(); ++i) ASSERT_EQ(out[i], x[i]);
  }
}

TEST(TpuPallasPipelineTest, MultipleBufferedMatmul) {
  const Array<float> x = uniform01({512, 512}, 0);
  const Array<float> y = uniform01({512, 512}, 1);
  const std::vector<double> want = exact_matmul(x, y);
  for (int xb : {2, 4}) {
    for (int yb : {2, 4}) expect_near(pipeline_matmul(x, y, xb, yb), want, 5e-5);
  }
}

TEST(TpuPallasPipelineTest, MultipleBufferedMatmulMegacore) {
  const Array<float> x = uniform01({512, 512}, 0);
  const Array<float> y = uniform01({512, 512}, 1);
  const std::vector<double> want = exact_matmul(x, y);
  for (int xb : {2, 4}) {
    for (int yb : {2, 4}) {
      const Array<float> z = pl::kernel(
          pl::out_type<float>({512, 512}),
          pltpu::TensorCoreMesh("core", 2))([xb, yb](pltpu::HbmRef<const float> xh,
                                                     pltpu::HbmRef<const float> yh,
                                                     pltpu::HbmRef<float> oh) {
        pltpu::emit_pipeline(
            [](pltpu::VmemRef<const float> xv, pltpu::VmemRef<const float> yv,
               pltpu::VmemRef<float> ov) {
              if (pl::program_id(2) == 0) ov = jnp::zeros<float>({128, 128});
              ov += jnp::dot(xv, yv);
            },
            pltpu::core_axis_name("core"), pltpu::grid({4, 4, 4}),
            pltpu::dimension_semantics(PARALLEL, PARALLEL, ARBITRARY),
            pl::in_specs(
                pl::BlockSpec(
                    {128, 128}, [](int i, int, int k) { return pl::idx(i, k); }, pl::Buffered(xb)),
                pl::BlockSpec(
                    {128, 128}, [](int, int j, int k) { return pl::idx(k, j); }, pl::Buffered(yb))),
            pl::out_specs(pl::BlockSpec(
                {128, 128}, [](int i, int j, int) { return pl::idx(i, j); })))(xh, yh, oh);
      })(x, y);
      expect_near(z, want, 5e-5);
    }
  }
}

TEST(TpuPallasPipelineTest, MultipleBufferedBlockGather) {
  const Array<int32_t> x = arange<int32_t>({1024, 128});
  const std::vector<std::vector<int32_t>> index_lists = {{2, 2, 2, 2, 2, 2, 2, 2, 2, 2},
                                                         {0, 0, 2, 3, 3, 3, 1, 7, 6, 6},
                                                         {3, 3, 3, 3, 3, 3, 3, 7, 6, 6},
                                                         {0, 1, 2, 3, 4, 5, 0, 1, 2, 3}};
  for (const std::vector<int32_t>& list : index_lists) {
    for (int in_buffers : {2, 4}) {
      for (bool lookahead : {true, false}) {
        const int64_t n = static_cast<int64_t>(list.size());
        const Array<int32_t> out = pl::pallas_call(
            [&](pltpu::AnyRef<const int32_t> xh, pltpu::SmemRef<const int32_t> blk,
                pltpu::AnyRef<int32_t> oh) {
              pltpu::emit_pipeline(
                  [](pltpu::VmemRef<const int32_t> xv, pltpu::VmemRef<int32_t> ov) { ov = xv; },
                  pltpu::grid({n}),
                  pl::in_specs(pl::BlockSpec(
                      {128, 128}, [blk](int i) { return pl::idx(blk(i), 0); },
                      pl::Buffered{in_buffers, lookahead})),
                  pl::out_specs(pl::BlockSpec(
                      {128, 128}, [](int i) { return pl::idx(i, 0); }, pl::Buffered(2))))(xh, oh);
            },
            pl::out_shape<int32_t>({n * 128, 128}),
            pl::in_specs(pl::BlockSpec(pl::ANY), pl::BlockSpec(MemorySpace::SMEM)),
            pl::out_specs(pl::BlockSpec(pl::ANY)))(x, Array<int32_t>({n}, list));
        for (int64_t b = 0; b < n; ++b) {
          for (int64_t k = 0; k < 128 * 128; ++k) {
            ASSERT_EQ(out[b * 128 * 128 + k], x[list[static_cast<size_t>(b)] * 128 * 128 + k]);
          }
        }
      }
    }
  }
}

TEST(TpuPallasPipelineTest, MultipleBufferedBlockScatter) {
  const Array<int32_t> x = arange<int32_t>({1024, 128});
  for (const std::vector<int32_t>& list :
       std::vector<std::vector<int32_t>>{{0, 0, 2, 2, 2, 5, 3, 3}, {5, 5, 5, 5, 5, 5, 5, 5}}) {
    for (int in_buffers : {2, 4}) {
      const Array<int32_t> out = pl::pallas_call(
          [&](pltpu::AnyRef<const int32_t> xh, pltpu::SmemRef<const int32_t> blk,
              pltpu::AnyRef<int32_t> oh) {
            pl::run_scoped(  // zero-out o_hbm_ref
                [&](pltpu::VmemRef<int32_t> o_vmem) {
                  o_vmem = jnp::zeros<int32_t>({1024, 128});
                  pltpu::sync_copy(o_vmem, oh);
                },
                pltpu::VMEM<int32_t>({1024, 128}));
            pltpu::emit_pipeline(
                [](pltpu::VmemRef<const int32_t> xv, pltpu::VmemRef<int32_t> ov) { ov = xv; },
                pltpu::grid({8}),
                pl::in_specs(pl::BlockSpec(
                    {128, 128}, [](int i) { return pl::idx(i, 0); }, pl::Buffered(in_buffers))),
                pl::out_specs(pl::BlockSpec(
                    {128, 128}, [blk](int i) { return pl::idx(blk(i), 0); }, pl::Buffered(2))))(xh,
                                                                                                oh);
          },
          pl::out_shape<int32_t>({1024, 128}),
          pl::in_specs(pl::BlockSpec(pl::ANY), pl::BlockSpec(MemorySpace::SMEM)),
          pl::out_specs(pl::BlockSpec(pl::ANY)))(x, Array<int32_t>({8}, list));
      std::vector<int64_t> source(8, -1);  // block b of the output holds input block source[b]
      for (int i = 0; i < 8; ++i) source[static_cast<size_t>(list[static_cast<size_t>(i)])] = i;
      for (int64_t b = 0; b < 8; ++b) {
        for (int64_t k = 0; k < 128 * 128; ++k) {
          const int64_t s = source[static_cast<size_t>(b)];
          ASSERT_EQ(out[b * 128 * 128 + k], s < 0 ? 0 : x[s * 128 * 128 + k]) << b;
        }
      }
    }
  }
}

TEST(TpuPallasPipelineTest, MultipleBufferedSingleBufferedOutput) {
  const Array<float> out =
      pl::kernel(pl::out_type<float>({2, 8, 128}),
                 pltpu::TensorCoreMesh("core", 1))([](pltpu::HbmRef<float> oh) {
        pltpu::emit_pipeline(
            [](pltpu::VmemRef<float> o) {
              if (pl::program_id(1) == 0) o = jnp::zeros_like(o);
              o += 1.0f;
            },
            pltpu::grid({2, 3}),
            pl::out_specs(pl::BlockSpec(
                {1, 8, 128}, [](int b, int) { return pl::idx(b, 0, 0); }, pl::Buffered(1))))(oh);
      })();
  for (float v : out) ASSERT_EQ(v, 3.0f);
}

// ---- PallasCallMegacoreTest (a megacore: two TensorCores) -------------------------------------

TEST(TpuPallasPipelineTest, MegacoreCanPartitionNondivisibleGridWithDynamicDimensions) {
  const Array<float> x = random_array<float>({640, 640}, 0);
  const int64_t i = 5;
  const Array<float> y = pl::kernel(pl::out_type<float>({640, 640}),
                                    pltpu::TensorCoreMesh("core", 2))(
      [i](pltpu::HbmRef<const float> xh, pltpu::HbmRef<float> yh) {
        const pl::BlockSpec spec({128, 128}, [](int a, int b) { return pl::idx(a, b); });
        pltpu::emit_pipeline(
            [](pltpu::VmemRef<const float> xv, pltpu::VmemRef<float> yv) { yv = xv * 2.0f; },
            pltpu::grid({i, 5}), pl::in_specs(spec), pl::out_specs(spec),
            pltpu::core_axis_name("core"), pltpu::dimension_semantics(PARALLEL, PARALLEL))(xh, yh);
      })(x);
  for (int64_t k = 0; k < x.size(); ++k) ASSERT_EQ(y[k], x[k] * 2.0f);
}

// test_can_partition_grid: each core counts the steps it runs; the split follows Pallas' rule
// (the first PARALLEL axis the core count divides, else the largest PARALLEL axis, the
// remainder to the lowest cores).
void can_partition_grid(Shape grid, std::vector<pltpu::GridDimensionSemantics> semantics) {
  constexpr int kCores = 2;
  const Array<int32_t> out =
      pl::kernel(pl::out_type<int32_t>({kCores, 8, 128}),
                 pltpu::TensorCoreMesh("core", kCores))([&](pltpu::HbmRef<int32_t> oh) {
        pl::run_scoped(
            [&](pltpu::VmemRef<int32_t> o_vmem) {
              o_vmem = jnp::zeros_like(o_vmem);
              pltpu::emit_pipeline([&] { o_vmem += 1; }, pltpu::grid(grid),
                                   pltpu::core_axis_name("core"),
                                   pltpu::DimensionSemantics{semantics})();
              pltpu::sync_copy(o_vmem, oh.at(lax::axis_index("core")));
            },
            pltpu::VMEM<int32_t>({8, 128}));
      })();
  std::vector<int> parallel;
  for (int a = 0; a < grid.rank(); ++a) {
    if (semantics[static_cast<size_t>(a)] == PARALLEL) parallel.push_back(a);
  }
  int dim = -1;
  for (int a : parallel) {
    if (grid[a] % kCores == 0) {
      dim = a;
      break;
    }
  }
  if (dim < 0) {
    for (int a : parallel) {
      if (grid[a] > 1 && (dim < 0 || grid[a] > grid[dim])) dim = a;
    }
  }
  if (dim < 0) dim = parallel[0];
  const int64_t others = grid.size() / grid[dim];
  for (int c = 0; c < kCores; ++c) {
    const int64_t count = grid[dim] / kCores + (c < grid[dim] % kCores ? 1 : 0);
    for (int64_t k = 0; k < 8 * 128; ++k) {
      ASSERT_EQ(out[c * 8 * 128 + k], count * others) << grid.to_string() << " core " << c;
    }
  }
}

TEST(TpuPallasPipelineTest, MegacoreCanPartitionGrid) {
  // The dynamic_grid_index variants pass the same extent as a run-time value.
  can_partition_grid({8}, {PARALLEL});
  can_partition_grid({5}, {PARALLEL});
  can_partition_grid({8, 3}, {PARALLEL, ARBITRARY});
  can_partition_grid({5, 3}, {PARALLEL, ARBITRARY});
  can_partition_grid({2, 7}, {ARBITRARY, PARALLEL});
  can_partition_grid({8, 8}, {PARALLEL, PARALLEL});
  can_partition_grid({5, 7}, {PARALLEL, PARALLEL});
  can_partition_grid({1, 1}, {PARALLEL, PARALLEL});
}

TEST(TpuPallasPipelineTest, MegacoreMegacoreMul) {
  const Array<float> x = uniform01({512, 512}, 0);
  const Array<float> y = pl::kernel(
      pl::out_type<float>({512, 512}),
      pltpu::TensorCoreMesh("core", 2))([](pltpu::HbmRef<const float> xh, pltpu::HbmRef<float> yh) {
    const pl::BlockSpec spec({128, 128}, [](int i, int j) { return pl::idx(i, j); });
    pltpu::emit_pipeline(
        [](pltpu::VmemRef<const float> xv, pltpu::VmemRef<float> yv) { yv = xv * 2.0f; },
        pltpu::grid({4, 4}), pl::in_specs(spec), pl::out_specs(spec), pltpu::core_axis_name("core"),
        pltpu::dimension_semantics(ARBITRARY, PARALLEL))(xh, yh);
  })(x);
  for (int64_t k = 0; k < x.size(); ++k) ASSERT_EQ(y[k], x[k] * 2.0f);
}

// test_megacore_matmul, every size divided by 4 (the same block counts, 3 of them where 768).
TEST(TpuPallasPipelineTest, MegacoreMegacoreMatmul) {
  for (const auto& [m, k, n] : std::vector<std::array<int64_t, 3>>{
           {256, 256, 256}, {192, 256, 256}, {256, 256, 192}, {192, 256, 192}}) {
    constexpr int64_t bm = 64, bk = 128, bn = 64;
    const Array<float> x = uniform01({m, k}, 42);
    const Array<float> y = uniform01({k, n}, 43);
    const Array<float> z = pl::kernel(
        pl::out_type<float>({m, n}),
        pltpu::TensorCoreMesh("core", 2))([&](pltpu::HbmRef<const float> xh,
                                              pltpu::HbmRef<const float> yh,
                                              pltpu::HbmRef<float> zh) {
      auto cdiv = [](int64_t a, int64_t b) { return (a + b - 1) / b; };
      pltpu::emit_pipeline(
          [](pltpu::VmemRef<const float> xv, pltpu::VmemRef<const float> yv,
             pltpu::VmemRef<float> zv) {
            if (pl::program_id(2) == 0) zv = jnp::zeros_like(zv);  // ps.index[2] == 0
            zv += jnp::dot(xv, yv);
          },
          pltpu::grid({cdiv(m, bm), cdiv(n, bn), cdiv(k, bk)}),
          pl::in_specs(pl::BlockSpec({bm, bk}, [](int i, int, int kk) { return pl::idx(i, kk); }),
                       pl::BlockSpec({bk, bn}, [](int, int j, int kk) { return pl::idx(kk, j); })),
          pl::out_specs(pl::BlockSpec({bm, bn}, [](int i, int j, int) { return pl::idx(i, j); })),
          pltpu::core_axis_name("core"),
          pltpu::dimension_semantics(PARALLEL, PARALLEL, ARBITRARY))(xh, yh, zh);
    })(x, y);
    expect_matmul(z, x, y, 7e-5);
  }
}

// ---- PallasCallPipelineTransformedRefsTest / EmitPipelineVmapTest (without vmap) -------------

TEST(TpuPallasPipelineTest, TransformedRefsTransformedRefsAsInputs) {
  const Array<float> x = arange<float>({2, 16, 512});
  for (int64_t steps : {2, 2}) {  // dynamic_grid: the same extent as a run-time value
    const Array<float> out =
        pl::kernel(pl::out_type<float>({16, 512}), pltpu::TensorCoreMesh("core", 1))(
            [steps](pltpu::HbmRef<const float> xh, pltpu::HbmRef<float> oh) {
              const auto xs = xh.at(1, pl::all, pl::all);
              const pl::BlockSpec spec({16, 256}, [](int i) { return pl::idx(0, i); });
              pltpu::emit_pipeline(
                  [](pltpu::VmemRef<const float> xv, pltpu::VmemRef<float> ov) { ov = xv; },
                  pltpu::grid({steps}), pl::in_specs(spec), pl::out_specs(spec),
                  pltpu::dimension_semantics(ARBITRARY))(xs, oh);
            })(x);
    for (int64_t i = 0; i < out.size(); ++i) ASSERT_EQ(out[i], x[16 * 512 + i]);
  }
}

// _run_basic_test without vmap: a (512,) array in (256,) blocks.
template <class Body>
Array<float> basic_pipeline(const Array<float>& x, int (*offset)(int), Body body) {
  return pl::kernel(pl::out_type<float>({512}), pltpu::TensorCoreMesh("core", 1))(
      [&](pltpu::HbmRef<const float> xh, pltpu::HbmRef<float> oh) {
        const pl::BlockSpec spec({256}, [offset](int i) { return pl::idx(offset(i)); });
        body(xh, oh, spec);
      })(x);
}

TEST(TpuPallasPipelineTest, EmitPipelineVmapIndexMapAndCopy) {
  const Array<float> x = arange<float>({512});
  const int const_val = 17;  // the index map closes over a constant: i + 17 - 17
  for (int (*offset)(int) : {+[](int i) { return i + const_val - 17; }, +[](int i) { return i; }}) {
    const Array<float> out =
        basic_pipeline(x, offset, [](auto xh, auto oh, const pl::BlockSpec& spec) {
          pltpu::emit_pipeline(
              [](pltpu::VmemRef<const float> xv, pltpu::VmemRef<float> ov) { ov = xv; },
              pltpu::grid({2}), pl::in_specs(spec), pl::out_specs(spec))(xh, oh);
        });
    for (int64_t i = 0; i < 512; ++i) ASSERT_EQ(out[i], x[i]);
  }
}

TEST(TpuPallasPipelineTest, EmitPipelineVmapCopyAndIndexMapAndBodyConst) {
  const Array<float> x = arange<float>({512});
  const Array<float> out = basic_pipeline(
      x, +[](int i) { return i + 17 - 17; },
      [](auto xh, auto oh, const pl::BlockSpec& spec) {
        pl::run_scoped(  // const_2 = jax.empty_ref(...); const_2[...] = 5 * ones
            [&](pltpu::VmemRef<float> const_2) {
              const_2 = 5.0f * jnp::ones_like(const_2);
              pltpu::emit_pipeline([&](pltpu::VmemRef<const float> xv,
                                       pltpu::VmemRef<float> ov) { ov = xv + const_2; },
                                   pltpu::grid({2}), pl::in_specs(spec),
                                   pl::out_specs(spec))(xh, oh);
            },
            pltpu::VMEM<float>({256}));
      });
  for (int64_t i = 0; i < 512; ++i) ASSERT_EQ(out[i], x[i] + 5.0f);
}

}  // namespace
