// Internal: the native evaluator's plan cache for elementwise statements (`o = x + y`).
//
// Evaluating an assignment plans it first (src/native/vector_evaluate.cc): every leaf broadcast
// into the destination's axes, the axes coalesced, the overlap of operands and destination
// checked. The plan depends on the expression's structure (its ops and dtypes, which the
// expression's C++ type fixes) and on the shapes and strides of its refs, never on where their
// elements lie or on the values of its scalars. A statement that runs at every grid step
// therefore plans the same thing each time: a pipeline over (8, 128) blocks spent more on that
// than on the add itself.
//
// For expressions built only from the node types listed below, assign() (vector_ops.h) collects
// the leaves here, in the order emit() visits them, without building an ExprProgram, and hands
// them to evaluate_statement (src/native/statement_cache.cc). That keeps one plan per
// (expression type, statement call site) in a small per-thread table, and reuses it when every
// shape and stride (the refs', the full/iota shapes, the destination's) and every other
// runtime input of the plan (an integer_pow exponent, an iota's axis) is the same as when it was
// planned; data pointers and scalar values are written into the plan each time, and the overlap
// of operands and destination is checked each time. Anything else plans from scratch.
#pragma once

#include <array>
#include <cstdint>
#include <type_traits>

#include "tessera/detail/expr_program.h"
#include "tessera/dtype.h"
#include "tessera/memory_space.h"
#include "tessera/shape.h"

