// The native VPU: evaluates an ExprProgram into a destination ref, tile by tile, with Highway
// SIMD chosen at run time (this file is compiled once per target by foreach_target.h, and
// HWY_DYNAMIC_DISPATCH picks the best target the CPU supports).
//
// Evaluation model. The destination's axes are coalesced (an axis merges into its inner
// neighbour when every operand's strides allow it), then the outer axes are walked as rows and
// the innermost axis in tiles of kTile elements. For each tile every node of the program writes
// its lanes to a small per-node buffer (32-bit lanes: float for float32/bfloat16 nodes, int32
// for int32/int8/bool nodes), so an expression of any length makes no full-size temporary and
// its working set stays in L1. Each node rounds to its own dtype (bfloat16 to nearest even,
// int8 wraps, bool is x != 0), which gives numpy's per-op results.

#include <fmt/format.h>

#include <algorithm>
#include <cstring>
#include <vector>

#include "native/vector_plan.h"
#include "runtime/context.h"
#include "tessera/detail/expr_program.h"
#include "tessera/detail/runtime.h"
#include "tessera/dma.h"
#include "tessera/ref.h"

#undef HWY_TARGET_INCLUDE
#define HWY_TARGET_INCLUDE "native/vector_kernels.cc"
#include <hwy/cache_control.h>
#include <hwy/foreach_target.h>  // IWYU pragma: keep
#include <hwy/highway.h>

