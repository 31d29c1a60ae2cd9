// Internal: the storage of an in-kernel value (jnp::Value, value.h) and of the temporaries an
// expression keeps alive while it is evaluated.
//
// Inside a kernel a value's bytes come from the running core's VMEM (runtime/value_heap.h): they
// count against the kernel's VMEM budget next to the scratch, the live run_scoped scopes and the
// pipeline windows, and the checked engine sees them as the VMEM they model. Outside a kernel
// (host code, tests on hand-made refs) they come from the heap.
//
// A ValueStorage is a reference-counted handle. Values are immutable once computed, so sharing a
// block between the values and expressions that name it is safe. The count is not atomic: a
// value belongs to the core that made it. Every handle remembers the arena and the arena's value
// epoch it was made in: a value that escapes its kernel (stored in a variable outside the body)
// then refers to nothing, and using it is an error instead of a read of another kernel's memory.
#pragma once

#include <cstdint>
#include <source_location>
#include <utility>

#include "tessera/dtype.h"
#include "tessera/shape.h"

namespace tessera::detail {

class CoreArena;

/// The first 64 bytes of every value block; the elements follow.
struct ValueHeader {
  int64_t refs = 0;
  int64_t bytes = 0;  // the whole block, header included
};

class ValueStorage {
 public:
  static constexpr int64_t kHeaderBytes = 64;

  ValueStorage() noexcept = default;
  /// A block for `count` elements of `dtype` (for `shape`, named in messages). Inside a kernel:
  /// the core's VMEM (throws kCapacityExceeded at `where` when it does not fit); outside: the
  /// heap. The elements are unspecified (the checked engine treats them as never written).
  static ValueStorage allocate(DType dtype, const Shape& shape, std::source_location where);

  ValueStorage(const ValueStorage& o) : h_(o.h_), arena_(o.arena_), epoch_(o.epoch_) {
    if (h_ != nullptr) retain();
  }
  ValueStorage(ValueStorage&& o) noexcept
      : h_(std::exchange(o.h_, nullptr)), arena_(o.arena_), epoch_(o.epoch_) {}
  ValueStorage& operator=(ValueStorage o) noexcept {
    swap(o);
    return *this;
  }
  ~ValueStorage() {
    if (h_ != nullptr) drop();
  }
  void swap(ValueStorage& o) noexcept {
    std::swap(h_, o.h_);
    std::swap(arena_, o.arena_);
    std::swap(epoch_, o.epoch_);
  }

  explicit operator bool() const noexcept { return h_ != nullptr; }
  /// The first element.
  std::byte* data() const noexcept { return reinterpret_cast<std::byte*>(h_) + kHeaderBytes; }
  /// Throws when the block cannot be used on the calling thread: it was made in a kernel that
  /// has ended, on another core, or outside the running kernel. `what` names the user's call.
  void check_usable(const char* what, std::source_location where) const;

 private:
  void retain() const;   // checks, then counts one more handle
  void drop() noexcept;  // counts one handle less; frees at zero (no-op for a dead block)
  ValueHeader* h_ = nullptr;
  CoreArena* arena_ = nullptr;  // null: a heap block
  uint64_t epoch_ = 0;
};

}  // namespace tessera::detail
