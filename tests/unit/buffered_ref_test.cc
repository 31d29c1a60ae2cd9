// pltpu::BufferedRef and emit_pipeline_with_allocations: a pipeline's windows made ahead of it
// (as pallas_call scratch or in pl::run_scoped) and reused by every run of the pipeline; ports of
// Pallas' test_matmul_with_input_output and test_copy_with_allocations, natively and checked,
// with the errors.
#include <gtest/gtest.h>

#include <atomic>
#include <cmath>
#include <optional>
#include <tuple>
#include <vector>

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

}  // namespace