namespace tessera {
namespace pl {
template <class T, MemorySpace Space>
class Ref;
}  // namespace pl

namespace detail {

// The expression nodes of vector_ops.h and ref_item.h.
template <class T, MemorySpace S>
struct RefLeaf;
template <class T, MemorySpace S>
struct RefItem;
template <class T>
struct ScalarExpr;
template <class T>
struct FullExpr;
template <class T>
struct IotaExpr;
template <OpCode Op, class T, class L, class R, class C>
struct BinaryExpr;
template <OpCode Op, class T, class A, class C>
struct UnaryExpr;
template <class T, class A>
struct CastExpr;
template <class T, class M, class A, class B>
struct SelectExpr;

/// A ref leaf of a statement: where its elements start, its shape and strides.
struct StatementRef {
  const void* data;
  const Shape* shape;
  const SmallVec* strides;
};
/// A constant of a statement, as its ExprNode holds it (fconst, iconst).
struct StatementConst {
  double f;
  int64_t i;
};

/// A scalar of dtype T as a kConst node holds it.
template <class T>
StatementConst const_of(T v) {
  if constexpr (is_floating(dtype_of<T>)) {
    return {static_cast<double>(static_cast<float>(v)), 0};
  } else {
    return {static_cast<double>(v), static_cast<int64_t>(v)};
  }
}

template <class T>
void set_const(ExprNode& n, T v) {
  n.op = OpCode::kConst;
  n.dtype = dtype_of<T>;
  const StatementConst c = const_of<T>(v);
  n.fconst = c.f;
  n.iconst = c.i;
}

/// A cacheable statement's leaves, for evaluate_statement.
struct StatementView {
  const void* tag = nullptr;  // one per expression type
  const StatementRef* refs = nullptr;
  int num_refs = 0;
  const StatementConst* consts = nullptr;
  int num_consts = 0;
  const Shape* const* shapes = nullptr;  // the shapes of full(...) and iota nodes
  int num_shapes = 0;
  const int64_t* words = nullptr;  // integer_pow exponents, iota axes
  int num_words = 0;
  /// Builds the statement's program (emit order) when it has to be planned.
  void (*emit)(const void* expr, ExprProgram& program) = nullptr;
  const void* expr = nullptr;
};

/// Evaluates the statement `s` into the destination (data, dtype, space, shape, strides)
/// through the calling thread's plan cache; false when the cache is not used (the running engine
/// observes evaluations, or tracing is on), and then nothing was done. Errors as evaluate().
bool evaluate_statement(const StatementView& s, void* dst, DType dtype, MemorySpace space,
                        const Shape& shape, const SmallVec& strides);

/// A float32 statement `dst = a op b` of one elementwise op (add, sub, mul, div, max, min) whose
/// operands are float32 refs of the destination's own shape or float32 scalars (`o = x + y`,
/// `o = x * 2.0f`), evaluated on the native engine's fused loops with no plan: the plan it would
/// make is the fused loop itself, and finding it in the cache (signature, table, plan set-up)
/// cost more than an (8, 128) block's add. A ref is `a`/`b` (`av`/`bv` unused), a scalar is
/// null with its value. False when the statement is not of that form here (a broadcast operand, a
/// row that is not contiguous, an operand that overlaps the destination other than element for
/// element, an empty or rank-0 destination) or the engine observes evaluations or tracing is on;
/// then nothing was done and the caller evaluates it as any statement.
bool evaluate_binary_f32(OpCode op, const StatementRef* a, float av, const StatementRef* b,
                         float bv, void* dst, const Shape& shape, const SmallVec& strides);

/// A float32 iota statement with no plan: `o = iota` or `o = iota op c` / `o = c op iota` (op
/// add, sub or mul; `op` kIota for the iota alone), the iota along `axis` of the destination's
/// own shape, evaluated on the native engine's fused iota loop (the plan's own fused path, found
/// without the cache). False when it is not of that form here (another shape, rows that are not
/// contiguous, an empty, rank-0 or rank > 8 destination) or the engine observes evaluations or
/// tracing is on; then nothing was done.
bool evaluate_iota_f32(OpCode op, int axis, const Shape& iota_shape, float value, bool iota_first,
                       void* dst, const Shape& shape, const SmallVec& strides);

/// The calling thread's plan cache counters, for tests: statements run from a kept plan, and
/// statements planned (whether or not the plan could be kept).
struct StatementCacheStats {
  int64_t reused = 0;
  int64_t planned = 0;
  int64_t direct = 0;  // float32 statements run with no plan (evaluate_binary_f32, _iota_f32)
};
StatementCacheStats statement_cache_stats() noexcept;

/// How a node type's leaves are collected: `kCacheable`, the counts of each kind of leaf, and
/// `collect(expr, sink)` in emit order. Not cacheable unless specialised below.
template <class E>
struct StatementLeaves {
  static constexpr bool kCacheable = false;
  static constexpr int kRefs = 0, kConsts = 0, kShapes = 0, kWords = 0;
};

/// The counts of a node with children `Ch...` plus its own.
template <int Refs, int Consts, int Shapes, int Words, class... Ch>
struct LeafCounts {
  static constexpr bool kCacheable = (StatementLeaves<Ch>::kCacheable && ...);
  static constexpr int kRefs = (Refs + ... + StatementLeaves<Ch>::kRefs);
  static constexpr int kConsts = (Consts + ... + StatementLeaves<Ch>::kConsts);
  static constexpr int kShapes = (Shapes + ... + StatementLeaves<Ch>::kShapes);
  static constexpr int kWords = (Words + ... + StatementLeaves<Ch>::kWords);
};

template <class T, MemorySpace S>
struct StatementLeaves<pl::Ref<T, S>> : LeafCounts<1, 0, 0, 0> {
  template <class K>
  static void collect(const pl::Ref<T, S>& r, K& k) {
    k.ref(r.data(), r.shape(), r.strides());
  }
};
template <class T, MemorySpace S>
struct StatementLeaves<RefLeaf<T, S>> : LeafCounts<1, 0, 0, 0> {
  template <class K>
  static void collect(const RefLeaf<T, S>& e, K& k) {
    StatementLeaves<pl::Ref<T, S>>::collect(e.ref, k);
  }
};
template <class T, MemorySpace S>
struct StatementLeaves<RefItem<T, S>> : StatementLeaves<RefLeaf<T, S>> {};
template <class T>
struct StatementLeaves<ScalarExpr<T>> : LeafCounts<0, 1, 0, 0> {
  template <class K>
  static void collect(const ScalarExpr<T>& e, K& k) {
    k.constant(const_of<T>(e.value));
  }
};
template <class T>
struct StatementLeaves<FullExpr<T>> : LeafCounts<0, 1, 1, 0> {
  template <class K>
  static void collect(const FullExpr<T>& e, K& k) {
    k.constant(const_of<T>(e.value));
    k.shape(e.shape_);
  }
};
template <class T>
struct StatementLeaves<IotaExpr<T>> : LeafCounts<0, 0, 1, 1> {
  template <class K>
  static void collect(const IotaExpr<T>& e, K& k) {
    k.shape(e.shape_);
    k.word(e.axis);
  }
};
template <OpCode Op, class T, class L, class R, class C>
struct StatementLeaves<BinaryExpr<Op, T, L, R, C>> : LeafCounts<0, 0, 0, 0, L, R> {
  static constexpr bool kCacheable =
      LeafCounts<0, 0, 0, 0, L, R>::kCacheable && !is_non_elementwise(Op);
  template <class K>
  static void collect(const BinaryExpr<Op, T, L, R, C>& e, K& k) {
    StatementLeaves<L>::collect(e.l, k);
    StatementLeaves<R>::collect(e.r, k);
  }
};
template <OpCode Op, class T, class A, class C>
struct StatementLeaves<UnaryExpr<Op, T, A, C>> : LeafCounts<0, 0, 0, 1, A> {
  static constexpr bool kCacheable =
      LeafCounts<0, 0, 0, 1, A>::kCacheable && !is_non_elementwise(Op);
  template <class K>
  static void collect(const UnaryExpr<Op, T, A, C>& e, K& k) {
    k.word(e.iconst);
    StatementLeaves<A>::collect(e.a, k);
  }
};
template <class T, class A>
struct StatementLeaves<CastExpr<T, A>> : LeafCounts<0, 0, 0, 0, A> {
  template <class K>
  static void collect(const CastExpr<T, A>& e, K& k) {
    StatementLeaves<A>::collect(e.a, k);
  }
};
template <class T, class M, class A, class B>
struct StatementLeaves<SelectExpr<T, M, A, B>> : LeafCounts<0, 0, 0, 0, M, A, B> {
  template <class K>
  static void collect(const SelectExpr<T, M, A, B>& e, K& k) {
    StatementLeaves<M>::collect(e.m, k);
    StatementLeaves<A>::collect(e.a, k);
    StatementLeaves<B>::collect(e.b, k);
  }
};

/// Statements evaluate_binary_f32 may take: a float32 BinaryExpr of one of its ops over float32
/// ref leaves and scalars, not both scalars. `run` tries it.
template <class X>
struct DirectBinary {
  static constexpr bool kApplies = false;
};
template <class L>
struct DirectOperand {
  static constexpr bool kRef = false, kScalar = false;
};
template <class T, MemorySpace S>
struct DirectOperand<RefLeaf<T, S>> {
  static constexpr bool kRef = std::is_same_v<std::remove_cv_t<T>, float>, kScalar = false;
  static const StatementRef* ref(const RefLeaf<T, S>& e, StatementRef& keep) {
    keep = StatementRef{e.ref.data(), &e.ref.shape(), &e.ref.strides()};
    return &keep;
  }
  static float value(const RefLeaf<T, S>&) { return 0.0f; }
};
// `x_ref[...]` (Pallas' spelling) is the ref leaf itself.
template <class T, MemorySpace S>
struct DirectOperand<RefItem<T, S>> : DirectOperand<RefLeaf<T, S>> {};
template <class T>
struct DirectOperand<ScalarExpr<T>> {
  static constexpr bool kRef = false, kScalar = std::is_same_v<T, float>;
  static const StatementRef* ref(const ScalarExpr<T>&, StatementRef&) { return nullptr; }
  static float value(const ScalarExpr<T>& e) { return static_cast<float>(e.value); }
};
template <OpCode Op, class L, class R>
struct DirectBinary<BinaryExpr<Op, float, L, R, float>> {
  static constexpr bool kApplies =
      (Op == OpCode::kAdd || Op == OpCode::kSub || Op == OpCode::kMul || Op == OpCode::kDiv ||
       Op == OpCode::kMax || Op == OpCode::kMin) &&
      (DirectOperand<L>::kRef || DirectOperand<L>::kScalar) &&
      (DirectOperand<R>::kRef || DirectOperand<R>::kScalar) &&
      (DirectOperand<L>::kRef || DirectOperand<R>::kRef);
  static bool run(const BinaryExpr<Op, float, L, R, float>& e, void* dst, const Shape& shape,
                  const SmallVec& strides) {
    StatementRef ka, kb;
    return evaluate_binary_f32(Op, DirectOperand<L>::ref(e.l, ka), DirectOperand<L>::value(e.l),
                               DirectOperand<R>::ref(e.r, kb), DirectOperand<R>::value(e.r), dst,
                               shape, strides);
  }
};

/// Statements evaluate_iota_f32 may take: a float32 iota alone, or under add, sub or mul with a
/// float32 scalar on either side. `run` tries it.
template <class X>
struct DirectIota {
  static constexpr bool kApplies = false;
};
template <class T>
struct DirectIota<IotaExpr<T>> {
  static constexpr bool kApplies = std::is_same_v<T, float>;
  static bool run(const IotaExpr<T>& e, void* dst, const Shape& shape, const SmallVec& strides) {
    return evaluate_iota_f32(OpCode::kIota, e.axis, e.shape(), 0.0f, true, dst, shape, strides);
  }
};
template <OpCode Op>
inline constexpr bool kDirectIotaOp =
    Op == OpCode::kAdd || Op == OpCode::kSub || Op == OpCode::kMul;
template <OpCode Op, class T, class S>
struct DirectIota<BinaryExpr<Op, float, IotaExpr<T>, ScalarExpr<S>, float>> {
  static constexpr bool kApplies =
      kDirectIotaOp<Op> && std::is_same_v<T, float> && std::is_same_v<S, float>;
  static bool run(const BinaryExpr<Op, float, IotaExpr<T>, ScalarExpr<S>, float>& e, void* dst,
                  const Shape& shape, const SmallVec& strides) {
    return evaluate_iota_f32(Op, e.l.axis, e.l.shape(), static_cast<float>(e.r.value), true, dst,
                             shape, strides);
  }
};
template <OpCode Op, class T, class S>
struct DirectIota<BinaryExpr<Op, float, ScalarExpr<S>, IotaExpr<T>, float>> {
  static constexpr bool kApplies =
      kDirectIotaOp<Op> && std::is_same_v<T, float> && std::is_same_v<S, float>;
  static bool run(const BinaryExpr<Op, float, ScalarExpr<S>, IotaExpr<T>, float>& e, void* dst,
                  const Shape& shape, const SmallVec& strides) {
    return evaluate_iota_f32(Op, e.r.axis, e.r.shape(), static_cast<float>(e.l.value), false, dst,
                             shape, strides);
  }
};

/// One address per expression type: the first half of a cache entry's key.
template <class X>
inline constexpr char kStatementTag = 0;

/// The leaves of a cacheable expression of type X, collected on the stack.
template <class X>
class StatementArgs {
  using L = StatementLeaves<X>;

