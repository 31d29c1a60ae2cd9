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

Error::Error(ErrorKind kind, const std::string& message, std::source_location where, int core,
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

std::string format_location(std::source_location where) {
  if (where.line() == 0) return "<unknown location>";
  return fmt::format("{}:{}", basename_of(where.file_name()), where.line());
}

void raise(ErrorKind kind, std::string_view op, std::source_location where,
           const std::string& detail) {
  const ErrorContext* ctx = current_error_context();
  if (ctx == nullptr) {
    throw UsageError(
        kind, fmt::format("tessera: {} at {} (host): {}", op, format_location(where), detail),
        where);
  }
  if (where.line() == 0) {
    // C++ operators (a + b, dst = expr) carry no call site: point at the kernel instead.
    where = ctx->kernel_where;
  }
  std::string step;
  if (!ctx->grid_step.empty())
    step = fmt::format(", grid step ({})", fmt::join(ctx->grid_step, ", "));
  const std::string& name = ctx->kernel_name != nullptr ? *ctx->kernel_name : std::string();
  throw KernelError(kind,
                    fmt::format("tessera: {} at {} (kernel '{}', core {}{}): {}", op,
                                format_location(where), name, ctx->core, step, detail),
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
