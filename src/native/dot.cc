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

}  // namespace

void dot_evaluate(const DotCall& call, const RawRef& dst, bool accumulate) {
  const DotOperands o = dot_operands(call);
  if (CoreContext* ctx = current_context()) ctx->engine->before_dot(*ctx, call, dst, accumulate);
  const Shape want{o.m, o.n};
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

}  // namespace tessera::detail
