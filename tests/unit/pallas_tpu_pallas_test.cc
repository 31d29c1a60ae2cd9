// Ports of Pallas' tests/pallas/tpu_pallas_test.py (docs/pallas-parity.md): pipeline modes,
// scalar prefetch, grids whose size is a run-time value, pallas_call options. Each test is named
// after its Pallas class and test and asserts Pallas' expectation. The DMA cases (but those of
// PallasCallDMAInterpretTest, below) are in pallas_tpu_pallas_dma_test.cc, the scalar and vector op
// cases in pallas_tpu_pallas_ops_test.cc.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <sstream>
#include <string>
#include <vector>

#include "support/pallas_port.h"
#include "tessera/tessera.h"

namespace {
using namespace tessera;
using namespace tessera::pallas_port;

// ---- TPUPipelineModeTest ----------------------------------------------------------------------

// test_two_input_vadd: the VMEM a call takes is its blocks' windows times their buffer counts
// (the output double-buffered): exactly that limit is enough, one byte less is refused.
void two_input_vadd(int x_buffers, int y_buffers) {
  constexpr int64_t kBlock = 1024;
  constexpr int64_t kSize = 128 * 1024;
  const Array<float> x = arange<float>({kSize});
  const Array<float> y = arange<float>({kSize});
  const int64_t need = kBlock * 4 * (2 + x_buffers + y_buffers);
  auto vadd = [&](int64_t limit) {
    return pl::pallas_call(
        [](pltpu::VmemRef<const float> xr, pltpu::VmemRef<const float> yr,
           pltpu::VmemRef<float> o) { o = xr + yr; },
        pl::out_shape<float>({kSize}), pl::grid({kSize / kBlock}),
        pl::in_specs(pl::BlockSpec(
                         {kBlock}, [](int i) { return pl::idx(i); }, pl::Buffered(x_buffers)),
                     pl::BlockSpec(
                         {kBlock}, [](int i) { return pl::idx(i); }, pl::Buffered(y_buffers))),
        pl::out_specs(pl::BlockSpec({kBlock}, [](int i) { return pl::idx(i); })),
        pltpu::CompilerParams{.vmem_limit_bytes = limit})(x, y);
  };
  const Array<float> z = vadd(need);
  for (int64_t i = 0; i < kSize; ++i) ASSERT_EQ(z[i], x[i] + y[i]) << i;
  expect_error<UsageError>([&] { vadd(need - 1); }, ErrorKind::kCapacityExceeded, "VMEM");
}

TEST(TpuPallasTest, PipelineModeTwoInputVadd) {
  two_input_vadd(2, 2);
  two_input_vadd(2, 1);
  two_input_vadd(1, 1);
}

// ---- PallasCallScalarPrefetchTest -------------------------------------------------------------

TEST(TpuPallasTest, ScalarPrefetchTrivialScalarPrefetch) {
  const Array<int32_t> s({8}, {4, 3, 2, 5, 3, 5, 2, 7});
  const Array<int32_t> x = arange<int32_t>({64, 128});
  const Array<int32_t> out = pl::pallas_call(
      [](pltpu::SmemRef<int32_t>, pltpu::VmemRef<const int32_t> xr, pltpu::VmemRef<int32_t> o) {
        o = xr;
      },
      pl::out_shape<int32_t>({64, 128}),
      pltpu::PrefetchScalarGridSpec<1>(
          pl::in_specs(pl::BlockSpec(
              {8, 128}, [](int i, pltpu::SmemRef<int32_t> sr) { return pl::idx(sr(i), 0); })),
          pl::out_specs(pl::BlockSpec(
              {8, 128}, [](int i, pltpu::SmemRef<int32_t>) { return pl::idx(i, 0); })),
          pl::grid({8})))(s, x);
  for (int64_t b = 0; b < 8; ++b) {
    for (int64_t r = 0; r < 8; ++r) {
      for (int64_t c = 0; c < 128; ++c) ASSERT_EQ(out(b * 8 + r, c), x(s[b] * 8 + r, c));
    }
  }
}

template <class T>
void narrow_bitwidth_scalar_prefetch(int index) {
  const Array<T> s = arange<T>({16 * 128});
  const Array<T> out = pl::pallas_call(
      [index](pltpu::SmemRef<T> sr, pltpu::VmemRef<T> o) {
        const T v = sr(index);  // an element of an SMEM ref is read into a C++ value first
        o = jnp::full_like(o, v);
      },
      pl::out_shape<T>({16, 128}), pltpu::PrefetchScalarGridSpec<1>())(s);
  for (int64_t i = 0; i < out.size(); ++i) ASSERT_EQ(out[i], s[index]) << index;
}

TEST(TpuPallasTest, ScalarPrefetchNarrowBitwidthScalarPrefetch) {
  for (int index : {0, 3, 129}) narrow_bitwidth_scalar_prefetch<bfloat16>(index);
  for (int index : {2, 5, 257}) narrow_bitwidth_scalar_prefetch<int16_t>(index);
  for (int index : {311, 597, 1025}) narrow_bitwidth_scalar_prefetch<int8_t>(index);
}

TEST(TpuPallasTest, ScalarPrefetchF32ScalarPrefetch) {
  const Array<float> s({1}, {5.0f});
  const Array<float> x = arange<float>({8, 128});
  const Array<float> out = pl::pallas_call(
      [](pltpu::SmemRef<float> sr, pltpu::VmemRef<const float> xr, pltpu::VmemRef<float> o) {
        const float s0 = sr(0);
        o = xr + s0;
      },
      pl::out_shape<float>({8, 128}), pltpu::PrefetchScalarGridSpec<1>())(s, x);
  for (int64_t i = 0; i < out.size(); ++i) ASSERT_EQ(out[i], x[i] + 5.0f);
}

TEST(TpuPallasTest, ScalarPrefetchTrivialScalarPrefetchWithWindowlessArgs) {
  const Array<int32_t> s({8}, {4, 3, 2, 5, 3, 5, 2, 7});
  const Array<int32_t> x = arange<int32_t>({64, 128});
  const Array<int32_t> out =
      pl::pallas_call([](pltpu::SmemRef<int32_t>, pltpu::VmemRef<const int32_t> xr,
                         pltpu::VmemRef<int32_t> o) { o = xr; },
                      pl::out_shape<int32_t>({64, 128}), pltpu::PrefetchScalarGridSpec<1>())(s, x);
  for (int64_t i = 0; i < out.size(); ++i) ASSERT_EQ(out[i], x[i]);
}

TEST(TpuPallasTest, ScalarPrefetchMultipleScalarPrefetch) {
  const Array<int32_t> s1({8}, {4, 3, 2, 5, 3, 5, 2, 7});
  const Array<int32_t> s2({8}, {7, 6, 5, 4, 3, 2, 1, 0});
  const Array<int32_t> x = arange<int32_t>({64, 128});
  using S = pltpu::SmemRef<int32_t>;
  const Array<int32_t> out = pl::pallas_call(
      [](S, S, pltpu::VmemRef<const int32_t> xr, pltpu::VmemRef<int32_t> o) { o = xr; },
      pl::out_shape<int32_t>({64, 128}),
      pltpu::PrefetchScalarGridSpec<2>(
          pl::in_specs(pl::BlockSpec({8, 128}, [](int i, S a, S) { return pl::idx(a(i), 0); })),
          pl::out_specs(pl::BlockSpec({8, 128}, [](int i, S, S b) { return pl::idx(b(i), 0); })),
          pl::grid({8})))(s1, s2, x);
  // Block i of the output is block s1[i] of x; the blocks land in reverse order (s2).
  for (int64_t i = 0; i < 8; ++i) {
    for (int64_t r = 0; r < 8; ++r) {
      for (int64_t c = 0; c < 128; ++c) {
        ASSERT_EQ(out(s2[i] * 8 + r, c), x(s1[i] * 8 + r, c)) << i;
      }
    }
  }
}

TEST(TpuPallasTest, ScalarPrefetchScalarInterpreter) {
  const Array<int32_t> program({6}, {0, 0, 1, 0, 1, 1});
  const Array<float> x = arange<float>({64, 128});
  using S = pltpu::SmemRef<int32_t>;
  const auto [out, state] = pl::pallas_call(
      [](S prog, pltpu::VmemRef<const float> xr, pltpu::VmemRef<float> o,
         pltpu::VmemRef<float> st) {
        st = xr;
        for (int i = 0; i < 6; ++i) {  // lax.fori_loop(0, 6, single_inst, None, unroll=True)
          switch (prog(i)) {           // lax.switch(program[i], (add, mult), i)
            case 0:
              st += static_cast<float>(i);
              break;
            case 1:
              st *= static_cast<float>(i);
              break;
          }
        }
        o = st;
      },
      pl::out_shape(ShapeDtypeStruct<float>{{64, 128}}, ShapeDtypeStruct<float>{{8, 128}}),
      pltpu::PrefetchScalarGridSpec<1>(
          pl::in_specs(pl::BlockSpec({8, 128}, [](int i, S) { return pl::idx(i, 0); })),
          pl::out_specs(pl::BlockSpec({8, 128}, [](int i, S) { return pl::idx(i, 0); }),
                        pl::BlockSpec({8, 128}, [](int, S) { return pl::idx(0, 0); })),
          pl::grid({8})))(program, x);
  static_cast<void>(state);
  for (int64_t i = 0; i < x.size(); ++i) {
    float want = x[i];
    for (int j = 0; j < 6; ++j)
      want = program[j] == 0 ? want + static_cast<float>(j) : want * static_cast<float>(j);
    ASSERT_EQ(out[i], want) << i;
  }
}

TEST(TpuPallasTest, ScalarPrefetchScalarInterpreterDynamicLoop) {
  const Array<int32_t> loop_end({1}, {5});
  using S = pltpu::SmemRef<int32_t>;
  const Array<float> out = pl::pallas_call(
      [](S end, pltpu::VmemRef<float> o) {
        o = jnp::zeros_like(o);
        for (int i = 0; i < end(0); ++i) o += 1.0f;  // lax.fori_loop(0, loop_end_ref[0], ...)
      },
      pl::out_shape<float>({8, 128}),
      pltpu::PrefetchScalarGridSpec<1>(
          pl::out_specs(pl::BlockSpec({8, 128}, [](int, S) { return pl::idx(0, 0); })),
          pl::grid({1})))(loop_end);
  for (float v : out) ASSERT_EQ(v, 5.0f);
}

TEST(TpuPallasTest, ScalarPrefetchInputOutputAliasingWithScalarPrefetch) {
  // Pallas uses (32, 1024, 1024); a smaller array keeps the test fast. The alias counts the
  // prefetch operand first, as in Pallas: {1: 0} is x.
  const Array<float> x = full<float>({4, 64, 128}, 1.0f);
  using S = pltpu::SmemRef<int32_t>;
  const Array<float> o = pl::pallas_call(
      [](S, pltpu::VmemRef<const float> xr, pltpu::VmemRef<float> yr) { yr = xr + 1.0f; },
      pl::out_shape<float>({4, 64, 128}),
      pltpu::PrefetchScalarGridSpec<1>(
          pl::in_specs(
              pl::BlockSpec({pl::squeezed, 64, 128}, [](int i, S) { return pl::idx(i, 0, 0); })),
          pl::out_specs(
              pl::BlockSpec({pl::squeezed, 64, 128}, [](int i, S) { return pl::idx(i, 0, 0); })),
          pl::grid({4})),
      pl::input_output_aliases({{1, 0}}))(Array<int32_t>({3}, {1, 2, 3}), x);
  for (float v : o) ASSERT_EQ(v, 2.0f);
}

// ---- PallasCallDynamicGridTest: a grid is a run-time value ------------------------------------

Array<float> count_steps(int64_t steps) {
  return pl::pallas_call(
      [](pltpu::VmemRef<float> y) {
        if (pl::program_id(0) == 0) y = jnp::zeros_like(y);
        y += 1.0f;
      },
      pl::grid({steps * 2}),
      pl::out_specs(pl::BlockSpec({8, 128}, [](int) { return pl::idx(0, 0); })),
      pl::out_shape<float>({8, 128}))();
}

TEST(TpuPallasTest, DynamicGridDynamicGrid) {
  for (float v : count_steps(4)) ASSERT_EQ(v, 8.0f);
}

TEST(TpuPallasTest, DynamicGridDynamicGridOverflow) {
  const int64_t steps = 4;
  const Array<float> out = pl::pallas_call(
      [](pltpu::VmemRef<float> y) {
        if (pl::program_id(0) + pl::program_id(1) + pl::program_id(2) == 0) {
          y = jnp::zeros_like(y);
        }
        y += 1.0f;
      },
      pl::grid({steps * 2, steps + 1, 3}),
      pl::out_specs(pl::BlockSpec({8, 128}, [](int, int, int) { return pl::idx(0, 0); })),
      pl::out_shape<float>({8, 128}))();
  for (float v : out) ASSERT_EQ(v, 120.0f);
}

TEST(TpuPallasTest, DynamicGridDynamicGridScalarInput) {
  const int64_t steps = 4;
  const Array<float> out = pl::pallas_call(
      [](pltpu::SmemRef<const int32_t> s, pltpu::VmemRef<float> o) {
        o = jnp::full_like(o, s(0, 0));
      },
      pl::out_shape<float>({8, 128}), pl::in_specs(pl::BlockSpec(MemorySpace::SMEM)),
      pl::out_specs(pl::BlockSpec({8, 128}, [](int) { return pl::idx(0, 0); })),
      pl::grid({steps * 2}))(Array<int32_t>({1, 1}, {42}));
  for (float v : out) ASSERT_EQ(v, 42.0f);
}

TEST(TpuPallasTest, DynamicGridDynamicGridScalarInputWithInputMemorySpace) {
  const int64_t steps = 4;
  const Array<float> out = pl::pallas_call(
      [](pltpu::VmemRef<const int32_t> s, pltpu::VmemRef<float> o) {
        o = jnp::full_like(o, s(0, 0));
      },
      pl::out_shape<float>({8, 128}), pl::in_specs(pl::BlockSpec(MemorySpace::VMEM)),
      pl::out_specs(pl::BlockSpec({8, 128}, [](int) { return pl::idx(0, 0); })),
      pl::grid({steps * 2}))(Array<int32_t>({1, 1}, {42}));
  for (float v : out) ASSERT_EQ(v, 42.0f);
}

TEST(TpuPallasTest, DynamicGridNumPrograms) {
  const int64_t steps = 4;
  const Array<int32_t> out = pl::pallas_call(
      [](pltpu::SmemRef<int32_t> y) { y(0, 0) = static_cast<int32_t>(pl::num_programs(0)); },
      pl::grid({steps * 2}), pl::out_specs(pl::BlockSpec(MemorySpace::SMEM)),
      pl::out_shape<int32_t>({1, 1}))();
  EXPECT_EQ(out[0], 8);
}

TEST(TpuPallasTest, DynamicGridNumProgramsBlockSpec) {
  const int64_t steps = 4;
  const Array<int32_t> x = arange<int32_t>({4 * 8, 128});
  const Array<int32_t> out =
      pl::pallas_call([](pltpu::VmemRef<const int32_t> xr, pltpu::VmemRef<int32_t> y) { y = xr; },
                      pl::grid({steps * 2}),
                      pl::in_specs(pl::BlockSpec(  // always (1, 0)
                          {8, 128}, [](int) { return pl::idx(1 + 8 - pl::num_programs(0), 0); })),
                      pl::out_specs(pl::BlockSpec({8, 128}, [](int) { return pl::idx(0, 0); })),
                      pl::out_shape<int32_t>({8, 128}))(x);
  for (int64_t i = 0; i < out.size(); ++i) ASSERT_EQ(out[i], x[8 * 128 + i]);
}

// ---- PallasCallTest ---------------------------------------------------------------------------

template <class T>
void double_replicated_reduction(Shape shape) {
  constexpr int64_t kBlock = 2 * 1024;
  const Array<T> z = pl::pallas_call(
      [shape](pltpu::VmemRef<T> o) {
        // x = jnp.full(shape, 2); o_ref[:] = jnp.full((2048,), jnp.sum(x))
        o = jnp::sum(jnp::full<T>(shape, T{2}));
      },
      pl::out_shape<T>({4 * 1024}),
      pl::out_specs(pl::BlockSpec({kBlock}, [](int i) { return pl::idx(i); })), pl::grid({2}))();
  const T want = static_cast<T>(2 * shape.size());
  for (T v : z) ASSERT_EQ(v, want);
}

TEST(TpuPallasTest, PallasCallDoubleReplicatedReduction) {
  for (const Shape& s : {Shape{4, 2, 9}, Shape{1, 1025}, Shape{1024, 1024}}) {
    double_replicated_reduction<float>(s);
    double_replicated_reduction<int32_t>(s);
  }
}

TEST(TpuPallasTest, PallasCallScalarAnyInput) {
  const Array<float> x({1}, {3.1415f});
  const Array<float> out =
      pl::pallas_call([](pltpu::AnyRef<const float> src, pltpu::SmemRef<float> dst,
                         pltpu::DmaSemaphoreRef sem) { pltpu::async_copy(src, dst, sem).wait(); },
                      pl::out_shape<float>({1}), pl::in_specs(pl::BlockSpec(pl::ANY)),
                      pl::scratch_shapes(pltpu::SemaphoreType::DMA),
                      pl::out_specs(pl::BlockSpec(MemorySpace::SMEM)))(x);
  EXPECT_EQ(out[0], 3.1415f);
}

TEST(TpuPallasTest, PallasCallVmemLimit) {
  const Array<float> x = arange<float>({128, 128});
  auto copy = [&](int64_t limit) {
    return pl::pallas_call([](pltpu::VmemRef<const float> xr, pltpu::VmemRef<float> y) { y = xr; },
                           pl::out_shape<float>({128, 128}),
                           pltpu::CompilerParams{.vmem_limit_bytes = limit})(x);
  };
  expect_error<UsageError>([&] { copy(256); }, ErrorKind::kCapacityExceeded, "VMEM");
  const Array<float> y = copy(int64_t{1} << 18);
  for (int64_t i = 0; i < y.size(); ++i) ASSERT_EQ(y[i], x[i]);
}

TEST(TpuPallasTest, PallasCallJittedKernelWithProgramId) {
  const Array<float> x = arange<float>({2048});
  const Array<float> res = pl::pallas_call(
      [](pltpu::VmemRef<const float> xr, pltpu::VmemRef<float> o) {
        o = xr + static_cast<float>(pl::program_id(0));
      },
      pl::out_shape<float>({2048}),
      pl::in_specs(pl::BlockSpec({1024}, [](int i) { return pl::idx(i); })),
      pl::out_specs(pl::BlockSpec({1024}, [](int i) { return pl::idx(i); })), pl::grid({2}))(x);
  for (int64_t i = 0; i < 2048; ++i) ASSERT_EQ(res[i], x[i] + (i < 1024 ? 0.0f : 1.0f));
}

TEST(TpuPallasTest, PallasCallForiLoopUnrollWithProgramId) {
  const Array<int32_t> y = pl::pallas_call(
      [](pltpu::VmemRef<const int32_t> xr, pltpu::VmemRef<int32_t> yr) {
        yr = xr;
        for (int i = 0; i < 4; ++i) {  // lax.fori_loop(0, 4, body, None, unroll=2)
          yr += static_cast<int32_t>(pl::program_id(0)) + i;
        }
      },
      pl::out_shape<int32_t>({512}), pl::grid({2}),
      pl::in_specs(pl::BlockSpec({256}, [](int i) { return pl::idx(i); })),
      pl::out_specs(pl::BlockSpec({256}, [](int i) { return pl::idx(i); })))(
      Array<int32_t>({512}, 0));
  for (int64_t i = 0; i < 512; ++i) ASSERT_EQ(y[i], i < 256 ? 6 : 10) << i;
}

// test_fori_loop_unroll_full / _partial_divides / _partial_remainder: unrolling is a compiler
// hint (Pallas also checks Mosaic's IR for scf.for, which has no counterpart); the values stay.
int32_t sum_below(int n) {
  return pl::pallas_call(
      [n](pltpu::VmemRef<const int32_t> xr, pltpu::VmemRef<int32_t> yr) {
        yr = xr;
        for (int i = 0; i < n; ++i) yr += i;
      },
      pl::out_shape<int32_t>({1}))(Array<int32_t>({1}, {0}))[0];
}

TEST(TpuPallasTest, PallasCallForiLoopUnrollFull) { EXPECT_EQ(sum_below(5), 10); }
TEST(TpuPallasTest, PallasCallForiLoopUnrollPartialDivides) { EXPECT_EQ(sum_below(6), 15); }
TEST(TpuPallasTest, PallasCallForiLoopUnrollPartialRemainder) { EXPECT_EQ(sum_below(5), 10); }

// ---- PallasCallPoisonTest ---------------------------------------------------------------------

// test_poison_buffers (Mosaic with jax_pallas_poison_buffers: NaN, int min, True). Deliberately
// different: checked mode fills never-written memory with TPU interpret mode's poison, the
// largest integer (docs/pallas-parity.md). Natively unwritten memory is unspecified.
TEST(TpuPallasTest, PoisonPoisonBuffers) {
  const auto [f, i32, i8, b] = pl::pallas_call(
      [](pltpu::VmemRef<float> of, pltpu::VmemRef<int32_t> oi, pltpu::VmemRef<int8_t> o8,
         pltpu::VmemRef<bool> ob) {
        pl::run_scoped(  // jax.empty_ref(..., memory_space=pltpu.VMEM)
            [&](pltpu::VmemRef<float> sf, pltpu::VmemRef<int32_t> si, pltpu::VmemRef<int8_t> s8,
                pltpu::VmemRef<bool> sb) {
              of = sf;
              oi = si;
              o8 = s8;
              ob = sb;
            },
            pltpu::VMEM<float>({8, 128}), pltpu::VMEM<int32_t>({8, 128}),
            pltpu::VMEM<int8_t>({8, 128}), pltpu::VMEM<bool>({8, 128}));
      },
      pl::out_shape(ShapeDtypeStruct<float>{{8, 128}}, ShapeDtypeStruct<int32_t>{{8, 128}},
                    ShapeDtypeStruct<int8_t>{{8, 128}}, ShapeDtypeStruct<bool>{{8, 128}}),
      pltpu::InterpretParams{})();
  for (int64_t k = 0; k < f.size(); ++k) {
    ASSERT_TRUE(std::isnan(f[k]));
    ASSERT_EQ(i32[k], INT32_MAX);
    ASSERT_EQ(i8[k], INT8_MAX);
    ASSERT_TRUE(b[k]);
  }
}

// test_vmem_oom_error_message_basics: Mosaic's message names both windows, their shapes and the
// full shapes, and how they are buffered. Scaled down: (64 / buffers, 256) blocks under a 100 KiB
// limit instead of v5e's (4096 / buffers, 8192) under 128 MiB.
void vmem_oom_message(int buffers) {
  const int64_t bm = 64 / buffers;
  const Array<float> x = arange<float>({2 * bm, 512});
  const pl::BlockSpec spec(
      {bm, 256}, [](int i, int j) { return pl::idx(i, j); }, pl::Buffered(buffers));
  auto e = tessera::testing::catch_error<UsageError>([&] {
    pl::pallas_call([](pltpu::VmemRef<const float> xr, pltpu::VmemRef<float> o) { o = xr; },
                    pl::out_shape<float>({2 * bm, 512}), pl::grid({2, 2}), pl::in_specs(spec),
                    pl::out_specs(spec), pltpu::CompilerParams{.vmem_limit_bytes = 100 * 1024})(x);
  });
  ASSERT_TRUE(e);
  EXPECT_EQ(e->kind(), ErrorKind::kCapacityExceeded);
  const std::string m = e->what();
  // Streams, not string concatenation: GCC 12's -O3 -Wrestrict misfires on the latter.
  std::ostringstream window, full;
  window << "(" << bm << ", 256)";
  full << "(" << 2 * bm << ", 512)";
  EXPECT_NE(m.find("input 0"), std::string::npos) << m;
  EXPECT_NE(m.find("output 0"), std::string::npos) << m;
  EXPECT_NE(m.find(window.str()), std::string::npos) << m;
  EXPECT_NE(m.find(full.str()), std::string::npos) << m;
  std::ostringstream times;
  times << "x " << buffers;
  EXPECT_NE(m.find(times.str()), std::string::npos) << m;
}

TEST(TpuPallasTest, PoisonVmemOomErrorMessageBasics) {
  vmem_oom_message(1);
  vmem_oom_message(2);
}

// test_vmem_oom_error_message_dynamic_grid_scalar_prefetch_and_vmem_scratch, scaled down. Mosaic
// numbers the operators' inputs with the scalar-prefetch operand first (x is input 1); Tessera's
// message numbers the blocked inputs (x is input 0) and names the scratch.
TEST(TpuPallasTest, PoisonVmemOomErrorMessageDynamicGridScalarPrefetchAndVmemScratch) {
  const Array<float> x = arange<float>({64, 256});
  const int64_t num_grid = 4;
  using S = pltpu::SmemRef<float>;
  auto e = tessera::testing::catch_error<UsageError>([&] {
    pl::pallas_call(
        [](S, pltpu::VmemRef<const float> xr, pltpu::VmemRef<float> o, pltpu::VmemRef<float>) {
          o = xr;
        },
        pl::out_shape<float>({64, 256}),
        pltpu::PrefetchScalarGridSpec<1>(pl::grid({num_grid}), pl::in_specs(pl::BlockSpec()),
                                         pl::out_specs(pl::BlockSpec()),
                                         pl::scratch_shapes(pltpu::VMEM<float>({16, 256}))),
        pltpu::CompilerParams{.vmem_limit_bytes = 100 * 1024})(Array<float>({1}, {5.0f}), x);
  });
  ASSERT_TRUE(e);
  EXPECT_EQ(e->kind(), ErrorKind::kCapacityExceeded);
  const std::string m = e->what();
  EXPECT_NE(m.find("input 0: window (64, 256) of (64, 256)"), std::string::npos) << m;
  EXPECT_NE(m.find("output 0: window (64, 256) of (64, 256)"), std::string::npos) << m;
  EXPECT_NE(m.find("scratch #0"), std::string::npos) << m;
}

// ---- PallasCallDMAInterpretTest ----------------------------------------------------------------

// test_interpret_local_dma: deliberately different. Pallas' HLO interpreter counts a DMA
// semaphore in elements (1024 for an (8, 128) int32 copy); Tessera counts bytes, as Pallas' TPU
// interpret mode and a TPU do. With eager DMAs the copy has landed at .start().
TEST(TpuPallasTest, DmaInterpretLocalDma) {
  const Array<int32_t> x = random_array<int32_t>({16, 128}, 0);
  pltpu::InterpretParams eager;
  eager.dma_execution_mode = pltpu::DmaExecutionMode::eager;
  const auto [result, semaphores] = pl::pallas_call(
      [](pltpu::AnyRef<const int32_t> xh, pltpu::VmemRef<int32_t> o,
         pltpu::VmemRef<int32_t> sem_out, pltpu::DmaSemaphoreRef copy_sem) {
        o = jnp::zeros_like(o);
        auto input_to_output_copy =
            pltpu::make_async_copy(xh.at(pl::ds(0, 8)), o.at(pl::ds(0, 8)), copy_sem.at(0));
        input_to_output_copy.start();
        sem_out.at(0) = jnp::full_like(sem_out.at(0), pl::semaphore_read(copy_sem.at(0)));
        input_to_output_copy.wait();
        sem_out.at(1) = jnp::full_like(sem_out.at(1), pl::semaphore_read(copy_sem.at(0)));
      },
      pl::out_shape(ShapeDtypeStruct<int32_t>{{16, 128}}, ShapeDtypeStruct<int32_t>{{2, 1}}),
      pltpu::PrefetchScalarGridSpec<0>(pl::in_specs(pl::BlockSpec(pl::ANY)),
                                       pl::scratch_shapes(pltpu::SemaphoreType::DMA({2}))),
      eager)(x);
  for (int64_t r = 0; r < 16; ++r) {
    for (int64_t c = 0; c < 128; ++c) ASSERT_EQ(result(r, c), r < 8 ? x(r, c) : 0);
  }
  EXPECT_EQ(semaphores(0, 0), 8 * 128 * 4);  // Pallas' HLO interpreter: 8 * 128
  EXPECT_EQ(semaphores(1, 0), 0);
}

// test_interpreter_semaphore_counting: deliberately different. Pallas' HLO interpreter lets a
// wait take more than was signalled (the count goes negative); on a TPU a wait blocks until the
// count is there, so this kernel never finishes: checked mode reports the deadlock.
TEST(TpuPallasTest, DmaInterpreterSemaphoreCounting) {
  auto run = [] {
    pl::pallas_call(
        [](pltpu::VmemRef<int32_t> o, pltpu::SemaphoreRef sem) {
          o = jnp::zeros_like(o);
          for (int i = 0; i < 4; ++i) pl::semaphore_signal(sem.at(i), i + 1);
          for (int i = 0; i < 4; ++i) {
            o(i, 0) = static_cast<int32_t>(pl::semaphore_read(sem.at(i)));
          }
          for (int i = 0; i < 4; ++i) pl::semaphore_wait(sem.at(i), 4 - i);
        },
        pl::out_shape<int32_t>({8, 1}),
        pltpu::PrefetchScalarGridSpec<0>(pl::scratch_shapes(pltpu::SemaphoreType::REGULAR({4}))),
        pltpu::InterpretParams{})();
  };
  expect_error<KernelError>(run, ErrorKind::kDeadlock, "deadlock");
}

}  // namespace
