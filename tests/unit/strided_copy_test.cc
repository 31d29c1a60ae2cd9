// The native DMA engine's copy (src/native/strided_copy.cc): the streaming copy it uses for
// copies that do not stay in the caches, at every alignment of its ends, and strided_copy on
// copies large enough to take it (contiguous, row by row, and overlapping, which never streams).
#include <gtest/gtest.h>

#include <cstdint>
#include <cstring>
#include <numeric>
#include <vector>

#include "native/native_engine.h"

namespace tessera::detail {
namespace {

std::vector<unsigned char> pattern(size_t n, unsigned seed) {
  std::vector<unsigned char> v(n);
  for (size_t i = 0; i < n; ++i) v[i] = static_cast<unsigned char>((i * 131 + seed * 7 + 3) % 251);
  return v;
}

TEST(StreamingCopy, EqualsMemcpyAtEveryAlignmentAndLeavesTheRestAlone) {
  constexpr size_t kGuard = 128;
  for (const size_t n : {size_t{0}, size_t{1}, size_t{15}, size_t{63}, size_t{64}, size_t{65},
                         size_t{127}, size_t{4099}, (size_t{1} << 20) + 13}) {
    for (const size_t dst_off : {size_t{0}, size_t{1}, size_t{16}, size_t{63}}) {
      for (const size_t src_off : {size_t{0}, size_t{5}}) {
        const std::vector<unsigned char> src = pattern(n + src_off + 1, 1);  // never empty
        std::vector<unsigned char> dst = pattern(n + dst_off + kGuard, 2);
        std::vector<unsigned char> want = dst;
        std::memcpy(want.data() + dst_off, src.data() + src_off, n);
        streaming_copy(dst.data() + dst_off, src.data() + src_off, n);
        ASSERT_EQ(dst, want) << n << " bytes, destination offset " << dst_off << ", source offset "
                             << src_off;
      }
    }
  }
}

TEST(StreamingCopy, NothingToCopyTouchesNothing) {
  streaming_copy(nullptr, nullptr, 0);  // (UBSan: memcpy must not be given null pointers)
}

RawRef ref_of(float* data, Shape shape, SmallVec strides) {
  return RawRef{data, DType::kFloat32, MemorySpace::HBM, std::move(shape), std::move(strides)};
}

TEST(StridedCopy, LargeContiguousCopy) {
  const int64_t rows = 4096, cols = 4096;  // 64 MiB
  std::vector<float> src(static_cast<size_t>(rows * cols));
  std::iota(src.begin(), src.end(), 0.0f);
  std::vector<float> dst(src.size(), -1.0f);
  strided_copy(ref_of(src.data(), Shape{rows, cols}, SmallVec{cols, 1}),
               ref_of(dst.data(), Shape{rows, cols}, SmallVec{cols, 1}));
  EXPECT_EQ(dst, src);
}

TEST(StridedCopy, LargeCopyRowByRow) {
  // 2000 rows of 1000 floats out of rows of 1003 (8 MB): a run per row, each misaligned.
  const int64_t rows = 2000, cols = 1000, pitch = 1003;
  std::vector<float> src(static_cast<size_t>(rows * pitch));
  std::iota(src.begin(), src.end(), 1.0f);
  std::vector<float> dst(static_cast<size_t>(rows * cols) + 7, -1.0f);
  strided_copy(ref_of(src.data(), Shape{rows, cols}, SmallVec{pitch, 1}),
               ref_of(dst.data() + 7, Shape{rows, cols}, SmallVec{cols, 1}));
  for (int64_t r = 0; r < rows; ++r) {
    for (int64_t c = 0; c < cols; c += 97) {
      ASSERT_EQ(dst[static_cast<size_t>(7 + r * cols + c)], src[static_cast<size_t>(r * pitch + c)])
          << "row " << r << " column " << c;
    }
  }
  for (size_t i = 0; i < 7; ++i) EXPECT_EQ(dst[i], -1.0f);
}

TEST(StridedCopy, LargeOverlappingCopyMovesAsMemmove) {
  const int64_t n = int64_t{6} << 20;  // 24 MiB of floats, shifted by 16 floats
  std::vector<float> buf(static_cast<size_t>(n + 16));
  std::iota(buf.begin(), buf.end(), 0.0f);
  const std::vector<float> before = buf;
  strided_copy(ref_of(buf.data(), Shape{n}, SmallVec{1}),
               ref_of(buf.data() + 16, Shape{n}, SmallVec{1}));
  for (int64_t i = 0; i < n; i += 4093) {
    ASSERT_EQ(buf[static_cast<size_t>(i + 16)], before[static_cast<size_t>(i)]) << i;
  }
  EXPECT_EQ(buf[static_cast<size_t>(n + 15)], before[static_cast<size_t>(n - 1)]);
}

}  // namespace
}  // namespace tessera::detail