 public:
  /// `emit(expr, program)` builds X's program when the statement has to be planned.
  StatementArgs(const X& expr, void (*emit)(const void*, ExprProgram&)) {
    L::collect(expr, *this);
    view_.tag = &kStatementTag<X>;
    view_.refs = refs_.data();
    view_.num_refs = L::kRefs;
    view_.consts = consts_.data();
    view_.num_consts = L::kConsts;
    view_.shapes = shapes_.data();
    view_.num_shapes = L::kShapes;
    view_.words = words_.data();
    view_.num_words = L::kWords;
    view_.emit = emit;
    view_.expr = &expr;
  }
  const StatementView& view() const noexcept { return view_; }

  void ref(const void* data, const Shape& shape, const SmallVec& strides) {
    refs_[static_cast<size_t>(nr_++)] = StatementRef{data, &shape, &strides};
  }
  void constant(StatementConst c) { consts_[static_cast<size_t>(nc_++)] = c; }
  void shape(const Shape& s) { shapes_[static_cast<size_t>(ns_++)] = &s; }
  void word(int64_t w) { words_[static_cast<size_t>(nw_++)] = w; }

 private:
  std::array<StatementRef, L::kRefs == 0 ? 1 : L::kRefs> refs_;
  std::array<StatementConst, L::kConsts == 0 ? 1 : L::kConsts> consts_;
  std::array<const Shape*, L::kShapes == 0 ? 1 : L::kShapes> shapes_;
  std::array<int64_t, L::kWords == 0 ? 1 : L::kWords> words_;
  int nr_ = 0, nc_ = 0, ns_ = 0, nw_ = 0;
  StatementView view_;
};

}  // namespace detail
}  // namespace tessera
