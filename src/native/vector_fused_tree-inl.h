// Per-target fused trees of the native VPU (vector_kernels.cc includes this once per Highway
// target): an expression of any shape of up to kMaxTreeSteps nodes, float32 at its root, over
// operands that are rows of refs, per-row scalars, constants or iotas: an activation (tanh-GELU
// 0.5 x (1 + tanh(c (x + 0.044715 x^3)))), a normalisation ((x - mean) * rsqrt(var + eps) * w +
// b), a mask (where(q0 + iota0 >= k0 + iota1, s, -inf)), a softmax's exp(s - max) / sum. Its
// nodes are the float ops UnaryV and BinaryV compute a vector at a time, int32 + - * max min and
// bitwise ops, comparisons of floats or int32s, & | ^ of bools and selects (vector_math-inl.h).
//
// The tree is compiled once per statement into three-address steps (vector_tree_compile-inl.h),
// which run over each row in chunks of up to kChunk vectors (tree_row): each step reads its
// inputs where they are (a row, a scalar, a lane buffer of the chunk) and writes a lane buffer
// or the destination, so no node makes a buffer for a whole tile and no leaf is copied. Each step
// is the tile evaluator's op (the same UnaryV, BinaryV, IntBinaryV, CompareV) on the same inputs
// in the same order, rounded on its own (`rounded`), so a fused tree gives the tile evaluator's
// bits.

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
#include <bit>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <iterator>
#include <utility>

#include "native/vector_fused-inl.h"
#include "native/vector_math-inl.h"
#include "native/vector_plan.h"
#include "native/vector_tree_compile-inl.h"

