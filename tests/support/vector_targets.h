// Test support: runs a check once on every SIMD target this CPU can run (the evaluator's
// dispatch forced to each, src/native/vector_plan.h), then restores the dispatch.
#pragma once

#include <gtest/gtest.h>

#include "native/vector_plan.h"

namespace tessera::testing {

/// Calls `check(target_name)` with each target forced in turn; stops after a fatal failure.
/// Returns how many targets were tried.
template <class F>
int on_every_vector_target(F&& check) {
  int tried = 0;
  for (const auto& [bit, name] : detail::vector_targets()) {
    detail::set_vector_targets_for_test(bit);
    check(name.c_str());
    detail::set_vector_targets_for_test(0);
    ++tried;
    if (::testing::Test::HasFatalFailure()) break;
  }
  return tried;
}

/// While alive, plans take the tile evaluator, not the fused path (detail::g_fused_path_for_test):
/// a fused result's reference.
class TileEvaluatorOnly {
 public:
  TileEvaluatorOnly() { detail::g_fused_path_for_test = false; }
  ~TileEvaluatorOnly() { detail::g_fused_path_for_test = true; }
  TileEvaluatorOnly(const TileEvaluatorOnly&) = delete;
  TileEvaluatorOnly& operator=(const TileEvaluatorOnly&) = delete;
};

}  // namespace tessera::testing
