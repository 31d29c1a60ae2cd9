// pltpu::BufferedRef and emit_pipeline_with_allocations: a pipeline's windows made ahead of it
// (as pallas_call scratch or in pl::run_scoped) and reused by every run of the pipeline; ports of
// Pallas' test_matmul_with_input_output and test_copy_with_allocations, natively and checked,
// with the errors. Then windows the caller fills before the pipeline starts
// (pl::Buffered(prefetched_count=), BufferedRef::with_window_ref): their use, the checked
// engine's view of the caller's copies (planted bugs and their clean twins), and the errors.
#include <gtest/gtest.h>

#include <atomic>
#include <cmath>
#include <optional>
#include <tuple>
#include <vector>

#include "support/checked_support.h"
#include "support/expect_error.h"
#include "tessera/tessera.h"

namespace {
using namespace tessera;

Array<float> ramp(Shape shape, int mod) {
  Array<float> a(std::move(shape));
  for (int64_t i = 0; i < a.size(); ++i) a[i] = static_cast<float>(i % mod) * 0.25f;
  return a;
}

template <class F>
void both_engines(F&& f) {
  f();
  pltpu::ForceTpuInterpretMode force{pltpu::InterpretParams{}};
  f();
}

TEST(BufferedRef, MatmulWithInputOutput) {
  // test_matmul_with_input_output: BufferedRefs as pallas_call scratch, the output an
  // input_output BufferedRef. Here the k axis comes first, so each (m, n) block is visited again
  // at every k: input_output reads it back from HBM at each visit.
  constexpr int64_t M = 256, N = 256, K = 256, bm = 128, bn = 128, bk = 128;
  const Array<float> x = ramp({M, K}, 7);
  const Array<float> y = ramp({K, N}, 5);
  both_engines([&] {
    auto f = pl::pallas_call(
        [](pltpu::AnyRef<const float> x_hbm, pltpu::AnyRef<const float> y_hbm,
           pltpu::AnyRef<float> o_hbm, pltpu::BufferedRef<float> xb, pltpu::BufferedRef<float> yb,
           pltpu::BufferedRef<float> ob) {
          pltpu::emit_pipeline(
              [](pltpu::VmemRef<const float> xv, pltpu::VmemRef<const float> yv,
                 pltpu::VmemRef<float> ov) {
                if (pl::program_id(0) == 0) ov = jnp::zeros_like(ov);
                ov += jnp::dot(xv, yv);
              },
              pltpu::grid({K / bk, M / bm, N / bn}))(x_hbm, y_hbm, o_hbm,
                                                     pltpu::allocations(xb, yb, ob));
        },
        pl::out_shape<float>({M, N}), pl::in_specs(pl::BlockSpec(pl::ANY), pl::BlockSpec(pl::ANY)),
        pl::out_specs(pl::BlockSpec(pl::ANY)),
        pl::scratch_shapes(pltpu::BufferedRef<float>::input(pl::BlockSpec(
                               {bm, bk}, [](int k, int m, int) { return pl::idx(m, k); })),
                           pltpu::BufferedRef<float>::input(pl::BlockSpec(
                               {bk, bn}, [](int k, int, int n) { return pl::idx(k, n); })),
                           pltpu::BufferedRef<float>::input_output(pl::BlockSpec(
                               {bm, bn}, [](int, int m, int n) { return pl::idx(m, n); }))),
        pltpu::TensorCoreMesh("core", 1));
    const Array<float> o = f(x, y);
    for (int64_t i = 0; i < M; i += 17) {
      for (int64_t j = 0; j < N; ++j) {
        double want = 0;
        for (int64_t k = 0; k < K; ++k) want += double(x(i, k)) * double(y(k, j));
        ASSERT_NEAR(o(i, j), want, 1e-3 * (1 + std::abs(want))) << i << "," << j;
      }
    }
  });
}

TEST(BufferedRef, CopyWithAllocationsInALoop) {
  // test_copy_with_allocations: make_allocations' BufferedRefs allocated once by run_scoped, the
  // pipeline run several times with them (here once per row block of an outer loop).
  const Array<float> x = ramp({64, 256}, 97);
  both_engines([&] {
    auto k = pl::kernel(pl::out_type<float>({64, 256}), pltpu::TensorCoreMesh("core", 1))(
        [](pltpu::HbmRef<const float> x_hbm, pltpu::HbmRef<float> o_hbm) {
          auto [pipeline, make_allocations] = pltpu::emit_pipeline_with_allocations(
              [](pltpu::VmemRef<const float> xv, pltpu::VmemRef<float> ov) { ov = xv + 1.0f; },
              pltpu::grid({2}),
              pl::in_specs(pl::BlockSpec({8, 128}, [](int j) { return pl::idx(0, j); })),
              pl::out_specs(pl::BlockSpec({8, 128}, [](int j) { return pl::idx(0, j); })));
          const auto x0 = x_hbm.at(pl::ds(0, 8), pl::all);
          const auto o0 = o_hbm.at(pl::ds(0, 8), pl::all);
          pl::run_scoped(
              [&](std::tuple<pltpu::BufferedRef<float>, pltpu::BufferedRef<float>> allocs) {
                EXPECT_EQ(std::get<0>(allocs).buffer_count(), 2);
                for (int r = 0; r < 8; ++r) {
                  pipeline(x_hbm.at(pl::ds(r * 8, 8), pl::all), o_hbm.at(pl::ds(r * 8, 8), pl::all),
                           pltpu::allocations(allocs));
                }
              },
              make_allocations(x0, o0));
        });
    const Array<float> o = k(x);
    for (int64_t i = 0; i < x.size(); ++i) ASSERT_EQ(o[i], x[i] + 1.0f) << i;
  });
}

TEST(BufferedRef, Errors) {
  const int line = __LINE__ + 1;
  EXPECT_TESSERA_ERROR(pltpu::BufferedRef<float>::input(pl::BlockSpec()), UsageError,
                       ErrorKind::kInvalidArgument, "the BlockSpec has no block shape", line);
  const int count_line = __LINE__ + 1;
  EXPECT_TESSERA_ERROR(pltpu::BufferedRef<float>::output(pl::BlockSpec({8, 128}), 3), UsageError,
                       ErrorKind::kInvalidArgument, "buffer_count=3 for an output", count_line);
  // A window that is not the block the spec takes of the operand.
  std::atomic<int> grid_line{0};
  auto k = pl::kernel(pl::out_type<float>({16, 128}), pltpu::TensorCoreMesh("core", 1),
                      pl::scratch_types(pltpu::VMEM<float>({8, 128})))(
      [&](pltpu::HbmRef<float> o, pltpu::VmemRef<float> v) {
        const pltpu::BufferedRef<float> small(pl::BlockSpec(), pltpu::BufferType::OUTPUT, 1,
                                              Shape{8, 128}, std::source_location::current());
        const pltpu::Grid grid = pltpu::grid({1});
        grid_line = __LINE__ - 1;
        pltpu::emit_pipeline([](pltpu::VmemRef<float> w) { w = jnp::zeros_like(w); }, grid)(
            o, pltpu::allocations(small.make_ref(v.data())));
      });
  tessera::testing::expect_kernel_error([&] { k(); }, ErrorKind::kShapeMismatch,
                                        "the BufferedRef of output 0 holds windows of (8, 128)",
                                        grid_line);
}

// ---- windows filled before the pipeline starts ------------------------------------------------

// How the caller fills the prefetched windows: async copies waited before the pipeline, waited
// only after it (a bug: the pipeline may read a window the copy is still writing), or not at all
// (a bug: the pipeline reads garbage).
enum class Fill { kWaited, kWaitedAfterPipeline, kNone };

// The line of the copy body's statement, for the checked reports.
std::atomic<int> g_body_line{0};

// The caller copies y's first `prefetched` blocks of 128 into the first windows of a VMEM buffer
// of `buffers` windows, binds the buffer as the windows of the pipeline's input, and the pipeline
// walks x's 4 blocks: it fetches nothing for the prefetched blocks, so the output's block j is
// y's for j < prefetched and x's after.
Array<float> run_prefetched(const Array<float>& x, const Array<float>& y, int prefetched,
                            int buffers, Fill fill) {
  auto k = pl::kernel(
      pl::out_type<float>({512}), pltpu::TensorCoreMesh("core", 1),
      pl::scratch_types(pltpu::VMEM<float>({buffers, 128}), pltpu::SemaphoreType::DMA))(
      [=](pltpu::HbmRef<const float> x_hbm, pltpu::HbmRef<const float> y_hbm,
          pltpu::HbmRef<float> o_hbm, pltpu::VmemRef<float> windows, pltpu::DmaSemaphoreRef sem) {
        auto copy = [&](int j) {
          return pltpu::make_async_copy(y_hbm.at(pl::ds(128 * j, 128)), windows.at(j), sem);
        };
        for (int j = 0; j < prefetched && fill != Fill::kNone; ++j) copy(j).start();
        for (int j = 0; j < prefetched && fill == Fill::kWaited; ++j) copy(j).wait();
        auto [pipeline, make_allocations] = pltpu::emit_pipeline_with_allocations(
            [](pltpu::VmemRef<const float> xv, pltpu::VmemRef<float> ov) {
              g_body_line = __LINE__ + 1;
              ov = xv;
            },
            pltpu::grid({4}),
            pl::in_specs(pl::BlockSpec(
                {128}, [](int i) { return pl::idx(i); },
                pl::Buffered{.buffer_count = buffers, .prefetched_count = prefetched})),
            pl::out_specs(pl::BlockSpec({128}, [](int i) { return pl::idx(i); })));
        pl::run_scoped(
            [&](std::tuple<pltpu::BufferedRef<float>, pltpu::BufferedRef<float>> allocs) {
              auto [x_bref, o_bref] = allocs;
              EXPECT_EQ(x_bref.prefetched_count(), prefetched);
              EXPECT_EQ(x_bref.window(), nullptr);  // no VMEM of its own: the caller's is bound
              pipeline(x_hbm, o_hbm, pltpu::allocations(x_bref.with_window_ref(windows), o_bref));
            },
            make_allocations(x_hbm, o_hbm));
        for (int j = 0; j < prefetched && fill == Fill::kWaitedAfterPipeline; ++j) copy(j).wait();
      });
  return k(x, y);
}

void expect_prefetched(const Array<float>& out, const Array<float>& x, const Array<float>& y,
                       int prefetched) {
  for (int64_t i = 0; i < out.size(); ++i) {
    ASSERT_EQ(out[i], i < 128 * prefetched ? y[i] : x[i]) << i << " prefetched " << prefetched;
  }
}

TEST(BufferedRef, PrefetchedWindowsHoldTheFirstBlocks) {
  // Natively and checked with each DMA execution mode, three times each: the checked engine sees
  // the caller's copies land in the windows and the pipeline read them, and reports nothing.
  const Array<float> x = ramp({512}, 101);
  Array<float> y({512});
  for (int64_t i = 0; i < y.size(); ++i) y[i] = -1.0f - static_cast<float>(i);
  const std::pair<int, int> counts[] = {{1, 2}, {1, 3}, {2, 3}};
  for (const auto& [prefetched, buffers] : counts) {
    expect_prefetched(run_prefetched(x, y, prefetched, buffers, Fill::kWaited), x, y, prefetched);
    for (const auto mode : {pltpu::DmaExecutionMode::on_wait, pltpu::DmaExecutionMode::eager,
                            pltpu::DmaExecutionMode::random}) {
      pltpu::ForceTpuInterpretMode force(checked_testing::checked(mode));
      for (int rep = 0; rep < 3; ++rep) {
        expect_prefetched(run_prefetched(x, y, prefetched, buffers, Fill::kWaited), x, y,
                          prefetched);
      }
    }
  }
}

TEST(BufferedRef, CheckedPrefetchedWindowReadBeforeItsCopyWaited) {
  // Planted bug: the caller waits for its copy into the window only after the pipeline, whose
  // first step reads that window (on a TPU the copy may land at any moment until its wait). The
  // clean twin is PrefetchedWindowsHoldTheFirstBlocks. Natively the window may or may not hold
  // the block when the pipeline reads it (the native engine makes a small copy together with the
  // next few, or at the first wait: src/native/native_engine.cc), as on a TPU; only the checked
  // engine reports it.
  const Array<float> x = ramp({512}, 101);
  const Array<float> y = ramp({512}, 7);
  for (const auto mode : checked_testing::kModes) {
    pltpu::ForceTpuInterpretMode force(checked_testing::checked(mode));
    tessera::testing::expect_kernel_error(
        [&] { run_prefetched(x, y, 1, 2, Fill::kWaitedAfterPipeline); }, ErrorKind::kRace,
        "may still be writing it (started, not yet waited)", g_body_line);
  }
}

TEST(BufferedRef, CheckedPrefetchedWindowNeverFilled) {
  // Planted bug: the window is bound but the caller never copies into it, so the pipeline's first
  // step reads garbage (the checked engine tracks definedness here); the clean twin fills it.
  const Array<float> x = ramp({512}, 101);
  const Array<float> y = ramp({512}, 7);
  pltpu::ForceTpuInterpretMode force(checked_testing::checked());
  tessera::testing::expect_kernel_error(
      [&] { run_prefetched(x, y, 1, 2, Fill::kNone); }, ErrorKind::kUninitialized,
      "which nothing had written since it was allocated", g_body_line);
  expect_prefetched(run_prefetched(x, y, 1, 2, Fill::kWaited), x, y, 1);
}

// A copy pipeline over 4 blocks of 128 whose input spec says `mode`, run with `run` (which gets
// the pipeline, make_allocations and the refs) in a kernel; returns the KernelError it raises.
template <class Run>
void expect_prefetch_error(pl::Buffered mode, Run run, ErrorKind kind, const std::string& says) {
  std::atomic<int> line{0};
  auto k = pl::kernel(pl::out_type<float>({512}), pltpu::TensorCoreMesh("core", 1),
                      pl::scratch_types(pltpu::VMEM<float>({2, 128})))(
      [&](pltpu::HbmRef<const float> x_hbm, pltpu::HbmRef<float> o_hbm, pltpu::VmemRef<float> v) {
        const pl::BlockSpec in(
            {128}, [](int i) { return pl::idx(i); }, mode);
        const pl::BlockSpec out({128}, [](int i) { return pl::idx(i); });
        run([](pltpu::VmemRef<const float> xv, pltpu::VmemRef<float> ov) { ov = xv; }, in, out,
            x_hbm, o_hbm, v, line);
      });
  const Array<float> x = ramp({512}, 101);
  tessera::testing::expect_kernel_error([&] { k(x); }, kind, says, line);
}

TEST(BufferedRef, PrefetchedErrors) {
  using Tuple = std::tuple<pltpu::BufferedRef<float>, pltpu::BufferedRef<float>>;
  const pl::Buffered prefetch_one{.buffer_count = 2, .prefetched_count = 1};
  // Unbound, through the tuple form of pltpu::allocations: at that call.
  expect_prefetch_error(
      prefetch_one,
      [](auto body, auto in, auto out, auto x, auto o, auto, std::atomic<int>& line) {
        auto [pipeline, make] = pltpu::emit_pipeline_with_allocations(
            body, pltpu::grid({4}), pl::in_specs(in), pl::out_specs(out));
        pl::run_scoped(
            [&](Tuple allocs) {
              line = __LINE__ + 1;
              pipeline(x, o, pltpu::allocations(allocs));
            },
            make(x, o));
      },
      ErrorKind::kInvalidArgument,
      "expected external window buffer to be bound for prefetched input 0 "
      "(pl::Buffered(prefetched_count=1)), but its BufferedRef has no window ref");
  // A plain emit_pipeline has no BufferedRef to bind: at the spec.
  expect_prefetch_error(
      prefetch_one,
      [](auto body, auto, auto out, auto x, auto o, auto, std::atomic<int>& line) {
        line = __LINE__ + 1;
        const pl::BlockSpec in(
            {128}, [](int i) { return pl::idx(i); },
            pl::Buffered{.buffer_count = 2, .prefetched_count = 1});
        pltpu::emit_pipeline(body, pltpu::grid({4}), pl::in_specs(in), pl::out_specs(out))(x, o);
      },
      ErrorKind::kInvalidArgument, "the pipeline was called without pltpu::allocations");
  // A window ref of the wrong shape, and a strided one.
  expect_prefetch_error(
      prefetch_one,
      [](auto body, auto in, auto out, auto x, auto o, auto v, std::atomic<int>& line) {
        auto [pipeline, make] = pltpu::emit_pipeline_with_allocations(
            body, pltpu::grid({4}), pl::in_specs(in), pl::out_specs(out));
        pl::run_scoped(
            [&](Tuple allocs) {
              line = __LINE__ + 1;
              auto bound = std::get<0>(allocs).with_window_ref(v.at(pl::all, pl::ds(0, 64)));
              pipeline(x, o, pltpu::allocations(bound, std::get<1>(allocs)));
            },
            make(x, o));
      },
      ErrorKind::kShapeMismatch,
      "the window ref has shape (2, 64) but the BufferedRef holds 2 windows of (128,); bind a "
      "VMEM ref of shape (2, 128) or (256,)");
  expect_prefetch_error(
      prefetch_one,
      [](auto, auto, auto, auto, auto, auto v, std::atomic<int>& line) {
        const auto bref = pltpu::BufferedRef<float>::input(
            pl::BlockSpec({2}, pl::Buffered{.buffer_count = 1, .prefetched_count = 1}), 1);
        line = __LINE__ + 1;
        static_cast<void>(bref.with_window_ref(v.at(pl::all, 0)));  // a column: stride 128
      },
      ErrorKind::kInvalidArgument, "is a strided view (strides (128))");
  // Every buffer prefetched leaves none to fetch into: at make_allocations (the grid's line).
  expect_prefetch_error(
      pl::Buffered{.buffer_count = 2, .prefetched_count = 2},
      [](auto body, auto in, auto out, auto x, auto o, auto, std::atomic<int>& line) {
        line = __LINE__ + 1;
        const pltpu::Grid grid = pltpu::grid({4});
        auto [pipeline, make] =
            pltpu::emit_pipeline_with_allocations(body, grid, pl::in_specs(in), pl::out_specs(out));
        static_cast<void>(pipeline);
        static_cast<void>(make(x, o));
      },
      ErrorKind::kInvalidArgument,
      "prefetched_count=2 with buffer_count=2 for the input of shape (512,); the pipeline needs "
      "a free window");
  // On an output.
  expect_prefetch_error(
      pl::Buffered(2),
      [](auto body, auto in, auto, auto x, auto o, auto, std::atomic<int>& line) {
        const pl::BlockSpec out(
            {128}, [](int i) { return pl::idx(i); },
            pl::Buffered{.buffer_count = 2, .prefetched_count = 1});
        line = __LINE__ + 1;
        const pltpu::Grid grid = pltpu::grid({4});
        auto [pipeline, make] =
            pltpu::emit_pipeline_with_allocations(body, grid, pl::in_specs(in), pl::out_specs(out));
        static_cast<void>(pipeline);
        static_cast<void>(make(x, o));
      },
      ErrorKind::kInvalidArgument, "pl::Buffered(prefetched_count=1) on an output");
  // A block of a VMEM ref is used where it lies: there is no window to prefetch into.
  expect_prefetch_error(
      prefetch_one,
      [](auto body, auto, auto, auto, auto, auto v, std::atomic<int>& line) {
        line = __LINE__ + 1;
        const pl::BlockSpec in(
            {1, 128}, [](int i) { return pl::idx(i, 0); },
            pl::Buffered{.buffer_count = 2, .prefetched_count = 1});
        const pl::BlockSpec out({1, 128}, [](int i) { return pl::idx(i, 0); });
        pltpu::emit_pipeline(body, pltpu::grid({2}), pl::in_specs(in), pl::out_specs(out))(v, v);
      },
      ErrorKind::kInvalidArgument, "are used where they lie (no windows)");
  // Host-side: a negative count, and a pallas_call, which fetches every block itself.
  const int negative_line = __LINE__ + 1;
  EXPECT_TESSERA_ERROR(pltpu::BufferedRef<float>::input(pl::BlockSpec(
                           {128}, pl::Buffered{.buffer_count = 2, .prefetched_count = -1})),
                       UsageError, ErrorKind::kInvalidArgument,
                       "pl::Buffered(prefetched_count=-1); it counts the blocks", negative_line);
  const pl::Buffered once{.prefetched_count = 1};
  const int spec_line = __LINE__ + 1;
  const pl::BlockSpec prefetched_spec({128}, once);  // block 0 at every step
  auto f =
      pl::pallas_call([](pltpu::VmemRef<const float> x, pltpu::VmemRef<float> o) { o = x; },
                      pl::out_shape<float>({512}), pl::grid({4}), pl::in_specs(prefetched_spec),
                      pl::out_specs(pl::BlockSpec({128}, [](int i) { return pl::idx(i); })));
  EXPECT_TESSERA_ERROR(f(ramp({512}, 3)), UsageError, ErrorKind::kInvalidArgument,
                       "input 0 asks for pl::Buffered(prefetched_count=1); a pallas_call fetches "
                       "every block itself",
                       spec_line);
}

}  // namespace
