// Rules that live in one place each: the grid semantics a pipeline accepts, block extents, one
// capacity message for every stack allocation (with
// a checked chip's caps for every one of them), and Tessera's own invariant checks.
#include <gtest/gtest.h>

#include <atomic>
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "core/check.h"
#include "support/checked_support.h"
#include "support/expect_error.h"
#include "tessera/tessera.h"

namespace {
using namespace tessera;
using pltpu::ARBITRARY;
using pltpu::CORE_PARALLEL;
using pltpu::PARALLEL;
using pltpu::SUBCORE_PARALLEL;

bool contains(const std::string& s, const std::string& part) {
  return s.find(part) != std::string::npos;
}

// Which core wrote each (8, 128) row block of a (4 * 8, 128) output.
std::vector<int> writers(pltpu::GridDimensionSemantics s) {
  const pl::BlockSpec spec({8, 128}, [](int i) { return pl::idx(i, 0); });
  auto f = pl::pallas_call(
      [](pltpu::VmemRef<int32_t> o) { o = jnp::full_like(o, lax::axis_index("core")); },
      pl::out_shape<int32_t>({32, 128}), pl::grid({4}), pl::out_specs(spec),
      pltpu::TensorCoreMesh("core", 2), pltpu::CompilerParams{.dimension_semantics = {s}});
  const Array<int32_t> o = f();
  std::vector<int> w;
  for (int b = 0; b < 4; ++b) w.push_back(o[b * 8 * 128]);
  return w;
}

TEST(GridSemantics, CoreParallelSplitsLikeParallel) {
  EXPECT_EQ(writers(PARALLEL), (std::vector<int>{0, 0, 1, 1}));
  EXPECT_EQ(writers(CORE_PARALLEL), (std::vector<int>{0, 0, 1, 1}));
  EXPECT_EQ(writers(ARBITRARY), (std::vector<int>{0, 0, 0, 0}));
}

TEST(GridSemantics, CoreParallelSplitsAnEmitPipeline) {
  std::atomic<int> steps[2] = {0, 0};
  auto k = pl::kernel(pl::out_type<float>({64, 128}),
                      pltpu::TensorCoreMesh("core", 2))([&](pltpu::HbmRef<float> o) {
    const pl::BlockSpec spec({8, 128}, [](int i) { return pl::idx(i, 0); });
    pltpu::emit_pipeline(
        [&](pltpu::VmemRef<float> ov) {
          ++steps[lax::axis_index("core")];
          ov = 1.0f;
        },
        pltpu::grid({8}), pl::out_specs(spec), pltpu::core_axis_name("core"),
        pltpu::dimension_semantics(CORE_PARALLEL))(o);
  });
  const Array<float> o = k();
  for (float v : o) ASSERT_EQ(v, 1.0f);
  EXPECT_EQ(steps[0].load(), 4);
  EXPECT_EQ(steps[1].load(), 4);
}

TEST(GridSemantics, SubcoreParallelIsRefused) {
  const pl::BlockSpec spec({8, 128}, [](int i) { return pl::idx(i, 0); });
  auto f =
      pl::pallas_call([](pltpu::VmemRef<float> o) { o = 0.0f; }, pl::out_shape<float>({32, 128}),
                      pl::grid({4}), pl::out_specs(spec), pltpu::TensorCoreMesh("core", 1),
                      pltpu::CompilerParams{.dimension_semantics = {SUBCORE_PARALLEL}});
  auto e = tessera::testing::catch_error<UsageError>([&] { f(); });
  ASSERT_TRUE(e);
  EXPECT_EQ(e->kind(), ErrorKind::kUnsupported);
  EXPECT_TRUE(contains(e->what(), "SUBCORE_PARALLEL")) << e->what();
  EXPECT_TRUE(contains(e->what(), "before launch")) << e->what();
}

TEST(BlockExtents, ZeroOrNegativeIsRefusedAtTheSpec) {
  for (int64_t extent : {int64_t{0}, int64_t{-8}}) {
    const int line = __LINE__ + 1;
    const pl::BlockSpec spec({extent, 128}, [](int i) { return pl::idx(i, 0); });
    auto f =
        pl::pallas_call([](pltpu::VmemRef<float> o) { o = 0.0f; }, pl::out_shape<float>({32, 128}),
                        pl::grid({4}), pl::out_specs(spec), pltpu::TensorCoreMesh("core", 1));
    EXPECT_TESSERA_ERROR(f(), UsageError, ErrorKind::kInvalidArgument,
                         "block extent " + std::to_string(extent) + " on axis 0", line);
  }
  // The same rule in emit_pipeline, raised in the kernel at the spec's line.
  int line = 0;
  auto k = pl::kernel(pl::out_type<float>({32, 128}),
                      pltpu::TensorCoreMesh("core", 1))([&](pltpu::HbmRef<float> o) {
    line = __LINE__ + 1;
    const pl::BlockSpec spec({8, 0}, [](int i) { return pl::idx(i, 0); });
    pltpu::emit_pipeline([](pltpu::VmemRef<float> ov) { ov = 0.0f; }, pltpu::grid({4}),
                         pl::out_specs(spec))(o);
  });
  auto e = tessera::testing::catch_error<KernelError>([&] { k(); });
  ASSERT_TRUE(e);
  EXPECT_EQ(e->kind(), ErrorKind::kInvalidArgument);
  EXPECT_EQ(static_cast<int>(e->where().line()), line);
  EXPECT_TRUE(contains(e->what(), "block extent 0 on axis 1")) << e->what();
}

TEST(Capacity, OneMessageForEveryStackAllocation) {
  // A run_scoped buffer, a pipeline window and an expression temporary that do not fit all say
  // what asked, its bytes, what is free of which budget, and who holds the rest.
  auto scope = pl::kernel(pltpu::TensorCoreMesh("core", 1),
                          pltpu::CompilerParams{.vmem_limit_bytes = 64 << 10})(
      [] { pl::run_scoped([](pltpu::VmemRef<float>) {}, pltpu::VMEM<float>({32 << 10})); });
  auto window =
      pl::kernel(pl::out_type<float>({256, 256}), pltpu::TensorCoreMesh("core", 1),
                 pltpu::CompilerParams{.vmem_limit_bytes = 64 << 10})([](pltpu::HbmRef<float> o) {
        const pl::BlockSpec spec({128, 128}, [](int i, int j) { return pl::idx(i, j); });
        pltpu::emit_pipeline([](pltpu::VmemRef<float> ov) { ov = 0.0f; }, pltpu::grid({2, 2}),
                             pl::out_specs(spec))(o);
      });
  auto temporary =
      pl::kernel(pl::out_type<float>({1}), pltpu::TensorCoreMesh("core", 1),
                 pl::scratch_types(pltpu::VMEM<float>({128, 128}), pltpu::VMEM<float>({1})),
                 pltpu::CompilerParams{.vmem_limit_bytes = 96 << 10})(
          [](pltpu::HbmRef<float> o, pltpu::VmemRef<float> x, pltpu::VmemRef<float> s) {
            x = 1.0f;
            s = jnp::sum(x + 1.0f);  // its (128, 128) operand is evaluated into a 64 KiB temporary
            pltpu::sync_copy(s, o);
          });
  struct Case {
    const char* name;
    std::function<void()> run;
    const char* subject;
  };
  const Case cases[] = {
      {"run_scoped", [&] { scope(); }, "the scope needs 131072 bytes of VMEM"},
      {"window", [&] { window(); }, "a pipeline window needs 131072 bytes of VMEM"},
      {"temporary", [&] { temporary(); }, "an expression temporary needs 65536 bytes of VMEM"}};
  for (const Case& c : cases) {
    auto e = tessera::testing::catch_error<KernelError>(c.run);
    ASSERT_TRUE(e) << c.name;
    EXPECT_EQ(e->kind(), ErrorKind::kCapacityExceeded) << c.name;
    EXPECT_TRUE(contains(e->what(), c.subject)) << c.name << ": " << e->what();
    EXPECT_TRUE(contains(e->what(), "bytes of the kernel's VMEM budget are free")) << e->what();
    EXPECT_TRUE(contains(e->what(), "the kernel's scratch uses")) << e->what();
  }
}

TEST(Capacity, RunScopedSmemHonoursTheCheckedChip) {
  // A v3 TensorCore has 16 KiB of SMEM: a 32 KiB run_scoped SMEM buffer fits the native engine's
  // 1 MiB but not that chip, as a pipeline's SMEM blocks do not.
  auto make = [](std::optional<pltpu::InterpretParams> p) {
    auto b = pl::kernel(pltpu::TensorCoreMesh("core", 1));
    if (p) b.set(*p);
    return b([] {
      pl::run_scoped([](pltpu::SmemRef<int32_t> s) { s(0) = 1; }, pltpu::SMEM<int32_t>({8192}));
    });
  };
  make(std::nullopt)();
  auto e =
      tessera::testing::catch_error<KernelError>([&] { make(checked_testing::on_chip("v3"))(); });
  ASSERT_TRUE(e);
  EXPECT_EQ(e->kind(), ErrorKind::kCapacityExceeded);
  EXPECT_TRUE(contains(e->what(), "needs 32768 bytes of SMEM")) << e->what();
  EXPECT_TRUE(contains(e->what(), "of the v3 chip's SMEM")) << e->what();
}

TEST(DefaultMesh, AChipsTensorCoresUnderInterpretMode) {
  // A pallas_call without a mesh, checked against a one-TensorCore chip, runs on that chip's one
  // core (not this machine's two), whether the chip comes from the call or is forced.
  const pl::BlockSpec spec({8, 128}, [](int i) { return pl::idx(i, 0); });
  auto make = [&](std::optional<pltpu::InterpretParams> p) {
    return pl::pallas_call([](pltpu::VmemRef<int32_t> o) { o = jnp::full_like(o, 7); },
                           pl::out_shape<int32_t>({16, 128}), pl::grid({2}), pl::out_specs(spec),
                           pltpu::CompilerParams{.dimension_semantics = {PARALLEL}},
                           p.value_or(pltpu::InterpretParams{}));
  };
  pltpu::InterpretParams v5e;
  v5e.chip = "v5e";
  for (int32_t v : make(v5e)()) ASSERT_EQ(v, 7);
  {
    const pltpu::ForceTpuInterpretMode force(v5e);
    EXPECT_EQ(pltpu::TensorCoreMesh("core").num_cores(), 1);
    for (int32_t v : make(std::nullopt)()) ASSERT_EQ(v, 7);
  }
}

TEST(ScalarOutputs, OutTypeOfNoAxes) {
  auto k = pl::kernel(pl::out_type<float>({}), pltpu::TensorCoreMesh("core", 1),
                      pl::scratch_types(pltpu::VMEM<float>({})))(
      [](pltpu::HbmRef<float> o, pltpu::VmemRef<float> v) {
        v = 2.5f;
        pltpu::sync_copy(v, o);
      });
  const Array<float> o = k();
  EXPECT_EQ(o.shape(), Shape{});
  EXPECT_EQ(o[0], 2.5f);
}

TEST(InternalChecks, AFailedCheckIsAnInternalError) {
  auto e = tessera::testing::catch_error<InternalError>(
      [] { TESSERA_CHECK(1 + 1 == 3, "arithmetic is broken"); });
  ASSERT_TRUE(e);
  EXPECT_EQ(e->kind(), ErrorKind::kInternal);
  EXPECT_TRUE(contains(e->what(), "arithmetic is broken")) << e->what();
  EXPECT_TRUE(contains(e->what(), "1 + 1 == 3")) << e->what();
  EXPECT_TRUE(contains(e->what(), "a bug in Tessera")) << e->what();
}

}  // namespace
