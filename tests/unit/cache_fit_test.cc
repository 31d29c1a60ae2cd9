// runtime/cache_fit.h: which working sets are taken to stay in cache, and which are measured.
// The probe is scripted here, so these tests check the decision and its memory, not a timing.
#include "runtime/cache_fit.h"

#include <gtest/gtest.h>

#include <cstdint>
#include <vector>

namespace {
using tessera::detail::CacheFit;

constexpr int64_t kMiB = int64_t{1} << 20;

// The scripted machine: sizes up to `g_holds` read at the reference rate, larger ones at a third.
int64_t g_holds = 0;
double g_reference = 30;
std::vector<int64_t> g_probed;

double scripted(int64_t bytes) {
  g_probed.push_back(bytes);
  return bytes <= g_holds ? g_reference : g_reference / 3;
}

struct CacheFitTest : ::testing::Test {
  void SetUp() override {
    g_probed.clear();
    g_holds = 32 * kMiB;
    g_reference = 30;
  }
};

TEST_F(CacheFitTest, TheReportDecidesWithoutAProbeWhereItCan) {
  CacheFit none(0, 0, &scripted);
  EXPECT_FALSE(none.stays(1024));  // no cache reported: stream
  CacheFit fit(480 * kMiB, 4 * kMiB, &scripted);
  EXPECT_FALSE(fit.stays(481 * kMiB));
  EXPECT_TRUE(fit.stays(4 * kMiB));
  EXPECT_TRUE(fit.stays(1));
  EXPECT_EQ(fit.probes(), 0);
  EXPECT_TRUE(g_probed.empty());
}

TEST_F(CacheFitTest, AWorkingSetBetweenIsMeasuredInItsPowerOfTwoClass) {
  CacheFit fit(480 * kMiB, 4 * kMiB, &scripted);
  EXPECT_TRUE(fit.stays(24 * kMiB));  // class 32 MiB, which the machine holds
  ASSERT_EQ(g_probed.size(), 3u);
  EXPECT_EQ(g_probed[0], 4 * kMiB);  // the reference
  EXPECT_EQ(g_probed[1], 32 * kMiB);
  EXPECT_EQ(g_probed[2], 4 * kMiB);    // the reference again, before a class is taken to fit
  EXPECT_FALSE(fit.stays(48 * kMiB));  // class 64 MiB: a third of the rate
  ASSERT_EQ(g_probed.size(), 4u);
  EXPECT_EQ(g_probed[3], 64 * kMiB);
  // Past the last power of two below the report, the size itself is measured.
  CacheFit big(480 * kMiB, 4 * kMiB, &scripted);
  g_holds = 400 * kMiB;
  EXPECT_TRUE(big.stays(300 * kMiB));
  ASSERT_GE(g_probed.size(), 2u);
  EXPECT_EQ(g_probed[g_probed.size() - 2], 300 * kMiB);  // then the reference again
}

TEST_F(CacheFitTest, AnswersAreKeptAndUsedBothWays) {
  CacheFit fit(480 * kMiB, 4 * kMiB, &scripted);
  EXPECT_FALSE(fit.stays(100 * kMiB));  // class 128 MiB
  const size_t probes = g_probed.size();
  EXPECT_FALSE(fit.stays(200 * kMiB));  // larger than a miss: no probe
  EXPECT_FALSE(fit.stays(128 * kMiB));
  EXPECT_EQ(g_probed.size(), probes);
  EXPECT_TRUE(fit.stays(20 * kMiB));  // smaller: measured (class 32 MiB), and the reference again
  EXPECT_EQ(g_probed.size(), probes + 2);
  EXPECT_TRUE(fit.stays(9 * kMiB));  // smaller than a fit: no probe
  EXPECT_TRUE(fit.stays(32 * kMiB));
  EXPECT_EQ(g_probed.size(), probes + 2);
  EXPECT_FALSE(fit.stays(40 * kMiB));  // class 64 MiB, between the two: measured
  EXPECT_EQ(g_probed.size(), probes + 3);
  EXPECT_EQ(fit.probes(), static_cast<int>(probes + 3));
}

TEST_F(CacheFitTest, TheRatioDecides) {
  CacheFit fit(480 * kMiB, 4 * kMiB, [](int64_t bytes) {
    return bytes == 4 * kMiB ? 100.0 : 100.0 * CacheFit::kFitRatio;  // exactly at the ratio
  });
  EXPECT_TRUE(fit.stays(10 * kMiB));
  CacheFit slow(480 * kMiB, 4 * kMiB, [](int64_t bytes) {
    return bytes == 4 * kMiB ? 100.0 : 100.0 * CacheFit::kFitRatio - 1;
  });
  EXPECT_FALSE(slow.stays(10 * kMiB));
  // A reference that could not be measured says nothing: the report is trusted.
  CacheFit blind(480 * kMiB, 4 * kMiB, [](int64_t) { return 0.0; });
  EXPECT_TRUE(blind.stays(100 * kMiB));
}

// The reference read slow once (17 against 25, as measured in some processes on a VM): a class
// that reads at memory speed (12) is over the ratio against the slow reading and under it
// against the second, which decides. A class that does fit still fits.
TEST_F(CacheFitTest, ASlowReferenceDoesNotMakeAClassFit) {
  static int reference_reads;
  reference_reads = 0;
  auto probe = [](int64_t bytes) {
    if (bytes == 4 * kMiB) return ++reference_reads == 1 ? 17.0 : 25.0;
    return bytes <= 32 * kMiB ? 24.0 : 12.0;
  };
  CacheFit fit(480 * kMiB, 4 * kMiB, probe);
  EXPECT_FALSE(fit.stays(48 * kMiB));  // 12 >= 0.7 x 17, but 12 < 0.7 x 25
  EXPECT_EQ(reference_reads, 2);
  EXPECT_TRUE(fit.stays(24 * kMiB));  // 24 >= 0.7 x 25
}

TEST(CacheFitMeasure, ReadsTheBufferItWrites) {
  EXPECT_GT(tessera::detail::measure_read_bandwidth(64 * 1024), 0.0);
  // Rounded up to a few words (ASan checks the reads); so short a read may time as zero.
  EXPECT_GE(tessera::detail::measure_read_bandwidth(1), 0.0);
}

}  // namespace
