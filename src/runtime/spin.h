// Internal: the pause instruction for spin-wait loops.
#pragma once

#include <thread>

#if defined(__x86_64__) || defined(__i386__)
#include <immintrin.h>
#endif

namespace tessera::detail {
/// One spin-loop iteration's pause: `pause` on x86 (frees the core's resources for the other
/// hyperthread and avoids a memory-order flush on exit), a yield elsewhere.
inline void cpu_relax() noexcept {
#if defined(__x86_64__) || defined(__i386__)
  _mm_pause();
#else
  std::this_thread::yield();
#endif
}
}  // namespace tessera::detail
