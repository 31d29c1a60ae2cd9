// Ports of Pallas' tests/pallas/tpu_pallas_interpret_test.py, continued from
// pallas_tpu_pallas_interpret_test.cc (docs/pallas-parity.md): masked stores through views of
// scalar-prefetched offsets, and named grid axes.
#include <gtest/gtest.h>

#include <cstdint>
#include <vector>

#include "support/pallas_port.h"
#include "tessera/tessera.h"

namespace {
using namespace tessera;
using namespace tessera::pallas_port;
using S = pltpu::SmemRef<int32_t>;

// test_masked_store's kernel: o = 0, then x stored through `mask` into the (16, 256) view of o at
// (i, j) (offsets hinted as multiples of 8 and 128).
Array<float> masked_store(int32_t i, int32_t j, const Array<bool>& mask) {
  return pl::pallas_call(
      [](S i_ref, S j_ref, pltpu::VmemRef<const float> x_ref, pltpu::VmemRef<const bool> mask_ref,
         pltpu::VmemRef<float> o_ref) {
        o_ref = jnp::zeros<float>(o_ref.shape());
        pltpu::store(o_ref.at(pl::ds(pl::multiple_of(i_ref(0), 8), 16),
                              pl::ds(pl::multiple_of(j_ref(0), 128), 256)),
                     x_ref[pl::ellipsis], mask_ref[pl::ellipsis]);
      },
      pl::out_shape<float>({16, 256}), pltpu::PrefetchScalarGridSpec<2>(),
      pltpu::InterpretParams{})(Array<int32_t>({1}, std::vector<int32_t>{i}),
                                Array<int32_t>({1}, std::vector<int32_t>{j}),
                                full<float>({16, 256}, 1.0f), mask);
}

TEST(TpuPallasInterpretTest, MaskedStore) {
  Array<bool> mask = full<bool>({16, 256}, false);
  mask(0, 0) = true;
  // Deliberately different, in_bounds: Pallas accepts the view o[8:24, 128:384] of a (16, 256)
  // ref because the mask is false where it lies outside; a Ref view must lie inside its ref
  // (Ref.at is checked where it is made), so the view itself raises.
  expect_error<KernelError>([&] { masked_store(8, 128, mask); }, ErrorKind::kOutOfBounds, "");
  // The same store through a view that lies inside: one element written.
  const Array<float> y = masked_store(0, 0, mask);
  for (int64_t r = 0; r < 16; ++r) {
    for (int64_t c = 0; c < 256; ++c) ASSERT_EQ(y(r, c), r == 0 && c == 0 ? 1.0f : 0.0f);
  }
  // out_of_bounds: with every mask element true, Pallas raises too.
  for (bool& m : mask) m = true;
  expect_error<KernelError>([&] { masked_store(8, 128, mask); }, ErrorKind::kOutOfBounds, "");
}

TEST(TpuPallasInterpretTest, MaskedStoreToPaddedScratchBuffer) {
  // Deliberately different: buffer_bounds='padded' and out_of_bounds_reads='uninitialized' are
  // not provided (docs/pallas-parity.md), so the (8, 128) view at (8, 128) of a (10, 150) scratch
  // raises where Pallas writes into the padding of its tiled layout.
  auto f = pl::pallas_call(
      [](S i_ref, S j_ref, pltpu::VmemRef<const float> x_ref, pltpu::VmemRef<const bool> mask_ref,
         pltpu::VmemRef<float> o_ref, pltpu::VmemRef<float> s_ref) {
        s_ref = jnp::zeros<float>(s_ref.shape());
        const auto view = s_ref.at(pl::ds(pl::multiple_of(i_ref(0), 8), 8),
                                   pl::ds(pl::multiple_of(j_ref(0), 128), 128));
        pltpu::store(view, x_ref[pl::ellipsis], mask_ref[pl::ellipsis]);
        o_ref = view;
      },
      pl::out_shape<float>({8, 128}), pltpu::PrefetchScalarGridSpec<2>(),
      pl::scratch_shapes(pltpu::VMEM<float>({10, 150})), pltpu::InterpretParams{});
  const Array<int32_t> at8({1}, std::vector<int32_t>{8});
  const Array<int32_t> at128({1}, std::vector<int32_t>{128});
  const Array<int32_t> at0({1}, std::vector<int32_t>{0});
  const Array<float> x = full<float>({8, 128}, 1.0f);
  const Array<bool> mask = full<bool>({8, 128}, true);
  expect_error<KernelError>([&] { f(at8, at128, x, mask); }, ErrorKind::kOutOfBounds, "");
  // A view inside the scratch stores every element.
  const Array<float> y = f(at0, at0, x, mask);
  for (float v : y) ASSERT_EQ(v, 1.0f);
}

TEST(TpuPallasInterpretTest, GridNames) {
  const Array<float> x = full<float>({2 * 8, 4 * 128}, 0.0f);
  const pl::BlockSpec spec({8, 128}, [](int i, int j) { return pl::idx(i, j); });
  const Array<float> y = pl::pallas_call(
      [](pltpu::VmemRef<const float> xr, pltpu::VmemRef<float> yr) {
        yr = xr + 10.0f * static_cast<float>(lax::axis_index("foo")) +
             static_cast<float>(lax::axis_index("bar"));
      },
      pl::grid({{"foo", 2}, {"bar", 4}}), pl::in_specs(spec), pl::out_specs(spec),
      pl::out_shape<float>({2 * 8, 4 * 128}), pltpu::InterpretParams{})(x);
  for (int64_t a = 0; a < 2; ++a) {
    for (int64_t b = 0; b < 4; ++b) {
      for (int64_t r = 0; r < 8; ++r) {
        for (int64_t c = 0; c < 128; ++c) {
          ASSERT_EQ(y(a * 8 + r, b * 128 + c), static_cast<float>(10 * a + b));
        }
      }
    }
  }
}

}  // namespace
