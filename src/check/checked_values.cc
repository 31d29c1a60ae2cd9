// The checked engine's definedness of computed values. A vector assignment whose loads are all
// defined marks its destination defined. One that reads undefined elements computes, element by
// element, which results depend on them — through elementwise ops, casts, `where` (only the
// selected operand, and the mask, count), transposes, reshapes and rolls — and marks exactly
// those undefined, with the statement as their origin. Undefined data is an error only where it
// matters: when it reaches a reduction here, and elsewhere a dot, a scalar read, an HBM output at
// the end of the kernel (checked_shadow.cc, checked.cc). So the masked store of a first visit,
// `out = where(mask, acc, out)`, is fine when every lane selects `acc`.
//
// The definedness of a node is computed by the native evaluator itself, on a program of the same
// shape over float lanes (1 defined, 0 not): loads become loads of their elements' definedness,
// elementwise ops take the minimum of their operands', `where(c, a, b)` selects between a's and
// b's by the real mask c (and takes c's), layout ops move the definedness as they move the values.
#include <fmt/format.h>

#include <algorithm>
#include <memory>
#include <mutex>
#include <vector>

#include "check/checked_state.h"
#include "core/messages.h"
#include "native/native_engine.h"
#include "tessera/error.h"

namespace tessera::detail {

namespace {

bool is_unary(OpCode op) { return op >= OpCode::kConvert && op <= OpCode::kIntegerPow; }
bool is_reduction(OpCode op) { return op >= OpCode::kReduceSum && op <= OpCode::kCumSum; }

class Definedness {
 public:
  Definedness(CoreContext& ctx, const std::vector<ExprNode>& nodes) : ctx_(ctx), nodes_(nodes) {
    // Programs list each node after its operands, so a node's subtree is the contiguous range
    // from the first node it depends on up to itself.
    start_.resize(nodes.size());
    for (size_t i = 0; i < nodes.size(); ++i) {
      const ExprNode& n = nodes[i];
      int s = static_cast<int>(i);
      for (int o : {n.a, n.b, n.c}) {
        if (o >= 0) s = std::min(s, start_[static_cast<size_t>(o)]);
      }
      if (n.sub_begin >= 0) s = std::min(s, start_[static_cast<size_t>(n.sub_begin)]);
      start_[i] = s;
    }
  }

  /// The definedness (1 or 0 per element) of node `root` evaluated at `shape`, row-major.
  std::vector<float> eval(int root, const Shape& shape, SourceLocation where) {
    std::vector<ExprNode> out;
    const int r = build(root, out, where);
    if (r != static_cast<int>(out.size()) - 1) out.push_back(convert(r));
    std::vector<float> d(static_cast<size_t>(std::max<int64_t>(shape.size(), 1)));
    const RawRef dst{d.data(), DType::kFloat32, MemorySpace::VMEM, shape, row_major_strides(shape)};
    evaluate_nodes(out, {}, dst, false);  // errors there name the running statement
    return d;
  }

  /// The first never-written or undefined element a load read: its address and state.
  uintptr_t first_undefined = 0;
  uint8_t first_state = kDefined;

 private:
  ExprNode constant(double v) const {
    ExprNode n;
    n.op = OpCode::kConst;
    n.dtype = DType::kFloat32;
    n.fconst = v;
    return n;
  }
  static ExprNode convert(int a) {
    ExprNode n;
    n.op = OpCode::kConvert;
    n.dtype = DType::kFloat32;
    n.a = a;
    return n;
  }
  static int push(std::vector<ExprNode>& out, ExprNode n) {
    out.push_back(std::move(n));
    return static_cast<int>(out.size()) - 1;
  }
  ExprNode load_of(const float* data, const Shape& shape) const {
    ExprNode n;
    n.op = OpCode::kLoad;
    n.dtype = DType::kFloat32;
    n.data = data;
    n.space = MemorySpace::VMEM;
    n.shape = shape;
    n.strides = row_major_strides(shape);
    return n;
  }
  const float* keep(std::vector<float> d) {
    kept_.push_back(std::move(d));
    return kept_.back().data();
  }

