// Internal: jax.numpy's type promotion lattice, evaluated at compile time (vector_ops.h's
// Promote uses it). The lattice is jax.numpy's "standard" one with 64-bit types disabled, as
// Pallas TPU kernels run (jax/_src/dtypes.py, _type_promotion_lattice(strict=False, x64=False)):
//
//   bool -> i*;  i* -> u8, i8, u4, i4, u2, i2;  u8 -> i16, u16;  u16 -> i32, u32;  u32 -> i32, u64;
//   u64 -> f*;  i8 -> i16 -> i32 -> i64 -> f*;
//   f* -> float8_e4m3fn, float8_e5m2, float8_e4m3b11fnuz, bf16, f16, c*;
//   bf16 -> f32;  f16 -> f32;  f32 -> f64, c64;  f64 -> c128;  c* -> c64 -> c128
//
// (i* and f* are the weak types of Python ints and floats.) The result of two dtypes is their
// least upper bound; 64-bit results canonicalise to 32 bits. The float8s have nothing above
// them, so a float8 combines only with itself, bool and integers (which it absorbs); with any
// other float there is no bound and jnp raises, as Tessera does (a static_assert). The sub-byte
// integers (int4, uint4, int2, uint2) likewise have nothing above them: each combines only with
// itself, bool and Python ints.
#pragma once

#include <cstdint>
#include <type_traits>

#include "tessera/dtype.h"

