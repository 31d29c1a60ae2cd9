// Ports of Pallas' tests/pallas/pallas_test.py (docs/pallas-parity.md): pallas_call basics,
// BlockSpecs (padding, Element axes, the TPU's block shapes), API errors, aliasing and control
// flow. Control flow is C++'s own: lax.switch / lax.cond / lax.fori_loop / lax.while_loop /
// pl.loop without a carried array are switch / if / for / while.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <limits>
#include <vector>

#include "support/pallas_port.h"
#include "tessera/tessera.h"

namespace {
using namespace tessera;
using namespace tessera::pallas_port;

// ---- PallasTest -------------------------------------------------------------------------------

TEST(PallasTest, AddOne) {
  const Array<float> x = full<float>({128}, 1.0f);
  const Array<float> y = pl::pallas_call(
      [](pltpu::VmemRef<const float> xr, pltpu::VmemRef<float> o) { o = xr + 1.0f; },
      pl::out_shape<float>({128}))(x);
  for (float v : y) ASSERT_EQ(v, 2.0f);
}

TEST(PallasTest, AddOne1d) {
  const Array<float> x = full<float>({8 * 128}, 1.0f);
  const Array<float> y = pl::pallas_call(
      [](pltpu::VmemRef<const float> xr, pltpu::VmemRef<float> o) { o = xr + 1.0f; },
      pl::out_shape<float>({8 * 128}),
      pl::in_specs(pl::BlockSpec({128}, [](int i) { return pl::idx(i); })),
      pl::out_specs(pl::BlockSpec({128}, [](int i) { return pl::idx(i); })), pl::grid({8}))(x);
  for (float v : y) ASSERT_EQ(v, 2.0f);
}

TEST(PallasTest, AddOne2d) {
  const Array<float> x = full<float>({8 * 8, 128}, 1.0f);
  const Array<float> y = pl::pallas_call(
      [](pltpu::VmemRef<const float> xr, pltpu::VmemRef<float> o) { o = xr + 1.0f; },
      pl::out_shape<float>({8 * 8, 128}),
      pl::in_specs(pl::BlockSpec({8, 128}, [](int i) { return pl::idx(i, 0); })),
      pl::out_specs(pl::BlockSpec({8, 128}, [](int i) { return pl::idx(i, 0); })),
      pl::grid({8}))(x);
  for (float v : y) ASSERT_EQ(v, 2.0f);
}

TEST(PallasTest, AddFirst) {
  const Array<float> x = arange<float>({128});
  Array<float> y({1, 128});
  for (int64_t i = 0; i < 128; ++i) y[i] = x[127 - i];
  const Array<float> o =
      pl::pallas_call([](pltpu::VmemRef<const float> xr, pltpu::VmemRef<const float> yr,
                         pltpu::VmemRef<float> out) { out = xr + yr.at(0); },
                      pl::out_shape<float>({128}))(x, y);
  for (int64_t i = 0; i < 128; ++i) ASSERT_EQ(o[i], x[i] + y[i]);
}

TEST(PallasTest, OutShapeNoGrid) {
  Shape o_ref_shape;
  const Array<int32_t> o = pl::pallas_call(
      [&](pltpu::VmemRef<int32_t> out) {
        o_ref_shape = out.shape();
        out = jnp::zeros_like(out);
      },
      pl::out_shape<int32_t>({128}), pltpu::TensorCoreMesh("core", 1))();
  EXPECT_EQ(o_ref_shape, Shape({128}));
  for (int32_t v : o) ASSERT_EQ(v, 0);
}

// test_out_shape_no_block_spec / test_block_spec_no_block_shape_and_no_index_map: with a grid,
// a missing spec and pl.BlockSpec() are the whole array.
void whole_array_block(bool explicit_spec) {
  Shape o_ref_shape;
  auto body = [&](pltpu::VmemRef<int32_t> out) {
    o_ref_shape = out.shape();
    out = jnp::full_like(out, pl::program_id(0));
  };
  const Array<int32_t> pids =
      explicit_spec
          ? pl::pallas_call(body, pl::out_shape<int32_t>({128}), pl::out_specs(pl::BlockSpec()),
                            pl::grid({1}), pltpu::TensorCoreMesh("core", 1))()
          : pl::pallas_call(body, pl::out_shape<int32_t>({128}), pl::grid({1}),
                            pltpu::TensorCoreMesh("core", 1))();
  EXPECT_EQ(o_ref_shape, Shape({128}));
  for (int32_t v : pids) ASSERT_EQ(v, 0);
}

TEST(PallasTest, OutShapeNoBlockSpec) { whole_array_block(false); }
TEST(PallasTest, BlockSpecNoBlockShapeAndNoIndexMap) { whole_array_block(true); }

// ---- PallasCallTest ---------------------------------------------------------------------------

Array<int32_t> show_pids_1d(int64_t size, int64_t block) {
  return pl::pallas_call(
      [block](pltpu::VmemRef<int32_t> o) {
        EXPECT_EQ(o.shape(), Shape({block}));
        o = jnp::full_like(o, pl::program_id(0));
      },
      pl::out_shape<int32_t>({size}), pl::grid({(size + block - 1) / block}),
      pl::out_specs(pl::BlockSpec({block}, [](int i) { return pl::idx(i); })))();
}

TEST(PallasTest, CallBlockSpecWithPadding) {
  EXPECT_EQ(show_pids_1d(8, 2).to_vector(), (std::vector<int32_t>{0, 0, 1, 1, 2, 2, 3, 3}));
  EXPECT_EQ(show_pids_1d(8, 3).to_vector(), (std::vector<int32_t>{0, 0, 0, 1, 1, 1, 2, 2}));
  EXPECT_EQ(show_pids_1d(3, 8).to_vector(), (std::vector<int32_t>{0, 0, 0}));
}

// test_block_spec_padding_is_nan: deliberately different. A partial input block's padding holds
// checked mode's poison, TPU interpret mode's (int max, NaN), not the HLO interpreter's int min.
template <class T>
void block_spec_padding(bool element) {
  const pl::BlockSpec spec =
      element ? pl::BlockSpec({pl::Element(6, {1, 2})}, [](int) { return pl::idx(0); })
              : pl::BlockSpec({6}, [](int) { return pl::idx(0); });
  const Array<T> res = pl::pallas_call(
      [](pltpu::VmemRef<const T> x, pltpu::VmemRef<T> o) { o = x; }, pl::out_shape<T>({6}),
      pl::grid({1}), pl::in_specs(spec), pltpu::InterpretParams{})(full<T>({3}, T(42)));
  const int first = element ? 1 : 0;
  for (int i = 0; i < 6; ++i) {
    const bool data = i >= first && i < first + 3;
    if (data) {
      ASSERT_EQ(res[i], T(42));
    } else if constexpr (std::is_floating_point_v<T>) {
      ASSERT_TRUE(std::isnan(res[i])) << i;
    } else {
      ASSERT_EQ(res[i], std::numeric_limits<T>::max()) << i;  // HLO interpreter: min
    }
  }
}

TEST(PallasTest, CallBlockSpecPaddingIsNan) {
  block_spec_padding<int32_t>(false);
  block_spec_padding<float>(false);
}

TEST(PallasTest, CallBlockSpecMappedDimension) {
  const Array<float> xy = arange<float>({2, 4});
  const Array<float> out = pl::pallas_call(
      [](pltpu::VmemRef<const float> x, pltpu::VmemRef<const float> y, pltpu::VmemRef<float> o) {
        o = x + y;
      },
      pl::out_shape<float>({4}),
      pl::in_specs(pl::BlockSpec({pl::squeezed, 4}, [](int) { return pl::idx(0, 0); }),
                   pl::BlockSpec({pl::squeezed, 4}, [](int) { return pl::idx(1, 0); })),
      pl::grid({1}))(xy, xy);
  for (int64_t i = 0; i < 4; ++i) ASSERT_EQ(out[i], xy(0, i) + xy(1, i));
}

// test_block_spec_valid_block_shapes: every shape copies (as in Pallas' interpret mode); checked
// against a TPU generation (v5e), exactly the shapes Mosaic's lowering refuses raise kBlockShape.
template <class T>
Array<T> copy_in_blocks(const Array<T>& x, const Shape& block, const pltpu::InterpretParams* p) {
  const Shape& shape = x.shape();
  const int rank = shape.rank();
  Shape grid = shape;
  for (int a = 0; a < rank; ++a) grid[a] = (shape[a] + block[a] - 1) / block[a];
  auto copy = [](pltpu::VmemRef<const T> xr, pltpu::VmemRef<T> o) { o = xr; };
  auto call = [&](const pl::BlockSpec& spec) {
    const pltpu::InterpretParams params = p != nullptr ? *p : pltpu::InterpretParams{};
    if (p != nullptr) {
      return pl::pallas_call(copy, pl::out_shape<T>(shape), pl::grid(grid), pl::in_specs(spec),
                             pl::out_specs(spec), params)(x);
    }
    return pl::pallas_call(copy, pl::out_shape<T>(shape), pl::grid(grid), pl::in_specs(spec),
                           pl::out_specs(spec))(x);
  };
  if (rank == 1) return call(pl::BlockSpec({block[0]}, [](int i) { return pl::idx(i); }));
  if (rank == 2) {
    return call(pl::BlockSpec({block[0], block[1]}, [](int i, int j) { return pl::idx(i, j); }));
  }
  return call(pl::BlockSpec({block[0], block[1], block[2]},
                            [](int i, int j, int k) { return pl::idx(i, j, k); }));
}

// Mosaic's rule (pallas_test.py): rank 1 equal to the array, a multiple of 8 x 128 or a power of
// two of at least 128 * 4 / itemsize; otherwise the last two dims divisible by 8 and 128 or equal.
bool mosaic_accepts(const Shape& shape, const Shape& block, int64_t itemsize) {
  const int r = shape.rank();
  if (r == 1) {
    const int64_t b = block[0];
    const bool pow2 = (b & (b - 1)) == 0;
    return b == shape[0] || b % 1024 == 0 || (pow2 && b >= 128 * 4 / itemsize);
  }
  const int64_t b0 = block[r - 1], b1 = block[r - 2];
  return (b0 == shape[r - 1] || b0 % 128 == 0) && (b1 == shape[r - 2] || b1 % 8 == 0);
}

template <class T>
void valid_block_shape(Shape shape, Shape block) {
  const Array<T> x = arange<T>(shape);
  const Array<T> res = copy_in_blocks(x, block, nullptr);
  for (int64_t i = 0; i < x.size(); ++i) ASSERT_EQ(res[i], x[i]) << shape.to_string();
  pltpu::InterpretParams v5e;
  v5e.chip = "v5e";
  if (mosaic_accepts(shape, block, sizeof(T))) {
    const Array<T> on_chip = copy_in_blocks(x, block, &v5e);
    for (int64_t i = 0; i < x.size(); ++i) ASSERT_EQ(on_chip[i], x[i]) << shape.to_string();
  } else {
    expect_error<Error>([&] { copy_in_blocks(x, block, &v5e); }, ErrorKind::kBlockShape, "block");
  }
}

TEST(PallasTest, CallBlockSpecValidBlockShapes) {
  const std::vector<std::pair<Shape, Shape>> int32_cases = {{{2}, {2}},
                                                            {{128}, {64}},
                                                            {{128}, {128}},
                                                            {{1024}, {128}},
                                                            {{2048}, {256}},
                                                            {{3072}, {384}},
                                                            {{2304}, {1152}},
                                                            {{4096}, {2048}},
                                                            {{2, 2}, {2, 2}},
                                                            {{3, 3}, {3, 3}},
                                                            {{4, 2}, {2, 2}},
                                                            {{6, 2, 2}, {2, 2, 2}},
                                                            {{6, 2, 2}, {3, 2, 2}},
                                                            {{16, 128}, {8, 128}},
                                                            {{6, 16, 128}, {2, 8, 128}},
                                                            {{6, 16, 128}, {3, 8, 128}},
                                                            {{16, 64}, {8, 64}},
                                                            {{16, 128}, {4, 128}},
                                                            {{16, 128}, {2, 128}},
                                                            {{16, 128}, {8, 64}},
                                                            {{9, 128}, {9, 64}},
                                                            {{9, 128}, {9, 128}},
                                                            {{18, 128}, {9, 128}},
                                                            {{8, 129}, {8, 129}},
                                                            {{9, 129}, {8, 129}},
                                                            {{9, 129}, {9, 129}},
                                                            {{1, 128}, {4, 128}},
                                                            {{2, 128}, {4, 128}},
                                                            {{3, 128}, {4, 128}},
                                                            {{5, 128}, {8, 128}}};
  for (const auto& [shape, block] : int32_cases) valid_block_shape<int32_t>(shape, block);
  const std::vector<std::pair<Shape, Shape>> int8_cases = {
      {{512}, {256}}, {{512}, {512}}, {{1024}, {512}}, {{2048}, {512}}, {{3072}, {1536}}};
  for (const auto& [shape, block] : int8_cases) valid_block_shape<int8_t>(shape, block);
}

TEST(PallasTest, CallUsingPallasSlice) {
  const Array<float> x = random_array<float>({32, 4}, 0);
  const Array<float> y = pl::pallas_call(
      [](pltpu::VmemRef<const float> xr, pltpu::VmemRef<float> yr) {
        yr.at(pl::ds(0, 4), pl::ds(0, 4)) = xr.at(pl::ds(0, 4), pl::ds(0, 4));
      },
      pl::out_shape<float>({4, 4}))(x);
  for (int64_t i = 0; i < 16; ++i) ASSERT_EQ(y[i], x[i]);
}

TEST(PallasTest, CallPallasCallUnderDisableJit) {
  const Array<float> x = arange<float>({8});
  const Array<float> y = pl::pallas_call(
      [](pltpu::VmemRef<const float> xr, pltpu::VmemRef<float> o) { o = xr + 1.0f; },
      pl::out_shape<float>({8}))(x);
  for (int64_t i = 0; i < 8; ++i) ASSERT_EQ(y[i], x[i] + 1.0f);
}

TEST(PallasTest, CallIntegerDot) {
  Array<int8_t> x({32, 128});
  Array<int8_t> y({128, 64});
  Random r(0);
  for (int8_t& v : x) v = static_cast<int8_t>(r.uniform_int(-128, 128));
  for (int8_t& v : y) v = static_cast<int8_t>(r.uniform_int(-128, 128));
  const Array<int32_t> out =
      pl::pallas_call([](pltpu::VmemRef<const int8_t> xr, pltpu::VmemRef<const int8_t> yr,
                         pltpu::VmemRef<int32_t> o) { o = jnp::dot<int32_t>(xr, yr); },
                      pl::out_shape<int32_t>({32, 64}))(x, y);
  for (int64_t i = 0; i < 32; ++i) {
    for (int64_t j = 0; j < 64; ++j) {
      int32_t want = 0;
      for (int64_t k = 0; k < 128; ++k) want += int32_t{x(i, k)} * int32_t{y(k, j)};
      ASSERT_EQ(out(i, j), want);
    }
  }
}

// test_float8_e4m3b11fnuz_dot[transpose]: jnp.einsum("mk,kn->mn" or "mk,nk->mn") of bfloat16 x
// and float8_e4m3b11fnuz y with a float32 result, cast to bfloat16, against x @ y (scaled down
// from (2048, 1024) x (1024, 1024)). The products are exact in float32; the sums differ from the
// host's double sums by float32 rounding, below the bfloat16 result's half step.
TEST(PallasTest, CallFloat8E4m3b11fnuzDot) {
  const int64_t m = 64, k = 256, n = 128;
  for (const bool transpose : {true, false}) {
    Random r(transpose ? 1 : 2);
    Array<bfloat16> x({m, k});
    for (bfloat16& v : x) v = bfloat16(2.0f * r.uniform());
    Array<float8_e4m3b11fnuz> y(transpose ? Shape{n, k} : Shape{k, n});
    for (float8_e4m3b11fnuz& v : y) v = float8_e4m3b11fnuz(2.0f * r.uniform());
    const Array<bfloat16> out = pl::pallas_call(
        [transpose](pltpu::VmemRef<const bfloat16> x_ref,
                    pltpu::VmemRef<const float8_e4m3b11fnuz> y_ref, pltpu::VmemRef<bfloat16> o) {
          o[pl::ellipsis] = jnp::einsum<float>(transpose ? "mk,nk->mn" : "mk,kn->mn",
                                               x_ref[pl::ellipsis], y_ref[pl::ellipsis])
                                .astype<bfloat16>();
        },
        pl::in_specs(pl::BlockSpec(), pl::BlockSpec()), pl::out_shape<bfloat16>({m, n}))(x, y);
    for (int64_t i = 0; i < m; ++i) {
      for (int64_t j = 0; j < n; ++j) {
        double want = 0;
        for (int64_t p = 0; p < k; ++p) {
          const float yv = transpose ? y(j, p) : y(p, j);
          want += static_cast<double>(static_cast<float>(x(i, p))) * yv;
        }
        ASSERT_NEAR(static_cast<float>(out(i, j)), want, std::fabs(want) * 0x1p-8 + 1e-3)
            << i << ", " << j << (transpose ? " (transposed)" : "");
      }
    }
  }
}

// ---- PallasCallElementIndexingTest ------------------------------------------------------------

Array<int32_t> show_element_pids(int64_t rows, pl::Element e) {
  return pl::pallas_call(
      [](pltpu::VmemRef<int32_t> o) {
        EXPECT_EQ(o.shape(), Shape({8, 128}));
        o = jnp::full_like(o, pl::program_id(0));
      },
      pl::out_shape<int32_t>({rows, 128}), pl::grid({2}),
      pl::out_specs(
          pl::BlockSpec({e, pl::Element(128, {0, 0})}, [](int i) { return pl::idx(8 * i, 0); })))();
}

TEST(PallasTest, ElementIndexingBlockSpecElement) {
  auto expect_rows = [](const Array<int32_t>& pids, int64_t first_of_1) {
    for (int64_t r = 0; r < pids.shape()[0]; ++r) {
      for (int64_t c = 0; c < 128; ++c) ASSERT_EQ(pids(r, c), r < first_of_1 ? 0 : 1) << r;
    }
  };
  expect_rows(show_element_pids(16, pl::Element(8)), 8);          // no padding
  expect_rows(show_element_pids(14, pl::Element(8, {0, 2})), 8);  // only high padding
  expect_rows(show_element_pids(11, pl::Element(8, {3, 2})), 5);  // low and high (Pallas skips)
}

TEST(PallasTest, ElementIndexingBlockSpecElementPaddingIsNan) {
  block_spec_padding<int32_t>(true);
  block_spec_padding<float>(true);
}

TEST(PallasTest, ElementIndexingElementIndexing) {
  const Array<float> x = arange<float>({16 * 8, 128});
  const Array<float> y = pl::pallas_call(
      [](pltpu::VmemRef<const float> xr, pltpu::VmemRef<float> o) {
        o = xr.at(pl::ds(0, 8)) + xr.at(pl::ds(8, 8));
      },
      pl::grid({15}),
      pl::in_specs(pl::BlockSpec({pl::Element(2 * 8), pl::Element(128)},
                                 [](int i) { return pl::idx(i * 8, 0); })),
      pl::out_specs(pl::BlockSpec({8, 128}, [](int i) { return pl::idx(i, 0); })),
      pl::out_shape<float>({15 * 8, 128}))(x);
  for (int64_t r = 0; r < 15 * 8; ++r) {
    for (int64_t c = 0; c < 128; ++c) ASSERT_EQ(y(r, c), x(r, c) + x(r + 8, c));
  }
}

TEST(PallasTest, ElementIndexingUnblockedIndexingWithPadding) {
  const Array<float> x = arange<float>({8, 128});
  const Array<float> y = pl::pallas_call(
      [](pltpu::VmemRef<const float> xr, pltpu::VmemRef<float> o) { o = xr.at(pl::ds(0, 8)); },
      pl::grid({1}),
      pl::in_specs(pl::BlockSpec({pl::Element(2 * 8, {0, 8}), pl::Element(128)},
                                 [](int) { return pl::idx(0, 0); })),
      pl::out_specs(pl::BlockSpec({8, 128}, [](int) { return pl::idx(0, 0); })),
      pl::out_shape<float>({8, 128}))(x);
  for (int64_t i = 0; i < x.size(); ++i) ASSERT_EQ(y[i], x[i]);
}

// ---- ApiErrorTest -----------------------------------------------------------------------------

TEST(PallasTest, ApiErrorIndexMapWrongNumberOfArguments) {
  const Array<int32_t> a = arange<int32_t>({256});
  auto f = pl::pallas_call([](pltpu::VmemRef<const int32_t>, pltpu::VmemRef<int32_t>) {},
                           pl::out_shape<int32_t>({256}),
                           pl::in_specs(pl::BlockSpec({4}, [](int, int) { return pl::idx(0); })));
  expect_error<UsageError>([&] { f(a); }, ErrorKind::kInvalidArgument, "index map");
}

TEST(PallasTest, ApiErrorIndexMapWrongNumberOfResults) {
  const Array<int32_t> a = arange<int32_t>({256});
  auto f = pl::pallas_call([](pltpu::VmemRef<const int32_t>, pltpu::VmemRef<int32_t>) {},
                           pl::out_shape<int32_t>({256}),
                           pl::in_specs(pl::BlockSpec({4}, [] { return pl::idx(0, 0); })));
  expect_error<Error>([&] { f(a); }, ErrorKind::kShapeMismatch, "returned 2 indices");
}

TEST(PallasTest, ApiErrorBlockShapeNdimMismatch) {
  const Array<int32_t> a = arange<int32_t>({256});
  auto f = pl::pallas_call([](pltpu::VmemRef<const int32_t>, pltpu::VmemRef<int32_t>) {},
                           pl::out_shape<int32_t>({256}),
                           pl::in_specs(pl::BlockSpec({1, 1}, [] { return pl::idx(0, 0); })));
  expect_error<UsageError>([&] { f(a); }, ErrorKind::kShapeMismatch, "2 block axes");
  auto g = pl::pallas_call([](pltpu::VmemRef<const int32_t>, pltpu::VmemRef<int32_t>) {},
                           pl::out_shape<int32_t>({256}),
                           pl::out_specs(pl::BlockSpec({1, 1}, [] { return pl::idx(0, 0); })));
  expect_error<UsageError>([&] { g(a); }, ErrorKind::kShapeMismatch, "2 block axes");
}

TEST(PallasTest, ApiErrorInputOutputAliasesErrors) {
  const Array<int32_t> x = arange<int32_t>({8, 128});
  auto body = [](pltpu::VmemRef<const int32_t>, pltpu::VmemRef<const int32_t>,
                 pltpu::VmemRef<int32_t>) {};
  expect_error<UsageError>(
      [&] {
        pl::pallas_call(body, pl::out_shape<int32_t>({8, 128}), pl::input_output_aliases({{2, 0}}))(
            x, x);
      },
      ErrorKind::kInvalidArgument, "input_output_aliases");
  expect_error<UsageError>(
      [&] {
        pl::pallas_call(body, pl::out_shape<int32_t>({8, 128}), pl::input_output_aliases({{1, 1}}))(
            x, x);
      },
      ErrorKind::kInvalidArgument, "input_output_aliases");
  const Array<int32_t> y = arange<int32_t>({16, 128});
  expect_error<UsageError>(
      [&] {
        pl::pallas_call(body, pl::out_shape<int32_t>({8, 128}), pl::input_output_aliases({{1, 0}}))(
            x, y);
      },
      ErrorKind::kShapeMismatch, "must have the same shape and dtype");
  expect_error<UsageError>(
      [&] {
        pl::pallas_call([](pltpu::VmemRef<const int32_t>, pltpu::VmemRef<const int32_t>,
                           pltpu::VmemRef<float>) {},
                        pl::out_shape<float>({8, 128}), pl::input_output_aliases({{1, 0}}))(x, x);
      },
      ErrorKind::kShapeMismatch, "must have the same shape and dtype");
}

// test_pallas_error_for_writing_ref_to_ref: deliberately different. `o = x` between refs copies
// the elements (x_ref[...]); C++ has no ref object to store.
TEST(PallasTest, ApiErrorPallasErrorForWritingRefToRef) {
  const Array<float> x = full<float>({8, 128}, 1.0f);
  const Array<float> y =
      pl::pallas_call([](pltpu::VmemRef<const float> xr, pltpu::VmemRef<float> o) { o = xr; },
                      pl::out_shape<float>({8, 128}))(x);
  for (float v : y) ASSERT_EQ(v, 1.0f);
}

// ---- PallasCallInputOutputAliasingTest --------------------------------------------------------

TEST(PallasTest, InputOutputAliasingVectorInputOutputAliasing) {
  // Pallas uses (32, 1024, 1024); a smaller array keeps the test fast.
  const Array<float> x = full<float>({4, 256, 256}, 1.0f);
  const Array<float> o = pl::pallas_call(
      [](pltpu::VmemRef<const float> xr, pltpu::VmemRef<float> yr) { yr = xr + 1.0f; },
      pl::out_shape<float>({4, 256, 256}),
      pl::in_specs(pl::BlockSpec({pl::squeezed, 256, 256}, [](int i) { return pl::idx(i, 0, 0); })),
      pl::out_specs(
          pl::BlockSpec({pl::squeezed, 256, 256}, [](int i) { return pl::idx(i, 0, 0); })),
      pl::grid({4}), pl::input_output_aliases({{0, 0}}))(x);
  for (float v : o) ASSERT_EQ(v, 2.0f);
}

}  // namespace
