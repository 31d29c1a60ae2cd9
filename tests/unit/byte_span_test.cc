// byte_span (src/core/byte_span.h): the bytes a strided view covers, which the pipeline's,
// the evaluator's and the dots' overlap checks and the transports' placement rely on.
#include "core/byte_span.h"

#include <gtest/gtest.h>

#include <cstddef>

namespace {
using tessera::Shape;
using tessera::detail::byte_span;
using tessera::detail::ByteSpan;
using tessera::detail::SmallVec;

alignas(64) std::byte g_buf[4096];

TEST(ByteSpan, RowMajorStridedAndBroadcastViews) {
  const std::byte* base = g_buf + 1024;
  // A contiguous (4, 8) float32 view: 32 elements.
  ByteSpan s = byte_span(base, Shape{4, 8}, SmallVec{8, 1}, 4);
  EXPECT_EQ(s.first, base);
  EXPECT_EQ(s.bytes(), 32 * 4);
  // Rows 16 elements apart, 8 used: the last row ends 3 * 16 + 8 elements in.
  s = byte_span(base, Shape{4, 8}, SmallVec{16, 1}, 4);
  EXPECT_EQ(s.first, base);
  EXPECT_EQ(s.last, base + (3 * 16 + 8) * 4);
  // A broadcast axis (stride 0) adds nothing; a column (stride 8) covers 3 * 8 + 1 elements.
  s = byte_span(base, Shape{5, 4}, SmallVec{0, 8}, 2);
  EXPECT_EQ(s.last, base + (3 * 8 + 1) * 2);
  // Rank 0: one element.
  s = byte_span(base, Shape{}, SmallVec{}, 8);
  EXPECT_EQ(s.first, base);
  EXPECT_EQ(s.bytes(), 8);
  EXPECT_FALSE(s.empty());
}

TEST(ByteSpan, NegativeStridesReachBackAndEmptyViewsCoverNothing) {
  const std::byte* base = g_buf + 2048;
  // Rows walked backwards: the first byte is 3 rows of 10 elements before the data.
  ByteSpan s = byte_span(base, Shape{4, 6}, SmallVec{-10, 1}, 4);
  EXPECT_EQ(s.first, base - 30 * 4);
  EXPECT_EQ(s.last, base + 6 * 4);
  s = byte_span(base, Shape{3, 0, 2}, SmallVec{4, 2, 1}, 4);
  EXPECT_TRUE(s.empty());
  EXPECT_EQ(s.first, base);
  EXPECT_EQ(s.bytes(), 0);
}

}  // namespace
