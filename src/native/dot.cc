// jnp::dot / lax::dot_general in the native engine: the operands as strided matrices (validated
// by core/dot_rules.h) and the products, the tile GEMMs of gemm.cc.
//
// A product goes straight into the destination when the destination has the accumulator's
// dtype (float32, int32), a unit column stride and does not overlap an operand. Otherwise it
// goes into a per-thread float32/int32 temporary first, and is then rounded (bfloat16) or
// wrapped (int8) into the destination, or added to it.
#include "tessera/dot.h"

#include <fmt/format.h>

#include <algorithm>
#include <cstddef>
#include <cstdlib>
#include <new>
#include <vector>

#include "core/check.h"
#include "core/dot_rules.h"
#include "native/gemm.h"
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

// The byte range a view covers (first byte, one past the last).
std::pair<const std::byte*, const std::byte*> extent_of(const RawRef& r) {
  const auto* p = static_cast<const std::byte*>(r.data);
  int64_t last = 0;
  for (int d = 0; d < r.shape.rank(); ++d) {
    if (r.shape[d] == 0) return {p, p};
    last += (r.shape[d] - 1) * r.strides[d];
  }
  return {p, p + (last + 1) * itemsize(r.dtype)};
}
bool overlaps(const RawRef& a, const RawRef& b) {
  const auto [a0, a1] = extent_of(a);
  const auto [b0, b1] = extent_of(b);
  return a0 < b1 && b0 < a1;
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

// acc (+)= product for the operands' dtype; `acc` has the accumulator dtype, row stride c_rs.
void product(const DotCall& c, const DotOperands& o, void* acc, int64_t c_rs, bool accumulate) {
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

// One (m, k) x (k, n) tile product: `call`'s operands are 2-D views with lc = 1, rc = 0 and
// `dst` an (m, n) view of the result's dtype.
void evaluate_tile(const DotCall& call, const DotOperands& o, const RawRef& dst, bool accumulate) {
  if (o.m == 0 || o.n == 0) return;
  const MxuEvent mxu_event(call.op, o.m, o.n, o.k,
                           (call.lhs.shape.size() * itemsize(call.lhs.dtype)) +
                               (call.rhs.shape.size() * itemsize(call.rhs.dtype)) +
                               dst.shape.size() * itemsize(dst.dtype));
  const DType acc_dtype = call.lhs.dtype == DType::kInt8 ? DType::kInt32 : DType::kFloat32;
  const bool direct = dst.dtype == acc_dtype && (dst.strides[1] == 1 || o.n == 1) &&
                      (dst.strides[0] >= o.n || o.m == 1) && !overlaps(dst, call.lhs) &&
                      !overlaps(dst, call.rhs);
  if (direct) {
    product(call, o, dst.data, o.m == 1 ? o.n : dst.strides[0], accumulate);
    return;
  }
  void* tmp = tl_temp.get(static_cast<size_t>(o.m * o.n) * 4);
  product(call, o, tmp, o.n, false);
  switch (dst.dtype) {
    case DType::kFloat32:
      store<float, float>(dst, static_cast<float*>(tmp), o.m, o.n, accumulate);
      break;
    case DType::kBFloat16:
      store<float, bfloat16>(dst, static_cast<float*>(tmp), o.m, o.n, accumulate);
      break;
    case DType::kInt32:
      store<int32_t, int32_t>(dst, static_cast<int32_t*>(tmp), o.m, o.n, accumulate);
      break;
    case DType::kInt8:
      store<int32_t, int8_t>(dst, static_cast<int32_t*>(tmp), o.m, o.n, accumulate);
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
  const int dm = o.nb;                        // dst's m axis in natural order
  const int dn = o.nb + (o.lf >= 0 ? 1 : 0);  // and its n axis
  DotCall tile{call.lhs, call.rhs, {{{1}, {0}}, {{}, {}}}, call.result, call.op, call.where, {}};
  DotOperands to = o;
  to.lc = 1;
  to.rc = 0;
  // Every batch element, in row-major order of the batch extents.
  int64_t count = 1;
  for (int i = 0; i < o.nb; ++i) count *= o.batch[i];
  SmallVec idx(o.nb, 0);
  for (int64_t b = 0; b < count; ++b) {
    int64_t lo = 0, ro = 0, dofs = 0;
    for (int i = 0; i < o.nb; ++i) {
      lo += idx[i] * call.lhs.strides[o.lb[i]];
      ro += idx[i] * call.rhs.strides[o.rb[i]];
      dofs += idx[i] * dst_nat[i];
    }
    tile.lhs = tile_view(call.lhs, lo, o.lf, o.m, o.lc, o.k);
    tile.rhs = tile_view(call.rhs, ro, o.rc, o.k, o.rf, o.n);
    const RawRef d{static_cast<std::byte*>(dst.data) + dofs * itemsize(dst.dtype), dst.dtype,
                   dst.space, Shape{o.m, o.n},
                   SmallVec{o.lf >= 0 ? dst_nat[dm] : 0, o.rf >= 0 ? dst_nat[dn] : 0}};
    evaluate_tile(tile, to, d, accumulate);
    for (int i = o.nb - 1; i >= 0; --i) {
      if (++idx[i] < o.batch[i]) break;
      idx[i] = 0;
    }
  }
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
