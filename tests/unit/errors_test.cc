// The error hierarchy: kinds, fields and the message format.
#include <gtest/gtest.h>

#include <string>

#include "tessera/error.h"

namespace {
using namespace tessera;

TEST(Errors, KindsHaveNames) {
  EXPECT_STREQ(to_string(ErrorKind::kOutOfBounds), "out of bounds");
  EXPECT_STREQ(to_string(ErrorKind::kShapeMismatch), "shape mismatch");
  EXPECT_STREQ(to_string(ErrorKind::kCapacityExceeded), "capacity exceeded");
  EXPECT_STREQ(to_string(ErrorKind::kUnknownAxis), "unknown axis");
  EXPECT_STREQ(to_string(ErrorKind::kInternal), "internal error");
  EXPECT_STREQ(to_string(ErrorKind::kRace), "data race");
  EXPECT_STREQ(to_string(ErrorKind::kDeadlock), "deadlock");
  EXPECT_STREQ(to_string(ErrorKind::kUninitialized), "read of uninitialized memory");
}

TEST(Errors, HierarchyAndFields) {
  const auto here = std::source_location::current();
  KernelError e(ErrorKind::kOutOfBounds, "tessera: op at x.cc:3 (kernel 'k', core 1): bad", here, 1,
                {2, 0}, "k");
  const Error& base = e;
  const std::runtime_error& std_base = e;
  EXPECT_EQ(base.kind(), ErrorKind::kOutOfBounds);
  EXPECT_EQ(base.core(), 1);
  EXPECT_EQ(base.grid_step(), (std::vector<int64_t>{2, 0}));
  EXPECT_EQ(base.kernel_name(), "k");
  EXPECT_EQ(base.where().line(), here.line());
  EXPECT_EQ(base.detail(), "bad");
  EXPECT_NE(std::string(std_base.what()).find("tessera:"), std::string::npos);
  UsageError u(ErrorKind::kInvalidArgument, "tessera: x", here);
  EXPECT_EQ(u.core(), -1);
  EXPECT_TRUE(u.grid_step().empty());
  InternalError i(ErrorKind::kInternal, "tessera: internal error: y", here);
  EXPECT_EQ(i.kind(), ErrorKind::kInternal);
}

}  // namespace
