// The native evaluator's plan cache for elementwise statements (tessera/detail/statement_cache.h).
//
// Each thread keeps a small direct-mapped table of plans, keyed by the expression's type (the
// address of kStatementTag<X>) and the statement's call site (t_statement, the return address
// that Ref's assignments record). A kept plan is reused only when its signature matches: every
// ref's shape and strides, every full/iota shape, every other integer the plan was made from,
// and the destination's dtype, shape and strides; the type fixes everything else (the ops,
// dtypes and operand order of the program emit() would build). Per run, the refs' and the
// destination's data pointers and the scalars' values are written into the plan, the overlap of
// each load with the destination is checked again (an overlapping statement is planned from
// scratch, which evaluates it through a temporary), and the pipeline's step hints (streaming
// stores, prefetching) are taken afresh. The table is per thread, so cores never share an entry.

#include "tessera/detail/statement_cache.h"

#include <array>
#include <cstdint>
#include <memory>
#include <vector>

#include "native/native_engine.h"
#include "native/vector_evaluate.h"
#include "runtime/context.h"
#include "runtime/engine.h"
#include "runtime/events.h"
#include "tessera/detail/statement.h"

namespace tessera::detail {

namespace {

struct Entry {
  const void* tag = nullptr;
  const void* site = nullptr;
  bool valid = false;
  std::vector<int64_t> signature;
  CapturedPlan kept;
};

// Two entries per key (two ways of a set), so that a statement alternating between two shapes
// or strides (full blocks used in place and a partial edge block in a window, two pipelines
// sharing a body) keeps both plans.
struct Set {
  Entry way[2];
  int last = 0;  // the way used last
};
constexpr int kSetBits = 4;  // 16 sets, 32 entries per thread
using Table = std::array<Set, size_t{1} << kSetBits>;
thread_local std::unique_ptr<Table> t_table;
thread_local StatementCacheStats t_stats;

// Whether this statement's program must be built and evaluated as such: engines that look at
// each program (the checked engine) and traces get it; none of the plan-free paths apply then.
bool program_observed() {
  if (events_on()) return true;
  const CoreContext* ctx = current_context();
  return ctx != nullptr && ctx->engine->observes_evaluate();
}

Set& set_for(const void* tag, const void* site) {
  if (!t_table) t_table = std::make_unique<Table>();
  const auto key = reinterpret_cast<uintptr_t>(tag) ^ (reinterpret_cast<uintptr_t>(site) << 1);
  return (*t_table)[static_cast<size_t>((key * 0x9E3779B97F4A7C15ull) >> (64 - kSetBits))];
}

/// Visits the statement's signature, in a fixed order: `v.list(values, n)` for each list of
/// integers (shapes, strides), `v.word(w)` for each single one; stops at the first false.
template <class V>
bool visit_signature(const StatementView& s, DType dtype, const Shape& shape,
                     const SmallVec& strides, V& v) {
  for (int k = 0; k < s.num_refs; ++k) {
    if (!v.list(s.refs[k].shape->begin(), s.refs[k].shape->rank()) ||
        !v.list(s.refs[k].strides->data(), s.refs[k].strides->size()))
      return false;
  }
  for (int k = 0; k < s.num_shapes; ++k) {
    if (!v.list(s.shapes[k]->begin(), s.shapes[k]->rank())) return false;
  }
  for (int k = 0; k < s.num_words; ++k) {
    if (!v.word(s.words[k])) return false;
  }
  return v.word(static_cast<int64_t>(dtype)) && v.list(shape.begin(), shape.rank()) &&
         v.list(strides.data(), strides.size());
}

/// Writes a signature.
struct SignatureWriter {
  std::vector<int64_t>& out;
  bool list(const int64_t* v, int n) {
    out.push_back(n);
    out.insert(out.end(), v, v + n);
    return true;
  }
  bool word(int64_t w) {
    out.push_back(w);
    return true;
  }
};

/// Compares a signature with a written one, word by word.
struct SignatureReader {
  const int64_t* at;
  const int64_t* end;
  // Inlined into visit_signature: a statement is matched at every grid step.
  [[gnu::always_inline]] bool list(const int64_t* v, int n) {
    if (end - at <= n || at[0] != n) return false;
    for (int i = 0; i < n; ++i) {
      if (at[1 + i] != v[i]) return false;
    }
    at += n + 1;
    return true;
  }
  [[gnu::always_inline]] bool word(int64_t w) {
    if (at == end || *at != w) return false;
    ++at;
    return true;
  }
};

bool matches(const Entry& e, const StatementView& s, DType dtype, const Shape& shape,
             const SmallVec& strides) {
  SignatureReader r{e.signature.data(), e.signature.data() + e.signature.size()};
  return visit_signature(s, dtype, shape, strides, r) && r.at == r.end;
}

/// Runs a kept plan with this run's data pointers and scalars; false (nothing done) when a load
/// overlaps the destination at another position.
bool run_kept(CapturedPlan& c, const StatementView& s, void* dst) {
  plan::Plan& p = c.plan;
  auto* d = static_cast<std::byte*>(dst);
  const std::byte* dlo = d + c.dst.lo;
  for (int k = 0; k < s.num_refs; ++k) {
    plan::Node& n = p.nodes[static_cast<size_t>(c.loads[static_cast<size_t>(k)])];
    n.data = static_cast<const std::byte*>(s.refs[k].data);
    const CapturedPlan::LoadSpan& sp = c.spans[static_cast<size_t>(k)];
    if (ranges_overlap(n.data + sp.lo, sp.len, dlo, c.dst.len) &&
        !(n.data == d && sp.same_layout)) {
      return false;
    }
  }
  for (int k = 0; k < s.num_consts; ++k) {
    plan::Node& n = p.nodes[static_cast<size_t>(c.consts[static_cast<size_t>(k)])];
    n.iconst = s.consts[k].i;
    const_lanes(n.dtype, s.consts[k].f, s.consts[k].i, n);
  }
  p.dst = d;
  apply_step_hints({dlo, c.dst.len}, p);
  run_plan(p);
  return true;
}

/// Whether the plan's loads and constants are the statement's leaves, one for one and in order
/// (emit() and StatementLeaves::collect visit the same nodes in the same order).
bool leaves_agree(const CapturedPlan& c, const StatementView& s) {
  if (static_cast<int>(c.loads.size()) != s.num_refs) return false;
  if (static_cast<int>(c.consts.size()) != s.num_consts) return false;
  for (int k = 0; k < s.num_refs; ++k) {
    const plan::Node& n = c.plan.nodes[static_cast<size_t>(c.loads[static_cast<size_t>(k)])];
    if (n.data != s.refs[k].data) return false;
  }
  return true;
}

}  // namespace

bool evaluate_statement(const StatementView& s, void* dst, DType dtype, MemorySpace space,
                        const Shape& shape, const SmallVec& strides) {
  if (program_observed()) return false;
  const void* site = t_statement;
  Set& set = set_for(s.tag, site);
  int victim = 1 - set.last;  // the way to plan into: the older one, or one that failed
  for (int w : {set.last, 1 - set.last}) {
    Entry& e = set.way[w];
    if (!e.valid || e.tag != s.tag || e.site != site || !matches(e, s, dtype, shape, strides)) {
      continue;
    }
    if (run_kept(e.kept, s, dst)) {
      set.last = w;
      ++t_stats.reused;
      return true;
    }
    victim = w;  // overlapping this time: planned afresh below
    break;
  }
  ++t_stats.planned;
  set.last = victim;
  Entry& e = set.way[victim];
  // Plan it, as evaluate() would, and keep the plan.
  ExprProgram program;
  s.emit(s.expr, program);
  const RawRef d{dst, dtype, space, shape, strides};
  bool plain = true;
  for (const ExprNode& n : program.nodes) plain = plain && !is_non_elementwise(n.op);
  e.valid = false;
  if (!plain) {  // not a program StatementLeaves lets through; evaluated as evaluate() does
    evaluate_nodes(program.nodes, program.where, d, true);
    return true;
  }
  evaluate_flat(program.nodes, program.where, d, &e.kept);
  if (e.kept.ok && leaves_agree(e.kept, s)) {
    e.tag = s.tag;
    e.site = site;
    e.signature.clear();
    SignatureWriter w{e.signature};
    visit_signature(s, dtype, shape, strides, w);
    e.valid = true;
  }
  return true;
}

namespace {

// A direct statement's operand: a ref of the destination's shape with contiguous rows that
// overlaps the destination only element for element, or a scalar.
bool direct_operand(const StatementRef* r, float value, int n, const int64_t* shape,
                    const int64_t* strides, const void* dst, const Span& dspan, FusedOperand& out) {
  if (r == nullptr) {
    out = FusedOperand{FusedArg::kScalar, nullptr, nullptr, value};
    return true;
  }
  if (r->shape->rank() != n || r->strides->size() != n) return false;
  const int64_t* rshape = r->shape->begin();
  const int64_t* rstrides = r->strides->data();
  bool same_strides = true;
  for (int d = 0; d < n; ++d) {
    if (rshape[d] != shape[d]) return false;
    same_strides = same_strides && rstrides[d] == strides[d];
  }
  if (rstrides[n - 1] != 1) return false;
  if (!(r->data == dst && same_strides)) {
    // With the destination's strides it spans as many bytes, from as far before its first element.
    const Span s = same_strides ? Span{static_cast<const std::byte*>(r->data) +
                                           (dspan.first - static_cast<const std::byte*>(dst)),
                                       dspan.second}
                                : span_of(r->data, *r->shape, *r->strides, 4);
    if (ranges_overlap(s.first, s.second, dspan.first, dspan.second)) return false;
  }
  out = FusedOperand{FusedArg::kRow, static_cast<const float*>(r->data), rstrides, 0};
  return true;
}

}  // namespace

bool evaluate_binary_f32(OpCode op, const StatementRef* a, float av, const StatementRef* b,
                         float bv, void* dst, const Shape& shape, const SmallVec& strides) {
  if (program_observed()) return false;
  const int n = shape.rank();
  if (n == 0 || strides.size() != n) return false;
  const int64_t* ext = shape.begin();
  const int64_t* st = strides.data();
  if (st[n - 1] != 1) return false;
  for (int d = 0; d < n; ++d) {
    if (ext[d] <= 0) return false;
  }
  const Span dspan = span_of(dst, shape, strides, 4);
  FusedOperand fa, fb;
  if (!direct_operand(a, av, n, ext, st, dst, dspan, fa) ||
      !direct_operand(b, bv, n, ext, st, dst, dspan, fb))
    return false;
  FusedDst d{n, ext, static_cast<float*>(dst), st, false, nullptr};
  take_step_hints(dspan, d.stream, d.prefetch);
  if (!run_fused_binary(d, op, fa, fb)) return false;
  ++t_stats.direct;
  return true;
}

bool evaluate_iota_f32(OpCode op, int axis, const Shape& iota_shape, float value, bool iota_first,
                       void* dst, const Shape& shape, const SmallVec& strides) {
  if (program_observed()) return false;
  constexpr int kMaxIotaRank = 8;
  const int n = shape.rank();
  if (n == 0 || n > kMaxIotaRank || strides.size() != n || !(iota_shape == shape) || axis < 0 ||
      axis >= n || strides[n - 1] != 1)
    return false;
  const int64_t* ext = shape.begin();
  int64_t coef[kMaxIotaRank];  // the iota's value per unit of each axis: 1 along its own
  for (int d = 0; d < n; ++d) {
    if (ext[d] <= 0) return false;
    coef[d] = d == axis ? 1 : 0;
  }
  const FusedDst d{
      .nd = n, .extent = ext, .data = static_cast<float*>(dst), .stride = strides.data()};
  if (!run_fused_iota(d, coef, op, value, iota_first)) return false;
  ++t_stats.direct;
  return true;
}

StatementCacheStats statement_cache_stats() noexcept { return t_stats; }

}  // namespace tessera::detail
