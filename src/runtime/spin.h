// Internal: the pause instruction for spin-wait loops.
#pragma once

#include <atomic>
#include <chrono>
#include <cstdint>
#include <ctime>
#include <thread>

#if defined(__x86_64__) || defined(__i386__)
#include <immintrin.h>
#endif
#if defined(__linux__)
#include <linux/futex.h>
#include <sys/syscall.h>
#include <unistd.h>
#endif

namespace tessera::detail {
/// How long a blocked wait of a core or a device spins before it sleeps: enough for a signal
/// from a thread that is a few hundred instructions behind, short enough not to steal the CPU
/// from the thread it waits for when both share one hardware thread (then nothing spins:
/// CorePool::spinning()).
inline constexpr auto kSpinBeforeSleep = std::chrono::microseconds(50);

/// One spin-loop iteration's pause: `pause` on x86 (frees the core's resources for the other
/// hyperthread and avoids a memory-order flush on exit), a yield elsewhere.
inline void cpu_relax() noexcept {
#if defined(__x86_64__) || defined(__i386__)
  _mm_pause();
#else
  std::this_thread::yield();
#endif
}

/// Sleeps while `a` holds `old` (it may return early; callers re-check in a loop), and wakes
/// sleepers of `a`. On Linux these are bare futex calls: std::atomic::wait in libstdc++ 12 first
/// spins with sched_yield, and on a loaded machine (or a VM) each yield can hand the CPU away for
/// a whole time slice (measured: ~0.4 ms per launch of an empty 2-core kernel while two builds
/// ran), which no caller here wants — they spin on their own before they sleep.
template <class T>
inline void futex_wait(std::atomic<T>& a, T old) noexcept {
  static_assert(sizeof(T) == 4 && std::atomic<T>::is_always_lock_free);
#if defined(__linux__)
  (void)::syscall(SYS_futex, reinterpret_cast<T*>(&a), FUTEX_WAIT_PRIVATE, old, nullptr, nullptr,
                  0);
#else
  a.wait(old);
#endif
}

/// As futex_wait, for at most `ns` nanoseconds (ns > 0). `shared`: a word that other processes
/// map too (a futex keyed by the shared page, not by this process's address space).
template <class T>
inline void futex_wait_for(std::atomic<T>& a, T old, int64_t ns, bool shared = false) noexcept {
  static_assert(sizeof(T) == 4 && std::atomic<T>::is_always_lock_free);
#if defined(__linux__)
  timespec ts{static_cast<time_t>(ns / 1000000000), static_cast<long>(ns % 1000000000)};
  (void)::syscall(SYS_futex, reinterpret_cast<T*>(&a), shared ? FUTEX_WAIT : FUTEX_WAIT_PRIVATE,
                  old, &ts, nullptr, 0);
#else
  // No timed wait on the atomic elsewhere: a short sleep, after which the caller looks again.
  if (a.load() == old) std::this_thread::sleep_for(std::chrono::microseconds(50));
  (void)ns;
  (void)shared;
#endif
}

/// Wakes one or `all` sleepers of `a`; `shared` as for futex_wait_for.
template <class T>
inline void futex_wake(std::atomic<T>& a, bool all, bool shared = false) noexcept {
  static_assert(sizeof(T) == 4 && std::atomic<T>::is_always_lock_free);
#if defined(__linux__)
  (void)::syscall(SYS_futex, reinterpret_cast<T*>(&a), shared ? FUTEX_WAKE : FUTEX_WAKE_PRIVATE,
                  all ? INT32_MAX : 1, nullptr, nullptr, 0);
#else
  (void)shared;
  if (all) {
    a.notify_all();
  } else {
    a.notify_one();
  }
#endif
}
}  // namespace tessera::detail
