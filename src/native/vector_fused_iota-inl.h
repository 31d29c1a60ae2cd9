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

#include <cstdint>
#include <cstring>

#include "native/vector_plan.h"
#include "tessera/detail/runtime.h"
#include "tessera/dtype.h"

HWY_BEFORE_NAMESPACE();
namespace tessera::detail::HWY_NAMESPACE {
namespace hn = hwy::HWY_NAMESPACE;

// d = op(iota, value) (or op(value, iota) when `iota_first` is false) for a float iota along the
// destination's axes: row by row, each row's values computed as iota_tile computes them (the
// same float operations, so the same bits), with no lane buffers. An iota plus an offset is how
// kernels number their elements (positions, masks); on the tile interpreter its few vectors
// cost as much as the interpreter's setup.
template <class DF, class Op>
void fused_iota(DF df, const plan::Plan& p, const plan::Node& iota, float value, bool iota_first,
                Op op) {
  const int nd = p.extent.size();
  const int64_t N = static_cast<int64_t>(hn::Lanes(df));
  const int64_t len = p.extent[nd - 1];
  const int64_t c = iota.stride[nd - 1];
  // Lane indices 0..N-1 from memory: hn::Iota builds them lane by lane, which on AVX-512 cost
  // more than the rest of a 128-element row.
  alignas(64) static constexpr float kLanes[16] = {0, 1, 2,  3,  4,  5,  6,  7,
                                                   8, 9, 10, 11, 12, 13, 14, 15};
  static_assert(hn::MaxLanes(df) <= 16);
  const auto lanes_c = hn::Mul(hn::Load(df, kLanes), hn::Set(df, static_cast<float>(c)));
  const auto vv = hn::Set(df, value);
  SmallVec idx(nd, 0);
  for (;;) {
    int64_t base = 0, od = 0;
    for (int d = 0; d + 1 < nd; ++d) {
      base += idx[d] * iota.stride[d];
      od += idx[d] * p.dst_stride[d];
    }
    float* dst = reinterpret_cast<float*>(p.dst) + od;
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

// The fused form of a float iota and a constant under `op`; false when `p` is not one.
template <class DF, class Op>
bool fused_iota_form(DF df, const plan::Plan& p, Op op) {
  const plan::Node& n = p.nodes[2];
  const plan::Node& a = p.nodes[static_cast<size_t>(n.a)];
  const plan::Node& b = p.nodes[static_cast<size_t>(n.b)];
  const bool iota_first = a.op == OpCode::kIota;
  const plan::Node& iota = iota_first ? a : b;
  const plan::Node& other = iota_first ? b : a;
  if (iota.op != OpCode::kIota || !iota.flt || iota.dtype != DType::kFloat32 ||
      other.op != OpCode::kConst || !other.flt || other.dtype != DType::kFloat32) {
    return false;
  }
  fused_iota(df, p, iota, other.fval, iota_first, op);
  return true;
}

// Evaluates a plan of the form iota, op(iota, c) or op(c, iota), op one of +, -, *, into a
// float32 destination with unit inner stride, on the fused path; false (nothing done) otherwise.
inline bool EvaluateFusedIota(const plan::Plan& p) {
  const hn::ScalableTag<float> df;
  using V = hn::Vec<decltype(df)>;
  const int nd = p.extent.size();
  if (p.dst_dtype != DType::kFloat32 || p.dst_stride[nd - 1] != 1) return false;
  if (p.nodes.size() == 1) {
    const plan::Node& iota = p.nodes[0];
    if (iota.op != OpCode::kIota || !iota.flt || iota.dtype != DType::kFloat32) return false;
    fused_iota(df, p, iota, 0.0f, true, [](V x, V) HWY_ATTR { return x; });
    return true;
  }
  if (p.nodes.size() != 3) return false;
  const plan::Node& n = p.nodes[2];
  if (n.dtype != DType::kFloat32 || n.a < 0 || n.b < 0 || n.a == n.b || n.a > 1 || n.b > 1) {
    return false;
  }
  switch (n.op) {
    case OpCode::kAdd:
      return fused_iota_form(df, p, [](V x, V y) HWY_ATTR { return hn::Add(x, y); });
    case OpCode::kSub:
      return fused_iota_form(df, p, [](V x, V y) HWY_ATTR { return hn::Sub(x, y); });
    case OpCode::kMul:
      return fused_iota_form(df, p, [](V x, V y) HWY_ATTR { return hn::Mul(x, y); });
    default:
      return false;
  }
}

}  // namespace tessera::detail::HWY_NAMESPACE
HWY_AFTER_NAMESPACE();

#endif  // TESSERA_NATIVE_VECTOR_FUSED_IOTA_INL_H_
