// Test support for the checked-mode tests (tests/unit/checked_*_test.cc): checked
// InterpretParams, MARK_LINE to record the line of the statement that should fail, and
// expect_bug, which checks a diagnostic's kind, line, file, core and grid step.
#pragma once

#include <gtest/gtest.h>

#include <atomic>
#include <cstdlib>
#include <iostream>
#include <source_location>
#include <string>
#include <vector>

#include "support/expect_error.h"
#include "tessera/tessera.h"

namespace tessera::checked_testing {

using Mode = pltpu::DmaExecutionMode;

inline constexpr Mode kModes[] = {Mode::eager, Mode::on_wait};

// The checked-mode tests also track definedness (reads of unwritten memory are allowed by
// default, as in Pallas; these tests check the kUninitialized reports).
inline pltpu::InterpretParams checked(Mode m = Mode::on_wait) {
  pltpu::InterpretParams p;
  p.dma_execution_mode = m;
  p.allow_uninitialized_reads = false;
  return p;
}

inline pltpu::InterpretParams on_chip(const char* chip) {
  pltpu::InterpretParams p;
  p.chip = chip;
  return p;
}

// The line of the statement that should fail, set on that line from inside the body (atomic:
// several cores may set it).
inline std::atomic<int> g_line{0};
// `MARK_LINE; statement;` on one line records it (clang-format is off around each such line).
#define MARK_LINE g_line.store(__LINE__)

// Want::line: the line MARK_LINE recorded while the buggy kernel ran.
inline constexpr int kMarked = -1;

struct Want {
  ErrorKind kind;
  int line;
  int core = 0;
  std::vector<int64_t> step = {};
  std::string text = {};
};

// TESSERA_PRINT_DIAGNOSTICS=1 prints each message (docs/checked-mode.md quotes them).
inline void maybe_print(const Error& e) {
  if (std::getenv("TESSERA_PRINT_DIAGNOSTICS") != nullptr) std::cerr << e.what() << "\n\n";
}

// The diagnostic must name a line of the test file that calls expect_bug (`here`).
template <class E = KernelError, class F>
void expect_bug(F&& f, const Want& w, std::source_location here = std::source_location::current()) {
  auto e = tessera::testing::catch_error<E>(f);
  ASSERT_TRUE(e.has_value());
  maybe_print(*e);
  EXPECT_EQ(e->kind(), w.kind) << e->what();
  EXPECT_EQ(static_cast<int>(e->where().line()), w.line == kMarked ? g_line.load() : w.line)
      << e->what();
  // Compared by name: a line read back from the line tables (an operator statement's) is an
  // absolute path where std::source_location may hold the compiler's relative one.
  const auto base = [](std::string p) { return p.substr(p.find_last_of('/') + 1); };
  EXPECT_EQ(base(e->where().file_name()), base(here.file_name())) << e->what();
  EXPECT_EQ(e->core(), w.core) << e->what();
  EXPECT_EQ(e->grid_step(), w.step) << e->what();
  if (!w.text.empty()) {
    EXPECT_NE(std::string(e->what()).find(w.text), std::string::npos)
        << e->what() << "\nexpected to contain: " << w.text;
  }
}

inline Array<float> ramp(Shape shape, float scale = 1.0f) {
  Array<float> a(std::move(shape));
  for (int64_t i = 0; i < a.size(); ++i) a[i] = static_cast<float>(i) * scale;
  return a;
}

using DmaSem = pltpu::DmaSemaphoreRef;

}  // namespace tessera::checked_testing
