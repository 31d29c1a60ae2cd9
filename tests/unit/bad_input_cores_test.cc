// Misuse on a core other than the first: the error a worker core raises reaches the caller and
// names that core and the user's line. The rest of the bad-input suites run their kernels on one
// core (bad_input_array_test.cc, bad_input_grid_test.cc, bad_input_kernel_test.cc); these cases
// start a second core, so the TSan workflow runs them too (tests/CMakeLists.txt).
#include <gtest/gtest.h>

#include <atomic>
#include <cstdint>
#include <limits>
#include <string>

#include "support/expect_error.h"
#include "tessera/tessera.h"

namespace {
using namespace tessera;
using pltpu::ARBITRARY;
using tessera::testing::expect_kernel_error;

constexpr int64_t kMax = std::numeric_limits<int64_t>::max();

TEST(BadInputRefAt2D, InsideAKernelNamesTheCore) {
  std::atomic<int> line{0};  // set by every core that runs the statement
  auto k = pl::kernel(pl::out_type<float>({256}),
                      pltpu::TensorCoreMesh("core", 2))([&](pltpu::HbmRef<float> o) {
    if (lax::axis_index("core") == 1) {
      line = __LINE__ + 1;
      static_cast<void>(o.at(pl::ds(kMax - 1, 3)));
    }
  });
  auto e = tessera::testing::catch_error<KernelError>([&] { k(); });
  ASSERT_TRUE(e);
  EXPECT_EQ(e->kind(), ErrorKind::kOutOfBounds);
  EXPECT_EQ(e->core(), 1);
  EXPECT_EQ(static_cast<int>(e->where().line()), line);
  EXPECT_NE(std::string(e->what()).find("overflows 64 bits"), std::string::npos) << e->what();
}

TEST(BadInputGridSemantics, SplitWithoutAParallelAxis) {
  std::atomic<int> line{0};  // set by every core that runs the statement
  auto k = pl::kernel(pl::out_type<float>({16, 128}),
                      pltpu::TensorCoreMesh("core", 2))([&](pltpu::HbmRef<float> o) {
    const pl::BlockSpec spec({8, 128}, [](int i) { return pl::idx(i, 0); });
    line = __LINE__ + 1;
    pltpu::emit_pipeline([](pltpu::VmemRef<float> ov) { ov = 0.0f; }, pltpu::grid({2}),
                         pl::out_specs(spec), pltpu::core_axis_name("core"),
                         pltpu::dimension_semantics(ARBITRARY))(o);
  });
  expect_kernel_error([&] { k(); }, ErrorKind::kInvalidArgument, "has no PARALLEL axis", line);
}

TEST(BadInputSemaphore, SignalACoreOutsideTheMesh) {
  std::atomic<int> line{0};  // set by every core that runs the statement
  auto k = pl::kernel(pltpu::TensorCoreMesh("core", 2),
                      pl::scratch_types(pltpu::SemaphoreType::REGULAR))([&](pltpu::SemaphoreRef s) {
    if (lax::axis_index("core") == 0) {
      line = __LINE__ + 1;
      pl::semaphore_signal(s, 1, pl::core_index(5));
    }
  });
  expect_kernel_error([&] { k(); }, ErrorKind::kOutOfBounds, "core_index=5 is outside 0..1", line);
}

}  // namespace
