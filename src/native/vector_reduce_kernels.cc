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

/// Folds a contiguous row of L values to one: four vector accumulators (one would bound the loop
/// by its combine's latency: softmax's row max over 128 float32 columns took 38 ns a row that
/// way, docs/performance.md "Softmax: row reductions and exp"), then across the lanes. Float max
/// and min combine with the plain instructions and note NaNs aside; a row that holds one is folded
/// again by fold_row_nan. A float sum's order is four interleaved partial sums, then a tree.
template <class D>
hn::TFromD<D> fold_row(D d, OpCode op, const hn::TFromD<D>* x, int64_t L) {
  using T = hn::TFromD<D>;
  const int64_t N = static_cast<int64_t>(hn::Lanes(d));
  if (L < N) {
    T r = identity<T>(op);
    for (int64_t j = 0; j < L; ++j) r = combine1(op, r, x[j]);
    return r;
  }
  const auto id = hn::Set(d, identity<T>(op));
  auto acc0 = hn::LoadU(d, x);
  auto acc1 = id;
  auto acc2 = id;
  auto acc3 = id;
  int64_t j = N;
  if (op == OpCode::kReduceSum) {
    for (; j + 4 * N <= L; j += 4 * N) {
      acc0 = hn::Add(acc0, hn::LoadU(d, x + j));
      acc1 = hn::Add(acc1, hn::LoadU(d, x + j + N));
      acc2 = hn::Add(acc2, hn::LoadU(d, x + j + 2 * N));
      acc3 = hn::Add(acc3, hn::LoadU(d, x + j + 3 * N));
    }
    for (; j + N <= L; j += N) acc0 = hn::Add(acc0, hn::LoadU(d, x + j));
    const auto all = hn::Add(hn::Add(acc0, acc1), hn::Add(acc2, acc3));
    T r;
    if constexpr (hwy::IsFloat<T>()) {
      r = hn::GetLane(hn::SumOfLanes(d, all));
    } else {  // lane by lane, wrapping (the intrinsics' horizontal sums add as signed int)
      HWY_ALIGN T lanes[hn::MaxLanes(d)];
      hn::Store(all, d, lanes);
      r = T(0);
      for (int64_t i = 0; i < N; ++i) r = combine1(op, r, lanes[i]);
    }
    for (; j < L; ++j) r = combine1(op, r, x[j]);
    return r;
  }
  const bool is_max = op == OpCode::kReduceMax;
  auto fold = [&](auto a, auto v) HWY_ATTR { return is_max ? hn::Max(a, v) : hn::Min(a, v); };
  if constexpr (hwy::IsFloat<T>()) {
    auto nan = hn::IsNaN(acc0);
    for (; j + 4 * N <= L; j += 4 * N) {
      const auto v0 = hn::LoadU(d, x + j);
      const auto v1 = hn::LoadU(d, x + j + N);
      const auto v2 = hn::LoadU(d, x + j + 2 * N);
      const auto v3 = hn::LoadU(d, x + j + 3 * N);
      acc0 = fold(acc0, v0);
      acc1 = fold(acc1, v1);
      acc2 = fold(acc2, v2);
      acc3 = fold(acc3, v3);
      nan = hn::Or(
          nan, hn::Or(hn::Or(hn::IsNaN(v0), hn::IsNaN(v1)), hn::Or(hn::IsNaN(v2), hn::IsNaN(v3))));
    }
    for (; j + N <= L; j += N) {
      const auto v = hn::LoadU(d, x + j);
      acc0 = fold(acc0, v);
      nan = hn::Or(nan, hn::IsNaN(v));
    }
    if (!hn::AllFalse(d, nan)) return fold_row_nan(d, op, x, L);
  } else {
    for (; j + 4 * N <= L; j += 4 * N) {
      acc0 = fold(acc0, hn::LoadU(d, x + j));
      acc1 = fold(acc1, hn::LoadU(d, x + j + N));
      acc2 = fold(acc2, hn::LoadU(d, x + j + 2 * N));
      acc3 = fold(acc3, hn::LoadU(d, x + j + 3 * N));
    }
    for (; j + N <= L; j += N) acc0 = fold(acc0, hn::LoadU(d, x + j));
  }
  const auto all = fold(fold(acc0, acc1), fold(acc2, acc3));
  T r = hn::GetLane(is_max ? hn::MaxOfLanes(d, all) : hn::MinOfLanes(d, all));
  for (; j < L; ++j) r = combine1(op, r, x[j]);  // a NaN here propagates (combine1)
  return r;
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
  std::vector<int64_t> ostride(static_cast<size_t>(ng), 0);
  int64_t out_size = 1;
  for (int g = ng - 1; g >= 0; --g) {
    if (!red[g]) {
      ostride[static_cast<size_t>(g)] = out_size;
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
  std::vector<int64_t> pos(static_cast<size_t>(ng), 0);
  int64_t in_off = 0;
  for (;;) {
    int64_t o = 0;
    int64_t r_index = 0;  // position along the reduced group (argmax has one)
    for (int g = 0; g < ng - 1; ++g) {
      if (red[g])
        r_index = pos[static_cast<size_t>(g)];
      else
        o += pos[static_cast<size_t>(g)] * ostride[static_cast<size_t>(g)];
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
      if (++pos[static_cast<size_t>(g)] < ext[g]) break;
      pos[static_cast<size_t>(g)] = 0;
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
