// In-kernel values (tessera/value.h): Pallas' `x = x_ref[...]`, named results of expressions,
// reductions and products, their VMEM accounting, their lifetime rules and their errors.
#include <gtest/gtest.h>

#include <atomic>
#include <cmath>
#include <optional>
#include <vector>

#include "support/expect_error.h"
#include "tessera/tessera.h"

namespace {
using namespace tessera;

Array<float> iota_array(Shape s, float scale = 1.0f, float offset = 0.0f) {
  Array<float> a(std::move(s));
  for (int64_t i = 0; i < a.size(); ++i) a[i] = static_cast<float>(i) * scale + offset;
  return a;
}

TEST(Value, ReadingARefTakesACopyThatLaterWritesDoNotChange) {
  auto k = pl::pallas_call(
      [](pltpu::VmemRef<float> x_ref, pltpu::VmemRef<float> o_ref) {
        jnp::Value x = x_ref[pl::ellipsis];  // Pallas: x = x_ref[...]
        x_ref[pl::ellipsis] = jnp::zeros_like(x_ref);
        o_ref[pl::ellipsis] = x + x_ref;  // the old elements, plus the zeros
      },
      pl::out_shape<float>({8, 128}), pl::input_output_aliases({{0, 0}}));
  const Array<float> x = iota_array({8, 128});
  const Array<float> o = k(x);
  for (int64_t i = 0; i < o.size(); ++i) ASSERT_EQ(o[i], x[i]) << i;
}

TEST(Value, NamedPureExpressionsAndReductionsCompose) {
  // A softmax over rows, written as Pallas writes it, every intermediate a value or a pure
  // expression.
  auto k = pl::pallas_call(
      [](pltpu::VmemRef<const float> x_ref, pltpu::VmemRef<float> o_ref) {
        jnp::Value x = x_ref[pl::ellipsis];
        jnp::Value m = jnp::max(x, 1, true);
        auto p = jnp::exp(x - m);  // pure: reads values only
        jnp::Value l = p.sum(1, true);
        o_ref[pl::ellipsis] = p / l;
      },
      pl::out_shape<float>({4, 16}));
  const Array<float> x = iota_array({4, 16}, 0.25f, -2.0f);
  const Array<float> o = k(x);
  for (int r = 0; r < 4; ++r) {
    double m = -1e30, l = 0;
    for (int c = 0; c < 16; ++c) m = std::max(m, static_cast<double>(x(r, c)));
    for (int c = 0; c < 16; ++c) l += std::exp(x(r, c) - m);
    for (int c = 0; c < 16; ++c) {
      EXPECT_NEAR(o(r, c), std::exp(x(r, c) - m) / l, 1e-6) << r << "," << c;
    }
  }
}

TEST(Value, OneElementConvertsToAScalarAndSteersControlFlow) {
  auto k = pl::pallas_call(
      [](pltpu::VmemRef<const int32_t> y_ref, pltpu::VmemRef<const float> x_ref,
         pltpu::VmemRef<float> o_ref) {
        const int idx = jnp::sum(y_ref[pl::ellipsis]);  // Pallas: idx = y_ref[...].sum()
        const float m = jnp::max(x_ref[pl::ellipsis]);
        o_ref[pl::ellipsis] = jnp::zeros_like(o_ref);
        if (jnp::max(x_ref[pl::ellipsis]) > 3.0f) o_ref[pl::ds(idx, 1)] = jnp::full<float>({1}, m);
        jnp::Value<float> s(2.5f);
        o_ref[pl::ds(0, 1)] = jnp::full<float>({1}, s.item() + static_cast<float>(s));
      },
      pl::out_shape<float>({8}));
  Array<int32_t> y({3});
  y[0] = 1;
  y[1] = 2;
  y[2] = 2;
  const Array<float> x = iota_array({4}, 1.5f);  // max 4.5
  const Array<float> o = k(y, x);
  EXPECT_EQ(o[0], 5.0f);
  EXPECT_EQ(o[5], 4.5f);
  EXPECT_EQ(o[4], 0.0f);
}

TEST(Value, ViewsElementsAndMethods) {
  auto k = pl::pallas_call(
      [](pltpu::VmemRef<const float> x_ref, pltpu::VmemRef<float> o_ref,
         pltpu::VmemRef<float> t_ref) {
        jnp::Value x = x_ref[pl::ellipsis];
        jnp::Value top = x[{pl::ds(0, 2), pl::all}];  // x[0:2, :]
        EXPECT_EQ(top.shape(), Shape({2, 8}));
        EXPECT_EQ(x(1, 3), 11.0f);
        EXPECT_EQ(x.at(1)(3), 11.0f);
        EXPECT_EQ(x.ndim(), 2);
        EXPECT_EQ(x.size(), 32);
        o_ref[pl::ellipsis] = top.astype<float>() * 2.0f;
        t_ref[pl::ellipsis] = x.T();
      },
      pl::out_shape(ShapeDtypeStruct<float>{{2, 8}}, ShapeDtypeStruct<float>{{8, 4}}));
  const Array<float> x = iota_array({4, 8});
  auto [o, t] = k(x);
  for (int r = 0; r < 2; ++r)
    for (int c = 0; c < 8; ++c) EXPECT_EQ(o(r, c), 2.0f * x(r, c));
  for (int r = 0; r < 8; ++r)
    for (int c = 0; c < 4; ++c) EXPECT_EQ(t(r, c), x(c, r));
}

TEST(Value, RebindingInALoopReusesVmem) {
  // 2000 rebinds of a 64 KiB accumulator under a 1 MiB budget: the old blocks are freed.
  auto k = pl::pallas_call(
      [](pltpu::VmemRef<const float> x_ref, pltpu::VmemRef<float> o_ref) {
        jnp::Value acc = jnp::zeros<float>({128, 128});
        for (int i = 0; i < 2000; ++i) acc = acc + x_ref[pl::ellipsis];
        o_ref[pl::ellipsis] = acc;
      },
      pl::out_shape<float>({128, 128}),
      pltpu::CompilerParams{.vmem_limit_bytes = int64_t{1} << 20});
  const Array<float> x = iota_array({128, 128}, 0.0f, 0.5f);
  const Array<float> o = k(x);
  EXPECT_EQ(o(5, 7), 1000.0f);
}

TEST(Value, ValuesCountAgainstTheVmemBudget) {
  std::atomic<int> line{0};
  auto k = pl::pallas_call(
      [&](pltpu::VmemRef<const float> x_ref, pltpu::VmemRef<float> o_ref) {
        jnp::Value a = x_ref[pl::ellipsis] * 2.0f;
        line = __LINE__ + 1;
        jnp::Value b = x_ref[pl::ellipsis] * 3.0f;  // a second 512 KiB value does not fit
        o_ref[pl::ellipsis] = a + b;
      },
      pl::out_shape<float>({256, 512}),
      pltpu::CompilerParams{.vmem_limit_bytes =
                                (int64_t{1} << 20) + (int64_t{1} << 20) / 2 + (int64_t{1} << 19)});
  const Array<float> x = iota_array({256, 512});
  tessera::testing::expect_kernel_error([&] { k(x); }, ErrorKind::kCapacityExceeded, "jnp::Value",
                                        line);
}

TEST(Value, AValueCannotOutliveItsKernel) {
  std::optional<jnp::Value<float>> kept;
  auto k = pl::kernel(pl::out_type<float>({8}), pltpu::TensorCoreMesh("core", 1),
                      pl::scratch_types(pltpu::VMEM<float>({8})))(
      [&](pltpu::HbmRef<float> o, pltpu::VmemRef<float> v) {
        v = jnp::arange<float>(8);
        kept = jnp::Value(v[pl::ellipsis]);
        pltpu::sync_copy(v, o);
      });
  auto e = tessera::testing::catch_error<KernelError>([&] { k(); });
  ASSERT_TRUE(e);
  EXPECT_NE(std::string(e->what()).find("still alive after the kernel body returned"),
            std::string::npos)
      << e->what();
  // Using it afterwards is an error, not a read of another kernel's memory.
  auto u = tessera::testing::catch_error<UsageError>([&] { (void)kept->item(); });
  ASSERT_TRUE(u);
  EXPECT_NE(std::string(u->what()).find("belongs to a kernel that has ended"), std::string::npos)
      << u->what();
  kept.reset();  // destroying it is harmless
}

TEST(Value, AHostValueCannotBeUsedInsideAKernel) {
  std::vector<float> data(8, 1.0f);
  const jnp::Value host = pltpu::VmemRef<float>(data.data(), Shape{8}) * 2.0f;
  EXPECT_EQ(host(3), 2.0f);
  auto k = pl::pallas_call([&](pltpu::VmemRef<float> o) { o[pl::ellipsis] = host + 1.0f; },
                           pl::out_shape<float>({8}));
  auto e = tessera::testing::catch_error<KernelError>([&] { k(); });
  ASSERT_TRUE(e);
  EXPECT_NE(std::string(e->what()).find("made outside the kernel"), std::string::npos) << e->what();
}

TEST(Value, ErrorsNameTheUsersLine) {
  std::atomic<int> line{0};
  auto k = pl::pallas_call(
      [&](pltpu::VmemRef<const float> x_ref, pltpu::VmemRef<float> o_ref) {
        jnp::Value x = x_ref[pl::ellipsis];
        line = __LINE__ + 1;
        const float f = x.item();  // 8 elements
        o_ref[pl::ellipsis] = jnp::full_like(o_ref, f);
      },
      pl::out_shape<float>({8}));
  const Array<float> x = iota_array({8});
  tessera::testing::expect_kernel_error([&] { k(x); }, ErrorKind::kInvalidArgument,
                                        "need exactly one", line);
  auto k2 = pl::pallas_call(
      [&](pltpu::VmemRef<const float> x_ref, pltpu::VmemRef<float> o_ref) {
        jnp::Value v = x_ref[pl::ellipsis];
        line = __LINE__ + 1;
        o_ref[pl::ellipsis] = jnp::full_like(o_ref, v(9));
      },
      pl::out_shape<float>({8}));
  tessera::testing::expect_kernel_error([&] { k2(x); }, ErrorKind::kOutOfBounds, "index (9,)",
                                        line);
}

TEST(Value, HostValuesWorkOnHandMadeRefs) {
  std::vector<float> a(6), b(6);
  for (int i = 0; i < 6; ++i) a[static_cast<size_t>(i)] = static_cast<float>(i);
  pltpu::VmemRef<float> ar(a.data(), Shape{2, 3});
  pltpu::VmemRef<float> br(b.data(), Shape{2, 3});
  jnp::Value v = ar * 2.0f;
  jnp::Value<float> w;
  EXPECT_FALSE(w.has_value());
  w = v + 1.0f;
  v = v + w;  // rebinding while w still reads the old v
  br[pl::ellipsis] = v;
  EXPECT_EQ(b[5], 10.0f + 11.0f);
  EXPECT_EQ(w(1, 2), 11.0f);
}

}  // namespace
