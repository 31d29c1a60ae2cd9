// Per-target compilation of the native VPU's fused trees (vector_fused_tree-inl.h, which runs
// them): a plan whose nodes form a tree the fused trees take becomes a TreeProgram, a straight
// list of three-address steps.

// Re-included per target: the guard toggles with HWY_TARGET_TOGGLE (Highway's -inl.h idiom).
#if defined(TESSERA_NATIVE_VECTOR_TREE_COMPILE_INL_H_) == defined(HWY_TARGET_TOGGLE)
#ifdef TESSERA_NATIVE_VECTOR_TREE_COMPILE_INL_H_
#undef TESSERA_NATIVE_VECTOR_TREE_COMPILE_INL_H_
#else
#define TESSERA_NATIVE_VECTOR_TREE_COMPILE_INL_H_
#endif

#include <hwy/highway.h>

#include <algorithm>
#include <bit>
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

// The most steps and lane buffers a fused tree takes (larger trees take the tile evaluator), and
// the most subtrees of per-row scalars it computes once a row.
inline constexpr int kMaxTreeSteps = 32;
inline constexpr int kMaxTreeBuffers = 4;
inline constexpr int kMaxRowScalars = 8;

// A compiled tree is a list of steps, each one node of the tree over a chunk of a row: out =
// op(a), op(a, b) or select(c, a, b), where an input is an operand's row or scalar or a lane
// buffer (the value of a subtree below), and out is a lane buffer or, for the root, the
// destination row. Lanes are 32 bits: float32 values, int32 values, or bools as int32 0 or 1 (as
// the tile evaluator keeps them). A subtree whose leaves are all per-row scalars or constants (a
// normalisation's rsqrt(var + eps)) is computed once a row, before the row's chunks, by the row
// steps, on one vector; its value is a scalar to the steps (a row scalar, index
// kMaxFusedOperands + r). A step's code says which op and where its inputs are (s = 3 * sa + sb,
// sa and sb the inputs' TreeSource):
//   kFloatUnary + 3 * u + sa   kUnaryVOps[u](a) of float lanes
//   kFloatBinary + 9 * b + s   kBinaryVOps[b](a, b) of float lanes
//   kIntBinary + 9 * b + s     kIntBinaryVOps[b](a, b) of int32 or bool lanes
//   kCompareF + 9 * b + s      kCompareOps[b](a, b) of float lanes, a bool
//   kCompareI + 9 * b + s      kCompareOps[b](a, b) of int32 lanes, a bool
//   kSelect + 9 * sc + s       c ? a : b, c a bool from a buffer (sc 0) or a scalar (sc 1)
//   kIotaF, kIotaI             float32 or int32 iota operand `a` (its value at each element; an
//                              int32 iota plus a constant is one, the constant its offset)
enum class TreeSource : int { kRow, kScalar, kBuffer };
inline constexpr int kFloatUnary = 0;
inline constexpr int kFloatBinary = kFloatUnary + 3 * static_cast<int>(std::size(kUnaryVOps));
inline constexpr int kIntBinary = kFloatBinary + 9 * static_cast<int>(std::size(kBinaryVOps));
inline constexpr int kCompareF = kIntBinary + 9 * static_cast<int>(std::size(kIntBinaryVOps));
inline constexpr int kCompareI = kCompareF + 9 * static_cast<int>(std::size(kCompareOps));
inline constexpr int kSelect = kCompareI + 9 * static_cast<int>(std::size(kCompareOps));
inline constexpr int kIotaF = kSelect + 18;
inline constexpr int kIotaI = kIotaF + 1;
inline constexpr int kNumCodes = kIotaI + 1;

struct TreeInput {
  TreeSource src = TreeSource::kScalar;
  int index = 0;  // the operand (kRow, kScalar) or the lane buffer (kBuffer)
};

struct TreeStep {
  int code;
  int a, b, c;  // the inputs' operands or lane buffers
  int out;      // the lane buffer it writes; -1: the destination; -2 - r: row scalar r
  int64_t k;    // kIntegerPow's exponent
};

struct TreeProgram {
  FusedOperand f[kMaxFusedOperands];
  int no = 0;
  TreeStep steps[kMaxTreeSteps];  // once a chunk
  int ns = 0;
  TreeStep row_steps[kMaxTreeSteps];  // once a row, first
  int nr = 0;
  int row_scalars = 0;
  // The row steps again, with a row per lane (2-D destinations only): the row scalars of a run of
  // rows at once, each step over vectors of rows. Their per-row operands are read as rows (a
  // column with stride 1 between rows), an iota over the rows steps by its row coefficient.
  // Empty (nb 0) where a row scalar's leaves cannot be read so (a column strided between rows, a
  // float32 iota: its lanes would be rounded in a different order).
  TreeStep by_rows[kMaxTreeSteps];
  int nb = 0;
};

