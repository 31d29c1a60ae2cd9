// Shapes: Python tuple printing, sizes, ranks beyond the inline storage, row-major strides, and
// the SmallVec they are built on.
#include "tessera/shape.h"

#include <gtest/gtest.h>

#include <cstdint>
#include <utility>
#include <vector>

#include "tessera/detail/small_vec.h"

namespace {
using tessera::Shape;
using tessera::detail::SmallVec;

std::vector<int64_t> to_vec(const SmallVec& v) { return std::vector<int64_t>(v.begin(), v.end()); }

TEST(ShapeTest, ToStringIsPythonTupleNotation) {
  EXPECT_EQ(Shape{}.to_string(), "()");
  EXPECT_EQ(Shape{128}.to_string(), "(128,)");
  EXPECT_EQ((Shape{8, 128}).to_string(), "(8, 128)");
  EXPECT_EQ((Shape{2, 3, 4}).to_string(), "(2, 3, 4)");
  EXPECT_EQ(Shape{0}.to_string(), "(0,)");
  EXPECT_EQ((Shape{1, 0}).to_string(), "(1, 0)");
  EXPECT_EQ((Shape{int64_t{1} << 40, 1}).to_string(), "(1099511627776, 1)");
}

TEST(ShapeTest, RankSizeAndIndexing) {
  const Shape s{8, 128};
  EXPECT_EQ(s.rank(), 2);
  EXPECT_EQ(s[0], 8);
  EXPECT_EQ(s[1], 128);
  EXPECT_EQ(s.size(), 1024);
  EXPECT_EQ((Shape{3, 0, 5}).size(), 0);
  EXPECT_EQ(Shape{7}.size(), 7);
  Shape t{2, 3};
  t[1] = 5;
  EXPECT_EQ(t, (Shape{2, 5}));
  int64_t product = 1;
  for (int64_t d : s) product *= d;
  EXPECT_EQ(product, 1024);
}

TEST(ShapeTest, RankZeroIsAScalar) {
  const Shape s;
  EXPECT_EQ(s.rank(), 0);
  EXPECT_EQ(s.size(), 1);
  EXPECT_EQ(s.begin(), s.end());
  EXPECT_EQ(s, Shape{});
}

TEST(ShapeTest, RankEightSpillsTheInlineStorage) {
  static_assert(SmallVec::kInline < 8);
  const Shape s{1, 2, 3, 4, 5, 6, 7, 8};
  EXPECT_EQ(s.rank(), 8);
  EXPECT_EQ(s.size(), 40320);
  for (int i = 0; i < 8; ++i) EXPECT_EQ(s[i], i + 1);
  EXPECT_EQ(s.to_string(), "(1, 2, 3, 4, 5, 6, 7, 8)");
  Shape copy = s;
  EXPECT_EQ(copy, s);
  copy[7] = 9;
  EXPECT_NE(copy, s);
  EXPECT_EQ(s[7], 8);  // the copy is deep
  Shape moved = std::move(copy);
  EXPECT_EQ(moved.rank(), 8);
  EXPECT_EQ(moved[7], 9);
}

TEST(ShapeTest, EqualityComparesRankAndExtents) {
  EXPECT_EQ((Shape{2, 3}), (Shape{2, 3}));
  EXPECT_NE((Shape{2, 3}), (Shape{3, 2}));
  EXPECT_NE((Shape{2, 3}), (Shape{2, 3, 1}));
  EXPECT_NE(Shape{1}, Shape{});
}

TEST(ShapeTest, ConstructsFromVectorAndSmallVec) {
  const Shape a(std::vector<int64_t>{4, 5, 6});
  EXPECT_EQ(a, (Shape{4, 5, 6}));
  const Shape b(SmallVec{7, 8});
  EXPECT_EQ(b, (Shape{7, 8}));
  EXPECT_EQ(to_vec(b.dims()), (std::vector<int64_t>{7, 8}));
  const Shape c(std::vector<int64_t>{1, 1, 1, 1, 1, 1, 1, 1, 1, 2});
  EXPECT_EQ(c.rank(), 10);
  EXPECT_EQ(c.size(), 2);
}

TEST(ShapeTest, RowMajorStrides) {
  EXPECT_EQ(to_vec(tessera::row_major_strides(Shape{8, 128})), (std::vector<int64_t>{128, 1}));
  EXPECT_EQ(to_vec(tessera::row_major_strides(Shape{2, 3, 4})), (std::vector<int64_t>{12, 4, 1}));
  EXPECT_EQ(to_vec(tessera::row_major_strides(Shape{5})), (std::vector<int64_t>{1}));
  EXPECT_TRUE(tessera::row_major_strides(Shape{}).empty());
  EXPECT_EQ(to_vec(tessera::row_major_strides(Shape{2, 0, 3})), (std::vector<int64_t>{0, 3, 1}));
  EXPECT_EQ(to_vec(tessera::row_major_strides(Shape{2, 2, 2, 2, 2, 2, 2, 2})),
            (std::vector<int64_t>{128, 64, 32, 16, 8, 4, 2, 1}));
}

TEST(ShapeSmallVec, InlineBasics) {
  SmallVec v{1, 2, 3};
  EXPECT_EQ(v.size(), 3);
  EXPECT_FALSE(v.empty());
  EXPECT_EQ(v.back(), 3);
  v.push_back(4);
  v.insert_front(0);
  EXPECT_EQ(to_vec(v), (std::vector<int64_t>{0, 1, 2, 3, 4}));
  v.erase(2);
  EXPECT_EQ(to_vec(v), (std::vector<int64_t>{0, 1, 3, 4}));
  v.resize(6, 9);
  EXPECT_EQ(to_vec(v), (std::vector<int64_t>{0, 1, 3, 4, 9, 9}));
  EXPECT_TRUE(SmallVec{}.empty());
  EXPECT_EQ(to_vec(SmallVec(3, 7)), (std::vector<int64_t>{7, 7, 7}));
}

TEST(ShapeSmallVec, PushBackSpillsToTheHeap) {
  SmallVec v;
  for (int64_t i = 0; i < 20; ++i) v.push_back(i * i);
  ASSERT_EQ(v.size(), 20);
  for (int i = 0; i < 20; ++i) EXPECT_EQ(v[i], int64_t{i} * i);
  v.insert_front(-1);
  EXPECT_EQ(v[0], -1);
  EXPECT_EQ(v[20], 361);
  EXPECT_EQ(v.size(), 21);
}

TEST(ShapeSmallVec, CopyOfASpilledVectorIsDeep) {
  SmallVec a{1, 2, 3, 4, 5, 6, 7, 8};
  SmallVec b(a);
  EXPECT_EQ(a, b);
  EXPECT_NE(a.data(), b.data());
  b[0] = 100;
  EXPECT_EQ(a[0], 1);
  SmallVec c;
  c = a;
  EXPECT_EQ(c, a);
  c[7] = -8;
  EXPECT_EQ(a[7], 8);
  const SmallVec& alias = c;
  c = alias;  // self-assignment keeps the contents
  EXPECT_EQ(c[7], -8);
}

TEST(ShapeSmallVec, MoveOfASpilledVectorStealsTheBuffer) {
  SmallVec a{1, 2, 3, 4, 5, 6, 7, 8};
  const int64_t* buffer = a.data();
  SmallVec b(std::move(a));
  EXPECT_EQ(b.data(), buffer);
  EXPECT_EQ(to_vec(b), (std::vector<int64_t>{1, 2, 3, 4, 5, 6, 7, 8}));
  EXPECT_EQ(a.size(), 0);  // NOLINT(bugprone-use-after-move): moved-from is empty
  a.push_back(42);         // and still usable
  EXPECT_EQ(to_vec(a), (std::vector<int64_t>{42}));
  SmallVec c{9};
  c = std::move(b);
  EXPECT_EQ(c.data(), buffer);
  EXPECT_EQ(c.size(), 8);
}

TEST(ShapeSmallVec, MoveOfAnInlineVectorCopies) {
  SmallVec a{1, 2};
  SmallVec b(std::move(a));
  EXPECT_EQ(to_vec(b), (std::vector<int64_t>{1, 2}));
  SmallVec spilled{1, 2, 3, 4, 5, 6, 7, 8, 9};
  spilled = SmallVec{5, 6};  // inline over spilled
  EXPECT_EQ(to_vec(spilled), (std::vector<int64_t>{5, 6}));
  SmallVec small{1};
  small = SmallVec{1, 2, 3, 4, 5, 6, 7, 8, 9};  // spilled over inline
  EXPECT_EQ(small.size(), 9);
  EXPECT_EQ(small.back(), 9);
}

TEST(ShapeSmallVec, Equality) {
  EXPECT_EQ((SmallVec{1, 2}), (SmallVec{1, 2}));
  EXPECT_FALSE((SmallVec{1, 2}) == (SmallVec{1, 2, 3}));
  EXPECT_FALSE((SmallVec{1, 2}) == (SmallVec{2, 1}));
  EXPECT_EQ((SmallVec{1, 2, 3, 4, 5, 6, 7}), (SmallVec{1, 2, 3, 4, 5, 6, 7}));
  const std::vector<int64_t> src{3, 1, 4, 1, 5, 9, 2, 6};
  EXPECT_EQ(to_vec(SmallVec(src.begin(), src.end())), src);
}

}  // namespace
