// pltpu::sync_copy: every rank, strided views, dtypes, spaces, and shape errors; async copies the
// native engine holds and makes in batches.
#include <gtest/gtest.h>

#include <numeric>
#include <optional>
#include <string>
#include <vector>

#include "support/expect_error.h"
#include "tessera/tessera.h"

namespace {
using namespace tessera;

TEST(SyncCopy, ContiguousAndStrided2D) {
  std::vector<float> src(64 * 64), dst(64 * 64, -1.0f);
  std::iota(src.begin(), src.end(), 0.0f);
  pltpu::HbmRef<const float> s(src.data(), {64, 64});
  pltpu::VmemRef<float> d(dst.data(), {64, 64});
  pltpu::sync_copy(s, d);
  EXPECT_EQ(src, dst);
  std::fill(dst.begin(), dst.end(), -1.0f);
  // A (16, 8) block at (8, 24), into the top-left corner of the destination.
  pltpu::sync_copy(s.at(pl::ds(8, 16), pl::ds(24, 8)), d.at(pl::ds(0, 16), pl::ds(0, 8)));
  for (int i = 0; i < 64; ++i)
    for (int j = 0; j < 64; ++j) {
      const float want =
          (i < 16 && j < 8) ? src[static_cast<size_t>((i + 8) * 64 + j + 24)] : -1.0f;
      ASSERT_EQ(dst[static_cast<size_t>(i * 64 + j)], want);
    }
}

TEST(SyncCopy, StridedInnerAxisAndRank3) {
  std::vector<int32_t> src(4 * 6 * 10), dst(4 * 3 * 5, 0);
  std::iota(src.begin(), src.end(), 0);
  pltpu::AnyRef<const int32_t> s(src.data(), {4, 6, 10});
  pltpu::VmemRef<int32_t> d(dst.data(), {4, 3, 5});
  pltpu::sync_copy(s.at(pl::all, pl::ds(1, 3, 2), pl::ds(0, 5, 2)), d);
  for (int a = 0; a < 4; ++a)
    for (int b = 0; b < 3; ++b)
      for (int c = 0; c < 5; ++c)
        ASSERT_EQ(dst[static_cast<size_t>((a * 3 + b) * 5 + c)],
                  src[static_cast<size_t>((a * 6 + 1 + 2 * b) * 10 + 2 * c)]);
}

TEST(SyncCopy, NarrowDtypesAndRankZero) {
  std::vector<bfloat16> hb(10), vb(10);
  for (int k = 0; k < 10; ++k) hb[static_cast<size_t>(k)] = bfloat16(static_cast<float>(k) * 0.5f);
  pltpu::sync_copy(pltpu::HbmRef<const bfloat16>(hb.data(), {10}),
                   pltpu::VmemRef<bfloat16>(vb.data(), {10}));
  for (int k = 0; k < 10; ++k)
    EXPECT_EQ(vb[static_cast<size_t>(k)].bits, hb[static_cast<size_t>(k)].bits);
  std::vector<int8_t> hi = {1, -2, 3, -4}, vi(2);
  pltpu::sync_copy(pltpu::HbmRef<const int8_t>(hi.data(), {4}).at(pl::ds(1, 2, 2)),
                   pltpu::SmemRef<int8_t>(vi.data(), {2}));
  EXPECT_EQ(vi[0], -2);
  EXPECT_EQ(vi[1], -4);
  bool flag_src = true, flag_dst = false;
  pltpu::sync_copy(pltpu::HbmRef<const bool>(&flag_src, Shape{}),
                   pltpu::SmemRef<bool>(&flag_dst, Shape{}));
  EXPECT_TRUE(flag_dst);
}

TEST(SyncCopyErrors, ShapeMismatchOnTheHost) {
  std::vector<float> a(128), b(64);
  pltpu::VmemRef<float> va(a.data(), {128});
  pltpu::HbmRef<float> hb(b.data(), {64});
  const int line_1 = __LINE__ + 1;
  EXPECT_TESSERA_ERROR(pltpu::sync_copy(va, hb), UsageError, ErrorKind::kShapeMismatch,
                       "source VMEM ref of shape (128,) and destination HBM ref of shape (64,)",
                       line_1);
}

TEST(SyncCopyErrors, ShapeMismatchInAKernelNamesTheCore) {
  int line = 0;  // written by core 1 only, read after the launch
  auto k = pl::kernel(pl::out_type<float>({256}), pltpu::TensorCoreMesh("core", 2),
                      pl::scratch_types(pltpu::VMEM<float>({128})))(
      [&](pltpu::HbmRef<float> o, pltpu::VmemRef<float> v) {
        v = jnp::zeros_like(v);
        if (lax::axis_index("core") == 1) {
          line = __LINE__ + 1;
          pltpu::sync_copy(v, o.at(pl::ds(0, 100)));  // wrong length, on core 1 only
        } else {
          pltpu::sync_copy(v, o.at(pl::ds(0, 128)));
        }
      });
  auto err = tessera::testing::catch_error<KernelError>([&] { k(); });
  ASSERT_TRUE(err);
  EXPECT_EQ(err->kind(), ErrorKind::kShapeMismatch);
  EXPECT_EQ(err->core(), 1);
  EXPECT_EQ(static_cast<int>(err->where().line()), line);
  EXPECT_NE(std::string(err->what()).find("core 1"), std::string::npos) << err->what();
  EXPECT_NE(std::string(err->what()).find("(128,)"), std::string::npos);
  EXPECT_NE(std::string(err->what()).find("(100,)"), std::string::npos);
}

TEST(SyncCopyErrors, OutOfBoundsViewIsRejectedBeforeAnyCopy) {
  std::vector<float> hbm(256, 7.0f), vmem(128, 1.0f);
  pltpu::HbmRef<float> h(hbm.data(), {256});
  pltpu::VmemRef<float> v(vmem.data(), {128});
  const int line_2 = __LINE__ + 1;
  EXPECT_TESSERA_ERROR(pltpu::sync_copy(v, h.at(pl::ds(200, 128))), UsageError,
                       ErrorKind::kOutOfBounds, "elements 200..327", line_2);
  for (float x : hbm) ASSERT_EQ(x, 7.0f);  // nothing was written
}

// The native engine holds small contiguous async copies and makes them four at a time, a line of
// each in turn (src/native/native_engine.cc, flush_copies). Pages of every size around the 64-byte
// line and the 64 KiB limit, in runs of 1 to 9 copies sharing a semaphore, waited one by one or
// by one descriptor of all their bytes: each destination holds its page, in both engines.
TEST(AsyncCopyBatches, EveryPageLandsWhateverTheRunAndTheWait) {
  for (const int64_t page : {1, 63, 64, 65, 200, 4096, 65536, 65537}) {
    for (const int run : {1, 3, 4, 5, 9}) {
      std::vector<int8_t> src(static_cast<size_t>(page * 11));
      for (size_t e = 0; e < src.size(); ++e) src[e] = static_cast<int8_t>(e * 7 + 3);
      for (const bool one_wait : {false, true}) {
        for (const bool checked : {false, true}) {
          std::optional<pltpu::ForceTpuInterpretMode> force;
          if (checked) force.emplace(pltpu::InterpretParams{});
          const Array<int8_t> x(Shape{11, page}, src);
          // Page i of the output is page (i * 5 + 2) % 11 of x: scattered sources, in order.
          auto k = pl::kernel(
              pl::out_type<int8_t>({run, page}), pltpu::TensorCoreMesh("core", 1),
              pl::scratch_types(pltpu::VMEM<int8_t>({run, page}), pltpu::SemaphoreType::DMA))(
              [&](pltpu::HbmRef<const int8_t> xh, pltpu::HbmRef<int8_t> oh,
                  pltpu::VmemRef<int8_t> buf, pltpu::DmaSemaphoreRef sem) {
                auto copy = [&](int i) {
                  return pltpu::make_async_copy(xh.at((i * 5 + 2) % 11), buf.at(i), sem);
                };
                for (int i = 0; i < run; ++i) copy(i).start();
                if (one_wait) {
                  pltpu::make_async_copy(xh.at(pl::ds(0, run)), buf, sem).wait();
                } else {
                  for (int i = 0; i < run; ++i) copy(i).wait();
                }
                pltpu::sync_copy(buf, oh);
              });
          const Array<int8_t> o = k(x);
          for (int i = 0; i < run; ++i) {
            for (int64_t e = 0; e < page; ++e) {
              ASSERT_EQ(o(i, e), x((i * 5 + 2) % 11, e))
                  << "page " << page << " run " << run << " one_wait " << one_wait << " checked "
                  << checked << " at (" << i << ", " << e << ")";
            }
          }
        }
      }
    }
  }
}

// What a kernel can see of a started copy before its wait: the semaphore's count (the copies a
// core holds are made before semaphore_read), and every held copy is made by the end of the body
// (the semaphore's exit check would otherwise fail) and before a scope's semaphores are checked.
TEST(AsyncCopyBatches, HeldCopiesAreMadeBeforeAnythingObservesThem) {
  const Array<float> x = Array<float>(Shape{4, 256}, 1.5f);
  // The counts semaphore_read saw; with `leave_one`, a last copy is started and never waited.
  auto run = [&x](bool leave_one) {
    return pl::kernel(pl::out_type<int32_t>({3}), pltpu::TensorCoreMesh("core", 1),
                      pl::scratch_types(pltpu::VMEM<float>({4, 256}), pltpu::SMEM<int32_t>({3}),
                                        pltpu::SemaphoreType::DMA))(
        [leave_one](pltpu::HbmRef<const float> xh, pltpu::HbmRef<int32_t> oh,
                    pltpu::VmemRef<float> buf, pltpu::SmemRef<int32_t> counts,
                    pltpu::DmaSemaphoreRef sem) {
          pltpu::make_async_copy(xh.at(0), buf.at(0), sem).start();
          pltpu::make_async_copy(xh.at(1), buf.at(1), sem).start();
          counts(0) = pl::semaphore_read(sem);  // both copies' bytes: 2 x 1024
          pltpu::make_async_copy(xh.at(pl::ds(0, 2)), buf.at(pl::ds(0, 2)), sem).wait();
          counts(1) = pl::semaphore_read(sem);
          pl::run_scoped(
              [&](pltpu::DmaSemaphoreRef inner) {
                pltpu::make_async_copy(xh.at(2), buf.at(2), inner).start();
                counts(2) = pl::semaphore_read(inner);
                pltpu::make_async_copy(xh.at(2), buf.at(2), inner).wait();
              },
              pltpu::SemaphoreType::DMA);
          pltpu::sync_copy(counts, oh);
          if (leave_one) pltpu::make_async_copy(xh.at(3), buf.at(3), sem).start();
        })(x);
  };
  const Array<int32_t> c = run(false);
  EXPECT_EQ(c(0), 2048);
  EXPECT_EQ(c(1), 0);
  EXPECT_EQ(c(2), 1024);
  // The copy never waited is made by the body's end, and the exit check sees its bytes.
  auto err = tessera::testing::catch_error<KernelError>([&] { run(true); });
  ASSERT_TRUE(err);
  EXPECT_EQ(err->kind(), ErrorKind::kSemaphoreLeak) << err->what();
  EXPECT_NE(std::string(err->what()).find("holds 1024 bytes"), std::string::npos) << err->what();
}

}  // namespace
