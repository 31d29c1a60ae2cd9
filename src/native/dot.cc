// jnp::dot / lax::dot_general: validation, the operands as strided matrices, and the result's
// dtype. The products themselves are the tile GEMMs of gemm.cc.
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

#include "native/gemm.h"
#include "runtime/context.h"
#include "runtime/engine.h"
#include "runtime/events.h"
#include "tessera/detail/runtime.h"

namespace tessera::detail {

namespace {

struct Operands {
  int64_t m, n, k;
  int lc, rc;  // normalised contracting dimensions
};

std::string dims_text(const lax::DotDimensionNumbers::Dims& d) {
  // Python's tuple spelling: (), (1,), (0, 1).
  if (d.size == 0) return "()";
  if (d.size == 1) return fmt::format("({},)", d.dims[0]);
  return fmt::format("({}, {}{})", d.dims[0], d.dims[1], d.size > 2 ? ", ..." : "");
}

std::string call_text(const DotCall& c) {
  return fmt::format("lhs {} {} and rhs {} {}", dtype_name(c.lhs.dtype), c.lhs.shape.to_string(),
                     dtype_name(c.rhs.dtype), c.rhs.shape.to_string());
}

Operands validate(const DotCall& c) {
  for (const RawRef* r : {&c.lhs, &c.rhs}) {
    if (r->shape.rank() != 2) {
      raise(ErrorKind::kInvalidArgument, c.op, c.where,
            fmt::format("{} has rank {} ({}); a dot of tiles needs 2-D refs (a vector can be "
                        "viewed as a (1, K) or (K, 1) tile)",
                        r == &c.lhs ? "lhs" : "rhs", r->shape.rank(), call_text(c)));
    }
  }
  const auto& cd = c.dims.contracting;
  if (c.dims.batch.lhs.size != 0 || c.dims.batch.rhs.size != 0) {
    raise(ErrorKind::kInvalidArgument, c.op, c.where,
          fmt::format("batch dimensions {} and {} were given for {}; a dot of 2-D tiles has no "
                      "batch dimensions (loop over the batch and take 2-D views with .at(b))",
                      dims_text(c.dims.batch.lhs), dims_text(c.dims.batch.rhs), call_text(c)));
  }
  if (cd.lhs.size != 1 || cd.rhs.size != 1) {
    raise(ErrorKind::kInvalidArgument, c.op, c.where,
          fmt::format("contracting dimensions {} and {} for {}; a dot of 2-D tiles contracts "
                      "exactly one dimension of each operand, e.g. (((1,), (0,)), ((), ())) for "
                      "x @ y",
                      dims_text(cd.lhs), dims_text(cd.rhs), call_text(c)));
  }
  int lc = cd.lhs.dims[0];
  int rc = cd.rhs.dims[0];
  for (int* d : {&lc, &rc}) {
    if (*d < -2 || *d > 1) {
      raise(ErrorKind::kInvalidArgument, c.op, c.where,
            fmt::format("contracting dimension {} of the {} is out of range for a 2-D operand "
                        "({}); use 0 or 1 (or -2, -1)",
                        *d, d == &lc ? "lhs" : "rhs", call_text(c)));
    }
    if (*d < 0) *d += 2;
  }
  const int64_t kl = c.lhs.shape[lc];
  const int64_t kr = c.rhs.shape[rc];
  if (kl != kr) {
    const bool plain = lc == 1 && rc == 0;
    raise(ErrorKind::kShapeMismatch, c.op, c.where,
          fmt::format("{}: the lhs contracts dimension {} (extent {}) and the rhs dimension {} "
                      "(extent {}); the contracted extents must be equal{}",
                      call_text(c), lc, kl, rc, kr,
                      plain && c.lhs.shape[1] == c.rhs.shape[1]
                          ? " (for x @ y.T use lax::dot_general(x, y, {{{1}, {1}}}))"
                          : ""));
  }
  return Operands{c.lhs.shape[1 - lc], c.rhs.shape[1 - rc], kl, lc, rc};
}

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
void product(const DotCall& c, const Operands& o, void* acc, int64_t c_rs, bool accumulate) {
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
      raise(ErrorKind::kInternal, c.op, c.where,
            fmt::format("internal error: no GEMM for {}", call_text(c)));
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

}  // namespace

Shape dot_result_shape(const DotCall& call) {
  const Operands o = validate(call);
  return Shape{o.m, o.n};
}

void dot_evaluate(const DotCall& call, const RawRef& dst, bool accumulate) {
  const Operands o = validate(call);
  if (CoreContext* ctx = current_context()) ctx->engine->before_dot(*ctx, call, dst, accumulate);
  const Shape want{o.m, o.n};
  if (dst.shape != want) {
    raise(ErrorKind::kShapeMismatch, call.op, call.where,
          fmt::format("the product of {} has shape {}, but the destination ref has shape {}; "
                      "the {} needs a destination of the product's shape (slice it with "
                      ".at(...))",
                      call_text(call), want.to_string(), dst.shape.to_string(),
                      accumulate ? "accumulation (+=)" : "assignment"));
  }
  if (dst.dtype != call.result) {
    raise(ErrorKind::kInternal, call.op, call.where,
          fmt::format("internal error: destination dtype {} differs from the result dtype {}",
                      dtype_name(dst.dtype), dtype_name(call.result)));
  }
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
      raise(ErrorKind::kInternal, call.op, call.where,
            fmt::format("internal error: no store for dtype {}", dtype_name(dst.dtype)));
  }
}

}  // namespace tessera::detail
