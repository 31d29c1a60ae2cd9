// jnp::dot / lax::dot_general in the native engine: the operands as strided matrices (validated
// by core/dot_rules.h) and the products, the tile GEMMs of gemm.cc.
//
// A product goes straight into the destination when the destination has the accumulator's
// dtype (float32, int32), a unit column stride and does not overlap an operand. Otherwise it
// goes into a per-thread float32/int32 temporary first, and is then rounded (bfloat16, float16,
// a float8) or wrapped (int8) into the destination, or added to it. float16, float8 and mixed
// operands are widened to float32 and take the float32 GEMM.
#include "tessera/dot.h"

#include <fmt/format.h>

#include <algorithm>
#include <cstddef>
#include <cstdlib>
#include <new>
#include <vector>

#include "core/byte_span.h"
#include "core/check.h"
#include "core/dot_rules.h"
#include "native/gemm.h"
#include "native/gemm_scratch.h"
#include "runtime/context.h"
#include "runtime/engine.h"
#include "runtime/events.h"
#include "tessera/detail/runtime.h"

namespace tessera::detail {

namespace {

template <class T>
MatrixView<T> lhs_view(const RawRef& r, int lc) {
  // A(i, p): p runs along the contracting dimension.
  const int64_t s0 = r.strides[0];
  const int64_t s1 = r.strides[1];
  return lc == 1 ? MatrixView<T>{static_cast<const T*>(r.data), s0, s1}
                 : MatrixView<T>{static_cast<const T*>(r.data), s1, s0};
}
template <class T>
MatrixView<T> rhs_view(const RawRef& r, int rc) {
  // B(p, j): p runs along the contracting dimension.
  const int64_t s0 = r.strides[0];
  const int64_t s1 = r.strides[1];
  return rc == 0 ? MatrixView<T>{static_cast<const T*>(r.data), s0, s1}
                 : MatrixView<T>{static_cast<const T*>(r.data), s1, s0};
}

bool overlaps(const RawRef& a, const RawRef& b) {
  return spans_overlap(byte_span(a), byte_span(b));
}

class Temp {
 public:
  Temp() = default;
  Temp(const Temp&) = delete;
  Temp& operator=(const Temp&) = delete;
  ~Temp() { std::free(p_); }
  void* get(size_t bytes) {
    if (bytes > cap_) {
      std::free(p_);
      cap_ = (std::max<size_t>(bytes, 64) + 4095) / 4096 * 4096;
      p_ = std::aligned_alloc(64, cap_);
      if (p_ == nullptr) {
        cap_ = 0;
        throw std::bad_alloc();
      }
    }
    return p_;
  }