// Builds the program of the tree under the last node of `p`. The subtrees of a node run one
// after the other, each leaving its value in a lane buffer, the one needing more buffers first
// (Sethi-Ullman order), so that a tree of n levels needs at most n buffers; leaves are read where
// they lie. Operands that are the same leaf (a ref read at the same place, a constant of the same
// bits, an iota of the same coefficients) are one. False when the tree has a node the fused
// trees do not take (a conversion, a dtype other than float32, int32 and bool, an op not in the
// lists above, a leaf that is not a row, a per-row scalar or a constant), or more steps,
// operands, buffers or row scalars than they hold.
class TreeCompiler {
 public:
  TreeCompiler(const plan::Plan& p, TreeProgram& out) : p_(p), out_(out) {}

  bool compile() {
    const int nn = static_cast<int>(p_.nodes.size());
    if (nn > kMaxNodes || is_leaf(p_, nn - 1) || dtype(nn - 1) != DType::kFloat32) return false;
    for (int i = 0; i < nn; ++i) {
      base_[i] = code_base(i);
      need_[i] = need(i);
      scalars_[i] = per_row(i);
    }
    TreeInput root;
    if (need_[nn - 1] > kMaxTreeBuffers || !emit(nn - 1, 0, -1, root)) return false;
    compile_by_rows();
    return true;
  }

 private:
  static constexpr int kMaxNodes = 4 * kMaxTreeSteps;
  static constexpr int kNo = kMaxTreeBuffers + 1;  // a need: too many, or a node not taken
  static constexpr int kLeaf = -1;                 // code_base: a load or a constant
  static constexpr int kNoCode = -2;               // code_base: a node not taken

  const plan::Node& node(int i) const { return p_.nodes[static_cast<size_t>(i)]; }
  DType dtype(int i) const { return node(i).dtype; }

  // The first code of node i's op (its inputs' sources are added to it), kLeaf for a leaf,
  // kNoCode for a node the fused trees do not take. Operands come before their node.
  int code_base(int i) const {
    const plan::Node& n = node(i);
    const DType t = n.dtype;
    const bool f32 = t == DType::kFloat32, i32 = t == DType::kInt32;
    if (is_leaf(p_, i)) return f32 || i32 ? kLeaf : kNoCode;
    if (n.op == OpCode::kIota) return f32 ? kIotaF : i32 ? kIotaI : kNoCode;
    if (n.a < 0 || n.a >= i || n.b >= i || n.c >= i) return kNoCode;
    if (offset_iota(i) >= 0) return kIotaI;
    if (n.op == OpCode::kSelect) {
      const bool ok =
          (f32 || i32) && dtype(n.a) == t && dtype(n.b) == t && dtype(n.c) == DType::kBool;
      return ok ? kSelect : kNoCode;
    }
    if (n.c >= 0) return kNoCode;
    if (n.b < 0) {
      const int u = op_index(kUnaryVOps, n.op);
      return f32 && dtype(n.a) == t && u >= 0 ? kFloatUnary + 3 * u : kNoCode;
    }
    return dtype(n.b) == dtype(n.a) ? binary_code_base(n.op, t, dtype(n.a)) : kNoCode;
  }

  // The first code of binary op `op` of two operands of dtype `in` giving dtype `t`.
  static int binary_code_base(OpCode op, DType t, DType in) {
    const int fb = op_index(kBinaryVOps, op), ib = op_index(kIntBinaryVOps, op);
    const int cmp = op_index(kCompareOps, op);
    const bool logical = op == OpCode::kAnd || op == OpCode::kOr || op == OpCode::kXor;
    if (t == DType::kFloat32 && in == t && fb >= 0) return kFloatBinary + 9 * fb;
    if (ib >= 0 && in == t && (t == DType::kInt32 || (t == DType::kBool && logical))) {
      return kIntBinary + 9 * ib;
    }
    if (t == DType::kBool && cmp >= 0 && in == DType::kFloat32) return kCompareF + 9 * cmp;
    if (t == DType::kBool && cmp >= 0 && in == DType::kInt32) return kCompareI + 9 * cmp;
    return kNoCode;
  }

  // The int32 iota of node i when it is that iota plus an int32 constant (a mask's q0 + iota,
  // computed as one iota: the sum wraps as the iota's own value does), else -1.
  int offset_iota(int i) const {
    const plan::Node& n = node(i);
    if (n.op != OpCode::kAdd || n.dtype != DType::kInt32 || n.b < 0) return -1;
    for (auto [iota, c] : {std::pair{n.a, n.b}, std::pair{n.b, n.a}}) {
      if (node(iota).op == OpCode::kIota && dtype(iota) == DType::kInt32 &&
          node(c).op == OpCode::kConst && dtype(c) == DType::kInt32) {
        return iota;
      }
    }
    return -1;
  }