namespace tessera::detail {

namespace lattice {
enum Node : int {
  kB1,
  kIWeak,
  kFWeak,
  kU8,
  kU16,
  kU32,
  kU64,
  kI8,
  kI16,
  kI32,
  kI64,
  kE4M3FN,
  kE5M2,
  kE4M3B11FNUZ,
  kBF16,
  kF16,
  kF32,
  kF64,
  kCWeak,
  kC64,
  kC128,
  kI4,
  kU4,
  kI2,
  kU2,
  kCount
};

constexpr uint32_t bit(Node n) noexcept { return 1u << n; }

/// The nodes immediately above each node.
constexpr uint32_t successors(int n) noexcept {
  switch (n) {
    case kB1:
      return bit(kIWeak);
    case kIWeak:
      return bit(kU8) | bit(kI8) | bit(kU4) | bit(kI4) | bit(kU2) | bit(kI2);
    case kU8:
      return bit(kI16) | bit(kU16);
    case kU16:
      return bit(kI32) | bit(kU32);
    case kU32:
      return bit(kI32) | bit(kU64);  // x64 disabled: no int64 from 32-bit inputs
    case kU64:
    case kI64:
      return bit(kFWeak);
    case kI8:
      return bit(kI16);
    case kI16:
      return bit(kI32);
    case kI32:
      return bit(kI64);
    case kFWeak:
      return bit(kE4M3FN) | bit(kE5M2) | bit(kE4M3B11FNUZ) | bit(kBF16) | bit(kF16) | bit(kCWeak);
    case kBF16:
    case kF16:
      return bit(kF32);
    case kF32:
      return bit(kF64) | bit(kC64);
    case kF64:
      return bit(kC128);
    case kCWeak:
      return bit(kC64);
    case kC64:
      return bit(kC128);
    default:
      return 0;
  }
}

/// Every node at or above `n` (the reflexive, transitive closure of successors).
constexpr uint32_t upper_bounds(int n) noexcept {
  uint32_t ub = 1u << n;
  for (int round = 0; round < kCount; ++round) {
    uint32_t next = ub;
    for (int m = 0; m < kCount; ++m) {
      if ((ub >> m) & 1u) next |= successors(m);
    }
    ub = next;
  }
  return ub;
}

constexpr Node node_of(DType d) noexcept {
  switch (d) {
    case DType::kBool:
      return kB1;
    case DType::kInt8:
      return kI8;
    case DType::kInt16:
      return kI16;
    case DType::kInt32:
      return kI32;
    case DType::kUInt8:
      return kU8;
    case DType::kUInt16:
      return kU16;
    case DType::kUInt32:
      return kU32;
    case DType::kBFloat16:
      return kBF16;
    case DType::kFloat16:
      return kF16;
    case DType::kFloat32:
      return kF32;
    case DType::kFloat8E4M3FN:
      return kE4M3FN;
    case DType::kFloat8E5M2:
      return kE5M2;
    case DType::kFloat8E4M3B11FNUZ:
      return kE4M3B11FNUZ;
    case DType::kInt4:
      return kI4;
    case DType::kUInt4:
      return kU4;
    case DType::kInt2:
      return kI2;
    case DType::kUInt2:
      return kU2;
  }
  return kCount;
}
}  // namespace lattice

/// The outcome of promoting two dtypes: `ok` false where jax.numpy has no implicit promotion.
struct Promotion {
  bool ok = false;
  DType dtype = DType::kFloat32;
};

/// jnp.promote_types(a, b) with 64-bit types disabled (see the file comment).
constexpr Promotion promote_dtypes(DType a, DType b) noexcept {
  using namespace lattice;
  const uint32_t common = upper_bounds(node_of(a)) & upper_bounds(node_of(b));
  for (int c = 0; c < kCount; ++c) {
    if (((common >> c) & 1u) == 0 || (common & ~upper_bounds(c)) != 0) continue;
    switch (c) {  // the least upper bound, canonicalised to 32 bits
      case kB1:
        return {true, DType::kBool};
      case kU8:
        return {true, DType::kUInt8};
      case kU16:
        return {true, DType::kUInt16};
      case kU32:
      case kU64:
        return {true, DType::kUInt32};
      case kI8:
        return {true, DType::kInt8};
      case kI16:
        return {true, DType::kInt16};
      case kI32:
      case kI64:
        return {true, DType::kInt32};
      case kE4M3FN:
        return {true, DType::kFloat8E4M3FN};
      case kE5M2:
        return {true, DType::kFloat8E5M2};
      case kE4M3B11FNUZ:
        return {true, DType::kFloat8E4M3B11FNUZ};
      case kBF16:
        return {true, DType::kBFloat16};
      case kF16:
        return {true, DType::kFloat16};
      case kF32:
      case kF64:
        return {true, DType::kFloat32};
      case kI4:
        return {true, DType::kInt4};
      case kU4:
        return {true, DType::kUInt4};
      case kI2:
        return {true, DType::kInt2};
      case kU2:
        return {true, DType::kUInt2};
      default:
        return {};
    }
  }
  return {};
}

// ---- promotion of C++ element types -------------------------------------------------------
/// The promoted dtype of two array dtypes: jnp.promote_types with 64-bit types disabled
/// (promote_dtypes above). jnp refuses to promote a float8 with another float; so does Tessera.
template <class A, class B>
struct PromoteImpl {
  static constexpr Promotion result = promote_dtypes(dtype_of<A>, dtype_of<B>);
  static_assert(result.ok,
                "tessera: these operand dtypes have no implicit promotion (as in jax.numpy): "
                "8-bit floats (float8_*) combine only with their own dtype, bool and "
                "integers, sub-byte integers (int4, uint4, int2, uint2) only with their own "
                "dtype and bool; convert explicitly first, e.g. x.astype<float>()");
  using type = dtype_type_t<result.dtype>;
};
template <class A, class B>
using Promote = typename PromoteImpl<A, B>::type;

/// True for C++ floating scalars (and Tessera's narrow float types).
template <class S>
inline constexpr bool is_float_scalar_v = std::is_floating_point_v<S> || is_narrow_float_v<S>;

/// The dtype of `array op weak_scalar` where the scalar has C++ type S: a float scalar keeps a
/// floating array's dtype and makes an integer array float32; an integer scalar keeps the
/// array's dtype (a bool array becomes int32); a bool scalar keeps the array's dtype. A
/// sub-byte integer array takes no float scalar (jnp raises: no implicit promotion).
template <class A, class S>
struct PromoteWeakImpl {
  static_assert(!(is_narrow_int_v<A> && is_float_scalar_v<S>),
                "tessera: a sub-byte integer (int4, uint4, int2, uint2) array has no implicit "
                "promotion with a float scalar (as in jax.numpy); convert explicitly first, e.g. "
                "x.astype<float>()");
  using type = std::conditional_t<
      std::is_same_v<S, bool>, A,
      std::conditional_t<is_float_scalar_v<S>,
                         std::conditional_t<is_floating(dtype_of<A>), A, float>,
                         std::conditional_t<std::is_same_v<A, bool>, int32_t, A>>>;
};
template <class A, class S>
using PromoteWeak = typename PromoteWeakImpl<A, S>::type;

/// The dtype of two weak scalars together (jnp.where(m, 1.0, 0)): float32 if either is a
/// float, bool if both are bools, else int32.
template <class S1, class S2>
using PromoteScalars = std::conditional_t<
    is_float_scalar_v<S1> || is_float_scalar_v<S2>, float,
    std::conditional_t<std::is_same_v<S1, bool> && std::is_same_v<S2, bool>, bool, int32_t>>;

/// float32 for integer and bool dtypes, else T (what jnp.exp, jnp.sqrt, ... return).
template <class T>
using FloatOf = std::conditional_t<is_floating(dtype_of<T>), T, float>;

}  // namespace tessera::detail
