// The forms of pl::pallas_call and pl::kernel that Pallas kernels use beyond the basic call: no
// outputs, named grid axes, grouped scalar-prefetch operands (gmm's metadata tuple) and index
// maps that leave out trailing prefetch refs, optional (None) operands, and the body-first
// pl::kernel(body, options...), each with its errors.
#include <gtest/gtest.h>

#include <optional>
#include <tuple>
#include <vector>

#include "support/expect_error.h"
#include "tessera/tessera.h"

namespace {
using namespace tessera;
using pltpu::ARBITRARY;
using pltpu::PARALLEL;

Array<float> iota_f(Shape shape) {
  Array<float> a(std::move(shape));
  for (int64_t i = 0; i < a.size(); ++i) a[i] = static_cast<float>(i % 1013);
  return a;
}

// Runs `f` natively, then in checked mode.
template <class F>
void both_engines(F&& f) {
  f();
  pltpu::ForceTpuInterpretMode force{pltpu::InterpretParams{}};
  f();
}

TEST(PallasCallForms, NoOutputs) {
  // Pallas' `out_shape=()`: the call returns nothing; here its effect is a signal through a
  // semaphore it takes (a count left for the next call).
  const pltpu::SemaphoreArray<SemaphoreKind::REGULAR> sem(Shape{});
  auto signal = pl::pallas_call([](pltpu::SemaphoreRef s) { pl::semaphore_signal(s, 3); },
                                pl::in_specs(pl::BlockSpec(pltpu::SEMAPHORE)),
                                pltpu::TensorCoreMesh("core", 1));
  static_assert(std::is_void_v<decltype(signal(sem))>);
  signal(sem);
  EXPECT_EQ(sem.value(), 3);
  auto wait = pl::pallas_call([](pltpu::SemaphoreRef s) { pl::semaphore_wait(s, 3); },
                              pl::in_specs(pl::BlockSpec(pltpu::SEMAPHORE)), pl::out_shape(),
                              pltpu::TensorCoreMesh("core", 1));
  wait(sem);
  EXPECT_EQ(sem.value(), 0);
}

TEST(PallasCallForms, NamedGridAxes) {
  both_engines([&] {
    // Pallas' grid=(("i", 2), ("j", 3)): lax::axis_index("i") is the step's index on axis "i".
    const Array<float> x = iota_f({16, 384});
    auto f = pl::pallas_call(
        [](pltpu::VmemRef<const float> xv, pltpu::VmemRef<float> ov) {
          const int i = lax::axis_index("i");
          EXPECT_EQ(pl::program_id("j"), pl::program_id(1));
          EXPECT_EQ(pl::num_programs("j"), 3);
          ov = xv + static_cast<float>(i * 1000 + pl::program_id("j"));
        },
        pl::out_shape<float>({16, 384}), pl::grid({{"i", 2}, {"j", 3}}),
        pl::in_specs(pl::BlockSpec({8, 128}, [](int i, int j) { return pl::idx(i, j); })),
        pl::out_specs(pl::BlockSpec({8, 128}, [](int i, int j) { return pl::idx(i, j); })),
        pltpu::TensorCoreMesh("core", 2),
        pltpu::CompilerParams{.dimension_semantics = {PARALLEL, ARBITRARY}});
    const Array<float> o = f(x);
    for (int64_t r = 0; r < 16; ++r) {
      for (int64_t c = 0; c < 384; ++c) {
        ASSERT_EQ(o(r, c), x(r, c) + static_cast<float>((r / 8) * 1000 + c / 128)) << r << "," << c;
      }
    }
  });
}

TEST(PallasCallForms, NamedGridErrors) {
  const Array<float> x = iota_f({8, 128});
  int line = 0;
  auto f = pl::pallas_call(
      [&](pltpu::VmemRef<const float>, pltpu::VmemRef<float> ov) {
        ov = jnp::zeros_like(ov);
        line = __LINE__ + 1;
        (void)pl::program_id("k");
      },
      pl::out_shape<float>({8, 128}), pl::grid({{"i", 1}}), pltpu::TensorCoreMesh("core", 1));
  auto e = tessera::testing::catch_error<KernelError>([&] { f(x); });
  ASSERT_TRUE(e);
  EXPECT_EQ(e->kind(), ErrorKind::kUnknownAxis);
  EXPECT_EQ(static_cast<int>(e->where().line()), line);
  EXPECT_NE(std::string(e->what()).find("no axis named \"k\" (its axes are i)"), std::string::npos)
      << e->what();
  const pltpu::Grid twice = pl::grid({{"i", 1}, {"i", 2}});
  const int twice_line = __LINE__ - 1;
  auto g = pl::pallas_call([](pltpu::VmemRef<float> ov) { ov = jnp::zeros_like(ov); },
                           pl::out_shape<float>({8, 128}), twice, pltpu::TensorCoreMesh("core", 1));
  EXPECT_TESSERA_ERROR(g(), UsageError, ErrorKind::kInvalidArgument,
                       "grid axis 1 is named \"i\", like an earlier axis", twice_line);
}

// gmm's layout: a grouped scalar-prefetch operand (offsets, ids, tile ids), then a plain one; the
// index maps take the group as a std::tuple and leave out what they do not use.
TEST(PallasCallForms, GroupedScalarPrefetch) {
  both_engines([&] {
    const Array<int32_t> offsets({3}, {0, 8, 24});
    const Array<int32_t> ids({3}, {2, 0, 1});
    const Array<int32_t> tiles({3}, {1, 2, 0});
    const Array<int32_t> shift({1}, {5});
    const Array<float> x = iota_f({24, 128});
    using Meta =
        std::tuple<pltpu::SmemRef<int32_t>, pltpu::SmemRef<int32_t>, pltpu::SmemRef<int32_t>>;
    auto f = pl::pallas_call(
        [](Meta meta, pltpu::SmemRef<int32_t> s, pltpu::VmemRef<const float> xv,
           pltpu::VmemRef<float> ov) {
          auto [offs, group, tile] = meta;
          const int i = static_cast<int>(pl::program_id(0));
          ov = xv + static_cast<float>(group(i) * 100 + offs(i) + s(0));
          (void)tile;
        },
        pl::out_shape<float>({24, 128}),
        pltpu::PrefetchScalarGridSpec<2>(
            pl::grid({3}),
            pl::in_specs(pl::BlockSpec(
                {8, 128}, [](int i, Meta meta) { return pl::idx(std::get<2>(meta)(i), 0); })),
            pl::out_specs(pl::BlockSpec({8, 128}, [](int i) { return pl::idx(i, 0); }))),
        pltpu::TensorCoreMesh("core", 1));
    const Array<float> o = f(std::tuple{offsets, ids, tiles}, shift, x);
    for (int64_t i = 0; i < 3; ++i) {
      for (int64_t r = 0; r < 8; ++r) {
        for (int64_t c = 0; c < 128; ++c) {
          ASSERT_EQ(o(i * 8 + r, c),
                    x(tiles[i] * 8 + r, c) + static_cast<float>(ids[i] * 100 + offsets[i] + 5))
              << i << "," << r << "," << c;
        }
      }
    }
  });
}

// Pallas' None leaves in a grouped operand: std::nullopt takes no SMEM copy and reaches the body
// and the index maps as std::nullopt; the Arrays after it keep their own copies.
TEST(PallasCallForms, GroupedScalarPrefetchWithNoneLeaves) {
  both_engines([&] {
    const Array<int32_t> ids({3}, {2, 0, 1});
    const Array<int32_t> tiles({3}, {1, 2, 0});
    const Array<float> x = iota_f({24, 128});
    using Meta = std::tuple<std::nullopt_t, pltpu::SmemRef<int32_t>, std::nullopt_t,
                            pltpu::SmemRef<int32_t>>;
    auto f = pl::pallas_call(
        [](Meta meta, pltpu::VmemRef<const float> xv, pltpu::VmemRef<float> ov) {
          const int i = static_cast<int>(pl::program_id(0));
          ov = xv + static_cast<float>(std::get<1>(meta)(i) * 100 + std::get<3>(meta)(i));
        },
        pl::out_shape<float>({24, 128}),
        pltpu::PrefetchScalarGridSpec<1>(
            pl::grid({3}),
            pl::in_specs(pl::BlockSpec(
                {8, 128}, [](int i, Meta meta) { return pl::idx(std::get<3>(meta)(i), 0); })),
            pl::out_specs(pl::BlockSpec({8, 128}, [](int i) { return pl::idx(i, 0); }))),
        pltpu::TensorCoreMesh("core", 1));
    const Array<float> o = f(std::tuple{std::nullopt, ids, std::nullopt, tiles}, x);
    for (int64_t i = 0; i < 3; ++i) {
      for (int64_t r = 0; r < 8; ++r) {
        for (int64_t c = 0; c < 128; ++c) {
          ASSERT_EQ(o(i * 8 + r, c),
                    x(tiles[i] * 8 + r, c) + static_cast<float>(ids[i] * 100 + tiles[i]))
              << i << "," << r << "," << c;
        }
      }
    }
  });
}

TEST(PallasCallForms, PrefetchParameterErrors) {
  const Array<int32_t> a({2}, {0, 1});
  const Array<float> x = iota_f({16, 128});
  // A map taking the group as a plain SmemRef.
  const int group_line = __LINE__ + 9;
  auto f = pl::pallas_call(
      [](std::tuple<pltpu::SmemRef<int32_t>, pltpu::SmemRef<int32_t>>, pltpu::VmemRef<float> ov) {
        ov = jnp::zeros_like(ov);
      },
      pl::out_shape<float>({8, 128}),
      pltpu::PrefetchScalarGridSpec<1>(
          pl::grid({2}),
          pl::out_specs(pl::BlockSpec(
              {8, 128}, [](int i, pltpu::SmemRef<int32_t> s) { return pl::idx(s(i) * 0, 0); }))),
      pltpu::TensorCoreMesh("core", 1));
  EXPECT_TESSERA_ERROR(f(std::tuple{a, a}), UsageError, ErrorKind::kInvalidArgument,
                       "takes scalar-prefetch operand 0 as one SmemRef but the call passes a "
                       "tuple of 2 arrays",
                       group_line);
  // A map declaring the wrong dtype.
  const int dtype_line = __LINE__ + 6;
  auto g = pl::pallas_call(
      [](pltpu::SmemRef<int32_t>, pltpu::VmemRef<float> ov) { ov = jnp::zeros_like(ov); },
      pl::out_shape<float>({8, 128}),
      pltpu::PrefetchScalarGridSpec<1>(
          pl::grid({2}), pl::out_specs(pl::BlockSpec(
                             {8, 128}, [](int, pltpu::SmemRef<float>) { return pl::idx(0, 0); }))),
      pltpu::TensorCoreMesh("core", 1));
  EXPECT_TESSERA_ERROR(g(a), UsageError, ErrorKind::kInvalidArgument,
                       "as an SmemRef of float32, but the array is int32", dtype_line);
}

// gmm's existing_out: an input that may be absent (Pallas' None). The body takes a
// std::optional ref; with std::nullopt (or an empty std::optional<Array>) it gets none.
auto add_maybe(const std::optional<Array<float>>& bias) {
  auto f = pl::pallas_call(
      [](pltpu::VmemRef<const float> xv, std::optional<pltpu::VmemRef<const float>> bv,
         pltpu::VmemRef<float> ov) {
        if (bv) {
          ov = xv + *bv;
        } else {
          ov = xv;
        }
      },
      pl::out_shape<float>({16, 128}), pl::grid({2}),
      pl::in_specs(pl::BlockSpec({8, 128}, [](int i) { return pl::idx(i, 0); }),
                   pl::BlockSpec({8, 128}, [](int i) { return pl::idx(i, 0); })),
      pl::out_specs(pl::BlockSpec({8, 128}, [](int i) { return pl::idx(i, 0); })),
      pltpu::TensorCoreMesh("core", 1));
  return f(iota_f({16, 128}), bias);
}

TEST(PallasCallForms, OptionalOperands) {
  both_engines([&] {
    const Array<float> x = iota_f({16, 128});
    const Array<float> b({16, 128}, 2.5f);
    const Array<float> with = add_maybe(b);
    const Array<float> without = add_maybe(std::nullopt);
    for (int64_t i = 0; i < x.size(); ++i) {
      ASSERT_EQ(with[i], x[i] + 2.5f) << i;
      ASSERT_EQ(without[i], x[i]) << i;
    }
    // std::nullopt itself: a body parameter std::nullopt_t (or a std::optional) gets nothing.
    auto g = pl::pallas_call(
        [](pltpu::VmemRef<const float> xv, std::nullopt_t, pltpu::VmemRef<float> ov) { ov = xv; },
        pl::out_shape<float>({16, 128}), pltpu::TensorCoreMesh("core", 1));
    const Array<float> o = g(x, std::nullopt);
    for (int64_t i = 0; i < x.size(); ++i) ASSERT_EQ(o[i], x[i]) << i;
  });
}

TEST(PallasCallForms, AnAbsentOperandHasNoLeafToAlias) {
  // Pallas counts input leaves: an absent operand has none, so {1: 0} names nothing.
  const Array<float> x = iota_f({8, 128});
  const int line = __LINE__ + 3;
  auto f = pl::pallas_call(
      [](pltpu::VmemRef<const float> xv, std::nullopt_t, pltpu::VmemRef<float> ov) { ov = xv; },
      pl::out_shape<float>({8, 128}), pl::input_output_aliases({{1, 0}}),
      pltpu::TensorCoreMesh("core", 1));
  EXPECT_TESSERA_ERROR(f(x, std::nullopt), UsageError, ErrorKind::kInvalidArgument,
                       "names input 1, but the call has 1 inputs", line);
}

TEST(PallasCallForms, BodyFirstKernel) {
  // Pallas' decorator form pl.kernel(body, out_type=..., mesh=...).
  auto fill = pl::kernel(
      [](pltpu::HbmRef<float> o, pltpu::VmemRef<float> v) {
        v = jnp::full_like(v, 7.0f);
        pltpu::run_on_first_core("core", [&] { pltpu::sync_copy(v, o); });
      },
      pl::out_type<float>({128}), pltpu::TensorCoreMesh("core", 2),
      pl::scratch_types(pltpu::VMEM<float>({128})));
  const Array<float> o = fill();
  for (float v : o) ASSERT_EQ(v, 7.0f);
  EXPECT_EQ(fill.num_cores(), 2);
  // Its location in errors is the mesh's line.
  const int mesh_line = __LINE__ + 2;
  auto bad = pl::kernel([](pltpu::HbmRef<float>, pltpu::VmemRef<float>) {},
                        pl::out_type<float>({128}), pltpu::TensorCoreMesh("core", 1),
                        pl::scratch_types(pltpu::VMEM<float>({1 << 30})));
  EXPECT_TESSERA_ERROR(bad(), UsageError, ErrorKind::kCapacityExceeded, "scratch needs", mesh_line);
}

}  // namespace
