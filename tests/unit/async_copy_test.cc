// Async copies: make_async_copy(...).start()/.wait() and async_copy between HBM, VMEM and SMEM
// (Pallas' async copy semantics, with byte counts), several copies on one DMA
// semaphore, one wait absorbing several transfers, a double-buffered loop, and the errors:
// shape mismatch, a second start before the wait, a wait with no copy (timeout), a leak.
#include <gtest/gtest.h>

#include <algorithm>
#include <string>
#include <vector>

#include "support/expect_error.h"
#include "tessera/tessera.h"

namespace {
using namespace tessera;

constexpr pltpu::CompilerParams kShortTimeout{.wait_timeout_ms = 50};

bool contains(const std::string& s, const std::string& part) {
  return s.find(part) != std::string::npos;
}

Array<float> ramp(Shape shape, float scale = 1.0f) {
  Array<float> a(std::move(shape));
  for (int64_t i = 0; i < a.size(); ++i) a[i] = static_cast<float>(i) * scale;
  return a;
}

// out = x * 2 + 1, every core taking its share of 128-element blocks: HBM -> VMEM with
// make_async_copy + start/wait, VMEM -> HBM with async_copy(...).wait().
TEST(AsyncCopy, HbmToVmemToHbm) {
  const Array<float> x = ramp({1024}, 0.5f);
  for (int cores : {1, 2, 3}) {
    auto k = pl::kernel(pl::out_type<float>({1024}), pltpu::TensorCoreMesh("core", cores),
                        pl::scratch_types(pltpu::VMEM<float>({128}), pltpu::VMEM<float>({128}),
                                          pltpu::SemaphoreType::DMA({2})))(
        [cores](pltpu::HbmRef<const float> x_hbm, pltpu::HbmRef<float> o_hbm,
                pltpu::VmemRef<float> xv, pltpu::VmemRef<float> ov, pltpu::DmaSemaphoreRef sems) {
          for (int b = lax::axis_index("core"); b < 8; b += cores) {
            auto in = pltpu::make_async_copy(x_hbm.at(pl::ds(b * 128, 128)), xv, sems.at(0));
            in.start();
            in.wait();
            ov = xv * 2.0f + 1.0f;
            pltpu::async_copy(ov, o_hbm.at(pl::ds(b * 128, 128)), sems.at(1)).wait();
          }
        });
    const Array<float> o = k(x);
    for (int64_t i = 0; i < o.size(); ++i) ASSERT_EQ(o[i], x[i] * 2.0f + 1.0f) << cores;
  }
}

// §6.4 item 27 (test_hbm_vmem_dma_slicing): two copies on one semaphore, then two waits.
TEST(AsyncCopy, SeveralCopiesShareOneSemaphore) {
  const Array<float> x = ramp({16, 128});
  auto k = pl::kernel(pl::out_type<float>({16, 128}), pltpu::TensorCoreMesh("core", 1),
                      pl::scratch_types(pltpu::VMEM<float>({16, 128}), pltpu::SemaphoreType::DMA))(
      [](pltpu::HbmRef<const float> x_hbm, pltpu::HbmRef<float> o, pltpu::VmemRef<float> y,
         pltpu::DmaSemaphoreRef sem) {
        auto lo = pltpu::async_copy(x_hbm.at(pl::ds(0, 8)), y.at(pl::ds(0, 8)), sem);
        auto hi = pltpu::async_copy(x_hbm.at(pl::ds(8, 8)), y.at(pl::ds(8, 8)), sem);
        lo.wait();
        hi.wait();
        pltpu::sync_copy(y, o);
      });
  EXPECT_EQ(k(x).to_vector(), x.to_vector());
}

// One wait on a descriptor whose source is the whole (16, 128) block absorbs the two (8, 128)
// transfers (the byte counts add up), as in Pallas.
TEST(AsyncCopy, OneWaitAbsorbsSeveralTransfers) {
  const Array<float> x = ramp({16, 128});
  auto k = pl::kernel(pl::out_type<float>({16, 128}), pltpu::TensorCoreMesh("core", 2),
                      pl::scratch_types(pltpu::VMEM<float>({16, 128}), pltpu::SemaphoreType::DMA))(
      [](pltpu::HbmRef<const float> x_hbm, pltpu::HbmRef<float> o, pltpu::VmemRef<float> y,
         pltpu::DmaSemaphoreRef sem) {
        pltpu::async_copy(x_hbm.at(pl::ds(0, 8)), y.at(pl::ds(0, 8)), sem);
        pltpu::async_copy(x_hbm.at(pl::ds(8, 8)), y.at(pl::ds(8, 8)), sem);
        pltpu::make_async_copy(x_hbm, y, sem).wait();  // never started: counts 16 rows
        pltpu::run_on_first_core("core", [&] { pltpu::sync_copy(y, o); });
      });
  EXPECT_EQ(k(x).to_vector(), x.to_vector());
}

// §6.4 items 33 and 37: a DMA semaphore holds the copy's byte count between start and wait
// (Tessera counts bytes: 8 * 128 * 4), and 0 after the wait.
TEST(AsyncCopy, ReadADmaSemaphore) {
  auto k = pl::kernel(pl::out_type<int32_t>({3}), pltpu::TensorCoreMesh("core", 1),
                      pl::scratch_types(pltpu::VMEM<float>({8, 128}), pltpu::SMEM<int32_t>({3}),
                                        pltpu::SemaphoreType::DMA))(
      [](pltpu::HbmRef<const float> x, pltpu::HbmRef<int32_t> o, pltpu::VmemRef<float> v,
         pltpu::SmemRef<int32_t> s, pltpu::DmaSemaphoreRef sem) {
        auto copy = pltpu::make_async_copy(x.at(pl::ds(0, 8)), v, sem);
        s(0) = pl::semaphore_read(sem);
        copy.start();
        s(1) = pl::semaphore_read(sem);
        copy.wait();
        s(2) = pl::semaphore_read(sem);
        pltpu::sync_copy(s, o);
      });
  EXPECT_EQ(k(ramp({16, 128})).to_vector(), (std::vector<int32_t>{0, 4096, 0}));
}

// §6.4 item 28 (test_hbm_vmem_dma_indexing): an integer index squeezes the leading axis.
TEST(AsyncCopy, IntegerIndexSqueezes) {
  const Array<float> x = ramp({3, 8, 128});
  auto k = pl::kernel(pl::out_type<float>({8, 128}), pltpu::TensorCoreMesh("core", 1),
                      pl::scratch_types(pltpu::VMEM<float>({8, 128}), pltpu::SemaphoreType::DMA))(
      [](pltpu::HbmRef<const float> x_hbm, pltpu::HbmRef<float> o, pltpu::VmemRef<float> v,
         pltpu::DmaSemaphoreRef sem) {
        pltpu::async_copy(x_hbm.at(1), v, sem).wait();
        pltpu::async_copy(v, o, sem).wait();
      });
  const Array<float> o = k(x);
  for (int i = 0; i < 8; ++i)
    for (int j = 0; j < 128; ++j) ASSERT_EQ(o(i, j), x(1, i, j));
}

// §6.4 item 29 (test_hbm_smem_dma, test_smem_hbm_dma, test_vmem_vmem_dma).
TEST(AsyncCopy, SmemAndVmemToVmem) {
  Array<int32_t> x({8, 128});
  for (int64_t i = 0; i < x.size(); ++i) x[i] = static_cast<int32_t>(i);
  auto k =
      pl::kernel(pl::out_type(ShapeDtypeStruct<int32_t>{{8, 128}}, ShapeDtypeStruct<float>{{1, 2}}),
                 pltpu::TensorCoreMesh("core", 1),
                 pl::scratch_types(pltpu::SMEM<int32_t>({8, 128}), pltpu::VMEM<int32_t>({8, 128}),
                                   pltpu::VMEM<int32_t>({8, 128}), pltpu::SMEM<float>({1, 2}),
                                   pltpu::SemaphoreType::DMA))(
          [](pltpu::HbmRef<const int32_t> x_hbm, pltpu::HbmRef<int32_t> o, pltpu::HbmRef<float> o2,
             pltpu::SmemRef<int32_t> s, pltpu::VmemRef<int32_t> a, pltpu::VmemRef<int32_t> b,
             pltpu::SmemRef<float> small, pltpu::DmaSemaphoreRef sem) {
            pltpu::async_copy(x_hbm, s, sem).wait();  // HBM -> SMEM
            pltpu::async_copy(s, a, sem).wait();      // SMEM -> VMEM
            pltpu::async_copy(a, b, sem).wait();      // VMEM -> VMEM
            b = b + 1;
            pltpu::async_copy(b, o, sem).wait();  // VMEM -> HBM
            small(0, 0) = 1.5f;
            small(0, 1) = -2.0f;
            pltpu::async_copy(small, o2, sem).wait();  // SMEM -> HBM
          });
  auto [o, o2] = k(x);
  for (int64_t i = 0; i < o.size(); ++i) ASSERT_EQ(o[i], x[i] + 1);
  EXPECT_EQ(o2.to_vector(), (std::vector<float>{1.5f, -2.0f}));
}

// §6.4 item 30 (test_dynamic_dma_on_2nd_minor): the index and the size come from SMEM at run
// time; rows 3..7 of the output are set, the others keep what was there (zeros here).
TEST(AsyncCopy, DynamicSlices) {
  auto k = pl::kernel(pl::out_type<float>({16, 128}), pltpu::TensorCoreMesh("core", 1),
                      pl::scratch_types(pltpu::SMEM<int32_t>({2}), pltpu::VMEM<float>({16, 128}),
                                        pltpu::SemaphoreType::DMA))(
      [](pltpu::HbmRef<const float> data, pltpu::HbmRef<float> out, pltpu::SmemRef<int32_t> s,
         pltpu::VmemRef<float> zeros, pltpu::DmaSemaphoreRef sem) {
        zeros = jnp::zeros_like(zeros);
        pltpu::sync_copy(zeros, out);
        s(0) = 3;  // index
        s(1) = 5;  // size
        pltpu::async_copy(data.at(pl::ds(0, s(1))), out.at(pl::ds(s(0), s(1))), sem).wait();
      });
  const Array<float> o = k(Array<float>({8, 128}, 1.0f));
  for (int i = 0; i < 16; ++i)
    for (int j = 0; j < 128; ++j) ASSERT_EQ(o(i, j), (i >= 3 && i < 8) ? 1.0f : 0.0f) << i;
}

// A manual double-buffered loop (what emit_pipeline does): while block b is computed, block
// b + 1 is in flight into the other slot; each slot has its own DMA semaphore.
TEST(AsyncCopy, DoubleBufferedLoop) {
  constexpr int kBlocks = 12;
  const Array<float> x = ramp({kBlocks * 256});
  for (int cores : {1, 2, 4}) {
    auto k = pl::kernel(
        pl::out_type<float>({kBlocks * 256}), pltpu::TensorCoreMesh("core", cores),
        pl::scratch_types(pltpu::VMEM<float>({2, 256}), pltpu::VMEM<float>({2, 256}),
                          pltpu::SemaphoreType::DMA({2}), pltpu::SemaphoreType::DMA({2})))(
        [cores](pltpu::HbmRef<const float> x_hbm, pltpu::HbmRef<float> o_hbm,
                pltpu::VmemRef<float> in, pltpu::VmemRef<float> out, pltpu::DmaSemaphoreRef in_sem,
                pltpu::DmaSemaphoreRef out_sem) {
          const int me = lax::axis_index("core");
          auto in_copy = [&](int b, int slot) {
            return pltpu::make_async_copy(x_hbm.at(pl::ds(b * 256, 256)), in.at(slot),
                                          in_sem.at(slot));
          };
          auto out_copy = [&](int b, int slot) {
            return pltpu::make_async_copy(out.at(slot), o_hbm.at(pl::ds(b * 256, 256)),
                                          out_sem.at(slot));
          };
          int slot = 0;
          if (me < kBlocks) in_copy(me, 0).start();
          for (int b = me, i = 0; b < kBlocks; b += cores, ++i, slot ^= 1) {
            if (b + cores < kBlocks) in_copy(b + cores, slot ^ 1).start();  // prefetch
            in_copy(b, slot).wait();
            if (i >= 2) out_copy(b - 2 * cores, slot).wait();  // the slot's last write-back
            out.at(slot) = in.at(slot) * 3.0f;
            out_copy(b, slot).start();
          }
          // Drain the (up to two) write-backs still in flight.
          int last = 0;
          for (int b = me; b < kBlocks; b += cores) ++last;
          for (int i = std::max(0, last - 2); i < last; ++i) {
            out_copy(me + i * cores, i % 2).wait();
          }
        });
    const Array<float> o = k(x);
    for (int64_t i = 0; i < o.size(); ++i) ASSERT_EQ(o[i], x[i] * 3.0f) << cores;
  }
}

TEST(AsyncCopy, ADescriptorMayStartAgainAfterItsWait) {
  const Array<float> x = ramp({128});
  auto k = pl::kernel(pl::out_type<float>({128}), pltpu::TensorCoreMesh("core", 1),
                      pl::scratch_types(pltpu::VMEM<float>({128}), pltpu::SemaphoreType::DMA))(
      [](pltpu::HbmRef<const float> x_hbm, pltpu::HbmRef<float> o, pltpu::VmemRef<float> v,
         pltpu::DmaSemaphoreRef sem) {
        auto in = pltpu::make_async_copy(x_hbm, v, sem);
        auto out = pltpu::make_async_copy(v, o, sem);
        for (int r = 0; r < 3; ++r) {
          in.start();
          in.wait();
          v = v + 1.0f;
          out.start();
          out.wait();
        }
      });
  const Array<float> o = k(x);
  for (int64_t i = 0; i < o.size(); ++i) ASSERT_EQ(o[i], x[i] + 1.0f);
}

TEST(AsyncCopy, SyncCopyIsUnchanged) {
  const Array<float> x = ramp({256});
  auto k = pl::kernel(pl::out_type<float>({256}), pltpu::TensorCoreMesh("core", 1),
                      pl::scratch_types(pltpu::VMEM<float>({256})))(
      [](pltpu::HbmRef<const float> x_hbm, pltpu::HbmRef<float> o, pltpu::VmemRef<float> v) {
        pltpu::sync_copy(x_hbm, v);
        pltpu::sync_copy(v, o);
      });
  EXPECT_EQ(k(x).to_vector(), x.to_vector());
}

// ---- errors ------------------------------------------------------------------------------

TEST(AsyncCopyErrors, ShapeMismatchAtStart) {
  int line = 0;
  auto k = pl::kernel(pl::out_type<float>({256}), pltpu::TensorCoreMesh("core", 2),
                      pl::scratch_types(pltpu::VMEM<float>({128}), pltpu::SemaphoreType::DMA))(
      [&](pltpu::HbmRef<float> o, pltpu::VmemRef<float> v, pltpu::DmaSemaphoreRef sem) {
        v = jnp::zeros_like(v);
        if (lax::axis_index("core") == 1) {
          auto copy = pltpu::make_async_copy(v, o.at(pl::ds(0, 100)), sem);
          line = __LINE__ + 1;
          copy.start();
        }
      });
  auto err = tessera::testing::catch_error<KernelError>([&] { k(); });
  ASSERT_TRUE(err);
  EXPECT_EQ(err->kind(), ErrorKind::kShapeMismatch);
  EXPECT_EQ(err->core(), 1);
  EXPECT_EQ(static_cast<int>(err->where().line()), line);
  EXPECT_TRUE(contains(err->what(), "async_copy.start at async_copy_test.cc:")) << err->what();
  EXPECT_TRUE(contains(err->what(),
                       "source VMEM ref of shape (128,) and destination HBM ref of "
                       "shape (100,) differ"))
      << err->what();
}

TEST(AsyncCopyErrors, StartedTwiceBeforeItsWait) {
  int first = 0;
  int second = 0;
  auto k = pl::kernel(pl::out_type<float>({128}), pltpu::TensorCoreMesh("core", 1),
                      pl::scratch_types(pltpu::VMEM<float>({128}), pltpu::SemaphoreType::DMA))(
      [&](pltpu::HbmRef<float> o, pltpu::VmemRef<float> v, pltpu::DmaSemaphoreRef sem) {
        v = jnp::zeros_like(v);
        auto copy = pltpu::make_async_copy(v, o, sem);
        first = __LINE__ + 1;
        copy.start();
        second = __LINE__ + 1;
        copy.start();
      });
  auto err = tessera::testing::catch_error<KernelError>([&] { k(); });
  ASSERT_TRUE(err);
  EXPECT_EQ(err->kind(), ErrorKind::kInvalidArgument);
  EXPECT_EQ(static_cast<int>(err->where().line()), second);
  EXPECT_TRUE(contains(err->what(), "was started at async_copy_test.cc:" + std::to_string(first) +
                                        " and has not been waited since"))
      << err->what();
}

TEST(AsyncCopyErrors, WaitWithoutACopyTimesOut) {
  int line = 0;
  auto k =
      pl::kernel(pl::out_type<float>({8, 128}), pltpu::TensorCoreMesh("core", 1), kShortTimeout,
                 pl::scratch_types(pltpu::VMEM<float>({8, 128}), pltpu::SemaphoreType::DMA))(
          [&](pltpu::HbmRef<float> o, pltpu::VmemRef<float> v, pltpu::DmaSemaphoreRef sem) {
            auto copy = pltpu::make_async_copy(v, o, sem);
            line = __LINE__ + 1;
            copy.wait();  // never started
          });
  auto err = tessera::testing::catch_error<KernelError>([&] { k(); });
  ASSERT_TRUE(err);
  EXPECT_EQ(err->kind(), ErrorKind::kTimeout);
  EXPECT_EQ(static_cast<int>(err->where().line()), line);
  EXPECT_TRUE(contains(err->what(), "async_copy.wait at async_copy_test.cc:")) << err->what();
  EXPECT_TRUE(contains(err->what(),
                       "scratch #1 SemaphoreType.DMA holds 0 bytes after 50 ms, "
                       "short of the 4096 bytes this wait needs"))
      << err->what();
  EXPECT_TRUE(contains(err->what(),
                       "a DMA that never came: this descriptor's source is float32 "
                       "(8, 128) (4096 bytes)"))
      << err->what();
}

TEST(AsyncCopyErrors, AWaitForMoreBytesThanWereCopied) {
  int line = 0;
  auto k =
      pl::kernel(pl::out_type<float>({16, 128}), pltpu::TensorCoreMesh("core", 1), kShortTimeout,
                 pl::scratch_types(pltpu::VMEM<float>({16, 128}), pltpu::SemaphoreType::DMA))(
          [&](pltpu::HbmRef<float> o, pltpu::VmemRef<float> v, pltpu::DmaSemaphoreRef sem) {
            v = jnp::zeros_like(v);
            pltpu::async_copy(v.at(pl::ds(0, 8)), o.at(pl::ds(0, 8)), sem);
            line = __LINE__ + 1;
            pltpu::make_async_copy(v, o, sem).wait();
          });
  auto err = tessera::testing::catch_error<KernelError>([&] { k(); });
  ASSERT_TRUE(err);
  EXPECT_EQ(err->kind(), ErrorKind::kTimeout);
  EXPECT_EQ(static_cast<int>(err->where().line()), line);
  EXPECT_TRUE(contains(err->what(), "holds 4096 bytes after 50 ms, short of the 8192 bytes"))
      << err->what();
}

TEST(AsyncCopyErrors, TheSemaphoreMustBeASingleOne) {
  int line = 0;
  auto k = pl::kernel(pl::out_type<float>({128}), pltpu::TensorCoreMesh("core", 1),
                      pl::scratch_types(pltpu::VMEM<float>({128}), pltpu::SemaphoreType::DMA({2})))(
      [&](pltpu::HbmRef<float> o, pltpu::VmemRef<float> v, pltpu::DmaSemaphoreRef sems) {
        line = __LINE__ + 1;
        pltpu::async_copy(v, o, sems).wait();
      });
  auto err = tessera::testing::catch_error<KernelError>([&] { k(); });
  ASSERT_TRUE(err);
  EXPECT_EQ(err->kind(), ErrorKind::kShapeMismatch);
  EXPECT_EQ(static_cast<int>(err->where().line()), line);
  EXPECT_TRUE(contains(err->what(), "pltpu::async_copy at async_copy_test.cc:")) << err->what();
  EXPECT_TRUE(contains(err->what(), "DMA semaphore view has shape (2,)")) << err->what();
}

TEST(AsyncCopyErrors, ACopyNeverWaitedLeaksItsBytes) {
  auto b = pl::kernel(pl::out_type<float>({128}), pltpu::TensorCoreMesh("core", 1),
                      pl::scratch_types(pltpu::VMEM<float>({128}), pltpu::SemaphoreType::DMA));
  const int line = __LINE__ + 1;
  auto k = b([](pltpu::HbmRef<float> o, pltpu::VmemRef<float> v, pltpu::DmaSemaphoreRef sem) {
    v = jnp::zeros_like(v);
    pltpu::async_copy(v, o, sem);  // started, never waited
  });
  auto err = tessera::testing::catch_error<KernelError>([&] { k(); });
  ASSERT_TRUE(err);
  EXPECT_EQ(err->kind(), ErrorKind::kSemaphoreLeak);
  EXPECT_EQ(static_cast<int>(err->where().line()), line);
  EXPECT_TRUE(contains(err->what(), "scratch #1 SemaphoreType.DMA holds 512 bytes at kernel exit"))
      << err->what();
}

TEST(AsyncCopyErrors, OutsideAKernelNothingIsCopied) {
  std::vector<float> src(8, 1.0f), dst(8, 0.0f);
  detail::SemaphoreCell cell{0};
  pltpu::DmaSemaphoreRef sem(&cell, Shape{});
  auto copy = pltpu::make_async_copy(pltpu::HbmRef<const float>(src.data(), {8}),
                                     pltpu::VmemRef<float>(dst.data(), {8}), sem);
  const int line = __LINE__ + 1;
  EXPECT_TESSERA_ERROR(copy.start(), UsageError, ErrorKind::kOutsideKernel,
                       "async_copy.start was called outside a kernel body", line);
  for (float v : dst) EXPECT_EQ(v, 0.0f);
  EXPECT_EQ(cell.load(), 0);
}

}  // namespace
