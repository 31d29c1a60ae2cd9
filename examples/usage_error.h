// How the examples refuse an argument: a tessera::UsageError whose message names the example and
// the caller's file:line, says what was wrong, and ends with a hint, as the library's own errors
// do (include/tessera/error.h).
#pragma once

#include <tessera/error.h>

#include <source_location>
#include <string>

namespace tessera::examples {

/// Throws UsageError(kInvalidArgument): "tessera: <name> at <file>:<line>: <what>; hint: <hint>",
/// located at `where` (the caller's call of the example).
[[noreturn]] void usage_error(const char* name, const std::string& what, const std::string& hint,
                              std::source_location where);

}  // namespace tessera::examples
