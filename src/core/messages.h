// Internal: helpers for building user-facing messages.
#pragma once

#include <string>

#include "tessera/error.h"

namespace tessera::detail {
/// "file.cc:12" (basename only), or "<unknown location>". A location known only by its code
/// address is resolved first (resolved()).
std::string format_location(const SourceLocation& where);

/// `where` itself when it has a line; else, for a statement known by its code address, the
/// user's file:line from the build's line tables (src/core/symbolize.cc), or an empty location.
SourceLocation resolved(const SourceLocation& where);
/// The user's statement containing `return_address` (a return address inside it), or an empty
/// location when the build has no line tables there.
SourceLocation resolve_statement(const void* return_address);
/// Appended to a message that names the kernel's line because the statement's is unknown.
inline constexpr const char* kKernelLineNote =
    " (this names the kernel: the statement's own line needs the line tables of a build with -g)";
/// The innermost frame of the calling thread's stack that is the user's code, looking only at
/// frames deeper than `limit` (a frame address; null: the whole stack), or an empty location.
SourceLocation user_frame_on_stack(const void* limit);
}  // namespace tessera::detail
