// Ports of tpu_pallas_test.py's scalar and vector op cases (docs/pallas-parity.md): scalar casts
// and arithmetic on SMEM values, bools, transposes, reshapes that keep the last dim,
// PallasScalarIOpsTest, PallasCallDynamicDMATest, EmitPipelineTest. A scalar read from SMEM is a
// C++ value, so scalar arithmetic on it is C++'s.
#include <gtest/gtest.h>

#include <algorithm>
#include <array>
#include <cstdint>
#include <limits>
#include <vector>

#include "support/pallas_port.h"
#include "tessera/tessera.h"

namespace {
using namespace tessera;
using namespace tessera::pallas_port;

// ---- scalar casts and loads (PallasCallPoisonTest's scalar cases) -----------------------------

template <class In, class Out>
void scalar_casting() {
  const In seven = std::is_signed_v<In> && std::is_integral_v<In> ? In(-7) : In(7);
  const Array<Out> y = pl::pallas_call(
      [](pltpu::SmemRef<const In> x, pltpu::SmemRef<Out> o) {
        o(0) = static_cast<Out>(static_cast<float>(x(0)));  // x_ref[0].astype(out_dtype)
      },
      pl::in_specs(pl::BlockSpec(MemorySpace::SMEM)),
      pl::out_specs(pl::BlockSpec(MemorySpace::SMEM)),
      pl::out_shape<Out>({1}))(Array<In>({1}, {seven}));
  EXPECT_EQ(static_cast<float>(y[0]), static_cast<float>(seven));
}

template <class In>
void scalar_casting_to_all() {
  scalar_casting<In, int8_t>();
  scalar_casting<In, int16_t>();
  scalar_casting<In, int32_t>();
  scalar_casting<In, float>();
}

TEST(TpuPallasTest, PoisonScalarCasting) {
  scalar_casting_to_all<int8_t>();
  scalar_casting_to_all<int16_t>();
  scalar_casting_to_all<int32_t>();
  scalar_casting_to_all<float8_e5m2>();
  scalar_casting_to_all<float8_e4m3fn>();
  scalar_casting_to_all<float8_e4m3b11fnuz>();
  scalar_casting_to_all<bfloat16>();
  scalar_casting_to_all<float>();
}

template <class T>
void scalar_load_upcast() {
  const Array<int32_t> y = pl::pallas_call(
      [](pltpu::SmemRef<const T> x, pltpu::SmemRef<int32_t> o) { o(0, 0) = x(0, 0); },
      pl::in_specs(pl::BlockSpec(MemorySpace::SMEM)),
      pl::out_specs(pl::BlockSpec(MemorySpace::SMEM)),
      pl::out_shape<int32_t>({1, 1}))(Array<T>({1, 1}, {T(-1)}));
  EXPECT_EQ(y[0], -1);
}

TEST(TpuPallasTest, PoisonScalarLoadUpcast) {
  scalar_load_upcast<int4>();
  scalar_load_upcast<int8_t>();
  scalar_load_upcast<int16_t>();
  scalar_load_upcast<int32_t>();
}

template <class T>
void scalar_indirect_load() {
  const Array<int32_t> y = pl::pallas_call(
      [](pltpu::SmemRef<const T> x, pltpu::SmemRef<int32_t> o) { o(0, 0) = x(0, x(0, 0)); },
      pl::in_specs(pl::BlockSpec(MemorySpace::SMEM)),
      pl::out_specs(pl::BlockSpec(MemorySpace::SMEM)),
      pl::out_shape<int32_t>({1, 1}))(Array<T>({1, 4}, {3, 0, 0, 1}));
  EXPECT_EQ(y[0], 1);
}

TEST(TpuPallasTest, PoisonScalarIndirectLoad) {
  scalar_indirect_load<int4>();
  scalar_indirect_load<int8_t>();
  scalar_indirect_load<int16_t>();
  scalar_indirect_load<int32_t>();
}

template <class T>
void scalar_integer_addition() {
  const Array<T> y = pl::pallas_call(
      [](pltpu::SmemRef<const T> x, pltpu::SmemRef<T> o) { o(0) = static_cast<T>(x(0) + x(0)); },
      pl::in_specs(pl::BlockSpec(MemorySpace::SMEM)),
      pl::out_specs(pl::BlockSpec(MemorySpace::SMEM)), pl::out_shape<T>({1}))(Array<T>({1}, {3}));
  EXPECT_EQ(y[0], T(6));
}

TEST(TpuPallasTest, PoisonScalarIntegerAddition) {
  scalar_integer_addition<int32_t>();
  scalar_integer_addition<uint32_t>();
}

template <class T>
void vector_integer_addition() {
  const Array<T> y =
      pl::pallas_call([](pltpu::VmemRef<const T> x, pltpu::VmemRef<T> o) { o = x + x; },
                      pl::in_specs(pl::BlockSpec(MemorySpace::VMEM)),
                      pl::out_specs(pl::BlockSpec(MemorySpace::VMEM)),
                      pl::out_shape<T>({128, 16}))(full<T>({128, 16}, T(7)));
  for (T v : y) ASSERT_EQ(v, T(14));
}

TEST(TpuPallasTest, PoisonVectorIntegerAddition) {
  vector_integer_addition<int32_t>();
  vector_integer_addition<uint32_t>();
  vector_integer_addition<int16_t>();
  vector_integer_addition<uint16_t>();
}

template <class T, bool kMax>
void scalar_max_min() {
  const Array<T> y = pl::pallas_call(
      [](pltpu::SmemRef<const T> x, pltpu::SmemRef<T> o) {
        o(0) = kMax ? std::max<T>(x(0), x(1)) : std::min<T>(x(0), x(1));  // jnp.maximum on scalars
      },
      pl::in_specs(pl::BlockSpec(MemorySpace::SMEM)),
      pl::out_specs(pl::BlockSpec(MemorySpace::SMEM)),
      pl::out_shape<T>({2}))(Array<T>({2}, {T(242), T(87)}));
  EXPECT_EQ(y[0], kMax ? T(242) : T(87));
}

TEST(TpuPallasTest, PoisonMaxOperation) {
  scalar_max_min<int32_t, true>();
  scalar_max_min<uint32_t, true>();
  scalar_max_min<float, true>();
}

TEST(TpuPallasTest, PoisonMinOperation) {
  scalar_max_min<int32_t, false>();
  scalar_max_min<uint32_t, false>();
  scalar_max_min<float, false>();
}

template <class T>
void bool_select() {
  const Array<bool> cond = random_array<bool>({8, 128}, 0);
  const Array<T> choice = arange<T>({8, 128});
  const Array<T> z = pl::pallas_call(
      [](pltpu::VmemRef<const bool> c, pltpu::VmemRef<const T> ch, pltpu::VmemRef<T> o) {
        o = jnp::where(c, ch, T{});  // jnp.where(condlist, choicelist, 0)
      },
      pl::out_shape<T>({8, 128}))(cond, choice);
  for (int64_t i = 0; i < z.size(); ++i) ASSERT_EQ(z[i], cond[i] ? choice[i] : T(0)) << i;
}

TEST(TpuPallasTest, PoisonBoolSelectOperation) {
  bool_select<int32_t>();
  bool_select<uint32_t>();
  bool_select<int16_t>();
  bool_select<uint16_t>();
  bool_select<int8_t>();
  bool_select<uint8_t>();
  bool_select<int4>();
  bool_select<uint4>();
  bool_select<float>();
  bool_select<bfloat16>();
}

void bool_transpose_last_two_dims(const Shape& in) {
  const int rank = in.rank();
  Shape out = in;
  out[rank - 2] = in[rank - 1];
  out[rank - 1] = in[rank - 2];
  const Array<bool> x = random_array<bool>(in, 42);
  const Array<bool> y = pl::pallas_call(
      [rank](pltpu::VmemRef<const bool> xr, pltpu::VmemRef<bool> yr) {
        if (rank == 2) yr = jnp::transpose(xr, {1, 0});
        if (rank == 3) yr = jnp::transpose(xr, {0, 2, 1});
        if (rank == 4) yr = jnp::transpose(xr, {0, 1, 3, 2});
      },
      pl::out_shape<bool>(out))(x);
  // Element (..., i, j) of y is element (..., j, i) of x.
  const int64_t a = in[rank - 2], b = in[rank - 1], batch = in.size() / (a * b);
  for (int64_t n = 0; n < batch; ++n) {
    for (int64_t i = 0; i < b; ++i) {
      for (int64_t j = 0; j < a; ++j) ASSERT_EQ(y[n * a * b + i * a + j], x[n * a * b + j * b + i]);
    }
  }
}

TEST(TpuPallasTest, PoisonBoolTransposeLastTwoDims) {
  bool_transpose_last_two_dims({128, 128});
  bool_transpose_last_two_dims({3, 4, 256});
  bool_transpose_last_two_dims({8, 5, 8, 10});
}

// ---- PallasScalarIOpsTest (int32, uint32; the narrower types expect Mosaic's "not implemented")

template <class T>
T scalar_op(T (*op)(T, T)) {
  const Array<T> x = arange<T>({3});
  return pl::pallas_call(
      [op](pltpu::SmemRef<const T> xr, pltpu::SmemRef<T> y) { y(0) = op(xr(1), xr(2)); },
      pl::in_specs(pl::BlockSpec(MemorySpace::SMEM)),
      pl::out_specs(pl::BlockSpec(MemorySpace::SMEM)), pl::out_shape<T>({1}))(x)[0];
}

template <class T>
void scalar_ops_canonicalization() {
  EXPECT_EQ(scalar_op<T>([](T a, T b) -> T { return a & b; }), T(1 & 2));       // andi
  EXPECT_EQ(scalar_op<T>([](T a, T b) -> T { return a / b; }), T(0));           // divi: 1 // 2
  EXPECT_EQ(scalar_op<T>([](T a, T b) -> T { return std::max(a, b); }), T(2));  // max
  EXPECT_EQ(scalar_op<T>([](T a, T b) -> T { return std::min(a, b); }), T(1));  // min
  EXPECT_EQ(scalar_op<T>([](T a, T b) -> T { return a * b; }), T(2));           // muli
  EXPECT_EQ(scalar_op<T>([](T a, T b) -> T { return a | b; }), T(1 | 2));       // ori
  EXPECT_EQ(scalar_op<T>([](T a, T b) -> T { return a << b; }), T(1 << 2));     // shli
  EXPECT_EQ(scalar_op<T>([](T a, T b) -> T { return a >> b; }), T(1 >> 2));     // shri
  EXPECT_EQ(scalar_op<T>([](T a, T b) -> T { return b - a; }), T(2 - 1));       // subi
  EXPECT_EQ(scalar_op<T>([](T a, T b) -> T { return a ^ b; }), T(1 ^ 2));       // xori
}

TEST(TpuPallasTest, ScalarIOpsOpCanonicalization) {
  scalar_ops_canonicalization<int32_t>();
  scalar_ops_canonicalization<uint32_t>();
}

// test_pow_unsigned_exponent: 2 ** 0xFFFFFFFF is inf (the unsigned exponent is not -1).
TEST(TpuPallasTest, UnsignedIntegerPowUnsignedExponent) {
  const Array<float> y =
      pl::pallas_call([](pltpu::VmemRef<const float> x, pltpu::VmemRef<const uint32_t> e,
                         pltpu::VmemRef<float> o) { o = lax::pow(x, e); },
                      pl::out_shape<float>({8, 128}))(full<float>({8, 128}, 2.0f),
                                                      full<uint32_t>({8, 128}, 0xFFFFFFFFu));
  for (float v : y) ASSERT_EQ(v, std::numeric_limits<float>::infinity());
}

// ---- PallasCallTPUBooleanTest -------------------------------------------------------------------

TEST(TpuPallasTest, TPUBooleanScalarBoolLoadStore) {
  for (bool value : {false, true}) {
    const Array<bool> r = pl::pallas_call(
        [](pltpu::SmemRef<const bool> x, pltpu::SmemRef<bool> o) { o(0, 0) = !x(0, 0); },
        pl::in_specs(pl::BlockSpec(MemorySpace::SMEM)),
        pl::out_specs(pl::BlockSpec(MemorySpace::SMEM)),
        pl::out_shape<bool>({1, 1}))(Array<bool>({1, 1}, {value}));
    EXPECT_EQ(r[0], !value);
  }
}

TEST(TpuPallasTest, TPUBooleanScalarBoolRunScoped) {
  for (bool value : {false, true}) {
    const Array<bool> r = pl::pallas_call(
        [](pltpu::SmemRef<const bool> x, pltpu::SmemRef<bool> o) {
          pl::run_scoped(
              [&](pltpu::SmemRef<bool> scoped) {
                scoped(0, 0) = !x(0, 0);
                o(0, 0) = scoped(0, 0);
              },
              pltpu::SMEM<bool>({1, 1}));
        },
        pl::in_specs(pl::BlockSpec(MemorySpace::SMEM)),
        pl::out_specs(pl::BlockSpec(MemorySpace::SMEM)),
        pl::out_shape<bool>({1, 1}))(Array<bool>({1, 1}, {value}));
    EXPECT_EQ(r[0], !value);
  }
}

TEST(TpuPallasTest, TPUBooleanVectorBoolLoadStore) {
  const Array<bool> x = random_array<bool>({8, 128}, 0);
  const Array<bool> r = pl::pallas_call(
      [](pltpu::VmemRef<const bool> xr, pltpu::VmemRef<bool> o) { o = xr; },
      pl::in_specs(pl::BlockSpec(MemorySpace::VMEM)),
      pl::out_specs(pl::BlockSpec(MemorySpace::VMEM)), pl::out_shape<bool>({8, 128}))(x);
  for (int64_t i = 0; i < x.size(); ++i) ASSERT_EQ(r[i], x[i]);
}

TEST(TpuPallasTest, TPUBooleanVectorBoolMaskingWithIndexing) {
  const Array<float> v1 = random_array<float>({1, 256, 256}, 1);
  const Array<float> v2 = random_array<float>({1, 256, 256}, 2);
  const Array<bool> mask = random_array<bool>({1, 256, 256}, 3);
  const pl::BlockSpec vmem(MemorySpace::VMEM);
  const Array<float> r = pl::pallas_call(
      [](pltpu::VmemRef<const bool> m, pltpu::VmemRef<const float> t, pltpu::VmemRef<const float> f,
         pltpu::VmemRef<float> o) { o.at(0) = jnp::where(m.at(0), t.at(0), f.at(0)); },
      pl::in_specs(vmem, vmem, vmem), pl::out_specs(vmem),
      pl::out_shape<float>({1, 256, 256}))(mask, v1, v2);
  for (int64_t i = 0; i < r.size(); ++i) ASSERT_EQ(r[i], mask[i] ? v1[i] : v2[i]);
}

// ---- MiscellaneousTest ------------------------------------------------------------------------

TEST(TpuPallasTest, MiscellaneousCastingBoolToI8) {
  const Array<float> x = random_array<float>({128, 16}, 10);
  const Array<float> y = random_array<float>({128, 16}, 11);
  const pl::BlockSpec vmem(MemorySpace::VMEM);
  const Array<int8_t> out = pl::pallas_call(
      [](pltpu::VmemRef<const float> xr, pltpu::VmemRef<const float> yr, pltpu::VmemRef<int8_t> o) {
        o = (xr > yr).astype<int8_t>();
      },
      pl::in_specs(vmem, vmem), pl::out_specs(vmem), pl::out_shape<int8_t>({128, 16}))(x, y);
  for (int64_t i = 0; i < x.size(); ++i) ASSERT_EQ(out[i], x[i] > y[i] ? 1 : 0);
}

// test_float32_unstack / test_scalar_unstack: `jnp.unstack(x, axis=0)` is spelled x.at(i).
TEST(TpuPallasTest, MiscellaneousFloat32Unstack) {
  const Array<float> x = arange<float>({2, 128});
  const auto [o1, o2] = pl::pallas_call(
      [](pltpu::VmemRef<const float> xr, pltpu::VmemRef<float> a, pltpu::VmemRef<float> b) {
        a = xr.at(0);
        b = xr.at(1);
      },
      pl::out_shape(ShapeDtypeStruct<float>{{128}}, ShapeDtypeStruct<float>{{128}}))(x);
  for (int64_t i = 0; i < 128; ++i) {
    ASSERT_EQ(o1[i], x(0, i));
    ASSERT_EQ(o2[i], x(1, i));
  }
}

TEST(TpuPallasTest, MiscellaneousScalarUnstack) {
  const auto [o1, o2] = pl::pallas_call(
      [](pltpu::VmemRef<const float> xr, pltpu::SmemRef<float> a, pltpu::SmemRef<float> b) {
        a() = xr(0);
        b() = xr(1);
      },
      pl::out_specs(pl::BlockSpec(MemorySpace::SMEM), pl::BlockSpec(MemorySpace::SMEM)),
      pl::out_shape(ShapeDtypeStruct<float>{{}}, ShapeDtypeStruct<float>{{}}))(
      Array<float>({2}, {1.0f, 2.0f}));
  EXPECT_EQ(o1[0], 1.0f);
  EXPECT_EQ(o2[0], 2.0f);
}

TEST(TpuPallasTest, MiscellaneousLaneDynamicSlice) {
  const Array<float> x = arange<float>({128});
  const Array<float> out = pl::pallas_call(
      [](pltpu::VmemRef<const float> xr, pltpu::VmemRef<float> o) {
        o = xr.at(pl::ds(64, 1));  // lax.dynamic_slice_in_dim(x_ref[...], 64, 1, 0)
      },
      pl::out_shape<float>({1}))(x);
  EXPECT_EQ(out[0], 64.0f);
}

template <class T>
void sublane_adding_shape_cast() {
  const Array<T> x = arange<T>({8, 128});
  const Array<T> out = pl::pallas_call(
      [](pltpu::VmemRef<const T> xr, pltpu::VmemRef<T> o) { o.at(pl::all, 0, pl::all) = xr; },
      pl::out_shape<T>({8, 1, 128}))(x);
  for (int64_t i = 0; i < x.size(); ++i) ASSERT_EQ(out[i], x[i]);
}

TEST(TpuPallasTest, MiscellaneousSublaneAddingShapeCastF32) { sublane_adding_shape_cast<float>(); }
TEST(TpuPallasTest, MiscellaneousSublaneAddingShapeCastBf16) {
  sublane_adding_shape_cast<bfloat16>();
}

TEST(TpuPallasTest, MiscellaneousMixedStrides) {
  const Array<float> out = pl::pallas_call(
      [](pltpu::VmemRef<const float> x, pltpu::VmemRef<const bfloat16> y, pltpu::VmemRef<float> o) {
        o = x + y.at(pl::all, 1, pl::all).astype<float>();
      },
      pl::out_shape<float>({8, 128}))(full<float>({8, 128}, 1.0f),
                                      full<bfloat16>({8, 2, 128}, bfloat16(2.0f)));
  for (float v : out) ASSERT_EQ(v, 3.0f);
}

TEST(TpuPallasTest, MiscellaneousSum) {
  const Array<float> out = pl::pallas_call(
      [](pltpu::VmemRef<const float> x, pltpu::VmemRef<float> o) { o = jnp::sum(x, 2); },
      pl::out_shape<float>({8, 2, 128}))(full<float>({8, 2, 8, 128}, 0.0f));
  for (float v : out) ASSERT_EQ(v, 0.0f);
}

TEST(TpuPallasTest, MiscellaneousTranspose) {
  const Array<float> out = pl::pallas_call(
      [](pltpu::VmemRef<const float> x, pltpu::VmemRef<float> o) {
        o = jnp::transpose(x, {0, 2, 1, 3});
      },
      pl::out_shape<float>({8, 8, 2, 128}))(full<float>({8, 2, 8, 128}, 0.0f));
  for (float v : out) ASSERT_EQ(v, 0.0f);
}

template <class T>
void tiling_major_minor_transpose(int64_t q, int64_t n) {
  const Array<T> x = arange<T>({q, n});
  const Array<T> out = pl::pallas_call(
      [q, n](pltpu::VmemRef<const T> xr, pltpu::VmemRef<T> o) {
        o = jnp::transpose(jnp::reshape(xr, {q, 1, n}), {1, 0, 2});
      },
      pl::out_shape<T>({1, q, n}))(x);
  for (int64_t i = 0; i < x.size(); ++i) ASSERT_EQ(out[i], x[i]);
}

TEST(TpuPallasTest, Miscellaneous1dTilingMajorMinorTranspose) {
  tiling_major_minor_transpose<bfloat16>(3, 2048);
  tiling_major_minor_transpose<int8_t>(5, 4096);
}

// test_reshape_fold_middle_dims / test_reshape_unfold_middle_dims: reshapes that keep the last dim.
template <class T>
void reshape_middle(Shape in, Shape out) {
  const Array<T> x = arange<T>(in);
  const Array<T> y = pl::pallas_call(
      [out](pltpu::VmemRef<const T> xr, pltpu::VmemRef<T> o) { o = jnp::reshape(xr, out); },
      pl::out_shape<T>(out))(x);
  for (int64_t i = 0; i < x.size(); ++i) ASSERT_EQ(y[i], x[i]);
}

template <class T>
void reshape_middle_all() {
  for (const auto& [q, m, n, k] :
       std::vector<std::array<int64_t, 4>>{{2, 2, 17, 512}, {3, 2, 8, 256}, {1, 5, 4, 384}}) {
    reshape_middle<T>({q, m, n, k}, {q, m * n, k});  // fold
  }
  for (const auto& [q, m, n, k] :
       std::vector<std::array<int64_t, 4>>{{2, 2, 17, 512}, {3, 2, 8, 256}, {9, 5, 4, 384}}) {
    reshape_middle<T>({q, m * n, k}, {q, m, n, k});  // unfold
  }
}

TEST(TpuPallasTest, MiscellaneousReshapeFoldAndUnfoldMiddleDims) {
  reshape_middle_all<float>();
  reshape_middle_all<uint32_t>();
  reshape_middle_all<bfloat16>();
  reshape_middle_all<int8_t>();
}

TEST(TpuPallasTest, MiscellaneousDynamicGridWithSmemOutput) {
  for (int32_t n : {1, 5, 9}) {
    const Array<int32_t> out = pl::pallas_call(
        [](pltpu::SmemRef<const int32_t>, pltpu::SmemRef<int32_t> o) {
          o(0) = pl::program_id(0) == 0 ? 1 : o(0) + 1;  // lax.cond
        },
        pl::grid({n}), pl::in_specs(pl::BlockSpec(MemorySpace::SMEM)),
        pl::out_specs(pl::BlockSpec(MemorySpace::SMEM)),
        pl::out_shape<int32_t>({1}))(Array<int32_t>({1}, {n}));
    EXPECT_EQ(out[0], n);
  }
}

// test_packed_shifts: a shift amount at or past the bit width gives 0 for <<, and for >> the
// sign (signed types) or 0 (unsigned), as jax on the CPU gives; the unsigned types skip -1, and
// int4 the amounts outside its range (8, 9, 16, 17, 100), as Pallas' test does.
template <class T>
void packed_shifts() {
  constexpr int bits = int_bits(dtype_of<T>);
  for (const Shape& shape : {Shape{11, 200}, Shape{32, 256}}) {
    Array<T> inp(shape);
    Random r(1234);
    for (T& v : inp) {
      v = static_cast<T>(
          r.uniform_int(std::numeric_limits<T>::min(), int64_t{std::numeric_limits<T>::max()} + 1));
    }
    for (int shift : {-1, 0, 1, 2, 5, 8, 9, 16, 17, 100}) {
      if (shift < 0 && !std::numeric_limits<T>::is_signed) continue;
      if (shift > std::numeric_limits<T>::max()) continue;
      const auto [shl, shr] = pl::pallas_call(
          [shift](pltpu::VmemRef<const T> x, pltpu::VmemRef<T> l, pltpu::VmemRef<T> rr) {
            l = x << shift;
            rr = x >> shift;
          },
          pl::out_shape(ShapeDtypeStruct<T>{shape}, ShapeDtypeStruct<T>{shape}))(inp);
      const bool outside = shift < 0 || shift >= bits;
      for (int64_t i = 0; i < inp.size(); ++i) {
        const int64_t v = inp[i];
        const T want_l = outside ? T(0) : static_cast<T>(v << shift);
        const T want_r = outside ? static_cast<T>(v < 0 ? -1 : 0) : static_cast<T>(v >> shift);
        ASSERT_EQ(shl[i], want_l) << shift;
        ASSERT_EQ(shr[i], want_r) << shift;
      }
    }
  }
}

TEST(TpuPallasTest, MiscellaneousPackedShifts) {
  packed_shifts<int4>();
  packed_shifts<int8_t>();
  packed_shifts<uint8_t>();
  packed_shifts<int16_t>();
  packed_shifts<uint16_t>();
}

TEST(TpuPallasTest, MiscellaneousInterpretAsyncCopySlice) {
  const Array<float> result = pl::pallas_call(
      [](pltpu::VmemRef<float> o) {
        pl::run_scoped(
            [&](pltpu::DmaSemaphoreRef sem, pltpu::VmemRef<float> x) {
              x = jnp::ones_like(x);
              pl::run_scoped(
                  [&](pltpu::VmemRef<float> y) {
                    pltpu::async_copy(x, y.at(0), sem).wait();
                    o = y.at(0);
                  },
                  pltpu::VMEM<float>({1, 1}));
            },
            pltpu::SemaphoreType::DMA, pltpu::VMEM<float>({1}));
      },
      pl::out_shape<float>({1}))();
  EXPECT_EQ(result[0], 1.0f);
}

// ---- PallasCallDynamicDMATest -----------------------------------------------------------------

void dynamic_size_dma(const Array<int32_t>& x, Shape o_shape) {
  const Array<int32_t> o(o_shape, 0);
  const Array<int32_t> out = pl::pallas_call(
      [](pltpu::SmemRef<const int32_t> size, pltpu::AnyRef<const int32_t> xh,
         pltpu::AnyRef<const int32_t>, pltpu::AnyRef<int32_t> oh, pltpu::DmaSemaphoreRef sem) {
        const int32_t n = size(0);
        pltpu::async_copy(xh.at(pl::ds(0, n)), oh.at(pl::ds(0, n)), sem).wait();
      },
      pltpu::PrefetchScalarGridSpec<0>(pl::in_specs(pl::BlockSpec(MemorySpace::SMEM),
                                                    pl::BlockSpec(pl::ANY), pl::BlockSpec(pl::ANY)),
                                       pl::out_specs(pl::BlockSpec(pl::ANY)),
                                       pl::scratch_shapes(pltpu::SemaphoreType::DMA)),
      pl::out_shape<int32_t>(o_shape),
      pl::input_output_aliases({{2, 0}}))(Array<int32_t>({1}, {4}), x, o);
  const int64_t per_row = x.size() / x.shape()[0];
  for (int64_t i = 0; i < out.size(); ++i) ASSERT_EQ(out[i], i / per_row < 4 ? x[i] : 0) << i;
}

TEST(TpuPallasTest, DynamicDMASimpleTileAlignedDynamicSizeDma) {
  Array<int32_t> x({8, 8, 128});
  for (int64_t i = 0; i < x.size(); ++i) x[i] = static_cast<int32_t>(i / (8 * 128));
  dynamic_size_dma(x, {8, 8, 128});
}

TEST(TpuPallasTest, DynamicDMASimpleDynamicSizeDma) {  // skipped by Pallas ("doesn't work yet")
  dynamic_size_dma(arange<int32_t>({8}), {8});
}

// ---- EmitPipelineTest -------------------------------------------------------------------------

template <class T>
void emit_pipeline_small_window(int tile_major) {
  tile_major *= 32 / (8 * static_cast<int>(sizeof(T)));
  Array<T> x({128, 256});
  Array<T> y({128, 256});
  Random r(1234);
  for (int64_t i = 0; i < x.size(); ++i) {
    x[i] = static_cast<T>(r.uniform_int(-40, 40));
    y[i] = static_cast<T>(r.uniform_int(-40, 40));
  }
  const Array<T> out = pl::pallas_call(
      [tile_major](pltpu::AnyRef<const T> xh, pltpu::AnyRef<const T> yh, pltpu::AnyRef<T> oh) {
        const pl::BlockSpec spec({tile_major, 128}, [](int i, int j) { return pl::idx(i, j); });
        pltpu::emit_pipeline(
            [](pltpu::VmemRef<const T> xv, pltpu::VmemRef<const T> yv, pltpu::VmemRef<T> ov) {
              ov = (xv.template astype<int32_t>() + yv.template astype<int32_t>())
                       .template astype<T>();
            },
            pltpu::grid({128 / tile_major, 2}), pl::in_specs(spec, spec),
            pl::out_specs(spec))(xh, yh, oh);
      },
      pl::out_shape<T>({128, 256}), pl::in_specs(pl::BlockSpec(pl::ANY), pl::BlockSpec(pl::ANY)),
      pl::out_specs(pl::BlockSpec(pl::ANY)))(x, y);
  for (int64_t i = 0; i < x.size(); ++i) ASSERT_EQ(out[i], static_cast<T>(x[i] + y[i]));
}

TEST(TpuPallasTest, EmitPipelineSmallWindow) {
  for (int tile_major : {1, 2, 4, 8}) {
    emit_pipeline_small_window<int32_t>(tile_major);
    emit_pipeline_small_window<int16_t>(tile_major);
    emit_pipeline_small_window<int8_t>(tile_major);
  }
}

}  // namespace
