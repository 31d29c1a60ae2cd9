// The native VPU's reductions (jnp.sum/max/min/argmax/argmin): a contiguous operand of 32-bit
// lanes (float32, int32, or uint32 compared unsigned) reduced over a set of axes into a contiguous
// result, with Highway SIMD chosen at run time (compiled once per target by foreach_target.h).
//
// The axes are first grouped: adjacent axes that are both reduced or both kept merge (the
// operand is contiguous, so any run merges), unit axes drop out. The innermost group then
// decides the loop: reduced -> each row of it folds to one value (vector partial sums, then
// across lanes); kept -> each row combines elementwise into a row of the result. Outer groups
// are walked with an odometer.

#include <algorithm>
#include <atomic>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <type_traits>
#include <vector>

#include "core/simd_target.h"
#include "native/vector_plan.h"
#include "tessera/detail/expr_program.h"
#include "tessera/detail/small_vec.h"

#undef HWY_TARGET_INCLUDE
#define HWY_TARGET_INCLUDE "native/vector_reduce_kernels.cc"
#include <hwy/foreach_target.h>  // IWYU pragma: keep
#include <hwy/highway.h>

#include "native/vector_ops-inl.h"

HWY_BEFORE_NAMESPACE();
namespace tessera::detail::HWY_NAMESPACE {
namespace hn = hwy::HWY_NAMESPACE;

template <class T>
T identity(OpCode op) {
  if (op == OpCode::kReduceSum) return T(0);
  if (op == OpCode::kReduceMax) {
    return std::numeric_limits<T>::has_infinity ? -std::numeric_limits<T>::infinity()
                                                : std::numeric_limits<T>::lowest();
  }
  return std::numeric_limits<T>::has_infinity ? std::numeric_limits<T>::infinity()
                                              : std::numeric_limits<T>::max();
}

template <class D, class V>
HWY_INLINE V combine(D d, OpCode op, V a, V b) {
  if (op == OpCode::kReduceSum) return hn::Add(a, b);
  if constexpr (hwy::IsFloat<hn::TFromD<D>>()) {
    return op == OpCode::kReduceMax ? MaxNaN(d, a, b) : MinNaN(d, a, b);
  } else {
    return op == OpCode::kReduceMax ? hn::Max(a, b) : hn::Min(a, b);
  }
}

template <class T>
T combine1(OpCode op, T a, T b) {
  if constexpr (std::is_integral_v<T>) {
    // Integer sums wrap, as the vector lanes' adds do (signed overflow is undefined in C++).
    using U = std::make_unsigned_t<T>;
    if (op == OpCode::kReduceSum) return static_cast<T>(static_cast<U>(a) + static_cast<U>(b));
  } else {
    if (op == OpCode::kReduceSum) return static_cast<T>(a + b);
  }
  if constexpr (std::is_floating_point_v<T>) {
    if (std::isnan(a)) return a;
    if (std::isnan(b)) return b;
  }
  return op == OpCode::kReduceMax ? std::max(a, b) : std::min(a, b);
}

/// Folds a contiguous row of L values to one with the NaN-propagating combine, vector by vector
/// and then lane by lane: the exact result (which NaN a row with several ends with) that
/// fold_row keeps for rows that hold a NaN.
template <class D>
hn::TFromD<D> fold_row_nan(D d, OpCode op, const hn::TFromD<D>* x, int64_t L) {
  using T = hn::TFromD<D>;
  const int64_t N = static_cast<int64_t>(hn::Lanes(d));
  int64_t j = 0;
  T r = identity<T>(op);
  if (L >= 2 * N) {
    auto acc0 = hn::LoadU(d, x);
    auto acc1 = hn::LoadU(d, x + N);
    for (j = 2 * N; j + 2 * N <= L; j += 2 * N) {
      acc0 = combine(d, op, acc0, hn::LoadU(d, x + j));
      acc1 = combine(d, op, acc1, hn::LoadU(d, x + j + N));
    }
    acc0 = combine(d, op, acc0, acc1);
    HWY_ALIGN T lanes[hn::MaxLanes(d)];
    hn::Store(acc0, d, lanes);
    for (int64_t i = 0; i < N; ++i) r = combine1(op, r, lanes[i]);
  }
  for (; j < L; ++j) r = combine1(op, r, x[j]);
  return r;
}

/// A row's vectors folded to one, as fold_row folds them before their lanes meet: four vector
/// accumulators (one would bound the loop by its combine's latency: softmax's row max over 128
/// float32 columns took 38 ns a row that way, docs/performance.md "Softmax: row reductions and
/// exp"), combined as (0 op 1) op (2 op 3). Float max and min combine with the plain instructions
/// and note NaNs aside (`nan`: the row is then folded again by fold_row_nan). `j` is the first
/// element after the whole vectors. For rows of at least one vector (L >= N).
template <class D>
struct RowVectors {
  decltype(hn::Zero(D())) all;
  int64_t j;
  bool nan;
};
template <class D>
HWY_INLINE RowVectors<D> row_vectors(D d, OpCode op, const hn::TFromD<D>* x, int64_t L) {
  using T = hn::TFromD<D>;
  const int64_t N = static_cast<int64_t>(hn::Lanes(d));
  const auto id = hn::Set(d, identity<T>(op));
  // The first four vectors start the four accumulators (a row of 128 float32 is then two rounds
  // of four, nothing left over one vector at a time).
  const bool four = L >= 4 * N;
  auto acc0 = hn::LoadU(d, x);
  auto acc1 = four ? hn::LoadU(d, x + N) : id;
  auto acc2 = four ? hn::LoadU(d, x + 2 * N) : id;
  auto acc3 = four ? hn::LoadU(d, x + 3 * N) : id;
  int64_t j = four ? 4 * N : N;
  if (op == OpCode::kReduceSum) {
    for (; j + 4 * N <= L; j += 4 * N) {
      acc0 = hn::Add(acc0, hn::LoadU(d, x + j));
      acc1 = hn::Add(acc1, hn::LoadU(d, x + j + N));
      acc2 = hn::Add(acc2, hn::LoadU(d, x + j + 2 * N));
      acc3 = hn::Add(acc3, hn::LoadU(d, x + j + 3 * N));
    }
    for (; j + N <= L; j += N) acc0 = hn::Add(acc0, hn::LoadU(d, x + j));
    return {hn::Add(hn::Add(acc0, acc1), hn::Add(acc2, acc3)), j, false};
  }
  const bool is_max = op == OpCode::kReduceMax;
  auto fold = [&](auto a, auto v) HWY_ATTR { return is_max ? hn::Max(a, v) : hn::Min(a, v); };
  bool has_nan = false;
  if constexpr (hwy::IsFloat<T>()) {
#if HWY_TARGET == HWY_AVX3 || HWY_TARGET == HWY_AVX3_DL
    // One unordered compare finds a NaN in either of two vectors (IsNaN takes one a vector, on
    // the port the max and min use).
    const auto either_nan = [](auto a, auto b) HWY_ATTR {
      return hn::Mask512<float>{_mm512_cmp_ps_mask(a.raw, b.raw, _CMP_UNORD_Q)};
    };
#else
    const auto either_nan = [](auto a, auto b)
                                HWY_ATTR { return hn::Or(hn::IsNaN(a), hn::IsNaN(b)); };
#endif
    auto nan = hn::Or(either_nan(acc0, acc1), either_nan(acc2, acc3));
    for (; j + 4 * N <= L; j += 4 * N) {
      const auto v0 = hn::LoadU(d, x + j);
      const auto v1 = hn::LoadU(d, x + j + N);
      const auto v2 = hn::LoadU(d, x + j + 2 * N);
      const auto v3 = hn::LoadU(d, x + j + 3 * N);
      acc0 = fold(acc0, v0);
      acc1 = fold(acc1, v1);
      acc2 = fold(acc2, v2);
      acc3 = fold(acc3, v3);
      nan = hn::Or(nan, hn::Or(either_nan(v0, v1), either_nan(v2, v3)));
    }
    for (; j + N <= L; j += N) {
      const auto v = hn::LoadU(d, x + j);
      acc0 = fold(acc0, v);
      nan = hn::Or(nan, hn::IsNaN(v));
    }
    has_nan = !hn::AllFalse(d, nan);
  } else {
    for (; j + 4 * N <= L; j += 4 * N) {
      acc0 = fold(acc0, hn::LoadU(d, x + j));
      acc1 = fold(acc1, hn::LoadU(d, x + j + N));
      acc2 = fold(acc2, hn::LoadU(d, x + j + 2 * N));
      acc3 = fold(acc3, hn::LoadU(d, x + j + 3 * N));
    }
    for (; j + N <= L; j += N) acc0 = fold(acc0, hn::LoadU(d, x + j));
  }
  return {fold(fold(acc0, acc1), fold(acc2, acc3)), j, has_nan};
}

/// The rest of a row after its vectors: x[j..L) folded into r in order (a NaN among them
/// propagates: combine1).
template <class T>
T fold_tail(OpCode op, T r, const T* x, int64_t j, int64_t L) {
  for (; j < L; ++j) r = combine1(op, r, x[j]);
  return r;
}

/// Folds a contiguous row of L values to one: its vectors (row_vectors), then across the lanes,
/// then the elements after them. A float sum's order is four interleaved partial sums, then a
/// tree.
template <class D>
hn::TFromD<D> fold_row(D d, OpCode op, const hn::TFromD<D>* x, int64_t L) {
  using T = hn::TFromD<D>;
  const int64_t N = static_cast<int64_t>(hn::Lanes(d));
  if (L < N) return fold_tail(op, identity<T>(op), x, 0, L);
  const RowVectors<D> rv = row_vectors(d, op, x, L);
  if (rv.nan) return fold_row_nan(d, op, x, L);
  T r;
  if (op == OpCode::kReduceSum) {
    if constexpr (hwy::IsFloat<T>()) {
      r = hn::GetLane(hn::SumOfLanes(d, rv.all));
    } else {  // lane by lane, wrapping (the intrinsics' horizontal sums add as signed int)
      HWY_ALIGN T lanes[hn::MaxLanes(d)];
      hn::Store(rv.all, d, lanes);
      r = T(0);
      for (int64_t i = 0; i < N; ++i) r = combine1(op, r, lanes[i]);
    }
  } else {
    r = hn::GetLane(op == OpCode::kReduceMax ? hn::MaxOfLanes(d, rv.all)
                                             : hn::MinOfLanes(d, rv.all));
  }
  return fold_tail(op, r, x, rv.j, L);
}

#if HWY_TARGET == HWY_AVX3 || HWY_TARGET == HWY_AVX3_DL
/// The lanes of 16 vectors folded at once, lane l of the result the fold of v[l]: the halving
/// tree of SumOfLanes / MaxOfLanes / MinOfLanes here (_mm512_reduce_*_ps: lanes i and i + 8,
/// then i + 4, i + 2 and i + 1, each step's operands in the order they take them: the upper
/// half first for the 256- and 128-bit halves, lane i before lane i + 2 and i + 1 after), so
/// every row's bits are the ones its own horizontal fold gives, a float max's choice between +0
/// and -0 included.
/// Two rows share a vector from the first step on: 15 combines and 30 shuffles for 16 rows, where
/// a row at a time takes 4 combines and a dependent chain of shuffles each.
template <class F>
HWY_INLINE __m512i fold_lanes16(const __m512i* v, F f) {
  __m512i u[8];
  for (int m = 0; m < 8; ++m) {  // lanes i + 8 (a row's 256-bit halves); rows 2m, 2m + 1
    u[m] = f(_mm512_shuffle_i32x4(v[2 * m], v[2 * m + 1], 0xEE),
             _mm512_shuffle_i32x4(v[2 * m], v[2 * m + 1], 0x44));
  }
  __m512i w[4];
  for (int n = 0; n < 4; ++n) {  // lanes i + 4 (128-bit blocks): block k holds row 4n + k
    w[n] = f(_mm512_shuffle_i32x4(u[2 * n], u[2 * n + 1], 0xDD),
             _mm512_shuffle_i32x4(u[2 * n], u[2 * n + 1], 0x88));
  }
  const auto shuffle = [](__m512i a, __m512i b, auto imm) HWY_ATTR {
    return _mm512_castps_si512(
        _mm512_shuffle_ps(_mm512_castsi512_ps(a), _mm512_castsi512_ps(b), decltype(imm)::value));
  };
  using Lo = std::integral_constant<int, 0x44>;
  using Hi = std::integral_constant<int, 0xEE>;
  using Even = std::integral_constant<int, 0x88>;
  using Odd = std::integral_constant<int, 0xDD>;
  // Lanes i + 2: block k holds rows 8p + k and 8p + 4 + k, two lanes each.
  const __m512i x0 = f(shuffle(w[0], w[1], Lo{}), shuffle(w[0], w[1], Hi{}));
  const __m512i x1 = f(shuffle(w[2], w[3], Lo{}), shuffle(w[2], w[3], Hi{}));
  // Lanes i + 1: lane 4k + q holds row 4q + k; the permutation puts row l in lane l.
  const __m512i y = f(shuffle(x0, x1, Even{}), shuffle(x0, x1, Odd{}));
  const __m512i order = _mm512_setr_epi32(0, 4, 8, 12, 1, 5, 9, 13, 2, 6, 10, 14, 3, 7, 11, 15);
  return _mm512_permutexvar_epi32(order, y);
}

/// fold_lanes16 with `op` on lanes of type T.
template <class T>
HWY_INLINE __m512i fold_lanes16(OpCode op, const __m512i* v) {
  const auto ps = [](auto g) HWY_ATTR {
    return [g](__m512i a, __m512i b) HWY_ATTR {
      return _mm512_castps_si512(g(_mm512_castsi512_ps(a), _mm512_castsi512_ps(b)));
    };
  };
  if (op == OpCode::kReduceSum) {
    if constexpr (std::is_same_v<T, float>) {
      return fold_lanes16(v, ps([](__m512 a, __m512 b) HWY_ATTR { return _mm512_add_ps(a, b); }));
    }
    return fold_lanes16(v, [](__m512i a, __m512i b) HWY_ATTR { return _mm512_add_epi32(a, b); });
  }
  const bool is_max = op == OpCode::kReduceMax;
  if constexpr (std::is_same_v<T, float>) {
    return is_max ? fold_lanes16(
                        v, ps([](__m512 a, __m512 b) HWY_ATTR { return _mm512_max_ps(a, b); }))
                  : fold_lanes16(
                        v, ps([](__m512 a, __m512 b) HWY_ATTR { return _mm512_min_ps(a, b); }));
  } else if constexpr (std::is_same_v<T, uint32_t>) {
    return is_max ? fold_lanes16(
                        v, [](__m512i a, __m512i b) HWY_ATTR { return _mm512_max_epu32(a, b); })
                  : fold_lanes16(
                        v, [](__m512i a, __m512i b) HWY_ATTR { return _mm512_min_epu32(a, b); });
  } else {
    return is_max ? fold_lanes16(
                        v, [](__m512i a, __m512i b) HWY_ATTR { return _mm512_max_epi32(a, b); })
                  : fold_lanes16(
                        v, [](__m512i a, __m512i b) HWY_ATTR { return _mm512_min_epi32(a, b); });
  }
}
#endif

/// out[r] = combine(out[r], fold of row r) for `rows` contiguous rows of L values. With 16
/// lanes, 16 rows at a time: each row's vectors as fold_row has them, then their lanes all
/// folded at once (fold_lanes16), then each row's elements after its vectors; the same bits as
/// fold_row row by row. Softmax's row max over a (128, 128) block took 1.3 us a row at a time,
/// where reading it from L2 takes about 0.5 (docs/performance.md, "Row reductions, 16 rows at a
/// time").
template <class D>
void fold_rows(D d, OpCode op, const hn::TFromD<D>* x, int64_t L, int64_t rows,
               hn::TFromD<D>* out) {
  int64_t r = 0;
#if HWY_TARGET == HWY_AVX3 || HWY_TARGET == HWY_AVX3_DL
  using T = hn::TFromD<D>;
  const hn::RebindToSigned<D> di;
  if (L >= static_cast<int64_t>(hn::Lanes(d))) {
    for (; r + 16 <= rows; r += 16) {
      __m512i v[16];
      bool nan = false;
      int64_t j = 0;
      for (int l = 0; l < 16; ++l) {
        const RowVectors<D> rv = row_vectors(d, op, x + (r + l) * L, L);
        v[l] = hn::BitCast(di, rv.all).raw;
        nan = nan || rv.nan;
        j = rv.j;
      }
      const __m512i folded = fold_lanes16<T>(op, v);
      if (!nan && j == L) {
        // No element after the vectors: out combines with the 16 results as combine1 would
        // (a + b; max: b where a < b, else a, which keeps a NaN already in out; min alike).
        const auto a = hn::LoadU(d, out + r);
        const auto b = hn::BitCast(d, decltype(hn::Zero(di)){folded});
        const auto c = op == OpCode::kReduceSum   ? hn::Add(a, b)
                       : op == OpCode::kReduceMax ? hn::IfThenElse(hn::Lt(a, b), b, a)
                                                  : hn::IfThenElse(hn::Lt(b, a), b, a);
        hn::StoreU(c, d, out + r);
        continue;
      }
      HWY_ALIGN T lanes[16];
      _mm512_store_si512(lanes, folded);
      for (int l = 0; l < 16; ++l) {
        const T* row = x + (r + l) * L;
        // A row with a NaN is folded again alone (fold_row_nan's exact NaN); rare.
        const T f = nan ? fold_row(d, op, row, L) : fold_tail(op, lanes[l], row, j, L);
        out[r + l] = combine1(op, out[r + l], f);
      }
    }
  }
#endif
  for (; r < rows; ++r) out[r] = combine1(op, out[r], fold_row(d, op, x + r * L, L));
}

/// out[0..L) = combine(out, x) elementwise.
template <class D>
void combine_row(D d, OpCode op, hn::TFromD<D>* out, const hn::TFromD<D>* x, int64_t L) {
  const int64_t N = static_cast<int64_t>(hn::Lanes(d));
  int64_t j = 0;
  for (; j + N <= L; j += N) {
    hn::StoreU(combine(d, op, hn::LoadU(d, out + j), hn::LoadU(d, x + j)), d, out + j);
  }
  for (; j < L; ++j) out[j] = combine1(op, out[j], x[j]);
}

/// True when v beats the best so far: the first maximum (minimum) wins; a NaN beats anything
/// but an earlier NaN (numpy's argmax/argmin).
template <class T>
bool beats(OpCode op, T v, T best) {
  if constexpr (std::is_floating_point_v<T>) {
    if (std::isnan(best)) return false;
    if (std::isnan(v)) return true;
  }
  return op == OpCode::kArgMax ? v > best : v < best;
}

template <class D>
void Reduce(D d, OpCode op, const hn::TFromD<D>* in, void* out_v, const int64_t* ext,
            const int64_t* red, int ng) {
  using T = hn::TFromD<D>;
  const bool arg = op == OpCode::kArgMax || op == OpCode::kArgMin;
  // Output strides of the kept groups (row-major over kept groups only).
  // Inline storage: a reduction of a small block is a statement of a few hundred nanoseconds, of
  // which two vectors' allocations were a fifth.
  SmallVec ostride(ng, 0);
  int64_t out_size = 1;
  for (int g = ng - 1; g >= 0; --g) {
    if (!red[g]) {
      ostride[g] = out_size;
      out_size *= ext[g];
    }
  }
  std::vector<T> best;  // argmax/argmin: best value per output
  T* out = static_cast<T*>(out_v);
  int32_t* idx = static_cast<int32_t*>(out_v);
  if (arg) {
    best.assign(static_cast<size_t>(out_size),
                identity<T>(op == OpCode::kArgMax ? OpCode::kReduceMax : OpCode::kReduceMin));
    std::fill(idx, idx + out_size, 0);
  } else {
    std::fill(out, out + out_size, identity<T>(op));
  }
  const int64_t L = ext[ng - 1];
  const bool inner_red = red[ng - 1] != 0;
  SmallVec pos(ng, 0);
  int64_t in_off = 0;
  if (!arg && inner_red && ng >= 2 && red[ng - 2] == 0) {
    // Rows folded whole, the kept group before them the innermost kept one: its rows' results
    // lie side by side (ostride 1), so they are folded a run at a time (fold_rows).
    const int64_t rows = ext[ng - 2];
    for (;;) {
      int64_t o = 0;
      for (int g = 0; g < ng - 2; ++g) {
        if (!red[g]) o += pos[g] * ostride[g];
      }
      fold_rows(d, op, in + in_off, L, rows, out + o);
      in_off += rows * L;
      int g = ng - 3;
      for (; g >= 0; --g) {
        if (++pos[g] < ext[g]) break;
        pos[g] = 0;
      }
      if (g < 0) return;
    }
  }
  for (;;) {
    int64_t o = 0;
    int64_t r_index = 0;  // position along the reduced group (argmax has one)
    for (int g = 0; g < ng - 1; ++g) {
      if (red[g])
        r_index = pos[g];
      else
        o += pos[g] * ostride[g];
    }
    const T* row = in + in_off;
    if (arg) {
      if (inner_red) {
        for (int64_t j = 0; j < L; ++j) {
          if (beats(op, row[j], best[static_cast<size_t>(o)])) {
            best[static_cast<size_t>(o)] = row[j];
            idx[o] = static_cast<int32_t>(j);
          }
        }
      } else {
        for (int64_t j = 0; j < L; ++j) {
          if (beats(op, row[j], best[static_cast<size_t>(o + j)])) {
            best[static_cast<size_t>(o + j)] = row[j];
            idx[o + j] = static_cast<int32_t>(r_index);
          }
        }
      }
    } else if (inner_red) {
      out[o] = combine1(op, out[o], fold_row(d, op, row, L));
    } else {
      combine_row(d, op, out + o, row, L);
    }
    in_off += L;
    int g = ng - 2;
    for (; g >= 0; --g) {
      if (++pos[g] < ext[g]) break;
      pos[g] = 0;
    }
    if (g < 0) break;
  }
}

void ReduceLanes(OpCode op, DType lane, const void* in, void* out, const int64_t* ext,
                 const int64_t* red, int ng) {
  if (lane == DType::kFloat32) {
    const hn::ScalableTag<float> df;
    Reduce(df, op, static_cast<const float*>(in), out, ext, red, ng);
  } else if (lane == DType::kUInt32) {
    const hn::ScalableTag<uint32_t> du;
    Reduce(du, op, static_cast<const uint32_t*>(in), out, ext, red, ng);
  } else {
    const hn::ScalableTag<int32_t> di;
    Reduce(di, op, static_cast<const int32_t*>(in), out, ext, red, ng);
  }
}

}  // namespace tessera::detail::HWY_NAMESPACE
HWY_AFTER_NAMESPACE();

