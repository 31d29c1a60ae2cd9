// Internal: helpers for building user-facing messages.
#pragma once

#include <source_location>
#include <string>

namespace tessera::detail {
/// "file.cc:12" (basename only), or "<unknown location>".
std::string format_location(std::source_location where);
}  // namespace tessera::detail
