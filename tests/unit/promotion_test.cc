// jax.numpy's type promotion, at compile time: the whole table of jnp.promote_types for
// Tessera's dtypes (jax 0.10.2, 64-bit types off, as Pallas TPU kernels run), the result dtypes
// of operators on refs and weak C++ scalars, and the float8 refusals (tests/compile_fail).
#include <gtest/gtest.h>

#include <cstdint>
#include <type_traits>
#include <vector>

#include "tessera/tessera.h"

namespace {
using namespace tessera;
using detail::promote_dtypes;

constexpr DType B = DType::kBool, I8 = DType::kInt8, I16 = DType::kInt16, I32 = DType::kInt32,
                U8 = DType::kUInt8, U16 = DType::kUInt16, U32 = DType::kUInt32,
                BF = DType::kBFloat16, F16 = DType::kFloat16, F32 = DType::kFloat32,
                E4 = DType::kFloat8E4M3FN, E5 = DType::kFloat8E5M2, B11 = DType::kFloat8E4M3B11FNUZ;
// X: no implicit promotion (jnp raises TypePromotionError).
constexpr DType X = static_cast<DType>(255);

constexpr int kN = 13;
constexpr DType kOrder[kN] = {B, I8, I16, I32, U8, U16, U32, BF, F16, F32, E4, E5, B11};
// jnp.promote_types(kOrder[i], kOrder[j]), printed by jax.
constexpr DType kTable[kN][kN] = {
    {B, I8, I16, I32, U8, U16, U32, BF, F16, F32, E4, E5, B11},      // B
    {I8, I8, I16, I32, I16, I32, I32, BF, F16, F32, E4, E5, B11},    // I8
    {I16, I16, I16, I32, I16, I32, I32, BF, F16, F32, E4, E5, B11},  // I16
    {I32, I32, I32, I32, I32, I32, I32, BF, F16, F32, E4, E5, B11},  // I32
    {U8, I16, I16, I32, U8, U16, U32, BF, F16, F32, E4, E5, B11},    // U8
    {U16, I32, I32, I32, U16, U16, U32, BF, F16, F32, E4, E5, B11},  // U16
    {U32, I32, I32, I32, U32, U32, U32, BF, F16, F32, E4, E5, B11},  // U32
    {BF, BF, BF, BF, BF, BF, BF, BF, F32, F32, X, X, X},             // BF
    {F16, F16, F16, F16, F16, F16, F16, F32, F16, F32, X, X, X},     // F16
    {F32, F32, F32, F32, F32, F32, F32, F32, F32, F32, X, X, X},     // F32
    {E4, E4, E4, E4, E4, E4, E4, X, X, X, E4, X, X},                 // E4
    {E5, E5, E5, E5, E5, E5, E5, X, X, X, X, E5, X},                 // E5
    {B11, B11, B11, B11, B11, B11, B11, X, X, X, X, X, B11},         // B11
};

constexpr bool table_matches() {
  for (int i = 0; i < kN; ++i) {
    for (int j = 0; j < kN; ++j) {
      const detail::Promotion p = promote_dtypes(kOrder[i], kOrder[j]);
      if (kTable[i][j] == X ? p.ok : (!p.ok || p.dtype != kTable[i][j])) return false;
    }
  }
  return true;
}
static_assert(table_matches(), "the promotion lattice differs from jnp.promote_types");

template <class T>
pltpu::VmemRef<T> vref(std::vector<T>& v) {
  return pltpu::VmemRef<T>(v.data(), {static_cast<int64_t>(v.size())});
}

template <class E>
using V = typename std::remove_cvref_t<E>::value_type;

TEST(Promotion, OperatorsFollowTheLattice) {
  std::vector<uint8_t> u8(4);
  std::vector<int8_t> i8(4);
  std::vector<uint16_t> u16(4);
  std::vector<uint32_t> u32(4);
  std::vector<int32_t> i32(4);
  std::vector<int16_t> i16(4);
  std::vector<float16> f16(4);
  std::vector<bfloat16> bf(4);
  std::vector<float8_e4m3fn> e4(4);
  auto a = vref(u8);
  auto b = vref(i8);
  static_assert(std::is_same_v<V<decltype(a + b)>, int16_t>);
  static_assert(std::is_same_v<V<decltype(vref(u16) * b)>, int32_t>);
  static_assert(std::is_same_v<V<decltype(vref(u32) - vref(i32))>, int32_t>);
  static_assert(std::is_same_v<V<decltype(vref(u32) + a)>, uint32_t>);
  static_assert(std::is_same_v<V<decltype(vref(i16) + vref(u32))>, int32_t>);
  static_assert(std::is_same_v<V<decltype(vref(f16) + vref(bf))>, float>);
  static_assert(std::is_same_v<V<decltype(vref(f16) * vref(i32))>, float16>);
  static_assert(std::is_same_v<V<decltype(vref(u32) + vref(bf))>, bfloat16>);
  static_assert(std::is_same_v<V<decltype(vref(e4) + vref(i32))>, float8_e4m3fn>);
  static_assert(std::is_same_v<V<decltype(vref(e4) * vref(e4))>, float8_e4m3fn>);
  std::vector<float8_e4m3b11fnuz> b11(4);
  static_assert(std::is_same_v<V<decltype(vref(b11) + vref(u8))>, float8_e4m3b11fnuz>);
  static_assert(std::is_same_v<V<decltype(vref(b11) * 2.0f)>, float8_e4m3b11fnuz>);
  // Weak C++ scalars keep the array's dtype where jnp keeps it for Python scalars.
  static_assert(std::is_same_v<V<decltype(a + 1)>, uint8_t>);
  static_assert(std::is_same_v<V<decltype(a + 1.0f)>, float>);
  static_assert(std::is_same_v<V<decltype(vref(u32) * 3u)>, uint32_t>);
  static_assert(std::is_same_v<V<decltype(vref(f16) * 2.0)>, float16>);
  static_assert(std::is_same_v<V<decltype(vref(e4) + 1.0f)>, float8_e4m3fn>);
  static_assert(std::is_same_v<V<decltype(vref(e4) - 1)>, float8_e4m3fn>);
  static_assert(std::is_same_v<V<decltype(vref(i16) + float16(1.0f))>, float>);
  // True division and the float functions give float32 for integers, the float's own dtype
  // otherwise.
  static_assert(std::is_same_v<V<decltype(a / a)>, float>);
  static_assert(std::is_same_v<V<decltype(vref(u32) / vref(u32))>, float>);
  static_assert(std::is_same_v<V<decltype(vref(e4) / vref(e4))>, float8_e4m3fn>);
  static_assert(std::is_same_v<V<decltype(jnp::exp(vref(u16)))>, float>);
  static_assert(std::is_same_v<V<decltype(jnp::exp(vref(f16)))>, float16>);
  static_assert(std::is_same_v<V<decltype(a > b)>, bool>);
  static_assert(std::is_same_v<V<decltype(jnp::where(a > 0, a, b))>, int16_t>);
  SUCCEED();
}

}  // namespace