HWY_BEFORE_NAMESPACE();
namespace tessera::detail::HWY_NAMESPACE {
namespace hn = hwy::HWY_NAMESPACE;
using plan::kTile;

// ---- loads: storage -> 32-bit lanes --------------------------------------------------------
template <class DF>
void load_f(DF df, DType dt, const std::byte* p, int64_t stride, int64_t len, float* out) {
  const hn::RebindToUnsigned<DF> du;
  const hn::Rebind<uint16_t, DF> d16;
  const int64_t N = static_cast<int64_t>(hn::Lanes(df));
  int64_t j = 0;
  if (stride == 0) {
    float v = 0;
    if (dt == DType::kFloat32)
      std::memcpy(&v, p, 4);
    else {
      uint16_t h;
      std::memcpy(&h, p, 2);
      v = static_cast<float>(bfloat16::from_bits(h));
    }
    const auto s = hn::Set(df, v);
    for (; j < len; j += N) hn::Store(s, df, out + j);
    return;
  }
  if (stride == 1) {
    if (dt == DType::kFloat32) {
      const float* f = reinterpret_cast<const float*>(p);
      for (; j + N <= len; j += N) hn::Store(hn::LoadU(df, f + j), df, out + j);
    } else {
      const auto* h = reinterpret_cast<const uint16_t*>(p);
      for (; j + N <= len; j += N) {
        const auto wide = hn::PromoteTo(du, hn::LoadU(d16, h + j));
        hn::Store(hn::BitCast(df, hn::ShiftLeft<16>(wide)), df, out + j);
      }
    }
  }
  const int64_t isz = dt == DType::kFloat32 ? 4 : 2;
  for (; j < len; ++j) {
    const std::byte* q = p + j * stride * isz;
    if (dt == DType::kFloat32) {
      std::memcpy(out + j, q, 4);
    } else {
      uint16_t h;
      std::memcpy(&h, q, 2);
      out[j] = static_cast<float>(bfloat16::from_bits(h));
    }
  }
}

template <class DI>
void load_i(DI di, DType dt, const std::byte* p, int64_t stride, int64_t len, int32_t* out) {
  const hn::Rebind<int8_t, DI> d8;
  const int64_t N = static_cast<int64_t>(hn::Lanes(di));
  auto scalar = [&](const std::byte* q) -> int32_t {
    if (dt == DType::kInt32) {
      int32_t v;
      std::memcpy(&v, q, 4);
      return v;
    }
    int8_t v;
    std::memcpy(&v, q, 1);
    return dt == DType::kBool ? (v != 0 ? 1 : 0) : v;
  };
  int64_t j = 0;
  if (stride == 0) {
    const auto s = hn::Set(di, scalar(p));
    for (; j < len; j += N) hn::Store(s, di, out + j);
    return;
  }
  if (stride == 1) {
    if (dt == DType::kInt32) {
      const auto* q = reinterpret_cast<const int32_t*>(p);
      for (; j + N <= len; j += N) hn::Store(hn::LoadU(di, q + j), di, out + j);
    } else {
      // int8 sign-extends; bool bytes are 0 or 1, so the same widening is exact.
      const auto* q = reinterpret_cast<const int8_t*>(p);
      for (; j + N <= len; j += N) hn::Store(hn::PromoteTo(di, hn::LoadU(d8, q + j)), di, out + j);
    }
  }
  const int64_t isz = dt == DType::kInt32 ? 4 : 1;
  for (; j < len; ++j) out[j] = scalar(p + j * stride * isz);
}

// ---- stores: 32-bit lanes -> storage -----------------------------------------------------------
// `stream`: non-temporal stores where the destination is vector-aligned (pipeline outputs
// written once in place, see runtime/pipeline.cc).
template <class DF>
void store_f(DF df, DType dt, const float* in, std::byte* p, int64_t stride, int64_t len,
             bool stream) {
  const hn::RebindToSigned<DF> di;
  const hn::RebindToUnsigned<DF> du;
  const hn::Rebind<uint16_t, DF> d16;
  const int64_t N = static_cast<int64_t>(hn::Lanes(df));
  int64_t j = 0;
  if (stride == 1) {
    if (dt == DType::kFloat32) {
      float* f = reinterpret_cast<float*>(p);
      if (stream && reinterpret_cast<uintptr_t>(f) % (N * sizeof(float)) == 0) {
        for (; j + N <= len; j += N) hn::Stream(hn::Load(df, in + j), df, f + j);
      }
      for (; j + N <= len; j += N) hn::StoreU(hn::Load(df, in + j), df, f + j);
    } else {
      // Values are already rounded to bfloat16 by their node, so the low 16 bits are zero
      // (NaNs keep their quiet bit in the upper half): a shift is the conversion.
      auto* h = reinterpret_cast<uint16_t*>(p);
      for (; j + N <= len; j += N) {
        const auto bits = hn::ShiftRight<16>(hn::BitCast(du, hn::Load(df, in + j)));
        hn::StoreU(hn::DemoteTo(d16, hn::BitCast(di, bits)), d16, h + j);
      }
    }
  }
  const int64_t isz = dt == DType::kFloat32 ? 4 : 2;
  for (; j < len; ++j) {
    std::byte* q = p + j * stride * isz;
    if (dt == DType::kFloat32) {
      std::memcpy(q, in + j, 4);
    } else {
      const uint16_t h = bfloat16(in[j]).bits;
      std::memcpy(q, &h, 2);
    }
  }
}

template <class DI>
void store_i(DI di, DType dt, const int32_t* in, std::byte* p, int64_t stride, int64_t len,
             bool stream) {
  const hn::Rebind<int8_t, DI> d8;
  const int64_t N = static_cast<int64_t>(hn::Lanes(di));
  int64_t j = 0;
  if (stride == 1) {
    if (dt == DType::kInt32) {
      auto* q = reinterpret_cast<int32_t*>(p);
      if (stream && reinterpret_cast<uintptr_t>(q) % (N * sizeof(int32_t)) == 0) {
        for (; j + N <= len; j += N) hn::Stream(hn::Load(di, in + j), di, q + j);
      }
      for (; j + N <= len; j += N) hn::StoreU(hn::Load(di, in + j), di, q + j);
    } else {
      // Lanes already hold int8-range (wrapped) or 0/1 values, so saturation never triggers.
      auto* q = reinterpret_cast<int8_t*>(p);
      for (; j + N <= len; j += N) hn::StoreU(hn::DemoteTo(d8, hn::Load(di, in + j)), d8, q + j);
    }
  }
  const int64_t isz = dt == DType::kInt32 ? 4 : 1;
  for (; j < len; ++j) {
    std::byte* q = p + j * stride * isz;
    if (dt == DType::kInt32) {
      std::memcpy(q, in + j, 4);
    } else {
      const auto v = static_cast<int8_t>(in[j]);
      std::memcpy(q, &v, 1);
    }
  }
}

// ---- per-node rounding -------------------------------------------------------------------------
template <class DF>
void round_bf16(DF df, float* x, int64_t padded) {
  const hn::RebindToUnsigned<DF> du;
  const int64_t N = static_cast<int64_t>(hn::Lanes(df));
  const auto bias = hn::Set(du, 0x7fffu);
  const auto one = hn::Set(du, 1u);
  const auto hi = hn::Set(du, 0xffff0000u);
  const auto quiet = hn::Set(du, 0x00400000u);
  for (int64_t j = 0; j < padded; j += N) {
    const auto v = hn::Load(df, x + j);
    const auto u = hn::BitCast(du, v);
    const auto lsb = hn::And(hn::ShiftRight<16>(u), one);
    const auto r = hn::And(hn::Add(u, hn::Add(bias, lsb)), hi);
    const auto nan = hn::BitCast(df, hn::And(hn::Or(u, quiet), hi));
    hn::Store(hn::IfThenElse(hn::IsNaN(v), nan, hn::BitCast(df, r)), df, x + j);
  }
}

template <class DI>
void round_int(DI di, DType dt, int32_t* x, int64_t padded) {
  const int64_t N = static_cast<int64_t>(hn::Lanes(di));
  if (dt == DType::kInt8) {
    for (int64_t j = 0; j < padded; j += N) {
      hn::Store(hn::ShiftRight<24>(hn::ShiftLeft<24>(hn::Load(di, x + j))), di, x + j);
    }
  } else if (dt == DType::kBool) {
    const auto one = hn::Set(di, 1);
    for (int64_t j = 0; j < padded; j += N) {
      hn::Store(hn::IfThenElseZero(hn::Ne(hn::Load(di, x + j), hn::Zero(di)), one), di, x + j);
    }
  }
}

// ---- the evaluator -----------------------------------------------------------------------------
void EvaluatePlan(const plan::Plan& p, float* lanes) {
  const hn::ScalableTag<float> df;
  const hn::RebindToSigned<decltype(df)> di;
  const int64_t N = static_cast<int64_t>(hn::Lanes(df));
  const int nd = p.extent.size();
  const int64_t inner = p.extent[nd - 1];
  const size_t nn = p.nodes.size();
  auto fbuf = [&](size_t k) { return lanes + k * static_cast<size_t>(kTile); };
  auto ibuf = [&](size_t k) {
    return reinterpret_cast<int32_t*>(lanes + k * static_cast<size_t>(kTile));
  };

  // Constants never change: fill their buffers once, as far as a tile reaches.
  const int64_t fill = (std::min(kTile, inner) + N - 1) / N * N;
  for (size_t k = 0; k < nn; ++k) {
    const plan::Node& n = p.nodes[k];
    if (n.op != OpCode::kConst) continue;
    if (n.flt) {
      for (int64_t j = 0; j < fill; j += N) hn::Store(hn::Set(df, n.fval), df, fbuf(k) + j);
    } else {
      for (int64_t j = 0; j < fill; j += N) hn::Store(hn::Set(di, n.ival), di, ibuf(k) + j);
    }
  }
  // Lane indices 0..N-1, built once (Iota is not free on every target).
  const auto iota_f = hn::Iota(df, 0.0f);
  const auto iota_i = hn::Iota(di, 0);

  SmallVec idx(nd, 0);
  const bool prefetch_rows = nd >= 2 && inner <= kTile;
  for (;;) {
    // Row bases for this outer index.
    for (int64_t j0 = 0; j0 < inner; j0 += kTile) {
      const int64_t len = std::min(kTile, inner - j0);
      const int64_t padded = (len + N - 1) / N * N;
      for (size_t k = 0; k < nn; ++k) {
        const plan::Node& n = p.nodes[k];
        switch (n.op) {
          case OpCode::kConst:
            break;
          case OpCode::kLoad: {
            int64_t off = j0 * n.stride[nd - 1];
            for (int d = 0; d < nd - 1; ++d) off += idx[d] * n.stride[d];
            const std::byte* base = n.data + off * itemsize(n.dtype);
            const int64_t s = n.stride[nd - 1];
            // A row of a strided view (a block read in place) is a short run far from the
            // previous one, which the hardware prefetchers barely follow: ask for the row after
            // next while this one is read.
            if (prefetch_rows && s == 1 && idx[nd - 2] + 2 < p.extent[nd - 2]) {
              const std::byte* ahead = base + 2 * n.stride[nd - 2] * itemsize(n.dtype);
              const int64_t bytes = len * itemsize(n.dtype);
              for (int64_t b = 0; b < bytes; b += 64) hwy::Prefetch(ahead + b);
            }
            if (n.flt)
              load_f(df, n.dtype, base, s, len, fbuf(k));
            else
              load_i(di, n.dtype, base, s, len, ibuf(k));
            break;
          }
          case OpCode::kIota: {
            int64_t base = j0 * n.stride[nd - 1];
            for (int d = 0; d < nd - 1; ++d) base += idx[d] * n.stride[d];
            const int64_t c = n.stride[nd - 1];
            // value(j) = base + c * j, with the lane offset j = j0 + vector start + lane.
            if (n.flt) {
              const auto step = hn::Set(df, static_cast<float>(c));
              const auto lanes_c = hn::Mul(iota_f, step);
              for (int64_t j = 0; j < padded; j += N) {
                const auto v = hn::Add(lanes_c, hn::Set(df, static_cast<float>(base + c * j)));
                hn::Store(v, df, fbuf(k) + j);
              }
            } else {
              const auto lanes_c = hn::Mul(iota_i, hn::Set(di, static_cast<int32_t>(c)));
              for (int64_t j = 0; j < padded; j += N) {
                const auto v = hn::Add(lanes_c, hn::Set(di, static_cast<int32_t>(base + c * j)));
                hn::Store(v, di, ibuf(k) + j);
              }
            }
            break;
          }
          case OpCode::kConvert: {
            const plan::Node& src = p.nodes[static_cast<size_t>(n.a)];
            for (int64_t j = 0; j < padded; j += N) {
              if (n.flt && src.flt) {
                hn::Store(hn::Load(df, fbuf(static_cast<size_t>(n.a)) + j), df, fbuf(k) + j);
              } else if (n.flt) {
                hn::Store(hn::ConvertTo(df, hn::Load(di, ibuf(static_cast<size_t>(n.a)) + j)), df,
                          fbuf(k) + j);
              } else if (src.flt) {
                const auto v = hn::Load(df, fbuf(static_cast<size_t>(n.a)) + j);
                if (n.dtype == DType::kBool) {
                  hn::Store(hn::IfThenElseZero(hn::RebindMask(di, hn::Ne(v, hn::Zero(df))),
                                               hn::Set(di, 1)),
                            di, ibuf(k) + j);
                } else {
                  hn::Store(hn::ConvertTo(di, v), di, ibuf(k) + j);
                }
              } else {
                hn::Store(hn::Load(di, ibuf(static_cast<size_t>(n.a)) + j), di, ibuf(k) + j);
              }
            }
            break;
          }
          case OpCode::kAdd:
          case OpCode::kSub:
          case OpCode::kMul:
          case OpCode::kDiv: {
            const size_t a = static_cast<size_t>(n.a);
            const size_t b = static_cast<size_t>(n.b);
            if (n.flt) {
              for (int64_t j = 0; j < padded; j += N) {
                const auto x = hn::Load(df, fbuf(a) + j);
                const auto y = hn::Load(df, fbuf(b) + j);
                auto r = x;
                if (n.op == OpCode::kAdd)
                  r = hn::Add(x, y);
                else if (n.op == OpCode::kSub)
                  r = hn::Sub(x, y);
                else if (n.op == OpCode::kMul)
                  r = hn::Mul(x, y);
                else
                  r = hn::Div(x, y);
                hn::Store(r, df, fbuf(k) + j);
              }
            } else {
              for (int64_t j = 0; j < padded; j += N) {
                const auto x = hn::Load(di, ibuf(a) + j);
                const auto y = hn::Load(di, ibuf(b) + j);
                auto r = x;
                if (n.op == OpCode::kAdd)
                  r = hn::Add(x, y);
                else if (n.op == OpCode::kSub)
                  r = hn::Sub(x, y);
                else
                  r = hn::Mul(x, y);  // integer division never reaches here (true divide)
                hn::Store(r, di, ibuf(k) + j);
              }
            }
            break;
          }
          case OpCode::kNeg: {
            const size_t a = static_cast<size_t>(n.a);
            for (int64_t j = 0; j < padded; j += N) {
              if (n.flt)
                hn::Store(hn::Neg(hn::Load(df, fbuf(a) + j)), df, fbuf(k) + j);
              else
                hn::Store(hn::Neg(hn::Load(di, ibuf(a) + j)), di, ibuf(k) + j);
            }
            break;
          }
        }
        if (n.op != OpCode::kLoad && n.op != OpCode::kConst) {
          if (n.dtype == DType::kBFloat16)
            round_bf16(df, fbuf(k), padded);
          else if (!n.flt)
            round_int(di, n.dtype, ibuf(k), padded);
        }
      }
      // Store the result row tile.
      int64_t off = j0 * p.dst_stride[nd - 1];
      for (int d = 0; d < nd - 1; ++d) off += idx[d] * p.dst_stride[d];
      std::byte* dst = p.dst + off * itemsize(p.dst_dtype);
      const int64_t s = p.dst_stride[nd - 1];
      if (is_floating(p.dst_dtype))
        store_f(df, p.dst_dtype, fbuf(nn - 1), dst, s, len, p.stream);
      else
        store_i(di, p.dst_dtype, ibuf(nn - 1), dst, s, len, p.stream);
      if (p.prefetch != nullptr) drain_prefetch(*p.prefetch, len * itemsize(p.dst_dtype));
    }
    int d = nd - 2;
    for (; d >= 0; --d) {
      if (++idx[d] < p.extent[d]) break;
      idx[d] = 0;
    }
    if (d < 0) break;
  }
}

}  // namespace tessera::detail::HWY_NAMESPACE
HWY_AFTER_NAMESPACE();