  // The definedness of a load's elements.
  std::vector<float> load_definedness(const ExprNode& n) {
    std::vector<float> d(static_cast<size_t>(std::max<int64_t>(n.shape.size(), 1)), 1.0f);
    const auto base = reinterpret_cast<uintptr_t>(n.data);
    const Region* reg = region_of(ctx_, base);
    if (reg == nullptr || reg->init == nullptr) return d;
    const int item = itemsize(n.dtype);
    for_each_element(n.shape, n.strides, [&](int64_t off, int64_t flat) {
      const uintptr_t p = base + static_cast<uintptr_t>(off * item);
      const uint8_t state = shadow_state(*reg, p, item);
      if (state == kDefined) return;
      d[static_cast<size_t>(flat)] = 0.0f;
      if (first_undefined == 0) {
        first_undefined = p;
        first_state = state;
      }
    });
    return d;
  }

  // Appends the original nodes of i's subtree (remapped) to `out`; returns i's new index.
  int copy_subtree(int i, std::vector<ExprNode>& out) const {
    const int s = start_[static_cast<size_t>(i)];
    const int shift = static_cast<int>(out.size()) - s;
    for (int k = s; k <= i; ++k) {
      ExprNode n = nodes_[static_cast<size_t>(k)];
      for (int* o : {&n.a, &n.b, &n.c, &n.sub_begin}) {
        if (*o >= 0) *o += shift;
      }
      out.push_back(std::move(n));
    }
    return i + shift;
  }

  // Appends the nodes computing node i's definedness to `out`; returns the index of the last.
  int build(int i, std::vector<ExprNode>& out, SourceLocation where) {
    const ExprNode& n = nodes_[static_cast<size_t>(i)];
    const auto binary = [&](OpCode op, int a, int b) {
      ExprNode m;
      m.op = op;
      m.dtype = DType::kFloat32;
      m.a = a;
      m.b = b;
      return push(out, std::move(m));
    };
    if (n.op == OpCode::kLoad) return push(out, load_of(keep(load_definedness(n)), n.shape));
    if (n.op == OpCode::kConst || n.op == OpCode::kIota) return push(out, constant(1.0));
    if (is_unary(n.op)) return build(n.a, out, where);
    if (n.op == OpCode::kSelect) {
      const int mask = copy_subtree(n.c, out);
      const int da = build(n.a, out, where);
      const int db = build(n.b, out, where);
      const int dc = build(n.c, out, where);
      ExprNode sel;
      sel.op = OpCode::kSelect;
      sel.dtype = DType::kFloat32;
      sel.c = mask;
      sel.a = da;
      sel.b = db;
      return binary(OpCode::kMin, push(out, std::move(sel)), dc);
    }
    if (!is_non_elementwise(n.op)) {
      return binary(OpCode::kMin, build(n.a, out, where), build(n.b, out, where));
    }
    // A reduction or layout op: its operand's definedness at the operand's own shape.
    const SourceLocation at = n.where.line() != 0 ? n.where : where;
    const std::vector<float> operand = eval(n.a, n.shape, at);
    if (is_reduction(n.op)) {
      if (std::find(operand.begin(), operand.end(), 0.0f) != operand.end()) {
        settle_before_uninitialized(ctx_, first_state, op_call(n.op), at);
        raise(ErrorKind::kUninitialized, op_call(n.op), at,
              fmt::format("an undefined element reaches {}: it reads {}; a reduction of "
                          "garbage is garbage: write every element it reduces first (or mask "
                          "the undefined ones out with jnp::where before reducing)",
                          op_call(n.op), undefined_text(ctx_, first_undefined, first_state)));
      }
      return push(out, constant(1.0));
    }
    std::vector<ExprNode> move;
    move.push_back(load_of(keep(operand), n.shape));
    ExprNode op = n;
    op.dtype = DType::kFloat32;
    op.a = 0;
    op.sub_begin = 0;
    move.push_back(std::move(op));
    std::vector<float> moved(static_cast<size_t>(std::max<int64_t>(n.out_shape.size(), 1)));
    evaluate_nodes(move, {},
                   RawRef{moved.data(), DType::kFloat32, MemorySpace::VMEM, n.out_shape,
                          row_major_strides(n.out_shape)},
                   false);
    return push(out, load_of(keep(std::move(moved)), n.out_shape));
  }

