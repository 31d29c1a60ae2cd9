// In-kernel gathers (tessera/gather.h): jnp.take_along_axis and lax.gather on refs, values and
// expressions, each kernel run natively and in checked mode (the two must agree bit for bit),
// against plain C++ loops and the values jax 0.10 gives on the CPU; their out-of-bounds modes;
// their argument errors; and what checked mode reports (a broken promise_in_bounds, an
// undefined index, undefined operand elements that travel into the result), each with a clean
// twin that passes.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <cstring>
#include <random>
#include <tuple>
#include <vector>

#include "support/checked_support.h"
#include "support/pallas_port.h"
#include "tessera/tessera.h"

namespace {
using namespace tessera;
using namespace tessera::checked_testing;
using tessera::pallas_port::arange;

template <class T>
Array<T> array_of(Shape s, const std::vector<T>& v) {
  Array<T> a(std::move(s));
  for (int64_t i = 0; i < a.size(); ++i) a[i] = v[static_cast<size_t>(i)];
  return a;
}

template <class T>
Array<T> random_ints(Shape s, int lo, int hi, uint32_t seed) {
  std::mt19937 rng(seed);
  std::uniform_int_distribution<int> d(lo, hi);
  Array<T> a(std::move(s));
  for (int64_t i = 0; i < a.size(); ++i) a[i] = static_cast<T>(d(rng));
  return a;
}

template <class T>
void expect_same_bits(const Array<T>& a, const Array<T>& b) {
  ASSERT_EQ(a.size(), b.size());
  EXPECT_EQ(std::memcmp(a.data(), b.data(), a.bytes()), 0) << "native and checked mode differ";
}
template <class... T>
void expect_same_bits(const std::tuple<Array<T>...>& a, const std::tuple<Array<T>...>& b) {
  std::apply(
      [&](const auto&... p) {
        std::apply([&](const auto&... q) { (expect_same_bits(p, q), ...); }, b);
      },
      a);
}

// Runs the kernel natively and in checked mode; the outputs must be bit-identical.
template <class Body, class Out, class... Args>
auto run_both(Body body, Out out, const Args&... args) {
  auto native = pl::pallas_call(body, out)(args...);
  auto check = pl::pallas_call(body, out, checked())(args...);
  expect_same_bits(native, check);
  return native;
}

template <class T>
ShapeDtypeStruct<T> sds(Shape s) {
  return ShapeDtypeStruct<T>{std::move(s)};
}

template <class I>
void take_along_both_axes() {
  const Array<float> x = random_ints<float>({16, 24}, -50, 50, 1);
  const Array<I> i0 = random_ints<I>({16, 24}, 0, 15, 2);
  const Array<I> i1 = random_ints<I>({16, 24}, 0, 23, 3);
  const auto out = run_both(
      [](pltpu::VmemRef<const float> x_ref, pltpu::VmemRef<const I> a_ref,
         pltpu::VmemRef<const I> b_ref, pltpu::VmemRef<float> o0, pltpu::VmemRef<float> o1) {
        jnp::Value xv = x_ref[pl::ellipsis];
        o0[pl::ellipsis] = jnp::take_along_axis(xv, a_ref[pl::ellipsis], 0);
        // A ref operand, a negative axis, and the result inside an expression.
        o1[pl::ellipsis] = jnp::take_along_axis(x_ref, b_ref, -1) * 2.0f + 1.0f;
      },
      pl::out_shape(sds<float>({16, 24}), sds<float>({16, 24})), x, i0, i1);
  const auto& [o0, o1] = out;
  for (int r = 0; r < 16; ++r) {
    for (int c = 0; c < 24; ++c) {
      ASSERT_EQ(o0(r, c), x(static_cast<int64_t>(i0(r, c)), c)) << r << "," << c;
      ASSERT_EQ(o1(r, c), x(r, static_cast<int64_t>(i1(r, c))) * 2.0f + 1.0f) << r << "," << c;
    }
  }
}

TEST(Gather, TakeAlongAxisAgreesWithALoopForEveryIndexDtype) {
  take_along_both_axes<int32_t>();
  take_along_both_axes<int8_t>();
  take_along_both_axes<uint8_t>();
  take_along_both_axes<int16_t>();
  take_along_both_axes<uint32_t>();
}

// jnp.take_along_axis(arange(12, int8).reshape(3, 4), [[0, 2, -1, 5]], axis=0), jax 0.10:
// fill [[0, 9, 10, -128]], clip [[0, 9, 10, 11]] (negative indices count from the end).
TEST(Gather, TakeAlongAxisModesAsJax) {
  const Array<int8_t> x = arange<int8_t>({3, 4});
  const Array<int32_t> idx = array_of<int32_t>({1, 4}, {0, 2, -1, 5});
  const auto out = run_both(
      [](pltpu::VmemRef<const int8_t> x_ref, pltpu::VmemRef<const int32_t> i_ref,
         pltpu::VmemRef<int8_t> fill, pltpu::VmemRef<int8_t> clip, pltpu::VmemRef<int8_t> val) {
        fill = jnp::take_along_axis(x_ref, i_ref, 0);
        clip = jnp::take_along_axis(x_ref, i_ref, 0, "clip");
        val = jnp::take_along_axis(x_ref, i_ref, 0, lax::GatherScatterMode::FILL_OR_DROP, 7.0);
      },
      pl::out_shape(sds<int8_t>({1, 4}), sds<int8_t>({1, 4}), sds<int8_t>({1, 4})), x, idx);
  const auto& [fill, clip, val] = out;
  EXPECT_EQ(fill.to_vector(), (std::vector<int8_t>{0, 9, 10, -128}));
  EXPECT_EQ(clip.to_vector(), (std::vector<int8_t>{0, 9, 10, 11}));
  EXPECT_EQ(val.to_vector(), (std::vector<int8_t>{0, 9, 10, 7}));
}

TEST(Gather, TakeAlongAxisFillsFloatsWithNaNAndBroadcasts) {
  // x (1, 3) and indices (2, 1) along axis 1 broadcast to (2, 1): [[0.], [2.]] (jax 0.10).
  const Array<float> x = array_of<float>({1, 3}, {0.0f, 1.0f, 2.0f});
  const Array<int32_t> idx = array_of<int32_t>({2, 1}, {0, 2});
  const Array<int32_t> bad = array_of<int32_t>({2, 1}, {3, -4});
  const auto out = run_both(
      [](pltpu::VmemRef<const float> x_ref, pltpu::VmemRef<const int32_t> i_ref,
         pltpu::VmemRef<const int32_t> b_ref, pltpu::VmemRef<float> o, pltpu::VmemRef<float> f) {
        o = jnp::take_along_axis(x_ref, i_ref, 1);
        f = jnp::take_along_axis(x_ref, b_ref, 1);
      },
      pl::out_shape(sds<float>({2, 1}), sds<float>({2, 1})), x, idx, bad);
  const auto& [o, f] = out;
  EXPECT_EQ(o.to_vector(), (std::vector<float>{0.0f, 2.0f}));
  EXPECT_TRUE(std::isnan(f[0]) && std::isnan(f[1]));
  // indices (1, 3) against x (4, 3) along axis 0: one row of picks.
  const Array<float> y = arange<float>({4, 3});
  const Array<int32_t> rows = array_of<int32_t>({1, 3}, {3, 0, 2});
  const auto picked =
      run_both([](pltpu::VmemRef<const float> y_ref, pltpu::VmemRef<const int32_t> r_ref,
                  pltpu::VmemRef<float> p) { p = jnp::take_along_axis(y_ref, r_ref, 0); },
               pl::out_shape<float>({1, 3}), y, rows);
  EXPECT_EQ(picked.to_vector(), (std::vector<float>{9.0f, 1.0f, 8.0f}));
}

// lax.gather of whole rows (x[idx] along axis 0) and of 2x2 windows; jax 0.10 gives, for
// x = arange(12, int8).reshape(3, 4): rows [[2], [0], [7]] fill -> rows 2, 0 and -128s, clip ->
// rows 2, 0, 2; windows at (1, 1) and (2, 3), clip -> [[5, 6], [9, 10]], [[6, 7], [10, 11]].
TEST(Gather, RowsAndWindowsAsJax) {
  const Array<int8_t> x = arange<int8_t>({3, 4});
  const Array<int32_t> rows = array_of<int32_t>({3, 1}, {2, 0, 7});
  const Array<int32_t> starts = array_of<int32_t>({2, 2}, {1, 1, 2, 3});
  const auto out = run_both(
      [](pltpu::VmemRef<const int8_t> x_ref, pltpu::VmemRef<const int32_t> r_ref,
         pltpu::VmemRef<const int32_t> s_ref, pltpu::VmemRef<int8_t> fill,
         pltpu::VmemRef<int8_t> clip, pltpu::VmemRef<int8_t> win) {
        const lax::GatherDimensionNumbers rows_dn{
            .offset_dims = {1}, .collapsed_slice_dims = {0}, .start_index_map = {0}};
        fill = lax::gather(x_ref, r_ref, rows_dn, {1, 4}, "fill");
        clip = lax::gather(x_ref, r_ref, rows_dn, {1, 4}, lax::GatherScatterMode::CLIP);
        const lax::GatherDimensionNumbers win_dn{.offset_dims = {1, 2}, .start_index_map = {0, 1}};
        win = lax::gather(x_ref, s_ref, win_dn, {2, 2}, "clip");
      },
      pl::out_shape(sds<int8_t>({3, 4}), sds<int8_t>({3, 4}), sds<int8_t>({2, 2, 2})), x, rows,
      starts);
  const auto& [fill, clip, win] = out;
  EXPECT_EQ(fill.to_vector(),
            (std::vector<int8_t>{8, 9, 10, 11, 0, 1, 2, 3, -128, -128, -128, -128}));
  EXPECT_EQ(clip.to_vector(), (std::vector<int8_t>{8, 9, 10, 11, 0, 1, 2, 3, 8, 9, 10, 11}));
  EXPECT_EQ(win.to_vector(), (std::vector<int8_t>{5, 6, 9, 10, 6, 7, 10, 11}));
}

// The batched form of take_along_axis, written as lax.gather (operand and index batching dims),
// with the result used by a reduction: out(j) = sum_i lut(idx(i, j), j).
TEST(Gather, BatchedGatherFeedsAReduction) {
  const Array<float> lut = random_ints<float>({8, 128}, -9, 9, 4);
  const Array<int32_t> idx = random_ints<int32_t>({16, 128}, 0, 7, 5);
  const Array<float> out = run_both(
      [](pltpu::VmemRef<const float> l_ref, pltpu::VmemRef<const int32_t> i_ref,
         pltpu::VmemRef<float> o_ref) {
        jnp::Value g = lax::gather(l_ref, i_ref[pl::ellipsis].reshape({16, 128, 1}),
                                   lax::GatherDimensionNumbers{.offset_dims = {},
                                                               .collapsed_slice_dims = {0},
                                                               .start_index_map = {0},
                                                               .operand_batching_dims = {1},
                                                               .start_indices_batching_dims = {1}},
                                   {1, 1});
        o_ref = jnp::sum(g, 0, true);
      },
      pl::out_shape<float>({1, 128}), lut, idx);
  for (int j = 0; j < 128; ++j) {
    float s = 0.0f;
    for (int i = 0; i < 16; ++i) s += lut(static_cast<int64_t>(idx(i, j)), j);
    ASSERT_EQ(out[j], s) << j;
  }
}

// Runs `body` in a kernel: it must raise KernelError kInvalidArgument at the line MARK_LINE
// marked, saying `says`.
void expect_refused(void (*body)(pltpu::VmemRef<const float>, pltpu::VmemRef<const int32_t>),
                    const char* says) {
  const Array<float> x = arange<float>({4, 8});
  const Array<int32_t> i = Array<int32_t>({4, 8});
  auto e = tessera::testing::catch_error<KernelError>([&] {
    pl::pallas_call(
        [body](pltpu::VmemRef<const float> x_ref, pltpu::VmemRef<const int32_t> i_ref,
               pltpu::VmemRef<float> o) {
          body(x_ref, i_ref);
          o = 0.0f;
        },
        pl::out_shape<float>({1}))(x, i);
  });
  ASSERT_TRUE(e);
  EXPECT_EQ(e->kind(), ErrorKind::kInvalidArgument) << e->what();
  EXPECT_EQ(static_cast<int>(e->where().line()), g_line.load()) << e->what();
  EXPECT_NE(std::string(e->what()).find(says), std::string::npos) << e->what();
}

using X = pltpu::VmemRef<const float>;
using Ix = pltpu::VmemRef<const int32_t>;
const lax::GatherDimensionNumbers kRows{
    .offset_dims = {1}, .collapsed_slice_dims = {0}, .start_index_map = {0}};

TEST(Gather, ArgumentErrorsNameTheFieldAndTheValue) {
  // clang-format off
  expect_refused([](X x, Ix i) { MARK_LINE; (void)jnp::take_along_axis(x, i, 2); }, "axis 2 is outside -2..1");
  expect_refused([](X x, Ix i) { MARK_LINE; (void)jnp::take_along_axis(x, i, 0, "wrap"); }, "mode \"wrap\" is not a gather mode");
  expect_refused([](X x, Ix i) { MARK_LINE; (void)jnp::take_along_axis(x, i.at(0), 0); }, "must have one rank");
  expect_refused([](X x, Ix i) { MARK_LINE; (void)jnp::take_along_axis(x.at(pl::ds(0, 2)), i.at(pl::all, pl::ds(0, 3)), 0); }, "do not broadcast along axis 1");
  expect_refused([](X x, Ix i) { MARK_LINE; (void)lax::gather(x, i, kRows, {1, 8}); }, "start_index_map = (0,) has 1 entries, but the index vectors");
  expect_refused([](X x, Ix i) { MARK_LINE; (void)lax::gather(x, i.reshape({32, 1}), kRows, {2, 8}); }, "slice_sizes[0] = 2 for operand dim 0, which is a collapsed dim");
  expect_refused([](X x, Ix i) { MARK_LINE; (void)lax::gather(x, i.reshape({32, 1}), kRows, {1}); }, "slice_sizes has 1 entries for an operand of rank 2");
  expect_refused([](X x, Ix i) { MARK_LINE; (void)lax::gather(x, i.reshape({32, 1}), kRows, {1, 9}); }, "slice_sizes[1] = 9 is outside 0..8");
  expect_refused([](X x, Ix i) { MARK_LINE; (void)lax::gather(x, i.reshape({32, 1}), {.offset_dims = {1}, .collapsed_slice_dims = {2}, .start_index_map = {0}}, {1, 8}); }, "collapsed_slice_dims = (2,) names dim 2, outside 0..1 of the operand");
  expect_refused([](X x, Ix i) { MARK_LINE; (void)lax::gather(x, i.reshape({32, 1}), {.offset_dims = {}, .collapsed_slice_dims = {0}, .start_index_map = {0}}, {1, 8}); }, "offset_dims = () has 0 entries");
  expect_refused([](X x, Ix i) { MARK_LINE; (void)lax::gather(x, i.reshape({4, 8, 1}), {.offset_dims = {}, .collapsed_slice_dims = {1}, .start_index_map = {1}, .operand_batching_dims = {0}, .start_indices_batching_dims = {1}}, {1, 1}); }, "operand batching dim 0 has extent 4 but its start_indices batching dim 1 has extent 8");
  expect_refused([](X x, Ix i) { MARK_LINE; (void)lax::gather(x, i.reshape({32, 1}), kRows, {1, 8}, "one_hot"); }, "mode one_hot is not supported");
  // clang-format on
}

// Checked mode: a promise_in_bounds gather at an index outside the operand reads memory that is
// not the operand on a TPU: reported at its line; natively it is clamped (as "clip"). The twin
// with in-range indices passes.
Array<int8_t> lut_gather(int32_t bad, bool check) {
  const Array<int8_t> lut = arange<int8_t>({4, 8});
  Array<int32_t> idx({4, 8});
  for (int64_t k = 0; k < idx.size(); ++k) idx[k] = static_cast<int32_t>(k % 4);
  idx(2, 5) = bad;
  const auto body = [](pltpu::VmemRef<const int8_t> l, pltpu::VmemRef<const int32_t> i,
                       pltpu::VmemRef<int8_t> o) {
    // clang-format off
    MARK_LINE; o = jnp::take_along_axis(l, i, 0, "promise_in_bounds");
    // clang-format on
  };
  if (check) return pl::pallas_call(body, pl::out_shape<int8_t>({4, 8}), checked())(lut, idx);
  return pl::pallas_call(body, pl::out_shape<int8_t>({4, 8}))(lut, idx);
}

TEST(Gather, CheckedModeReportsABrokenInBoundsPromise) {
  for (int rep = 0; rep < 3; ++rep) {
    const Array<int8_t> ok = lut_gather(3, true);
    EXPECT_EQ(ok(2, 5), 3 * 8 + 5);
  }
  expect_bug([] { lut_gather(4, true); },
             {ErrorKind::kOutOfBounds, kMarked, 0, {}, "index 4 at indices(2, 5)"});
  expect_bug([] { lut_gather(-1, true); },
             {ErrorKind::kOutOfBounds, kMarked, 0, {}, "is outside 0..3 for operand dim 0"});
  // Natively: clamped into the operand.
  EXPECT_EQ(lut_gather(9, false)(2, 5), 3 * 8 + 5);
  EXPECT_EQ(lut_gather(-7, false)(2, 5), 5);
}

// An undefined index is an error at the gather; undefined operand rows travel into the result
// and are an error only where they matter (here a reduction); gathering only written rows is
// clean.
Array<float> scratch_gather(bool undefined_index, int row, pltpu::InterpretParams p) {
  Array<int32_t> idx({1, 8});
  for (int64_t k = 0; k < 8; ++k) idx[k] = row;
  return pl::pallas_call(
      [undefined_index](pltpu::VmemRef<const int32_t> i_ref, pltpu::VmemRef<float> o,
                        pltpu::VmemRef<float> s, pltpu::VmemRef<int32_t> si) {
        s.at(pl::ds(0, 2)) = 1.0f;  // rows 2 and 3 stay unwritten
        if (!undefined_index) si = i_ref;
        jnp::Value g = jnp::take_along_axis(s, si, 0);
        // clang-format off
        MARK_LINE; o = jnp::sum(g, 1, true);
        // clang-format on
      },
      pl::out_shape<float>({1, 1}),
      pl::scratch_shapes(pltpu::VMEM<float>({4, 8}), pltpu::VMEM<int32_t>({1, 8})), p)(idx);
}

TEST(Gather, CheckedModeTracksDefinednessThroughTheGather) {
  for (int rep = 0; rep < 3; ++rep) EXPECT_EQ(scratch_gather(false, 1, checked())[0], 8.0f);
  expect_bug([] { scratch_gather(false, 3, checked()); },
             {ErrorKind::kUninitialized, kMarked, 0, {}, "an undefined element reaches jnp.sum"});
  auto e = tessera::testing::catch_error<KernelError>([] { scratch_gather(true, 1, checked()); });
  ASSERT_TRUE(e);
  EXPECT_EQ(e->kind(), ErrorKind::kUninitialized) << e->what();
  EXPECT_NE(std::string(e->what()).find("an undefined index reaches jnp.take_along_axis"),
            std::string::npos)
      << e->what();
}

}  // namespace