  // Node i's operand `pos` (0: a, 1: b, 2: c).
  int operand_node(int i, int pos) const {
    const plan::Node& n = node(i);
    return pos == 0 ? n.a : pos == 1 ? n.b : n.c;
  }
  // Node i's operand positions in the order they run (more buffers needed first), and how many.
  int children(int i, int (&pos)[3]) const {
    int m = 0;
    for (int k = 0; k < 3; ++k) {
      if (operand_node(i, k) >= 0) pos[m++] = k;
    }
    // An insertion sort, stable (std::stable_sort may allocate a buffer).
    for (int x = 1; x < m; ++x) {
      for (int y = x; y > 0 && need_[operand_node(i, pos[y])] > need_[operand_node(i, pos[y - 1])];
           --y) {
        std::swap(pos[y], pos[y - 1]);
      }
    }
    return m;
  }

  // The lane buffers node i's subtree needs, from its operands'.
  int need(int i) const {
    if (base_[i] == kLeaf) return 0;
    if (base_[i] == kNoCode) return kNo;
    int ch[3];
    const int m = children(i, ch);
    int most = 1;
    for (int k = 0; k < m; ++k) {  // leaves (need 0, last) take no buffer
      const int x = need_[operand_node(i, ch[k])];
      if (x > 0) most = std::max(most, x + k);
    }
    return std::min(most, kNo);
  }

  // The row steps with a row per lane (TreeProgram::by_rows), where the destination is 2-D and
  // every row scalar's leaves can be read so; else none.
  void compile_by_rows() {
    if (out_.row_scalars == 0 || p_.extent.size() != 2) return;
    by_rows_ = in_row_steps_ = true;
    bool ok = true;
    for (int r = 0; r < out_.row_scalars && ok; ++r) {
      TreeInput value;
      ok = emit(row_root_[r], 0, -2 - r, value);
    }
    by_rows_ = in_row_steps_ = false;
    for (int s = 0; s < out_.nb && ok; ++s) ok = out_.by_rows[s].code != kIotaF;
    if (!ok) out_.nb = 0;
  }

  // Whether node i's value is one per row: a constant, a ref or an iota with stride 0 along the
  // row (a mask's iota over the rows), or an op the fused trees take of such values.
  bool per_row(int i) const {
    const plan::Node& n = node(i);
    const int last = static_cast<int>(p_.extent.size()) - 1;
    if (n.op == OpCode::kConst) return true;
    if (n.op == OpCode::kLoad) return n.stride[last] == 0;
    if (base_[i] == kIotaF || base_[i] == kIotaI) {
      const int iota = n.op == OpCode::kIota ? i : offset_iota(i);
      return node(iota).stride[last] == 0;
    }
    if (need_[i] >= kNo) return false;
    int ch[3];
    const int m = children(i, ch);
    for (int k = 0; k < m; ++k) {
      if (!scalars_[operand_node(i, ch[k])]) return false;
    }
    return true;
  }

  // Leaf or iota i as an operand: false when it is neither a row, a per-row scalar nor a
  // constant.
  bool make_operand(int i, FusedOperand& f) const {
    const plan::Node& n = node(i);
    const int nd = p_.extent.size();
    if (n.op == OpCode::kIota) {
      f = FusedOperand{FusedArg::kIota, nullptr, n.stride.data(), 0};
      return true;
    }
    if (const int iota = offset_iota(i); iota >= 0) {  // `value` holds the offset's bits
      const int32_t offset = node(n.a == iota ? n.b : n.a).ival;
      f = FusedOperand{FusedArg::kIota, nullptr, node(iota).stride.data(),
                       std::bit_cast<float>(offset)};
      return true;
    }
    if (n.dtype == DType::kFloat32) return fusable_operand(n, nd, f);
    if (n.op == OpCode::kConst) {  // int32: its bits, as the lanes hold them
      f = FusedOperand{FusedArg::kScalar, nullptr, nullptr, std::bit_cast<float>(n.ival)};
      return true;
    }
    // An int32 ref, read as 32-bit lanes as a float32 one is.
    const int64_t s = n.stride[nd - 1];
    if (s != 0 && s != 1) return false;
    f = FusedOperand{s == 1 ? FusedArg::kRow : FusedArg::kScalar,
                     reinterpret_cast<const float*>(n.data), n.stride.data(), 0};
    return true;
  }