  CoreContext& ctx_;
  const std::vector<ExprNode>& nodes_;
  std::vector<int> start_;
  std::vector<std::vector<float>> kept_;  // definedness buffers the programs load
};

}  // namespace

uint8_t add_origin(CoreContext& ctx, SourceLocation where, uintptr_t read) {
  CheckedLaunch& L = *core_of(ctx).launch;
  if (read != 0) {
    if (const Region* reg = region_of(ctx, read)) {
      const uint8_t state = shadow_state(*reg, read, 1);
      if (state >= kFirstOrigin) return state;  // computed from data that already has an origin
    }
  }
  Origin o{where, ctx.core, ctx.grid_step, read != 0 ? describe(ctx, read) : std::string()};
  std::lock_guard<std::mutex> lock(L.mu);
  return add_origin_locked(L, std::move(o));
}

uint8_t add_origin_locked(CheckedLaunch& L, Origin o) {
  if (L.origins.size() < kMaxOrigins) L.origins.push_back(std::move(o));
  return static_cast<uint8_t>(kFirstOrigin + L.origins.size() - 1);
}

const Origin* origin_of(const CheckedLaunch& L, uint8_t state) {
  if (state < kFirstOrigin) return nullptr;
  const size_t i = static_cast<size_t>(state - kFirstOrigin);
  return i < L.origins.size() ? &L.origins[i] : nullptr;
}

std::string undefined_text(CoreContext& ctx, uintptr_t addr, uint8_t state) {
  const std::string what = addr != 0 ? describe(ctx, addr) : std::string("memory");
  CheckedLaunch& L = *core_of(ctx).launch;
  const Origin* o = nullptr;
  {
    std::lock_guard<std::mutex> lock(L.mu);
    o = origin_of(L, state);
  }
  if (o == nullptr) {
    return fmt::format(
        "{}, which nothing has written since it was allocated (fresh scratch, "
        "output windows and run_scoped buffers hold garbage on a TPU; here: poison)",
        what);
  }
  std::string step;
  if (!o->step.empty()) step = fmt::format(", grid step ({})", fmt::join(o->step, ", "));
  return fmt::format(
      "{}, which holds a value computed at {} (core {}{}) from {}, which nothing "
      "had written since it was allocated",
      what, format_location(o->where), o->core, step, o->source);
}

void checked_evaluate(CoreContext& ctx, const ExprProgram& prog, const RawRef& dst) {
  CheckedCore& cc = core_of(ctx);
  const pltpu::InterpretParams& P = cc.launch->params;
  constexpr const char* op = "vector assignment";
  const SourceLocation stmt = statement_site(prog.where);
  bool undefined = false;
  SourceLocation read_at = stmt;
  for (const ExprNode& n : prog.nodes) {
    if (n.op != OpCode::kLoad) continue;
    const Runs r = runs_of(n.data, n.dtype, n.shape, n.strides);
    const SourceLocation at = n.where.line() != 0 ? n.where : stmt;
    // A race is the cause when the bytes are also unwritten (on_wait: the copy has not run).
    check_compute_vs_dma(ctx, r, false, op, at);
    if (undefined || P.allow_uninitialized_reads) continue;
    if (Region* reg = region_of(ctx, r.lo); reg != nullptr && first_unwritten(*reg, r) != 0) {
      undefined = true;
      read_at = at;
    }
  }
  const Runs d = runs_of(dst);
  check_compute_vs_dma(ctx, d, true, op, stmt);
  Region* reg = region_of(ctx, d.lo);
  if (!undefined) {
    if (reg != nullptr) mark(*reg, d, kDefined);
    return;
  }
  // Which destination elements depend on undefined data (the nodes are copied: evaluating the
  // definedness builds programs, and the thread's program storage holds this one).
  const std::vector<ExprNode> nodes = prog.nodes;
  Definedness def(ctx, nodes);
  const std::vector<float> defined = def.eval(static_cast<int>(nodes.size()) - 1, dst.shape, stmt);
  if (reg == nullptr || reg->init == nullptr) return;
  const int item = itemsize(dst.dtype);
  const auto base = reinterpret_cast<uintptr_t>(dst.data);
  uint8_t origin = kDefined;
  for_each_element(dst.shape, dst.strides, [&](int64_t off, int64_t flat) {
    const uintptr_t p = base + static_cast<uintptr_t>(off * item);
    uint8_t state = kDefined;
    if (defined[static_cast<size_t>(flat)] < 0.5f) {
      if (origin == kDefined) origin = add_origin(ctx, read_at, def.first_undefined);
      state = origin;
    }
    mark_range(*reg, p, p + static_cast<uintptr_t>(item), state);
  });
}

}  // namespace tessera::detail
