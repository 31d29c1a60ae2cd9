// Internal: the checks every number a user hands Tessera goes through where it enters — shapes
// (extents, element and byte counts) and TESSERA_* environment variables — and the cache that
// lets the runtime read an environment variable once yet re-read it after
// detail::reread_environment().
#pragma once

#include <atomic>
#include <cstdint>
#include <mutex>
#include <optional>
#include <source_location>

namespace tessera::detail {

/// Reads the integer environment variable `name`: nullopt when it is unset or empty. Anything but
/// a plain decimal integer in [lo, hi] (junk, trailing characters, a value that overflows 64 bits,
/// one outside the range) raises kInvalidArgument at `where` naming the variable, its value, what
/// it should be (`meaning`, e.g. "a core count") and the range. `op` names the user's call.
std::optional<int64_t> env_integer(const char* name, int64_t lo, int64_t hi, const char* meaning,
                                   const char* op, std::source_location where);

/// The generation of the process's TESSERA_* settings, bumped by reread_environment().
unsigned environment_generation() noexcept;

/// A value parsed from the environment once per generation. get() re-parses (under a lock)
/// when reread_environment() ran since the last parse; a parse that throws is retried next time.
template <class T>
class EnvCached {
 public:
  template <class Parse>
  const T& get(Parse&& parse) {
    const unsigned g = environment_generation();
    if (generation_.load(std::memory_order_acquire) != g) {
      const std::lock_guard<std::mutex> lock(mu_);
      if (generation_.load(std::memory_order_relaxed) != g) {
        value_ = parse();
        generation_.store(g, std::memory_order_release);
      }
    }
    return value_;
  }

 private:
  std::atomic<unsigned> generation_{0};  // environment_generation() starts at 1
  std::mutex mu_;
  T value_{};
};

}  // namespace tessera::detail
