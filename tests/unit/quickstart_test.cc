// The quickstart's kernels (Pallas' TPU quickstart): fill_42() = 128 x 42.0 and iota() = 0 .. 128n
// - 1 for n = 1..4 cores; and README's "Inputs from host data", verbatim.
#include "quickstart.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <span>
#include <sstream>
#include <vector>

#include "tessera/tessera.h"

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

TEST(Quickstart, ReadmeInputsFromHostData) {
  // The code of README.md's "Inputs from host data" section.
  std::vector<float> host(8 * 128);
  for (size_t i = 0; i < host.size(); ++i) host[i] = static_cast<float>(i);
  const Array<float> x({8, 128}, host);  // copies; the value count must equal the size

  std::span<const float> view(host);  // any contiguous range: copy into a fresh Array
  Array<float> y({8, 128});
  std::copy(view.begin(), view.end(), y.begin());

  auto add = pl::pallas_call([](pltpu::VmemRef<const float> a, pltpu::VmemRef<const float> b,
                                pltpu::VmemRef<float> o) { o = a + b; },
                             pl::out_shape<float>({8, 128}));
  const Array<float> z = add(x, y);           // inputs in the body's order
  std::vector<float> result = z.to_vector();  // or z.data(), z(i, j), z[flat]

  ASSERT_EQ(result.size(), host.size());
  for (size_t i = 0; i < result.size(); ++i) ASSERT_EQ(result[i], 2.0f * host[i]);
}

}  // namespace
