// Internal: checks of Tessera's own invariants. A failed check is a bug in Tessera, never the
// user's: it throws InternalError naming the condition and the library's file:line, so that the
// report can say where. TESSERA_CHECK is always on; TESSERA_DCHECK only in builds without NDEBUG
// (the debug and sanitizer presets), for checks too costly for a hot path.
#pragma once

#include <source_location>

namespace tessera::detail {
/// Throws InternalError for a failed TESSERA_CHECK (core/error.cc).
[[noreturn]] void internal_check_failed(const char* condition, const char* why,
                                        std::source_location where);
}  // namespace tessera::detail

#define TESSERA_CHECK(condition, why)                                                             \
  do {                                                                                            \
    if (!(condition)) [[unlikely]] {                                                              \
      ::tessera::detail::internal_check_failed(#condition, why, std::source_location::current()); \
    }                                                                                             \
  } while (0)

#ifdef NDEBUG
#define TESSERA_DCHECK(condition, why) \
  do {                                 \
  } while (0)
#else
#define TESSERA_DCHECK(condition, why) TESSERA_CHECK(condition, why)
#endif
