// The single-device examples with arguments they cannot take: a UsageError at the caller's line,
// never a crash (the pipelined add's block of 0 divided by zero) or a silent answer; and the
// pipelined add with blocks that divide neither side, the exact sum.
#include <gtest/gtest.h>

#include <string>
#include <utility>

#include "grid_examples.h"
#include "pipelined_add.h"
#include "quickstart.h"
#include "support/expect_error.h"

namespace tessera {
namespace {

TEST(PipelinedAddArguments, MistakesRaiseAtTheCallersLine) {
  const Array<float> x({256, 256}, 1.0f);
  // clang-format off
  int line = __LINE__ + 1;
  EXPECT_TESSERA_ERROR((void)examples::pipelined_add(x, Array<float>({256, 128}, 2.0f), 2), UsageError, ErrorKind::kInvalidArgument, "x is (256, 256) and y (256, 128)", line);
  line = __LINE__ + 1;
  EXPECT_TESSERA_ERROR((void)examples::pipelined_add(Array<float>({300}), Array<float>({300}), 2), UsageError, ErrorKind::kInvalidArgument, "two 2-D arrays of one shape", line);
  line = __LINE__ + 1;
  EXPECT_TESSERA_ERROR((void)examples::pipelined_add(x, x, 2, 0, 128), UsageError, ErrorKind::kInvalidArgument, "the block (0, 128) has a size below 1", line);
  line = __LINE__ + 1;
  EXPECT_TESSERA_ERROR((void)examples::pipelined_add(x, x, 2, 8, -128), UsageError, ErrorKind::kInvalidArgument, "the block (8, -128)", line);
  line = __LINE__ + 1;
  EXPECT_TESSERA_ERROR((void)examples::pipelined_add(x, x, 0), UsageError, ErrorKind::kInvalidArgument, "num_cores=0", line);
  line = __LINE__ + 1;
  EXPECT_TESSERA_ERROR((void)examples::pipelined_add(x, x, 2, int64_t{1} << 62, 8), UsageError, ErrorKind::kInvalidArgument, "more bytes than a 64-bit count holds", line);
  // clang-format on
}

TEST(PipelinedAddArguments, AnEmptyAddIsAnEmptyArray) {
  EXPECT_EQ(examples::pipelined_add(Array<float>({0, 128}), Array<float>({0, 128}), 2).shape(),
            Shape({0, 128}));
}

TEST(PipelinedAddArguments, BlocksThatDivideNeitherSide) {
  Array<float> x({200, 300});
  Array<float> y({200, 300});
  for (int64_t i = 0; i < x.size(); ++i) {
    x[i] = static_cast<float>(i % 97);
    y[i] = static_cast<float>(i % 13) - 6.0f;
  }
  for (const auto& [bm, bn] : {std::pair<int64_t, int64_t>{128, 128}, {64, 256}}) {
    const Array<float> o = examples::pipelined_add(x, y, 2, bm, bn);
    for (int64_t i = 0; i < o.size(); ++i)
      ASSERT_EQ(o[i], x[i] + y[i]) << bm << " x " << bn << ", " << i;
  }
}

TEST(QuickstartArguments, MistakesRaiseAtTheCallersLine) {
  // clang-format off
  int line = __LINE__ + 1;
  EXPECT_TESSERA_ERROR((void)examples::iota(0), UsageError, ErrorKind::kInvalidArgument, "num_cores=0 is below 1", line);
  line = __LINE__ + 1;
  EXPECT_TESSERA_ERROR((void)examples::iota(300), UsageError, ErrorKind::kInvalidArgument, "num_cores=300", line);
  line = __LINE__ + 1;
  EXPECT_TESSERA_ERROR((void)examples::hbm_vmem(Array<float>({128}, 1.0f)), UsageError, ErrorKind::kInvalidArgument, "x is (128,)", line);
  line = __LINE__ + 1;
  EXPECT_TESSERA_ERROR((void)examples::hbm_vmem(Array<float>({0, 128})), UsageError, ErrorKind::kInvalidArgument, "at least one row", line);
  // clang-format on
}

}  // namespace
}  // namespace tessera
