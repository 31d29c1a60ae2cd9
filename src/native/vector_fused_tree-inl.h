// Per-target fused trees of the native VPU (vector_kernels.cc includes this once per Highway
// target): a float32 expression of any shape, up to kMaxTreeSteps steps of the float ops that
// UnaryV and BinaryV compute a vector at a time (+ - * / maximum minimum; neg abs sign square sqrt
// rsqrt exp exp2 log log1p tanh logistic sin cos erf floor ceil round integer_pow), over operands
// that are rows of refs, per-row scalars or constants: an activation (tanh-GELU
// 0.5 x (1 + tanh(c (x + 0.044715 x^3)))), a normalisation ((x - mean) * rstd * w + b), a scaled
// ReLU, a softmax's exp(s - max).
//
// The tree is compiled once per statement into a straight program of steps over one running
// value and a few saved ones (compile_tree), and the program runs once per chunk of four vectors
// of a row (tree_row): the steps are chosen at run time, the value stays in registers across
// them, so one loop serves every tree and no node makes a lane buffer. Each step is the tile
// evaluator's op (the same UnaryV / BinaryV) on the same operands in the same order, rounded on
// its own (`rounded`), so a fused tree gives the tile evaluator's bits.

// Re-included per target: the guard toggles with HWY_TARGET_TOGGLE (Highway's -inl.h idiom).
#if defined(TESSERA_NATIVE_VECTOR_FUSED_TREE_INL_H_) == defined(HWY_TARGET_TOGGLE)
#ifdef TESSERA_NATIVE_VECTOR_FUSED_TREE_INL_H_
#undef TESSERA_NATIVE_VECTOR_FUSED_TREE_INL_H_
#else
#define TESSERA_NATIVE_VECTOR_FUSED_TREE_INL_H_
#endif

#include <hwy/highway.h>

#include <algorithm>
#include <array>
#include <atomic>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <iterator>
#include <utility>

#include "native/vector_fused-inl.h"
#include "native/vector_math-inl.h"
#include "native/vector_plan.h"

HWY_BEFORE_NAMESPACE();
namespace tessera::detail::HWY_NAMESPACE {
namespace hn = hwy::HWY_NAMESPACE;

// The most steps and lane buffers a fused tree takes (larger trees take the tile evaluator), and
// the most subtrees of per-row scalars it computes once a row.
inline constexpr int kMaxTreeSteps = 32;
inline constexpr int kMaxTreeBuffers = 4;
inline constexpr int kMaxRowScalars = 8;
// The vectors of a row a chunk holds: the steps are dispatched once per chunk.
inline constexpr int kChunk = 16;

// A compiled tree is a list of steps, each one op of the tree over a chunk of a row: out =
// op(a) or op(a, b), where an input is an operand's row or scalar or a lane buffer (the value of
// a subtree below), and out is a lane buffer or, for the root, the destination row. A subtree
// whose leaves are all per-row scalars or constants (a normalisation's rsqrt(var + eps)) is
// computed once a row, before the row's chunks, by the row steps, on one vector; its value is a
// scalar to the steps (a row scalar, index kMaxFusedOperands + r). A step's code says which op
// and where its inputs are:
//   kUnaryBase + u * 3 + sa                  kUnaryVOps[u](a)
//   kBinaryBase + (b * 3 + sa) * 3 + sb      kBinaryVOps[b](a, b)
// with sa, sb the inputs' TreeSource.
enum class TreeSource : int { kRow, kScalar, kBuffer };
inline constexpr int kUnaryBase = 0;
inline constexpr int kBinaryBase = kUnaryBase + static_cast<int>(std::size(kUnaryVOps)) * 3;
inline constexpr int kNumCodes = kBinaryBase + static_cast<int>(std::size(kBinaryVOps)) * 9;

struct TreeInput {
  TreeSource src;
  int index;  // the operand (kRow, kScalar) or the lane buffer (kBuffer)
};

struct TreeStep {
  int code;
  int a, b;   // the inputs' operands or lane buffers
  int out;    // the lane buffer it writes; -1: the destination; -2 - r: row scalar r
  int64_t k;  // kIntegerPow's exponent
};

struct TreeProgram {
  FusedOperand f[kMaxFusedOperands];
  int no = 0;
  TreeStep steps[kMaxTreeSteps];  // once a chunk
  int ns = 0;
  TreeStep row_steps[kMaxTreeSteps];  // once a row, first
  int nr = 0;
  int row_scalars = 0;
};

// Builds the program of the tree under the last node of `p`. The subtrees of a node run one
// after the other, each leaving its value in a lane buffer, the one needing more buffers first
// (Sethi-Ullman order), so that a tree of n levels needs at most n buffers; leaves are read where
// they lie. Operands that are the same leaf (a ref read at the same place, a constant of the same
// bits) are one. False when the tree has a node the fused trees do not take: a dtype other than
// float32, a comparison, select, conversion, iota or an op UnaryV / BinaryV do not compute, a leaf
// that is not fusable (fusable_operand), or more steps, operands or buffers than they hold.
class TreeCompiler {
 public:
  TreeCompiler(const plan::Plan& p, TreeProgram& out) : p_(p), out_(out) {}

