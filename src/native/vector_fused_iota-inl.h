// Per-target fused iota of the native VPU (vector_kernels.cc includes this once per Highway
// target): a float iota alone or combined with a constant (`jnp.arange(n) + offset`,
// `lax.broadcasted_iota(...) * c`), a vector at a time, without the evaluator's lane buffers.

// Re-included per target: the guard toggles with HWY_TARGET_TOGGLE (Highway's -inl.h idiom).
#if defined(TESSERA_NATIVE_VECTOR_FUSED_IOTA_INL_H_) == defined(HWY_TARGET_TOGGLE)
#ifdef TESSERA_NATIVE_VECTOR_FUSED_IOTA_INL_H_
#undef TESSERA_NATIVE_VECTOR_FUSED_IOTA_INL_H_
#else
#define TESSERA_NATIVE_VECTOR_FUSED_IOTA_INL_H_
#endif

#include <hwy/highway.h>

#include <algorithm>
#include <cstdint>
#include <cstring>

#include "native/vector_plan.h"
#include "tessera/detail/runtime.h"
#include "tessera/dtype.h"

HWY_BEFORE_NAMESPACE();
namespace tessera::detail::HWY_NAMESPACE {
namespace hn = hwy::HWY_NAMESPACE;

// d = op(iota, value) (or op(value, iota) when `iota_first` is false) for a float iota along the
// destination's axes, whose value at an index is the sum of index * coef over the axes: row by
// row, each row's values computed as iota_tile computes them (the same float operations, so the
// same bits), with no lane buffers. An iota plus an offset is how kernels number their elements
// (positions, masks); on the tile interpreter its few vectors cost as much as the interpreter's
// setup.
template <class DF, class Op>
void fused_iota(DF df, const FusedDst& p, const int64_t* coef, float value, bool iota_first,
                Op op) {
  const int nd = p.nd;
  const int64_t N = static_cast<int64_t>(hn::Lanes(df));
  const int64_t len = p.extent[nd - 1];
  const int64_t c = coef[nd - 1];
  // Lane indices 0..N-1 from memory: hn::Iota builds them lane by lane, which on AVX-512 cost
  // more than the rest of a 128-element row.
  alignas(64) static constexpr float kLanes[16] = {0, 1, 2,  3,  4,  5,  6,  7,
                                                   8, 9, 10, 11, 12, 13, 14, 15};
  static_assert(hn::MaxLanes(df) <= 16);
  const auto lanes_c = hn::Mul(hn::Load(df, kLanes), hn::Set(df, static_cast<float>(c)));
  const auto vv = hn::Set(df, value);
  SmallVec idx(std::max(nd - 1, 1), 0);  // the row's index over the axes outside it
  for (;;) {
    int64_t base = 0, od = 0;
    for (int d = 0; d + 1 < nd; ++d) {
      base += idx[d] * coef[d];
      od += idx[d] * p.stride[d];
    }
    float* dst = p.data + od;
    for (int64_t j = 0; j < len; j += N) {
      const auto x = hn::Add(lanes_c, hn::Set(df, static_cast<float>(base + c * j)));
      const auto v = iota_first ? op(x, vv) : op(vv, x);
      if (j + N <= len) {
        hn::StoreU(v, df, dst + j);
      } else {
        HWY_ALIGN float tail[hn::MaxLanes(df)];
        hn::Store(v, df, tail);
        std::memcpy(dst + j, tail, static_cast<size_t>(len - j) * sizeof(float));
      }
    }
    int d = nd - 2;
    for (; d >= 0; --d) {
      if (++idx[d] < p.extent[d]) break;
      idx[d] = 0;
    }
    if (d < 0) break;
  }
}

// d = iota (`op` kIota), or iota `op` value / value `op` iota for op one of +, -, *; false
// (nothing done) for any other op.
template <class DF>
bool fused_iota_op(DF df, const FusedDst& p, const int64_t* coef, OpCode op, float value,
                   bool iota_first) {
  using V = hn::Vec<DF>;
  switch (op) {
    case OpCode::kIota:
      fused_iota(df, p, coef, 0.0f, true, [](V x, V) HWY_ATTR { return x; });
      return true;
    case OpCode::kAdd:
      fused_iota(df, p, coef, value, iota_first, [](V x, V y) HWY_ATTR { return hn::Add(x, y); });
      return true;
    case OpCode::kSub:
      fused_iota(df, p, coef, value, iota_first, [](V x, V y) HWY_ATTR { return hn::Sub(x, y); });
      return true;
    case OpCode::kMul:
      fused_iota(df, p, coef, value, iota_first, [](V x, V y) HWY_ATTR { return hn::Mul(x, y); });
      return true;
    default:
      return false;
  }
}

// Evaluates a plan of the form iota, op(iota, c) or op(c, iota), op one of +, -, *, into a
// float32 destination with unit inner stride, on the fused path; false (nothing done) otherwise.
inline bool EvaluateFusedIota(const plan::Plan& p) {
  const hn::ScalableTag<float> df;
  const int nd = p.extent.size();
  if (p.dst_dtype != DType::kFloat32 || p.dst_stride[nd - 1] != 1) return false;
  const FusedDst dst{.nd = nd,
                     .extent = p.extent.data(),
                     .data = reinterpret_cast<float*>(p.dst),
                     .stride = p.dst_stride.data()};
  auto is_iota = [](const plan::Node& n) {
    return n.op == OpCode::kIota && n.flt && n.dtype == DType::kFloat32;
  };
  if (p.nodes.size() == 1) {
    if (!is_iota(p.nodes[0])) return false;
    return fused_iota_op(df, dst, p.nodes[0].stride.data(), OpCode::kIota, 0.0f, true);
  }
  if (p.nodes.size() != 3) return false;
  const plan::Node& n = p.nodes[2];
  if (n.dtype != DType::kFloat32 || n.a < 0 || n.b < 0 || n.a == n.b || n.a > 1 || n.b > 1) {
    return false;
  }
  const plan::Node& a = p.nodes[static_cast<size_t>(n.a)];
  const plan::Node& b = p.nodes[static_cast<size_t>(n.b)];
  const bool iota_first = is_iota(a);
  const plan::Node& iota = iota_first ? a : b;
  const plan::Node& other = iota_first ? b : a;
  if (!is_iota(iota) || other.op != OpCode::kConst || !other.flt ||
      other.dtype != DType::kFloat32 || n.op == OpCode::kIota) {
    return false;
  }
  return fused_iota_op(df, dst, iota.stride.data(), n.op, other.fval, iota_first);
}

}  // namespace tessera::detail::HWY_NAMESPACE
HWY_AFTER_NAMESPACE();

#endif  // TESSERA_NATIVE_VECTOR_FUSED_IOTA_INL_H_
