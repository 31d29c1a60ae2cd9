// pl::Ref views: shapes, strides, .at(...) indexers, element access, conversions, and the errors
// for out-of-bounds views.
#include <gtest/gtest.h>

#include <numeric>
#include <type_traits>
#include <vector>

#include "support/expect_error.h"
#include "tessera/tessera.h"

namespace {
using namespace tessera;

std::vector<float> iota_vec(int n) {
  std::vector<float> v(static_cast<size_t>(n));
  std::iota(v.begin(), v.end(), 0.0f);
  return v;
}

TEST(Ref, ContiguousViewHasRowMajorStrides) {
  std::vector<float> buf = iota_vec(24);
  pltpu::VmemRef<float> r(buf.data(), {2, 3, 4});
  EXPECT_EQ(r.rank(), 3);
  EXPECT_EQ(r.size(), 24);
  EXPECT_EQ(r.nbytes(), 96);
  EXPECT_EQ(r.strides()[0], 12);
  EXPECT_EQ(r.strides()[1], 4);
  EXPECT_EQ(r.strides()[2], 1);
  EXPECT_TRUE(r.is_contiguous());
  EXPECT_EQ(r(1, 2, 3), 23.0f);
}

TEST(Ref, AtSlicesSqueezesAndChains) {
  std::vector<float> buf = iota_vec(8 * 16);
  pltpu::VmemRef<float> r(buf.data(), {8, 16});
  auto row = r.at(3);  // squeeze axis 0
  EXPECT_EQ(row.shape(), Shape({16}));
  EXPECT_EQ(row(5), 3 * 16 + 5.0f);
  auto block = r.at(pl::ds(2, 4), pl::ds(8, 8));
  EXPECT_EQ(block.shape(), Shape({4, 8}));
  EXPECT_EQ(block(0, 0), 2 * 16 + 8.0f);
  EXPECT_FALSE(block.is_contiguous());
  auto col = r.at(pl::all, 7);
  EXPECT_EQ(col.shape(), Shape({8}));
  EXPECT_EQ(col(6), 6 * 16 + 7.0f);
  auto strided = r.at(1).at(pl::ds(1, 5, 3));  // elements 1, 4, 7, 10, 13 of row 1
  EXPECT_EQ(strided.shape(), Shape({5}));
  EXPECT_EQ(strided.strides()[0], 3);
  EXPECT_EQ(strided(4), 16 + 13.0f);
  auto chained = r.at(pl::ds(4, 4)).at(pl::ds(1, 2), pl::ds(0, 4, 4));
  EXPECT_EQ(chained.shape(), Shape({2, 4}));
  EXPECT_EQ(chained(1, 3), 6 * 16 + 12.0f);
  auto scalar = r.at(7, 15);
  EXPECT_EQ(scalar.rank(), 0);
  EXPECT_EQ(scalar(), 127.0f);
}

TEST(Ref, ElementWritesGoThroughTheView) {
  std::vector<int32_t> buf(16, 0);
  pltpu::SmemRef<int32_t> r(buf.data(), {4, 4});
  r(2, 1) = 7;
  r.at(pl::all, 3)(0) = 9;
  EXPECT_EQ(buf[2 * 4 + 1], 7);
  EXPECT_EQ(buf[3], 9);
}

TEST(Ref, ConvertsToConstAndToAny) {
  std::vector<float> buf(4, 1.0f);
  pltpu::HbmRef<float> h(buf.data(), {4});
  pltpu::HbmRef<const float> hc = h;
  pltpu::AnyRef<float> a = h;
  pltpu::AnyRef<const float> ac = h;
  EXPECT_EQ(hc.data(), buf.data());
  EXPECT_EQ(a.shape(), Shape({4}));
  EXPECT_EQ(ac.size(), 4);
  static_assert(!std::is_convertible_v<pltpu::HbmRef<const float>, pltpu::HbmRef<float>>);
  static_assert(!std::is_convertible_v<pltpu::AnyRef<float>, pltpu::HbmRef<float>>);
  static_assert(!std::is_convertible_v<pltpu::VmemRef<float>, pltpu::HbmRef<float>>);
}

TEST(RefErrors, SlicePastTheEnd) {
  std::vector<float> buf(256);
  pltpu::VmemRef<float> r(buf.data(), {256});
  const int line = __LINE__ + 1;
  EXPECT_TESSERA_ERROR(r.at(pl::ds(250, 10)), UsageError, ErrorKind::kOutOfBounds,
                       "pl::ds(250, 10)", line);
  const int line_1 = __LINE__ + 1;
  EXPECT_TESSERA_ERROR(r.at(pl::ds(250, 10)), UsageError, ErrorKind::kOutOfBounds, "shape (256,)",
                       line_1);
  const int line_2 = __LINE__ + 1;
  EXPECT_TESSERA_ERROR(r.at(pl::ds(250, 10)), UsageError, ErrorKind::kOutOfBounds,
                       "elements 250..259", line_2);
}

TEST(RefErrors, BadIndexersName) {
  std::vector<float> buf(64);
  pltpu::VmemRef<float> r(buf.data(), {8, 8});
  const int line_3 = __LINE__ + 1;
  EXPECT_TESSERA_ERROR(r.at(8), UsageError, ErrorKind::kOutOfBounds, "index 8 is outside 0..7",
                       line_3);
  const int line_4 = __LINE__ + 1;
  EXPECT_TESSERA_ERROR(r.at(-1), UsageError, ErrorKind::kOutOfBounds, "index -1", line_4);
  const int line_5 = __LINE__ + 1;
  EXPECT_TESSERA_ERROR(r.at(0, 0, 0), UsageError, ErrorKind::kOutOfBounds, "rank 2", line_5);
  const int line_6 = __LINE__ + 1;
  EXPECT_TESSERA_ERROR(r.at(pl::ds(0, 4, 0)), UsageError, ErrorKind::kOutOfBounds,
                       "stride 0 must be at least 1", line_6);
  const int line_7 = __LINE__ + 1;
  EXPECT_TESSERA_ERROR(r.at(pl::ds(-2, 4)), UsageError, ErrorKind::kOutOfBounds,
                       "start -2 is negative", line_7);
  const int line_8 = __LINE__ + 1;
  EXPECT_TESSERA_ERROR(r.at(pl::all, pl::ds(0, 3, 4)), UsageError, ErrorKind::kOutOfBounds,
                       "axis 1", line_8);
  const int line_9 = __LINE__ + 1;
  EXPECT_TESSERA_ERROR(r(8, 0), UsageError, ErrorKind::kOutOfBounds, "index 8 is outside 0..7",
                       line_9);
  const int line_10 = __LINE__ + 1;
  EXPECT_TESSERA_ERROR(r(1), UsageError, ErrorKind::kOutOfBounds, "gives 1 indices", line_10);
}

TEST(Ref, EmptySlicesAreAllowed) {
  std::vector<float> buf(8);
  pltpu::VmemRef<float> r(buf.data(), {8});
  EXPECT_EQ(r.at(pl::ds(8, 0)).size(), 0);
  EXPECT_EQ(r.at(pl::ds(3, 0)).size(), 0);
}

TEST(Ref, ReshapeIsAViewInRowMajorOrder) {
  std::vector<float> buf = iota_vec(8 * 128);
  pltpu::VmemRef<float> r(buf.data(), {8, 128});
  auto flat = r.reshape(-1);
  EXPECT_EQ(flat.shape(), Shape({1024}));
  EXPECT_EQ(flat(300), 300.0f);
  auto split = r.reshape(2, 4, 128);
  EXPECT_EQ(split.shape(), Shape({2, 4, 128}));
  EXPECT_EQ(split(1, 2, 3), (4 + 2) * 128 + 3.0f);
  auto last = r.reshape({8, 2, 64});  // the last dim splits too (a view of row-major memory)
  EXPECT_EQ(last(3, 1, 5), 3 * 128 + 64 + 5.0f);
  split(0, 0, 0) = -1.0f;  // writes through to the buffer
  EXPECT_EQ(buf[0], -1.0f);
  // A window of rows (strided) can split or merge its leading axes, not its rows.
  auto window = pltpu::VmemRef<float>(buf.data(), {8, 128}).at(pl::ds(0, 4), pl::ds(0, 64));
  auto w2 = window.reshape(2, 2, 64);
  EXPECT_EQ(w2(1, 1, 7), 3 * 128 + 7.0f);
  EXPECT_EQ(w2.strides()[0], 256);
  const int line = __LINE__ + 1;
  EXPECT_TESSERA_ERROR(window.reshape(256), UsageError, ErrorKind::kInvalidArgument,
                       "not laid out so that the new shape is a view", line);
  const int line2 = __LINE__ + 1;
  EXPECT_TESSERA_ERROR(r.reshape(3, -1), UsageError, ErrorKind::kInvalidArgument, "do not divide",
                       line2);
  const int line3 = __LINE__ + 1;
  EXPECT_TESSERA_ERROR(r.reshape(8, 100), UsageError, ErrorKind::kInvalidArgument,
                       "a reshape keeps the count", line3);
}

TEST(Ref, BitcastKeepsShapeAndBytes) {
  std::vector<float> buf = {1.0f, -2.0f, 0.5f, 0.0f};
  pltpu::VmemRef<float> r(buf.data(), {2, 2});
  auto u = r.bitcast<uint32_t>();
  static_assert(std::is_same_v<decltype(u), pltpu::VmemRef<uint32_t>>);
  EXPECT_EQ(u.shape(), r.shape());
  EXPECT_EQ(static_cast<uint32_t>(u(0, 0)), 0x3f800000u);
  EXPECT_EQ(static_cast<uint32_t>(u(0, 1)), 0xc0000000u);
  // Through the evaluator: flip the sign bits as integers.
  u = u ^ 0x80000000u;
  EXPECT_EQ(buf[0], -1.0f);
  EXPECT_EQ(buf[1], 2.0f);
  const pltpu::VmemRef<const float> c = r;
  static_assert(std::is_same_v<decltype(c.bitcast<int32_t>()), pltpu::VmemRef<const int32_t>>);
  std::vector<bfloat16> h = {bfloat16(1.0f)};
  EXPECT_EQ(static_cast<uint16_t>(pltpu::VmemRef<bfloat16>(h.data(), {1}).bitcast<uint16_t>()(0)),
            0x3f80);
}

}  // namespace