  bool compile() {
    const int nn = static_cast<int>(p_.nodes.size());
    if (nn > kMaxNodes || is_leaf(nn - 1)) return false;
    for (int i = 0; i < nn; ++i) {
      need_[i] = need(i);
      scalars_[i] = per_row(i);
    }
    TreeInput root;
    return need_[nn - 1] <= kMaxTreeBuffers && emit(nn - 1, 0, -1, root);
  }

 private:
  static constexpr int kMaxNodes = 4 * kMaxTreeSteps;
  static constexpr int kNo = kMaxTreeBuffers + 1;  // a need: too many, or a node not taken

  const plan::Node& node(int i) const { return p_.nodes[static_cast<size_t>(i)]; }
  bool is_leaf(int i) const { return node(i).op == OpCode::kLoad || node(i).op == OpCode::kConst; }

  // The lane buffers node i's subtree needs, from its operands' (which come before it).
  int need(int i) const {
    if (is_leaf(i)) return 0;
    const plan::Node& n = node(i);
    if (n.dtype != DType::kFloat32 || n.a < 0 || n.a >= i || n.b >= i || n.c >= 0) return kNo;
    if (n.b < 0) return op_index(kUnaryVOps, n.op) >= 0 ? std::max(1, need_[n.a]) : kNo;
    if (op_index(kBinaryVOps, n.op) < 0) return kNo;
    const int na = need_[n.a], nb = need_[n.b];
    return std::max(1, na == nb ? na + 1 : std::max(na, nb));
  }

  // Whether node i's value is one per row: a constant, a ref with stride 0 along the row, or an
  // op the fused trees take of such values.
  bool per_row(int i) const {
    const plan::Node& n = node(i);
    if (n.op == OpCode::kConst) return true;
    if (n.op == OpCode::kLoad) return n.stride[p_.extent.size() - 1] == 0;
    return need_[i] < kNo && scalars_[n.a] && (n.b < 0 || scalars_[n.b]);
  }

  // The operand of leaf i: one already taken when it is the same leaf, else a new one; -1 when
  // it is not fusable or there are too many.
  int operand(int i) {
    FusedOperand f;
    const int nd = p_.extent.size();
    if (!fusable_operand(node(i), nd, f)) return -1;
    for (int o = 0; o < out_.no; ++o) {
      const FusedOperand& g = out_.f[o];
      if (g.kind != f.kind || g.data != f.data) continue;
      if (f.stride == nullptr ? std::memcmp(&g.value, &f.value, sizeof f.value) == 0
                              : std::memcmp(g.stride, f.stride, sizeof(int64_t) * nd) == 0) {
        return o;
      }
    }
    if (out_.no == kMaxFusedOperands) return -1;
    out_.f[out_.no] = f;
    return out_.no++;
  }

