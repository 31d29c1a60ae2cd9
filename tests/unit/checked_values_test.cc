// Checked mode (docs/checked-mode.md), definedness: undefined data travels with the values
// computed from it (elementwise ops, casts, where/select, transposes) and is an error only where
// it matters (a reduction, a dot, a scalar read, an HBM output at the end). Each buggy kernel has
// a clean twin that passes with the right output.
#include <gtest/gtest.h>

#include <string>

#include "support/checked_support.h"
#include "tessera/tessera.h"

namespace {
using namespace tessera;
using namespace tessera::checked_testing;

bool contains(const std::string& s, const std::string& part) {
  return s.find(part) != std::string::npos;
}

// The masked store of a first visit (megablox's gmm): `out = where(mask, acc, out)` into a fresh
// output window. Every lane selecting `acc` defines the window; lanes keeping `out` keep garbage.
Array<float> masked_store(int valid, pltpu::InterpretParams p = checked()) {
  const pl::BlockSpec spec({8, 128}, [](int i) { return pl::idx(i, 0); });
  return pl::pallas_call(
      [valid](pltpu::VmemRef<float> o, pltpu::VmemRef<float> acc) {
        acc = jnp::full_like(acc, 3.0f);
        // clang-format off
        MARK_LINE; o = jnp::where(lax::broadcasted_iota<int32_t>({8, 128}, 1) < valid, acc, o);
        // clang-format on
      },
      pl::out_shape<float>({16, 128}), pl::grid({2}), pl::out_specs(spec),
      pl::scratch_shapes(pltpu::VMEM<float>({8, 128})), pltpu::TensorCoreMesh("core", 1), p)();
}

TEST(CheckedValues, MaskedStoreThatSelectsEveryLaneIsDefined) {
  const Array<float> o = masked_store(128);
  for (float v : o) ASSERT_EQ(v, 3.0f);
  auto e = tessera::testing::catch_error<KernelError>([] { masked_store(100); });
  ASSERT_TRUE(e);
  maybe_print(*e);
  EXPECT_EQ(e->kind(), ErrorKind::kUninitialized) << e->what();
  EXPECT_EQ(static_cast<int>(e->where().line()), g_line.load()) << e->what();
  EXPECT_TRUE(contains(e->what(), "the VMEM window of output 0")) << e->what();
  EXPECT_TRUE(contains(e->what(), "reached output 0 float32(16, 128) element (0, 100)"))
      << e->what();
  EXPECT_TRUE(contains(e->what(), "448 of its 2048 elements")) << e->what();
}

// A reduction of a half-written buffer; the twin masks the unwritten half out first.
Array<float> reduce_half(bool masked) {
  return pl::kernel(pl::out_type<float>({8}), pltpu::TensorCoreMesh("core", 1),
                    pl::scratch_types(pltpu::VMEM<float>({8, 128}), pltpu::VMEM<float>({8})),
                    checked())(
      [masked](pltpu::HbmRef<float> o, pltpu::VmemRef<float> x, pltpu::VmemRef<float> s) {
        x.at(pl::all, pl::ds(0, 64)) = jnp::full_like(x.at(pl::all, pl::ds(0, 64)), 1.0f);
        const auto written = lax::broadcasted_iota<int32_t>({8, 128}, 1) < 64;
        if (masked) {
          s = jnp::sum(jnp::where(written, x, 0.0f), 1);
        } else {
          // clang-format off
      MARK_LINE; s = jnp::sum(x, 1);
          // clang-format on
        }
        pltpu::sync_copy(s, o);
      })();
}

TEST(CheckedValues, UndefinedReachingAReductionIsAnError) {
  const Array<float> o = reduce_half(true);
  for (float v : o) ASSERT_EQ(v, 64.0f);
  expect_bug([] { reduce_half(false); },
             {ErrorKind::kUninitialized, kMarked, 0, {}, "an undefined element reaches jnp.sum"});
  expect_bug([] { reduce_half(false); },
             {ErrorKind::kUninitialized, kMarked, 0, {}, "VMEM scratch #0"});
}

// Definedness moves with a transpose and a cast: the defined rows of x are the defined columns
// of its transpose. The buggy twin copies out a column that came from an unwritten row.
Array<int32_t> transpose_cast(int columns) {
  return pl::kernel(pl::out_type<int32_t>({128, 4}), pltpu::TensorCoreMesh("core", 1),
                    pl::scratch_types(pltpu::VMEM<float>({8, 128}), pltpu::VMEM<int32_t>({128, 8})),
                    checked())(
      [columns](pltpu::HbmRef<int32_t> o, pltpu::VmemRef<float> x, pltpu::VmemRef<int32_t> t) {
        x.at(pl::ds(0, 4)) = jnp::full_like(x.at(pl::ds(0, 4)), 2.5f);
        // clang-format off
    MARK_LINE; t = jnp::transpose(x).astype<int32_t>();
        // clang-format on
        pltpu::sync_copy(t.at(pl::all, pl::ds(0, 4)), o.at(pl::all, pl::ds(0, 4)));
        if (columns > 4) pltpu::sync_copy(t.at(pl::all, pl::ds(4, 4)), o.at(pl::all, pl::ds(0, 4)));
      })();
}

TEST(CheckedValues, DefinednessMovesWithTransposesAndCasts) {
  const Array<int32_t> o = transpose_cast(4);
  for (int32_t v : o) ASSERT_EQ(v, 2);
  expect_bug([] { transpose_cast(8); },
             {ErrorKind::kUninitialized, kMarked, 0, {}, "VMEM scratch #0"});
}

// An SMEM counter read through a ref of non-const elements before anything set it.
Array<int32_t> counter(bool initialised) {
  return pl::kernel(pl::out_type<int32_t>({8}), pltpu::TensorCoreMesh("core", 1),
                    pl::scratch_types(pltpu::SMEM<int32_t>({1}), pltpu::VMEM<int32_t>({8})),
                    checked())([initialised](pltpu::HbmRef<int32_t> o, pltpu::SmemRef<int32_t> n,
                                             pltpu::VmemRef<int32_t> v) {
    if (initialised) n(0) = 0;
    for (int i = 0; i < 3; ++i) {
      // clang-format off
          MARK_LINE; n(0) += 2;
      // clang-format on
    }
    v = jnp::full_like(v, n(0).get());
    pltpu::sync_copy(v, o);
  })();
}

TEST(CheckedValues, CounterReadBeforeItIsSet) {
  const Array<int32_t> o = counter(true);
  for (int32_t v : o) ASSERT_EQ(v, 6);
  expect_bug([] { counter(false); },
             {ErrorKind::kUninitialized, kMarked, 0, {}, "SMEM scratch #0"});
}

// Element writes then reads through non-const refs stay quiet (the write defines the element).
TEST(CheckedValues, ElementWritesDefineWhatLaterReadsSee) {
  const Array<int32_t> o = pl::kernel(pl::out_type<int32_t>({8}), pltpu::TensorCoreMesh("core", 1),
                                      pl::scratch_types(pltpu::VMEM<int32_t>({8})), checked())(
      [](pltpu::HbmRef<int32_t> out, pltpu::VmemRef<int32_t> v) {
        for (int i = 0; i < 8; ++i) v(i) = i;
        for (int i = 1; i < 8; ++i) v(i) = v(i - 1) + v(i);
        pltpu::sync_copy(v, out);
      })();
  int32_t want = 0;
  for (int i = 0; i < 8; ++i) {
    want += i;
    EXPECT_EQ(o[i], want);
  }
}

}  // namespace
