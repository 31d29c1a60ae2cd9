// File: tessera/error.h
//
// The error types every Tessera call may throw. Pallas raises Python
// exceptions (`ValueError`, `RuntimeError`) whose tracebacks are re-pointed at
// the user's kernel line; Tessera throws C++ exceptions that carry the same
// facts as fields: the kind of error, the user's file:line, and, for errors
// raised while a kernel runs, the kernel's name, the core and the grid step.
//
//   try {
//     auto out = my_kernel(x);
//   } catch (const tessera::KernelError& e) {
//     std::cerr << e.what() << "\n";            // full message, "tessera: ..."
//     if (e.kind() == tessera::ErrorKind::kOutOfBounds) { ... }
//     std::cerr << e.where().file_name() << ":" << e.where().line() << "\n";
//   }
//
// Hierarchy:
//   tessera::Error : std::runtime_error
//     UsageError     the call was wrong; detected before any core ran, or by an
//                    API call outside a kernel.
//     KernelError    detected while a kernel ran; carries the core index.
//     InternalError  a bug in Tessera itself; the message says so.
#pragma once

#include <cstdint>
#include <source_location>
#include <stdexcept>
#include <string>
#include <vector>

namespace tessera {

/// A position in the user's source: file, line, column, function. Made from a
/// `std::source_location` (what API calls capture as a default argument), or, for a statement
/// made of C++ operators (`o = a + b`), which has no argument to capture it with, from the code
/// address of the statement; Tessera turns that address into file:line from the build's line
/// tables when it reports an error (docs/checked-mode.md, "Reading a message").
class SourceLocation {
 public:
  constexpr SourceLocation() noexcept = default;
  constexpr SourceLocation(const std::source_location& l) noexcept  // NOLINT: implicit
      : file_(l.file_name()), function_(l.function_name()), line_(l.line()), column_(l.column()) {}
  /// A position known by its parts; the strings must outlive the location.
  constexpr SourceLocation(const char* file, uint_least32_t line, const char* function) noexcept
      : file_(file), function_(function), line_(line) {}
  /// A statement known only by a code address inside it (line() is 0 until it is resolved).
  static SourceLocation of_code(const void* address) noexcept {
    SourceLocation l;
    l.address_ = address;
    return l;
  }

  const char* file_name() const noexcept { return file_; }
  const char* function_name() const noexcept { return function_; }
  uint_least32_t line() const noexcept { return line_; }
  uint_least32_t column() const noexcept { return column_; }
  /// The code address of the statement, where no line was captured; else null.
  const void* address() const noexcept { return address_; }

 private:
  const char* file_ = "";
  const char* function_ = "";
  uint_least32_t line_ = 0;
  uint_least32_t column_ = 0;
  const void* address_ = nullptr;
};

/// What went wrong, as a value tests and callers can branch on.
/// The list lives in detail/error_kinds.inc so names and strings cannot drift.
enum class ErrorKind : int {
#define TESSERA_ERROR_KIND(name, text) name,
#include "tessera/detail/error_kinds.inc"
#undef TESSERA_ERROR_KIND
};

/// The display string of an error kind ("out of bounds", ...).
const char* to_string(ErrorKind kind) noexcept;

/// Base of every error Tessera throws. `what()` is the full message.
class Error : public std::runtime_error {
 public:
  Error(ErrorKind kind, const std::string& message, SourceLocation where, int core = -1,
        std::vector<int64_t> grid_step = {}, std::string kernel_name = {});

  /// The category of the error.
  ErrorKind kind() const noexcept { return kind_; }
  /// The user's call that failed (file, line, function), never a library file.
  const SourceLocation& where() const noexcept { return where_; }
  /// The core that raised it, or -1 when no kernel was running.
  int core() const noexcept { return core_; }
  /// The grid position of the failing step; empty outside a grid.
  const std::vector<int64_t>& grid_step() const noexcept { return grid_step_; }
  /// The kernel's name (its `pl::name` or a default); empty outside a kernel.
  const std::string& kernel_name() const noexcept { return kernel_name_; }
  /// The message without the location prefix: what, which value, which rule, a hint.
  const std::string& detail() const noexcept { return detail_; }

 private:
  ErrorKind kind_;
  SourceLocation where_;
  int core_;
  std::vector<int64_t> grid_step_;
  std::string kernel_name_;
  std::string detail_;
};

/// A misuse of the API detected before any core ran (or outside a kernel).
class UsageError : public Error {
 public:
  using Error::Error;
};

/// A misuse detected while a kernel ran: carries the core (and grid step).
class KernelError : public Error {
 public:
  using Error::Error;
};

/// A bug in Tessera. Please report it with the message.
class InternalError : public Error {
 public:
  using Error::Error;
};

}  // namespace tessera