#if HWY_ONCE
namespace tessera::detail {
HWY_EXPORT(EvaluatePlan);

namespace {

std::string shape_str(const Shape& s) { return s.to_string(); }

// Per-axis strides of a leaf of `leaf` shape broadcast into `dst`; throws when it cannot.
SmallVec broadcast_strides(const Shape& leaf, const SmallVec* strides, const Shape& dst,
                           const ExprProgram& prog, const char* what) {
  const int r = leaf.rank();
  const int R = dst.rank();
  auto fail = [&] {
    raise(ErrorKind::kShapeMismatch, "assignment to a Ref", prog.where,
          fmt::format("{} of shape {} does not broadcast to the destination shape {}; shapes "
                      "align on the right and each extent must match or be 1",
                      what, shape_str(leaf), shape_str(dst)));
  };
  if (r > R) fail();
  SmallVec out(R, 0);
  for (int k = 0; k < r; ++k) {
    const int d = R - r + k;
    if (leaf[k] == dst[d]) {
      out[d] = strides != nullptr ? (*strides)[k] : 1;
    } else if (leaf[k] != 1) {
      fail();
    }
  }
  return out;
}

bool ranges_overlap(const std::byte* a, int64_t alen, const std::byte* b, int64_t blen) {
  return a < b + blen && b < a + alen;
}

// [first byte, byte length] that a strided view covers.
std::pair<const std::byte*, int64_t> span_of(const void* data, const Shape& shape,
                                             const SmallVec& strides, int item) {
  int64_t lo = 0;
  int64_t hi = 0;
  for (int d = 0; d < shape.rank(); ++d) {
    if (shape[d] == 0) return {static_cast<const std::byte*>(data), 0};
    const int64_t e = (shape[d] - 1) * strides[d];
    if (e < 0)
      lo += e;
    else
      hi += e;
  }
  return {static_cast<const std::byte*>(data) + lo * item, (hi - lo + 1) * item};
}

thread_local std::vector<float> t_lanes;

}  // namespace

std::vector<ExprNode>& ExprProgram::scratch_nodes() {
  thread_local std::vector<ExprNode> nodes;
  return nodes;
}

const char* op_name(OpCode op) noexcept {
  switch (op) {
    case OpCode::kLoad:
      return "load";
    case OpCode::kConst:
      return "constant";
    case OpCode::kIota:
      return "iota";
    case OpCode::kConvert:
      return "convert";
    case OpCode::kAdd:
      return "add";
    case OpCode::kSub:
      return "subtract";
    case OpCode::kMul:
      return "multiply";
    case OpCode::kDiv:
      return "divide";
    case OpCode::kNeg:
      return "negative";
  }
  return "?";
}

Shape broadcast_shapes(const Shape& a, const Shape& b, const char* op, std::source_location where) {
  const int r = std::max(a.rank(), b.rank());
  SmallVec out(r, 1);
  for (int k = 0; k < r; ++k) {
    const int ia = a.rank() - r + k;
    const int ib = b.rank() - r + k;
    const int64_t ea = ia >= 0 ? a[ia] : 1;
    const int64_t eb = ib >= 0 ? b[ib] : 1;
    if (ea != eb && ea != 1 && eb != 1) {
      raise(ErrorKind::kShapeMismatch, op, where,
            fmt::format("operands of shapes {} and {} do not broadcast (axis {} from the left of "
                        "the result: {} vs {}); extents must match or be 1",
                        shape_str(a), shape_str(b), k, ea, eb));
    }
    out[k] = ea == 1 ? eb : ea;
  }
  return Shape(std::move(out));
}

void evaluate(const ExprProgram& prog, const RawRef& dst) {
  if (prog.nodes.empty()) return;
  const Shape& D = dst.shape;
  if (D.size() == 0) return;
  const int R = D.rank();
  const int item = itemsize(dst.dtype);

  // Broadcast every leaf into the destination's axes. The plan lives in per-thread storage
  // that keeps its capacity, so a warm assignment allocates nothing.
  thread_local plan::Plan p;
  p.nodes.clear();
  SmallVec dst_strides = dst.strides;
  bool overlap = false;
  const auto dspan = span_of(dst.data, D, dst_strides, item);
  for (const ExprNode& e : prog.nodes) {
    plan::Node& n = p.nodes.emplace_back();
    n.op = e.op;
    n.dtype = e.dtype;
    n.flt = is_floating(e.dtype);
    n.a = e.a;
    n.b = e.b;
    switch (e.op) {
      case OpCode::kLoad: {
        n.data = static_cast<const std::byte*>(e.data);
        n.stride = broadcast_strides(e.shape, &e.strides, D, prog, "an operand ref");
        const auto s = span_of(e.data, D, n.stride, itemsize(e.dtype));
        if (ranges_overlap(s.first, s.second, dspan.first, dspan.second) &&
            !(e.data == dst.data && n.stride == dst_strides && e.dtype == dst.dtype)) {
          overlap = true;
        }
        break;
      }
      case OpCode::kConst:
        if (e.shape.rank() > 0) broadcast_strides(e.shape, nullptr, D, prog, "a full(...)");
        if (n.flt) {
          n.fval = static_cast<float>(e.fconst);
          if (e.dtype == DType::kBFloat16) n.fval = static_cast<float>(bfloat16(n.fval));
        } else {
          int64_t v = e.iconst;
          if (e.dtype == DType::kInt8) v = static_cast<int8_t>(v);
          if (e.dtype == DType::kBool) v = v != 0;
          n.ival = static_cast<int32_t>(v);
        }
        break;
      case OpCode::kIota: {
        if (e.axis < 0 || e.axis >= e.shape.rank()) {
          raise(ErrorKind::kInvalidArgument, "iota", prog.where,
                fmt::format("dimension {} is outside 0..{} for an iota of shape {}", e.axis,
                            e.shape.rank() - 1, shape_str(e.shape)));
        }
        broadcast_strides(e.shape, nullptr, D, prog, "an iota/arange");
        n.stride = SmallVec(R, 0);
        const int d = R - e.shape.rank() + e.axis;
        if (e.shape[e.axis] == D[d] && D[d] != 1) n.stride[d] = 1;
        break;
      }
      default:
        break;
    }
  }

  if (overlap) {
    // The destination overlaps an operand at a different position: evaluate into a contiguous
    // temporary first, then copy, so that no element is overwritten before it is read.
    const size_t bytes = static_cast<size_t>(D.size() * item);
    std::vector<std::byte> tmp(bytes + 64);
    void* aligned = tmp.data();
    size_t space = tmp.size();
    std::align(64, bytes, aligned, space);
    RawRef t{aligned, dst.dtype, MemorySpace::VMEM, D, row_major_strides(D)};
    evaluate(prog, t);
    dma_copy(t, dst, "assignment to a Ref", prog.where);
    return;
  }

  // Coalesce axes: drop unit axes, and merge an axis into the group outside it when every stride
  // vector (destination, loads, iota coefficients) is contiguous across the pair: the outer
  // stride equals the inner stride times the inner extent.
  auto for_each_row = [&](auto&& fn) {
    fn(dst_strides);
    for (auto& n : p.nodes) {
      if (n.op == OpCode::kLoad || n.op == OpCode::kIota) fn(n.stride);
    }
  };
  SmallVec ext;
  int groups = 0;      // coalesced axes so far
  int last_kept = -1;  // original axis of the innermost member of the last group
  for (int d = 0; d < R; ++d) {
    if (D[d] == 1) continue;
    bool merge = groups > 0;
    if (merge) {
      for_each_row([&](SmallVec& v) { merge = merge && v[last_kept] == v[d] * D[d]; });
    }
    if (merge) {
      ext[groups - 1] *= D[d];
      // The group's stride becomes its new innermost member's: written in place at slot
      // groups - 1 (slots < d are never read again).
      for_each_row([&](SmallVec& v) { v[groups - 1] = v[d]; });
    } else {
      ext.push_back(D[d]);
      for_each_row([&](SmallVec& v) { v[groups] = v[d]; });
      ++groups;
    }
    // After compaction slot groups - 1 holds the group's stride; read it from there next time.
    last_kept = groups - 1;
  }
  if (groups == 0) {
    ext.push_back(1);
    for_each_row([&](SmallVec& v) { v[0] = 0; });
    groups = 1;
  }
  for_each_row([&](SmallVec& v) { v.resize(groups); });
  p.extent = std::move(ext);
  p.dst = static_cast<std::byte*>(dst.data);
  p.dst_dtype = dst.dtype;
  p.stream = false;
  p.prefetch = nullptr;
  if (StepHints* h = step_hints(); h != nullptr) {
    for (int i = 0; i < h->num_stream; ++i) {
      if (dspan.first >= h->stream_lo[i] && dspan.first + dspan.second <= h->stream_hi[i]) {
        p.stream = true;
        h->streamed = true;
      }
    }
    if (h->prefetch.active()) p.prefetch = &h->prefetch;
  }
  p.dst_stride = std::move(dst_strides);

  // One kTile buffer per node, 64-byte aligned (Highway's Load/Store need vector alignment);
  // the 16 spare floats cover the alignment shift. The buffers are reused across calls.
  const size_t need = p.nodes.size() * static_cast<size_t>(plan::kTile) + 16;
  if (t_lanes.size() < need) t_lanes.resize(need);
  float* lanes = t_lanes.data();
  lanes += ((64 - reinterpret_cast<uintptr_t>(lanes) % 64) % 64) / sizeof(float);
  // Resolve the target once: HWY_DYNAMIC_DISPATCH looks the target up on every call, which costs
  // about as much as evaluating a small tile.
  static const auto evaluate_plan = [] {
    hwy::GetChosenTarget().Update(hwy::SupportedTargets());
    return HWY_DYNAMIC_DISPATCH(EvaluatePlan);
  }();
  evaluate_plan(p, lanes);
}

}  // namespace tessera::detail
#endif  // HWY_ONCE
