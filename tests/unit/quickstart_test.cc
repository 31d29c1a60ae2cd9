// The quickstart's kernels (Pallas' TPU quickstart): fill_42() = 128 x 42.0 and iota() = 0 .. 128n
// - 1 for n = 1..4 cores.
#include "quickstart.h"

#include <gtest/gtest.h>

#include <sstream>

namespace {
using namespace tessera;

TEST(Quickstart, Fill42) {
  const Array<float> a = examples::fill_42();
  ASSERT_EQ(a.shape(), Shape({128}));
  for (float v : a) EXPECT_EQ(v, 42.0f);
}

TEST(Quickstart, IotaOnOneToFourCores) {
  for (int n = 1; n <= 4; ++n) {
    const Array<float> a = examples::iota(n);
    ASSERT_EQ(a.size(), 128 * n);
    for (int64_t k = 0; k < a.size(); ++k) ASSERT_EQ(a[k], static_cast<float>(k)) << n;
  }
  EXPECT_EQ(examples::iota().size(), 128 * pltpu::get_tpu_info().num_cores);
}

TEST(Quickstart, PrintsInTheSeedsStyle) {
  std::ostringstream out;
  EXPECT_TRUE(examples::run_quickstart(out));
  EXPECT_NE(out.str().find("[42. 42. 42. ... 42. 42. 42.]"), std::string::npos) << out.str();
  EXPECT_NE(out.str().find("[  0.   1.   2. ..."), std::string::npos) << out.str();
}

}  // namespace
