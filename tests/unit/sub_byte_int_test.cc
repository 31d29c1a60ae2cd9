// The sub-byte integer dtypes int4, uint4, int2 and uint2: their storage (one element per byte,
// the low bits, as ml_dtypes), scalar conversions, the evaluator's conversions and wrapping
// arithmetic on every SIMD target this CPU has (contiguous and strided, so the vector and the
// scalar paths), promotion, printing, checked mode's poison, and blocks through a pipelined
// pallas_call in both engines. Expected values are jax.numpy's (jax 0.10.2, ml_dtypes 0.7.0, CPU)
// for the same inputs.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <vector>

#include "native/vector_plan.h"
#include "support/checked_support.h"
#include "support/vector_targets.h"
#include "tessera/tessera.h"

namespace {
using namespace tessera;

template <class T>
pltpu::VmemRef<T> vref(std::vector<T>& v, Shape s) {
  return pltpu::VmemRef<T>(v.data(), std::move(s));
}

template <class T>
std::vector<int> ints(const std::vector<T>& v) {
  return std::vector<int>(v.begin(), v.end());
}

TEST(SubByteInt, StorageAndScalarConversions) {
  // ml_dtypes' bytes: the low bits, zeros above.
  EXPECT_EQ(int4(-1).bits, 0x0f);
  EXPECT_EQ(int4(-8).bits, 0x08);
  EXPECT_EQ(int2(-2).bits, 0x02);
  EXPECT_EQ(uint4(15).bits, 0x0f);
  EXPECT_EQ(int4::from_bits(0xff), -1);  // the upper bits are ignored
  // From integers: wraps.
  EXPECT_EQ(int4(9), -7);
  EXPECT_EQ(int4(-9), 7);
  EXPECT_EQ(uint4(-1), 15);
  EXPECT_EQ(int2(2), -2);
  EXPECT_EQ(uint2(300), 0);
  EXPECT_EQ(int4(true), 1);
  EXPECT_EQ(int4(uint4(15)), -1);  // between sub-byte types too
  // From floats: truncates toward zero and saturates; NaN gives 0.
  EXPECT_EQ(int4(7.9f), 7);
  EXPECT_EQ(int4(-8.9f), -8);
  EXPECT_EQ(int4(-3.7), -3);
  EXPECT_EQ(int4(1e10f), 7);
  EXPECT_EQ(uint4(-1.0f), 0);
  EXPECT_EQ(uint2(15.9f), 3);
  EXPECT_EQ(int2(bfloat16(-5.0f)), -2);
  EXPECT_EQ(int4(std::nanf("")), 0);
  // Limits and the DType tags.
  EXPECT_EQ(std::numeric_limits<int4>::min(), -8);
  EXPECT_EQ(std::numeric_limits<int4>::max(), 7);
  EXPECT_EQ(std::numeric_limits<uint2>::max(), 3);
  EXPECT_EQ(std::numeric_limits<int2>::lowest(), -2);
  static_assert(std::numeric_limits<int4>::is_signed && !std::numeric_limits<uint4>::is_signed);
  static_assert(dtype_of<int4> == DType::kInt4 && dtype_of<const uint2> == DType::kUInt2);
  static_assert(is_element_type_v<int2> && is_narrow_int_v<uint4> && !is_narrow_int_v<int8_t>);
  static_assert(itemsize(DType::kInt4) == 1 && int_bits(DType::kUInt2) == 2);
  static_assert(is_unsigned(DType::kUInt4) && !is_unsigned(DType::kInt4));
  EXPECT_STREQ(dtype_name(DType::kInt4), "int4");
  EXPECT_STREQ(dtype_name(DType::kUInt4), "uint4");
  EXPECT_STREQ(dtype_name(DType::kInt2), "int2");
  EXPECT_STREQ(dtype_name(DType::kUInt2), "uint2");
}

TEST(SubByteInt, PromotionLattice) {
  using detail::promote_dtypes;
  // Each combines with itself and bool only (jnp.promote_types).
  for (DType d : {DType::kInt4, DType::kUInt4, DType::kInt2, DType::kUInt2}) {
    EXPECT_TRUE(promote_dtypes(d, d).ok);
    EXPECT_EQ(promote_dtypes(d, d).dtype, d);
    EXPECT_EQ(promote_dtypes(d, DType::kBool).dtype, d);
    EXPECT_EQ(promote_dtypes(DType::kBool, d).dtype, d);
    for (DType o : {DType::kInt8, DType::kUInt8, DType::kInt16, DType::kInt32, DType::kUInt32,
                    DType::kFloat32, DType::kBFloat16, DType::kFloat8E5M2}) {
      EXPECT_FALSE(promote_dtypes(d, o).ok) << dtype_name(d) << " " << dtype_name(o);
    }
  }
  EXPECT_FALSE(promote_dtypes(DType::kInt4, DType::kUInt4).ok);
  EXPECT_FALSE(promote_dtypes(DType::kInt2, DType::kInt4).ok);
  // The older dtypes are unaffected.
  EXPECT_EQ(promote_dtypes(DType::kUInt8, DType::kInt8).dtype, DType::kInt16);
  // A Python int keeps the array's dtype.
  std::vector<int4> x(4, int4(0));
  static_assert(std::is_same_v<decltype(vref(x, {4}) + 1)::value_type, int4>);
}

// Conversions into and out of the four dtypes, and their arithmetic, on the current target.
void check_evaluator(const char* target) {
  SCOPED_TRACE(target);
  const std::vector<float> f = {0.f,   -0.f, 1e10f, -1e10f, INFINITY, -INFINITY, 7.9f,
                                -8.9f, 8.f,  -9.f,  3.7f,   -3.7f,    15.9f,     16.f,
                                -1.f,  2.f,  -3.f,  1.5f,   NAN};
  const int n = static_cast<int>(f.size());
  std::vector<float> fx = f;
  std::vector<int4> i4(f.size());
  std::vector<uint4> u4(f.size());
  std::vector<int2> i2(f.size());
  std::vector<uint2> u2(f.size());
  vref(i4, {n}) = vref(fx, {n}).astype<int4>();
  vref(u4, {n}) = vref(fx, {n}).astype<uint4>();
  vref(i2, {n}) = vref(fx, {n}).astype<int2>();
  vref(u2, {n}) = vref(fx, {n}).astype<uint2>();
  EXPECT_EQ(ints(i4),
            (std::vector<int>{0, 0, 7, -8, 7, -8, 7, -8, 7, -8, 3, -3, 7, 7, -1, 2, -3, 1, 0}));
  EXPECT_EQ(ints(u4),
            (std::vector<int>{0, 0, 15, 0, 15, 0, 7, 0, 8, 0, 3, 0, 15, 15, 0, 2, 0, 1, 0}));
  EXPECT_EQ(ints(i2),
            (std::vector<int>{0, 0, 1, -2, 1, -2, 1, -2, 1, -2, 1, -2, 1, 1, -1, 1, -2, 1, 0}));
  EXPECT_EQ(ints(u2), (std::vector<int>{0, 0, 3, 0, 3, 0, 3, 0, 3, 0, 3, 0, 3, 3, 0, 2, 0, 1, 0}));
  // From int32: wraps.
  std::vector<int32_t> iv = {0, 1, 7, 8, 15, 16, 17, -1, -8, -9, 255, -128, 2, 3, 4, -2, -3, 300};
  const int m = static_cast<int>(iv.size());
  i4.resize(iv.size());
  u4.resize(iv.size());
  i2.resize(iv.size());
  u2.resize(iv.size());
  vref(i4, {m}) = vref(iv, {m}).astype<int4>();
  vref(u4, {m}) = vref(iv, {m}).astype<uint4>();
  vref(i2, {m}) = vref(iv, {m}).astype<int2>();
  vref(u2, {m}) = vref(iv, {m}).astype<uint2>();
  EXPECT_EQ(ints(i4),
            (std::vector<int>{0, 1, 7, -8, -1, 0, 1, -1, -8, 7, -1, 0, 2, 3, 4, -2, -3, -4}));
  EXPECT_EQ(ints(u4),
            (std::vector<int>{0, 1, 7, 8, 15, 0, 1, 15, 8, 7, 15, 0, 2, 3, 4, 14, 13, 12}));
  EXPECT_EQ(ints(i2),
            (std::vector<int>{0, 1, -1, 0, -1, 0, 1, -1, 0, -1, -1, 0, -2, -1, 0, -2, 1, 0}));
  EXPECT_EQ(ints(u2), (std::vector<int>{0, 1, 3, 0, 3, 0, 1, 3, 0, 3, 3, 0, 2, 3, 0, 2, 1, 0}));
  // Back to int32 and float32: the values (int4 sign-extended from its nibble).
  std::vector<int32_t> back(iv.size());
  vref(back, {m}) = vref(i4, {m}).astype<int32_t>();
  EXPECT_EQ(ints(back), ints(i4));
  std::vector<float> fb(iv.size());
  vref(fb, {m}) = vref(u4, {m}).astype<float>();
  for (int j = 0; j < m; ++j) ASSERT_EQ(fb[static_cast<size_t>(j)], static_cast<float>(u4[j]));
  // Arithmetic wraps to the width, also in a strided (scalar path) destination.
  std::vector<int4> a = {7, -8, -8, 5, -1, 3, 6, -7, 7, 1};
  std::vector<int4> b = {1, -1, -1, 5, -1, -3, 2, 3, -8, 1};
  const int k = static_cast<int>(a.size());
  std::vector<int4> o(a.size()), os(2 * a.size());
  auto ar = vref(a, {k}), br = vref(b, {k});
  vref(o, {k}) = ar + br;
  EXPECT_EQ(ints(o), (std::vector<int>{-8, 7, 7, -6, -2, 0, -8, -4, -1, 2}));
  vref(o, {k}) = ar * br;
  EXPECT_EQ(ints(o), (std::vector<int>{7, -8, -8, -7, 1, 7, -4, -5, -8, 1}));
  vref(o, {k}) = jnp::floor_divide(ar, br);  // -8 // -1 = 8 wraps to -8
  EXPECT_EQ(ints(o), (std::vector<int>{7, -8, -8, 1, 1, -1, 3, -3, -1, 1}));
  pltpu::VmemRef<int4>(os.data(), {k}, {2}) = ar - br + 1;
  for (int j = 0; j < k; ++j) {
    ASSERT_EQ(os[static_cast<size_t>(2 * j)],
              int4(a[static_cast<size_t>(j)] - b[static_cast<size_t>(j)] + 1))
        << j;
  }
  std::vector<uint2> c = {3, 2, 1, 0}, co(4);
  vref(co, {4}) = vref(c, {4}) + 2;
  EXPECT_EQ(ints(co), (std::vector<int>{1, 0, 3, 2}));
  vref(co, {4}) = -vref(c, {4});
  EXPECT_EQ(ints(co), (std::vector<int>{1, 2, 3, 0}));
  // Bitcast keeps the bits: int4 -1 is uint4 15.
  std::vector<uint4> bc(a.size());
  vref(bc, {k}) = lax::bitcast_convert_type<uint4>(ar);
  for (int j = 0; j < k; ++j)
    ASSERT_EQ(bc[static_cast<size_t>(j)].bits, a[static_cast<size_t>(j)].bits);
}

TEST(SubByteInt, EvaluatorOnEveryTarget) {
  EXPECT_GE(
      tessera::testing::on_every_vector_target([](const char* name) { check_evaluator(name); }), 1);
}

TEST(SubByteInt, LongRowsUseTheVectorPath) {
  // 300 elements: full vectors plus a tail, loads and stores of every dtype.
  const int n = 300;
  std::vector<int32_t> v(n);
  for (int i = 0; i < n; ++i) v[static_cast<size_t>(i)] = i * 37 - 5000;
  std::vector<int4> i4(n), i4o(n);
  std::vector<uint4> u4(n);
  std::vector<int2> i2(n);
  std::vector<uint2> u2(n);
  vref(i4, {n}) = vref(v, {n}).astype<int4>();
  vref(u4, {n}) = vref(i4, {n}).astype<uint4>();
  vref(i2, {n}) = vref(u4, {n}).astype<int2>();
  vref(u2, {n}) = vref(i2, {n}).astype<uint2>();
  vref(i4o, {n}) = vref(i4, {n}) * 3 + (vref(i4, {n}) >> 1);
  for (size_t i = 0; i < static_cast<size_t>(n); ++i) {
    ASSERT_EQ(i4[i], int4(v[i])) << i;
    ASSERT_EQ(u4[i], uint4(v[i])) << i;
    ASSERT_EQ(i2[i], int2(v[i])) << i;
    ASSERT_EQ(u2[i], uint2(v[i])) << i;
    ASSERT_EQ(i4o[i], int4(i4[i] * 3 + (i4[i] >> 1))) << i;
    ASSERT_EQ(i4o[i].bits >> 4, 0) << i;  // stored as ml_dtypes stores them
  }
}

TEST(SubByteInt, Printing) {
  Array<int4> x({2, 8});
  for (int64_t i = 0; i < 16; ++i) x[i] = int4(i);
  EXPECT_EQ(x.to_string(), "[[0 1 2 3 4 5 6 7]\n [-8 -7 -6 -5 -4 -3 -2 -1]]");  // numpy's str
  EXPECT_EQ(Array<uint2>({2, 2}, {1, 2, 3, 0}).to_string(), "[[1 2]\n [3 0]]");
  EXPECT_EQ(Array<int2>({}, {-2}).to_string(), "-2");
}

// Checked mode's poison: the dtype's largest value (TPU interpret mode), stored as ml_dtypes
// stores it; zeros in the "zero" mode; a kernel that writes first sees its own values.
template <class T>
Array<T> copy_scratch(bool write_first, pltpu::UninitializedMemory mode) {
  pltpu::InterpretParams p = checked_testing::checked();
  p.allow_uninitialized_reads = true;
  p.uninitialized_memory = mode;
  return pl::kernel(pl::out_type<T>({128}), pltpu::TensorCoreMesh("core", 1),
                    pl::scratch_types(pltpu::VMEM<T>({128})),
                    p)([write_first](pltpu::HbmRef<T> o, pltpu::VmemRef<T> s) {
    if (write_first) s = jnp::full_like(s, 1);
    pltpu::sync_copy(s, o);
  })();
}

template <class T>
void expect_poison(int value) {
  const Array<T> a = copy_scratch<T>(false, pltpu::UninitializedMemory::nan);
  for (int64_t i = 0; i < 128; ++i) {
    ASSERT_EQ(a[i], value) << dtype_name(dtype_of<T>) << " " << i;
    ASSERT_EQ(a[i].bits, T(value).bits);
  }
  const Array<T> z = copy_scratch<T>(false, pltpu::UninitializedMemory::zero);
  for (int64_t i = 0; i < 128; ++i) ASSERT_EQ(z[i], 0);
  const Array<T> w = copy_scratch<T>(true, pltpu::UninitializedMemory::nan);
  for (int64_t i = 0; i < 128; ++i) ASSERT_EQ(w[i], 1);
}

TEST(SubByteInt, CheckedModePoison) {
  expect_poison<int4>(7);
  expect_poison<uint4>(15);
  expect_poison<int2>(1);
  expect_poison<uint2>(3);
}

// Blocks of int4 through a pipelined pallas_call (DMA into VMEM windows, partial edge blocks),
// natively and in checked mode.
TEST(SubByteInt, BlocksInBothEngines) {
  const int64_t M = 20, N = 300;
  Array<int4> x({M, N});
  Array<uint2> y({M, N});
  for (int64_t i = 0; i < M * N; ++i) {
    x[i] = int4(i * 5);
    y[i] = uint2(i / 3);
  }
  const pl::BlockSpec spec({8, 128}, [](int i, int j) { return pl::idx(i, j); });
  auto body = [](pltpu::VmemRef<const int4> a, pltpu::VmemRef<const uint2> b,
                 pltpu::VmemRef<int4> o) { o = a * 2 - b.astype<int4>(); };
  auto call = [&](auto... extra) {
    return pl::pallas_call(body, pl::out_shape<int4>({M, N}),
                           pl::grid({pl::cdiv(M, 8), pl::cdiv(N, 128)}), pl::in_specs(spec, spec),
                           pl::out_specs(spec), extra...)(x, y);
  };
  const Array<int4> native = call();
  const Array<int4> checked = call(pltpu::InterpretParams());  // checked mode, its defaults
  for (int64_t i = 0; i < M * N; ++i) {
    ASSERT_EQ(native[i], int4(x[i] * 2 - int4(y[i]))) << i;
    ASSERT_EQ(checked[i], native[i]) << i;
  }
}

}  // namespace
