// tessera::Array: constructors, storage alignment, element access, copies and moves, and the
// errors for wrong value counts, negative extents and bad indices.
#include "tessera/array.h"

#include <gtest/gtest.h>

#include <cstdint>
#include <cstring>
#include <limits>
#include <sstream>
#include <string>
#include <type_traits>
#include <utility>
#include <vector>

#include "core/large_block_cache.h"
#include "support/expect_error.h"
#include "tessera/error.h"

namespace {
using namespace tessera;

bool aligned64(const void* p) { return reinterpret_cast<uintptr_t>(p) % 64 == 0; }

bool contains(const std::string& s, const std::string& part) {
  return s.find(part) != std::string::npos;
}

TEST(ArrayTest, ZerosOfAShape) {
  Array<float> z(Shape{2, 3});
  EXPECT_EQ(z.shape(), (Shape{2, 3}));
  EXPECT_EQ(z.rank(), 2);
  EXPECT_EQ(z.size(), 6);
  EXPECT_EQ(z.bytes(), 6 * sizeof(float));
  static_assert(Array<float>::dtype() == DType::kFloat32);
  for (float x : z) EXPECT_EQ(x, 0.0f);
  Array<int8_t> zi(Shape{5});
  for (int8_t x : zi) EXPECT_EQ(x, 0);
  Array<bool> zb(Shape{3, 1});
  for (bool x : zb) EXPECT_FALSE(x);
  Array<bfloat16> zh(Shape{4});
  for (bfloat16 x : zh) EXPECT_EQ(x.bits, 0);
  EXPECT_EQ(zh.bytes(), 8u);
}

TEST(ArrayTest, DefaultIsEmptyOneDimensional) {
  Array<float> a;
  EXPECT_EQ(a.shape(), Shape{0});
  EXPECT_EQ(a.size(), 0);
  EXPECT_EQ(a.bytes(), 0u);
  EXPECT_EQ(a.begin(), a.end());
  EXPECT_NE(a.data(), nullptr);  // even empty arrays have (unique, aligned) storage
  EXPECT_TRUE(aligned64(a.data()));
  Array<float> b;
  EXPECT_NE(a.data(), b.data());
}

TEST(ArrayTest, RankZeroHoldsOneElement) {
  Array<float> s(Shape{}, 2.5f);
  EXPECT_EQ(s.rank(), 0);
  EXPECT_EQ(s.size(), 1);
  EXPECT_EQ(s(), 2.5f);
  EXPECT_EQ(s[0], 2.5f);
}

TEST(ArrayTest, Fill) {
  Array<int32_t> f({4}, 7);
  EXPECT_EQ(f.shape(), Shape{4});
  EXPECT_EQ(f.to_vector(), (std::vector<int32_t>{7, 7, 7, 7}));
  Array<bfloat16> h(Shape{2, 2}, bfloat16(1.5f));
  for (bfloat16 x : h) EXPECT_EQ(static_cast<float>(x), 1.5f);
  Array<bool> b(Shape{3}, true);
  for (bool x : b) EXPECT_TRUE(x);
}

TEST(ArrayTest, ValuesWithAShapeAreRowMajor) {
  Array<float> a({2, 3}, {1, 2, 3, 4, 5, 6});
  EXPECT_EQ(a.shape(), (Shape{2, 3}));
  EXPECT_EQ(a(0, 0), 1.0f);
  EXPECT_EQ(a(0, 2), 3.0f);
  EXPECT_EQ(a(1, 0), 4.0f);
  EXPECT_EQ(a(1, 2), 6.0f);
  EXPECT_EQ(a[4], 5.0f);
  EXPECT_EQ(a.to_vector(), (std::vector<float>{1, 2, 3, 4, 5, 6}));
}

TEST(ArrayTest, ValuesFromAVector) {
  const std::vector<int32_t> values{1, 2, 3, 4, 5, 6, 7, 8};
  Array<int32_t> a(Shape{2, 2, 2}, values);
  EXPECT_EQ(a(1, 0, 1), 6);
  EXPECT_EQ(a.to_vector(), values);
  auto v = tessera::array(std::vector<float>{0.5f, 1.5f, 2.5f});
  EXPECT_EQ(v.shape(), Shape{3});
  EXPECT_EQ(v(2), 2.5f);
  auto b = tessera::array(std::vector<bool>{true, false});
  EXPECT_EQ(b.shape(), Shape{2});
  EXPECT_TRUE(b(0));
  EXPECT_FALSE(b(1));
}

TEST(ArrayTest, ArrayFromValues) {
  auto v = tessera::array<float>({0.5f, 1.5f});
  EXPECT_EQ(v.shape(), Shape{2});
  EXPECT_EQ(v(0), 0.5f);
  EXPECT_EQ(v(1), 1.5f);
  auto i = tessera::array<int8_t>({-1, 2, -3});
  EXPECT_EQ(i.shape(), Shape{3});
  EXPECT_EQ(i(2), -3);
  auto e = tessera::array(std::vector<float>{});
  EXPECT_EQ(e.shape(), Shape{0});
}

TEST(ArrayTest, ArrayFromNestedLists) {
  auto m = tessera::array<float>({{1, 2}, {3, 4}, {5, 6}});
  EXPECT_EQ(m.shape(), (Shape{3, 2}));
  EXPECT_EQ(m(0, 1), 2.0f);
  EXPECT_EQ(m(2, 0), 5.0f);
  EXPECT_EQ(m.to_vector(), (std::vector<float>{1, 2, 3, 4, 5, 6}));
  auto b = tessera::array<bool>({{true, false, true}});
  EXPECT_EQ(b.shape(), (Shape{1, 3}));
  EXPECT_FALSE(b(0, 1));
}

TEST(ArrayTest, UninitializedHasTheShape) {
  Array<float> a(detail::Uninitialized{}, Shape{3, 5});
  EXPECT_EQ(a.shape(), (Shape{3, 5}));
  EXPECT_EQ(a.size(), 15);
  EXPECT_TRUE(aligned64(a.data()));
}

TEST(ArrayTest, StorageIs64ByteAligned) {
  for (int64_t n :
       {int64_t{0}, int64_t{1}, int64_t{3}, int64_t{16}, int64_t{17}, int64_t{1000}, int64_t{4095},
        int64_t{(1 << 20) - 1}, int64_t{1 << 20}, int64_t{(1 << 20) + 3}, int64_t{3 << 20}}) {
    SCOPED_TRACE(n);
    Array<float> f(Shape{n});
    EXPECT_TRUE(aligned64(f.data()));
    Array<int8_t> b(Shape{n});
    EXPECT_TRUE(aligned64(b.data()));
    Array<bfloat16> h(Shape{n}, bfloat16(1.0f));
    EXPECT_TRUE(aligned64(h.data()));
  }
}

TEST(ArrayTest, LargeArraysAreZeroedAndWritable) {
  // 4 MiB and more take the page-backed path.
  Array<float> big(Shape{1 << 20, 3});
  ASSERT_GE(big.bytes(), size_t{4} << 20);
  EXPECT_TRUE(aligned64(big.data()));
  for (int64_t i = 0; i < big.size(); i += 4099) EXPECT_EQ(big[i], 0.0f);
  EXPECT_EQ(big[big.size() - 1], 0.0f);
  for (int64_t i = 0; i < big.size(); ++i) big[i] = static_cast<float>(i & 1023);
  EXPECT_EQ(big(1000, 2), static_cast<float>(3002 & 1023));
  Array<float> copy = big;
  EXPECT_EQ(std::memcmp(copy.data(), big.data(), big.bytes()), 0);
}

TEST(ArrayTest, ElementAccessReadsAndWrites) {
  Array<int32_t> a(Shape{2, 3, 4});
  a(1, 2, 3) = 42;
  a(0, 1, 0) = -7;
  EXPECT_EQ(a[23], 42);
  EXPECT_EQ(a[4], -7);
  const Array<int32_t>& c = a;
  EXPECT_EQ(c(1, 2, 3), 42);
  EXPECT_EQ(c(0, 1, 0), -7);
  a(int64_t{1}, 0u, short{2}) = 5;  // any integral index types
  EXPECT_EQ(a[14], 5);
}

TEST(ArrayTest, CopyIsDeep) {
  Array<float> a({3}, {1, 2, 3});
  Array<float> b = a;
  EXPECT_NE(a.data(), b.data());
  EXPECT_TRUE(aligned64(b.data()));
  b(0) = 100;
  EXPECT_EQ(a(0), 1.0f);
  EXPECT_EQ(b(0), 100.0f);
  Array<float> c(Shape{7});
  c = a;
  EXPECT_EQ(c.shape(), Shape{3});
  EXPECT_EQ(c.to_vector(), (std::vector<float>{1, 2, 3}));
  c(2) = -1;
  EXPECT_EQ(a(2), 3.0f);
  const Array<float>& alias = c;
  c = alias;  // self-assignment keeps the contents
  EXPECT_EQ(c(2), -1.0f);
}

TEST(ArrayTest, MoveTransfersTheStorage) {
  Array<float> a({2, 2}, {1, 2, 3, 4});
  const float* p = a.data();
  Array<float> b = std::move(a);
  EXPECT_EQ(b.data(), p);
  EXPECT_EQ(b.shape(), (Shape{2, 2}));
  EXPECT_EQ(b(1, 1), 4.0f);
  Array<float> c;
  c = std::move(b);
  EXPECT_EQ(c.data(), p);
  EXPECT_EQ(c(1, 0), 3.0f);
}

TEST(ArrayTest, ToStringAndStream) {
  Array<float> a({2, 3}, {1, 2, 3, 4, 5, 6});
  EXPECT_EQ(a.to_string(), "[[1. 2. 3.]\n [4. 5. 6.]]");
  std::ostringstream os;
  os << tessera::array<int32_t>({1, -2, 30});
  EXPECT_EQ(os.str(), "[ 1 -2 30]");
}

TEST(ArrayTest, ShapeDtypeStruct) {
  ShapeDtypeStruct<bfloat16> s{Shape{8, 128}};
  EXPECT_EQ(s.shape, (Shape{8, 128}));
  static_assert(ShapeDtypeStruct<bfloat16>::dtype == DType::kBFloat16);
  static_assert(std::is_same_v<ShapeDtypeStruct<int8_t>::value_type, int8_t>);
}

TEST(ArrayTest, HbmAllocateZeroBytesGivesUniquePointers) {
  void* a = detail::hbm_allocate(0, true);
  void* b = detail::hbm_allocate(0, false);
  EXPECT_NE(a, nullptr);
  EXPECT_NE(b, nullptr);
  EXPECT_NE(a, b);
  EXPECT_TRUE(aligned64(a));
  detail::hbm_free(a, 0);
  detail::hbm_free(b, 0);
  detail::hbm_free(nullptr, 100);  // no-op
}

TEST(ArrayTest, HbmAllocateZeroesWhenAsked) {
  for (size_t bytes : {size_t{1}, size_t{63}, size_t{65}, size_t{5000}, size_t{4} << 20}) {
    SCOPED_TRACE(bytes);
    auto* p = static_cast<unsigned char*>(detail::hbm_allocate(bytes, true));
    ASSERT_TRUE(aligned64(p));
    for (size_t i = 0; i < bytes; i += 61) ASSERT_EQ(p[i], 0);
    EXPECT_EQ(p[bytes - 1], 0);
    std::memset(p, 0xAB, bytes);
    detail::hbm_free(p, bytes);
  }
}

// ---- errors ----

TEST(ArrayErrors, WrongValueCountIsAShapeMismatchAtTheCallersLine) {
  const int line = __LINE__ + 1;
  EXPECT_TESSERA_ERROR(Array<float>(Shape{2, 3}, {1.0f, 2.0f, 3.0f, 4.0f}), UsageError,
                       ErrorKind::kShapeMismatch,
                       "4 values were given for shape (2, 3), which holds 6 elements", line);
  const int line2 = __LINE__ + 1;
  EXPECT_TESSERA_ERROR(Array<int32_t>(Shape{2}, std::vector<int32_t>{1, 2, 3}), UsageError,
                       ErrorKind::kShapeMismatch, "3 values were given for shape (2,)", line2);
  const int line3 = __LINE__ + 1;
  EXPECT_TESSERA_ERROR(Array<float>(Shape{}, std::vector<float>{}), UsageError,
                       ErrorKind::kShapeMismatch,
                       "0 values were given for shape (), which holds 1 element", line3);
}

TEST(ArrayErrors, WrongValueCountFieldsAndMessage) {
  auto err = tessera::testing::catch_error<UsageError>([] {
    Array<float> a({2, 3}, {1, 2, 3, 4, 5, 6, 7});  // line checked below
    (void)a;
  });
  const int line = __LINE__ - 3;
  ASSERT_TRUE(err);
  EXPECT_EQ(err->kind(), ErrorKind::kShapeMismatch);
  EXPECT_EQ(static_cast<int>(err->where().line()), line);
  EXPECT_TRUE(contains(err->where().file_name(), "array_test.cc"));
  const std::string what = err->what();
  EXPECT_EQ(what.rfind("tessera: Array at array_test.cc:", 0), 0u) << what;
  EXPECT_TRUE(contains(what, "7 values were given for shape (2, 3), which holds 6 elements"))
      << what;
  EXPECT_TRUE(contains(err->detail(), "7 values")) << err->detail();
  EXPECT_EQ(err->core(), -1);
}

TEST(ArrayErrors, RaggedNestedListsAreAShapeMismatch) {
  const int line = __LINE__ + 1;
  EXPECT_TESSERA_ERROR(tessera::array<float>({{1, 2}, {3}}), UsageError, ErrorKind::kShapeMismatch,
                       "row 1 has 1 value but row 0 has 2", line);
}

TEST(ArrayErrors, NegativeExtentIsAnInvalidArgument) {
  const int line = __LINE__ + 1;
  EXPECT_TESSERA_ERROR(Array<float>(Shape{2, -1}), UsageError, ErrorKind::kInvalidArgument,
                       "shape (2, -1) has a negative extent -1 in axis 1", line);
  const int line2 = __LINE__ + 1;
  EXPECT_TESSERA_ERROR(Array<int32_t>(Shape{-3}, 7), UsageError, ErrorKind::kInvalidArgument,
                       "axis 0", line2);
  const int line3 = __LINE__ + 1;
  EXPECT_TESSERA_ERROR(Array<float>(Shape{-2, 3}, std::vector<float>{}), UsageError,
                       ErrorKind::kInvalidArgument, "shape (-2, 3)", line3);
}

TEST(ArrayErrors, OverflowingShapeIsAnInvalidArgument) {
  const int64_t huge = int64_t{1} << 40;
  const int line = __LINE__ + 1;
  EXPECT_TESSERA_ERROR(Array<float>(Shape{huge, huge}), UsageError, ErrorKind::kInvalidArgument,
                       "holds more elements than an Array can index", line);
}

TEST(ArrayErrors, WrongIndexCountIsOutOfBounds) {
  Array<float> a(Shape{2, 3});
  auto err = tessera::testing::catch_error<UsageError>([&] { (void)a(1); });
  ASSERT_TRUE(err);
  EXPECT_EQ(err->kind(), ErrorKind::kOutOfBounds);
  EXPECT_TRUE(contains(err->what(), "1 index was given for an array of rank 2, shape (2, 3)"))
      << err->what();
  err = tessera::testing::catch_error<UsageError>([&] { (void)a(0, 0, 0); });
  ASSERT_TRUE(err);
  EXPECT_EQ(err->kind(), ErrorKind::kOutOfBounds);
  EXPECT_TRUE(contains(err->what(), "3 indices were given")) << err->what();
  Array<float> s(Shape{});
  err = tessera::testing::catch_error<UsageError>([&] { (void)s(0); });
  ASSERT_TRUE(err);
  EXPECT_TRUE(contains(err->what(), "rank 0, shape ()")) << err->what();
}

TEST(ArrayErrors, IndexOutOfRangeIsOutOfBounds) {
  Array<float> a({2, 3}, {1, 2, 3, 4, 5, 6});
  auto err = tessera::testing::catch_error<UsageError>([&] { (void)a(0, 3); });
  ASSERT_TRUE(err);
  EXPECT_EQ(err->kind(), ErrorKind::kOutOfBounds);
  EXPECT_TRUE(contains(err->what(), "index 3 is out of bounds for axis 1 with size 3"))
      << err->what();
  EXPECT_TRUE(contains(err->what(), "shape (2, 3)")) << err->what();
  err = tessera::testing::catch_error<UsageError>([&] { (void)a(2, 0); });
  ASSERT_TRUE(err);
  EXPECT_TRUE(contains(err->what(), "index 2 is out of bounds for axis 0 with size 2"))
      << err->what();
  err = tessera::testing::catch_error<UsageError>([&] { (void)a(0, -1); });
  ASSERT_TRUE(err);
  EXPECT_EQ(err->kind(), ErrorKind::kOutOfBounds);
  EXPECT_TRUE(contains(err->what(), "negative indices are not supported")) << err->what();
  const Array<float>& c = a;
  err = tessera::testing::catch_error<UsageError>([&] { (void)c(5, 5); });
  ASSERT_TRUE(err);
  EXPECT_EQ(err->kind(), ErrorKind::kOutOfBounds);
  EXPECT_EQ(a.to_vector(), (std::vector<float>{1, 2, 3, 4, 5, 6}));  // nothing was written
}

TEST(ArrayErrors, OutOfMemoryIsCapacityExceeded) {
  const size_t bytes = std::numeric_limits<size_t>::max() / 2;
  auto err = tessera::testing::catch_error<UsageError>([&] {
    void* p = detail::hbm_allocate(bytes, false);
    detail::hbm_free(p, bytes);
  });
  ASSERT_TRUE(err);
  EXPECT_EQ(err->kind(), ErrorKind::kCapacityExceeded);
  EXPECT_TRUE(contains(err->what(), std::to_string(bytes) + " bytes")) << err->what();
}

}  // namespace

