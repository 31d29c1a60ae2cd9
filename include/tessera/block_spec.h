// File: tessera/block_spec.h
//
// Grids and BlockSpecs: how `emit_pipeline` and `pallas_call` (issue #3) walk an array block by
// block. A grid is a nest of loops, last axis fastest; at each grid point a BlockSpec's index map
// says which block of the array the body sees.
//
//   Pallas                                           Tessera
//   pl.BlockSpec((bm, bk), lambda i, j, k: (i, k))   pl::BlockSpec({bm, bk}, [](int i, int j, int
//   k) {
//                                                        return pl::idx(i, k); })
//   pl.BlockSpec((None, 128), lambda i: (i, 0))      pl::BlockSpec({pl::squeezed, 128},
//                                                        [](int i) { return pl::idx(i, 0); })
//   pipeline_mode=pl.Buffered(3)                     pl::BlockSpec(..., pl::Buffered(3))
//   dimension_semantics=(pltpu.PARALLEL, pltpu.ARBITRARY)   {pltpu::PARALLEL, pltpu::ARBITRARY}
//
// The grid `(n, m)` means, as a loop nest:
//   for (i = 0; i < n; ++i) for (j = 0; j < m; ++j) body(block(i, j) of every operand);
// For a blocked axis of block size b, index k selects elements [k*b, k*b + b); a squeezed axis
// (`pl::squeezed`) has size 1 and is dropped from the body's ref, and its index is the element
// index. A last block that runs past the array is partial: only its in-bounds part is valid.
//
// This header holds the index algebra as pure functions (tested on their own, with no cores);
// the pipelines that use it are issue #3's remaining work.
#pragma once

#include <cstdint>
#include <functional>
#include <initializer_list>
#include <source_location>
#include <tuple>
#include <type_traits>
#include <utility>
#include <vector>

#include "tessera/detail/small_vec.h"
#include "tessera/shape.h"

namespace tessera {
namespace pltpu {

/// `pltpu.GridDimensionSemantics`: whether grid iterations along an axis are independent
/// (PARALLEL: may be split over cores) or must run in order on one core (ARBITRARY).
enum class GridDimensionSemantics { PARALLEL, ARBITRARY, CORE_PARALLEL, SUBCORE_PARALLEL };
inline constexpr GridDimensionSemantics PARALLEL = GridDimensionSemantics::PARALLEL;
inline constexpr GridDimensionSemantics ARBITRARY = GridDimensionSemantics::ARBITRARY;
inline constexpr GridDimensionSemantics CORE_PARALLEL = GridDimensionSemantics::CORE_PARALLEL;
inline constexpr GridDimensionSemantics SUBCORE_PARALLEL = GridDimensionSemantics::SUBCORE_PARALLEL;

/// "parallel", "arbitrary", ... as Pallas spells them.
const char* to_string(GridDimensionSemantics s) noexcept;

}  // namespace pltpu

namespace pl {

/// A squeezed block axis (`None` / `pl.Squeezed()` in Pallas): size 1, dropped from the ref.
struct Squeezed {};
inline constexpr Squeezed squeezed{};

/// One axis of a block shape: a size, or squeezed.
struct BlockDim {
  int64_t size = 1;
  bool is_squeezed = false;
  BlockDim(int64_t s) : size(s) {}  // NOLINT: implicit, so {8, 128} reads as a shape
  BlockDim(int s) : size(s) {}      // NOLINT
  BlockDim(Squeezed) : size(1), is_squeezed(true) {}  // NOLINT
};

/// Block indices returned by an index map: one per array axis.
struct Indices {
  detail::SmallVec v;
};
/// `return pl::idx(i, k);` from an index map.
template <class... I>
requires(std::is_integral_v<I>&&...) Indices idx(I... i) {
  return Indices{detail::SmallVec{static_cast<int64_t>(i)...}};
}

/// `pl.Buffered(n)`: how many buffers a pipeline keeps for a block (default 2, double
/// buffering); `use_lookahead` fetches the next distinct block as soon as a buffer frees.
struct Buffered {
  int buffer_count = 2;
  bool use_lookahead = false;
};

/// `pl.BlockSpec(block_shape, index_map, pipeline_mode=...)`.
class BlockSpec {
 public:
  /// The whole array as one block (Pallas' default when a spec is omitted).
  BlockSpec() = default;
  /// A block shape and an index map taking one int per grid axis and returning pl::idx(...).
  template <class F>
  BlockSpec(std::initializer_list<BlockDim> block_shape, F index_map, Buffered mode = {},
            std::source_location where = std::source_location::current())
      : whole_(false), block_(block_shape), mode_(mode), where_(where) {
    set_index_map(std::move(index_map));
  }

