// The native VPU's planner: turns an ExprProgram into evaluator plans (vector_plan.h) and runs
// them. Elementwise programs go to run_plan (vector_kernels.cc) as they are. Programs with
// non-elementwise nodes (reductions, transpose, reshape, roll) are lowered first: each such node
// evaluates its operand subtree into a temporary, computes itself into a second temporary, and
// is replaced by a load of that (plus a conversion back to its dtype), so the elementwise pass
// only ever sees loads. Temporaries are taken from the core's VMEM above vmem_top inside a
// kernel (and counted against its budget), from the heap outside.

#include "native/vector_evaluate.h"

#include <fmt/format.h>

#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <string>
#include <vector>

#include "native/lane_scans.h"
#include "native/native_engine.h"
#include "native/vector_plan.h"
#include "runtime/context.h"
#include "runtime/engine.h"
#include "runtime/events.h"
#include "runtime/step_hints.h"
#include "tessera/detail/expr_program.h"
#include "tessera/detail/runtime.h"
#include "tessera/dma.h"
#include "tessera/ref.h"
#include "tessera/vector_reduce.h"

namespace tessera::detail {

namespace {

std::string shape_str(const Shape& s) { return s.to_string(); }

// Per-axis strides of a leaf of `leaf` shape broadcast into `dst`; throws when it cannot.
SmallVec broadcast_strides(const Shape& leaf, const SmallVec* strides, const Shape& dst,
                           std::source_location where, const char* what) {
  const int r = leaf.rank();
  const int R = dst.rank();
  auto fail = [&] {
    raise(ErrorKind::kShapeMismatch, "assignment to a Ref", where,
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

thread_local std::vector<float> t_lanes;

/// The temporaries of one assignment. Inside a kernel: pushed on the core's stack and released
/// when the assignment ends (also on error); outside: heap blocks.
class Temporaries {
 public:
  using Mark = ArenaStack::Mark;

  /// `on_stack`: inside a kernel, take the temporaries from the core's stack (counted against
  /// its VMEM budget); otherwise, and outside a kernel, from the heap.
  explicit Temporaries(bool on_stack = true) : ctx_(on_stack ? current_context() : nullptr) {
    if (ctx_ != nullptr) saved_ = ctx_->stack.mark();
  }
  ~Temporaries() {
    if (ctx_ != nullptr) ctx_->stack.release(saved_);
  }
  Temporaries(const Temporaries&) = delete;
  Temporaries& operator=(const Temporaries&) = delete;

  /// `bytes` of 64-byte aligned memory; throws kCapacityExceeded over the kernel's VMEM budget.
  void* allocate(int64_t bytes, const ExprNode& node, const char* what, const Shape& shape) {
    if (ctx_ == nullptr) {
      const size_t n = static_cast<size_t>((std::max<int64_t>(bytes, 1) + 63) / 64 * 64);
      heap_.emplace_back(static_cast<std::byte*>(std::aligned_alloc(64, n)));
      if (!heap_.back()) throw std::bad_alloc();
      return heap_.back().get();
    }
    return ctx_->stack.push(
        MemorySpace::VMEM, bytes, StackUse::kTemporary, "an expression temporary",
        [&] {
          return fmt::format("(for {} of {}: a {} value in 32-bit lanes)", what, op_call(node.op),
                             shape.to_string());
        },
        op_call(node.op), node.where);
  }
  /// A mark to release back to (stack order): temporaries above it are dropped.
  Mark mark() const { return ctx_ != nullptr ? ctx_->stack.mark() : Mark{}; }
  void release(const Mark& m) {
    if (ctx_ != nullptr) ctx_->stack.release(m);
  }

 private:
  struct Free {
    void operator()(std::byte* p) const noexcept { std::free(p); }
  };
  CoreContext* ctx_;
  Mark saved_{};
  std::vector<std::unique_ptr<std::byte, Free>> heap_;
};

// The dtype of a node's 32-bit lanes: float32 for floats, uint32 for uint32 (whose reductions
// compare unsigned), int32 for the other integers and bool.
DType lanes_dtype(DType d) {
  return is_floating(d) ? DType::kFloat32 : d == DType::kUInt32 ? DType::kUInt32 : DType::kInt32;
}

/// The strides of a broadcast of an operand with `in_strides` (lax.broadcast_in_dim): operand axis
/// i becomes result axis node.strides[i]; axes it stretches (extent 1) and new axes step 0.
SmallVec broadcast_view_strides(const ExprNode& node, const SmallVec& in_strides) {
  SmallVec st(node.out_shape.rank(), 0);
  for (int i = 0; i < node.shape.rank(); ++i) {
    const int o = static_cast<int>(node.strides[i]);
    if (node.shape[i] == node.out_shape[o]) st[o] = in_strides[i];
  }
  return st;
}

/// A transpose or a broadcast of a plain load is a view, with no temporary: appends the viewed
/// load to `out` and returns true; false when `node` has to be computed. (A reshape of a
/// row-major load is relabelled, as any reshape of such an elementwise program:
/// lower_reshape_as_relabel.)
bool lower_as_view(const ExprNode& node, const std::vector<ExprNode>& sub,
                   std::vector<ExprNode>& out) {
  const Shape& out_shape = node.out_shape;
  const bool view = sub.size() == 1 && sub[0].op == OpCode::kLoad &&
                    (node.op == OpCode::kTranspose || node.op == OpCode::kBroadcast);
  if (!view) return false;
  ExprNode v = sub[0];
  if (node.op == OpCode::kTranspose) {
    SmallVec st(out_shape.rank(), 0);
    for (int i = 0; i < out_shape.rank(); ++i) st[i] = v.strides[static_cast<int>(node.strides[i])];
    v.strides = std::move(st);
  } else {
    v.strides = broadcast_view_strides(node, v.strides);
  }
  v.shape = out_shape;
  out.push_back(std::move(v));
  return true;
}

/// A reshape of an elementwise program whose leaves are row-major loads of the operand's own shape
/// (or scalars) is the same program read in the new shape: both shapes number their elements in
/// the same row-major order, so each load is relabelled and the program appended to `out`, with
/// no temporary: `k = k_vmem[...].astype(f32).reshape(-1, d)` (Pallas' paged attention) converts
/// once, into the destination, instead of into a temporary it is then copied out of. False when
/// `node` is not such a reshape.
bool lower_reshape_as_relabel(const ExprNode& node, std::vector<ExprNode>& sub,
                              std::vector<ExprNode>& out) {
  if (node.op != OpCode::kReshape || sub.empty() || sub.back().dtype != node.dtype) return false;
  auto own_shape = [&](const ExprNode& e) { return e.shape.rank() > 0; };
  for (const ExprNode& e : sub) {
    if (e.op == OpCode::kLoad) {
      if (own_shape(e) && (e.shape != node.shape || !is_row_major(e.shape, e.strides))) {
        return false;
      }
    } else if (e.op == OpCode::kConst) {
      if (own_shape(e) && e.shape != node.shape) return false;
    } else if (e.op == OpCode::kIota || is_non_elementwise(e.op)) {
      return false;  // an iota's values depend on the shape it is read in
    }
  }
  const int base = static_cast<int>(out.size());
  for (ExprNode& e : sub) {
    if ((e.op == OpCode::kLoad || e.op == OpCode::kConst) && own_shape(e)) {
      e.shape = node.out_shape;
      if (e.op == OpCode::kLoad) e.strides = row_major_strides(node.out_shape);
    }
    if (e.a >= 0) e.a += base;
    if (e.b >= 0) e.b += base;
    if (e.c >= 0) e.c += base;
    out.push_back(std::move(e));
  }
  return true;
}

/// Evaluates the operand program `sub` of `node` into `operand`, converted to 32-bit lanes of
/// dtype `lane`, contiguous in the operand's shape.
void evaluate_operand(const ExprNode& node, std::vector<ExprNode> sub, DType lane, void* operand) {
  const Shape& in_shape = node.shape;
  if (sub.back().dtype != lane) {
    ExprNode c;
    c.op = OpCode::kConvert;
    c.dtype = lane;
    c.a = static_cast<int>(sub.size()) - 1;
    sub.push_back(std::move(c));
  }
  evaluate_flat(sub, node.where,
                RawRef{operand, lane, MemorySpace::VMEM, in_shape, row_major_strides(in_shape)});
}

/// Computes a transpose, roll or reduction `node` from its operand's lanes (dtype `lane`) into
/// `result`, laid out with `result_strides`.
void compute_node(const ExprNode& node, DType lane, void* operand, void* result,
                  const SmallVec& result_strides) {
  const Shape& in_shape = node.shape;
  const Shape& out_shape = node.out_shape;
  switch (node.op) {
    case OpCode::kTranspose: {
      // A strided copy through the DMA engine: dst[i...] = src[perm(i)...].
      SmallVec in_st = row_major_strides(in_shape);
      SmallVec st(out_shape.rank(), 0);
      for (int i = 0; i < out_shape.rank(); ++i) st[i] = in_st[static_cast<int>(node.strides[i])];
      dma_copy(RawRef{operand, lane, MemorySpace::VMEM, out_shape, st},
               RawRef{result, lane, MemorySpace::VMEM, out_shape, result_strides}, op_call(node.op),
               node.where);
      break;
    }
    case OpCode::kRoll:
      roll_lanes(node, operand, result);
      break;
    case OpCode::kCumSum:
      cumsum_lanes(node, lane == DType::kFloat32, operand, result);
      break;
    default: {
      SmallVec ext;
      SmallVec red;
      for (int i = 0; i < in_shape.rank(); ++i) {
        ext.push_back(in_shape[i]);
        red.push_back((node.iconst >> i) & 1);
      }
      run_reduce(node.op, lane, operand, result, ext, red);
      break;
    }
  }
}

/// Appends the load of `node`'s computed value (lanes of dtype `lane` at `data`), and a
/// conversion back to the node's dtype where the lanes' dtype differs.
void append_computed_load(const ExprNode& node, DType lane, void* data, SmallVec strides,
                          std::vector<ExprNode>& out) {
  ExprNode ld;
  ld.op = OpCode::kLoad;
  ld.dtype = lane;
  ld.data = data;
  ld.space = MemorySpace::VMEM;
  ld.shape = node.out_shape;
  ld.strides = std::move(strides);
  out.push_back(std::move(ld));
  if (out.back().dtype != node.dtype) {
    ExprNode c;
    c.op = OpCode::kConvert;
    c.dtype = node.dtype;
    c.a = static_cast<int>(out.size()) - 1;
    out.push_back(std::move(c));
  }
}

/// Computes non-elementwise node `node` from its (already lowered) operand program `sub` and
/// returns the load node (and maybe a conversion) that replaces it.
void lower_node(const ExprNode& node, std::vector<ExprNode> sub, Temporaries& temps,
                std::vector<ExprNode>& out) {
  if (node.op == OpCode::kReshape) {
    if (CoreContext* ctx = current_context()) {
      ctx->engine->check_reshape(*ctx, node.shape, node.out_shape, node.where);
    }
  }
  if (lower_as_view(node, sub, out) || lower_reshape_as_relabel(node, sub, out)) return;
  const Shape& in_shape = node.shape;
  const Shape& out_shape = node.out_shape;

  // The operand, in 32-bit lanes, into temporary 1 (above the result's temporary 2, so that it
  // can be released as soon as the result is computed).
  const DType lane = lanes_dtype(sub.back().dtype);
  const bool arg = node.op == OpCode::kArgMax || node.op == OpCode::kArgMin;
  const DType res_lane = arg ? DType::kInt32 : lanes_dtype(node.dtype);
  // Same bytes, new shape (reshape) or strides (broadcast).
  const bool in_place = node.op == OpCode::kReshape || node.op == OpCode::kBroadcast;
  void* result = nullptr;
  if (!in_place) {
    result = temps.allocate(out_shape.size() * 4, node, "the result", out_shape);
  }
  const Temporaries::Mark mark = temps.mark();
  void* operand = nullptr;
  if (!in_place && sub.size() == 1 && sub[0].op == OpCode::kLoad && sub[0].dtype == lane &&
      sub[0].shape == in_shape && is_row_major(sub[0].shape, sub[0].strides)) {
    // A reduction, roll or running sum of a ref (or a block of one) of 32-bit lanes laid out
    // row-major reads it where it lies; compute_node only reads its operand. Copying it first
    // cost as much as the reduction itself (docs/performance.md, "Softmax: row reductions and
    // exp").
    operand = const_cast<void*>(sub[0].data);
  } else {
    operand = temps.allocate(in_shape.size() * 4, node, "the operand", in_shape);
    evaluate_operand(node, std::move(sub), lane, operand);
  }

  SmallVec load_strides = node.op == OpCode::kBroadcast
                              ? broadcast_view_strides(node, row_major_strides(in_shape))
                              : row_major_strides(out_shape);
  if (in_place) {
    result = operand;
  } else {
    compute_node(node, lane, operand, result, load_strides);
    temps.release(mark);
  }
  append_computed_load(node, in_place ? lane : res_lane, result, std::move(load_strides), out);
}

/// Replaces every non-elementwise node of `nodes` by a load of its computed temporary.
std::vector<ExprNode> lower(const std::vector<ExprNode>& nodes, Temporaries& temps) {
  std::vector<ExprNode> out;
  out.reserve(nodes.size() + 2);  // a lowered node may add a conversion
  std::vector<int> map(nodes.size(), -1);
  auto remap = [&](int i) { return i < 0 ? i : map[static_cast<size_t>(i)]; };
  for (size_t k = 0; k < nodes.size(); ++k) {
    const ExprNode& e = nodes[k];
    if (!is_non_elementwise(e.op)) {
      ExprNode n = e;
      n.a = remap(e.a);
      n.b = remap(e.b);
      n.c = remap(e.c);
      out.push_back(std::move(n));
    } else {
      // The operand's subtree is nodes sub_begin..a, already lowered to out[base..end).
      const int base = map[static_cast<size_t>(e.sub_begin)];
      std::vector<ExprNode> sub(out.begin() + base, out.end());
      out.resize(static_cast<size_t>(base));
      for (ExprNode& s : sub) {
        if (s.a >= 0) s.a -= base;
        if (s.b >= 0) s.b -= base;
        if (s.c >= 0) s.c -= base;
      }
      lower_node(e, std::move(sub), temps, out);
    }
    map[k] = static_cast<int>(out.size()) - 1;
  }
  return out;
}

/// A constant's value in its node's lanes, rounded to its dtype; a full(...) must broadcast.
inline void plan_const(const ExprNode& e, plan::Node& n, const Shape& D,
                       std::source_location where) {
  if (e.shape.rank() > 0) broadcast_strides(e.shape, nullptr, D, where, "a full(...)");
  const_lanes(e.dtype, e.fconst, e.iconst, n);
}

/// An iota's per-axis coefficients in the destination's axes: 1 along its dimension where that
/// is not broadcast, else 0.
inline void plan_iota(const ExprNode& e, plan::Node& n, const Shape& D,
                      std::source_location where) {
  if (e.axis < 0 || e.axis >= e.shape.rank()) {
    raise(ErrorKind::kInvalidArgument, "iota", where,
          fmt::format("dimension {} is outside 0..{} for an iota of shape {}", e.axis,
                      e.shape.rank() - 1, shape_str(e.shape)));
  }
  broadcast_strides(e.shape, nullptr, D, where, "an iota/arange");
  const int R = D.rank();
  n.stride = SmallVec(R, 0);
  const int d = R - e.shape.rank() + e.axis;
  if (e.shape[e.axis] == D[d] && D[d] != 1) n.stride[d] = 1;
}

/// Appends the plan node of every expression node, each leaf broadcast into the destination's
/// axes; true when a load overlaps the destination (`dspan`) at a different position. With
/// `cap`, records each load's and constant's node and each load's span there.
inline bool plan_nodes(const std::vector<ExprNode>& nodes, const RawRef& dst, const Span& dspan,
                       std::source_location where, plan::Plan& p, CapturedPlan* cap) {
  const Shape& D = dst.shape;
  bool overlap = false;
  for (const ExprNode& e : nodes) {
    plan::Node& n = p.nodes.emplace_back();
    n.op = e.op;
    n.dtype = e.dtype;
    n.flt = is_floating(e.dtype);
    n.a = e.a;
    n.b = e.b;
    n.c = e.c;
    n.iconst = e.iconst;
    switch (e.op) {
      case OpCode::kLoad: {
        n.data = static_cast<const std::byte*>(e.data);
        n.stride = broadcast_strides(e.shape, &e.strides, D, where, "an operand ref");
        const auto s = span_of(e.data, D, n.stride, itemsize(e.dtype));
        const bool same_layout = n.stride == dst.strides && e.dtype == dst.dtype;
        if (ranges_overlap(s.first, s.second, dspan.first, dspan.second) &&
            !(e.data == dst.data && same_layout)) {
          overlap = true;
        }
        if (cap != nullptr) {
          cap->loads.push_back(static_cast<int>(p.nodes.size()) - 1);
          cap->spans.push_back({s.first - n.data, s.second, same_layout});
        }
        break;
      }
      case OpCode::kConst:
        plan_const(e, n, D, where);
        if (cap != nullptr) cap->consts.push_back(static_cast<int>(p.nodes.size()) - 1);
        break;
      case OpCode::kIota:
        plan_iota(e, n, D, where);
        break;
      default:
        break;
    }
  }
  return overlap;
}

/// Evaluates `nodes` into a contiguous temporary, then copies that to `dst`, so that no element
/// of an operand that overlaps the destination at a different position is overwritten before
/// it is read.
void evaluate_through_temporary(const std::vector<ExprNode>& nodes, std::source_location where,
                                const RawRef& dst) {
  const Shape& D = dst.shape;
  const size_t bytes = static_cast<size_t>(D.size() * itemsize(dst.dtype));
  std::vector<std::byte> tmp(bytes + 64);
  void* aligned = tmp.data();
  size_t space = tmp.size();
  std::align(64, bytes, aligned, space);
  RawRef t{aligned, dst.dtype, MemorySpace::VMEM, D, row_major_strides(D)};
  evaluate_flat(nodes, where, t);
  dma_copy(t, dst, "assignment to a Ref", where);
}

/// Coalesces the axes of `D` into `p.extent`, with `dst_strides` and the strides of the plan's
/// loads and iotas to match: drops unit axes, and merges an axis into the group outside it when
/// every stride vector (destination, loads, iota coefficients) is contiguous across the pair:
/// the outer stride equals the inner stride times the inner extent.
inline void coalesce_axes(const Shape& D, SmallVec& dst_strides, plan::Plan& p) {
  auto for_each_row = [&](auto&& fn) {
    fn(dst_strides);
    for (auto& n : p.nodes) {
      if (n.op == OpCode::kLoad || n.op == OpCode::kIota) fn(n.stride);
    }
  };
  SmallVec ext;
  int groups = 0;      // coalesced axes so far
  int last_kept = -1;  // original axis of the innermost member of the last group
  for (int d = 0; d < D.rank(); ++d) {
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
}

}  // namespace

void const_lanes(DType dtype, double f, int64_t i, plan::Node& n) {
  if (n.flt) {
    const auto v = static_cast<float>(f);
    switch (dtype) {
      case DType::kBFloat16:
        n.fval = bfloat16(v);
        break;
      case DType::kFloat16:
        n.fval = float16(v);
        break;
      case DType::kFloat8E4M3FN:
        n.fval = float8_e4m3fn(v);
        break;
      case DType::kFloat8E5M2:
        n.fval = float8_e5m2(v);
        break;
      case DType::kFloat8E4M3B11FNUZ:
        n.fval = float8_e4m3b11fnuz(v);
        break;
      default:
        n.fval = v;
        break;
    }
    return;
  }
  // Wrapped to the dtype (two's complement), as the node's lanes hold it.
  switch (dtype) {
    case DType::kInt8:
      n.ival = static_cast<int8_t>(i);
      break;
    case DType::kInt16:
      n.ival = static_cast<int16_t>(i);
      break;
    case DType::kUInt8:
      n.ival = static_cast<uint8_t>(i);
      break;
    case DType::kUInt16:
      n.ival = static_cast<uint16_t>(i);
      break;
    case DType::kInt4:
      n.ival = int4(i);
      break;
    case DType::kUInt4:
      n.ival = uint4(i);
      break;
    case DType::kInt2:
      n.ival = int2(i);
      break;
    case DType::kUInt2:
      n.ival = uint2(i);
      break;
    case DType::kBool:
      n.ival = i != 0;
      break;
    default:  // int32; uint32 keeps its bits
      n.ival = static_cast<int32_t>(static_cast<uint32_t>(i));
      break;
  }
}

float* lane_buffers(size_t nodes) {
  // Highway's Load/Store need vector alignment; the 16 spare floats cover the alignment shift.
  const size_t need = nodes * static_cast<size_t>(plan::kTile) + 16;
  if (t_lanes.size() < need) t_lanes.resize(need);
  float* lanes = t_lanes.data();
  lanes += ((64 - reinterpret_cast<uintptr_t>(lanes) % 64) % 64) / sizeof(float);
  return lanes;
}

void evaluate_flat(const std::vector<ExprNode>& nodes, std::source_location where,
                   const RawRef& dst, CapturedPlan* capture) {
  if (nodes.empty()) return;
  const Shape& D = dst.shape;
  if (D.size() == 0) return;

  // Broadcast every leaf into the destination's axes. The plan lives in per-thread storage
  // that keeps its capacity, so a warm assignment allocates nothing.
  thread_local plan::Plan p;
  p.nodes.clear();
  if (capture != nullptr) {
    capture->ok = false;
    capture->loads.clear();
    capture->consts.clear();
    capture->spans.clear();
  }
  const Span dspan = span_of(dst.data, D, dst.strides, itemsize(dst.dtype));
  if (plan_nodes(nodes, dst, dspan, where, p, capture)) {
    evaluate_through_temporary(nodes, where, dst);
    return;
  }
  SmallVec dst_strides = dst.strides;
  coalesce_axes(D, dst_strides, p);
  p.dst = static_cast<std::byte*>(dst.data);
  p.dst_dtype = dst.dtype;
  p.dst_stride = std::move(dst_strides);
  apply_step_hints(dspan, p);
  if (capture != nullptr) {
    capture->plan = p;
    capture->dst = {dspan.first - p.dst, dspan.second, true};
    capture->ok = true;
  }
  run_plan(p);
}

void evaluate(const ExprProgram& prog, const RawRef& dst) {
  const VpuEvent vpu_event(prog, dst);
  // The engine's books first (the checked engine: reads of unwritten bytes, races with in-flight
  // copies), once per assignment and before any fast path.
  if (CoreContext* ctx = current_context()) ctx->engine->before_evaluate(*ctx, prog, dst);
  evaluate_nodes(prog.nodes, prog.where, dst, true);
}

namespace {
// `dst = jnp.max(x, axis, keepdims)` and the like, alone: a sum, max or min of a ref (or value)
// of 32-bit lanes laid out row-major, into a destination of the result's own shape and dtype,
// laid out row-major, that does not overlap it, is reduced straight into the destination. The
// general path lowers the program (a temporary for the result, vectors of nodes) and copies the
// result over: 0.41-0.44 us for the per-row max of an (8, 128) block against 0.19-0.21
// (docs/performance.md, "Small calls and lone reductions"). Same kernel, same bits.
bool reduce_into(const std::vector<ExprNode>& program, const RawRef& dst) {
  if (program.size() != 2) return false;
  const ExprNode& x = program[0];
  const ExprNode& r = program[1];
  if (x.op != OpCode::kLoad || r.a != 0 ||
      (r.op != OpCode::kReduceSum && r.op != OpCode::kReduceMax && r.op != OpCode::kReduceMin)) {
    return false;
  }
  const DType lane = lanes_dtype(x.dtype);
  if (x.dtype != lane || r.dtype != lane || dst.dtype != lane || x.shape != r.shape ||
      dst.shape != r.out_shape || !is_row_major(x.shape, x.strides) ||
      !is_row_major(dst.shape, dst.strides) || dst.shape.size() == 0) {
    return false;
  }
  if (ranges_overlap(static_cast<const std::byte*>(x.data), x.shape.size() * 4,
                     static_cast<const std::byte*>(dst.data), dst.shape.size() * 4)) {
    return false;
  }
  compute_node(r, lane, const_cast<void*>(x.data), dst.data, row_major_strides(r.out_shape));
  return true;
}
}  // namespace

void evaluate_nodes(const std::vector<ExprNode>& program, std::source_location where,
                    const RawRef& dst, bool stack_temporaries) {
  if (reduce_into(program, dst)) return;
  bool plain = true;
  for (const ExprNode& e : program) plain = plain && !is_non_elementwise(e.op);
  if (plain) return evaluate_flat(program, where, dst);
  // Lowering reads `program` and builds no ExprProgram at its level (one built meanwhile takes
  // the next level's storage: expr_rules.cc), so it is read where it lies.
  Temporaries temps(stack_temporaries);
  const std::vector<ExprNode> lowered = lower(program, temps);
  evaluate_flat(lowered, where, dst);
}

}  // namespace tessera::detail