  // The operand of leaf or iota i: one already taken when it is the same, else a new one; -1
  // when it cannot be one or there are too many.
  int operand(int i) {
    FusedOperand f;
    const int nd = p_.extent.size();
    if (!make_operand(i, f)) return -1;
    for (int o = 0; o < out_.no; ++o) {
      const FusedOperand& g = out_.f[o];
      if (g.kind != f.kind || g.data != f.data) continue;
      const bool same_value = std::memcmp(&g.value, &f.value, sizeof f.value) == 0;
      if (f.stride == nullptr ? same_value
                              : std::memcmp(g.stride, f.stride, sizeof(int64_t) * nd) == 0 &&
                                    (f.kind != FusedArg::kIota || same_value)) {
        return o;
      }
    }
    if (out_.no == kMaxFusedOperands) return -1;
    out_.f[out_.no] = f;
    return out_.no++;
  }

  // Emits node i's operands, the ones needing more buffers first, each into the next free buffer
  // from `buf`, and completes st's code (their sources) and inputs.
  bool emit_inputs(int i, int buf, TreeStep& st) {
    const plan::Node& n = node(i);
    int ch[3];
    const int m = children(i, ch);
    TreeInput ins[3];  // by operand: a, b, c
    int free = buf;
    for (int k = 0; k < m; ++k) {
      TreeInput& in_k = ins[ch[k]];
      if (!emit(operand_node(i, ch[k]), free, free, in_k)) return false;
      if (in_k.src == TreeSource::kBuffer) ++free;
    }
    if (n.b < 0) {
      st.code += static_cast<int>(ins[0].src);
    } else {
      st.code += 3 * static_cast<int>(ins[0].src) + static_cast<int>(ins[1].src);
    }
    if (n.op == OpCode::kSelect) {
      if (ins[2].src == TreeSource::kRow) return false;  // a bool row is not an operand
      st.code += ins[2].src == TreeSource::kBuffer ? 0 : 9;
    }
    st.a = ins[0].index;
    st.b = ins[1].index;
    st.c = ins[2].index;
    return true;
  }

  // Emits node i's subtree, its value going to lane buffer `out` (-1: the destination, -2 - r:
  // row scalar r), buffers `buf` on free for its operands' values; `in` says where the value is
  // (a leaf emits nothing and is read where it lies).
  bool emit(int i, int buf, int out, TreeInput& in) {
    const plan::Node& n = node(i);
    if (base_[i] == kLeaf) {
      const int o = operand(i);
      if (o < 0) return false;
      bool row = out_.f[o].kind == FusedArg::kRow;
      if (by_rows_ && out_.f[o].stride != nullptr) {
        // With a row per lane, a column with stride 1 between rows is a row; 0, a scalar.
        const int64_t between = out_.f[o].stride[0];
        if (between != 0 && between != 1) return false;
        row = between == 1;
      }
      in = TreeInput{row ? TreeSource::kRow : TreeSource::kScalar, o};
      return true;
    }
    if (out >= 0 && scalars_[i] && !in_row_steps_) {
      // A subtree of per-row values: once a row, into row scalar r.
      if (out_.row_scalars == kMaxRowScalars) return false;
      row_root_[out_.row_scalars] = i;
      const int r = out_.row_scalars++;
      TreeInput value;
      in_row_steps_ = true;
      const bool ok = emit(i, 0, -2 - r, value);
      in_row_steps_ = false;
      in = TreeInput{TreeSource::kScalar, kMaxFusedOperands + r};
      return ok;
    }
    if (buf == kMaxTreeBuffers) return false;
    TreeStep st{base_[i], 0, 0, 0, out, n.iconst};
    if (st.code == kIotaF || st.code == kIotaI) {
      st.a = operand(i);
      if (st.a < 0) return false;
    } else if (!emit_inputs(i, buf, st)) {
      return false;
    }
    int& ns = by_rows_ ? out_.nb : in_row_steps_ ? out_.nr : out_.ns;
    if (ns == kMaxTreeSteps) return false;
    (by_rows_ ? out_.by_rows : in_row_steps_ ? out_.row_steps : out_.steps)[ns++] = st;
    in = TreeInput{TreeSource::kBuffer, out};
    return true;
  }

  const plan::Plan& p_;
  TreeProgram& out_;
  int base_[kMaxNodes];
  int need_[kMaxNodes];
  bool scalars_[kMaxNodes];
  int row_root_[kMaxRowScalars];  // the node whose value row scalar r is
  bool in_row_steps_ = false;
  bool by_rows_ = false;  // emitting TreeProgram::by_rows
};

}  // namespace tessera::detail::HWY_NAMESPACE
HWY_AFTER_NAMESPACE();

#endif  // TESSERA_NATIVE_VECTOR_TREE_COMPILE_INL_H_
