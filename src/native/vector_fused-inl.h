// Per-target fused path of the native VPU (vector_kernels.cc includes this once per Highway
// target): the commonest programs — a float32 copy, or one float32 binary op of two operands
// that are rows of refs, per-row scalars or constants, into a float32 destination with
// contiguous rows — evaluated in registers, a vector at a time, without the evaluator's per-node
// lane buffers. Described by FusedDst and FusedOperand (vector_plan.h), so that a plan and a
// statement that needs no plan (run_fused_binary) take the same loops and get the same bits.

// Re-included per target: the guard toggles with HWY_TARGET_TOGGLE (Highway's -inl.h idiom).
#if defined(TESSERA_NATIVE_VECTOR_FUSED_INL_H_) == defined(HWY_TARGET_TOGGLE)
#ifdef TESSERA_NATIVE_VECTOR_FUSED_INL_H_
#undef TESSERA_NATIVE_VECTOR_FUSED_INL_H_
#else
#define TESSERA_NATIVE_VECTOR_FUSED_INL_H_
#endif

#include <hwy/highway.h>

#include <bit>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <type_traits>

#include "native/vector_ops-inl.h"
#include "native/vector_plan.h"
#include "runtime/step_hints.h"
#include "tessera/detail/small_vec.h"

HWY_BEFORE_NAMESPACE();
namespace tessera::detail::HWY_NAMESPACE {
namespace hn = hwy::HWY_NAMESPACE;

// Whether node i of `p` is a leaf: a load or a constant.
inline bool is_leaf(const plan::Plan& p, int i) {
  const OpCode op = p.nodes[static_cast<size_t>(i)].op;
  return op == OpCode::kLoad || op == OpCode::kConst;
}

inline bool fusable_operand(const plan::Node& n, int nd, FusedOperand& out) {
  if (n.dtype != DType::kFloat32) return false;
  if (n.op == OpCode::kConst) {
    out = FusedOperand{FusedArg::kScalar, nullptr, nullptr, n.fval};
    return true;
  }
  if (n.op != OpCode::kLoad) return false;
  const int64_t s = n.stride[nd - 1];
  if (s != 0 && s != 1) return false;
  out = FusedOperand{s == 1 ? FusedArg::kRow : FusedArg::kScalar,
                     reinterpret_cast<const float*>(n.data), n.stride.data(), 0};
  return true;
}

// d[j] = value(j) a vector at a time for the whole vectors of a row of `len`, with streaming
// stores (`Stream`, `d` aligned to a vector) or plain ones; returns where the tail starts. Four
// vectors an iteration: a (8, 128) float32 block's rows are 16 AVX2 vectors, and a loop of one
// vector spends as many instructions on the loop as on the sum.
template <bool Stream, class DF, class Value>
HWY_INLINE int64_t store_vectors(DF df, float* d, int64_t len, Value value) {
  const int64_t N = static_cast<int64_t>(hn::Lanes(df));
  auto put = [df](hn::Vec<DF> v, float* p) HWY_ATTR {
    if constexpr (Stream)
      hn::Stream(v, df, p);
    else
      hn::StoreU(v, df, p);
  };
  int64_t j = 0;
  for (; j + 4 * N <= len; j += 4 * N) {
    const auto v0 = value(j), v1 = value(j + N), v2 = value(j + 2 * N), v3 = value(j + 3 * N);
    put(v0, d + j);
    put(v1, d + j + N);
    put(v2, d + j + 2 * N);
    put(v3, d + j + 3 * N);
  }
  for (; j + N <= len; j += N) put(value(j), d + j);
  return j;
}

// One row: d[j] = op(a[j], b[j]) for j < len, where an operand that is not a row (`ARow` /
// `BRow` false) is the single value it points to.
template <bool ARow, bool BRow, class DF, class Op>
HWY_INLINE void fused_row(DF df, const float* a, const float* b, float* d, int64_t len, bool stream,
                          Op op) {
  const int64_t N = static_cast<int64_t>(hn::Lanes(df));
  const auto va = hn::Set(df, ARow ? 0.0f : *a);
  const auto vb = hn::Set(df, BRow ? 0.0f : *b);
  auto value = [&](int64_t j) HWY_ATTR {
    if constexpr (ARow && BRow)
      return op(hn::LoadU(df, a + j), hn::LoadU(df, b + j));
    else if constexpr (ARow)
      return op(hn::LoadU(df, a + j), vb);
    else
      return op(va, hn::LoadU(df, b + j));
  };
  const int64_t j = stream && reinterpret_cast<uintptr_t>(d) % (N * sizeof(float)) == 0
                        ? store_vectors<true>(df, d, len, value)
                        : store_vectors<false>(df, d, len, value);
  if (j < len) {  // the tail, through a vector of lanes so that it rounds exactly as the body
    HWY_ALIGN float ta[hn::MaxLanes(df)] = {};
    HWY_ALIGN float tb[hn::MaxLanes(df)] = {};
    HWY_ALIGN float to[hn::MaxLanes(df)];
    const size_t rest = static_cast<size_t>(len - j) * sizeof(float);
    if (ARow) std::memcpy(ta, a + j, rest);
    if (BRow) std::memcpy(tb, b + j, rest);
    hn::Store(op(ARow ? hn::Load(df, ta) : va, BRow ? hn::Load(df, tb) : vb), df, to);
    std::memcpy(d + j, to, rest);
  }
}

// The next step's input blocks, row by row: when each queued block has as many rows as this
// evaluation, row r of every block is prefetched while row r is computed.
// Only the first `num` entries are set (the arrays are left unwritten: a step that prefetches
// nothing, as on CPUs whose pipelines do not, pays nothing for them).
struct RowPrefetch {
  int num = 0;
  const PrefetchQueue::Block* blocks = nullptr;  // the queue's
  int64_t rows = 0;                              // the evaluation's (and each block's) rows
  int64_t lead_rows = 0;                         // PrefetchQueue::lead_rows
  bool to_l2 = false;
};

// The lines of [start, end), four per iteration (a row of a small block is a few lines; the loop
// is its cost). The level is a template argument so that no test remains in the loop.
template <bool ToL2>
HWY_INLINE void prefetch_lines(uintptr_t start, uintptr_t end) {
  constexpr int kLocality = ToL2 ? 2 : 3;  // GCC and Clang: 2 is prefetcht1, 3 prefetcht0
  uintptr_t line = start & ~uintptr_t{63};
  for (; line + 3 * 64 < end; line += 4 * 64) {
    __builtin_prefetch(reinterpret_cast<const void*>(line), 0, kLocality);
    __builtin_prefetch(reinterpret_cast<const void*>(line + 64), 0, kLocality);
    __builtin_prefetch(reinterpret_cast<const void*>(line + 128), 0, kLocality);
    __builtin_prefetch(reinterpret_cast<const void*>(line + 192), 0, kLocality);
  }
  for (; line < end; line += 64) {
    __builtin_prefetch(reinterpret_cast<const void*>(line), 0, kLocality);
  }
}

HWY_INLINE void prefetch_row(const RowPrefetch& pf, int64_t r) {
  for (int i = 0; i < pf.num; ++i) {
    const PrefetchQueue::Block& b = pf.blocks[i];
    const auto start = reinterpret_cast<uintptr_t>(lead_row(b, pf.rows, pf.lead_rows, r));
    const uintptr_t end = start + static_cast<uintptr_t>(b.row_bytes);
    if (pf.to_l2) {
      prefetch_lines<true>(start, end);
    } else {
      prefetch_lines<false>(start, end);
    }
  }
}

// The rows of one 2-D slab: `rows` rows, each operand advancing by its row stride (elements; a
// constant's stride is 0, so it keeps pointing at its value); `row0` is the slab's first row
// among all the evaluation's rows.
//
// Inside a pipeline step, the next step's input blocks are prefetched as the rows are computed
// (`row_pf`, row for row, or else `queue`, paced by the bytes stored, step_hints.h): the next
// blocks are read from memory while this block computes, the DMA of the next step running ahead
// as on a TPU. Without it every block starts cold: rows of a block read in place are short runs
// a large stride apart, which the hardware prefetchers barely follow.
template <bool ARow, bool BRow, class DF, class Op>
void fused_slab(DF df, const float* a, int64_t sa, const float* b, int64_t sb, float* d, int64_t sd,
                int64_t rows, int64_t len, bool stream, int64_t row0, const RowPrefetch* row_pf,
                PrefetchQueue* queue, Op op) {
  const int64_t row_bytes = len * static_cast<int64_t>(sizeof(float));
  for (int64_t r = 0; r < rows; ++r) {
    if (row_pf != nullptr) prefetch_row(*row_pf, row0 + r);
    fused_row<ARow, BRow>(df, a, b, d, len, stream, op);
    if (queue != nullptr) drain_prefetch(*queue, row_bytes);
    a += sa;
    b += sb;
    d += sd;
  }
}

// Walks the rows of a fusable plan; `op` combines the two operands (a copy ignores the second).
template <bool ARow, bool BRow, class DF, class Op>
void fused_rows(DF df, const FusedDst& p, const FusedOperand& fa, const FusedOperand& fb, Op op) {
  const int nd = p.nd;
  const int64_t len = p.extent[nd - 1];
  const int64_t rows = nd >= 2 ? p.extent[nd - 2] : 1;
  // An operand's element stride along axis `d`; a constant stays where it is.
  auto stride = [&](const FusedOperand& f, int d) -> int64_t {
    return f.stride == nullptr || d < 0 ? 0 : f.stride[d];
  };
  auto base = [&](const FusedOperand& f) -> const float* {
    return f.stride == nullptr ? &f.value : f.data;
  };
  const int row_axis = nd - 2;
  const int64_t sa = stride(fa, row_axis), sb = stride(fb, row_axis);
  const int64_t sd = row_axis >= 0 ? p.stride[row_axis] : 0;
  // The next step's blocks to prefetch: row for row when they have as many rows as this
  // evaluation (then the queue is used up here), else paced through the queue.
  RowPrefetch row_pf;
  PrefetchQueue* queue = p.prefetch;
  if (queue != nullptr) {
    queue->materialize();
    int64_t total_rows = 1;
    for (int d = 0; d + 1 < nd; ++d) total_rows *= p.extent[d];
    bool matched = queue->cur == 0 && queue->r1 == 0 && queue->byte == 0 && queue->num > 0;
    for (int i = 0; i < queue->num && matched; ++i) {
      const PrefetchQueue::Block& qb = queue->blocks[i];
      matched = qb.n2 == 1 && qb.n1 == total_rows;
    }
    if (matched) {
      row_pf.num = queue->num;
      row_pf.blocks = queue->blocks;
      row_pf.rows = total_rows;
      row_pf.lead_rows = queue->lead_rows;
      row_pf.to_l2 = queue->to_l2;
      queue->cur = queue->num;
      queue = nullptr;
    } else if (!queue->active()) {
      queue = nullptr;
    }
  }
  const RowPrefetch* rp = row_pf.num > 0 ? &row_pf : nullptr;
  if (nd <= 2) {  // one slab (a block's rows): no index over outer axes to keep
    fused_slab<ARow, BRow>(df, base(fa), sa, base(fb), sb, p.data, sd, rows, len, p.stream, 0, rp,
                           queue, op);
    return;
  }
  int64_t row0 = 0;
  SmallVec idx(nd - 2, 0);  // the slab's index over the axes outside the rows
  for (;;) {
    int64_t oa = 0, ob = 0, od = 0;
    for (int d = 0; d < nd - 2; ++d) {
      oa += idx[d] * stride(fa, d);
      ob += idx[d] * stride(fb, d);
      od += idx[d] * p.stride[d];
    }
    fused_slab<ARow, BRow>(df, base(fa) + oa, sa, base(fb) + ob, sb, p.data + od, sd, rows, len,
                           p.stream, row0, rp, queue, op);
    row0 += rows;
    int d = nd - 3;
    for (; d >= 0; --d) {
      if (++idx[d] < p.extent[d]) break;
      idx[d] = 0;
    }
    if (d < 0) break;
  }
}

template <class DF, class Op>
void fused_dispatch(DF df, const FusedDst& p, const FusedOperand& fa, const FusedOperand& fb,
                    Op op) {
  const bool ar = fa.kind == FusedArg::kRow, br = fb.kind == FusedArg::kRow;
  if (ar && br)
    fused_rows<true, true>(df, p, fa, fb, op);
  else if (ar)
    fused_rows<true, false>(df, p, fa, fb, op);
  else
    fused_rows<false, true>(df, p, fa, fb, op);
}

// d = post(a `op` b) for the ops the fused path has; false for any other, or when neither operand
// is a row. `post` is the identity, or a unary op the plan applies to the result (exp).
template <class DF, class Post>
bool fused_binary(DF df, const FusedDst& p, OpCode op, const FusedOperand& fa,
                  const FusedOperand& fb, Post post) {
  using V = hn::Vec<DF>;
  if (fa.kind != FusedArg::kRow && fb.kind != FusedArg::kRow) return false;
  switch (op) {
    case OpCode::kAdd:
      fused_dispatch(df, p, fa, fb, [post](V x, V y) HWY_ATTR { return post(hn::Add(x, y)); });
      return true;
    case OpCode::kSub:
      fused_dispatch(df, p, fa, fb, [post](V x, V y) HWY_ATTR { return post(hn::Sub(x, y)); });
      return true;
    case OpCode::kMul:
      fused_dispatch(df, p, fa, fb, [post](V x, V y) HWY_ATTR { return post(hn::Mul(x, y)); });
      return true;
    case OpCode::kDiv:
      fused_dispatch(df, p, fa, fb, [post](V x, V y) HWY_ATTR { return post(hn::Div(x, y)); });
      return true;
    case OpCode::kMax:
      fused_dispatch(df, p, fa, fb,
                     [df, post](V x, V y) HWY_ATTR { return post(MaxNaN(df, x, y)); });
      return true;
    case OpCode::kMin:
      fused_dispatch(df, p, fa, fb,
                     [df, post](V x, V y) HWY_ATTR { return post(MinNaN(df, x, y)); });
      return true;
    default:
      return false;
  }
}

template <class DF>
bool fused_binary(DF df, const FusedDst& p, OpCode op, const FusedOperand& fa,
                  const FusedOperand& fb) {
  return fused_binary(df, p, op, fa, fb, [](hn::Vec<DF> v) HWY_ATTR { return v; });
}

// ---- two-op chains: d = (a op1 b) op2 c, or c op2 (a op1 b) -------------------------------------
// The commonest three-operand statements (flash attention's acc * alpha + p @ v, a scale and a
// shift, (x - mean) * rstd) in registers: the tile evaluator took a (128, 128) acc * alpha + x
// through four lane buffers in 6.5 us, four times one fused binary op. op1 and op2 are add, sub
// or mul; each operand a row, a per-row scalar or a constant (at least one a row); the same ops
// in the same order as the tile evaluator, so the same bits.

struct ChainOperand {
  const float* p;  // the row's first element, or the scalar (null for an iota)
  bool row;
  int64_t base;  // an iota's value at the row's first element
  int64_t coef;  // an iota's coefficient along the row
};

// The most operands a fused chain or tree takes (vector_fused_tree-inl.h).
inline constexpr int kMaxFusedOperands = 16;

// Calls row_fn(o, d) for every row of the destination: o[i] is operand f[i]'s row (or scalar)
// there, d the destination row. Inside a pipeline step the prefetch queue is drained as the rows
// are stored (step_hints.h).
template <class RowFn>
void for_each_chain_row(const FusedDst& p, const FusedOperand* f, int no, RowFn row_fn) {
  const int nd = p.nd;
  PrefetchQueue* queue = p.prefetch;
  if (queue != nullptr) {
    queue->materialize();
    if (!queue->active()) queue = nullptr;
  }
  const int64_t row_bytes = p.extent[nd - 1] * static_cast<int64_t>(sizeof(float));
  SmallVec idx(nd, 0);  // the row's index over the axes outside the row
  for (;;) {
    ChainOperand o[kMaxFusedOperands];
    for (int i = 0; i < no; ++i) {
      if (f[i].kind == FusedArg::kIota) {
        // (`value` holds an int32 iota's offset, 0 for the others: vector_tree_compile-inl.h.)
        int64_t first = std::bit_cast<int32_t>(f[i].value);
        for (int d = 0; d + 1 < nd; ++d) first += idx[d] * f[i].stride[d];
        o[i] = ChainOperand{nullptr, false, first, f[i].stride[nd - 1]};
        continue;
      }
      const float* base = f[i].stride == nullptr ? &f[i].value : f[i].data;
      if (f[i].stride != nullptr) {
        for (int d = 0; d + 1 < nd; ++d) base += idx[d] * f[i].stride[d];
      }
      o[i] = ChainOperand{base, f[i].kind == FusedArg::kRow, 0, 0};
    }
    float* dst = p.data;
    for (int d = 0; d + 1 < nd; ++d) dst += idx[d] * p.stride[d];
    row_fn(o, dst);
    if (queue != nullptr) drain_prefetch(*queue, row_bytes);
    int d = nd - 2;
    for (; d >= 0; --d) {
      if (++idx[d] < p.extent[d]) break;
      idx[d] = 0;
    }
    if (d < 0) break;
  }
}

// Keeps the compiler from contracting the op that made `v` with the next into one FMA (GCC
// contracts a vector multiply and add by default): each op of a chain rounds on its own, as the
// tile evaluator's separate nodes do. (The emulated targets have no FMA to contract into.)
template <class V>
HWY_INLINE V rounded(V v) {
#if HWY_ARCH_X86 && HWY_TARGET != HWY_EMU128 && HWY_TARGET != HWY_SCALAR
  asm("" : "+v"(v.raw));
#endif
  return v;
}

template <class DF>
HWY_INLINE hn::Vec<DF> chain_op(DF, OpCode op, hn::Vec<DF> x, hn::Vec<DF> y) {
  if (op == OpCode::kAdd) return hn::Add(x, y);
  if (op == OpCode::kSub) return hn::Sub(x, y);
  return hn::Mul(x, y);
}

// One row of `len` elements. Op1 / Op2 are the op codes (template arguments, so that the loop
// holds no switch); CFirst: c is op2's first operand.
template <OpCode Op1, OpCode Op2, bool CFirst, class DF>
HWY_INLINE void chain_row(DF df, ChainOperand a, ChainOperand b, ChainOperand c, float* d,
                          int64_t len, bool stream) {
  using V = hn::Vec<DF>;
  const int64_t N = static_cast<int64_t>(hn::Lanes(df));
  const V va = hn::Set(df, a.row ? 0.0f : *a.p);
  const V vb = hn::Set(df, b.row ? 0.0f : *b.p);
  const V vc = hn::Set(df, c.row ? 0.0f : *c.p);
  auto op = [df](V x, V y, V z) HWY_ATTR {
    const V r = rounded(chain_op(df, Op1, x, y));
    return CFirst ? chain_op(df, Op2, z, r) : chain_op(df, Op2, r, z);
  };
  auto value = [&](int64_t j) HWY_ATTR {
    return op(a.row ? hn::LoadU(df, a.p + j) : va, b.row ? hn::LoadU(df, b.p + j) : vb,
              c.row ? hn::LoadU(df, c.p + j) : vc);
  };
  const int64_t j = stream && reinterpret_cast<uintptr_t>(d) % (N * sizeof(float)) == 0
                        ? store_vectors<true>(df, d, len, value)
                        : store_vectors<false>(df, d, len, value);
  if (j < len) {  // the tail, through vectors of lanes, as fused_row
    HWY_ALIGN float t[3][hn::MaxLanes(df)] = {};
    HWY_ALIGN float to[hn::MaxLanes(df)];
    const size_t rest = static_cast<size_t>(len - j) * sizeof(float);
    if (a.row) std::memcpy(t[0], a.p + j, rest);
    if (b.row) std::memcpy(t[1], b.p + j, rest);
    if (c.row) std::memcpy(t[2], c.p + j, rest);
    hn::Store(op(a.row ? hn::Load(df, t[0]) : va, b.row ? hn::Load(df, t[1]) : vb,
                 c.row ? hn::Load(df, t[2]) : vc),
              df, to);
    std::memcpy(d + j, to, rest);
  }
}

// The rows of one 2-D slab: `rows` rows from o (a, b, c), each operand moving on by its step
// between rows (`down`: a row's stride, a per-row scalar's, or 0 for a constant), the row's own
// loop inlined. Walking by pointer steps rather than from each row's index (for_each_chain_row)
// and calling the row in line took a (512, 32) acc * alpha + x from 8.0 to 1.8 us
// (docs/performance.md, "A chain's rows").
template <OpCode Op1, OpCode Op2, bool CFirst, class DF>
void chain_rows(DF df, const ChainOperand* o, const int64_t* down, float* d, int64_t sd,
                int64_t rows, int64_t len, bool stream, PrefetchQueue* queue) {
  ChainOperand a = o[0], b = o[1], c = o[2];
  const int64_t row_bytes = len * static_cast<int64_t>(sizeof(float));
  for (int64_t r = 0; r < rows; ++r) {
    chain_row<Op1, Op2, CFirst>(df, a, b, c, d, len, stream);
    if (queue != nullptr) drain_prefetch(*queue, row_bytes);
    a.p += down[0];
    b.p += down[1];
    c.p += down[2];
    d += sd;
  }
}

template <class DF>
using ChainRowsFn = void (*)(DF, const ChainOperand*, const int64_t*, float*, int64_t, int64_t,
                             int64_t, bool, PrefetchQueue*);

template <OpCode Op1, class DF>
ChainRowsFn<DF> chain_rows_for(OpCode op2, bool c_first) {
  switch (op2) {
    case OpCode::kAdd:
      return c_first ? &chain_rows<Op1, OpCode::kAdd, true, DF>
                     : &chain_rows<Op1, OpCode::kAdd, false, DF>;
    case OpCode::kSub:
      return c_first ? &chain_rows<Op1, OpCode::kSub, true, DF>
                     : &chain_rows<Op1, OpCode::kSub, false, DF>;
    case OpCode::kMul:
      return c_first ? &chain_rows<Op1, OpCode::kMul, true, DF>
                     : &chain_rows<Op1, OpCode::kMul, false, DF>;
    default:
      return nullptr;
  }
}

// d = (a op1 b) op2 c (c_first: c op2 (a op1 b)) on the fused path; false (nothing done) for
// other ops or when no operand is a row. The rows of each 2-D slab of the destination are walked
// by pointer steps (chain_rows); the slabs of a destination of more axes from their index.
template <class DF>
bool fused_chain(DF df, const FusedDst& p, OpCode op1, OpCode op2, bool c_first,
                 const FusedOperand (&f)[3]) {
  if (f[0].kind != FusedArg::kRow && f[1].kind != FusedArg::kRow && f[2].kind != FusedArg::kRow) {
    return false;
  }
  ChainRowsFn<DF> rows_fn = nullptr;
  if (op1 == OpCode::kAdd) rows_fn = chain_rows_for<OpCode::kAdd, DF>(op2, c_first);
  if (op1 == OpCode::kSub) rows_fn = chain_rows_for<OpCode::kSub, DF>(op2, c_first);
  if (op1 == OpCode::kMul) rows_fn = chain_rows_for<OpCode::kMul, DF>(op2, c_first);
  if (rows_fn == nullptr) return false;
  PrefetchQueue* queue = p.prefetch;
  if (queue != nullptr) {
    queue->materialize();
    if (!queue->active()) queue = nullptr;
  }
  const int nd = p.nd;
  const int row_axis = nd - 2;  // -1: one row
  const int64_t len = p.extent[nd - 1];
  const int64_t rows = row_axis >= 0 ? p.extent[row_axis] : 1;
  const int64_t sd = row_axis >= 0 ? p.stride[row_axis] : 0;
  // An operand's element stride along axis `d`; a constant stays where it is.
  auto stride = [&](const FusedOperand& x, int d) -> int64_t {
    return x.stride == nullptr || d < 0 ? 0 : x.stride[d];
  };
  int64_t down[3];
  for (int i = 0; i < 3; ++i) down[i] = stride(f[i], row_axis);
  SmallVec idx(nd > 2 ? nd - 2 : 0, 0);  // the slab's index over the axes outside the rows
  for (;;) {
    ChainOperand o[3];
    float* dst = p.data;
    for (int d = 0; d < nd - 2; ++d) dst += idx[d] * p.stride[d];
    for (int i = 0; i < 3; ++i) {
      const float* base = f[i].stride == nullptr ? &f[i].value : f[i].data;
      for (int d = 0; d < nd - 2; ++d) base += idx[d] * stride(f[i], d);
      o[i] = ChainOperand{base, f[i].kind == FusedArg::kRow, 0, 0};
    }
    rows_fn(df, o, down, dst, sd, rows, len, p.stream, queue);
    int d = nd - 3;
    for (; d >= 0; --d) {
      if (++idx[d] < p.extent[d]) break;
      idx[d] = 0;
    }
    if (d < 0) break;
  }
  return true;
}

}  // namespace tessera::detail::HWY_NAMESPACE
HWY_AFTER_NAMESPACE();

#endif  // TESSERA_NATIVE_VECTOR_FUSED_INL_H_
