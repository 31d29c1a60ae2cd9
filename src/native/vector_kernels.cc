// The native VPU: evaluates an ExprProgram into a destination ref, tile by tile, with Highway
// SIMD chosen at run time (this file is compiled once per target by foreach_target.h, and
// HWY_DYNAMIC_DISPATCH picks the best target the CPU supports).
//
// Evaluation model. The destination's axes are coalesced (an axis merges into its inner
// neighbour when every operand's strides allow it), then the outer axes are walked as rows and
// the innermost axis in tiles of kTile elements. For each tile every node of the program writes
// its lanes to a small per-node buffer (32-bit lanes: float for floating nodes, int32 for
// integer and bool nodes, uint32 as its bits), so an expression of any length makes no
// full-size temporary and its working set stays in L1. Each node rounds to its own dtype
// (bfloat16, float16 and float8 to nearest even, narrow integers wrap, bool is x != 0), which
// gives numpy's per-op results.

#include <fmt/format.h>

#include <algorithm>
#include <atomic>
#include <cstdlib>
#include <cstring>
#include <limits>
#include <string>
#include <utility>
#include <vector>

#include "core/simd_target.h"
#include "native/vector_plan.h"
#include "runtime/step_hints.h"
#include "tessera/detail/expr_program.h"
#include "tessera/detail/runtime.h"
#include "tessera/dma.h"
#include "tessera/ref.h"

#undef HWY_TARGET_INCLUDE
#define HWY_TARGET_INCLUDE "native/vector_kernels.cc"
#include <hwy/cache_control.h>
#include <hwy/foreach_target.h>  // IWYU pragma: keep
#include <hwy/highway.h>

#include "native/vector_convert-inl.h"
#include "native/vector_fused-inl.h"
#include "native/vector_fused_iota-inl.h"
#include "native/vector_fused_tree-inl.h"
#include "native/vector_lanes-inl.h"
#include "native/vector_ops-inl.h"

