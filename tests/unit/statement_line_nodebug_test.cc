// The fallback of statement_line_test.cc: this file is compiled without line tables (-g0,
// tests/CMakeLists.txt), so an error inside an operator statement names the kernel's line and
// says why, instead of a wrong line.
#include <gtest/gtest.h>

#include <source_location>
#include <string>

#include "support/expect_error.h"
#include "tessera/tessera.h"

namespace {
using namespace tessera;

TEST(StatementLineNoDebugInfo, FallsBackToTheKernelAndSaysSo) {
  int kernel_line = 0;
  auto e = tessera::testing::catch_error<KernelError>([&] {
    kernel_line = __LINE__ + 2;  // the kernel is located at its `(body)` call
    pl::kernel(pl::out_type<float>({8, 128}), pltpu::TensorCoreMesh("core", 1),
               pl::scratch_types(pltpu::VMEM<float>({8, 128}), pltpu::VMEM<float>({8, 64})))(
        [](pltpu::HbmRef<float> o, pltpu::VmemRef<float> a, pltpu::VmemRef<float> b) {
          a = 1.0f;
          b = 2.0f;
          a = a + b;
          pltpu::sync_copy(a, o);
        })();
  });
  ASSERT_TRUE(e);
  EXPECT_EQ(e->kind(), ErrorKind::kShapeMismatch) << e->what();
  EXPECT_EQ(static_cast<int>(e->where().line()), kernel_line) << e->what();
  EXPECT_NE(std::string(e->what()).find("line tables of a build with -g"), std::string::npos)
      << e->what();
}

}  // namespace