  // Emits node i's subtree, its value going to lane buffer `buf` (-1: the destination), the
  // buffers below `buf` holding values still to be used; `in` says where the value is (a leaf
  // emits nothing and is read where it lies).
  bool emit(int i, int buf, int out, TreeInput& in) {
    const plan::Node& n = node(i);
    if (!is_leaf(i) && out >= 0 && scalars_[i] && !in_row_steps_) {
      // A subtree of per-row values: once a row, into row scalar r.
      if (out_.row_scalars == kMaxRowScalars) return false;
      const int r = out_.row_scalars++;
      TreeInput value;
      in_row_steps_ = true;
      const bool ok = emit(i, 0, -2 - r, value);
      in_row_steps_ = false;
      in = TreeInput{TreeSource::kScalar, kMaxFusedOperands + r};
      return ok;
    }
    if (is_leaf(i)) {
      const int o = operand(i);
      if (o < 0) return false;
      const bool row = out_.f[o].kind == FusedArg::kRow;
      in = TreeInput{row ? TreeSource::kRow : TreeSource::kScalar, o};
      return true;
    }
    int& ns = in_row_steps_ ? out_.nr : out_.ns;
    if (buf == kMaxTreeBuffers || ns == kMaxTreeSteps) return false;
    TreeInput a, b{TreeSource::kScalar, 0};
    int code;
    if (n.b < 0) {
      if (!emit(n.a, buf, buf, a)) return false;
      code = kUnaryBase + op_index(kUnaryVOps, n.op) * 3 + static_cast<int>(a.src);
    } else {
      // The subtree needing more buffers first, into `buf`; the other into the next one.
      const bool a_first = need_[n.a] >= need_[n.b];
      const int first_buf = need_[a_first ? n.a : n.b] > 0 ? buf : buf - 1;
      if (!emit(a_first ? n.a : n.b, buf, buf, a_first ? a : b) ||
          !emit(a_first ? n.b : n.a, first_buf + 1, first_buf + 1, a_first ? b : a)) {
        return false;
      }
      code = kBinaryBase + (op_index(kBinaryVOps, n.op) * 3 + static_cast<int>(a.src)) * 3 +
             static_cast<int>(b.src);
    }
    if (ns == kMaxTreeSteps) return false;
    (in_row_steps_ ? out_.row_steps : out_.steps)[ns++] =
        TreeStep{code, a.index, b.index, out, n.iconst};
    in = TreeInput{TreeSource::kBuffer, out};
    return true;
  }