namespace {
// Large blocks are cached and reused after free: a zero-initialised Array must still be zeros
// when it reuses a block that held data.
TEST(ArrayStorage, ReusedLargeBlocksAreZeroedWhenAsked) {
  const tessera::Shape big{3, 1 << 20};  // 12 MiB: the large-block path
  const float* first = nullptr;
  {
    tessera::Array<float> a(big, 7.0f);
    first = a.data();
  }
  tessera::Array<float> b(big);
  for (int64_t i = 0; i < b.size(); i += 4099) ASSERT_EQ(b[i], 0.0f) << i;
  EXPECT_EQ(b[b.size() - 1], 0.0f);
  EXPECT_EQ(reinterpret_cast<uintptr_t>(b.data()) % 64, 0u);
  (void)first;
}
}  // namespace

namespace {
// Host element access reports the caller's line, like every other Tessera call.
// The cache of freed large blocks (core/large_block_cache.h): a block freed when the cache is
// full pushes out the blocks freed longest ago, so that a program that moves on to another size
// reuses that size's blocks; take() finds the most recent block of the exact size.
std::vector<std::pair<void*, size_t>>* g_released = nullptr;
void record_release(void* p, size_t bytes) noexcept { g_released->emplace_back(p, bytes); }

TEST(ArrayStorage, FreedBlocksOfANewSizePushOutTheOldestOnes) {
  std::vector<std::pair<void*, size_t>> released;
  g_released = &released;
  char mem[8];  // stand-ins for mapped blocks: the cache only keeps and compares the pointers
  detail::LargeBlockCache cache(/*cap_bytes=*/1000, record_release);
  cache.give(&mem[0], 400);
  cache.give(&mem[1], 400);
  EXPECT_EQ(cache.cached_bytes(), 800u);
  EXPECT_TRUE(released.empty());
  // A 300-byte block does not fit beside both: the older 400-byte block goes.
  cache.give(&mem[2], 300);
  ASSERT_EQ(released.size(), 1u);
  EXPECT_EQ(released[0].first, &mem[0]);
  EXPECT_EQ(cache.cached_bytes(), 700u);
  // The new size is found again (it used to be refused, and every later allocation of it
  // mapped fresh pages); a size with no block gives null.
  EXPECT_EQ(cache.take(300), &mem[2]);
  EXPECT_EQ(cache.take(300), nullptr);
  EXPECT_EQ(cache.take(400), &mem[1]);
  EXPECT_EQ(cache.cached_bytes(), 0u);
  // The most recently given block of a size comes back first.
  cache.give(&mem[3], 100);
  cache.give(&mem[4], 100);
  EXPECT_EQ(cache.take(100), &mem[4]);
  // A block larger than the whole cap is released at once, and nothing else is.
  cache.give(&mem[5], 1001);
  ASSERT_EQ(released.size(), 2u);
  EXPECT_EQ(released[1].first, &mem[5]);
  EXPECT_EQ(cache.take(100), &mem[3]);
  g_released = nullptr;
}

TEST(ArrayErrors, ElementAccessErrorsCarryTheCallersLine) {
  using namespace tessera;
  Array<float> a(Shape{2, 3});
  const int line = __LINE__ + 1;
  EXPECT_TESSERA_ERROR((void)a(1, 3), UsageError, ErrorKind::kOutOfBounds, "axis 1", line);
  const Array<int32_t> c(Shape{4}, 1);
  const int line2 = __LINE__ + 1;
  EXPECT_TESSERA_ERROR((void)c(0, 0), UsageError, ErrorKind::kOutOfBounds, "2 indices", line2);
  EXPECT_EQ(c(3), 1);
}
}  // namespace
