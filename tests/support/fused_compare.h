// Test support for the native evaluator's fused path: a statement run once on the fused path and
// once on the tile evaluator (TileEvaluatorOnly), compared lane for lane, over operands whose
// values include NaN and infinities (tests/unit/fused_chain_test.cc, fused_tree_test.cc).
#pragma once

#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <string>
#include <vector>

#include "native/vector_plan.h"
#include "support/vector_targets.h"
#include "tessera/tessera.h"

namespace tessera::testing {

inline Array<float> fused_values(Shape s, int seed) {
  Array<float> x(s);
  for (int64_t e = 0; e < x.size(); ++e) {
    const int64_t v = (e * 7919 + seed * 104729) % 1009;
    x[e] = v == 13   ? std::numeric_limits<float>::quiet_NaN()
           : v == 17 ? std::numeric_limits<float>::infinity()
           : v == 19 ? -std::numeric_limits<float>::infinity()
                     : static_cast<float>(v - 500) / 37.0f;
  }
  return x;
}

// The same bits, or both NaN: which NaN an op of two NaNs gives is the first operand's on x86,
// and for a commutative op the compiler may swap the operands of two-operand SSE instructions, so
// the sign of a NaN made from two of them is not the evaluator's to keep (nor IEEE's to say).
inline bool same_lanes(float a, float b) {
  return std::memcmp(&a, &b, sizeof a) == 0 || (std::isnan(a) && std::isnan(b));
}

// Which path a statement must take on the native engine (kAny: in checked mode, or no matter).
enum class FusedPath { kTree, kTile, kAny };

// Runs body(x, y, s, o) in a 1-core pallas_call on x, y (shape `s`), a per-row scalar sc (s with
// its last extent 1), once into o_fused and once, with the fused path off, into o_tile, and
// compares the two outputs bit for bit over the window of `s` (the outputs' rows are 3 elements
// longer). `path`: whether the first run must have been a fused tree (it must have fused a
// statement) or the tile evaluator (it must have fused none).
template <class Body>
void compare_fused(const std::string& what, Shape s, FusedPath path, Body body) {
  const Array<float> x = fused_values(s, 1), y = fused_values(s, 2);
  std::vector<int64_t> sd(s.begin(), s.end());
  sd.back() = 1;
  const Array<float> sc = fused_values(Shape(sd), 3);
  std::vector<int64_t> wide(s.begin(), s.end());
  wide.back() += 3;
  const ShapeDtypeStruct<float> out{Shape(wide)};
  const int64_t cols = s[s.rank() - 1];
  int64_t trees = 0;
  auto k = pl::pallas_call(
      [&body, &trees, cols](pltpu::VmemRef<const float> xr, pltpu::VmemRef<const float> yr,
                            pltpu::VmemRef<const float> sr, pltpu::VmemRef<float> fused,
                            pltpu::VmemRef<float> tile) {
        auto w = [cols](pltpu::VmemRef<float> r) {
          return r.rank() == 2 ? r.at(pl::all, pl::ds(0, cols))
                               : r.at(pl::all, pl::all, pl::ds(0, cols));
        };
        const int64_t before = detail::g_fused_trees_for_test;
        body(xr, yr, sr, w(fused));
        trees = detail::g_fused_trees_for_test - before;
        const TileEvaluatorOnly tile_only;
        body(xr, yr, sr, w(tile));
      },
      pl::out_shape(out, out));
  auto [fused, tile] = k(x, y, sc);
  const int64_t rows = x.size() / cols;
  for (int64_t r = 0; r < rows; ++r) {
    for (int64_t j = 0; j < cols; ++j) {
      const float a = fused[r * (cols + 3) + j], b = tile[r * (cols + 3) + j];
      ASSERT_TRUE(same_lanes(a, b)) << what << " shape " << s.to_string() << " at row " << r
                                    << ", col " << j << ": " << a << " / " << b;
    }
  }
  if (path == FusedPath::kTree) {
    EXPECT_GE(trees, 1) << what << ": not a fused tree";
  } else if (path == FusedPath::kTile) {
    EXPECT_EQ(trees, 0) << what << ": a fused tree";
  }
}

}  // namespace tessera::testing
