// Test support: run a statement, require a Tessera error of a given type, and check its kind,
// message and the user's line (the line the test passes, normally __LINE__ of the call).
#pragma once

#include <gtest/gtest.h>

#include <atomic>
#include <optional>
#include <string>

#include "tessera/error.h"

namespace tessera::testing {

/// Runs f; returns the caught E (and records a failure if f did not throw exactly an E).
template <class E, class F>
std::optional<E> catch_error(F&& f) {
  try {
    f();
  } catch (const E& e) {
    return e;
  } catch (const std::exception& e) {
    ADD_FAILURE() << "threw a different exception: " << e.what();
    return std::nullopt;
  } catch (...) {
    ADD_FAILURE() << "threw a non-std exception";
    return std::nullopt;
  }
  ADD_FAILURE() << "did not throw";
  return std::nullopt;
}

/// Runs f and expects a KernelError of `kind` at `line` (read after f ran: cores set it) whose
/// message contains `says`.
template <class F>
void expect_kernel_error(F&& f, ErrorKind kind, const std::string& says,
                         const std::atomic<int>& line) {
  auto e = catch_error<KernelError>(f);
  ASSERT_TRUE(e);
  EXPECT_EQ(e->kind(), kind) << e->what();
  EXPECT_EQ(static_cast<int>(e->where().line()), line.load()) << e->what();
  EXPECT_NE(std::string(e->what()).find(says), std::string::npos)
      << e->what() << "\nexpected: " << says;
}

}  // namespace tessera::testing

/// EXPECT_TESSERA_ERROR(statement, ErrorType, ErrorKind::kX, "substring", line)
#define EXPECT_TESSERA_ERROR(stmt_, Type_, kind_, substr_, line_)                           \
  do {                                                                                      \
    auto tessera_err_ = ::tessera::testing::catch_error<Type_>([&] { stmt_; });             \
    if (tessera_err_) {                                                                     \
      EXPECT_EQ(tessera_err_->kind(), kind_) << tessera_err_->what();                       \
      EXPECT_NE(std::string(tessera_err_->what()).find(substr_), std::string::npos)         \
          << "message: " << tessera_err_->what() << "\nexpected to contain: " << (substr_); \
      EXPECT_EQ(static_cast<int>(tessera_err_->where().line()), static_cast<int>(line_))    \
          << tessera_err_->what();                                                          \
      EXPECT_NE(std::string(tessera_err_->where().file_name()).find("_test.cc"),            \
                std::string::npos)                                                          \
          << "location should be the test file, got " << tessera_err_->where().file_name(); \
    }                                                                                       \
  } while (0)
