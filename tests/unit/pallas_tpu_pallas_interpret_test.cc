// Ports of Pallas' tests/pallas/tpu_pallas_interpret_test.py (docs/pallas-parity.md): Pallas' TPU
// interpret mode against Tessera's checked mode (`pltpu::InterpretParams`): revisits, bounds,
// poison, aliasing, races, the order of PARALLEL grid axes, meshes of cores. Where Pallas'
// interpreter sets `races.races_found` or logs, checked mode raises.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <mutex>
#include <span>
#include <vector>

#include "support/pallas_port.h"
#include "tessera/tessera.h"

namespace {
using namespace tessera;
using namespace tessera::pallas_port;
using pltpu::ARBITRARY;
using pltpu::PARALLEL;

pltpu::InterpretParams interpret() { return pltpu::InterpretParams{}; }

TEST(TpuPallasInterpretTest, RevisitingIsAnError) {
  const Array<float> x = full<float>({8, 128}, 0.0f);
  auto e = tessera::testing::catch_error<KernelError>([&] {
    pl::pallas_call(
        [](pltpu::HbmRef<const float>, pltpu::VmemRef<float>, pltpu::VmemRef<float>) {},
        pl::out_shape(ShapeDtypeStruct<float>{{16, 256}}, ShapeDtypeStruct<float>{{16, 256}}),
        pl::grid({4, 4}), pl::in_specs(pl::BlockSpec(MemorySpace::HBM)),
        pl::out_specs(pl::BlockSpec({4, 128}, [](int i, int j) { return pl::idx(i, j / 2); }),
                      pl::BlockSpec({4, 128}, [](int i, int j) { return pl::idx(j / 2, i % 2); })),
        interpret())(x);
  });
  ASSERT_TRUE(e);
  EXPECT_EQ(e->kind(), ErrorKind::kRevisit) << e->what();
  EXPECT_NE(std::string(e->what()).find("output 1"), std::string::npos) << e->what();
  EXPECT_EQ(e->grid_step(), (std::vector<int64_t>{2, 0})) << e->what();
}

TEST(TpuPallasInterpretTest, MatmulExample) {
  // Pallas multiplies (1024, 1024) matrices; (256, 256) keeps the test fast.
  const Array<float> x = random_array<float>({256, 256}, 1);
  const Array<float> y = random_array<float>({256, 256}, 2);
  const Array<float> z = pl::pallas_call(
      [](pltpu::VmemRef<const float> xr, pltpu::VmemRef<const float> yr, pltpu::VmemRef<float> o) {
        o = jnp::dot(xr, yr);
      },
      pl::out_shape<float>({256, 256}), pl::grid({2, 2}),
      pl::in_specs(pl::BlockSpec({128, 256}, [](int i, int) { return pl::idx(i, 0); }),
                   pl::BlockSpec({256, 128}, [](int, int j) { return pl::idx(0, j); })),
      pl::out_specs(pl::BlockSpec({128, 128}, [](int i, int j) { return pl::idx(i, j); })),
      interpret())(x, y);
  for (int64_t i = 0; i < 256; ++i) {
    for (int64_t j = 0; j < 256; ++j) {
      double want = 0;
      for (int64_t k = 0; k < 256; ++k) want += double(x(i, k)) * double(y(k, j));
      ASSERT_NEAR(z(i, j), want, 1e-3);
    }
  }
}

// test_out_of_bounds_block_spec['raise']. (out_of_bounds_reads='uninitialized' is not provided:
// docs/pallas-parity.md.)
TEST(TpuPallasInterpretTest, OutOfBoundsBlockSpec) {
  auto run = [](int input_offset, int output_offset) {
    return pl::pallas_call(
        [](pltpu::VmemRef<const float> xr, pltpu::VmemRef<float> o) { o = xr; },
        pl::out_shape<float>({16, 128}),
        pl::out_specs(pl::BlockSpec(
            {4, 128}, [output_offset](int i) { return pl::idx(i + output_offset, 0); })),
        pl::in_specs(pl::BlockSpec({4, 128},
                                   [input_offset](int i) { return pl::idx(i + input_offset, 0); })),
        pl::grid({4}), interpret())(full<float>({16, 128}, 0.0f));
  };
  // Pallas: "Out-of-bounds block index ... for input / output". Tessera's message names the
  // BlockSpec by its line (not the operand) and the block index.
  expect_error<KernelError>([&] { run(1, 0); }, ErrorKind::kOutOfBounds, "block index 4 on axis 0");
  expect_error<KernelError>([&] { run(0, 2); }, ErrorKind::kOutOfBounds, "block index 4 on axis 0");
  for (float v : run(0, 0)) ASSERT_EQ(v, 0.0f);
}

TEST(TpuPallasInterpretTest, InputsAndOutputsNotEvenlyDivisibleByBlockShape) {
  const Array<float> x = arange<float>({7, 768, 640});
  const pl::BlockSpec spec({2, 512, 256}, [](int i, int j, int k) { return pl::idx(i, j, k); });
  const Array<float> y = pl::pallas_call(
      [](pltpu::VmemRef<const float> xr, pltpu::VmemRef<float> yr) { yr = xr + 1.0f; },
      pl::in_specs(spec), pl::out_specs(spec), pl::out_shape<float>({7, 768, 640}),
      pl::grid({4, 2, 3}), interpret())(x);
  for (int64_t i = 0; i < x.size(); ++i) ASSERT_EQ(y[i], x[i] + 1.0f);
}

int32_t sum_between(const Array<int32_t>& s, const Array<int32_t>& x) {
  const pl::BlockSpec smem(MemorySpace::SMEM);
  return pl::pallas_call(
      [](pltpu::SmemRef<const int32_t> sr, pltpu::SmemRef<const int32_t> xr,
         pltpu::SmemRef<int32_t> o) {
        int32_t i = xr(sr(0));
        const int32_t stop = xr(sr(1));
        int32_t accum = 0;
        while (i < stop) accum += xr(i++);
        o(0) = accum;
      },
      pl::out_shape<int32_t>({1}), pl::out_specs(smem), pl::in_specs(smem, smem),
      interpret())(s, x)[0];
}

TEST(TpuPallasInterpretTest, OutOfBoundsReadIndex) {
  const Array<int32_t> s({2}, {0, 1});
  EXPECT_EQ(sum_between(s, Array<int32_t>({5}, {2, 5, 9, 15, 17})), 9 + 15 + 17);
  expect_error<KernelError>(
      [&] {
        sum_between(s, Array<int32_t>({5}, {2, 6, 9, 15, 17}));
      },
      ErrorKind::kOutOfBounds, "");
}

TEST(TpuPallasInterpretTest, OutOfBoundsReadRange) {
  for (MemorySpace space : {MemorySpace::HBM, MemorySpace::ANY}) {
    auto run = [&] {
      pl::pallas_call(
          [](pltpu::HbmRef<const float> xh, pltpu::VmemRef<float> o, pltpu::DmaSemaphoreRef sem) {
            pltpu::async_copy(xh.at(pl::ds(4, 8), 1), o, sem).wait();
          },
          pl::out_shape<float>({8, 128}), pl::out_specs(pl::BlockSpec(MemorySpace::VMEM)),
          pl::in_specs(pl::BlockSpec(space)), pl::scratch_shapes(pltpu::SemaphoreType::DMA),
          interpret())(full<float>({8, 4, 128}, 0.0f));
    };
    expect_error<KernelError>(run, ErrorKind::kOutOfBounds, "past the end");
  }
}

// test_out_of_bounds_write_index / _write_range / test_smem_scratch_is_never_padded with
// buffer_bounds='logical': a write past a scratch buffer's shape raises. ('padded' is not
// provided: docs/pallas-parity.md.)
template <MemorySpace S>
auto scratch_10x128() {
  if constexpr (S == MemorySpace::SMEM) {
    return pltpu::SMEM<float>({10, 128});
  } else {
    return pltpu::VMEM<float>({10, 128});
  }
}

template <MemorySpace S>
void write_past_scratch(bool range) {
  auto run = [&] {
    pl::pallas_call(
        [range](pltpu::HbmRef<const float> xh, pltpu::VmemRef<float> o, pl::Ref<float, S> s) {
          if (range) {
            pltpu::sync_copy(xh, s.at(pl::ds(4, 8)));
            o = s.at(pl::ds(4, 8));
          } else {
            pltpu::sync_copy(xh.at(0), s.at(10));
            o.at(0) = s.at(10);
          }
        },
        pl::out_shape<float>({8, 128}), pl::out_specs(pl::BlockSpec(MemorySpace::VMEM)),
        pl::in_specs(pl::BlockSpec(MemorySpace::HBM)), pl::scratch_shapes(scratch_10x128<S>()),
        interpret())(full<float>({8, 128}, 0.0f));
  };
  expect_error<KernelError>(run, ErrorKind::kOutOfBounds, range ? "past the end" : "outside 0..9");
}

TEST(TpuPallasInterpretTest, OutOfBoundsWriteIndex) {
  write_past_scratch<MemorySpace::VMEM>(false);
}
TEST(TpuPallasInterpretTest, OutOfBoundsWriteRange) { write_past_scratch<MemorySpace::VMEM>(true); }
TEST(TpuPallasInterpretTest, SmemScratchIsNeverPadded) {
  write_past_scratch<MemorySpace::SMEM>(false);
  write_past_scratch<MemorySpace::VMEM>(false);
}

TEST(TpuPallasInterpretTest, ScalarPrefetchExample) {
  const Array<int32_t> x = arange<int32_t>({512, 512});
  using S = pltpu::SmemRef<int32_t>;
  const Array<int32_t> r = pl::pallas_call(
      [](S, pltpu::VmemRef<const int32_t> xr, pltpu::VmemRef<int32_t> o) { o = xr; },
      pltpu::PrefetchScalarGridSpec<1>(
          pl::grid({1, 1}),
          pl::in_specs(pl::BlockSpec(
              {128, 128},
              [](int, int, S block_idx) { return pl::idx(block_idx(0), block_idx(1)); })),
          pl::out_specs(pl::BlockSpec({128, 128}, [](int, int, S) { return pl::idx(0, 0); }))),
      pl::out_shape<int32_t>({128, 128}),
      interpret())(Array<int32_t>({2}, {128 / 128, 256 / 128}), x);
  for (int64_t i = 0; i < 128; ++i) {
    for (int64_t j = 0; j < 128; ++j) ASSERT_EQ(r(i, j), x(128 + i, 256 + j));
  }
}

TEST(TpuPallasInterpretTest, DynamicGridAndAliasing) {
  const int64_t iters = 13;  // jax.random.randint(key, (), 10, 20)
  const Array<float> x = arange<float>({32, 128});
  using S = pltpu::SmemRef<int32_t>;
  const Array<float> y = pl::pallas_call(
      [](S s1, S, pltpu::VmemRef<const float> xr, pltpu::VmemRef<float> o) {
        o = xr + static_cast<float>(s1(0));
      },
      pl::out_shape<float>({32, 128}),
      pltpu::PrefetchScalarGridSpec<2>(
          pl::grid({iters}),
          pl::in_specs(pl::BlockSpec({32, 128}, [](int, S, S) { return pl::idx(0, 0); })),
          pl::out_specs(pl::BlockSpec({32, 128}, [](int, S, S) { return pl::idx(0, 0); }))),
      pl::input_output_aliases({{2, 0}}),
      interpret())(Array<int32_t>({1}, {1}), Array<int32_t>({1}, {2}), x);
  // The input block is read once, before the first step: x + 1 however many steps run.
  for (int64_t i = 0; i < x.size(); ++i) ASSERT_EQ(y[i], x[i] + 1.0f);
}

TEST(TpuPallasInterpretTest, Aliasing) {
  const Array<float> x = full<float>({4 * 8, 4 * 128}, 0.0f);
  const Array<float> y = pl::pallas_call(
      [](pltpu::VmemRef<const float> xr, pltpu::VmemRef<float> o, pltpu::SmemRef<int32_t> s) {
        if (pl::program_id(0) == 0 && pl::program_id(1) == 0) s(0) = 0;
        const int32_t v = s(0);
        s(0) = v + 1;
        o = xr + static_cast<float>(v);
      },
      pl::out_shape<float>({4 * 8, 4 * 128}), pl::grid({4, 4}),
      pl::in_specs(pl::BlockSpec({8, 128}, [](int i, int j) { return pl::idx(i, j); })),
      pl::out_specs(pl::BlockSpec({8, 128}, [](int i, int j) { return pl::idx(j, i); })),
      pl::scratch_shapes(pltpu::SMEM<int32_t>({1})), pl::input_output_aliases({{0, 0}}),
      interpret())(x);
  // Step (i, j) reads block (i, j), which step (j, i) may have written back already.
  float expected[4][4] = {};
  float t = 0;
  for (int i = 0; i < 4; ++i) {
    for (int j = 0; j < 4; ++j) expected[j][i] = expected[i][j] + t++;
  }
  for (int i = 0; i < 4; ++i) {
    for (int j = 0; j < 4; ++j) ASSERT_EQ(y(i * 8, j * 128), expected[i][j]) << i << "," << j;
  }
}

// test_race_detection: the racy kernel raises kRace (Pallas sets races.races_found).
TEST(TpuPallasInterpretTest, RaceDetection) {
  for (pltpu::DmaExecutionMode mode :
       {pltpu::DmaExecutionMode::eager, pltpu::DmaExecutionMode::on_wait}) {
    for (MemorySpace space : {MemorySpace::HBM, MemorySpace::ANY}) {
      pltpu::InterpretParams p;
      p.detect_races = true;
      p.dma_execution_mode = mode;
      auto call = [&](bool race) {
        return pl::pallas_call(
            [race](pltpu::HbmRef<const float> xh, pltpu::VmemRef<float> o, pltpu::VmemRef<float> t,
                   pltpu::DmaSemaphoreRef sem) {
              auto copy = pltpu::make_async_copy(xh, t, sem);
              copy.start();
              if (!race) copy.wait();
              o = t + 1.0f;
              if (race) copy.wait();
            },
            pl::out_shape<float>({8, 128}), pl::in_specs(pl::BlockSpec(space)),
            pl::scratch_shapes(pltpu::VMEM<float>({8, 128}), pltpu::SemaphoreType::DMA),
            p)(full<float>({8, 128}, 0.0f));
      };
      for (float v : call(false)) ASSERT_EQ(v, 1.0f);
      expect_error<KernelError>([&] { call(true); }, ErrorKind::kRace, "async copy");
    }
  }
}

// test_uninitialized_memory: never-written scratch and outputs hold NaN (the largest integer,
// true) with uninitialized_memory=nan, zeros with zero. (The int16 output waits for int16.)
TEST(TpuPallasInterpretTest, UninitializedMemory) {
  for (pltpu::UninitializedMemory mode :
       {pltpu::UninitializedMemory::nan, pltpu::UninitializedMemory::zero}) {
    pltpu::InterpretParams p;
    p.uninitialized_memory = mode;
    const auto [x, y, z] = pl::pallas_call(
        [](pltpu::VmemRef<bfloat16> o1, pltpu::VmemRef<int16_t> o2, pltpu::VmemRef<float>,
           pltpu::VmemRef<bfloat16> t1, pltpu::VmemRef<int16_t> t2) {
          o1 = t1;
          o2 = t2;
        },
        pl::out_shape(ShapeDtypeStruct<bfloat16>{{8, 128}}, ShapeDtypeStruct<int16_t>{{8, 128}},
                      ShapeDtypeStruct<float>{{8, 128}}),
        pl::scratch_shapes(pltpu::VMEM<bfloat16>({8, 128}), pltpu::VMEM<int16_t>({8, 128})), p)();
    for (int64_t i = 0; i < x.size(); ++i) {
      if (mode == pltpu::UninitializedMemory::nan) {
        ASSERT_TRUE(std::isnan(static_cast<float>(x[i])));
        ASSERT_EQ(y[i], 32767);
        ASSERT_TRUE(std::isnan(z[i]));
      } else {
        ASSERT_EQ(static_cast<float>(x[i]), 0.0f);
        ASSERT_EQ(y[i], 0);
        ASSERT_EQ(z[i], 0.0f);
      }
    }
  }
}

TEST(TpuPallasInterpretTest, CorrectNumberOfStores) {
  const Array<float> result = pl::pallas_call(
      [](pltpu::VmemRef<float> xr, pltpu::SmemRef<int32_t> sr, pltpu::VmemRef<float> o) {
        const int32_t s = sr(0);
        xr += jnp::full_like(xr, static_cast<float>(s));
        sr(0) = s + 1;
        o = xr;
      },
      pl::out_shape<float>({16, 256}), pl::grid({2, 2}),
      pl::in_specs(pl::BlockSpec({8, 256}, [](int i, int) { return pl::idx(i, 0); }),
                   pl::BlockSpec(MemorySpace::SMEM)),
      pl::out_specs(pl::BlockSpec({8, 256}, [](int i, int) { return pl::idx(i, 0); })),
      interpret())(full<float>({16, 256}, 0.0f), Array<int32_t>({1}, {0}));
  EXPECT_EQ(result(0, 0), 1.0f);
  EXPECT_EQ(result(8, 0), 5.0f);
}

struct Recorded {
  std::vector<int64_t> point;
  int core;
};

// The kernel of test_randomization_of_parallel_dimensions and
// test_parallel_dimension_and_multiple_cores: each core counts its steps in its own copy of s.
Array<float> count_per_step(int cores, pltpu::InterpretParams p) {
  Array<float> block_input({32, 512});
  for (int64_t r = 0; r < 32; ++r) {
    for (int64_t c = 0; c < 512; ++c) block_input(r, c) = static_cast<float>(4 * (r / 8) + c / 128);
  }
  return pl::pallas_call(
      [](pltpu::SmemRef<float> sr, pltpu::VmemRef<const float> in, pltpu::VmemRef<float> o) {
        const jnp::Value diff = in - static_cast<float>(4 * pl::program_id(0) + pl::program_id(1));
        const float s = sr(0);
        sr(0) = s + 1.0f;
        o = jnp::full_like(o, s) + diff;
      },
      pl::out_shape<float>({32, 512}), pl::grid({4, 4}),
      pl::in_specs(pl::BlockSpec(MemorySpace::SMEM),
                   pl::BlockSpec({8, 128}, [](int i, int j) { return pl::idx(i, j); })),
      pl::out_specs(pl::BlockSpec({8, 128}, [](int i, int j) { return pl::idx(i, j); })),
      pltpu::CompilerParams{.dimension_semantics = {PARALLEL, ARBITRARY}},
      pltpu::TensorCoreMesh("core", cores), std::move(p))(Array<float>({1}, {0.0f}), block_input);
}

// test_randomization_of_parallel_dimensions: deliberately different. Pallas permutes PARALLEL axes
// by default with jax.random; checked mode permutes them when parallel_order_seed is set, with its
// own generator, so the order differs from Pallas'. The recorded order and the output agree.
TEST(TpuPallasInterpretTest, RandomizationOfParallelDimensions) {
  std::vector<Recorded> recorded;
  std::mutex mu;
  pltpu::InterpretParams p;
  p.parallel_order_seed = 12345;
  p.grid_point_recorder = [&](std::span<const int64_t> point, int core) {
    const std::lock_guard<std::mutex> lock(mu);
    recorded.push_back({{point.begin(), point.end()}, core});
  };
  const Array<float> result = count_per_step(1, p);
  ASSERT_EQ(recorded.size(), 16u);
  std::vector<int64_t> rows;
  for (size_t k = 0; k < 16; ++k) {
    const Recorded& r = recorded[k];
    EXPECT_EQ(r.core, 0);
    ASSERT_EQ(r.point[1], static_cast<int64_t>(k % 4));  // ARBITRARY: in order
    if (k % 4 == 0) rows.push_back(r.point[0]);
    ASSERT_EQ(r.point[0], rows.back());
    // Step k of the core ran grid point (i, j), so output block (i, j) holds k.
    ASSERT_EQ(result(r.point[0] * 8, r.point[1] * 128), static_cast<float>(k));
  }
  std::vector<int64_t> sorted = rows;
  std::sort(sorted.begin(), sorted.end());
  EXPECT_EQ(sorted, (std::vector<int64_t>{0, 1, 2, 3}));
  EXPECT_NE(rows, sorted);  // this seed permutes them
}

TEST(TpuPallasInterpretTest, DimensionsArbitraryParallelRaises) {
  for (int cores : {1, 2}) {
    auto run = [&] {
      pl::pallas_call(
          [](pltpu::SmemRef<const int32_t> s, pltpu::VmemRef<float> o) {
            o(0, 0) = static_cast<float>(s(0));
          },
          pl::out_shape<float>({32, 512}), pl::grid({4, 4}),
          pl::in_specs(pl::BlockSpec(MemorySpace::SMEM)),
          pl::out_specs(pl::BlockSpec({8, 128}, [](int i, int j) { return pl::idx(i, j); })),
          pltpu::CompilerParams{.dimension_semantics = {ARBITRARY, PARALLEL}},
          pltpu::TensorCoreMesh("core", cores), interpret())(Array<int32_t>({1}, {0}));
    };
    expect_error<UsageError>(run, ErrorKind::kInvalidArgument, "prefix");
  }
}

void core_map(int num_cores, bool force) {
  const Array<int32_t> x = arange<int32_t>({16, 128});
  const int64_t slc_size = 16 / num_cores;
  auto kernel = [slc_size, num_cores](pltpu::HbmRef<const int32_t> xh, pltpu::HbmRef<int32_t> yh) {
    pl::run_scoped(
        [&](pltpu::VmemRef<int32_t> xv, pltpu::VmemRef<int32_t> yv, pltpu::DmaSemaphoreRef dma,
            pltpu::SemaphoreRef sem) {
          const int n = num_cores;  // jax.lax.axis_size('x')
          for (int i = 0; i < n; ++i) pl::semaphore_signal(sem, 1, pl::core_index(i));
          pl::semaphore_wait(sem, n);  // a barrier: deadlocks unless the cores run in parallel
          const int core = lax::axis_index("x");
          const auto slc = pl::ds(core * slc_size, slc_size);
          pltpu::async_copy(xh.at(slc), xv, dma).wait();
          yv = xv + core + 1;
          pltpu::async_copy(yv, yh.at(slc), dma).wait();
        },
        pltpu::VMEM<int32_t>({slc_size, 128}), pltpu::VMEM<int32_t>({slc_size, 128}),
        pltpu::SemaphoreType::DMA, pltpu::SemaphoreType::REGULAR);
  };
  const Array<int32_t> y =
      force ? [&] {
        const pltpu::ForceTpuInterpretMode forced;
        return pl::kernel(pl::out_type<int32_t>({16, 128}), pltpu::TensorCoreMesh("x", num_cores))(
            kernel)(x);
      }()
            : pl::kernel(pl::out_type<int32_t>({16, 128}), pltpu::TensorCoreMesh("x", num_cores),
                         interpret())(kernel)(x);
  for (int64_t i = 0; i < x.size(); ++i) {
    ASSERT_EQ(y[i], x[i] + 1 + (i / 128) / slc_size) << num_cores;
  }
}

TEST(TpuPallasInterpretTest, CoreMap) {
  for (int cores : {1, 2, 4}) {
    core_map(cores, false);
    core_map(cores, true);  // pltpu.force_tpu_interpret_mode()
  }
}

// test_core_map_exception_no_hang: core 1 reads past its scratch and fails; core 0, waiting for a
// signal that never comes, is cancelled instead of hanging.
TEST(TpuPallasInterpretTest, CoreMapExceptionNoHang) {
  auto run = [] {
    pl::kernel(pl::out_type<float>({8, 128}), pltpu::TensorCoreMesh("core", 2),
               pl::scratch_types(pltpu::VMEM<float>({8, 128}), pltpu::SemaphoreType::REGULAR),
               interpret())([](pltpu::HbmRef<const float> xh, pltpu::HbmRef<float> oh,
                               pltpu::VmemRef<float> vmem, pltpu::SemaphoreRef sem) {
      const int core = lax::axis_index("core");
      if (core == 1) {
        const float t = vmem(100, 0);
        vmem(100, 0) = t;
        pl::semaphore_signal(sem, 1, pl::core_index(0));
      }
      if (core == 0) {
        pl::semaphore_wait(sem, 1);
        pltpu::sync_copy(xh, oh);
      }
    })(full<float>({8, 128}, 1.0f));
  };
  expect_error<KernelError>(run, ErrorKind::kOutOfBounds, "");
}

Array<float> two_cores_kernel(const Array<float>& x, int cores,
                              std::optional<pltpu::InterpretParams> p, bool blocked) {
  auto body = [](pltpu::VmemRef<const float> xr, pltpu::VmemRef<float> o, pltpu::VmemRef<float> v) {
    v = xr;
    o = xr + v;
  };
  const pltpu::CompilerParams semantics{.dimension_semantics = {PARALLEL}};
  const int64_t rows = x.shape()[0];
  if (blocked) {
    const pl::BlockSpec spec({8, 128}, [](int i) { return pl::idx(i, 0); });
    return pl::pallas_call(body, pl::grid({2}), pl::out_shape<float>({rows, 128}),
                           pl::in_specs(spec), pl::out_specs(spec),
                           pl::scratch_shapes(pltpu::VMEM<float>({8, 128})), semantics,
                           pltpu::TensorCoreMesh("core", cores), *p)(x);
  }
  auto call = [&](auto... extra) {
    return pl::pallas_call(body, pl::grid({2}), pl::out_shape<float>({rows, 128}),
                           pl::in_specs(pl::BlockSpec(MemorySpace::VMEM)),
                           pl::scratch_shapes(pltpu::VMEM<float>({rows, 128})), semantics,
                           pltpu::TensorCoreMesh("core", cores), extra...)(x);
  };
  return p ? call(*p) : call();
}

// test_two_cores_along_parallel_dimension_with_race: both cores write back the whole output
// block. Natively the result is right; checked on one core there is no race; checked on two the
// race raises kRace (Pallas sets races.races_found).
TEST(TpuPallasInterpretTest, TwoCoresAlongParallelDimensionWithRace) {
  const Array<float> x = full<float>({8, 128}, 1.0f);
  if (!checked_run()) {
    for (float v : two_cores_kernel(x, 2, std::nullopt, false)) ASSERT_EQ(v, 2.0f);
  }
  pltpu::InterpretParams p;
  p.detect_races = true;
  for (float v : two_cores_kernel(x, 1, p, false)) ASSERT_EQ(v, 2.0f);
  expect_error<KernelError>([&] { two_cores_kernel(x, 2, p, false); }, ErrorKind::kRace,
                            "no happens-before order");
}

TEST(TpuPallasInterpretTest, TwoCoresAlongParallelDimensionNoRace) {
  const Array<float> x = full<float>({16, 128}, 1.0f);
  pltpu::InterpretParams p;
  p.detect_races = true;
  for (float v : two_cores_kernel(x, 2, p, true)) ASSERT_EQ(v, 2.0f);
}

// test_parallel_dimension_and_multiple_cores: the PARALLEL axis is cut into contiguous chunks of
// ceil(4 / cores) rows per core, each core counting its own steps. With 2..6 cores the result is
// Pallas' (it does not depend on the order). With one core it does: Pallas permutes the rows by
// default (deliberately different; RandomizationOfParallelDimensions), Tessera runs them in order.
TEST(TpuPallasInterpretTest, ParallelDimensionAndMultipleCores) {
  for (int cores = 1; cores <= 6; ++cores) {
    std::vector<Recorded> recorded;
    std::mutex mu;
    pltpu::InterpretParams p;
    p.detect_races = true;
    p.grid_point_recorder = [&](std::span<const int64_t> point, int core) {
      const std::lock_guard<std::mutex> lock(mu);
      recorded.push_back({{point.begin(), point.end()}, core});
    };
    const Array<float> result = count_per_step(cores, p);
    const int64_t rows_per_core = (4 + cores - 1) / cores;
    for (int64_t i = 0; i < 4; ++i) {
      for (int64_t j = 0; j < 4; ++j) {
        const float want = static_cast<float>((i % rows_per_core) * 4 + j);
        ASSERT_EQ(result(i * 8, j * 128), want) << cores << " cores, block " << i << "," << j;
      }
    }
    ASSERT_EQ(recorded.size(), 16u);
    for (const Recorded& r : recorded) ASSERT_EQ(r.core, r.point[0] / rows_per_core) << cores;
  }
}

TEST(TpuPallasInterpretTest, RunScopedWithMemorySpaceIsNone) {
  pltpu::InterpretParams p;
  p.uninitialized_memory = pltpu::UninitializedMemory::zero;
  for (bool explicit_spec : {true, false}) {  // pl.BlockSpec(memory_space=None), pl.no_block_spec
    auto body = [](pltpu::VmemRef<float> o) {
      pl::run_scoped([&](pltpu::VmemRef<float> v) { pltpu::sync_copy(v, o); },
                     pltpu::VMEM<float>({8, 128}));
    };
    const Array<float> y =
        explicit_spec ? pl::pallas_call(body, pl::out_shape<float>({8, 128}),
                                        pl::out_specs(pl::BlockSpec()), pl::grid({1}), p)()
                      : pl::pallas_call(body, pl::out_shape<float>({8, 128}), pl::grid({1}), p)();
    for (float v : y) ASSERT_EQ(v, 0.0f);
  }
}

TEST(TpuPallasInterpretTest, StoreToHalfOfHbmOutputBuffer) {
  const Array<int32_t> x = arange<int32_t>({16});
  pltpu::InterpretParams p;
  p.uninitialized_memory = pltpu::UninitializedMemory::zero;
  for (MemorySpace space : {MemorySpace::HBM, MemorySpace::ANY}) {
    const Array<int32_t> y = pl::pallas_call(
        [](pltpu::HbmRef<const int32_t> xh, pltpu::HbmRef<int32_t> oh) {
          pltpu::sync_copy(xh.at(pl::ds(0, 8)), oh.at(pl::ds(8, 8)));
        },
        pl::out_shape<int32_t>({16}), pl::grid({1}), pl::out_specs(pl::BlockSpec(space)),
        pl::in_specs(pl::BlockSpec(space)), pl::input_output_aliases({{0, 0}}), p)(x);
    for (int64_t i = 0; i < 16; ++i) ASSERT_EQ(y[i], x[i % 8]);
  }
}

// test_is_range_out_of_bounds_for_shape: Pallas' rule for an index or a slice of an axis, as
// Ref.at applies it when the view is made (in and out of bounds alike, in both engines).
TEST(TpuPallasInterpretTest, IsRangeOutOfBoundsForShape) {
  struct Case {
    int64_t extent;
    detail::Indexer ix;
    bool out_of_bounds;
  };
  const std::vector<Case> cases = {
      {10, 5, false},                 // in_bounds_int
      {10, 10, true},                 // out_of_bounds_int
      {10, pl::ds(0, 10), false},     // in_bounds_slice_no_step
      {10, pl::ds(0, 11), true},      // out_of_bounds_slice_no_step
      {10, pl::ds(0, 5, 2), false},   // in_bounds_slice_with_step: slice(0, 10, 2)
      {10, pl::ds(0, 6, 2), true},    // out_of_bounds_slice_with_step: slice(0, 11, 2)
      {5, pl::ds(0, 1, 100), false},  // strided_single_element_in_bounds: slice(0, 10, 100)
      {5, pl::ds(5, 1, 100), true},   // strided_single_element_out_of_bounds: slice(5, 10, 100)
      {10, pl::ds(5, 0), false},      // zero_length_slice_in_bounds
      // zero_length_slice_out_of_bounds: deliberately different. Pallas' rule (and numpy) take
      // an empty slice as in bounds wherever it starts; Tessera's Ref.at refuses one that starts
      // past the end of the axis, almost surely an index bug.
      {10, pl::ds(15, 0), true},
  };
  for (size_t k = 0; k < cases.size(); ++k) {
    const Case& c = cases[k];
    bool raised = false;
    pl::kernel(pl::out_type<int32_t>({1}), pltpu::TensorCoreMesh("core", 1),
               pl::scratch_types(pltpu::VMEM<int32_t>({c.extent})))(
        [&](pltpu::HbmRef<int32_t> o, pltpu::VmemRef<int32_t> v) {
          v = jnp::zeros_like(v);
          try {
            (void)v.at(c.ix);
          } catch (const KernelError& e) {
            raised = e.kind() == ErrorKind::kOutOfBounds;
          }
          pltpu::sync_copy(v.at(pl::ds(0, 1)), o);
        })();
    EXPECT_EQ(raised, c.out_of_bounds) << "case " << k;
  }
}

}  // namespace
