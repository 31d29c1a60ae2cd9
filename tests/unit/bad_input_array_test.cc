// Misuse of shapes, arrays, refs and element access: every bad number is a UsageError (outside a
// kernel) or KernelError (inside one) that names the value and the rule, at the test's line.
#include <gtest/gtest.h>

#include <atomic>
#include <cstdint>
#include <functional>
#include <limits>
#include <string>
#include <vector>

#include "support/expect_error.h"
#include "tessera/tessera.h"

namespace {
using namespace tessera;

constexpr int64_t kMax = std::numeric_limits<int64_t>::max();
constexpr int64_t kMin = std::numeric_limits<int64_t>::min();
constexpr int64_t k2e40 = int64_t{1} << 40;

// ---------------------------------------------------------------------------------------------
// Bad shapes, given to every call that takes one.

struct BadShape {
  const char* name;
  Shape shape;
  const char* says;
};

Shape ones(int rank) { return Shape(std::vector<int64_t>(static_cast<size_t>(rank), 1)); }

const BadShape kBadShapes[] = {
    {"Negative", {-1}, "has a negative extent -1 in axis 0"},
    {"NegativeSecondAxis", {4, -3}, "has a negative extent -3 in axis 1"},
    {"MostNegative", {kMin}, "has a negative extent -9223372036854775808 in axis 0"},
    {"NegativeBesideZero", {0, -1}, "has a negative extent -1 in axis 1"},
    {"CountOverflows2e80", {k2e40, k2e40}, "(1099511627776, 1099511627776) holds more elements"},
    {"CountOverflowsThreeAxes",
     {int64_t{1} << 31, int64_t{1} << 31, int64_t{1} << 31},
     "holds more elements"},
    {"CountOverflowsMax", {kMax, 2}, "holds more elements"},
    {"BytesOverflow", {int64_t{1} << 62}, "(4611686018427387904,) holds more elements"},
    {"RankAboveTheMaximum", ones(33), "has rank 33, more than the 32 axes"},
};

class BadInputShapes : public ::testing::TestWithParam<BadShape> {};

TEST_P(BadInputShapes, ArrayZeros) {
  const BadShape& c = GetParam();
  const int line_ = __LINE__ + 1;
  EXPECT_TESSERA_ERROR(Array<float>{c.shape}, UsageError, ErrorKind::kInvalidArgument, c.says,
                       line_);
}
TEST_P(BadInputShapes, ArrayFilled) {
  const BadShape& c = GetParam();
  const int line_ = __LINE__ + 1;
  EXPECT_TESSERA_ERROR((Array<int32_t>{c.shape, 7}), UsageError, ErrorKind::kInvalidArgument,
                       c.says, line_);
}
TEST_P(BadInputShapes, OutType) {
  const BadShape& c = GetParam();
  const int line_ = __LINE__ + 1;
  EXPECT_TESSERA_ERROR(pl::out_type<float>(c.shape), UsageError, ErrorKind::kInvalidArgument,
                       c.says, line_);
}
TEST_P(BadInputShapes, VmemScratch) {
  const BadShape& c = GetParam();
  const int line_ = __LINE__ + 1;
  EXPECT_TESSERA_ERROR(pltpu::VMEM<float>(c.shape), UsageError, ErrorKind::kInvalidArgument, c.says,
                       line_);
}
TEST_P(BadInputShapes, SmemScratch) {
  const BadShape& c = GetParam();
  const int line_ = __LINE__ + 1;
  EXPECT_TESSERA_ERROR(pltpu::SMEM<int32_t>(c.shape), UsageError, ErrorKind::kInvalidArgument,
                       c.says, line_);
}
TEST_P(BadInputShapes, SemaphoreArray) {
  const BadShape& c = GetParam();
  const int line_ = __LINE__ + 1;
  EXPECT_TESSERA_ERROR(pltpu::SemaphoreType::REGULAR(c.shape), UsageError,
                       ErrorKind::kInvalidArgument, c.says, line_);
}

INSTANTIATE_TEST_SUITE_P(All, BadInputShapes, ::testing::ValuesIn(kBadShapes),
                         [](const auto& test) { return std::string(test.param.name); });

TEST(BadInputShape, AnEmptyArrayMayHaveHugeExtentsBesideItsZero) {
  // Not an error: 0 elements, whatever the other extents (the count cannot overflow).
  const Array<float> a({0, kMax, kMax});
  EXPECT_EQ(a.size(), 0);
}

TEST(BadInputShape, ShapeSizeSaturatesInsteadOfWrapping) {
  // A Shape on its own (not yet validated) must not wrap to a small count: 2^40 * 2^40 read as 0
  // once made a 0-byte output that the kernel then wrote.
  EXPECT_EQ((Shape{k2e40, k2e40}.size()), kMax);
  EXPECT_EQ((Shape{k2e40, k2e40, 0}.size()), 0);
}

TEST(BadInputShape, HugeOutputOfAKernel) {
  const int line_ = __LINE__ + 1;
  EXPECT_TESSERA_ERROR(pl::out_type<float>({k2e40, k2e40}), UsageError, ErrorKind::kInvalidArgument,
                       "holds more elements than a kernel output", line_);
}

TEST(BadInputShape, HugeOutputAsAShapeDtypeStruct) {
  // The multi-output form has no line of its own: the kernel's line (where the body is bound).
  auto b = pl::kernel(
      pl::out_type(ShapeDtypeStruct<float>{{8}}, ShapeDtypeStruct<int32_t>{{k2e40, k2e40}}),
      pltpu::TensorCoreMesh("core", 1));
  const int line_ = __LINE__ + 1;
  EXPECT_TESSERA_ERROR(b([](pltpu::HbmRef<float>, pltpu::HbmRef<int32_t>) {}), UsageError,
                       ErrorKind::kInvalidArgument, "(1099511627776, 1099511627776) holds more",
                       line_);
}

TEST(BadInputShape, NegativeShapeDtypeStruct) {
  auto b = pl::kernel(pl::out_type(ShapeDtypeStruct<float>{{8}}, ShapeDtypeStruct<float>{{-8}}),
                      pltpu::TensorCoreMesh("core", 1));
  const int line_ = __LINE__ + 1;
  EXPECT_TESSERA_ERROR(b([](pltpu::HbmRef<float>, pltpu::HbmRef<float>) {}), UsageError,
                       ErrorKind::kInvalidArgument, "negative extent -8", line_);
}

TEST(BadInputShape, PallasCallOutputAsAShapeDtypeStruct) {
  const int line_ = __LINE__ + 1;
  EXPECT_TESSERA_ERROR(
      pl::pallas_call([](pltpu::VmemRef<float>, pltpu::VmemRef<float>) {},
                      pl::out_shape(ShapeDtypeStruct<float>{{8}}, ShapeDtypeStruct<float>{{8, -1}}),
                      pl::grid({1})),
      UsageError, ErrorKind::kInvalidArgument, "negative extent -1 in axis 1", line_);
}

// ---------------------------------------------------------------------------------------------
// Allocation failure names the array, its shape and bytes, and the caller's line.

TEST(BadInputAllocation, ArrayTooBigForMemory) {
  // 2^60 elements count fine, but 2^62 bytes exceed any address space.
  const int line_ = __LINE__ + 1;
  EXPECT_TESSERA_ERROR(
      Array<float>({k2e40, int64_t{1} << 20}), UsageError, ErrorKind::kCapacityExceeded,
      "an Array float32(1099511627776, 1048576): 4611686018427387904 bytes", line_);
}

TEST(BadInputAllocation, FilledArrayTooBigForMemory) {
  const int line_ = __LINE__ + 1;
  EXPECT_TESSERA_ERROR((Array<int8_t>({int64_t{1} << 62}, int8_t{1})), UsageError,
                       ErrorKind::kCapacityExceeded, "int8(4611686018427387904,)", line_);
}

TEST(BadInputAllocation, KernelOutputTooBigForMemory) {
  const int line = __LINE__ + 2;
  auto k = pl::kernel(pl::out_type<float>({k2e40, int64_t{1} << 20}),
                      pltpu::TensorCoreMesh("core", 1))([](pltpu::HbmRef<float>) {});
  EXPECT_TESSERA_ERROR(k(), UsageError, ErrorKind::kCapacityExceeded,
                       "a kernel output float32(1099511627776, 1048576)", line);
}

TEST(BadInputAllocation, PallasCallOutputTooBigForMemory) {
  const int line = __LINE__ + 2;
  auto f = pl::pallas_call([](pltpu::AnyRef<float>) {}, pl::out_shape<float>({k2e40, k2e40 >> 20}),
                           pl::grid({1}), pl::out_specs(pl::BlockSpec(pl::ANY)));
  EXPECT_TESSERA_ERROR(f(), UsageError, ErrorKind::kCapacityExceeded, "a pallas_call output", line);
}

// ---------------------------------------------------------------------------------------------
// Arrays from host data of the wrong size.

TEST(BadInputHostData, TooFewValuesInAList) {
  const int line_ = __LINE__ + 1;
  EXPECT_TESSERA_ERROR((Array<float>({2, 3}, {1, 2, 3})), UsageError, ErrorKind::kShapeMismatch,
                       "3 values were given for shape (2, 3), which holds 6", line_);
}
TEST(BadInputHostData, TooManyValuesInAVector) {
  const std::vector<float> v(7, 1.0f);
  const int line_ = __LINE__ + 1;
  EXPECT_TESSERA_ERROR((Array<float>({2, 3}, v)), UsageError, ErrorKind::kShapeMismatch,
                       "7 values were given for shape (2, 3)", line_);
}
TEST(BadInputHostData, EmptyVectorForANonEmptyShape) {
  const std::vector<int32_t> v;
  const int line_ = __LINE__ + 1;
  EXPECT_TESSERA_ERROR((Array<int32_t>({4}, v)), UsageError, ErrorKind::kShapeMismatch,
                       "0 values were given for shape (4,), which holds 4", line_);
}
TEST(BadInputHostData, OneValueForAScalarShapeOfTwo) {
  const std::vector<bool> v{true};
  const int line_ = __LINE__ + 1;
  EXPECT_TESSERA_ERROR((Array<bool>({2}, v)), UsageError, ErrorKind::kShapeMismatch,
                       "1 value was given for shape (2,), which holds 2", line_);
}
TEST(BadInputHostData, NegativeShapeWithMatchingCount) {
  // -2 * -3 == 6 == the value count: the sign is still wrong.
  const std::vector<float> v(6, 1.0f);
  const int line_ = __LINE__ + 1;
  EXPECT_TESSERA_ERROR((Array<float>({-2, -3}, v)), UsageError, ErrorKind::kInvalidArgument,
                       "negative extent -2 in axis 0", line_);
}
TEST(BadInputHostData, OverflowingShapeWithValues) {
  // 2^32 * 2^32 wraps to 0 in 64 bits: an empty vector must not "match" it.
  const std::vector<float> v;
  const int line_ = __LINE__ + 1;
  EXPECT_TESSERA_ERROR((Array<float>({int64_t{1} << 32, int64_t{1} << 32}, v)), UsageError,
                       ErrorKind::kInvalidArgument, "holds more elements", line_);
}
TEST(BadInputHostData, RaggedNestedRows) {
  const int line_ = __LINE__ + 1;
  EXPECT_TESSERA_ERROR((tessera::array<float>({{1, 2}, {3}})), UsageError,
                       ErrorKind::kShapeMismatch, "row 1 has 1 value but row 0 has 2", line_);
}
TEST(BadInputHostData, RaggedLaterRow) {
  const int line_ = __LINE__ + 1;
  EXPECT_TESSERA_ERROR((tessera::array<int32_t>({{1}, {2}, {3, 4, 5}})), UsageError,
                       ErrorKind::kShapeMismatch, "row 2 has 3 values but row 0 has 1", line_);
}

// ---------------------------------------------------------------------------------------------
// Host element access of an Array.

TEST(BadInputArrayIndex, PastTheEnd) {
  const Array<float> a({2, 3});
  const int line_ = __LINE__ + 1;
  EXPECT_TESSERA_ERROR(a(2, 0), UsageError, ErrorKind::kOutOfBounds,
                       "index 2 is out of bounds for axis 0 with size 2", line_);
}
TEST(BadInputArrayIndex, Negative) {
  const Array<float> a({2, 3});
  const int line_ = __LINE__ + 1;
  EXPECT_TESSERA_ERROR(a(0, -1), UsageError, ErrorKind::kOutOfBounds,
                       "negative indices are not supported", line_);
}
TEST(BadInputArrayIndex, Int64Max) {
  const Array<float> a({2, 3});
  const int line_ = __LINE__ + 1;
  EXPECT_TESSERA_ERROR(a(1, kMax), UsageError, ErrorKind::kOutOfBounds,
                       "index 9223372036854775807 is out of bounds for axis 1", line_);
}
TEST(BadInputArrayIndex, TooFewIndices) {
  const Array<float> a({2, 3});
  const int line_ = __LINE__ + 1;
  EXPECT_TESSERA_ERROR(a(1), UsageError, ErrorKind::kOutOfBounds,
                       "1 index was given for an array of rank 2", line_);
}
TEST(BadInputArrayIndex, TooManyIndices) {
  Array<int32_t> a({4});
  const int line_ = __LINE__ + 1;
  EXPECT_TESSERA_ERROR(a(0, 0, 0), UsageError, ErrorKind::kOutOfBounds,
                       "3 indices were given for an array of rank 1", line_);
}
TEST(BadInputArrayIndex, EmptyAxis) {
  const Array<float> a({0, 3});
  const int line_ = __LINE__ + 1;
  EXPECT_TESSERA_ERROR(a(0, 0), UsageError, ErrorKind::kOutOfBounds,
                       "the axis is empty, so no index is valid", line_);
}

// ---------------------------------------------------------------------------------------------
// Ref::at: slices, indices and strides out of range or overflowing (host refs: UsageError).

struct BadAt {
  const char* name;
  std::function<void(pltpu::VmemRef<float>, std::source_location)> at;
  const char* says;
};

// Each entry runs one .at(...) on a VMEM ref of shape (256,) with the test's location.
const BadAt kBadAt[] = {
    {"PastTheEnd", [](auto r, auto w) { r.at(pl::ds(250, 10), w); },
     "the slice covers elements 250..259, past the end on axis 0 (extent 256)"},
    {"NegativeStart", [](auto r, auto w) { r.at(pl::ds(-1, 4), w); }, "start -1 is negative"},
    {"NegativeSize", [](auto r, auto w) { r.at(pl::ds(0, -1), w); }, "size -1 is negative"},
    {"ZeroStride", [](auto r, auto w) { r.at(pl::ds(0, 4, 0), w); }, "stride 0 must be at least 1"},
    {"NegativeStride", [](auto r, auto w) { r.at(pl::ds(0, 4, -2), w); },
     "stride -2 must be at least 1"},
    {"StartNearInt64MaxWraps", [](auto r, auto w) { r.at(pl::ds(kMax, 2), w); },
     "start 9223372036854775807 + (size 2 - 1) * stride 1, overflows 64 bits"},
    {"StrideNearInt64MaxWraps", [](auto r, auto w) { r.at(pl::ds(1, 3, kMax), w); },
     "stride 9223372036854775807, overflows 64 bits"},
    {"SizeNearInt64MaxWraps", [](auto r, auto w) { r.at(pl::ds(0, kMax, 2), w); },
     "overflows 64 bits"},
    {"StrideTimesSizeJustPastTheEnd", [](auto r, auto w) { r.at(pl::ds(0, 129, 2), w); },
     "covers elements 0..256, past the end"},
    {"StartPastTheEndOfAnEmptySlice", [](auto r, auto w) { r.at(pl::ds(300, 0), w); },
     "start 300 is past the end"},
    {"IndexPastTheEnd", [](auto r, auto w) { r.at(256, w); }, "index 256 is outside 0..255"},
    {"NegativeIndex", [](auto r, auto w) { r.at(-1, w); }, "index -1 is outside 0..255"},
    {"MostNegativeIndex", [](auto r, auto w) { r.at(kMin, w); },
     "index -9223372036854775808 is outside"},
    {"TooManyIndexers", [](auto r, auto w) { r.at(0, 0, w); },
     "has 2 indexers but the VMEM ref has rank 1"},
    {"SliceOfASliceRunsPast", [](auto r, auto w) { r.at(pl::ds(0, 64, 4)).at(pl::ds(60, 8), w); },
     "covers elements 60..67, past the end on axis 0 (extent 64)"},
};

class BadInputRefAt : public ::testing::TestWithParam<BadAt> {};

TEST_P(BadInputRefAt, RaisesAtTheCall) {
  std::vector<float> buf(256);
  const pltpu::VmemRef<float> r(buf.data(), Shape{256});
  const int line_ = __LINE__ + 1;
  EXPECT_TESSERA_ERROR(GetParam().at(r, std::source_location::current()), UsageError,
                       ErrorKind::kOutOfBounds, GetParam().says, line_);
}

INSTANTIATE_TEST_SUITE_P(All, BadInputRefAt, ::testing::ValuesIn(kBadAt),
                         [](const auto& test) { return std::string(test.param.name); });

TEST(BadInputRefAt2D, SecondAxisPastTheEnd) {
  std::vector<float> buf(16 * 128);
  const pltpu::VmemRef<float> r(buf.data(), Shape{16, 128});
  const int line_ = __LINE__ + 1;
  EXPECT_TESSERA_ERROR(r.at(pl::all, pl::ds(120, 16)), UsageError, ErrorKind::kOutOfBounds,
                       "covers elements 120..135, past the end on axis 1 (extent 128)", line_);
}

TEST(BadInputRefAt2D, StrideOverflowsAHandMadeView) {
  // A view built by hand with a stride of 2^62: stepping it by 4 would need a stride of 2^64.
  std::vector<float> buf(8);
  const pltpu::VmemRef<float> r(buf.data(), Shape{8}, detail::SmallVec{int64_t{1} << 62});
  const int line_ = __LINE__ + 1;
  EXPECT_TESSERA_ERROR(r.at(pl::ds(0, 2, 4)), UsageError, ErrorKind::kOutOfBounds,
                       "stride 4 times the view's stride 4611686018427387904 overflows 64 bits",
                       line_);
}

TEST(BadInputRefAt2D, IndexOverflowsAHandMadeView) {
  std::vector<float> buf(8);
  const pltpu::VmemRef<float> r(buf.data(), Shape{8}, detail::SmallVec{int64_t{1} << 62});
  const int line_ = __LINE__ + 1;
  EXPECT_TESSERA_ERROR(r.at(5), UsageError, ErrorKind::kOutOfBounds,
                       "index 5 times the view's stride 4611686018427387904 overflows 64 bits",
                       line_);
}

TEST(BadInputRefAt2D, OneElementWithAHugeStrideIsFine) {
  // Not an error: a one-element slice never steps, whatever its stride.
  std::vector<float> buf(16 * 128);
  const pltpu::VmemRef<float> r(buf.data(), Shape{16, 128});
  const pltpu::VmemRef<float> v = r.at(pl::ds(3, 1, kMax));
  EXPECT_EQ(v.data(), buf.data() + 3 * 128);
  EXPECT_EQ(v.shape(), Shape({1, 128}));
}

TEST(BadInputRefAt2D, HbmRefPastTheEnd) {
  std::vector<float> buf(256);
  const pltpu::HbmRef<float> r(buf.data(), Shape{256});
  const int line_ = __LINE__ + 1;
  EXPECT_TESSERA_ERROR(r.at(pl::ds(128, 129)), UsageError, ErrorKind::kOutOfBounds,
                       "on an HBM ref of shape (256,): the slice covers elements 128..256", line_);
}

// ---------------------------------------------------------------------------------------------
// Element access of a Ref.

TEST(BadInputRefElement, PastTheEnd) {
  std::vector<float> buf(256);
  const pltpu::VmemRef<float> r(buf.data(), Shape{256});
  const int line_ = __LINE__ + 1;
  EXPECT_TESSERA_ERROR(static_cast<void>(r(256).get()), UsageError, ErrorKind::kOutOfBounds,
                       "(256) on a VMEM ref of shape (256,): index 256 is outside 0..255", line_);
}
TEST(BadInputRefElement, Negative) {
  std::vector<float> buf(256);
  const pltpu::VmemRef<const float> r(buf.data(), Shape{256});
  const int line_ = __LINE__ + 1;
  EXPECT_TESSERA_ERROR(static_cast<void>(r(-3)), UsageError, ErrorKind::kOutOfBounds,
                       "index -3 is outside 0..255 on axis 0", line_);
}
TEST(BadInputRefElement, WrongIndexCount) {
  std::vector<float> buf(256);
  const pltpu::VmemRef<float> r(buf.data(), Shape{256});
  const int line_ = __LINE__ + 1;
  EXPECT_TESSERA_ERROR(r(0, 0) = 1.0f, UsageError, ErrorKind::kOutOfBounds,
                       "gives 2 indices to a VMEM ref of rank 1", line_);
}
TEST(BadInputRefElement, NoIndexOnARank1Ref) {
  std::vector<int32_t> buf(4);
  const pltpu::SmemRef<int32_t> r(buf.data(), Shape{4});
  const int line_ = __LINE__ + 1;
  EXPECT_TESSERA_ERROR(r() = 1, UsageError, ErrorKind::kOutOfBounds,
                       "gives 0 indices to an SMEM ref of rank 1", line_);
}
TEST(BadInputRefElement, SecondAxisOfA2DRef) {
  std::vector<float> buf(16 * 128);
  const pltpu::VmemRef<float> r(buf.data(), Shape{16, 128});
  const int line_ = __LINE__ + 1;
  EXPECT_TESSERA_ERROR(r(3, 128) = 1.0f, UsageError, ErrorKind::kOutOfBounds,
                       "index 128 is outside 0..127 on axis 1", line_);
}
TEST(BadInputRefElement, OfAStridedView) {
  std::vector<float> buf(256);
  const pltpu::VmemRef<float> r(buf.data(), Shape{256});
  const auto v = r.at(pl::ds(1, 64, 4));
  const int line_ = __LINE__ + 1;
  EXPECT_TESSERA_ERROR(v(64) = 1.0f, UsageError, ErrorKind::kOutOfBounds,
                       "index 64 is outside 0..63", line_);
}
TEST(BadInputRefElement, ScratchInAKernel) {
  std::atomic<int> line{0};  // set by every core that runs the statement
  auto k =
      pl::kernel(pltpu::TensorCoreMesh("core", 1),
                 pl::scratch_types(pltpu::VMEM<float>({8, 128})))([&](pltpu::VmemRef<float> v) {
        line = __LINE__ + 1;
        v(8, 0) = 1.0f;
      });
  auto e = tessera::testing::catch_error<KernelError>([&] { k(); });
  ASSERT_TRUE(e);
  EXPECT_EQ(e->kind(), ErrorKind::kOutOfBounds);
  EXPECT_EQ(static_cast<int>(e->where().line()), line);
  EXPECT_NE(std::string(e->what()).find("index 8 is outside 0..7 on axis 0"), std::string::npos)
      << e->what();
}
TEST(BadInputRefElement, SmemScratchInAKernel) {
  std::atomic<int> line{0};  // set by every core that runs the statement
  auto k = pl::kernel(pltpu::TensorCoreMesh("core", 1),
                      pl::scratch_types(pltpu::SMEM<int32_t>({8})))([&](pltpu::SmemRef<int32_t> s) {
    s(0) = 0;
    line = __LINE__ + 1;
    s(s(0) + 8) = 1;
  });
  auto e = tessera::testing::catch_error<KernelError>([&] { k(); });
  ASSERT_TRUE(e);
  EXPECT_EQ(e->kind(), ErrorKind::kOutOfBounds);
  EXPECT_EQ(static_cast<int>(e->where().line()), line);
  EXPECT_NE(std::string(e->what()).find("index 8 is outside 0..7"), std::string::npos) << e->what();
}

}  // namespace
