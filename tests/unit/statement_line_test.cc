// Errors raised inside C++ operators and assignments (`o = a + b`, `v += w`, `o = x`), which have
// no default argument to capture a std::source_location with, name the statement's own line:
// Ref's assignments record their return address and Tessera reads the line back from the line
// tables (src/core/symbolize.cc). This test binary is built with -g for that
// (tests/CMakeLists.txt); statement_line_nodebug_test.cc checks the fallback without it.
#include <gtest/gtest.h>

#include <string>

#include "support/checked_support.h"
#include "tessera/tessera.h"

namespace {
using namespace tessera;
using namespace tessera::checked_testing;

bool contains(const std::string& s, const std::string& part) {
  return s.find(part) != std::string::npos;
}

// A broadcast that fails while the statement's operands are built, before any assignment.
TEST(StatementLine, ShapeMismatchInABinaryOperator) {
  auto body = [](pltpu::HbmRef<float> o, pltpu::VmemRef<float> a, pltpu::VmemRef<float> b) {
    a = 1.0f;
    b = 2.0f;
    // clang-format off
    MARK_LINE; a = a + b;
    // clang-format on
    pltpu::sync_copy(a, o);
  };
  const auto scratch = pl::scratch_types(pltpu::VMEM<float>({8, 128}), pltpu::VMEM<float>({8, 64}));
  for (const bool check : {false, true}) {
    auto e = tessera::testing::catch_error<KernelError>([&] {
      const pltpu::TensorCoreMesh mesh("core", 1);
      if (check)
        pl::kernel(pl::out_type<float>({8, 128}), mesh, scratch, checked())(body)();
      else
        pl::kernel(pl::out_type<float>({8, 128}), mesh, scratch)(body)();
    });
    ASSERT_TRUE(e);
    EXPECT_EQ(e->kind(), ErrorKind::kShapeMismatch) << e->what();
    EXPECT_EQ(static_cast<int>(e->where().line()), g_line.load()) << e->what();
    EXPECT_TRUE(contains(e->where().file_name(), "statement_line_test.cc")) << e->what();
    EXPECT_TRUE(contains(e->what(), "statement_line_test.cc:" + std::to_string(g_line.load())))
        << e->what();
    EXPECT_FALSE(contains(e->what(), "line tables")) << e->what();
  }
}

// A compound assignment whose operand does not broadcast.
TEST(StatementLine, CompoundAssignment) {
  auto e = tessera::testing::catch_error<KernelError>([] {
    pl::kernel(pl::out_type<float>({8, 128}), pltpu::TensorCoreMesh("core", 1),
               pl::scratch_types(pltpu::VMEM<float>({8, 128}), pltpu::VMEM<float>({16, 128})))(
        [](pltpu::HbmRef<float> o, pltpu::VmemRef<float> a, pltpu::VmemRef<float> b) {
          a = 1.0f;
          b = 1.0f;
          // clang-format off
          MARK_LINE; a += b;
          // clang-format on
          pltpu::sync_copy(a, o);
        })();
  });
  ASSERT_TRUE(e);
  EXPECT_EQ(e->kind(), ErrorKind::kShapeMismatch) << e->what();
  EXPECT_EQ(static_cast<int>(e->where().line()), g_line.load()) << e->what();
}

// Checked mode: garbage computed by a plain operator statement reaches the output; the report
// names that statement, not the kernel, and the clean twin passes.
Array<float> garbage_through_operators(bool write_first) {
  return pl::kernel(pl::out_type<float>({8, 128}), pltpu::TensorCoreMesh("core", 1),
                    pl::scratch_types(pltpu::VMEM<float>({8, 128}), pltpu::VMEM<float>({8, 128})),
                    checked())(
      [write_first](pltpu::HbmRef<float> o, pltpu::VmemRef<float> x, pltpu::VmemRef<float> y) {
        if (write_first) x = 2.0f;
        // clang-format off
        MARK_LINE; y = x * 2.0f + 1.0f;
        // clang-format on
        pltpu::sync_copy(y, o);
      })();
}

TEST(StatementLine, CheckedOriginOfGarbageIsTheStatement) {
  const Array<float> ok = garbage_through_operators(true);
  for (float v : ok) ASSERT_EQ(v, 5.0f);
  auto e = tessera::testing::catch_error<KernelError>([] { garbage_through_operators(false); });
  ASSERT_TRUE(e);
  maybe_print(*e);
  EXPECT_EQ(e->kind(), ErrorKind::kUninitialized) << e->what();
  EXPECT_EQ(static_cast<int>(e->where().line()), g_line.load()) << e->what();
  EXPECT_TRUE(contains(e->what(), "statement_line_test.cc:" + std::to_string(g_line.load())))
      << e->what();
}

// Checked mode: a Ref-to-Ref copy statement that reads a window a DMA is still writing.
TEST(StatementLine, CheckedRaceInARefCopy) {
  auto e = tessera::testing::catch_error<KernelError>([] {
    pl::kernel(pl::out_type<float>({8, 128}), pltpu::TensorCoreMesh("core", 1),
               pl::scratch_types(pltpu::VMEM<float>({8, 128}), pltpu::VMEM<float>({8, 128}),
                                 pltpu::SemaphoreType::DMA),
               checked(Mode::eager))([](pltpu::HbmRef<float> o, pltpu::VmemRef<float> x,
                                        pltpu::VmemRef<float> y, pltpu::DmaSemaphoreRef sem) {
      y = 1.0f;
      pltpu::sync_copy(y, o);
      auto copy = pltpu::make_async_copy(o, x, sem);
      copy.start();
      // clang-format off
          MARK_LINE; y = x;
      // clang-format on
      copy.wait();
    })();
  });
  ASSERT_TRUE(e);
  maybe_print(*e);
  EXPECT_EQ(e->kind(), ErrorKind::kRace) << e->what();
  EXPECT_EQ(static_cast<int>(e->where().line()), g_line.load()) << e->what();
}

// The second of two statements fails: the line is that statement's, not the first one's.
TEST(StatementLine, TheFailingStatementOfSeveral) {
  auto e = tessera::testing::catch_error<KernelError>([] {
    pl::kernel(pl::out_type<float>({8, 128}), pltpu::TensorCoreMesh("core", 1),
               pl::scratch_types(pltpu::VMEM<float>({8, 128}), pltpu::VMEM<float>({4, 128})))(
        [](pltpu::HbmRef<float> o, pltpu::VmemRef<float> a, pltpu::VmemRef<float> b) {
          a = 1.0f;
          b = a.at(pl::ds(0, 4), pl::all) * 3.0f;
          // clang-format off
          MARK_LINE; a = b - 1.0f;
          // clang-format on
          pltpu::sync_copy(a, o);
        })();
  });
  ASSERT_TRUE(e);
  EXPECT_EQ(e->kind(), ErrorKind::kShapeMismatch) << e->what();
  EXPECT_EQ(static_cast<int>(e->where().line()), g_line.load()) << e->what();
}

}  // namespace
