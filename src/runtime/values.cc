// The storage of in-kernel values (tessera/detail/value_storage.h): blocks in the running core's
// VMEM (runtime/value_heap.h) inside a kernel, on the heap outside, with the checks that keep a
// value from being used where its block is not its own.
#include <fmt/format.h>

#include <cstdlib>
#include <cstring>
#include <new>
#include <string>

#include "runtime/arena.h"
#include "runtime/context.h"
#include "runtime/engine.h"
#include "runtime/value_heap.h"
#include "tessera/detail/checked_math.h"
#include "tessera/detail/runtime.h"
#include "tessera/detail/value_storage.h"
#include "tessera/ref.h"
#include "tessera/value.h"
#include "tessera/vector_ops.h"

namespace tessera::detail {

namespace {

int64_t block_bytes(DType dtype, const Shape& shape, std::source_location where) {
  int64_t elems = 0;
  int64_t bytes = 0;
  if (!checked_product(shape.begin(), shape.end(), &elems) ||
      !checked_mul(elems, itemsize(dtype), &bytes) ||
      !checked_add(bytes, ValueStorage::kHeaderBytes + 63, &bytes)) {
    raise(ErrorKind::kInvalidArgument, "jnp::Value", where,
          fmt::format("a {} value of shape {} has more bytes than 64 bits can count",
                      dtype_name(dtype), shape.to_string()));
  }
  return bytes / 64 * 64;
}

}  // namespace

ValueStorage ValueStorage::allocate(DType dtype, const Shape& shape, std::source_location where) {
  const int64_t bytes = block_bytes(dtype, shape, where);
  ValueStorage s;
  CoreContext* ctx = current_context();
  std::byte* block = nullptr;
  if (ctx == nullptr) {
    block = static_cast<std::byte*>(std::aligned_alloc(64, static_cast<size_t>(bytes)));
    if (block == nullptr) {
      raise(ErrorKind::kCapacityExceeded, "jnp::Value", where,
            fmt::format("could not allocate {} bytes for a {} value of shape {} on the host", bytes,
                        dtype_name(dtype), shape.to_string()));
    }
  } else {
    const int64_t offset = ctx->stack.push_value(
        bytes,
        [&] {
          return fmt::format("(a {} value of shape {})", dtype_name(dtype), shape.to_string());
        },
        "jnp::Value", where);
    block = ctx->arena->vmem() + offset;
    s.arena_ = ctx->arena;
    s.epoch_ = ctx->arena->values().epoch;
  }
  s.h_ = reinterpret_cast<ValueHeader*>(block);
  s.h_->refs = 1;
  s.h_->bytes = bytes;
  if (ctx != nullptr) {
    ctx->engine->fresh(*ctx, s.data(), bytes - kHeaderBytes, dtype,
                       [&] { return fmt::format("a jnp::Value of shape {}", shape.to_string()); });
  }
  return s;
}

void ValueStorage::check_usable(const char* what, std::source_location where) const {
  if (h_ == nullptr) {
    raise(ErrorKind::kInvalidArgument, what, where,
          "this jnp::Value holds nothing (it was default-constructed or moved from); assign it "
          "a value first");
  }
  CoreContext* ctx = current_context();
  if (arena_ == nullptr) {
    if (ctx != nullptr) {
      raise(ErrorKind::kInvalidArgument, what, where,
            "this jnp::Value was made outside the kernel (on the host) and cannot be used inside "
            "it: every core would share it; give the kernel its data as an input, or make the "
            "value in the body");
    }
    return;
  }
  if (arena_->values().epoch != epoch_) {
    raise(ErrorKind::kInvalidArgument, what, where,
          "this jnp::Value belongs to a kernel that has ended: a value lives in its core's VMEM "
          "and ends with the kernel body; write results to an output (or scratch) ref instead of "
          "keeping values outside the body");
  }
  if (ctx == nullptr || ctx->arena != arena_) {
    raise(ErrorKind::kInvalidArgument, what, where,
          "this jnp::Value was made on another core (or is used outside its kernel): a value "
          "belongs to the core that computed it, in that core's VMEM; exchange data between "
          "cores through refs and DMA");
  }
}

void ValueStorage::retain() const {
  check_usable("jnp::Value", {});
  ++h_->refs;
}

void ValueStorage::drop() noexcept {
  if (arena_ != nullptr) {
    // A block of an ended kernel is gone with it; one of another core is not ours to touch.
    if (arena_->values().epoch != epoch_) return;
    const CoreContext* ctx = current_context();
    if (ctx == nullptr || ctx->arena != arena_) return;
  }
  if (--h_->refs > 0) return;
  if (arena_ == nullptr) {
    std::free(h_);
  } else {
    arena_->values().release(reinterpret_cast<std::byte*>(h_) - arena_->vmem(), h_->bytes);
  }
  h_ = nullptr;
}

void check_value_element(const ValueStorage& s, const Shape& shape, const int64_t* idx, int n,
                         std::source_location where) {
  s.check_usable("jnp::Value element read", where);
  if (n < 0) {
    if (shape.size() != 1) {
      raise(ErrorKind::kInvalidArgument, "jnp::Value.item", where,
            fmt::format("a value of shape {} has {} elements; item() and the conversion to a "
                        "C++ scalar need exactly one (reduce it first, e.g. jnp::sum, or index "
                        "one element with v(i, j))",
                        shape.to_string(), shape.size()));
    }
    return;
  }
  bool ok = n == shape.rank();
  for (int a = 0; ok && a < n; ++a) ok = idx[a] >= 0 && idx[a] < shape[a];
  if (!ok) {
    std::string text = "(";
    for (int a = 0; a < n; ++a) text += fmt::format("{}{}", a ? ", " : "", idx[a]);
    text += n == 1 ? ",)" : ")";
    raise(ErrorKind::kOutOfBounds, "jnp::Value element read", where,
          fmt::format("index {} for a value of shape {}: give one index per axis, each in "
                      "0..extent-1",
                      text, shape.to_string()));
  }
}

void observe_value_read(const void* p, int size, std::source_location where) {
  if (t_observe_elements) observe_element(p, size, true, where);
}

void evaluate_scalar(const ExprProgram& program, const Shape& shape, DType dtype, void* out,
                     std::source_location where) {
  if (shape.size() != 1) {
    raise(ErrorKind::kInvalidArgument, "item", where,
          fmt::format("an expression of shape {} has {} elements; converting it to a C++ scalar "
                      "(item(), `float x = ...`, a condition) needs exactly one: reduce it first "
                      "(jnp::sum, jnp::max) or index one element",
                      shape.to_string(), shape.size()));
  }
  const ValueStorage s = ValueStorage::allocate(dtype, shape, where);
  evaluate(program, RawRef{s.data(), dtype, MemorySpace::VMEM, shape, row_major_strides(shape)});
  observe_value_read(s.data(), itemsize(dtype), where);
  std::memcpy(out, s.data(), static_cast<size_t>(itemsize(dtype)));
}

void check_values_released(CoreContext& ctx) {
  const ValueHeap& heap = ctx.arena->values();
  if (heap.live == 0) return;
  raise(ErrorKind::kInvalidArgument, "jnp::Value", ctx.kernel_where,
        fmt::format("{} jnp::Value(s) made on this core ({} bytes of VMEM) are still alive after "
                    "the kernel body returned: a value lives in its core's VMEM and ends with the "
                    "body; was one assigned to a variable declared outside the body? Write results "
                    "to an output or scratch ref instead",
                    heap.live, heap.held));
}

}  // namespace tessera::detail
