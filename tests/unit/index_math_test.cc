// pl::cdiv and pl::multiple_of: values (Python's semantics), use in index maps and bodies, and
// the errors for a zero divisor and a false multiple_of hint.
#include <gtest/gtest.h>

#include <atomic>
#include <cstdint>
#include <limits>
#include <type_traits>
#include <vector>

#include "support/expect_error.h"
#include "tessera/tessera.h"

namespace {
using namespace tessera;

TEST(IndexMath, CdivIsPythonsCeilingDivision) {
  static_assert(pl::cdiv(1000, 128) == 8);
  static_assert(pl::cdiv(1024, 128) == 8);
  static_assert(pl::cdiv(0, 7) == 0);
  static_assert(pl::cdiv(-5, 2) == -2);  // (-5 + 1) // 2
  static_assert(pl::cdiv(int64_t{1} << 40, 3) == ((int64_t{1} << 40) + 2) / 3);
  int line = __LINE__ + 1;
  EXPECT_TESSERA_ERROR(pl::cdiv(5, 0), UsageError, ErrorKind::kInvalidArgument,
                       "the divisor must be positive", line);
  line = __LINE__ + 1;
  EXPECT_TESSERA_ERROR(pl::cdiv(std::numeric_limits<int64_t>::max(), 2), UsageError,
                       ErrorKind::kInvalidArgument, "overflows 64 bits", line);
}

TEST(IndexMath, MultipleOfReturnsItsArgumentOrRaises) {
  static_assert(pl::multiple_of(256, 128) == 256);
  static_assert(std::is_same_v<decltype(pl::multiple_of(int32_t{8}, 8)), int32_t>);
  EXPECT_EQ(pl::multiple_of(int64_t{-16}, 8), -16);
  int line = __LINE__ + 1;
  EXPECT_TESSERA_ERROR(pl::multiple_of(130, 128), UsageError, ErrorKind::kInvalidArgument,
                       "130 is not a multiple of 128", line);
  line = __LINE__ + 1;
  EXPECT_TESSERA_ERROR(pl::multiple_of(8, 0), UsageError, ErrorKind::kInvalidArgument,
                       "the multiple must be positive", line);
}

TEST(IndexMath, InIndexMapsAndBodies) {
  const int64_t n = 1000;
  Array<float> x({n});
  for (int64_t i = 0; i < n; ++i) x[i] = static_cast<float>(i);
  const pl::BlockSpec spec({128},
                           [](int i) { return pl::idx(pl::multiple_of(i * 128, 128) / 128); });
  auto double_it = pl::pallas_call(
      [](pltpu::VmemRef<const float> xr, pltpu::VmemRef<float> o) {
        const int64_t start = pl::multiple_of(pl::program_id(0) * 0, 8);
        o.at(pl::ds(start, 128)) = xr.at(pl::ds(start, 128)) * 2.0f;
      },
      pl::out_shape<float>({n}), pl::grid({pl::cdiv(n, 128)}), pl::in_specs(spec),
      pl::out_specs(spec));
  const Array<float> y = double_it(x);
  for (int64_t i = 0; i < n; ++i) ASSERT_EQ(y[i], 2.0f * static_cast<float>(i)) << i;
  // A false hint inside a kernel is a KernelError at its line.
  std::atomic<int> line{0};
  auto bad = pl::pallas_call(
      [&line](pltpu::VmemRef<const float> xr, pltpu::VmemRef<float> o) {
        line = __LINE__ + 1;
        const int64_t start = pl::multiple_of(pl::program_id(0) * 8 + 4, 8);
        o = xr + static_cast<float>(start);
      },
      pl::out_shape<float>({n}), pl::grid({pl::cdiv(n, 128)}), pl::in_specs(spec),
      pl::out_specs(spec));
  tessera::testing::expect_kernel_error([&] { (void)bad(x); }, ErrorKind::kInvalidArgument,
                                        "is not a multiple of 8", line);
}

}  // namespace