 private:
  void* p_ = nullptr;
  size_t cap_ = 0;
};
thread_local Temp tl_temp;

thread_local GemmScratch tl_widen_a;
thread_local GemmScratch tl_widen_b;

// dst (rows x cols, contiguous) = v widened to float32 (exact for every float dtype).
template <class T>
void widen(MatrixView<T> v, int64_t rows, int64_t cols, float* dst) {
  for (int64_t i = 0; i < rows; ++i) {
    for (int64_t j = 0; j < cols; ++j) {
      dst[i * cols + j] = static_cast<float>(v.data[i * v.rs + j * v.cs]);
    }
  }
}

// Operand `r` of the tile (the lhs A(i, p) when `lhs`, else B(p, j); `axis` its contracting
// axis) as a float32 matrix: read in place when it is float32, else widened into `scratch`.
MatrixView<float> as_f32(const RawRef& r, bool lhs, int axis, int64_t rows, int64_t cols,
                         GemmScratch& scratch) {
  auto view = [&](auto tag) {
    using T = decltype(tag);
    return lhs ? lhs_view<T>(r, axis) : rhs_view<T>(r, axis);
  };
  if (r.dtype == DType::kFloat32) return view(float{});
  float* dst = scratch.get<float>(rows * cols);
  switch (r.dtype) {
    case DType::kBFloat16:
      widen(view(bfloat16{}), rows, cols, dst);
      break;
    case DType::kFloat16:
      widen(view(float16{}), rows, cols, dst);
      break;
    case DType::kFloat8E4M3FN:
      widen(view(float8_e4m3fn{}), rows, cols, dst);
      break;
    case DType::kFloat8E5M2:
      widen(view(float8_e5m2{}), rows, cols, dst);
      break;
    case DType::kFloat8E4M3B11FNUZ:
      widen(view(float8_e4m3b11fnuz{}), rows, cols, dst);
      break;
    default:
      TESSERA_CHECK(false, "jnp::dot widened an operand of a dtype that is not a float");
  }
  return MatrixView<float>{dst, cols, 1};
}

// acc (+)= product for the operands' dtype; `acc` has the accumulator dtype, row stride c_rs.
void product(const DotCall& c, const DotOperands& o, void* acc, int64_t c_rs, bool accumulate) {
  if (c.lhs.dtype != c.rhs.dtype || c.lhs.dtype == DType::kFloat16 || is_float8(c.lhs.dtype)) {
    // Widened to float32 (exact), then the float32 GEMM: no x86 GEMM takes float16, float8 or
    // mixed operands.
    gemm_f32(o.m, o.n, o.k, as_f32(c.lhs, true, o.lc, o.m, o.k, tl_widen_a),
             as_f32(c.rhs, false, o.rc, o.k, o.n, tl_widen_b), static_cast<float*>(acc), c_rs,
             accumulate);
    return;
  }
  switch (c.lhs.dtype) {
    case DType::kFloat32:
      gemm_f32(o.m, o.n, o.k, lhs_view<float>(c.lhs, o.lc), rhs_view<float>(c.rhs, o.rc),
               static_cast<float*>(acc), c_rs, accumulate);
      return;
    case DType::kBFloat16:
      gemm_bf16(o.m, o.n, o.k, lhs_view<bfloat16>(c.lhs, o.lc), rhs_view<bfloat16>(c.rhs, o.rc),
                static_cast<float*>(acc), c_rs, accumulate);
      return;
    case DType::kInt8:
      gemm_s8(o.m, o.n, o.k, lhs_view<int8_t>(c.lhs, o.lc), rhs_view<int8_t>(c.rhs, o.rc),
              static_cast<int32_t*>(acc), c_rs, accumulate);
      return;
    default:
      TESSERA_CHECK(false, "jnp::dot reached the GEMMs with operand dtypes none of them takes");
  }
}

// dst (+)= convert(tmp), element by element; tmp is (m, n) contiguous of the accumulator type.
template <class Acc, class D>
void store(const RawRef& dst, const Acc* tmp, int64_t m, int64_t n, bool accumulate) {
  auto* d0 = static_cast<D*>(dst.data);
  const int64_t rs = dst.strides[0];
  const int64_t cs = dst.strides[1];
  for (int64_t i = 0; i < m; ++i) {
    for (int64_t j = 0; j < n; ++j) {
      D& d = d0[i * rs + j * cs];
      const Acc v = tmp[i * n + j];
      if constexpr (std::is_same_v<Acc, float>) {
        const D r = static_cast<D>(v);  // rounds once for bfloat16
        d = accumulate ? static_cast<D>(static_cast<float>(d) + static_cast<float>(r)) : r;
      } else {
        // Integers wrap (modulo 2^bits), as on a TPU; unsigned arithmetic keeps C++ defined.
        using U = std::make_unsigned_t<D>;
        const auto r = static_cast<U>(static_cast<uint32_t>(v));
        d = static_cast<D>(accumulate ? static_cast<U>(static_cast<U>(d) + r) : r);
      }
    }
  }
}

// Axes looped over around the tile: batch and further free dimensions (each moving the operands
// and the destination), or further contracting dimensions (moving the operands only, summed).
struct LoopAxes {
  static constexpr int kMax = 2 * kMaxRank + lax::DotDimensionNumbers::kMaxDims;
  int count = 0;
  int64_t extent[kMax] = {};
  int64_t l[kMax] = {};  // lhs stride (elements)
  int64_t r[kMax] = {};  // rhs stride
  int64_t d[kMax] = {};  // destination stride
  void add(int64_t e, int64_t ls, int64_t rs, int64_t ds) {
    extent[count] = e;
    l[count] = ls;
    r[count] = rs;
    d[count] = ds;
    ++count;
  }
  int64_t total() const {
    int64_t t = 1;
    for (int i = 0; i < count; ++i) t *= extent[i];
    return t;
  }
  // Calls f(lhs offset, rhs offset, dst offset, first) for every index, row-major.
  template <class F>
  void each(F&& f) const {
    const int64_t n = total();
    int64_t idx[kMax] = {};
    int64_t lo = 0, ro = 0, dofs = 0;
    for (int64_t it = 0; it < n; ++it) {
      f(lo, ro, dofs, it == 0);
      for (int i = count - 1; i >= 0; --i) {
        lo += l[i];
        ro += r[i];
        dofs += d[i];
        if (++idx[i] < extent[i]) break;
        lo -= l[i] * extent[i];
        ro -= r[i] * extent[i];
        dofs -= d[i] * extent[i];
        idx[i] = 0;
      }
    }
  }
};

RawRef shifted(const RawRef& r, int64_t offset) {
  RawRef s = r;
  s.data = static_cast<std::byte*>(r.data) + offset * itemsize(r.dtype);
  return s;
}

// One (m, k) x (k, n) tile product, summed over `sum`'s axes: `call`'s operands are 2-D views
// with lc = 1, rc = 0 and `dst` an (m, n) view of the result's dtype.
void evaluate_tile(const DotCall& call, const DotOperands& o, const RawRef& dst, bool accumulate,
                   const LoopAxes& sum) {
  if (o.m == 0 || o.n == 0) return;
  const int64_t chunks = sum.total();
  const MxuEvent mxu_event(call.op, o.m, o.n, o.k * chunks,
                           (call.lhs.shape.size() * itemsize(call.lhs.dtype) * chunks) +
                               (call.rhs.shape.size() * itemsize(call.rhs.dtype) * chunks) +
                               dst.shape.size() * itemsize(dst.dtype));
  const DType acc_dtype = call.lhs.dtype == DType::kInt8 ? DType::kInt32 : DType::kFloat32;
  const bool direct = dst.dtype == acc_dtype && (dst.strides[1] == 1 || o.n == 1) &&
                      (dst.strides[0] >= o.n || o.m == 1) && !overlaps(dst, call.lhs) &&
                      !overlaps(dst, call.rhs);
  void* acc = direct ? dst.data : tl_temp.get(static_cast<size_t>(o.m * o.n) * 4);
  const int64_t acc_rs = direct ? (o.m == 1 ? o.n : dst.strides[0]) : o.n;
  const bool acc_accumulate = direct && accumulate;
  if (chunks == 0) {  // a contracting extent of 0: the sum is empty
    DotOperands none = o;
    none.k = 0;
    product(call, none, acc, acc_rs, acc_accumulate);
  } else {
    DotCall part = call;
    sum.each([&](int64_t lo, int64_t ro, int64_t, bool first) {
      part.lhs = shifted(call.lhs, lo);
      part.rhs = shifted(call.rhs, ro);
      product(part, o, acc, acc_rs, acc_accumulate || !first);
    });
  }
  if (direct) return;
  switch (dst.dtype) {
    case DType::kFloat32:
      store<float, float>(dst, static_cast<float*>(acc), o.m, o.n, accumulate);
      break;
    case DType::kBFloat16:
      store<float, bfloat16>(dst, static_cast<float*>(acc), o.m, o.n, accumulate);
      break;
    case DType::kFloat16:
      store<float, float16>(dst, static_cast<float*>(acc), o.m, o.n, accumulate);
      break;
    case DType::kFloat8E4M3FN:
      store<float, float8_e4m3fn>(dst, static_cast<float*>(acc), o.m, o.n, accumulate);
      break;
    case DType::kFloat8E5M2:
      store<float, float8_e5m2>(dst, static_cast<float*>(acc), o.m, o.n, accumulate);
      break;
    case DType::kFloat8E4M3B11FNUZ:
      store<float, float8_e4m3b11fnuz>(dst, static_cast<float*>(acc), o.m, o.n, accumulate);
      break;
    case DType::kInt32:
      store<int32_t, int32_t>(dst, static_cast<int32_t*>(acc), o.m, o.n, accumulate);
      break;
    case DType::kInt8:
      store<int32_t, int8_t>(dst, static_cast<int32_t*>(acc), o.m, o.n, accumulate);
      break;
    default:
      TESSERA_CHECK(false, "a dot's result has a dtype with no store");
  }
}

// `dst` seen in the product's natural axis order (batch..., m, n) with a unit axis where an
// operand is a vector: the caller's view permuted back by out_perm.
SmallVec natural_strides(const DotCall& call, const DotOperands& o, const RawRef& dst) {
  SmallVec st(o.natural.rank(), 0);
  for (int i = 0; i < dst.shape.rank(); ++i) {
    const int axis = call.out_perm.empty() ? i : static_cast<int>(call.out_perm[i]);
    st[axis] = dst.strides[i];
  }
  return st;
}

// A 2-D view of operand `r` at batch offset `offset` (elements): rows along `row` (or one row
// when it is -1), columns along `col` (or one column).
RawRef tile_view(const RawRef& r, int64_t offset, int row, int64_t rows, int col, int64_t cols) {
  return RawRef{static_cast<std::byte*>(r.data) + offset * itemsize(r.dtype), r.dtype, r.space,
                Shape{rows, cols},
                SmallVec{row >= 0 ? r.strides[row] : 0, col >= 0 ? r.strides[col] : 0}};
}

}  // namespace

void dot_evaluate(const DotCall& call, const RawRef& dst, bool accumulate) {
  const DotOperands o = dot_operands(call);
  const Shape want = dot_result_shape(call);
  if (dst.shape != want) {
    raise(ErrorKind::kShapeMismatch, call.op, call.where,
          fmt::format("the product of {} has shape {}, but the destination ref has shape {}; "
                      "the {} needs a destination of the product's shape (slice it with "
                      ".at(...))",
                      dot_call_text(call), want.to_string(), dst.shape.to_string(),
                      accumulate ? "accumulation (+=)" : "assignment"));
  }
  TESSERA_CHECK(dst.dtype == call.result,
                "a dot's destination has another dtype than the one its template checked");
  if (CoreContext* ctx = current_context()) ctx->engine->before_dot(*ctx, call, dst, accumulate);
  const SmallVec dst_nat = natural_strides(call, o, dst);
  const int nlf = o.lfree.size();
  const int nrf = o.rfree.size();
  const int dm = o.nb + nlf - 1;        // dst's m axis in natural order (when lf >= 0)
  const int dn = o.nb + nlf + nrf - 1;  // and its n axis (when rf >= 0)
  // Around the tile: the batch dimensions, then the lhs free dimensions but the last, then the
  // rhs ones; summed inside it: the contracting dimensions but the last.
  LoopAxes outer, sum;
  for (int i = 0; i < o.nb; ++i) {
    outer.add(o.batch[i], call.lhs.strides[o.lb[i]], call.rhs.strides[o.rb[i]], dst_nat[i]);
  }
  for (int i = 0; i + 1 < nlf; ++i) {
    const int d = static_cast<int>(o.lfree[i]);
    outer.add(call.lhs.shape[d], call.lhs.strides[d], 0, dst_nat[o.nb + i]);
  }
  for (int i = 0; i + 1 < nrf; ++i) {
    const int d = static_cast<int>(o.rfree[i]);
    outer.add(call.rhs.shape[d], 0, call.rhs.strides[d], dst_nat[o.nb + nlf + i]);
  }
  for (int i = 0; i + 1 < o.nc; ++i) {
    sum.add(call.lhs.shape[o.lcs[i]], call.lhs.strides[o.lcs[i]], call.rhs.strides[o.rcs[i]], 0);
  }
  DotCall tile{call.lhs, call.rhs, {{{1}, {0}}, {{}, {}}}, call.result, call.op, call.where, {}};
  DotOperands to = o;
  to.lc = 1;
  to.rc = 0;
  outer.each([&](int64_t lo, int64_t ro, int64_t dofs, bool) {
    tile.lhs = tile_view(call.lhs, lo, o.lf, o.m, o.lc, o.k);
    tile.rhs = tile_view(call.rhs, ro, o.rc, o.k, o.rf, o.n);
    const RawRef d{static_cast<std::byte*>(dst.data) + dofs * itemsize(dst.dtype), dst.dtype,
                   dst.space, Shape{o.m, o.n},
                   SmallVec{o.lf >= 0 ? dst_nat[dm] : 0, o.rf >= 0 ? dst_nat[dn] : 0}};
    evaluate_tile(tile, to, d, accumulate, sum);
  });
}

int emit_dot(ExprProgram& p, const DotCall& call, ValueStorage* cache) {
  const DotOperands o = dot_operands(call);
  ValueStorage s;
  if (cache != nullptr && *cache) {
    s = *cache;
  } else {
    s = ValueStorage::allocate(call.result, o.natural, call.where);
    const DotCall natural{call.lhs, call.rhs, call.dims, call.result, call.op, call.where, {}};
    dot_evaluate(
        natural,
        RawRef{s.data(), call.result, MemorySpace::VMEM, o.natural, row_major_strides(o.natural)},
        false);
    if (cache != nullptr) *cache = s;
  }
  const SmallVec nat = row_major_strides(o.natural);
  ExprNode& n = p.emplace();
  n.op = OpCode::kLoad;
  n.dtype = call.result;
  n.data = s.data();
  n.space = MemorySpace::VMEM;
  if (call.out_perm.empty()) {
    n.shape = o.natural;
    n.strides = nat;
  } else {
    SmallVec dims, st;
    for (int i = 0; i < call.out_perm.size(); ++i) {
      const int a = static_cast<int>(call.out_perm[i]);
      dims.push_back(o.natural[a]);
      st.push_back(nat[a]);
    }
    n.shape = Shape(std::move(dims));
    n.strides = std::move(st);
  }
  p.keep.push_back(std::move(s));
  return p.last();
}

}  // namespace tessera::detail
