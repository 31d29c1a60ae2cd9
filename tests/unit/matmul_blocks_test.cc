// The matmul example's default blocks (examples/05_matmul.cc): whatever the CPU's caches, they
// divide the shape where it has divisors near the blocks it wants (else they leave a partial last
// block), give every core an output block where the shape allows, keep a k step at least 256
// long (or all of K), and their double-buffered windows fit the VMEM limit the example asks for.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdint>
#include <optional>

#include "matmul.h"

namespace tessera {
namespace {

int64_t windows(const examples::MatmulBlocks& b, int64_t item) {
  return 2 * (b.bm * b.bk + b.bk * b.bn + b.bm * b.bn) * item;
}

TEST(MatmulBlocks, DefaultsDivideFitAndShareTheWork) {
  const int64_t sizes[] = {8, 96, 500, 512, 1000, 1536, 2048, 4096, 6144, 16384};
  for (int64_t item : {4, 2}) {
    for (int cores : {1, 2}) {
      for (int64_t m : sizes) {
        for (int64_t k : sizes) {
          const int64_t n = m == 16384 ? 512 : m;
          const examples::MatmulBlocks b = examples::default_matmul_blocks(m, n, k, item, cores);
          SCOPED_TRACE(testing::Message()
                       << "item " << item << ", " << cores << " cores, (" << m << ", " << n << ", "
                       << k << "): blocks (" << b.bm << ", " << b.bn << ", " << b.bk << ")");
          ASSERT_GT(b.bm, 0);
          ASSERT_GT(b.bn, 0);
          ASSERT_GT(b.bk, 0);
          EXPECT_EQ(m % b.bm, 0);
          EXPECT_EQ(n % b.bn, 0);
          EXPECT_EQ(k % b.bk, 0);
          if (m * n >= 64 * 64 * cores) {
            EXPECT_GE((m / b.bm) * (n / b.bn), cores);
          }
          EXPECT_GE(b.bk, std::min<int64_t>(k, 250));  // 250: the largest divisor of 1000
          EXPECT_LE(windows(b, item), int64_t{96} << 20);
        }
      }
    }
  }
}

TEST(MatmulBlocks, BlocksTallerThanWideWhereTheGemmsPackB) {
  // float32 packs B a 64-column panel at a time once its block passes half the L2, and then
  // takes output blocks of the same area four times as tall as wide; bfloat16's AMX GEMM packs
  // all of B at every call, and takes blocks twice as tall as the square ones. A 4096³ product's
  // B block passes half of any L2 up to 8 MiB (with a larger one the 96 MiB window cap shortens
  // bk until it does not).
  const std::optional<pltpu::CpuInfo> cpu = pltpu::get_tpu_info().cpu;
  const int64_t l2 = cpu && cpu->l2_bytes > 0 ? cpu->l2_bytes : int64_t{1} << 20;
  if (l2 > (int64_t{8} << 20)) GTEST_SKIP() << "an L2 of " << l2 << " bytes";
  for (int cores : {1, 2}) {
    const examples::MatmulBlocks f = examples::default_matmul_blocks(4096, 4096, 4096, 4, cores);
    SCOPED_TRACE(testing::Message() << cores << " cores, L2 " << l2 << " bytes: float32 blocks ("
                                    << f.bm << ", " << f.bn << ", " << f.bk << ")");
    ASSERT_GT(f.bk * f.bn * 4, l2 / 2);
    EXPECT_EQ(f.bm, 4 * f.bn);
    EXPECT_LE(f.bm * f.bn * 4, 2 * l2);
    const examples::MatmulBlocks h = examples::default_matmul_blocks(4096, 4096, 4096, 2, cores);
    EXPECT_EQ(h.bm, 2 * h.bn) << "bfloat16 blocks (" << h.bm << ", " << h.bn << ", " << h.bk << ")";
    EXPECT_LE(h.bm * h.bn * 4, 4 * l2);
  }
  // Where B's float32 block stays within half the L2, the blocks stay square: (512, 512) blocks
  // of a 512 x 512 x 256 product have a B of 512 KiB.
  if (l2 >= (int64_t{1} << 20)) {
    const examples::MatmulBlocks s = examples::default_matmul_blocks(512, 512, 256, 4, 1);
    EXPECT_EQ(s.bm, s.bn);
  }
}

TEST(MatmulBlocks, BfloatSixteenSplitsColumnsAmongTheCores) {
  // bfloat16's GEMM packs all of its B block at every call and reads A where it lies: a product
  // that one square block would cover is split among the cores by its columns (each core packs
  // its half of B), float32's by its rows. A block already more than twice as tall as wide
  // splits its rows.
  const std::optional<pltpu::CpuInfo> cpu = pltpu::get_tpu_info().cpu;
  const int64_t l2 = cpu && cpu->l2_bytes > 0 ? cpu->l2_bytes : int64_t{1} << 20;
  for (int64_t s : {256, 512}) {
    if (s * s * 4 > 2 * l2) continue;  // not one square block with this L2
    const examples::MatmulBlocks h = examples::default_matmul_blocks(s, s, s, 2, 2);
    EXPECT_EQ(h.bm, s) << s << "³ bfloat16: (" << h.bm << ", " << h.bn << ", " << h.bk << ")";
    EXPECT_EQ(h.bn, s / 2) << s << "³ bfloat16: (" << h.bm << ", " << h.bn << ", " << h.bk << ")";
    const examples::MatmulBlocks f = examples::default_matmul_blocks(s, s, s, 4, 2);
    EXPECT_EQ(f.bm, s / 2) << s << "³ float32: (" << f.bm << ", " << f.bn << ", " << f.bk << ")";
    EXPECT_EQ(f.bn, s) << s << "³ float32: (" << f.bm << ", " << f.bn << ", " << f.bk << ")";
  }
  const examples::MatmulBlocks t = examples::default_matmul_blocks(512, 128, 256, 2, 2);
  EXPECT_EQ(t.bm, 256) << "(" << t.bm << ", " << t.bn << ", " << t.bk << ")";
  EXPECT_EQ(t.bn, 128) << "(" << t.bm << ", " << t.bn << ", " << t.bk << ")";
}

TEST(MatmulBlocks, BlocksShareEvenlyBetweenTwoCores) {
  // Square blocks that would split unevenly are narrowed (3072³: nine (1024, 1024) blocks with a
  // 2 MiB L2, five for one core), and the taller float32 blocks are taken only where they split
  // evenly (1536³ would get three (1536, 512) blocks).
  for (int64_t item : {4, 2}) {
    for (int64_t s : {1024, 1536, 2048, 3072, 4096}) {
      const examples::MatmulBlocks b = examples::default_matmul_blocks(s, s, s, item, 2);
      EXPECT_EQ((s / b.bm) * (s / b.bn) % 2, 0) << "item " << item << ", " << s << "³: blocks ("
                                                << b.bm << ", " << b.bn << ", " << b.bk << ")";
    }
  }
  // No divisor within half of a side evens the split (21 = 3 x 7 gets three blocks of 7 rows): a
  // side is cut into one piece fewer, the last block partial (16 rows and 5).
  const examples::MatmulBlocks odd = examples::default_matmul_blocks(3 * 7, 3 * 7, 256, 4, 2);
  EXPECT_EQ(((21 + odd.bm - 1) / odd.bm) * ((21 + odd.bn - 1) / odd.bn) % 2, 0)
      << "blocks (" << odd.bm << ", " << odd.bn << ")";
  EXPECT_EQ(odd.bm % 8, 0);
}

TEST(MatmulBlocks, SizesWithoutDivisorsKeepBlocksLikeTheirNeighbours) {
  // A size with no divisor near the block it wants (2047 = 23 x 89, the primes 389 and 4099)
  // takes blocks that do not divide it, the last one partial, rather than collapsing to a
  // divisor (2047³ would get (89, 89) blocks, 4099 a k step of 1): at most three times the blocks
  // of a nearby size with divisors, little padding, an even split, and a k step that divides K.
  const int64_t pairs[][2] = {{389, 384}, {777, 768}, {1001, 1000}, {2047, 2048}, {4099, 4096}};
  auto count = [](int64_t m, int64_t n, const examples::MatmulBlocks& b) {
    return ((m + b.bm - 1) / b.bm) * ((n + b.bn - 1) / b.bn);
  };
  for (int64_t item : {4, 2}) {
    for (int cores : {1, 2}) {
      for (const auto& pair : pairs) {
        const int64_t s = pair[0], near = pair[1];
        const examples::MatmulBlocks b = examples::default_matmul_blocks(s, s, s, item, cores);
        const examples::MatmulBlocks c =
            examples::default_matmul_blocks(near, near, near, item, cores);
        SCOPED_TRACE(testing::Message()
                     << "item " << item << ", " << cores << " cores, " << s << "³: blocks (" << b.bm
                     << ", " << b.bn << ", " << b.bk << "), " << near << "³: (" << c.bm << ", "
                     << c.bn << ", " << c.bk << ")");
        EXPECT_EQ(s % b.bk, 0);
        EXPECT_GE(b.bk, 256);
        EXPECT_TRUE(s % b.bm == 0 || b.bm % 8 == 0);
        EXPECT_TRUE(s % b.bn == 0 || b.bn % 128 == 0);
        EXPECT_LE(count(s, s, b), 3 * count(near, near, c));
        EXPECT_EQ(count(s, s, b) % cores, 0);
        const int64_t padded = ((s + b.bm - 1) / b.bm * b.bm) * ((s + b.bn - 1) / b.bn * b.bn);
        EXPECT_LE(static_cast<double>(padded), 1.15 * static_cast<double>(s * s));
        EXPECT_LE(windows(b, item), int64_t{96} << 20);
      }
    }
  }
}

TEST(MatmulBlocks, GivenSizesAreKeptAndTheKStepShortenedToFit) {
  // bm and bn given as 2048: a k step of 4096 would need 160 MiB of windows; it is halved.
  const examples::MatmulBlocks b = examples::default_matmul_blocks(
      4096, 4096, 8192, 4, 2, examples::MatmulBlocks{2048, 2048, 0});
  EXPECT_EQ(b.bm, 2048);
  EXPECT_EQ(b.bn, 2048);
  EXPECT_EQ(8192 % b.bk, 0);
  EXPECT_LE(windows(b, 4), int64_t{96} << 20);
  EXPECT_GE(b.bk, 256);
  // A given k step is kept, whatever it needs.
  const examples::MatmulBlocks g =
      examples::default_matmul_blocks(4096, 4096, 8192, 4, 2, examples::MatmulBlocks{0, 0, 8192});
  EXPECT_EQ(g.bk, 8192);
  EXPECT_LE(windows(g, 4), int64_t{96} << 20) << "(" << g.bm << ", " << g.bn << ")";
  // A prime K is taken whole (a partial k block would add padding into the sums); the output
  // block shrinks until the windows fit.
  const examples::MatmulBlocks p = examples::default_matmul_blocks(1024, 1024, 65521, 4, 2);
  EXPECT_EQ(p.bk, 65521);
  EXPECT_LE(windows(p, 4), int64_t{96} << 20) << "(" << p.bm << ", " << p.bn << ")";
  EXPECT_GE(p.bm, 8);
  EXPECT_GE(p.bn, 8);
}

}  // namespace
}  // namespace tessera
