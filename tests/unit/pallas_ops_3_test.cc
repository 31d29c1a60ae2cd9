// Ports of Pallas' tests/pallas/ops_test.py: the cases on uint16, uint32 and int16, and the
// products (docs/pallas-parity.md; the other cases are in pallas_ops_test.cc,
// pallas_ops_shape_test.cc and pallas_ops_2_test.cc). Expected values are jnp's on the CPU
// (jax 0.10), C++'s where the scalars are C++ values, or double-precision sums for products.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <utility>
#include <vector>

#include "support/pallas_port.h"
#include "tessera/tessera.h"

namespace {
using namespace tessera;
using namespace tessera::pallas_port;

template <class T>
void sign_case(int value) {
  const Array<T> out = pl::pallas_call(
      [](pltpu::VmemRef<const T> x_ref, pltpu::VmemRef<T> o_ref) {
        o_ref[pl::ellipsis] = jnp::sign(x_ref[pl::ellipsis]);
      },
      pl::out_shape<T>({8, 128}))(full<T>({8, 128}, static_cast<T>(value)));
  for (T v : out) ASSERT_EQ(v, static_cast<T>(value > 0 ? 1 : value < 0 ? -1 : 0)) << value;
}

TEST(OpsTest, SignUnsignedAndInt16) {
  for (int v : {0, 5}) {
    sign_case<uint16_t>(v);
    sign_case<uint32_t>(v);
  }
  for (int v : {-3, 0, 5}) sign_case<int16_t>(v);
}

TEST(OpsTest, ScalarMapInt16) {
  for (const Shape& s : {Shape{64}, Shape{8, 8}}) {
    const Array<int16_t> x = arange<int16_t>(s);
    const Array<int16_t> y = pl::pallas_call(
        [](pltpu::SmemRef<const int16_t> x_ref, pltpu::SmemRef<int16_t> y_ref) {
          const int64_t n = x_ref.shape().size();
          const auto flat_x = x_ref.reshape({n});
          const auto flat_y = y_ref.reshape({n});
          for (int64_t i = 0; i < n; ++i) {
            const int32_t v = flat_x(i);
            flat_y(i) = static_cast<int16_t>(v * v);
          }
        },
        pl::in_specs(pl::BlockSpec(pltpu::SMEM)), pl::out_specs(pl::BlockSpec(pltpu::SMEM)),
        pl::out_shape<int16_t>(s))(x);
    for (int64_t i = 0; i < x.size(); ++i) ASSERT_EQ(y[i], static_cast<int16_t>(x[i] * x[i]));
  }
}

TEST(OpsTest, IotaInt16) {
  for (const auto& [shape, dim] : std::vector<std::pair<Shape, int>>{{{32}, 0},
                                                                     {{8, 4}, 0},
                                                                     {{8, 4}, 1},
                                                                     {{8, 16, 2}, 0},
                                                                     {{8, 16, 2}, 1},
                                                                     {{8, 16, 2}, 2}}) {
    const Array<int16_t> out = pl::pallas_call(
        [shape = shape, dim = dim](pltpu::VmemRef<int16_t> o) {
          o = lax::broadcasted_iota<int16_t>(shape, dim);
        },
        pl::out_shape<int16_t>(shape))();
    int64_t inner = 1;
    for (int a = dim + 1; a < shape.rank(); ++a) inner *= shape[a];
    for (int64_t i = 0; i < out.size(); ++i) ASSERT_EQ(out[i], (i / inner) % shape[dim]);
  }
}

// x, y of test_comparison and test_binary_array, converted as numpy's astype (wrapping).
template <class T>
Array<T> tiled(std::initializer_list<int> v, int reps) {
  Array<T> a({static_cast<int64_t>(v.size()) * reps});
  int64_t i = 0;
  for (int r = 0; r < reps; ++r)
    for (int e : v) a[i++] = static_cast<T>(e);
  return a;
}

TEST(OpsTest, ComparisonAndComparisonScalarUint32) {
  const Array<uint32_t> x = tiled<uint32_t>({0, 3, -4, -6, 0, 5, 4, -7}, 16);
  const Array<uint32_t> y = tiled<uint32_t>({3, 1, -4, -5, 0, -2, 2, 4}, 16);
  const Array<int32_t> arr = pl::pallas_call(
      [](pltpu::VmemRef<const uint32_t> a, pltpu::VmemRef<const uint32_t> b,
         pltpu::VmemRef<int32_t> o) {
        o.at(0) = jnp::equal(a, b).astype<int32_t>();
        o.at(1) = jnp::not_equal(a, b).astype<int32_t>();
        o.at(2) = jnp::less(a, b).astype<int32_t>();
        o.at(3) = jnp::less_equal(a, b).astype<int32_t>();
        o.at(4) = jnp::greater(a, b).astype<int32_t>();
        o.at(5) = jnp::greater_equal(a, b).astype<int32_t>();
      },
      pl::out_shape<int32_t>({6, 128}))(x, y);
  const Array<int32_t> sc = pl::pallas_call(  // SMEM scalars are C++ values: C++'s compares
      [](pltpu::SmemRef<const uint32_t> a, pltpu::SmemRef<const uint32_t> b,
         pltpu::SmemRef<int32_t> o) {
        for (int64_t i = 0; i < 128; ++i) {
          const uint32_t u = a(i), v = b(i);
          o(0, i) = u == v, o(1, i) = u != v, o(2, i) = u < v;
          o(3, i) = u <= v, o(4, i) = u > v, o(5, i) = u >= v;
        }
      },
      pl::in_specs(pl::BlockSpec(pltpu::SMEM), pl::BlockSpec(pltpu::SMEM)),
      pl::out_specs(pl::BlockSpec(pltpu::SMEM)), pl::out_shape<int32_t>({6, 128}))(x, y);
  for (int64_t i = 0; i < 128; ++i) {
    const uint32_t u = x[i], v = y[i];  // numpy compares uint32 as unsigned
    const bool want[] = {u == v, u != v, u<v, u <= v, u> v, u >= v};
    for (int k = 0; k < 6; ++k) {
      ASSERT_EQ(arr(k, i) != 0, want[k]) << k << " " << i;
      ASSERT_EQ(sc(k, i) != 0, want[k]) << k << " " << i;
    }
  }
}

template <class T, class F>
void binary_case(F f, bool shift, const std::vector<T>& want, const char* name) {
  const Array<T> x = tiled<T>({1, 3, -4, -6, 2, 5, 4, -7}, 1);
  const Array<T> y =
      shift ? tiled<T>({3, 1, 4, 5, 2, 2, 2, 4}, 1) : tiled<T>({3, 1, -4, -5, 2, -2, 2, 4}, 1);
  const Array<T> out = pl::pallas_call([f](pltpu::VmemRef<const T> a, pltpu::VmemRef<const T> b,
                                           pltpu::VmemRef<T> o) { o[pl::ellipsis] = f(a, b); },
                                       pl::out_shape<T>({8}))(x, y);
  EXPECT_EQ(out.to_vector(), want) << name;
}

TEST(OpsTest, BinaryArrayUint32AndInt16) {
  // jnp on the CPU, uint32 and int16.
  using U = std::vector<uint32_t>;
  using I = std::vector<int16_t>;
  const auto op = [](auto g) { return [g](const auto& a, const auto& b) { return g(a, b); }; };
  binary_case<uint32_t>(op([](auto& a, auto& b) { return jnp::floor_divide(a, b); }), false,
                        U{0u, 3u, 1u, 0u, 1u, 0u, 2u, 1073741822u}, "floor_divide");
  binary_case<int16_t>(op([](auto& a, auto& b) { return jnp::add(a, b); }), false,
                       I{4, 4, -8, -11, 4, 3, 6, -3}, "add");
  binary_case<uint32_t>(op([](auto& a, auto& b) { return jnp::add(a, b); }), false,
                        U{4u, 4u, 4294967288u, 4294967285u, 4u, 3u, 6u, 4294967293u}, "add");
  binary_case<int16_t>(op([](auto& a, auto& b) { return jnp::subtract(a, b); }), false,
                       I{-2, 2, 0, -1, 0, 7, 2, -11}, "subtract");
  binary_case<uint32_t>(op([](auto& a, auto& b) { return jnp::subtract(a, b); }), false,
                        U{4294967294u, 2u, 0u, 4294967295u, 0u, 7u, 2u, 4294967285u}, "subtract");
  binary_case<int16_t>(op([](auto& a, auto& b) { return jnp::multiply(a, b); }), false,
                       I{3, 3, 16, 30, 4, -10, 8, -28}, "multiply");
  binary_case<uint32_t>(op([](auto& a, auto& b) { return jnp::multiply(a, b); }), false,
                        U{3u, 3u, 16u, 30u, 4u, 4294967286u, 8u, 4294967268u}, "multiply");
  binary_case<uint32_t>(op([](auto& a, auto& b) { return jnp::remainder(a, b); }), false,
                        U{1u, 0u, 0u, 4294967290u, 0u, 5u, 0u, 1u}, "remainder");
  binary_case<uint32_t>(op([](auto& a, auto& b) { return jnp::bitwise_and(a, b); }), false,
                        U{1u, 1u, 4294967292u, 4294967290u, 2u, 4u, 0u, 0u}, "and");
  binary_case<uint32_t>(op([](auto& a, auto& b) { return jnp::bitwise_or(a, b); }), false,
                        U{3u, 3u, 4294967292u, 4294967291u, 2u, 4294967295u, 6u, 4294967293u},
                        "or");
  binary_case<uint32_t>(op([](auto& a, auto& b) { return jnp::bitwise_xor(a, b); }), false,
                        U{2u, 2u, 0u, 1u, 0u, 4294967291u, 6u, 4294967293u}, "xor");
  binary_case<uint32_t>(op([](auto& a, auto& b) { return jnp::bitwise_left_shift(a, b); }), true,
                        U{8u, 6u, 4294967232u, 4294967104u, 8u, 20u, 16u, 4294967184u}, "<<");
  binary_case<uint32_t>(op([](auto& a, auto& b) { return jnp::bitwise_right_shift(a, b); }), true,
                        U{0u, 1u, 268435455u, 134217727u, 0u, 1u, 1u, 268435455u}, ">>");
}

TEST(OpsTest, BinaryScalarUint32) {
  // Scalars read from SMEM are C++ values: C++'s unsigned arithmetic is numpy's uint32's.
  const Array<uint32_t> out = pl::pallas_call(
      [](pltpu::SmemRef<const uint32_t> x_ref, pltpu::SmemRef<const uint32_t> y_ref,
         pltpu::SmemRef<uint32_t> o) {
        const uint32_t x = x_ref(0), y = y_ref(0);
        o(0) = x / y, o(1) = x + y, o(2) = x - y, o(3) = x * y, o(4) = x % y;
        o(5) = x & y, o(6) = x | y, o(7) = x ^ y, o(8) = x << y, o(9) = x >> y;
      },
      pl::in_specs(pl::BlockSpec(pltpu::SMEM), pl::BlockSpec(pltpu::SMEM)),
      pl::out_specs(pl::BlockSpec(pltpu::SMEM)),
      pl::out_shape<uint32_t>({10}))(full<uint32_t>({1}, 1u), full<uint32_t>({1}, 18u));
  // jnp.floor_divide, add, subtract, multiply, remainder, bitwise_* of uint32 1 and 18.
  EXPECT_EQ(out.to_vector(),
            (std::vector<uint32_t>{0u, 19u, 4294967279u, 18u, 1u, 0u, 19u, 19u, 262144u, 0u}));
}

template <class T>
uint32_t scalar_downcast(float v) {
  Array<float> x = random_array<float>({8, 128}, 0);
  x(0, 0) = v;
  const Array<T> r = pl::pallas_call(
      [](pltpu::VmemRef<const float> x_ref, pltpu::SmemRef<T> o_ref) {
        jnp::Value xv = x_ref[pl::ellipsis];
        o_ref(0, 0) = T(xv(0, 0));  // a scalar is a C++ value: the narrow type's conversion
      },
      pl::out_shape<T>({1, 1}), pl::grid({1}),
      pl::in_specs(pl::BlockSpec({8, 128}, [](int) { return pl::idx(0, 0); })),
      pl::out_specs(pl::BlockSpec({1, 1}, pltpu::SMEM)))(x);
  return r(0, 0).bits;
}

TEST(OpsTest, ScalarDowncastFloat32) {
  // numpy / ml_dtypes: np.float32(v).astype(dtype), as bits (e4m3fn: 1000 overflows to NaN).
  const float v[] = {0.1f, 1000.0f, -3.3f, 1e-7f};
  const uint32_t bf16[] = {0x3dcd, 0x447a, 0xc053, 0x33d7};
  const uint32_t e5m2[] = {0x2e, 0x64, 0xc3, 0x0};
  const uint32_t e4m3[] = {0x1d, 0x7f, 0xc5, 0x0};
  for (int k = 0; k < 4; ++k) {
    EXPECT_EQ(scalar_downcast<bfloat16>(v[k]), bf16[k]) << v[k];
    EXPECT_EQ(scalar_downcast<float8_e5m2>(v[k]), e5m2[k]) << v[k];
    EXPECT_EQ(scalar_downcast<float8_e4m3fn>(v[k]), e4m3[k]) << v[k];
  }
}

TEST(OpsTest, ElementwiseArrayInt16) {
  // jnp.array([0.42, 2.4] * 512).astype(int16) is [0, 2, 0, 2, ...].
  Array<int16_t> x({8, 128});
  for (int64_t i = 0; i < x.size(); ++i) x[i] = static_cast<int16_t>(i % 2 == 0 ? 0 : 2);
  const Array<int16_t> out = pl::pallas_call(
      [](pltpu::VmemRef<const int16_t> x_ref, pltpu::VmemRef<int16_t> o) {
        jnp::Value v = x_ref[pl::ellipsis];
        o.at(0) = jnp::abs(v);
        o.at(1) = jnp::negative(v);
        o.at(2) = jnp::sign(v);
      },
      pl::out_shape<int16_t>({3, 8, 128}))(x);
  for (int64_t i = 0; i < x.size(); ++i) {
    const bool even = i % 2 == 0;
    ASSERT_EQ(out[i], even ? 0 : 2);
    ASSERT_EQ(out[x.size() + i], even ? 0 : -2);
    ASSERT_EQ(out[2 * x.size() + i], even ? 0 : 1);
  }
}

// ---- products --------------------------------------------------------------------------------

// out[b, i, j] = sum_p x[b, i, p] * y[b, p, j] over views given by strides, in double.
struct Mat {
  const float* data;
  int64_t sb, si, sp;  // batch, row, contracted strides
};
double dot_at(Mat x, Mat y, int64_t b, int64_t i, int64_t j, int64_t k) {
  double s = 0;
  for (int64_t p = 0; p < k; ++p)
    s += double(x.data[b * x.sb + i * x.si + p * x.sp]) *
         double(y.data[b * y.sb + j * y.si + p * y.sp]);
  return s;
}

TEST(OpsTest, JnpEinsumGradYPallas) {
  const Array<float> x = arange<float>({128, 256}), y = arange<float>({128, 256});
  const Array<float> out = pl::pallas_call(
      [](pltpu::VmemRef<const float> x_ref, pltpu::VmemRef<const float> y_ref,
         pltpu::VmemRef<float> o_ref) {
        o_ref[pl::ellipsis] = jnp::einsum("mk,mn->kn", x_ref[pl::ellipsis], y_ref[pl::ellipsis]);
      },
      pl::out_shape<float>({256, 256}))(x, y);
  // Pallas asserts equality with XLA's float32 sum; the order of a float32 sum is the library's,
  // so the port asserts the exact sum within float32 rounding of the accumulation.
  for (int64_t kk = 0; kk < 256; kk += 17)
    for (int64_t n = 0; n < 256; n += 13) {
      const double want = dot_at({x.data(), 0, 1, 256}, {y.data(), 0, 1, 256}, 0, kk, n, 128);
      ASSERT_NEAR(out(kk, n), want, 1e-6 * want) << kk << " " << n;
    }
}

template <class T>
void batched_simple(uint64_t seed) {
  const Array<T> x = random_array<T>({11, 16, 256}, seed),
                 y = random_array<T>({11, 256, 128}, seed + 1);
  const Array<float> out = pl::pallas_call(
      [](pltpu::VmemRef<const T> x_ref, pltpu::VmemRef<const T> y_ref, pltpu::VmemRef<float> o) {
        o[pl::ellipsis] = lax::dot_general<float>(x_ref[pl::ellipsis], y_ref[pl::ellipsis],
                                                  {{{2}, {1}}, {{0}, {0}}});
      },
      pl::out_shape<float>({11, 16, 128}))(x, y);
  Array<float> xf({11, 16, 256}), yf({11, 256, 128});
  for (int64_t i = 0; i < x.size(); ++i) xf[i] = static_cast<float>(x[i]);
  for (int64_t i = 0; i < y.size(); ++i) yf[i] = static_cast<float>(y[i]);
  for (int64_t b = 0; b < 11; ++b)
    for (int64_t i = 0; i < 16; ++i)
      for (int64_t j = 0; j < 128; ++j) {
        const double want =
            dot_at({xf.data(), 16 * 256, 256, 1}, {yf.data(), 256 * 128, 1, 128}, b, i, j, 256);
        ASSERT_NEAR(out(b, i, j), want, 1e-4) << b << " " << i << " " << j;
      }
}

TEST(OpsTest, DotDimsBatchedSimpleDotGeneral) {
  batched_simple<float>(1);
  batched_simple<bfloat16>(2);
}

template <class T>
void dot_case(int64_t m0, int64_t m1, int64_t n0, int64_t n1, bool trans_x, bool trans_y) {
  const int64_t M = trans_x ? m1 : m0, K = trans_x ? m0 : m1;
  const int64_t K2 = trans_y ? n1 : n0, N = trans_y ? n0 : n1;
  if (K != K2) return;  // Pallas skips these: the contraction extents differ
  const Array<T> x = random_array<T>({m0, m1}, 3), y = random_array<T>({n0, n1}, 4);
  const auto body = [trans_x, trans_y](pltpu::VmemRef<const T> x_ref, pltpu::VmemRef<const T> y_ref,
                                       pltpu::VmemRef<T> o_ref) {
    jnp::Value xv = x_ref[pl::ellipsis], yv = y_ref[pl::ellipsis];
    const char* sub =
        trans_x ? (trans_y ? "km,nk->mn" : "km,kn->mn") : (trans_y ? "mk,nk->mn" : "mk,kn->mn");
    o_ref[pl::ellipsis] = jnp::einsum<float>(sub, xv, yv).template astype<T>();
  };
  const Array<T> out = pl::pallas_call(body, pl::out_shape<T>({M, N}))(x, y);
  for (int64_t i = 0; i < M; i += 3)  // a sample of the elements keeps the check fast
    for (int64_t j = 0; j < N; j += 5) {
      double want = 0;
      for (int64_t p = 0; p < K; ++p) {
        const float a = static_cast<float>(trans_x ? x(p, i) : x(i, p));
        const float b = static_cast<float>(trans_y ? y(j, p) : y(p, j));
        want += double(a) * double(b);
      }
      ASSERT_NEAR(static_cast<float>(out(i, j)), want, 0.05 + 0.05 * std::fabs(want))
          << m0 << "x" << m1 << " " << n0 << "x" << n1 << " " << trans_x << trans_y;
    }
}

TEST(OpsTest, Dot) {
  const int64_t shapes[][4] = {
      {128, 128, 128, 128}, {256, 256, 256, 256}, {8, 128, 128, 256},  {8, 128, 256, 128},
      {8, 256, 256, 128},   {16, 128, 128, 256},  {16, 128, 256, 128}, {16, 256, 256, 128},
      {24, 128, 128, 256},  {24, 128, 256, 128},  {24, 256, 256, 128}, {128, 8, 128, 256},
      {128, 8, 256, 128},   {256, 8, 256, 128},   {128, 16, 128, 256}, {128, 16, 256, 128},
      {256, 16, 256, 128},  {128, 24, 128, 256},  {128, 24, 256, 128}, {256, 24, 256, 128}};
  for (const auto& s : shapes)
    for (bool tx : {false, true})
      for (bool ty : {false, true}) {
        dot_case<float>(s[0], s[1], s[2], s[3], tx, ty);
        dot_case<bfloat16>(s[0], s[1], s[2], s[3], tx, ty);
      }
}

TEST(OpsTest, DotGeneralWith1dLhs) {
  const int64_t k = 256, m = 1024;
  for (int batch : {0, 1, 2}) {
    for (bool transpose_rhs : {true, false}) {
      const Shape ls = batch ? Shape{batch, k} : Shape{k};
      const Shape rs = batch ? (transpose_rhs ? Shape{batch, m, k} : Shape{batch, k, m})
                             : (transpose_rhs ? Shape{m, k} : Shape{k, m});
      Array<float> lhs = random_array<float>(ls, 5), rhs = random_array<float>(rs, 6);
      for (float& v : lhs) v = static_cast<float>(bfloat16(v));  // as Pallas rounds them
      for (float& v : rhs) v = static_cast<float>(bfloat16(v));
      const int r = rs.rank();
      const auto body = [batch, transpose_rhs, r](pltpu::VmemRef<const float> l_ref,
                                                  pltpu::VmemRef<const float> r_ref,
                                                  pltpu::VmemRef<float> o_ref) {
        const int lc = batch ? 1 : 0, rc = transpose_rhs ? r - 1 : r - 2;
        if (batch) {
          o_ref[pl::ellipsis] = lax::dot_general<float>(l_ref[pl::ellipsis], r_ref[pl::ellipsis],
                                                        {{{lc}, {rc}}, {{0}, {0}}});
        } else {
          o_ref[pl::ellipsis] = lax::dot_general<float>(l_ref[pl::ellipsis], r_ref[pl::ellipsis],
                                                        {{{lc}, {rc}}, {{}, {}}});
        }
      };
      const Shape os = batch ? Shape{batch, m} : Shape{m};
      const Array<float> out = pl::pallas_call(body, pl::out_shape<float>(os))(lhs, rhs);
      const int64_t nb = batch ? batch : 1;
      for (int64_t b = 0; b < nb; ++b)
        for (int64_t j = 0; j < m; ++j) {
          const Mat lm{lhs.data(), k, 0, 1};
          const Mat rm{rhs.data(), m * k, transpose_rhs ? k : 1, transpose_rhs ? 1 : m};
          const double want = dot_at(lm, rm, b, 0, j, k);
          ASSERT_NEAR(out[b * m + j], want, 5e-6 + 5e-4 * std::fabs(want)) << batch << " " << j;
        }
    }
  }
}

TEST(OpsTest, ItofDotCanonicalization) {
  Array<int8_t> x({256, 256}), y({256, 256});
  Random rng(9);
  for (int8_t& v : x) v = static_cast<int8_t>(rng.uniform_int(-128, 127));
  for (int8_t& v : y) v = static_cast<int8_t>(rng.uniform_int(-128, 127));
  for (bool tx : {false, true}) {
    for (bool ty : {false, true}) {
      const Array<int32_t> out = pl::pallas_call(
          [tx, ty](pltpu::VmemRef<const int8_t> x_ref, pltpu::VmemRef<const int8_t> y_ref,
                   pltpu::VmemRef<int32_t> o_ref) {
            jnp::Value xv = x_ref[pl::ellipsis], yv = y_ref[pl::ellipsis];
            const char* sub =
                tx ? (ty ? "km,nk->mn" : "km,kn->mn") : (ty ? "mk,nk->mn" : "mk,kn->mn");
            o_ref[pl::ellipsis] = jnp::einsum<int32_t>(sub, xv, yv);
          },
          pl::out_shape<int32_t>({256, 256}))(x, y);
      for (int i = 0; i < 256; i += 7)
        for (int j = 0; j < 256; j += 5) {
          int32_t want = 0;
          for (int p = 0; p < 256; ++p)
            want += int32_t(tx ? x(p, i) : x(i, p)) * int32_t(ty ? y(j, p) : y(p, j));
          ASSERT_EQ(out(i, j), want) << tx << ty << " " << i << " " << j;
        }
    }
  }
}

}  // namespace