HWY_BEFORE_NAMESPACE();
namespace tessera::detail::HWY_NAMESPACE {
namespace hn = hwy::HWY_NAMESPACE;
using plan::kTile;

// A five-node plan that is a two-op chain of three fusable operands (fused_chain): the last node
// combines a leaf with an op node of two leaves. False when `p` is not one.
template <class DF>
bool EvaluateFusedChain(DF df, const FusedDst& dst, const plan::Plan& p) {
  const int nd = p.extent.size();
  const plan::Node& last = p.nodes[4];
  if (last.dtype != DType::kFloat32 || last.a < 0 || last.b < 0 || last.c >= 0) return false;
  const bool c_first = is_leaf(p, last.a);
  const int inner = c_first ? last.b : last.a;
  const int leaf = c_first ? last.a : last.b;
  if (!is_leaf(p, leaf) || is_leaf(p, inner)) return false;
  const plan::Node& x = p.nodes[static_cast<size_t>(inner)];
  if (x.dtype != DType::kFloat32 || x.a < 0 || x.b < 0 || x.c >= 0 || !is_leaf(p, x.a) ||
      !is_leaf(p, x.b)) {
    return false;
  }
  // Five nodes: the three leaves are distinct nodes.
  FusedOperand f[3];
  if (!fusable_operand(p.nodes[static_cast<size_t>(x.a)], nd, f[0]) ||
      !fusable_operand(p.nodes[static_cast<size_t>(x.b)], nd, f[1]) ||
      !fusable_operand(p.nodes[static_cast<size_t>(leaf)], nd, f[2])) {
    return false;
  }
  return fused_chain(df, dst, x.op, last.op, c_first, f);
}

// Evaluates `p` on the fused path (vector_fused-inl.h) when its program has one of the fused
// forms; false otherwise.
bool EvaluateFused(const plan::Plan& p) {
  const hn::ScalableTag<float> df;
  using V = hn::Vec<decltype(df)>;
  const int nd = p.extent.size();
  // (A fill or a conversion has one or two nodes.)
  if (p.nodes.size() <= 2 && EvaluateFusedConvert(p)) return true;
  if (p.dst_dtype != DType::kFloat32 || p.dst_stride[nd - 1] != 1) return false;
  if (!g_fused_path_for_test.load(std::memory_order_relaxed)) return false;
  FusedOperand fa, fb;
  if (EvaluateFusedIota(p)) return true;
  const FusedDst dst{.nd = nd,
                     .extent = p.extent.data(),
                     .data = reinterpret_cast<float*>(p.dst),
                     .stride = p.dst_stride.data(),
                     .stream = p.stream,
                     .prefetch = p.prefetch};
  // exp of the value (softmax's exp(s - max)): computed in the same registers, bit for bit the
  // tile evaluator's result (both take ExpFull of the float32 value).
  const plan::Node& last = p.nodes.back();
  const bool exp_last = p.nodes.size() >= 2 && last.op == OpCode::kExp &&
                        last.dtype == DType::kFloat32 &&
                        last.a == static_cast<int>(p.nodes.size()) - 2;
  const size_t value_nodes = p.nodes.size() - (exp_last ? 1 : 0);
  if (value_nodes == 1) {
    if (!fusable_operand(p.nodes[0], nd, fa) || fa.kind != FusedArg::kRow) return false;
    if (exp_last) {
      fused_rows<true, true>(df, dst, fa, fa, [df](V x, V) HWY_ATTR { return ExpFull(df, x); });
    } else {
      fused_rows<true, true>(df, dst, fa, fa, [](V x, V) HWY_ATTR { return x; });
    }
    return true;
  }
  if (value_nodes == 5 && !exp_last && EvaluateFusedChain(df, dst, p)) return true;
  if (value_nodes == 3) {
    const plan::Node& n = p.nodes[2];
    if (n.dtype == DType::kFloat32 && n.a >= 0 && n.b >= 0 && n.a != n.b && n.a <= 1 && n.b <= 1 &&
        fusable_operand(p.nodes[static_cast<size_t>(n.a)], nd, fa) &&
        fusable_operand(p.nodes[static_cast<size_t>(n.b)], nd, fb)) {
      if (exp_last) {
        return fused_binary(df, dst, n.op, fa, fb, [df](V x) HWY_ATTR { return ExpFull(df, x); });
      }
      return fused_binary(df, dst, n.op, fa, fb);
    }
  }
  TreeProgram tree;
  return TreeCompiler(p, tree).compile() && fused_tree(dst, tree);
}

// A statement's iota that needs no plan (run_fused_iota).
bool FusedIotaF32(const FusedDst& d, const int64_t* coef, OpCode op, float value, bool iota_first) {
  const hn::ScalableTag<float> df;
  return fused_iota_op(df, d, coef, op, value, iota_first);
}

// A statement's binary op that needs no plan (run_fused_binary).
bool FusedBinaryF32(const FusedDst& d, OpCode op, const FusedOperand& a, const FusedOperand& b) {
  const hn::ScalableTag<float> df;
  return fused_binary(df, d, op, a, b);
}

// ---- the evaluator -----------------------------------------------------------------------------
// The helpers below are HWY_INLINE: EvaluatePlan runs them per node per tile, and inlined they
// compile to the single loop nest they were written as.

// Node k's tile buffer, as float lanes or as int32 lanes.
HWY_INLINE float* fbuf(float* lanes, size_t k) { return lanes + k * static_cast<size_t>(kTile); }
HWY_INLINE int32_t* ibuf(float* lanes, size_t k) {
  return reinterpret_cast<int32_t*>(lanes + k * static_cast<size_t>(kTile));
}

// One tile: `nrow` rows of `len` elements from element j0 of the innermost axis; each node's
// buffer holds `padded` lanes of it (the rows back to back, rounded up to whole vectors).
struct Tile {
  int64_t j0;
  int64_t len;
  int64_t nrow;
  int64_t padded;
};

// The element offset of the tile's first element at index `idx` of the outer axes, for
// per-axis strides `stride` (an operand's, an iota's coefficients or the destination's).
HWY_INLINE int64_t tile_offset(const SmallVec& stride, const SmallVec& idx, int nd, int64_t j0) {
  int64_t off = j0 * stride[nd - 1];
  for (int d = 0; d < nd - 1; ++d) off += idx[d] * stride[d];
  return off;
}

// Constants never change: fills their buffers once, `fill` lanes each.
template <class DF>
HWY_INLINE void fill_constants(DF df, const plan::Plan& p, float* lanes, int64_t fill) {
  const hn::RebindToSigned<DF> di;
  const int64_t N = static_cast<int64_t>(hn::Lanes(df));
  for (size_t k = 0; k < p.nodes.size(); ++k) {
    const plan::Node& n = p.nodes[k];
    if (n.op != OpCode::kConst) continue;
    if (n.flt) {
      for (int64_t j = 0; j < fill; j += N) hn::Store(hn::Set(df, n.fval), df, fbuf(lanes, k) + j);
    } else {
      for (int64_t j = 0; j < fill; j += N) hn::Store(hn::Set(di, n.ival), di, ibuf(lanes, k) + j);
    }
  }
}

// Loads node k's tile from its ref, row by row.
template <class DF>
HWY_INLINE void load_tile(DF df, const plan::Plan& p, const plan::Node& n, size_t k, int nd,
                          const SmallVec& idx, const Tile& t, bool prefetch_rows, float* lanes) {
  const hn::RebindToSigned<DF> di;
  const int64_t item = itemsize(n.dtype);
  const std::byte* base = n.data + tile_offset(n.stride, idx, nd, t.j0) * item;
  const int64_t s = n.stride[nd - 1];
  const int64_t row_step = nd >= 2 ? n.stride[nd - 2] * item : 0;
  // A row of a strided view (a block read in place) is a short run far from the previous one,
  // which the hardware prefetchers barely follow: ask for the next tile's rows while these are
  // read. Rows back to back (a scratch, a temporary, a whole block) are one run they follow.
  if (prefetch_rows && s == 1 && row_step != p.extent[nd - 1] * item) {
    const int64_t ahead = std::min(t.nrow, p.extent[nd - 2] - idx[nd - 2] - t.nrow);
    for (int64_t r = 0; r < ahead; ++r) {
      const std::byte* row = base + (t.nrow + r) * row_step;
      for (int64_t b = 0; b < t.len * item; b += 64) hwy::Prefetch(row + b);
    }
  }
  for (int64_t r = 0; r < t.nrow; ++r) {
    if (n.flt)
      load_f(df, n.dtype, base + r * row_step, s, t.len, fbuf(lanes, k) + r * t.len);
    else
      load_i(di, n.dtype, base + r * row_step, s, t.len, ibuf(lanes, k) + r * t.len);
  }
}

// Iota node k's tile; `iota_f` and `iota_i` hold the lane indices 0..N-1.
template <class DF, class VF, class VI>
HWY_INLINE void iota_tile(DF df, const plan::Node& n, size_t k, int nd, const SmallVec& idx,
                          const Tile& t, VF iota_f, VI iota_i, float* lanes) {
  const hn::RebindToSigned<DF> di;
  const int64_t N = static_cast<int64_t>(hn::Lanes(df));
  const int64_t base = tile_offset(n.stride, idx, nd, t.j0);
  const int64_t c = n.stride[nd - 1];
  // value(j) = base + c * j, with the lane offset j = j0 + vector start + lane.
  if (n.flt) {
    const auto step = hn::Set(df, static_cast<float>(c));
    const auto lanes_c = hn::Mul(iota_f, step);
    for (int64_t j = 0; j < t.padded; j += N) {
      const auto v = hn::Add(lanes_c, hn::Set(df, static_cast<float>(base + c * j)));
      hn::Store(v, df, fbuf(lanes, k) + j);
    }
  } else {
    const auto lanes_c = hn::Mul(iota_i, hn::Set(di, static_cast<int32_t>(c)));
    for (int64_t j = 0; j < t.padded; j += N) {
      const auto v = hn::Add(lanes_c, hn::Set(di, static_cast<int32_t>(base + c * j)));
      hn::Store(v, di, ibuf(lanes, k) + j);
    }
  }
}

// int32 lanes -> float lanes; `uns`: the lanes hold uint32 bits (converted as two exact 16-bit
// halves, so that the one rounding is the sum's).
template <class DF>
HWY_INLINE hn::Vec<DF> int_to_float(DF df, hn::Vec<hn::RebindToSigned<DF>> v, bool uns) {
  const hn::RebindToSigned<DF> di;
  if (!uns) return hn::ConvertTo(df, v);
  const auto hi = hn::ConvertTo(
      df, hn::BitCast(di, hn::ShiftRight<16>(hn::BitCast(hn::RebindToUnsigned<DF>(), v))));
  const auto lo = hn::ConvertTo(df, hn::And(v, hn::Set(di, 0xffff)));
  return hn::MulAdd(hi, hn::Set(df, 65536.0f), lo);
}

// float lanes -> the lanes of integer dtype `dt`: truncation toward zero, saturated to the
// dtype's range, NaN -> 0 (XLA's conversion); bool is x != 0. uint32 goes through the signed
// range by an offset of 2^31.
template <class DF>
HWY_INLINE hn::Vec<hn::RebindToSigned<DF>> float_to_int(DF df, hn::Vec<DF> v, DType dt) {
  const hn::RebindToSigned<DF> di;
  if (dt == DType::kBool) {
    return hn::IfThenElseZero(hn::RebindMask(di, hn::Not(hn::Eq(v, hn::Zero(df)))), hn::Set(di, 1));
  }
  const auto nan = hn::RebindMask(di, hn::IsNaN(v));
  if (dt == DType::kUInt32) {
    const auto two31 = hn::Set(df, 2147483648.0f);
    const auto lo = hn::Max(v, hn::Zero(df));
    const auto big = hn::Ge(lo, two31);
    const auto r = hn::ConvertTo(di, hn::IfThenElse(big, hn::Sub(lo, two31), lo));
    const auto off = hn::IfThenElseZero(hn::RebindMask(di, big),
                                        hn::Set(di, std::numeric_limits<int32_t>::min()));
    return hn::IfThenZeroElse(nan, hn::Add(r, off));
  }
  float lo = 0, hi = 0;
  switch (dt) {
    case DType::kInt8:
      lo = -128.0f, hi = 127.0f;
      break;
    case DType::kInt16:
      lo = -32768.0f, hi = 32767.0f;
      break;
    case DType::kUInt8:
      hi = 255.0f;
      break;
    case DType::kUInt16:
      hi = 65535.0f;
      break;
    case DType::kInt4:
      lo = -8.0f, hi = 7.0f;
      break;
    case DType::kUInt4:
      hi = 15.0f;
      break;
    case DType::kInt2:
      lo = -2.0f, hi = 1.0f;
      break;
    case DType::kUInt2:
      hi = 3.0f;
      break;
    default:  // int32: ConvertTo saturates
      return hn::IfThenZeroElse(nan, hn::ConvertTo(di, v));
  }
  return hn::IfThenZeroElse(
      nan, hn::ConvertTo(di, hn::Min(hn::Max(v, hn::Set(df, lo)), hn::Set(df, hi))));
}

// Conversion node k's tile, from its operand's (the node's rounding to its dtype follows).
template <class DF>
HWY_INLINE void convert_tile(DF df, const plan::Plan& p, const plan::Node& n, size_t k,
                             int64_t padded, float* lanes) {
  const hn::RebindToSigned<DF> di;
  const int64_t N = static_cast<int64_t>(hn::Lanes(df));
  const plan::Node& src = p.nodes[static_cast<size_t>(n.a)];
  const size_t a = static_cast<size_t>(n.a);
  if (n.flt && src.flt) {
    map1(df, fbuf(lanes, a), fbuf(lanes, k), padded, [](auto v) HWY_ATTR { return v; });
  } else if (n.flt) {
    const bool uns = src.dtype == DType::kUInt32;
    for (int64_t j = 0; j < padded; j += N) {
      hn::Store(int_to_float(df, hn::Load(di, ibuf(lanes, a) + j), uns), df, fbuf(lanes, k) + j);
    }
  } else if (src.flt) {
    for (int64_t j = 0; j < padded; j += N) {
      hn::Store(float_to_int(df, hn::Load(df, fbuf(lanes, a) + j), n.dtype), di,
                ibuf(lanes, k) + j);
    }
  } else {
    map1(di, ibuf(lanes, a), ibuf(lanes, k), padded, [](auto v) HWY_ATTR { return v; });
  }
}

// Node k's tile for a comparison, a select, or a binary or unary op, from its operands'.
template <class DF>
HWY_INLINE void op_tile(DF df, const plan::Plan& p, const plan::Node& n, size_t k, int64_t padded,
                        float* lanes) {
  const hn::RebindToSigned<DF> di;
  const size_t a = static_cast<size_t>(n.a);
  switch (n.op) {
    case OpCode::kEq:
    case OpCode::kNe:
    case OpCode::kLt:
    case OpCode::kLe:
    case OpCode::kGt:
    case OpCode::kGe: {
      const size_t b = static_cast<size_t>(n.b);
      if (p.nodes[a].flt)
        Compare(df, di, n.op, fbuf(lanes, a), fbuf(lanes, b), ibuf(lanes, k), padded);
      else
        Compare(di, di, n.op, ibuf(lanes, a), ibuf(lanes, b), ibuf(lanes, k), padded,
                p.nodes[a].dtype == DType::kUInt32);
      break;
    }
    case OpCode::kSelect: {
      const size_t b = static_cast<size_t>(n.b);
      const int32_t* c = ibuf(lanes, static_cast<size_t>(n.c));
      if (n.flt)
        Select(df, di, c, fbuf(lanes, a), fbuf(lanes, b), fbuf(lanes, k), padded);
      else
        Select(di, di, c, ibuf(lanes, a), ibuf(lanes, b), ibuf(lanes, k), padded);
      break;
    }
    case OpCode::kBitcast:
      Bitcast(p.nodes[a].dtype, p.nodes[a].flt, fbuf(lanes, a), n.dtype, n.flt, fbuf(lanes, k),
              padded);
      break;
    default:
      if (n.b >= 0) {
        const size_t b = static_cast<size_t>(n.b);
        if (n.flt)
          BinaryF(df, n.op, fbuf(lanes, a), fbuf(lanes, b), fbuf(lanes, k), padded);
        else
          BinaryI(di, n.op, n.dtype, ibuf(lanes, a), ibuf(lanes, b), ibuf(lanes, k), padded);
      } else {
        if (n.flt)
          UnaryF(df, n.op, n.iconst, fbuf(lanes, a), fbuf(lanes, k), padded);
        else
          UnaryI(di, n.op, n.dtype, n.iconst, ibuf(lanes, a), ibuf(lanes, k), padded);
      }
      break;
  }
}

// Node k's tile: loads read their ref, constants are already filled, and every other node is
// computed from its operands and then rounded to its own dtype.
template <class DF, class VF, class VI>
HWY_INLINE void node_tile(DF df, const plan::Plan& p, size_t k, int nd, const SmallVec& idx,
                          const Tile& t, bool prefetch_rows, VF iota_f, VI iota_i, float* lanes) {
  const hn::RebindToSigned<DF> di;
  const plan::Node& n = p.nodes[k];
  switch (n.op) {
    case OpCode::kConst:
      return;
    case OpCode::kLoad:
      load_tile(df, p, n, k, nd, idx, t, prefetch_rows, lanes);
      return;
    case OpCode::kIota:
      iota_tile(df, n, k, nd, idx, t, iota_f, iota_i, lanes);
      break;
    case OpCode::kConvert:
      convert_tile(df, p, n, k, t.padded, lanes);
      break;
    default:
      op_tile(df, p, n, k, t.padded, lanes);
      break;
  }
  if (n.dtype == DType::kBFloat16)
    round_bf16(df, fbuf(lanes, k), t.padded);
  else if (n.flt && n.dtype != DType::kFloat32)
    round_narrow(df, n.dtype, fbuf(lanes, k), t.padded);
  else if (!n.flt)
    round_int(di, n.dtype, ibuf(lanes, k), t.padded);
}

// Stores the tile of node `last` (the result) into the destination, row by row.
template <class DF>
HWY_INLINE void store_tile(DF df, const plan::Plan& p, size_t last, int nd, const SmallVec& idx,
                           const Tile& t, float* lanes) {
  const hn::RebindToSigned<DF> di;
  const int64_t item = itemsize(p.dst_dtype);
  std::byte* dst = p.dst + tile_offset(p.dst_stride, idx, nd, t.j0) * item;
  const int64_t s = p.dst_stride[nd - 1];
  const int64_t row_step = nd >= 2 ? p.dst_stride[nd - 2] * item : 0;
  for (int64_t r = 0; r < t.nrow; ++r) {
    if (is_floating(p.dst_dtype))
      store_f(df, p.dst_dtype, fbuf(lanes, last) + r * t.len, dst + r * row_step, s, t.len,
              p.stream);
    else
      store_i(di, p.dst_dtype, ibuf(lanes, last) + r * t.len, dst + r * row_step, s, t.len,
              p.stream);
  }
  if (p.prefetch != nullptr) drain_prefetch(*p.prefetch, t.nrow * t.len * item);
}

// Evaluates `p` into its destination: on the fused path where it applies, else tile by tile
// through the per-node buffers at `lanes`.
void EvaluatePlan(const plan::Plan& p, float* lanes) {
  if (EvaluateFused(p)) return;
  if (lanes == nullptr) lanes = lane_buffers(p.nodes.size());
  const hn::ScalableTag<float> df;
  const hn::RebindToSigned<decltype(df)> di;
  const int64_t N = static_cast<int64_t>(hn::Lanes(df));
  const int nd = p.extent.size();
  const int64_t inner = p.extent[nd - 1];
  const size_t nn = p.nodes.size();

  // Short rows (a block viewed in place: 128 elements a row, a large stride between rows) are
  // batched, several rows to a tile, so that the per-tile work of the interpreter is paid once
  // for all of them. Rows then sit back to back in the lane buffers, which needs whole vectors
  // per row, and no iota (whose value depends on the row).
  bool has_iota = false;
  for (const plan::Node& n : p.nodes) has_iota = has_iota || n.op == OpCode::kIota;
  const int64_t max_rows =
      nd >= 2 && inner % N == 0 && 2 * inner <= kTile && !has_iota ? kTile / inner : 1;
  // Constants are filled as far as a tile reaches.
  fill_constants(df, p, lanes, max_rows > 1 ? kTile : (std::min(kTile, inner) + N - 1) / N * N);
  // Lane indices 0..N-1, built once (Iota is not free on every target).
  const auto iota_f = hn::Iota(df, 0.0f);
  const auto iota_i = hn::Iota(di, 0);

  SmallVec idx(nd, 0);
  const bool prefetch_rows = nd >= 2 && inner <= kTile;
  for (;;) {
    const int64_t nrow = max_rows > 1 ? std::min(max_rows, p.extent[nd - 2] - idx[nd - 2]) : 1;
    for (int64_t j0 = 0; j0 < inner; j0 += kTile) {
      const int64_t len = std::min(kTile, inner - j0);
      const Tile t{j0, len, nrow, nrow * ((len + N - 1) / N * N)};
      for (size_t k = 0; k < nn; ++k) {
        node_tile(df, p, k, nd, idx, t, prefetch_rows, iota_f, iota_i, lanes);
      }
      store_tile(df, p, nn - 1, nd, idx, t, lanes);
    }
    if (nrow > 1) idx[nd - 2] += nrow - 1;  // the rows of this tile
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
HWY_EXPORT(FusedBinaryF32);
HWY_EXPORT(FusedIotaF32);

namespace {
using EvaluateFn = void (*)(const plan::Plan&, float*);
// The resolved target's evaluator. HWY_DYNAMIC_DISPATCH looks the target up on every call, which
// costs about as much as evaluating a small tile, so it is resolved once (and again after
// set_vector_targets_for_test). Relaxed is enough: any thread that sees null resolves the same
// pointer itself.
std::atomic<EvaluateFn> g_evaluate{nullptr};
using FusedBinaryFn = bool (*)(const FusedDst&, OpCode, const FusedOperand&, const FusedOperand&);
std::atomic<FusedBinaryFn> g_fused_binary{nullptr};
using FusedIotaFn = bool (*)(const FusedDst&, const int64_t*, OpCode, float, bool);
std::atomic<FusedIotaFn> g_fused_iota{nullptr};

// `slot`'s function, resolved by `pick` (a HWY_DYNAMIC_DISPATCH) on first use.
template <class F, class Pick>
F resolved(std::atomic<F>& slot, Pick pick) {
  F f = slot.load(std::memory_order_relaxed);
  if (f == nullptr) {
    apply_simd_target_override();
    hwy::GetChosenTarget().Update(hwy::SupportedTargets());
    f = pick();
    slot.store(f, std::memory_order_relaxed);
  }
  return f;
}
}  // namespace

void run_plan(const plan::Plan& p, float* lanes) {
  resolved(g_evaluate, [] { return &HWY_DYNAMIC_DISPATCH(EvaluatePlan); })(p, lanes);
}

bool run_fused_binary(const FusedDst& d, OpCode op, const FusedOperand& a, const FusedOperand& b) {
  const auto f = resolved(g_fused_binary, [] { return &HWY_DYNAMIC_DISPATCH(FusedBinaryF32); });
  return f(d, op, a, b);
}

bool run_fused_iota(const FusedDst& d, const int64_t* coef, OpCode op, float value,
                    bool iota_first) {
  const auto f = resolved(g_fused_iota, [] { return &HWY_DYNAMIC_DISPATCH(FusedIotaF32); });
  return f(d, coef, op, value, iota_first);
}

std::vector<std::pair<int64_t, std::string>> vector_targets() {
  std::vector<std::pair<int64_t, std::string>> out;
  for (int64_t t : hwy::SupportedAndGeneratedTargets()) out.emplace_back(t, hwy::TargetName(t));
  return out;
}

void set_vector_targets_for_test(int64_t targets) {
  hwy::SetSupportedTargetsForTest(targets);
  hwy::GetChosenTarget().Update(hwy::SupportedTargets());
  g_evaluate.store(nullptr, std::memory_order_relaxed);
  g_fused_binary.store(nullptr, std::memory_order_relaxed);
  g_fused_iota.store(nullptr, std::memory_order_relaxed);
  reset_reduce_dispatch();
}

}  // namespace tessera::detail
#endif  // HWY_ONCE
