// Error construction: every user-facing message starts "tessera: <op> at <file>:<line> (...)".
#include "tessera/error.h"

#include <fmt/format.h>

#include <string_view>

#include "core/check.h"
#include "core/error_context.h"
#include "core/messages.h"
#include "tessera/detail/runtime.h"

namespace tessera {

const char* to_string(ErrorKind kind) noexcept {
  switch (kind) {
#define TESSERA_ERROR_KIND(name, text) \
  case ErrorKind::name:                \
    return text;
#include "tessera/detail/error_kinds.inc"
#undef TESSERA_ERROR_KIND
  }
  return "unknown";
}

namespace {
std::string_view basename_of(const char* path) {
  std::string_view p = path == nullptr ? "" : path;
  const size_t slash = p.find_last_of('/');
  return slash == std::string_view::npos ? p : p.substr(slash + 1);
}
}  // namespace

Error::Error(ErrorKind kind, const std::string& message, SourceLocation where, int core,
             std::vector<int64_t> grid_step, std::string kernel_name)
    : std::runtime_error(message),
      kind_(kind),
      where_(where),
      core_(core),
      grid_step_(std::move(grid_step)),
      kernel_name_(std::move(kernel_name)),
      detail_(message) {
  // detail_ keeps the part after the "): " that closes the location prefix, when present.
  const size_t pos = message.find("): ");
  if (pos != std::string::npos) detail_ = message.substr(pos + 3);
}

namespace detail {

namespace {
thread_local ErrorContext* t_error_context = nullptr;
}  // namespace

ErrorContext* current_error_context() noexcept { return t_error_context; }
void set_current_error_context(ErrorContext* ctx) noexcept { t_error_context = ctx; }

std::string format_location(const SourceLocation& where) {
  const SourceLocation at = resolved(where);
  if (at.line() == 0) return "<unknown location>";
  return fmt::format("{}:{}", basename_of(at.file_name()), at.line());
}

namespace {

/// The user's statement for an error raised without a call site: the address `where` carries,
/// else the statement running on this thread, else the innermost user frame on the stack.
SourceLocation statement_of(const SourceLocation& where, const ErrorContext& ctx) {
  if (where.address() != nullptr) {
    if (SourceLocation at = resolved(where); at.line() != 0) return at;
  }
  if (t_statement != nullptr) {
    if (SourceLocation at = resolve_statement(t_statement); at.line() != 0) return at;
  }
  // Only frames inside the kernel body: the host code that launched it is not the statement.
  if (ctx.body_frame == nullptr) return {};
  return user_frame_on_stack(ctx.body_frame);
}

}  // namespace

void raise(ErrorKind kind, std::string_view op, SourceLocation where, const std::string& detail) {
  const ErrorContext* ctx = current_error_context();
  if (ctx == nullptr) {
    throw UsageError(
        kind, fmt::format("tessera: {} at {} (host): {}", op, format_location(where), detail),
        where);
  }
  std::string note;
  if (where.line() == 0) {
    // C++ operators (a + b, dst = expr) carry no call site: find the statement from its code
    // address, or point at the kernel and say why.
    where = statement_of(where, *ctx);
    if (where.line() == 0) {
      where = ctx->kernel_where;
      note = kKernelLineNote;
    }
  }
  std::string step;
  if (!ctx->grid_step.empty())
    step = fmt::format(", grid step ({})", fmt::join(ctx->grid_step, ", "));
  const std::string& name = ctx->kernel_name != nullptr ? *ctx->kernel_name : std::string();
  throw KernelError(kind,
                    fmt::format("tessera: {} at {} (kernel '{}', core {}{}): {}{}", op,
                                format_location(where), name, ctx->core, step, detail, note),
                    where, ctx->core, ctx->grid_step, name);
}

void internal_check_failed(const char* condition, const char* why, std::source_location where) {
  throw InternalError(ErrorKind::kInternal,
                      fmt::format("tessera: internal error at {}: {} ({} is false); this is a bug "
                                  "in Tessera, please report it with this message",
                                  format_location(where), why, condition),
                      where);
}

}  // namespace detail
}  // namespace tessera
