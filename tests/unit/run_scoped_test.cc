// pl::run_scoped: scoped VMEM / SMEM / semaphores above the kernel's scratch, f's result, nesting
// and reuse of a finished scope's space, semaphores (DMA, REGULAR, across cores), and the errors:
// over the VMEM budget (also when nested), SMEM over capacity, a scoped semaphore left non-zero,
// outside a kernel, and a throwing f releasing its scope.
#include <gtest/gtest.h>

#include <cstdint>
#include <stdexcept>
#include <string>
#include <vector>

#include "support/expect_error.h"
#include "tessera/tessera.h"

namespace {
using namespace tessera;

bool contains(const std::string& s, const std::string& part) {
  return s.find(part) != std::string::npos;
}

uintptr_t address(const void* p) { return reinterpret_cast<uintptr_t>(p); }

TEST(RunScoped, GivesRefsAndReturnsTheResult) {
  int result = 0;
  bool void_ran = false;
  auto k = pl::kernel(pltpu::TensorCoreMesh("core", 1))([&] {
    result = pl::run_scoped(
        [](pltpu::VmemRef<float> t, pltpu::SmemRef<int32_t> s) {
          EXPECT_EQ(t.shape(), Shape({8, 128}));
          EXPECT_EQ(s.shape(), Shape({4}));
          t = lax::broadcasted_iota<float>({8, 128}, 1);
          s(0) = 7;
          return s(0) + static_cast<int>(t(2, 3));
        },
        pltpu::VMEM<float>({8, 128}), pltpu::SMEM<int32_t>({4}));
    pl::run_scoped([&](pltpu::VmemRef<int8_t> b) { void_ran = b.size() == 3; },
                   pltpu::VMEM<int8_t>({3}));
  });
  k();
  EXPECT_EQ(result, 10);
  EXPECT_TRUE(void_ran);
}

// Scopes lie above the kernel's scratch and above each other, 64-byte aligned; a finished
// scope's space is reused by the next scope at the same depth.
TEST(RunScoped, NestsAboveTheScratchAndReusesSpace) {
  std::vector<uintptr_t> a;  // core 0 only
  auto k = pl::kernel(pltpu::TensorCoreMesh("core", 1),
                      pl::scratch_types(pltpu::VMEM<float>({100})))([&](pltpu::VmemRef<float> s) {
    a.push_back(address(s.data()));  // [0] scratch
    pl::run_scoped(
        [&](pltpu::VmemRef<float> outer) {
          a.push_back(address(outer.data()));  // [1]
          pl::run_scoped([&](pltpu::VmemRef<float> inner) { a.push_back(address(inner.data())); },
                         pltpu::VMEM<float>({16}));  // [2]
          pl::run_scoped([&](pltpu::VmemRef<float> again) { a.push_back(address(again.data())); },
                         pltpu::VMEM<float>({32}));  // [3]
        },
        pltpu::VMEM<float>({10}));
    pl::run_scoped([&](pltpu::VmemRef<float> next) { a.push_back(address(next.data())); },
                   pltpu::VMEM<float>({4}));  // [4]
  });
  k();
  ASSERT_EQ(a.size(), 5u);
  EXPECT_EQ(a[1], a[0] + 448);  // 400 bytes of scratch, rounded up to 64
  EXPECT_EQ(a[2], a[1] + 64);   // 40 bytes, rounded up
  EXPECT_EQ(a[3], a[2]);        // the inner scope's space, reused
  EXPECT_EQ(a[4], a[1]);        // the outer scope's space, reused
  for (uintptr_t p : a) EXPECT_EQ(p % 64, 0u);
}

TEST(RunScoped, WithSemaphores) {
  Array<float> x({8, 128});
  for (int64_t i = 0; i < x.size(); ++i) x[i] = static_cast<float>(i);
  auto k = pl::kernel(pl::out_type<float>({8, 128}), pltpu::TensorCoreMesh("core", 1))(
      [](pltpu::HbmRef<const float> x_hbm, pltpu::HbmRef<float> o) {
        pl::run_scoped(
            [&](pltpu::VmemRef<float> tmp, pltpu::DmaSemaphoreRef dma, pltpu::SemaphoreRef regs) {
              pltpu::async_copy(x_hbm, tmp, dma).wait();
              tmp = tmp + 1.0f;
              pl::semaphore_signal(regs.at(2), 2);
              EXPECT_EQ(pl::semaphore_read(regs.at(2)), 2);
              pl::semaphore_wait(regs.at(2), 2);
              // A nested scope with its own DMA semaphore.
              pl::run_scoped(
                  [&](pltpu::DmaSemaphoreRef out_sem) {
                    pltpu::async_copy(tmp, o, out_sem).wait();
                    EXPECT_EQ(pl::semaphore_read(out_sem), 0);
                  },
                  pltpu::SemaphoreType::DMA);
            },
            pltpu::VMEM<float>({8, 128}), pltpu::SemaphoreType::DMA,
            pltpu::SemaphoreType::REGULAR({3}));
      });
  const Array<float> o = k(x);
  for (int64_t i = 0; i < o.size(); ++i) ASSERT_EQ(o[i], x[i] + 1.0f);
}

// Every core makes the same scopes, so a scoped semaphore has the same slot on every core and
// core_barrier can signal the others' copies of it. A barrier on a kernel-scratch semaphore
// separates successive scopes: without it a fast core's signal for the next round could reach a
// slower core's semaphore before that core's scope has ended (and fail its scope-end check).
TEST(RunScoped, ScopedSemaphoresAcrossCores) {
  for (int cores : {2, 3}) {
    auto k =
        pl::kernel(pl::out_type<int32_t>({3}), pltpu::TensorCoreMesh("core", cores),
                   pl::scratch_types(pltpu::SemaphoreType::REGULAR, pltpu::SMEM<int32_t>({3})))(
            [cores](pltpu::HbmRef<int32_t> o, pltpu::SemaphoreRef between,
                    pltpu::SmemRef<int32_t> all) {
              const int me = lax::axis_index("core");
              for (int r = 0; r < 5; ++r) {
                pl::run_scoped(
                    [&](pltpu::SemaphoreRef sem, pltpu::SmemRef<int32_t> mine) {
                      mine(0) = 10 * r + me;
                      pltpu::sync_copy(mine, o.at(pl::ds(me, 1)));
                      pltpu::core_barrier(sem, "core");
                      pltpu::sync_copy(o.at(pl::ds(0, cores)), all.at(pl::ds(0, cores)));
                      for (int c = 0; c < cores; ++c) EXPECT_EQ(all(c), 10 * r + c);
                    },
                    pltpu::SemaphoreType::REGULAR, pltpu::SMEM<int32_t>({1}));
                pltpu::core_barrier(between, "core");  // every core has left the scope
              }
            });
    const Array<int32_t> o = k();
    for (int c = 0; c < cores; ++c) EXPECT_EQ(o[c], 40 + c);
  }
}

// ---- errors ------------------------------------------------------------------------------

TEST(RunScopedErrors, OverTheVmemBudget) {
  int line = 0;
  auto k = pl::kernel(pltpu::TensorCoreMesh("core", 2),
                      pltpu::CompilerParams{.vmem_limit_bytes = 64 << 10},
                      pl::scratch_types(pltpu::VMEM<float>({8192})))([&](pltpu::VmemRef<float>) {
    if (lax::axis_index("core") == 1) {
      line = __LINE__ + 1;
      pl::run_scoped([](pltpu::VmemRef<float>, pltpu::VmemRef<int32_t>) {},
                     pltpu::VMEM<float>({8192}), pltpu::VMEM<int32_t>({16}));
    }
  });
  auto err = tessera::testing::catch_error<KernelError>([&] { k(); });
  ASSERT_TRUE(err);
  EXPECT_EQ(err->kind(), ErrorKind::kCapacityExceeded);
  EXPECT_EQ(err->core(), 1);
  EXPECT_EQ(static_cast<int>(err->where().line()), line);
  EXPECT_TRUE(contains(err->what(), "pl::run_scoped at run_scoped_test.cc:")) << err->what();
  EXPECT_TRUE(contains(err->what(),
                       "the scope needs 32832 bytes of VMEM (#0 VMEM<float32>(8192,) = 32768 "
                       "bytes, #1 VMEM<int32>(16,) = 64 bytes) but only 32768 of the 65536 bytes "
                       "of the kernel's VMEM budget are free (the kernel's scratch uses 32768, "
                       "enclosing run_scoped scopes 0)"))
      << err->what();
  EXPECT_TRUE(contains(err->what(), "vmem_limit_bytes")) << err->what();
}

TEST(RunScopedErrors, NestedOverTheVmemBudget) {
  int line = 0;
  int inner_ran = 0;
  auto k = pl::kernel(pltpu::TensorCoreMesh("core", 1),
                      pltpu::CompilerParams{.vmem_limit_bytes = 32 << 10})([&] {
    pl::run_scoped(
        [&](pltpu::VmemRef<float>) {
          // 16 KiB fits beside the outer 24 KiB? No: 8 KiB are left.
          line = __LINE__ + 1;
          pl::run_scoped([&](pltpu::VmemRef<float>) { ++inner_ran; }, pltpu::VMEM<float>({4096}));
        },
        pltpu::VMEM<float>({6144}));
  });
  auto err = tessera::testing::catch_error<KernelError>([&] { k(); });
  ASSERT_TRUE(err);
  EXPECT_EQ(err->kind(), ErrorKind::kCapacityExceeded);
  EXPECT_EQ(static_cast<int>(err->where().line()), line);
  EXPECT_TRUE(contains(err->what(), "needs 16384 bytes of VMEM")) << err->what();
  EXPECT_TRUE(contains(err->what(), "only 8192 of the 32768 bytes")) << err->what();
  EXPECT_TRUE(contains(err->what(), "enclosing run_scoped scopes 24576")) << err->what();
  EXPECT_EQ(inner_ran, 0);
}

TEST(RunScopedErrors, SmemOverCapacity) {
  int line = 0;
  auto k = pl::kernel(pltpu::TensorCoreMesh("core", 1))([&] {
    line = __LINE__ + 1;
    pl::run_scoped([](pltpu::SmemRef<int32_t>) {}, pltpu::SMEM<int32_t>({1 << 19}));
  });
  auto err = tessera::testing::catch_error<KernelError>([&] { k(); });
  ASSERT_TRUE(err);
  EXPECT_EQ(err->kind(), ErrorKind::kCapacityExceeded);
  EXPECT_EQ(static_cast<int>(err->where().line()), line);
  EXPECT_TRUE(contains(err->what(), "needs 2097152 bytes of SMEM")) << err->what();
}

TEST(RunScopedErrors, AScopedSemaphoreLeftNonZero) {
  int line = 0;
  auto k = pl::kernel(pltpu::TensorCoreMesh("core", 1))([&] {
    line = __LINE__ + 1;
    pl::run_scoped(
        [](pltpu::VmemRef<float>, pltpu::SemaphoreRef sems) { pl::semaphore_signal(sems.at(1)); },
        pltpu::VMEM<float>({8}), pltpu::SemaphoreType::REGULAR({2}));
  });
  auto err = tessera::testing::catch_error<KernelError>([&] { k(); });
  ASSERT_TRUE(err);
  EXPECT_EQ(err->kind(), ErrorKind::kSemaphoreLeak);
  EXPECT_EQ(static_cast<int>(err->where().line()), line);
  EXPECT_TRUE(contains(err->what(),
                       "run_scoped #1 SemaphoreType.REGULAR((2,)) element (1,) holds "
                       "1 when the scope ends"))
      << err->what();
}

TEST(RunScopedErrors, ATimeoutNamesTheScopedSemaphore) {
  int line = 0;
  int scope_line = 0;
  auto k = pl::kernel(pltpu::TensorCoreMesh("core", 1),
                      pltpu::CompilerParams{.wait_timeout_ms = 50})([&] {
    scope_line = __LINE__ + 1;
    pl::run_scoped(
        [&](pltpu::SemaphoreRef sem) {
          line = __LINE__ + 1;
          pl::semaphore_wait(sem);
        },
        pltpu::SemaphoreType::REGULAR);
  });
  auto err = tessera::testing::catch_error<KernelError>([&] { k(); });
  ASSERT_TRUE(err);
  EXPECT_EQ(err->kind(), ErrorKind::kTimeout);
  EXPECT_EQ(static_cast<int>(err->where().line()), line);
  EXPECT_TRUE(contains(err->what(),
                       "run_scoped #0 SemaphoreType.REGULAR (scope at "
                       "run_scoped_test.cc:" +
                           std::to_string(scope_line) + ") holds 0 after 50 ms"))
      << err->what();
}

// f throws: the scope is released (its space is reused, its semaphores are zero again) and the
// exception goes on.
TEST(RunScoped, AThrowingBodyReleasesTheScope) {
  uintptr_t first = 0;
  uintptr_t second = 0;
  int32_t left = -1;
  auto k = pl::kernel(pltpu::TensorCoreMesh("core", 1))([&] {
    try {
      pl::run_scoped(
          [&](pltpu::VmemRef<float> t, pltpu::SemaphoreRef sem) {
            first = address(t.data());
            pl::semaphore_signal(sem, 4);
            throw std::runtime_error("body failed");
          },
          pltpu::VMEM<float>({64}), pltpu::SemaphoreType::REGULAR);
    } catch (const std::runtime_error&) {
    }
    pl::run_scoped(
        [&](pltpu::VmemRef<float> t, pltpu::SemaphoreRef sem) {
          second = address(t.data());
          left = pl::semaphore_read(sem);
        },
        pltpu::VMEM<float>({64}), pltpu::SemaphoreType::REGULAR);
  });
  k();
  EXPECT_NE(first, 0u);
  EXPECT_EQ(first, second);
  EXPECT_EQ(left, 0);
}

TEST(RunScopedErrors, OutsideAKernel) {
  const int line = __LINE__ + 1;
  EXPECT_TESSERA_ERROR(pl::run_scoped([](pltpu::VmemRef<float>) {}, pltpu::VMEM<float>({8})),
                       UsageError, ErrorKind::kOutsideKernel,
                       "run_scoped allocates the running core's VMEM", line);
}

TEST(RunScopedErrors, ARefIntoTheScopeCannotEscape) {
  int line = 0;
  auto k = pl::kernel(pl::out_type<float>({128}), pltpu::TensorCoreMesh("core", 1),
                      pl::scratch_types(pltpu::VMEM<float>({128})))(
      [&](pltpu::HbmRef<float> o, pltpu::VmemRef<float> keep) {
        // A ref of the caller's own scratch may come back; one of the scope's buffers may not.
        const pltpu::VmemRef<float> mine = pl::run_scoped(
            [&](pltpu::VmemRef<float> t) {
              t = jnp::full_like(t, 2.0f);
              keep = t;
              return keep;
            },
            pltpu::VMEM<float>({128}));
        pltpu::sync_copy(mine, o);
        auto escape = [](pltpu::VmemRef<float> t) { return t; };
        // clang-format off
        line = __LINE__; const pltpu::VmemRef<float> gone = pl::run_scoped(escape, pltpu::VMEM<float>({128}));
        // clang-format on
        (void)gone;
      });
  auto err = tessera::testing::catch_error<KernelError>([&] { k(); });
  ASSERT_TRUE(err);
  EXPECT_EQ(err->kind(), ErrorKind::kInvalidArgument) << err->what();
  EXPECT_EQ(static_cast<int>(err->where().line()), line);
  EXPECT_TRUE(contains(err->what(), "returns a VMEM ref into one of the scope's own buffers"))
      << err->what();
}

}  // namespace
