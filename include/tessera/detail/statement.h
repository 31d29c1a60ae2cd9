// Internal: which user statement is running on this thread, for errors that have no call site.
#pragma once

namespace tessera::detail {

/// A return address inside the user's statement that is assigning to a Ref on this thread, or
/// null. Set by StatementScope; errors and the checked engine's records without a call site
/// are located by it (src/core/symbolize.cc).
inline thread_local const void* t_statement = nullptr;

/// Marks the calling thread as running the statement that `return_address` lies in, for the
/// scope's lifetime. The outermost scope wins (an assignment made inside Tessera while a user's
/// statement runs keeps the user's).
class StatementScope {
 public:
  explicit StatementScope(const void* return_address) noexcept : saved_(t_statement) {
    if (saved_ == nullptr) t_statement = return_address;
  }
  ~StatementScope() { t_statement = saved_; }
  StatementScope(const StatementScope&) = delete;
  StatementScope& operator=(const StatementScope&) = delete;

 private:
  const void* saved_;
};

/// Keeps the call just before it out of tail position, so that a statement's call into Tessera
/// returns into the statement and its return address names it.
inline void keep_return_address() noexcept { asm volatile(""); }

}  // namespace tessera::detail
