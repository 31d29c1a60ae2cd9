// Per-target whole-vector stores of the native VPU (included by the -inl headers that store rows:
// vector_convert-inl.h, vector_lanes-inl.h), regular or streaming.

// Re-included per target: the guard toggles with HWY_TARGET_TOGGLE (Highway's -inl.h idiom).
#if defined(TESSERA_NATIVE_VECTOR_STORE_INL_H_) == defined(HWY_TARGET_TOGGLE)
#ifdef TESSERA_NATIVE_VECTOR_STORE_INL_H_
#undef TESSERA_NATIVE_VECTOR_STORE_INL_H_
#else
#define TESSERA_NATIVE_VECTOR_STORE_INL_H_
#endif

#include <hwy/highway.h>

#include <cstdint>

HWY_BEFORE_NAMESPACE();
namespace tessera::detail::HWY_NAMESPACE {
namespace hn = hwy::HWY_NAMESPACE;

// q[j..] = value(j), a vector of `d` (N lanes) at a time, from j to the last whole vector of
// `len`. With `stream` (an output block written once in place: the pipeline's hint,
// runtime/step_hints.h), streaming stores where q is aligned for them and the vector is a whole
// register of 16 bytes or more (a streaming store of a partial one writes the whole register).
template <class D, class T, class V>
HWY_INLINE void store_vectors(D d, T* q, int64_t& j, int64_t len, int64_t N, bool stream, V value) {
  const int64_t bytes = N * static_cast<int64_t>(sizeof(T));
  if (stream && bytes >= 16 && reinterpret_cast<uintptr_t>(q) % bytes == 0) {
    for (; j + N <= len; j += N) hn::Stream(value(j), d, q + j);
  }
  for (; j + N <= len; j += N) hn::StoreU(value(j), d, q + j);
}

}  // namespace tessera::detail::HWY_NAMESPACE
HWY_AFTER_NAMESPACE();

#endif  // TESSERA_NATIVE_VECTOR_STORE_INL_H_