  bool is_whole_array() const noexcept { return whole_; }
  const std::vector<BlockDim>& block_shape() const noexcept { return block_; }
  const Buffered& pipeline_mode() const noexcept { return mode_; }
  const std::source_location& where() const noexcept { return where_; }
  /// The number of grid indices the index map takes (-1 for the whole-array default).
  int index_map_arity() const noexcept { return arity_; }

  /// Evaluates the index map at a grid point (its size must equal index_map_arity()).
  Indices block_indices(const int64_t* grid_point, int n) const;

 private:
  template <size_t... K, class F>
  static Indices call(const F& f, const int64_t* g, std::index_sequence<K...>) {
    return f(static_cast<int>(g[K])...);
  }
  template <class F>
  void set_index_map(F f);

  bool whole_ = true;
  std::vector<BlockDim> block_;
  std::function<Indices(const int64_t*)> map_;
  int arity_ = -1;
  Buffered mode_{};
  std::source_location where_;
};

}  // namespace pl

namespace detail {

template <class F>
struct IndexMapArity {
  static constexpr int value = -1;
};
template <class F>
requires requires { &F::operator(); }
struct IndexMapArity<F> : IndexMapArity<decltype(&F::operator())> {};
template <class C, class R, class... P>
struct IndexMapArity<R (C::*)(P...) const> {
  static constexpr int value = sizeof...(P);
};
template <class R, class... P>
struct IndexMapArity<R (*)(P...)> {
  static constexpr int value = sizeof...(P);
};

/// The grid a core runs after `emit_pipeline`'s megacore split (Pallas' `_partition_grid`):
/// its extents and the offset of its first index along each axis.
struct GridPartition {
  Shape grid;
  SmallVec offset;
};

/// Splits `grid` over `num_cores` along one PARALLEL axis: the first PARALLEL axis whose size
/// divides by num_cores, else the largest PARALLEL axis (the first on ties), whose remainder goes
/// to the lowest cores. No split for one core. Throws UsageError for mismatched lengths or
/// (with more than one core) no PARALLEL axis.
GridPartition partition_grid(const Shape& grid,
                             const std::vector<pltpu::GridDimensionSemantics>& semantics,
                             int num_cores, int core_id, std::source_location where);

/// `pallas_call`'s split: PARALLEL axes must be a prefix of the grid; their points are divided
/// into contiguous chunks of ceil(points / num_cores), and each core runs the linear iteration
/// range [begin, end) of the whole grid (possibly empty).
struct IterationRange {
  int64_t begin = 0;
  int64_t end = 0;
};
IterationRange pallas_call_core_range(const Shape& grid,
                                      const std::vector<pltpu::GridDimensionSemantics>& semantics,
                                      int num_cores, int core_id, std::source_location where);

/// The grid point after `idx` in row-major order (last axis fastest); false after the last.
bool next_grid_point(const Shape& grid, SmallVec& idx);
/// Row-major linear index of a grid point, and back.
int64_t linear_grid_index(const Shape& grid, const SmallVec& idx);
SmallVec grid_point(const Shape& grid, int64_t linear);

/// The elements a block covers: per array axis its start, its block size and its valid size
/// (smaller than the block size for a partial last block). Squeezed axes have size 1.
struct BlockWindow {
  SmallVec start;
  SmallVec block;
  SmallVec valid;
};
/// Throws UsageError (kOutOfBounds) when a block index puts the whole block outside the array,
/// and kShapeMismatch when the block rank differs from the array rank.
BlockWindow block_window(const Shape& array, const std::vector<pl::BlockDim>& block,
                         const pl::Indices& indices, std::source_location where);

}  // namespace detail

template <class F>
void pl::BlockSpec::set_index_map(F f) {
  constexpr int n = detail::IndexMapArity<F>::value;
  static_assert(n >= 0,
                "tessera: a BlockSpec index map must be a non-generic lambda or function taking "
                "one int per grid axis, e.g. [](int i, int j) { return pl::idx(i, j); }");
  arity_ = n;
  map_ = [f = std::move(f)](const int64_t* g) {
    return call(f, g, std::make_index_sequence<static_cast<size_t>(n)>{});
  };
}

}  // namespace tessera