  const plan::Plan& p_;
  TreeProgram& out_;
  int need_[kMaxNodes];
  bool scalars_[kMaxNodes];
  bool in_row_steps_ = false;
};

// ---- running a program ------------------------------------------------------------------------
// A row is run in chunks of up to kChunk vectors. Each step is one call, through a table made at
// compile time, of the function for its code, which runs the op over the chunk's vectors in a
// tight loop: one indirect call per step and chunk, and no step pays for the cases it is not.

using TreeDF = hn::ScalableTag<float>;
using TreeV = hn::Vec<TreeDF>;

// Where a chunk's steps read and write: operand i's row (or scalar) o[i] from the chunk's first
// element j of the row, the operands' broadcast scalars, the lane buffers and the destination
// (its chunk; `stream`: with streaming stores).
struct TreeChunk {
  const ChainOperand* o;
  int64_t j;
  const TreeV* scalar;
  float* const* buf;
  float* dst;
  bool stream;
  float* row_scalars;  // one vector each
};

// Input `index` of source S's k-th vector of the chunk, as get(k).
template <TreeSource S>
HWY_INLINE auto tree_input(const TreeChunk& c, int index) {
  const TreeDF df;
  const int64_t N = static_cast<int64_t>(hn::Lanes(df));
  if constexpr (S == TreeSource::kScalar) {
    return [v = c.scalar[index]](int64_t) HWY_ATTR { return v; };
  } else {
    const float* p = S == TreeSource::kRow ? c.o[index].p + c.j : c.buf[index];
    return [p, N, df](int64_t k) HWY_ATTR { return hn::LoadU(df, p + k * N); };
  }
}

// The step of code `Code` over the chunk's `nv` vectors.
template <int Code>
void tree_step(const TreeChunk& c, const TreeStep& st, int64_t nv) {
  const TreeDF df;
  const int64_t N = static_cast<int64_t>(hn::Lanes(df));
  auto value = [&]() HWY_ATTR {
    if constexpr (Code < kBinaryBase) {
      constexpr OpCode kOp = kUnaryVOps[(Code - kUnaryBase) / 3];
      const auto a = tree_input<static_cast<TreeSource>((Code - kUnaryBase) % 3)>(c, st.a);
      const int64_t e = st.k;
      return [a, e, df](int64_t k) HWY_ATTR { return UnaryV<kOp>(df, e, a(k)); };
    } else {
      constexpr int kIdx = Code - kBinaryBase;
      constexpr OpCode kOp = kBinaryVOps[kIdx / 9];
      const auto a = tree_input<static_cast<TreeSource>(kIdx / 3 % 3)>(c, st.a);
      const auto b = tree_input<static_cast<TreeSource>(kIdx % 3)>(c, st.b);
      return [a, b, df](int64_t k) HWY_ATTR { return BinaryV<kOp>(df, a(k), b(k)); };
    }
  }();
  float* out = st.out >= 0    ? c.buf[st.out]
               : st.out == -1 ? c.dst
                              : c.row_scalars + (-2 - st.out) * hn::MaxLanes(df);
  if (st.out < 0 && c.stream) {
    for (int64_t k = 0; k < nv; ++k) hn::Stream(value(k), df, out + k * N);
  } else {
    for (int64_t k = 0; k < nv; ++k) hn::StoreU(value(k), df, out + k * N);
  }
}

using TreeStepFn = void (*)(const TreeChunk&, const TreeStep&, int64_t);

template <size_t... I>
constexpr std::array<TreeStepFn, sizeof...(I)> tree_step_table(std::index_sequence<I...>) {
  return {&tree_step<static_cast<int>(I)>...};
}
inline constexpr std::array<TreeStepFn, kNumCodes> kTreeSteps =
    tree_step_table(std::make_index_sequence<kNumCodes>());

// One row of the tree over `len` elements: o[i] is operand i's row (or scalar) there.
inline void tree_row(const TreeProgram& t, const ChainOperand* o, float* d, int64_t len,
                     bool stream) {
  const TreeDF df;
  const int64_t N = static_cast<int64_t>(hn::Lanes(df));
  TreeV scalar[kMaxFusedOperands + kMaxRowScalars];
  for (int i = 0; i < t.no; ++i) scalar[i] = hn::Set(df, o[i].row ? 0.0f : *o[i].p);
  HWY_ALIGN float lanes[kMaxTreeBuffers][kChunk * hn::MaxLanes(df)];
  HWY_ALIGN float row_scalars[kMaxRowScalars][hn::MaxLanes(df)];
  float* const buf[kMaxTreeBuffers] = {lanes[0], lanes[1], lanes[2], lanes[3]};
  TreeChunk c{o,
              0,
              scalar,
              buf,
              d,
              stream && reinterpret_cast<uintptr_t>(d) % (N * 4) == 0,
              row_scalars[0]};
  for (int s = 0; s < t.nr; ++s) kTreeSteps[t.row_steps[s].code](c, t.row_steps[s], 1);
  for (int r = 0; r < t.row_scalars; ++r) {
    scalar[kMaxFusedOperands + r] = hn::Load(df, row_scalars[r]);
  }
  auto run = [&](int64_t nv) {
    for (int s = 0; s < t.ns; ++s) kTreeSteps[t.steps[s].code](c, t.steps[s], nv);
  };
  const int64_t whole = len / N * N;
  for (; c.j < whole; c.j += kChunk * N, c.dst += kChunk * N) {
    run(std::min<int64_t>(kChunk, (whole - c.j) / N));
  }
  if (whole < len) {  // the tail, through vectors of lanes, as fused_row
    HWY_ALIGN float tail[kMaxFusedOperands][hn::MaxLanes(df)];
    HWY_ALIGN float out[hn::MaxLanes(df)];
    ChainOperand to[kMaxFusedOperands];
    const size_t rest = static_cast<size_t>(len - whole) * sizeof(float);
    for (int i = 0; i < t.no; ++i) {
      std::memset(tail[i], 0, sizeof tail[i]);
      if (o[i].row) std::memcpy(tail[i], o[i].p + whole, rest);
      to[i] = ChainOperand{tail[i], o[i].row};
    }
    c = TreeChunk{to, 0, scalar, buf, out, false, row_scalars[0]};
    run(1);
    std::memcpy(d + whole, out, rest);
  }
}

// d = the tree `t` on the fused path, row by row; false (nothing done) when no operand is a row.
inline bool fused_tree(const FusedDst& p, const TreeProgram& t) {
  bool any_row = false;
  for (int i = 0; i < t.no; ++i) any_row = any_row || t.f[i].kind == FusedArg::kRow;
  if (!any_row) return false;
  g_fused_trees_for_test.fetch_add(1, std::memory_order_relaxed);
  const int64_t len = p.extent[p.nd - 1];
  for_each_chain_row(p, t.f, t.no, [&](const ChainOperand* o, float* dst) HWY_ATTR {
    tree_row(t, o, dst, len, p.stream);
  });
  return true;
}

}  // namespace tessera::detail::HWY_NAMESPACE
HWY_AFTER_NAMESPACE();

#endif  // TESSERA_NATIVE_VECTOR_FUSED_TREE_INL_H_
