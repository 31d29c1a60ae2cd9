// pl::kernel: outputs, inputs, scratch, capacity checks, errors across cores, concurrency.
#include <gtest/gtest.h>

#include <atomic>
#include <stdexcept>
#include <thread>
#include <tuple>
#include <vector>

#include "support/expect_error.h"
#include "tessera/tessera.h"

namespace {
using namespace tessera;

// out = x * 2 + 1, each core taking one contiguous share of 128-element blocks.
auto make_affine(int cores) {
  return pl::kernel(
      pl::out_type<float>({1024}), pltpu::TensorCoreMesh("core", cores),
      pl::scratch_types(pltpu::VMEM<float>({128}), pltpu::VMEM<float>({128})),
      pl::name("affine"))([cores](pltpu::HbmRef<const float> x, pltpu::HbmRef<float> o,
                                  pltpu::VmemRef<float> xv, pltpu::VmemRef<float> ov) {
    const int c = lax::axis_index("core");
    for (int b = c; b < 1024 / 128; b += cores) {
      pltpu::sync_copy(x.at(pl::ds(b * 128, 128)), xv);
      ov = xv * 2.0f + 1.0f;
      pltpu::sync_copy(ov, o.at(pl::ds(b * 128, 128)));
    }
  });
}

TEST(Kernel, InputsOutputsAndScratch) {
  Array<float> x({1024});
  for (int64_t k = 0; k < x.size(); ++k) x[k] = static_cast<float>(k) * 0.25f;
  for (int cores : {1, 2, 3}) {
    const Array<float> o = make_affine(cores)(x);
    ASSERT_EQ(o.shape(), Shape({1024}));
    for (int64_t k = 0; k < o.size(); ++k) ASSERT_EQ(o[k], x[k] * 2.0f + 1.0f) << cores;
  }
}

TEST(Kernel, SeveralOutputsComeBackAsATuple) {
  auto k = pl::kernel(pl::out_type(ShapeDtypeStruct<float>{{8}}, ShapeDtypeStruct<int32_t>{{2, 3}}),
                      pltpu::TensorCoreMesh("core", 1),
                      pl::scratch_types(pltpu::VMEM<float>({8}), pltpu::SMEM<int32_t>({2, 3})))(
      [](pltpu::HbmRef<float> a, pltpu::HbmRef<int32_t> b, pltpu::VmemRef<float> av,
         pltpu::SmemRef<int32_t> bs) {
        av = jnp::arange<float>(8) * 0.5f;
        for (int i = 0; i < 2; ++i)
          for (int j = 0; j < 3; ++j) bs(i, j) = 10 * i + j;
        pltpu::sync_copy(av, a);
        pltpu::sync_copy(bs, b);
      });
  auto [a, b] = k();
  static_assert(std::is_same_v<decltype(a), Array<float>>);
  static_assert(std::is_same_v<decltype(b), Array<int32_t>>);
  EXPECT_EQ(a[7], 3.5f);
  EXPECT_EQ(b(1, 2), 12);
  EXPECT_EQ(b.shape(), Shape({2, 3}));
}

TEST(Kernel, OptionsInAnyOrderAndGenericBodies) {
  auto k =
      pl::kernel(pl::scratch_types(pltpu::VMEM<int32_t>({4})), pl::name("gen"),
                 pltpu::CompilerParams{.vmem_limit_bytes = 1 << 20},
                 pltpu::TensorCoreMesh("core", 2), pl::out_type<int32_t>({8}))([](auto o, auto v) {
        const int c = lax::axis_index("core");
        v = jnp::arange<int32_t>(4) + 4 * c;
        pltpu::sync_copy(v, o.at(pl::ds(4 * c, 4)));
      });
  EXPECT_EQ(k.name(), "gen");
  const Array<int32_t> o = k();
  for (int i = 0; i < 8; ++i) EXPECT_EQ(o[i], i);
}

TEST(KernelErrors, ScratchOverCapacityFailsBeforeAnyCoreRuns) {
  std::atomic<int> ran{0};
  // Exactly the 16 MiB default budget: fits.
  auto k = pl::kernel(
      pltpu::TensorCoreMesh("core", 2),
      pl::scratch_types(pltpu::VMEM<float>({2048, 1024}), pltpu::VMEM<float>({2048, 1024})))(
      [&](pltpu::VmemRef<float>, pltpu::VmemRef<float>) { ran.fetch_add(1); });
  // 8 MiB + 64 bytes against an 8 MiB limit: over. The kernel's location is where its body is
  // bound, so bind it on a line of its own.
  auto b2 = pl::kernel(
      pltpu::TensorCoreMesh("core", 2), pltpu::CompilerParams{.vmem_limit_bytes = 8 << 20},
      pl::scratch_types(pltpu::VMEM<float>({2048, 1024}), pltpu::VMEM<float>({16})));
  const int line2 = __LINE__ + 1;
  auto k2 = b2([&](pltpu::VmemRef<float>, pltpu::VmemRef<float>) { ran.fetch_add(1); });
  EXPECT_NO_THROW(k());
  EXPECT_EQ(ran.load(), 2);
  ran = 0;
  auto err = tessera::testing::catch_error<UsageError>([&] { k2(); });
  ASSERT_TRUE(err);
  EXPECT_EQ(err->kind(), ErrorKind::kCapacityExceeded);
  EXPECT_EQ(static_cast<int>(err->where().line()), line2);
  const std::string msg = err->what();
  EXPECT_NE(msg.find("8388672 bytes of VMEM per core but the limit is 8388608"), std::string::npos)
      << msg;
  EXPECT_NE(msg.find("#0 VMEM<float32>(2048, 1024) = 8388608 bytes"), std::string::npos) << msg;
  EXPECT_NE(msg.find("vmem_limit_bytes"), std::string::npos) << msg;
  EXPECT_EQ(ran.load(), 0);
}

TEST(KernelErrors, DefaultVmemLimitAndOverride) {
  std::atomic<int> ran{0};
  // 17 MiB of scratch: over the 16 MiB default, fine with a 32 MiB limit.
  auto over_builder = pl::kernel(pltpu::TensorCoreMesh("core", 1),
                                 pl::scratch_types(pltpu::VMEM<int8_t>({17 << 20})));
  const int line = __LINE__ + 1;
  auto over = over_builder([&](pltpu::VmemRef<int8_t> v) { v(0) = 1; });
  EXPECT_TESSERA_ERROR(over(), UsageError, ErrorKind::kCapacityExceeded,
                       "but the limit is 16777216 bytes", line);
  auto ok = pl::kernel(
      pltpu::TensorCoreMesh("core", 1), pltpu::CompilerParams{.vmem_limit_bytes = 32 << 20},
      pl::scratch_types(pltpu::VMEM<int8_t>({17 << 20})))([&](pltpu::VmemRef<int8_t> v) {
    v((17 << 20) - 1) = 1;
    ran++;
  });
  EXPECT_NO_THROW(ok());
  EXPECT_EQ(ran.load(), 1);
  auto smem_builder = pl::kernel(pltpu::TensorCoreMesh("core", 1),
                                 pl::scratch_types(pltpu::SMEM<int32_t>({1 << 19})));
  const int smem_line = __LINE__ + 1;
  auto smem = smem_builder([](pltpu::SmemRef<int32_t>) {});
  EXPECT_TESSERA_ERROR(smem(), UsageError, ErrorKind::kCapacityExceeded, "of SMEM per core",
                       smem_line);
}

TEST(KernelErrors, BadCompilerParams) {
  auto b =
      pl::kernel(pltpu::TensorCoreMesh("core", 1), pltpu::CompilerParams{.vmem_limit_bytes = 0});
  const int line_2 = __LINE__ + 1;
  EXPECT_TESSERA_ERROR(b([] {}), UsageError, ErrorKind::kInvalidArgument, "vmem_limit_bytes=0",
                       line_2);
  auto c = pl::kernel(pltpu::TensorCoreMesh("core", 1),
                      pltpu::CompilerParams{.vmem_limit_bytes = int64_t{1} << 40});
  const int line_3 = __LINE__ + 1;
  EXPECT_TESSERA_ERROR(c([] {}), UsageError, ErrorKind::kInvalidArgument, "is outside 1..", line_3);
}

TEST(KernelErrors, ExceptionInOneCoreIsRethrownAndThePoolSurvives) {
  std::atomic<int> finished{0};
  auto k = pl::kernel(pl::out_type<float>({4}),
                      pltpu::TensorCoreMesh("core", 3))([&](pltpu::HbmRef<float>) {
    if (lax::axis_index("core") == 1) throw std::runtime_error("core one failed");
    finished.fetch_add(1);
  });
  bool got_output = false;
  try {
    auto out = k();
    got_output = true;
    (void)out;
  } catch (const std::runtime_error& e) {
    EXPECT_STREQ(e.what(), "core one failed");
  }
  EXPECT_FALSE(got_output);
  EXPECT_EQ(finished.load(), 2);
  // The pool is still usable.
  Array<float> x({1024}, 1.0f);
  const Array<float> o = make_affine(3)(x);
  EXPECT_EQ(o[1023], 3.0f);
}

TEST(KernelErrors, KernelErrorCarriesCoreAndName) {
  int line = 0;  // written by core 2 only, read after the launch
  auto k = pl::kernel(pltpu::TensorCoreMesh("core", 4), pl::name("picky"),
                      pl::scratch_types(pltpu::VMEM<float>({8})))([&](pltpu::VmemRef<float> v) {
    if (lax::axis_index("core") == 2) {
      line = __LINE__ + 1;
      v.at(pl::ds(4, 8));  // out of bounds, on core 2 only
    }
  });
  auto err = tessera::testing::catch_error<KernelError>([&] { k(); });
  ASSERT_TRUE(err);
  EXPECT_EQ(err->kind(), ErrorKind::kOutOfBounds);
  EXPECT_EQ(err->core(), 2);
  EXPECT_EQ(err->kernel_name(), "picky");
  EXPECT_EQ(static_cast<int>(err->where().line()), line);
  EXPECT_NE(std::string(err->what()).find("kernel 'picky', core 2"), std::string::npos)
      << err->what();
}

TEST(KernelErrors, NestedLaunchIsRejected) {
  auto inner = pl::kernel(pltpu::TensorCoreMesh("core", 1))([] {});
  auto outer = pl::kernel(pltpu::TensorCoreMesh("core", 2))([&] { inner(); });
  auto err = tessera::testing::catch_error<KernelError>([&] { outer(); });
  ASSERT_TRUE(err);
  EXPECT_EQ(err->kind(), ErrorKind::kInvalidArgument);
  EXPECT_NE(std::string(err->what()).find("kernels cannot nest"), std::string::npos);
}

TEST(Kernel, ConcurrentLaunchesFromHostThreads) {
  Array<float> x({1024});
  for (int64_t k = 0; k < x.size(); ++k) x[k] = static_cast<float>(k);
  std::atomic<int> bad{0};
  std::vector<std::thread> threads;
  for (int t = 0; t < 4; ++t) {
    threads.emplace_back([&, t] {
      auto k = make_affine(1 + t % 3);
      for (int rep = 0; rep < 25; ++rep) {
        const Array<float> o = k(x);
        for (int64_t i = 0; i < o.size(); ++i) {
          if (o[i] != x[i] * 2.0f + 1.0f) {
            bad.fetch_add(1);
            break;
          }
        }
      }
    });
  }
  for (auto& th : threads) th.join();
  EXPECT_EQ(bad.load(), 0);
}

TEST(Kernel, ScratchIsPerCore) {
  std::vector<std::atomic<uintptr_t>> addr(4);
  auto k = pl::kernel(pltpu::TensorCoreMesh("core", 4),
                      pl::scratch_types(pltpu::VMEM<float>({256})))([&](pltpu::VmemRef<float> v) {
    addr[static_cast<size_t>(lax::axis_index("core"))] = reinterpret_cast<uintptr_t>(v.data());
    EXPECT_EQ(reinterpret_cast<uintptr_t>(v.data()) % 64, 0u);
  });
  k();
  for (int a = 0; a < 4; ++a)
    for (int b = a + 1; b < 4; ++b)
      EXPECT_NE(addr[static_cast<size_t>(a)].load(), addr[static_cast<size_t>(b)].load());
}

}  // namespace

namespace {
TEST(Kernel, SeveralOutputsOfTheSameDtype) {
  using namespace tessera;
  auto k = pl::kernel(pl::out_type(ShapeDtypeStruct<float>{{4}}, ShapeDtypeStruct<float>{{2, 3}}),
                      pltpu::TensorCoreMesh("core", 1),
                      pl::scratch_types(pltpu::VMEM<float>({4}), pltpu::VMEM<float>({2, 3})))(
      [](pltpu::HbmRef<float> a, pltpu::HbmRef<float> b, pltpu::VmemRef<float> av,
         pltpu::VmemRef<float> bv) {
        av = jnp::full_like(av, 1.0f);
        bv = jnp::full_like(bv, 2.0f);
        pltpu::sync_copy(av, a);
        pltpu::sync_copy(bv, b);
      });
  auto [a, b] = k();
  EXPECT_EQ(a.shape(), Shape({4}));
  EXPECT_EQ(b.shape(), Shape({2, 3}));
  EXPECT_EQ(a[3], 1.0f);
  EXPECT_EQ(b(1, 2), 2.0f);
}
}  // namespace
