// Ports of Pallas' tests/pallas/pallas_test.py, continued from pallas_pallas_test.cc
// (docs/pallas-parity.md): in-kernel values, calls without outputs, BlockSpec forms, SMEM blocks
// with aliasing, pl::BoundedSlice in a pallas_call, named grid axes, the float16 matmul and the
// masked matmul over partial blocks.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <string>
#include <tuple>
#include <type_traits>
#include <vector>

#include "support/pallas_port.h"
#include "tessera/tessera.h"

namespace {
using namespace tessera;
using namespace tessera::pallas_port;

// ---- PallasTest -------------------------------------------------------------------------------

TEST(PallasTest, AddXyIndexed) {
  // idx = y_ref[...].sum(); o_ref[...] = x_ref[idx]. Pallas' y is all zeros; a second y whose
  // sum is 2 shows the index is read.
  const Array<float> x = arange<float>({4, 128});
  auto f = pl::pallas_call(
      [](pltpu::VmemRef<const float> xr, pltpu::VmemRef<const int32_t> yr,
         pltpu::VmemRef<float> o) {
        const int idx = jnp::sum(yr[pl::ellipsis]);
        o[pl::ellipsis] = xr[idx];
      },
      pl::out_shape<float>({128}));
  for (int32_t want : {0, 2}) {
    Array<int32_t> y = full<int32_t>({128}, 0);
    y[5] = want;
    const Array<float> o = f(x, y);
    for (int64_t j = 0; j < 128; ++j) ASSERT_EQ(o[j], x(want, j)) << j;
  }
}

TEST(PallasTest, BoolArray) {
  // jnp.logical_or(x_ref[...], True) is true everywhere, for true and false inputs alike.
  auto f = pl::pallas_call(
      [](pltpu::VmemRef<const bool> xr, pltpu::VmemRef<bool> o) { o = jnp::logical_or(xr, true); },
      pl::out_shape<bool>({8, 128}));
  for (bool in : {true, false}) {
    for (bool v : f(full<bool>({8, 128}, in))) ASSERT_TRUE(v);
  }
}

TEST(PallasTest, NoOutputs) {
  // out_shape=(): the call returns nothing.
  const Array<int32_t> x = arange<int32_t>({256});
  int calls = 0;
  auto kernel = pl::pallas_call([&](pltpu::VmemRef<const int32_t> xr) {
    EXPECT_EQ(xr.shape(), Shape({256}));
    ++calls;
  });
  static_assert(std::is_void_v<decltype(kernel(x))>);
  kernel(x);
  EXPECT_EQ(calls, 1);
}

// test_block_spec_no_index_map / test_block_spec_no_block_shape: the (128,) block of a (128,)
// output; each step writes its program id.
void one_block(const pl::BlockSpec& spec) {
  Shape o_ref_shape;
  const Array<int32_t> pids = pl::pallas_call(
      [&](pltpu::VmemRef<int32_t> out) {
        o_ref_shape = out.shape();
        out = jnp::full_like(out, pl::program_id(0));
      },
      pl::out_shape<int32_t>({128}), pl::out_specs(spec), pl::grid({1}),
      pltpu::TensorCoreMesh("core", 1))();
  EXPECT_EQ(o_ref_shape, Shape({128}));
  for (int32_t v : pids) ASSERT_EQ(v, 0);
}

TEST(PallasTest, BlockSpecNoIndexMap) { one_block(pl::BlockSpec({128})); }

TEST(PallasTest, BlockSpecNoBlockShape) {
  // Deliberately different: Pallas' BlockSpec(None, index_map) is a whole-array block with an
  // index map; a Tessera BlockSpec with an index map names its block shape (the array's here).
  one_block(pl::BlockSpec({128}, [](int i) { return pl::idx(i); }));
}

// ---- PallasCallTest ---------------------------------------------------------------------------

TEST(PallasTest, CallBlockSpecValidBlockShapesInt16) {
  // The int16 cases: natively every block shape copies; on a v5e Mosaic's rule holds (a rank-1
  // block is the array, a multiple of 8 x 128, or a power of two of at least 128 * 4 / 2).
  const std::vector<std::pair<int64_t, int64_t>> cases = {{256, 128},  {256, 256},  {1024, 256},
                                                          {2048, 512}, {3072, 768}, {2560, 1280}};
  for (const auto& [n, b] : cases) {
    const Array<int16_t> x = arange<int16_t>({n});
    auto copy = [](pltpu::VmemRef<const int16_t> xr, pltpu::VmemRef<int16_t> o) { o = xr; };
    const pl::BlockSpec spec({b}, [](int i) { return pl::idx(i); });
    const Array<int16_t> y =
        pl::pallas_call(copy, pl::out_shape<int16_t>({n}), pl::grid({(n + b - 1) / b}),
                        pl::in_specs(spec), pl::out_specs(spec))(x);
    for (int64_t i = 0; i < n; ++i) ASSERT_EQ(y[i], x[i]) << n << "/" << b;
    pltpu::InterpretParams v5e;
    v5e.chip = "v5e";
    const bool pow2 = (b & (b - 1)) == 0;
    auto on_chip = [&] {
      return pl::pallas_call(copy, pl::out_shape<int16_t>({n}), pl::grid({(n + b - 1) / b}),
                             pl::in_specs(spec), pl::out_specs(spec), v5e)(x);
    };
    if (b == n || b % 1024 == 0 || (pow2 && b >= 256)) {
      const Array<int16_t> z = on_chip();
      for (int64_t i = 0; i < n; ++i) ASSERT_EQ(z[i], x[i]) << n << "/" << b;
    } else {
      expect_error<Error>(on_chip, ErrorKind::kBlockShape, "block");
    }
  }
}

// matmul_block_spec: a (bm, k) x (k, bn) block product, accumulated over k in bk-wide slices by
// lax.fori_loop with a float32 value carried.
template <class T>
Array<float> matmul_block_spec(const Array<T>& x, const Array<T>& y, int64_t bm, int64_t bn,
                               int64_t bk) {
  const int64_t m = x.shape()[0], k = x.shape()[1], n = y.shape()[1];
  return pl::pallas_call(
      [=](pltpu::VmemRef<const T> x_ref, pltpu::VmemRef<const T> y_ref, pltpu::VmemRef<float> o) {
        // jnp.dot(x_block, y_block, preferred_element_type=f32): jnp::dot takes float32 (or
        // bfloat16) operands; float16 values are exact in float32, and so are their products.
        jnp::Value<float> acc = lax::fori_loop(
            int64_t{0}, k / bk,
            [&](int64_t i, const jnp::Value<float>& a) {
              jnp::Value<float> xb = x_ref.at(pl::all, pl::ds(i * bk, bk)).template astype<float>();
              jnp::Value<float> yb = y_ref.at(pl::ds(i * bk, bk), pl::all).template astype<float>();
              return a + jnp::dot<float>(xb, yb);
            },
            jnp::zeros<float>(o.shape()));
        o[pl::ellipsis] = acc;
      },
      pl::out_shape<float>({m, n}),
      pl::in_specs(pl::BlockSpec({bm, k}, [](int i, int) { return pl::idx(i, 0); }),
                   pl::BlockSpec({k, bn}, [](int, int j) { return pl::idx(0, j); })),
      pl::out_specs(pl::BlockSpec({bm, bn}, [](int i, int j) { return pl::idx(i, j); })),
      pl::grid({pl::cdiv(m, bm), pl::cdiv(n, bn)}))(x, y);
}

template <class T>
void check_matmul_block_spec() {
  // Pallas' m, n in {512, 1024}, k = 512; smaller matrices keep the test fast.
  const int64_t m = 128, n = 256, k = 128;
  const Array<T> x = random_array<T>({m, k}, 1);
  const Array<T> y = random_array<T>({k, n}, 2);
  for (int64_t bm : {64, 128}) {
    for (int64_t bn : {64, 128}) {
      const Array<float> o = matmul_block_spec(x, y, bm, bn, 32);
      for (int64_t i = 0; i < m; ++i) {
        for (int64_t j = 0; j < n; ++j) {
          double want = 0;
          for (int64_t p = 0; p < k; ++p) {
            want += static_cast<double>(static_cast<float>(x(i, p))) *
                    static_cast<double>(static_cast<float>(y(p, j)));
          }
          // Pallas compares with the product rounded to the dtype, atol = rtol = 0.05.
          const double rounded =
              static_cast<double>(static_cast<float>(static_cast<T>(static_cast<float>(want))));
          ASSERT_NEAR(o(i, j), rounded, 0.05 + 0.05 * std::abs(rounded)) << bm << "," << bn;
        }
      }
    }
  }
}

TEST(PallasTest, CallMatmulBlockSpec) {
  check_matmul_block_spec<float>();
  check_matmul_block_spec<float16>();
}

// ---- PallasCallBoundedSliceIndexingTest -------------------------------------------------------

TEST(PallasTest, BoundedSliceIndexingBlockSpecBoundedSliceStatic) {
  // A pl::BoundedSlice block axis in a pallas_call is refused as an unsupported block dimension
  // (it belongs in emit_pipeline).
  const Array<int32_t> x = arange<int32_t>({16, 8, 128});
  auto f = pl::pallas_call(
      [](pltpu::VmemRef<const int32_t> xr, pltpu::VmemRef<int32_t> o) { o = xr; },
      pl::out_shape<int32_t>({8, 8, 128}), pl::grid({1}),
      pl::in_specs(pl::BlockSpec({pl::BoundedSlice(8), 8, 128},
                                 [](int) { return pl::idx(pl::ds(4, 8), 0, 0); })),
      pl::out_specs(pl::BlockSpec({8, 8, 128}, [](int) { return pl::idx(0, 0, 0); })));
  expect_error<Error>([&] { f(x); }, ErrorKind::kUnsupported, "unsupported block dimension type");
}

// ---- PallasCallInputOutputAliasingTest --------------------------------------------------------

TEST(PallasTest, InputOutputAliasingScalarInputOutputAliasing) {
  const Array<float> x({1}, std::vector<float>{41.0f});
  const pl::BlockSpec smem(
      {1}, [](int) { return pl::idx(0); }, pltpu::SMEM);
  const Array<float> o = pl::pallas_call(
      [](pltpu::SmemRef<const float> xr, pltpu::SmemRef<float> yr) {
        const float v = xr(0);
        yr(0) = v + 1.0f;
      },
      pl::out_shape<float>({1}), pl::in_specs(smem), pl::out_specs(smem), pl::grid({1}),
      pl::input_output_aliases({{0, 0}}))(x);
  EXPECT_EQ(o[0], 42.0f);
}

TEST(PallasTest, InputOutputAliasingMixedScalarVectorInputOutputAliasing) {
  const Array<float> xs({1}, std::vector<float>{41.0f});
  const Array<float> xv = arange<float>({8, 128});
  const pl::BlockSpec scalar_spec(
      {1}, [](int) { return pl::idx(0); }, pltpu::SMEM);
  const pl::BlockSpec vector_spec({8, 128}, [](int) { return pl::idx(0, 0); });
  const auto [os, ov] = pl::pallas_call(
      [](pltpu::SmemRef<const float> si, pltpu::VmemRef<const float> vi, pltpu::SmemRef<float> so,
         pltpu::VmemRef<float> vo) {
        const float v = si(0);
        so(0) = v + 1.0f;
        vo = vi + 1.0f;
      },
      pl::out_shape(ShapeDtypeStruct<float>{{1}}, ShapeDtypeStruct<float>{{8, 128}}),
      pl::in_specs(scalar_spec, vector_spec), pl::out_specs(scalar_spec, vector_spec),
      pl::grid({1}), pl::input_output_aliases({{0, 0}, {1, 1}}))(xs, xv);
  EXPECT_EQ(os[0], 42.0f);
  for (int64_t i = 0; i < xv.size(); ++i) ASSERT_EQ(ov[i], xv[i] + 1.0f) << i;
}

// ---- PallasOutOfBoundsInterpretTest -----------------------------------------------------------

TEST(PallasTest, OutOfBoundsInterpretModeOutOfBoundsAccessMaskedOutputIsCorrect) {
  // The contraction (33) is not a multiple of the block (32): the second k block is partial.
  // Masking its padding (whatever it holds) before the product gives x @ y.
  static constexpr int64_t bs = 32;
  const Array<float> x = random_array<float>({bs, bs + 1}, 3);
  const Array<float> y = random_array<float>({bs + 1, bs}, 4);
  const Array<float> out = pl::pallas_call(
      [](pltpu::VmemRef<const float> xr, pltpu::VmemRef<const float> yr, pltpu::VmemRef<float> o) {
        pl::when(pl::program_id(2) == 0, [&] { o = jnp::zeros_like(o); });
        const int64_t num_valid = std::min<int64_t>(bs + 1 - pl::program_id(2) * bs, bs);
        // mask = jnp.repeat(jnp.tril(ones)[num_valid - 1][None, :], bs, axis=0): the repeat of
        // one row is its broadcast.
        jnp::Value<float> tri = jnp::tril(jnp::ones<float>({bs, bs}));
        jnp::Value<float> mask =
            jnp::broadcast_to(jnp::expand_dims(tri[num_valid - 1], 0), {bs, bs});
        jnp::Value<float> masked_x = jnp::where(mask != 0.0f, xr[pl::ellipsis], 0.0f);
        jnp::Value<float> masked_y = jnp::where(mask.T() != 0.0f, yr[pl::ellipsis], 0.0f);
        o += jnp::dot(masked_x, masked_y);
      },
      pl::out_shape<float>({bs, bs}), pl::grid({1, 1, 2}),
      pl::in_specs(pl::BlockSpec({bs, bs}, [](int i, int, int k) { return pl::idx(i, k); }),
                   pl::BlockSpec({bs, bs}, [](int, int j, int k) { return pl::idx(k, j); })),
      pl::out_specs(pl::BlockSpec({bs, bs}, [](int i, int j, int) { return pl::idx(i, j); })))(x,
                                                                                               y);
  for (int64_t i = 0; i < bs; ++i) {
    for (int64_t j = 0; j < bs; ++j) {
      double want = 0;
      for (int64_t p = 0; p < bs + 1; ++p) want += double(x(i, p)) * double(y(p, j));
      ASSERT_NEAR(out(i, j), want, 1e-5 + 1e-6 * std::abs(want)) << i << "," << j;
    }
  }
}

// ---- PallasCallNamedGridTest ------------------------------------------------------------------

TEST(PallasTest, NamedGridNamedGrid) {
  const Array<int32_t> x = arange<int32_t>({2, 8, 128});
  const pl::BlockSpec spec({pl::squeezed, 8, 128}, [](int i) { return pl::idx(i, 0, 0); });
  const Array<int32_t> y =
      pl::pallas_call([](pltpu::VmemRef<const int32_t> xr, pltpu::VmemRef<int32_t> o) { o = xr; },
                      pl::out_shape<int32_t>({2, 8, 128}), pl::in_specs(spec), pl::out_specs(spec),
                      pl::grid({{"i", 2}}))(x);
  EXPECT_EQ(y.to_vector(), x.to_vector());
}

// test_named_grid_reordered_names / test_can_query_named_grid_size_in_kernel_via_psum: the grid
// (("j", 4), ("i", 2)); the index map takes the axes in grid order, whatever their names.
TEST(PallasTest, NamedGridNamedGridReorderedNamesAndQueryGridSize) {
  const Array<int32_t> x = arange<int32_t>({4, 16, 128});
  const pl::BlockSpec spec({pl::squeezed, 8, 128}, [](int i, int j) { return pl::idx(i, j, 0); });
  const Array<int32_t> y = pl::pallas_call(
      [](pltpu::VmemRef<const int32_t> xr, pltpu::VmemRef<int32_t> o) {
        EXPECT_EQ(lax::axis_size("i"), 2);
        EXPECT_EQ(lax::axis_size("j"), 4);
        o = xr;
      },
      pl::out_shape<int32_t>({4, 16, 128}), pl::in_specs(spec), pl::out_specs(spec),
      pl::grid({{"j", 4}, {"i", 2}}))(x);
  EXPECT_EQ(y.to_vector(), x.to_vector());
}

TEST(PallasTest, NamedGridCanQueryNamedDynamicGridSizeInKernelViaPsum) {
  // Pallas skips this case (a traced grid size); a grid extent here is a run-time value.
  for (int n : {2, 4}) {
    const Array<int32_t> x = arange<int32_t>({4, 8, 128});
    const pl::BlockSpec spec({pl::squeezed, 8, 128}, [](int i) { return pl::idx(i, 0, 0); });
    const Array<int32_t> y = pl::pallas_call(
        [n](pltpu::VmemRef<const int32_t> xr, pltpu::VmemRef<int32_t> o) {
          EXPECT_EQ(lax::axis_size("i"), n);
          o = xr;
        },
        pl::out_shape<int32_t>({4, 8, 128}), pl::in_specs(spec), pl::out_specs(spec),
        pl::grid({{"i", n}}))(x);
    for (int64_t i = 0; i < n * 8 * 128; ++i) ASSERT_EQ(y[i], x[i]) << n;
  }
}

TEST(PallasTest, NamedGridCanQueryNamedGridProgramIdInKernelViaAxisIndex) {
  const Array<int32_t> x = arange<int32_t>({4, 8, 128});
  const pl::BlockSpec spec({pl::squeezed, 8, 128}, [](int i) { return pl::idx(i, 0, 0); });
  const Array<int32_t> y = pl::pallas_call(
      [](pltpu::VmemRef<const int32_t> xr, pltpu::VmemRef<int32_t> o) {
        const int i_index = lax::axis_index("i");
        o = xr + i_index;
      },
      pl::out_shape<int32_t>({4, 8, 128}), pl::in_specs(spec), pl::out_specs(spec),
      pl::grid({{"i", 4}}))(x);
  for (int64_t i = 0; i < x.size(); ++i) ASSERT_EQ(y[i], x[i] + i / (8 * 128)) << i;
}

// ---- PallasCallTest.test_split ----------------------------------------------------------------
// Pallas' kernel takes *o_ref (one output per part); a C++ body lists them. The case with as many
// parts as the axis' extent is skipped on TPU by Pallas itself, and here too.

TEST(PallasCallTest, Split) {
  {  // (32,), 2 parts, axis 0
    const Array<float> x = random_array<float>({32}, 1);
    const auto [a, b] = pl::pallas_call(
        [](pltpu::VmemRef<const float> x_ref, pltpu::VmemRef<float> o0, pltpu::VmemRef<float> o1) {
          const auto parts = jnp::split(x_ref[pl::ellipsis], 2, 0);
          o0[pl::ellipsis] = parts[0];
          o1[pl::ellipsis] = parts[1];
        },
        pl::out_shape(ShapeDtypeStruct<float>{{16}}, ShapeDtypeStruct<float>{{16}}))(x);
    for (int64_t i = 0; i < 16; ++i) {
      ASSERT_EQ(a[i], x[i]);
      ASSERT_EQ(b[i], x[16 + i]);
    }
  }
  {  // (32, 64), 4 parts, axis 0
    const Array<float> x = random_array<float>({32, 64}, 2);
    const auto outs = pl::pallas_call(
        [](pltpu::VmemRef<const float> x_ref, pltpu::VmemRef<float> o0, pltpu::VmemRef<float> o1,
           pltpu::VmemRef<float> o2, pltpu::VmemRef<float> o3) {
          const auto parts = jnp::split(x_ref[pl::ellipsis], 4, 0);
          o0[pl::ellipsis] = parts[0];
          o1[pl::ellipsis] = parts[1];
          o2[pl::ellipsis] = parts[2];
          o3[pl::ellipsis] = parts[3];
        },
        pl::out_shape(ShapeDtypeStruct<float>{{8, 64}}, ShapeDtypeStruct<float>{{8, 64}},
                      ShapeDtypeStruct<float>{{8, 64}}, ShapeDtypeStruct<float>{{8, 64}}))(x);
    const Array<float>* o[] = {&std::get<0>(outs), &std::get<1>(outs), &std::get<2>(outs),
                               &std::get<3>(outs)};
    for (int p = 0; p < 4; ++p)
      for (int64_t i = 0; i < 8; ++i)
        for (int64_t j = 0; j < 64; ++j) ASSERT_EQ((*o[p])(i, j), x(p * 8 + i, j)) << p;
  }
  {  // (32, 16), 8 parts, axis 1: each part (32, 2)
    const Array<float> x = random_array<float>({32, 16}, 3);
    using O = pltpu::VmemRef<float>;
    const ShapeDtypeStruct<float> part{{32, 2}};
    const auto outs = pl::pallas_call(
        [](pltpu::VmemRef<const float> x_ref, O o0, O o1, O o2, O o3, O o4, O o5, O o6, O o7) {
          const auto parts = jnp::split(x_ref[pl::ellipsis], 8, 1);
          const O os[] = {o0, o1, o2, o3, o4, o5, o6, o7};
          for (int p = 0; p < 8; ++p) os[p][pl::ellipsis] = parts[static_cast<size_t>(p)];
        },
        pl::out_shape(part, part, part, part, part, part, part, part))(x);
    std::apply(
        [&](const auto&... o) {
          int p = 0;
          for (const Array<float>* a : {&o...}) {
            for (int64_t i = 0; i < 32; ++i)
              for (int64_t j = 0; j < 2; ++j) ASSERT_EQ((*a)(i, j), x(i, p * 2 + j)) << p;
            ++p;
          }
        },
        outs);
  }
}

// jnp.split's sections must divide the axis; the error names the extent, at the call's line.
TEST(PallasCallTest, SplitUnequalIsAnError) {
  int line = 0;
  auto e = tessera::testing::catch_error<KernelError>([&] {
    (void)pl::pallas_call(
        [&line](pltpu::VmemRef<const float> x_ref, pltpu::VmemRef<float> o) {
          line = __LINE__ + 1;
          const auto parts = jnp::split(x_ref[pl::ellipsis], 3, 0);
          o[pl::ellipsis] = parts[0];
        },
        pl::out_shape<float>({10}))(Array<float>({32}));
  });
  ASSERT_TRUE(e);
  EXPECT_EQ(e->kind(), ErrorKind::kInvalidArgument);
  EXPECT_NE(
      std::string(e->what()).find("3 sections do not divide axis 0 of shape (32,) (extent 32)"),
      std::string::npos)
      << e->what();
  EXPECT_EQ(static_cast<int>(e->where().line()), line);
}

// jnp.repeat and lax.slice_in_dim, as jnp spells them.
TEST(PallasCallTest, RepeatAndSliceInDim) {
  const Array<int32_t> x = arange<int32_t>({2, 3});
  const auto [r0, r1, rf, sl] = pl::pallas_call(
      [](pltpu::VmemRef<const int32_t> x_ref, pltpu::VmemRef<int32_t> o0,
         pltpu::VmemRef<int32_t> o1, pltpu::VmemRef<int32_t> of, pltpu::VmemRef<int32_t> os) {
        jnp::Value<int32_t> v = x_ref[pl::ellipsis];
        o0[pl::ellipsis] = jnp::repeat(v, 2, 0);
        o1[pl::ellipsis] = jnp::repeat(x_ref[pl::ellipsis], 3, -1);
        of[pl::ellipsis] = jnp::repeat(v, 2);
        os[pl::ellipsis] = lax::slice_in_dim(v, 0, 3, 2, 1);
      },
      pl::out_shape(ShapeDtypeStruct<int32_t>{{4, 3}}, ShapeDtypeStruct<int32_t>{{2, 9}},
                    ShapeDtypeStruct<int32_t>{{12}}, ShapeDtypeStruct<int32_t>{{2, 2}}))(x);
  for (int64_t i = 0; i < 4; ++i)
    for (int64_t j = 0; j < 3; ++j) ASSERT_EQ(r0(i, j), x(i / 2, j));
  for (int64_t i = 0; i < 2; ++i)
    for (int64_t j = 0; j < 9; ++j) ASSERT_EQ(r1(i, j), x(i, j / 3));
  for (int64_t i = 0; i < 12; ++i) ASSERT_EQ(rf[i], x[i / 2]);
  for (int64_t i = 0; i < 2; ++i) {
    ASSERT_EQ(sl(i, 0), x(i, 0));
    ASSERT_EQ(sl(i, 1), x(i, 2));
  }
}

}  // namespace
