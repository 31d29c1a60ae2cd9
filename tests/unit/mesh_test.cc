// TensorCoreMesh and lax::axis_index.
#include <gtest/gtest.h>

#include <atomic>
#include <vector>

#include "support/expect_error.h"
#include "tessera/tessera.h"

namespace {
using namespace tessera;

TEST(Mesh, DefaultsToTheMachine) {
  pltpu::TensorCoreMesh m("core");
  EXPECT_EQ(m.axis_name(), "core");
  EXPECT_GE(m.num_cores(), 1);
  EXPECT_EQ(m.num_cores(), pltpu::get_tpu_info().num_cores);
  EXPECT_EQ(pltpu::TensorCoreMesh("x", 3).num_cores(), 3);
}

TEST(MeshErrors, BadCoreCountsAndNames) {
  const int line_1 = __LINE__ + 1;
  EXPECT_TESSERA_ERROR(pltpu::TensorCoreMesh("core", 0), UsageError, ErrorKind::kInvalidArgument,
                       "num_cores=0 is outside 1..256", line_1);
  const int line_2 = __LINE__ + 1;
  EXPECT_TESSERA_ERROR(pltpu::TensorCoreMesh("core", 257), UsageError, ErrorKind::kInvalidArgument,
                       "num_cores=257", line_2);
  const int line_3 = __LINE__ + 1;
  EXPECT_TESSERA_ERROR(pltpu::TensorCoreMesh(""), UsageError, ErrorKind::kInvalidArgument,
                       "axis name is empty", line_3);
}

TEST(AxisIndex, EachCoreSeesItsIndex) {
  for (int n : {1, 2, 3, 4, 7}) {
    std::vector<std::atomic<int>> seen(static_cast<size_t>(n));
    auto k = pl::kernel(pltpu::TensorCoreMesh("core", n))(
        [&] { seen[static_cast<size_t>(lax::axis_index("core"))].fetch_add(1); });
    k();
    for (int c = 0; c < n; ++c) EXPECT_EQ(seen[static_cast<size_t>(c)].load(), 1) << n << " " << c;
  }
}

TEST(AxisIndexErrors, OutsideAKernel) {
  const int line_4 = __LINE__ + 1;
  EXPECT_TESSERA_ERROR(lax::axis_index("core"), UsageError, ErrorKind::kOutsideKernel,
                       "outside a kernel body", line_4);
}

TEST(AxisIndexErrors, UnknownAxisNamesTheMeshAxis) {
  int line = 0;  // written by core 1 only, read after the launch
  auto k = pl::kernel(pltpu::TensorCoreMesh("core", 2))([&] {
    if (lax::axis_index("core") == 1) {
      line = __LINE__ + 1;
      lax::axis_index("cores");
    }
  });
  auto err = tessera::testing::catch_error<KernelError>([&] { k(); });
  ASSERT_TRUE(err);
  EXPECT_EQ(err->kind(), ErrorKind::kUnknownAxis);
  EXPECT_EQ(static_cast<int>(err->where().line()), line);
  EXPECT_NE(std::string(err->what()).find("no axis \"cores\""), std::string::npos) << err->what();
  EXPECT_NE(std::string(err->what()).find("only axis is \"core\""), std::string::npos);
  EXPECT_EQ(err->core(), 1);
}

TEST(Mesh, RunOnFirstCore) {
  std::atomic<int> calls{0};
  std::atomic<int> core{-1};
  auto k = pl::kernel(pltpu::TensorCoreMesh("core", 3))([&] {
    pltpu::run_on_first_core("core", [&] {
      calls++;
      core = lax::axis_index("core");
    });
  });
  k();
  EXPECT_EQ(calls.load(), 1);
  EXPECT_EQ(core.load(), 0);
}

}  // namespace
