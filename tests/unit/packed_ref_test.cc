// Ref.bitcast between element widths (pl::PackedRef, packed_ref.h): the TPU's element mapping in
// both directions and through chains, reads, writes, slices, reshapes and DMAs of such views in
// both engines, the rules a TPU refuses, and checked mode's books on the bytes the views touch
// (each planted bug with a clean twin).
#include <gtest/gtest.h>

#include <cstdint>
#include <string>

#include "support/bitcast_rows.h"
#include "support/checked_support.h"
#include "support/pallas_port.h"
#include "tessera/tessera.h"

namespace {
using namespace tessera;
using namespace tessera::checked_testing;
using tessera::pallas_port::arange;
using tessera::pallas_port::bitcast_rows;
using tessera::pallas_port::bits_of;
using tessera::pallas_port::expect_error;

template <class T>
void expect_same(const Array<T>& got, const Array<T>& want) {
  ASSERT_EQ(got.shape(), want.shape());
  for (int64_t i = 0; i < got.size(); ++i) ASSERT_EQ(bits_of(got[i]), bits_of(want[i])) << i;
}

// A kernel that reads x through x.bitcast<To>() into an output of the bitcast's shape.
template <class To, class From>
Array<To> read_bitcast(const Array<From>& x, Shape out, bool checked_mode) {
  auto body = [](pltpu::VmemRef<const From> xr, pltpu::VmemRef<To> o) {
    o[pl::ellipsis] = xr.template bitcast<To>()[pl::ellipsis];
  };
  if (checked_mode) return pl::pallas_call(body, pl::out_shape<To>(out), checked())(x);
  return pl::pallas_call(body, pl::out_shape<To>(out))(x);
}

// A kernel that writes x through o.bitcast<From>() of an output of type To.
template <class To, class From>
Array<To> write_bitcast(const Array<From>& x, Shape out, bool checked_mode) {
  auto body = [](pltpu::VmemRef<const From> xr, pltpu::VmemRef<To> o) {
    o.template bitcast<From>() = xr;
  };
  if (checked_mode) return pl::pallas_call(body, pl::out_shape<To>(out), checked())(x);
  return pl::pallas_call(body, pl::out_shape<To>(out))(x);
}

TEST(PackedRef, NarrowingSplitsRowsLowBitsFirst) {
  Array<int32_t> x({2, 3});
  for (int64_t i = 0; i < x.size(); ++i) x[i] = static_cast<int32_t>(0x00010000 * (i + 1) + i);
  for (bool checked_mode : {false, true}) {
    const Array<int16_t> y = read_bitcast<int16_t>(x, {4, 3}, checked_mode);
    for (int64_t r = 0; r < 2; ++r) {
      for (int64_t c = 0; c < 3; ++c) {
        EXPECT_EQ(y(2 * r, c), static_cast<int16_t>(x(r, c) & 0xffff));
        EXPECT_EQ(y(2 * r + 1, c), static_cast<int16_t>(x(r, c) >> 16));
      }
    }
  }
}

TEST(PackedRef, EveryWidthPairBothEngines) {
  const Array<int32_t> x32 = arange<int32_t>({2, 8, 16});
  const Array<uint8_t> x8 = arange<uint8_t>({2, 8, 16});
  for (bool checked_mode : {false, true}) {
    expect_same(read_bitcast<int16_t>(x32, {2, 16, 16}, checked_mode), bitcast_rows<int16_t>(x32));
    expect_same(read_bitcast<uint8_t>(x32, {2, 32, 16}, checked_mode), bitcast_rows<uint8_t>(x32));
    expect_same(read_bitcast<float>(x8, {2, 2, 16}, checked_mode), bitcast_rows<float>(x8));
    expect_same(read_bitcast<bfloat16>(x8, {2, 4, 16}, checked_mode), bitcast_rows<bfloat16>(x8));
    expect_same(write_bitcast<int32_t>(x8, {2, 2, 16}, checked_mode), bitcast_rows<int32_t>(x8));
    expect_same(write_bitcast<uint8_t>(x32, {2, 32, 16}, checked_mode), bitcast_rows<uint8_t>(x32));
  }
}

// Runs `body` (x's VMEM ref, one output) natively or checked.
template <class O, class I, class F>
Array<O> run(const Array<I>& x, Shape out, bool checked_mode, F body) {
  if (checked_mode) return pl::pallas_call(body, pl::out_shape<O>(out), checked())(x);
  return pl::pallas_call(body, pl::out_shape<O>(out))(x);
}

TEST(PackedRef, ChainsComposeAndSlicesTakeWholeGroups) {
  const Array<int32_t> x = arange<int32_t>({8, 16});
  const Array<uint8_t> b = bitcast_rows<uint8_t>(x);  // (32, 16)
  const Array<int16_t> h = bitcast_rows<int16_t>(x);  // (16, 16)
  for (bool checked_mode : {false, true}) {
    // int32 -> uint8 -> int16: pairs of byte rows, as int32 -> int16 directly.
    expect_same(run<int16_t>(x, {16, 16}, checked_mode,
                             [](pltpu::VmemRef<const int32_t> xr, pltpu::VmemRef<int16_t> o) {
                               o[pl::ellipsis] =
                                   xr.bitcast<uint8_t>().bitcast<int16_t>()[pl::ellipsis];
                             }),
                h);
    // Strided rows of the bytes (rows 1, 3, 5, ...: stride 2 visits 2 of the 4 phases), and a
    // slice of whole groups of 4 rows.
    const Array<uint8_t> s = run<uint8_t>(
        x, {20, 16}, checked_mode, [](pltpu::VmemRef<const int32_t> xr, pltpu::VmemRef<uint8_t> o) {
          o.at(pl::ds(0, 16)) = xr.bitcast<uint8_t>().at(pl::ds(1, 16, 2))[pl::ellipsis];
          o.at(pl::ds(16, 4)) = xr.bitcast<uint8_t>().at(pl::ds(4, 4))[pl::ellipsis];
        });
    for (int64_t c = 0; c < 16; ++c) {
      for (int64_t r = 0; r < 16; ++r) ASSERT_EQ(s(r, c), b(1 + 2 * r, c));
      for (int64_t r = 0; r < 4; ++r) ASSERT_EQ(s(16 + r, c), b(4 + r, c));
    }
    // int32 -> int16 -> int32 is the identity; so is a copy between two packed views.
    expect_same(run<int32_t>(x, {8, 16}, checked_mode,
                             [](pltpu::VmemRef<const int32_t> xr, pltpu::VmemRef<int32_t> o) {
                               o[pl::ellipsis] =
                                   xr.bitcast<int16_t>().bitcast<int32_t>()[pl::ellipsis];
                             }),
                x);
    expect_same(run<int32_t>(x, {8, 16}, checked_mode,
                             [](pltpu::VmemRef<const int32_t> xr, pltpu::VmemRef<int32_t> o) {
                               o.bitcast<uint8_t>() = xr.bitcast<int16_t>().bitcast<uint8_t>();
                             }),
                x);
  }
}

TEST(PackedRef, IndexingAroundThePackedAxis) {
  const Array<int32_t> x = arange<int32_t>({4, 8, 16});
  const Array<int16_t> h = bitcast_rows<int16_t>(x);  // (4, 16, 16)
  for (bool checked_mode : {false, true}) {
    // Squeezing a leading axis keeps the packed rows; a width change back gives x[1].
    const Array<int32_t> y = run<int32_t>(
        x, {8, 16}, checked_mode, [](pltpu::VmemRef<const int32_t> xr, pltpu::VmemRef<int32_t> o) {
          o[pl::ellipsis] = xr.bitcast<int16_t>().at(1).bitcast<int32_t>()[pl::ellipsis];
        });
    for (int64_t i = 0; i < y.size(); ++i) ASSERT_EQ(y[i], x[128 + i]);
    // An index on the packed axis picks one half; an index on the last axis leaves a column.
    const Array<int16_t> r = run<int16_t>(
        x, {2, 16}, checked_mode, [](pltpu::VmemRef<const int32_t> xr, pltpu::VmemRef<int16_t> o) {
          o.at(0) = xr.bitcast<int16_t>().at(2, 5)[pl::ellipsis];
          o.at(1) = xr.bitcast<int16_t>().at(3, pl::all, 7)[pl::ellipsis];
        });
    for (int64_t c = 0; c < 16; ++c) {
      ASSERT_EQ(r(0, c), h(2, 5, c));
      ASSERT_EQ(r(1, c), h(3, c, 7));
    }
  }
}

TEST(PackedRef, CompoundAssignmentAndValueBitcast) {
  const Array<int32_t> x = arange<int32_t>({4, 16});
  for (bool checked_mode : {false, true}) {
    // Adds 1 to the low half of every element through an int16 view (rows 0, 2, 4, ...).
    const Array<int32_t> y = run<int32_t>(
        x, {4, 16}, checked_mode, [](pltpu::VmemRef<const int32_t> xr, pltpu::VmemRef<int32_t> o) {
          o = xr;
          o.bitcast<int16_t>().at(pl::ds(0, 4, 2))[pl::ellipsis] += int16_t{1};
        });
    for (int64_t i = 0; i < x.size(); ++i) ASSERT_EQ(y[i], x[i] + 1);
    // pltpu::bitcast of a value: int32 -> uint8 -> int32 is the identity; to int16 the rows.
    expect_same(run<int32_t>(x, {4, 16}, checked_mode,
                             [](pltpu::VmemRef<const int32_t> xr, pltpu::VmemRef<int32_t> o) {
                               const jnp::Value b = pltpu::bitcast<uint8_t>(xr[pl::ellipsis]);
                               o[pl::ellipsis] = pltpu::bitcast<int32_t>(b);
                             }),
                x);
    expect_same(run<int16_t>(x, {8, 16}, checked_mode,
                             [](pltpu::VmemRef<const int32_t> xr, pltpu::VmemRef<int16_t> o) {
                               o[pl::ellipsis] = pltpu::bitcast<int16_t>(xr * 2);
                             }),
                [&] {
                  Array<int32_t> twice = x;
                  for (int32_t& v : twice) v *= 2;
                  return bitcast_rows<int16_t>(twice);
                }());
  }
}

TEST(PackedRef, DmaBetweenHbmAndVmemViews) {
  const Array<int32_t> x = arange<int32_t>({8, 128});
  for (bool checked_mode : {false, true}) {
    auto body = [](pltpu::AnyRef<const int32_t> xh, pltpu::AnyRef<int32_t> yh) {
      pl::run_scoped(
          [&](pltpu::VmemRef<int16_t> v, pltpu::DmaSemaphoreRef sem) {
            pltpu::sync_copy(xh.bitcast<int16_t>(), v);               // HBM view -> VMEM
            pltpu::async_copy(v, yh.bitcast<int16_t>(), sem).wait();  // VMEM -> HBM view
          },
          pltpu::VMEM<int16_t>({16, 128}), pltpu::SemaphoreType::DMA);
    };
    const auto spec = pl::BlockSpec(pl::ANY);
    const Array<int32_t> y = checked_mode
                                 ? pl::pallas_call(body, pl::in_specs(spec), pl::out_specs(spec),
                                                   pl::out_shape<int32_t>({8, 128}), checked())(x)
                                 : pl::pallas_call(body, pl::in_specs(spec), pl::out_specs(spec),
                                                   pl::out_shape<int32_t>({8, 128}))(x);
    expect_same(y, x);
  }
}

// ---- the rules a TPU refuses -------------------------------------------------------------------

TEST(PackedRef, RefusesWhatATpuRefuses) {
  std::vector<int32_t> buf(64);
  const pltpu::VmemRef<int32_t> r(buf.data(), {4, 16});
  expect_error<UsageError>([&] { (void)r.reshape(64).bitcast<int16_t>(); },
                           ErrorKind::kInvalidArgument, "needs a ref of rank 2 or more");
  std::vector<int16_t> h(48);
  const pltpu::VmemRef<int16_t> odd(h.data(), {3, 16});
  expect_error<UsageError>([&] { (void)odd.bitcast<int32_t>(); }, ErrorKind::kInvalidArgument,
                           "the second-minor dim (3) times the source width (16 bits) must be a "
                           "multiple of the destination width (32 bits)");
  expect_error<UsageError>([&] { (void)r.bitcast<int16_t>().at(pl::ds(1, 3)); },
                           ErrorKind::kInvalidArgument, "must take a multiple of 2 rows");
  expect_error<UsageError>([&] { (void)r.bitcast<int16_t>().reshape(4, 32); },
                           ErrorKind::kInvalidArgument, "the last dim must stay (16)");
  expect_error<UsageError>([&] { (void)r.bitcast<int16_t>().at(pl::ds(0, 10)); },
                           ErrorKind::kOutOfBounds, "past the end");
  expect_error<UsageError>(
      [&] {
        const jnp::Value v = jnp::arange<int32_t>(16);
        (void)pltpu::bitcast<int16_t>(v);
      },
      ErrorKind::kInvalidArgument, "pltpu.bitcast");
  // Allowed: a reshape that keeps the last dim and splits whole groups.
  EXPECT_EQ(r.bitcast<int16_t>().reshape(2, 4, 16).shape(), Shape({2, 4, 16}));
}

// ---- checked mode: the books on the bytes a view touches ---------------------------------------

// A scratch written only in its first half of rows, read through an int16 view of all of it.
Array<int16_t> read_half_written(bool buggy) {
  return pl::kernel(
      pl::out_type<int16_t>({8, 128}), pltpu::TensorCoreMesh("core", 1),
      pl::scratch_types(pltpu::VMEM<int32_t>({4, 128}), pltpu::VMEM<int16_t>({8, 128})), checked())(
      [buggy](pltpu::HbmRef<int16_t> o, pltpu::VmemRef<int32_t> s, pltpu::VmemRef<int16_t> v) {
        s.at(pl::ds(0, 2)) = jnp::full<int32_t>({2, 128}, 0x00020001);
        if (!buggy) s.at(pl::ds(2, 2)) = jnp::full<int32_t>({2, 128}, 0x00040003);
        // clang-format off
    MARK_LINE; v[pl::ellipsis] = s.bitcast<int16_t>()[pl::ellipsis];
        // clang-format on
        pltpu::sync_copy(v, o);
      })();
}

TEST(PackedRefChecked, ReadOfUnwrittenBytesThroughAView) {
  const Array<int16_t> o = read_half_written(false);
  for (int64_t c = 0; c < 128; ++c) {
    EXPECT_EQ(o(0, c), 1);
    EXPECT_EQ(o(1, c), 2);
    EXPECT_EQ(o(7, c), 4);
  }
  expect_bug([] { read_half_written(true); }, {ErrorKind::kUninitialized, kMarked, 0, {}, ""});
}

// An async copy into the high halves of a scratch (through an int16 view of odd rows) while the
// kernel reads them: a race unless the wait comes first.
Array<int32_t> copy_then_read(bool buggy) {
  return pl::kernel(pl::out_type<int32_t>({8, 128}), pltpu::TensorCoreMesh("core", 1),
                    pl::scratch_types(pltpu::VMEM<int32_t>({8, 128}),
                                      pltpu::VMEM<int16_t>({8, 128}), pltpu::SemaphoreType::DMA),
                    checked())([buggy](pltpu::HbmRef<int32_t> o, pltpu::VmemRef<int32_t> s,
                                       pltpu::VmemRef<int16_t> h, pltpu::DmaSemaphoreRef sem) {
    s = jnp::zeros_like(s);
    h = jnp::full_like(h, int16_t{7});
    auto cp = pltpu::make_async_copy(h, s.bitcast<int16_t>().at(pl::ds(1, 8, 2)), sem);
    cp.start();
    if (!buggy) cp.wait();
    // clang-format off
    MARK_LINE; s += 1;
    // clang-format on
    if (buggy) cp.wait();
    pltpu::sync_copy(s, o);
  })();
}

TEST(PackedRefChecked, RaceWithACopyIntoAView) {
  const Array<int32_t> o = copy_then_read(false);
  for (int64_t i = 0; i < o.size(); ++i) ASSERT_EQ(o[i], (7 << 16) + 1);
  expect_bug([] { copy_then_read(true); }, {ErrorKind::kRace, kMarked, 0, {}, ""});
}

}  // namespace