HWY_BEFORE_NAMESPACE();
namespace tessera::detail::HWY_NAMESPACE {
namespace hn = hwy::HWY_NAMESPACE;

// ---- running a program ------------------------------------------------------------------------
// A row is run in chunks of up to kChunk vectors. Each step is one call, through a table made at
// compile time, of the function for its code, which runs the op over the chunk's vectors in a
// tight loop: one indirect call per step and chunk, and no step pays for the cases it is not.
inline constexpr int kChunk = 16;

using TreeDF = hn::ScalableTag<float>;
using TreeV = hn::Vec<TreeDF>;

// Where a chunk's steps read and write: operand i's row (or scalar, or iota) o[i] from element j
// of it, the operands' broadcast scalars, the lane buffers and the destination
// (its chunk; `stream`: with streaming stores).
struct TreeChunk {
  const ChainOperand* o;
  int64_t j;
  int64_t pos;  // the chunk's first element's index along the row (an iota's)
  const TreeV* scalar;
  float* const* buf;
  float* dst;
  bool stream;
  float* row_scalars;  // row scalar r's vectors at row_scalars + r * rs_stride
  int64_t rs_stride;
};

// Input `index` of source S's k-th vector of the chunk, as get(k).
template <TreeSource S>
HWY_INLINE auto tree_input(const TreeChunk& c, int index) {
  if constexpr (S == TreeSource::kScalar) {
    return [v = c.scalar[index]](int64_t) HWY_ATTR { return v; };
  } else {
    const float* p = S == TreeSource::kRow ? c.o[index].p + c.j : c.buf[index];
    // (Capturing only the pointer: a capture of two words was copied through a 16-byte
    // load of two 8-byte stores, which store forwarding does not serve.)
    return [p](int64_t k) HWY_ATTR {
      const TreeDF d;
      return hn::LoadU(d, p + k * static_cast<int64_t>(hn::Lanes(d)));
    };
  }
}

// The value of the step of code `Code`, as value(k) for the chunk's k-th vector.
template <int Code>
HWY_INLINE auto tree_value(const TreeChunk& c, const TreeStep& st) {
  const TreeDF df;
  const hn::RebindToSigned<TreeDF> di;
  const int64_t N = static_cast<int64_t>(hn::Lanes(df));
  if constexpr (Code < kFloatBinary) {
    constexpr OpCode kOp = kUnaryVOps[(Code - kFloatUnary) / 3];
    const auto a = tree_input<static_cast<TreeSource>((Code - kFloatUnary) % 3)>(c, st.a);
    const int64_t e = st.k;
    return [a, e, df](int64_t k) HWY_ATTR { return UnaryV<kOp>(df, e, a(k)); };
  } else if constexpr (Code < kSelect) {
    constexpr int kRange = Code < kIntBinary  ? kFloatBinary
                           : Code < kCompareF ? kIntBinary
                           : Code < kCompareI ? kCompareF
                                              : kCompareI;
    constexpr int kIdx = Code - kRange;
    const auto a = tree_input<static_cast<TreeSource>(kIdx / 3 % 3)>(c, st.a);
    const auto b = tree_input<static_cast<TreeSource>(kIdx % 3)>(c, st.b);
    return [a, b, df, di](int64_t k) HWY_ATTR {
      if constexpr (kRange == kFloatBinary) {
        return BinaryV<kBinaryVOps[kIdx / 9]>(df, a(k), b(k));
      } else if constexpr (kRange == kIntBinary) {
        constexpr OpCode kOp = kIntBinaryVOps[kIdx / 9];
        return hn::BitCast(df, IntBinaryV<kOp>(di, hn::BitCast(di, a(k)), hn::BitCast(di, b(k))));
      } else {
        constexpr OpCode kOp = kCompareOps[kIdx / 9];
        hn::Mask<TreeDF> m;
        if constexpr (kRange == kCompareF) {
          m = CompareV<kOp>(df, a(k), b(k));
        } else {
          m = hn::RebindMask(df, CompareV<kOp>(di, hn::BitCast(di, a(k)), hn::BitCast(di, b(k))));
        }
        return hn::BitCast(df, hn::IfThenElseZero(hn::RebindMask(di, m), hn::Set(di, 1)));
      }
    };
  } else if constexpr (Code < kIotaF) {
    constexpr int kIdx = Code - kSelect;
    const auto a = tree_input<static_cast<TreeSource>(kIdx / 3 % 3)>(c, st.a);
    const auto b = tree_input<static_cast<TreeSource>(kIdx % 3)>(c, st.b);
    constexpr TreeSource kCond = kIdx < 9 ? TreeSource::kBuffer : TreeSource::kScalar;
    const auto cond = tree_input<kCond>(c, st.c);
    return [a, b, cond, df, di](int64_t k) HWY_ATTR {
      const auto m = hn::RebindMask(df, hn::Ne(hn::BitCast(di, cond(k)), hn::Zero(di)));
      return hn::IfThenElse(m, a(k), b(k));
    };
  } else {
    // An iota, as the tile evaluator computes it (iota_tile, vector_kernels.cc): the lane
    // indices times the coefficient along the row, plus the value at the vector's first element.
    const ChainOperand& o = c.o[st.a];
    const int64_t coef = o.coef, first = o.base + coef * c.pos;
    if constexpr (Code == kIotaF) {
      const auto lanes =
          rounded(hn::Mul(hn::Iota(df, 0.0f), hn::Set(df, static_cast<float>(coef))));
      return [lanes, coef, first, N, df](int64_t k) HWY_ATTR {
        return hn::Add(lanes, hn::Set(df, static_cast<float>(first + coef * k * N)));
      };
    } else {
      const auto lanes = hn::Mul(hn::Iota(di, 0), hn::Set(di, static_cast<int32_t>(coef)));
      return [lanes, coef, first, N, df, di](int64_t k) HWY_ATTR {
        return hn::BitCast(df,
                           hn::Add(lanes, hn::Set(di, static_cast<int32_t>(first + coef * k * N))));
      };
    }
  }
}

// The step of code `Code` over the chunk's `nv` vectors.
template <int Code>
void tree_step(const TreeChunk& c, const TreeStep& st, int64_t nv) {
  const TreeDF df;
  const int64_t N = static_cast<int64_t>(hn::Lanes(df));
  const auto value = tree_value<Code>(c, st);
  float* out = st.out >= 0    ? c.buf[st.out]
               : st.out == -1 ? c.dst
                              : c.row_scalars + (-2 - st.out) * c.rs_stride;
  if (st.out == -1 && c.stream) {
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

// The operands' scalars (the bits of an int32 one), each in a vector: o[i] for a scalar operand.
inline void tree_scalars(const TreeProgram& t, const ChainOperand* o, TreeV* scalar) {
  const TreeDF df;
  for (int i = 0; i < t.no; ++i) {
    float v = 0;
    if (!o[i].row && o[i].p != nullptr) std::memcpy(&v, o[i].p, sizeof v);
    scalar[i] = hn::Set(df, v);
  }
}

// One row of the tree over `len` elements: o[i] is operand i's row (or scalar) there, scalar[i]
// its scalar in a vector (tree_scalars). The row scalars are computed by the row steps, or given:
// row scalar r is given[r * given_stride].
inline void tree_row(const TreeProgram& t, const ChainOperand* o, TreeV* scalar, float* d,
                     int64_t len, bool stream, const float* given, int64_t given_stride) {
  const TreeDF df;
  const int64_t N = static_cast<int64_t>(hn::Lanes(df));
  HWY_ALIGN float lanes[kMaxTreeBuffers][kChunk * hn::MaxLanes(df)];
  HWY_ALIGN float row_scalars[kMaxRowScalars][hn::MaxLanes(df)];
  float* const buf[kMaxTreeBuffers] = {lanes[0], lanes[1], lanes[2], lanes[3]};
  TreeChunk c{o,
              0,
              0,
              scalar,
              buf,
              d,
              stream && reinterpret_cast<uintptr_t>(d) % (N * sizeof(float)) == 0,
              row_scalars[0],
              static_cast<int64_t>(hn::MaxLanes(df))};
  if (given != nullptr) {
    for (int r = 0; r < t.row_scalars; ++r) {
      scalar[kMaxFusedOperands + r] = hn::Set(df, given[r * given_stride]);
    }
  } else {
    for (int s = 0; s < t.nr; ++s) kTreeSteps[t.row_steps[s].code](c, t.row_steps[s], 1);
    for (int r = 0; r < t.row_scalars; ++r) {
      scalar[kMaxFusedOperands + r] = hn::Load(df, row_scalars[r]);
    }
  }
  auto run = [&](int64_t nv) {
    for (int s = 0; s < t.ns; ++s) kTreeSteps[t.steps[s].code](c, t.steps[s], nv);
  };
  const int64_t whole = len / N * N;
  for (; c.j < whole; c.j += kChunk * N, c.pos = c.j, c.dst += kChunk * N) {
    run(std::min<int64_t>(kChunk, (whole - c.j) / N));
  }
  if (whole < len) {  // the tail, through vectors of lanes, as fused_row
    HWY_ALIGN float tail[kMaxFusedOperands][hn::MaxLanes(df)];
    HWY_ALIGN float out[hn::MaxLanes(df)];
    ChainOperand to[kMaxFusedOperands];
    const size_t rest = static_cast<size_t>(len - whole) * sizeof(float);
    for (int i = 0; i < t.no; ++i) {
      std::memset(tail[i], 0, sizeof tail[i]);
      to[i] = o[i];
      if (o[i].row) {
        std::memcpy(tail[i], o[i].p + whole, rest);
        to[i].p = tail[i];
      }
    }
    c = TreeChunk{to, 0, whole, scalar, buf, out, false, row_scalars[0], c.rs_stride};
    run(1);
    std::memcpy(d + whole, out, rest);
  }
}

// The row scalars of rows row0 .. row0 + nv * N - 1 of a 2-D destination, by the steps with a row
// per lane (TreeProgram::by_rows), into out: row scalar r of row row0 + q at out[r * stride + q].
// Each lane computes what the row steps compute for its row, op for op, so the bits are theirs.
inline void tree_rows_scalars(const TreeProgram& t, int64_t row0, int64_t nv, float* out,
                              int64_t stride) {
  const TreeDF df;
  ChainOperand o[kMaxFusedOperands];
  for (int i = 0; i < t.no; ++i) {
    const FusedOperand& f = t.f[i];
    if (f.kind == FusedArg::kIota) {  // its value at column 0 of row row0, stepping by rows
      const int64_t first = std::bit_cast<int32_t>(f.value) + row0 * f.stride[0];
      o[i] = ChainOperand{nullptr, false, first, f.stride[0]};
    } else if (f.stride == nullptr) {
      o[i] = ChainOperand{&f.value, false, 0, 0};
    } else {  // a column, read down its rows (by_rows has it as a row only for stride 1)
      o[i] = ChainOperand{f.data + row0 * f.stride[0], f.stride[0] == 1, 0, 0};
    }
  }
  TreeV scalar[kMaxFusedOperands + kMaxRowScalars];
  tree_scalars(t, o, scalar);
  HWY_ALIGN float lanes[kMaxTreeBuffers][kChunk * hn::MaxLanes(df)];
  float* const buf[kMaxTreeBuffers] = {lanes[0], lanes[1], lanes[2], lanes[3]};
  const TreeChunk c{o, 0, 0, scalar, buf, nullptr, false, out, stride};
  for (int s = 0; s < t.nb; ++s) kTreeSteps[t.by_rows[s].code](c, t.by_rows[s], nv);
}

// The rows of a 2-D destination: each operand's row (or scalar, or iota) moves on by its stride
// between rows, and only the scalars that do (a column) are set again a row (for_each_chain_row
// computes every operand from the row's index, and tree_scalars sets every scalar: half of a
// (512, 32) mask's time). The rows' row scalars come a run of rows at a time below `by_rows`
// (tree_rows_scalars, into `given`, row scalar r of the run's row q at given[r * stride + q]).
inline void tree_rows_2d(const FusedDst& p, const TreeProgram& t, TreeV* scalar, int64_t by_rows,
                         float* given, int64_t stride) {
  const TreeDF df;
  const int64_t N = static_cast<int64_t>(hn::Lanes(df));
  const int64_t run = kChunk * N, rows = p.extent[0], len = p.extent[1];
  PrefetchQueue* queue = p.prefetch;
  if (queue != nullptr) {
    queue->materialize();
    if (!queue->active()) queue = nullptr;
  }
  ChainOperand o[kMaxFusedOperands];
  int64_t down[kMaxFusedOperands];  // each operand's step from a row to the next
  int varying[kMaxFusedOperands];   // the scalar operands whose scalar changes from row to row
  int nv = 0;
  for (int i = 0; i < t.no; ++i) {
    const FusedOperand& f = t.f[i];
    down[i] = f.stride == nullptr ? 0 : f.stride[0];
    if (f.kind == FusedArg::kIota) {
      o[i] = ChainOperand{nullptr, false, std::bit_cast<int32_t>(f.value), f.stride[1]};
    } else {
      o[i] = ChainOperand{f.stride == nullptr ? &f.value : f.data, f.kind == FusedArg::kRow, 0, 0};
      if (f.kind == FusedArg::kScalar && down[i] != 0) varying[nv++] = i;
    }
  }
  tree_scalars(t, o, scalar);
  float* dst = p.data;
  for (int64_t row = 0; row < rows; ++row) {
    if (row > 0) {  // the next row
      dst += p.stride[0];
      for (int i = 0; i < t.no; ++i) {
        if (t.f[i].kind == FusedArg::kIota) {
          o[i].base += down[i];
        } else {
          o[i].p += down[i];
        }
      }
      for (int k = 0; k < nv; ++k) {
        float v;
        std::memcpy(&v, o[varying[k]].p, sizeof v);
        scalar[varying[k]] = hn::Set(df, v);
      }
    }
    const int64_t q = row % run;
    if (row < by_rows && q == 0) {
      tree_rows_scalars(t, row, std::min(run, by_rows - row) / N, given, stride);
    }
    tree_row(t, o, scalar, dst, len, p.stream, row < by_rows ? given + q : nullptr, stride);
    if (queue != nullptr) drain_prefetch(*queue, len * static_cast<int64_t>(sizeof(float)));
  }
}

// d = the tree `t` on the fused path, row by row; false (nothing done) when no operand is a row
// or an iota. A 2-D destination walks its rows by pointer steps and takes its row scalars a run
// of rows at a time (tree_rows_2d).
inline bool fused_tree(const FusedDst& p, const TreeProgram& t) {
  bool any_row = false;
  for (int i = 0; i < t.no; ++i) any_row = any_row || t.f[i].kind != FusedArg::kScalar;
  if (!any_row) return false;
  ++g_fused_trees_for_test;
  const TreeDF df;
  const int64_t N = static_cast<int64_t>(hn::Lanes(df));
  const int64_t len = p.extent[p.nd - 1];
  constexpr int64_t kRun = kChunk * hn::MaxLanes(df);  // the most rows a run (N <= MaxLanes)
  const int64_t by_rows = p.nd == 2 && t.nb > 0 ? p.extent[0] / N * N : 0;
  HWY_ALIGN float given[kMaxRowScalars][kRun];
  TreeV scalar[kMaxFusedOperands + kMaxRowScalars];
  if (p.nd == 2) {
    tree_rows_2d(p, t, scalar, by_rows, given[0], kRun);
    return true;
  }
  for_each_chain_row(p, t.f, t.no, [&](const ChainOperand* o, float* dst) HWY_ATTR {
    tree_scalars(t, o, scalar);
    tree_row(t, o, scalar, dst, len, p.stream, nullptr, 0);
  });
  return true;
}

}  // namespace tessera::detail::HWY_NAMESPACE
HWY_AFTER_NAMESPACE();

#endif  // TESSERA_NATIVE_VECTOR_FUSED_TREE_INL_H_