#if HWY_ONCE
namespace tessera::detail {
HWY_EXPORT(ReduceLanes);

namespace {
using ReduceFn = void (*)(OpCode, DType, const void*, void*, const int64_t*, const int64_t*, int);
// Resolved once, as run_plan's evaluator (vector_kernels.cc).
std::atomic<ReduceFn> g_reduce{nullptr};
}  // namespace

void run_reduce(OpCode op, DType lane, const void* in, void* out, const SmallVec& extent,
                const SmallVec& reduced) {
  // Group the axes: unit axes drop out, adjacent axes of the same kind merge.
  SmallVec ext;
  SmallVec red;
  for (int i = 0; i < extent.size(); ++i) {
    if (extent[i] == 1) continue;
    if (ext.size() > 0 && red.back() == reduced[i]) {
      ext[ext.size() - 1] *= extent[i];
    } else {
      ext.push_back(extent[i]);
      red.push_back(reduced[i]);
    }
  }
  if (ext.size() == 0) {  // one element: reduced over nothing but unit axes
    ext.push_back(1);
    red.push_back(1);
  }
  for (int i = 0; i < ext.size(); ++i) {
    if (ext[i] == 0) {  // an empty operand: sum gives zeros (max/min/argmax were rejected)
      int64_t out_size = 1;
      for (int g = 0; g < ext.size(); ++g) {
        if (!red[g]) out_size *= ext[g];
      }
      std::memset(out, 0, static_cast<size_t>(out_size) * 4);
      return;
    }
  }
  ReduceFn f = g_reduce.load(std::memory_order_relaxed);
  if (f == nullptr) {
    apply_simd_target_override();
    hwy::GetChosenTarget().Update(hwy::SupportedTargets());
    f = HWY_DYNAMIC_DISPATCH(ReduceLanes);
    g_reduce.store(f, std::memory_order_relaxed);
  }
  f(op, lane, in, out, ext.data(), red.data(), ext.size());
}

void reset_reduce_dispatch() { g_reduce.store(nullptr, std::memory_order_relaxed); }

}  // namespace tessera::detail
#endif  // HWY_ONCE
