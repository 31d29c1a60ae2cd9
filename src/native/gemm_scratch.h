// Internal: a growable 64-byte aligned buffer for the GEMMs' packed operands, one per use and
// thread (each core packs into its own; src/native/gemm.cc, gemm_amx.cc, gemm_skinny.cc).
#pragma once

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <new>

namespace tessera::detail {

class GemmScratch {
 public:
  GemmScratch() = default;
  GemmScratch(const GemmScratch&) = delete;
  GemmScratch& operator=(const GemmScratch&) = delete;
  ~GemmScratch() { std::free(p_); }
  /// Room for `count` elements of T (at least one), 64-byte aligned; the contents are unspecified.
  template <class T>
  T* get(int64_t count) {
    const size_t bytes = static_cast<size_t>(std::max<int64_t>(count, 1)) * sizeof(T);
    if (bytes > cap_) {
      std::free(p_);
      cap_ = (bytes + 4095) / 4096 * 4096;
      p_ = std::aligned_alloc(64, cap_);
      if (p_ == nullptr) {
        cap_ = 0;
        throw std::bad_alloc();
      }
    }
    return static_cast<T*>(p_);
  }

 private:
  void* p_ = nullptr;
  size_t cap_ = 0;
};

}  // namespace tessera::detail
