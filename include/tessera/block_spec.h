// File: tessera/block_spec.h
//
// Grids and BlockSpecs: how `emit_pipeline` and `pallas_call` walk an array block by block. A grid
// is a nest of loops, last axis fastest; at each grid point a BlockSpec's index map says which
// block of the array the body sees.
//
//   Pallas                                           Tessera
//   pl.BlockSpec((bm, bk), lambda i, j, k: (i, k))   pl::BlockSpec({bm, bk}, [](int i, int j, int
//   k) {
//                                                        return pl::idx(i, k); })
//   pl.BlockSpec((None, 128), lambda i: (i, 0))      pl::BlockSpec({pl::squeezed, 128},
//                                                        [](int i) { return pl::idx(i, 0); })
//   pipeline_mode=pl.Buffered(3)                     pl::BlockSpec(..., pl::Buffered(3))
//   pl.Buffered(buffer_count=2, prefetched_count=1)  pl::Buffered{.buffer_count = 2,
//                                                                  .prefetched_count = 1}
//   pl.BlockSpec((8, 128))   (no index map)          pl::BlockSpec({8, 128})   (block 0 always)
//   pl.BlockSpec((8, 128), f, memory_space=pltpu.SMEM)   pl::BlockSpec({8, 128}, f, pltpu::SMEM)
//   pl.BlockSpec(memory_space=pltpu.SMEM)            pl::BlockSpec(pltpu::SMEM)
//   (pl.BoundedSlice(8), 128), lambda i: (pl.ds(s, n), 0)
//                                                    {pl::BoundedSlice(8), 128},
//                                                    [](int i) { return pl::idx(pl::ds(s, n), 0); }
//   dimension_semantics=(pltpu.PARALLEL, pltpu.ARBITRARY)   {pltpu::PARALLEL, pltpu::ARBITRARY}
//
// The grid `(n, m)` means, as a loop nest:
//   for (i = 0; i < n; ++i) for (j = 0; j < m; ++j) body(block(i, j) of every operand);
// For a blocked axis of block size b, index k selects elements [k*b, k*b + b); a squeezed axis
// (`pl::squeezed`) has size 1 and is dropped from the body's ref, and its index is the element
// index. A last block that runs past the array is partial: only its in-bounds part is valid.
//
// This header holds the index algebra as pure functions (tested on their own, with no cores);
// pipeline.h and pallas_call.h run grids with it.
#pragma once

#include <array>
#include <cstdint>
#include <functional>
#include <initializer_list>
#include <optional>
#include <source_location>
#include <tuple>
#include <type_traits>
#include <utility>
#include <vector>

#include "tessera/detail/callable_traits.h"
#include "tessera/detail/small_vec.h"
#include "tessera/memory_space.h"
#include "tessera/ref.h"
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

namespace detail {
/// Whether iterations along an axis of these semantics may be split over the mesh's cores:
/// PARALLEL, and CORE_PARALLEL (Pallas' explicit split over TensorCores, which is what
/// PARALLEL does here).
constexpr bool is_parallel(pltpu::GridDimensionSemantics s) noexcept {
  return s == pltpu::GridDimensionSemantics::PARALLEL ||
         s == pltpu::GridDimensionSemantics::CORE_PARALLEL;
}
}  // namespace detail

namespace detail {
/// A scalar-prefetch ref parameter of an index map, built from the runtime's view.
template <class R>
R ref_from_raw(const RawRef& r);
}  // namespace detail

namespace pl {

/// A squeezed block axis (`None` / `pl.Squeezed()` in Pallas): size 1, dropped from the ref.
struct Squeezed {};
inline constexpr Squeezed squeezed{};

/// `pl.Element(block_size, padding=(lo, hi))`: a block axis whose index-map value is an element
/// offset rather than a block number. With padding, the array reads as if it had `lo` extra
/// elements before its start and `hi` after its end: the index map's value is an offset into
/// that padded array, and the window's elements that fall into the padding are unspecified on
/// input and dropped on output.
struct Element {
  int64_t block_size = 1;
  int64_t pad_lo = 0;
  int64_t pad_hi = 0;
  explicit Element(int64_t size) : block_size(size) {}
  Element(int64_t size, std::pair<int64_t, int64_t> padding)
      : block_size(size), pad_lo(padding.first), pad_hi(padding.second) {}
};

/// `pl.BoundedSlice(block_size)`: a block axis whose index map returns `pl::ds(start, size)`
/// with 0 <= size <= block_size: the block starts at element `start` and holds `size` valid
/// elements; the window keeps its static extent `block_size` (the rest of it is unspecified).
/// For `emit_pipeline` (Pallas' TPU pallas_call does not take it).
struct BoundedSlice {
  int64_t block_size = 1;
  explicit BoundedSlice(int64_t size) : block_size(size) {}
};

/// One axis of a block shape: a size (blocked), squeezed, an element window or a bounded slice.
struct BlockDim {
  enum class Kind : uint8_t { kBlocked, kSqueezed, kElement, kBounded };
  int64_t size = 1;
  bool is_squeezed = false;
  Kind kind = Kind::kBlocked;
  int64_t pad_lo = 0;  // kElement: virtual padding before and after the array
  int64_t pad_hi = 0;
  BlockDim(int64_t s) : size(s) {}  // NOLINT: implicit, so {8, 128} reads as a shape
  BlockDim(int s) : size(s) {}      // NOLINT
  BlockDim(Squeezed) : size(1), is_squeezed(true), kind(Kind::kSqueezed) {}  // NOLINT
  BlockDim(Element e)                                                        // NOLINT
      : size(e.block_size), kind(Kind::kElement), pad_lo(e.pad_lo), pad_hi(e.pad_hi) {}
  BlockDim(BoundedSlice b) : size(b.block_size), kind(Kind::kBounded) {}  // NOLINT
  bool is_element() const noexcept { return kind == Kind::kElement; }
  bool is_bounded() const noexcept { return kind == Kind::kBounded; }
};

/// Block indices returned by an index map: one per array axis, then the sizes of the
/// `pl::ds(start, size)` entries (BoundedSlice axes) in order; `slices` has bit a set where axis
/// a got a pl::ds (whose start is its entry), and bit 63 when one of them had a stride.
struct Indices {
  detail::SmallVec v;
  uint64_t slices = 0;
};
inline constexpr uint64_t kStridedSliceBit = uint64_t{1} << 63;

}  // namespace pl

namespace detail {
/// What an index map may return per axis: an integer, or a pl::ds (a BoundedSlice axis).
template <class I>
concept BlockIndexValue = IndexValue<I> || std::is_same_v<I, pl::Slice>;
}  // namespace detail

namespace pl {

/// `return pl::idx(i, k);` from an index map; `pl::idx(pl::ds(start, size), 0)` for a
/// BoundedSlice axis.
template <class... I>
requires(detail::BlockIndexValue<I>&&...) Indices idx(I... i) {
  if constexpr (!(std::is_same_v<I, Slice> || ...)) {
    return Indices{detail::SmallVec{static_cast<int64_t>(i)...}};
  } else {
    Indices r;
    detail::SmallVec sizes;
    int axis = 0;
    auto add = [&](auto x) {
      if constexpr (std::is_same_v<decltype(x), Slice>) {
        r.v.push_back(x.start);
        sizes.push_back(x.size);
        r.slices |= (uint64_t{1} << axis) | (x.stride != 1 ? kStridedSliceBit : 0);
      } else {
        r.v.push_back(static_cast<int64_t>(x));
      }
      ++axis;
    };
    (add(i), ...);
    for (int64_t s : sizes) r.v.push_back(s);
    return r;
  }
}

/// `pl.Buffered(n)`: how many buffers a pipeline keeps for a block (default 2, double
/// buffering; 1 for a block whose index never changes); `use_lookahead` fetches the next
/// distinct block as soon as a buffer frees. `prefetched_count` (an input of
/// emit_pipeline_with_allocations): the first that many blocks are already in the first
/// windows, copied there by the caller before the pipeline starts; the caller's windows are
/// bound with BufferedRef::with_window_ref (tessera/buffered_ref.h). Pallas' keywords carry
/// over as designated initializers:
///   pl::Buffered{.buffer_count = 2, .use_lookahead = false, .prefetched_count = 1}
struct Buffered {
  int buffer_count = 2;
  bool use_lookahead = false;
  int prefetched_count = 0;
};

}  // namespace pl

namespace detail {
/// A trailing argument of a BlockSpec, in any order: its memory space (a MemorySpace, or
/// `pltpu::VMEM` / `pltpu::SMEM` named as in Pallas) or its pipeline mode (pl::Buffered).
struct BlockSpecOption {
  enum class Kind : uint8_t { kSpace, kMode };
  Kind kind;
  MemorySpace space = MemorySpace::VMEM;
  pl::Buffered mode{};
  BlockSpecOption(MemorySpace s) : kind(Kind::kSpace), space(s) {}  // NOLINT: keyword-like
  BlockSpecOption(VmemMarkerFn) : kind(Kind::kSpace), space(MemorySpace::VMEM) {}  // NOLINT
  BlockSpecOption(SmemMarkerFn) : kind(Kind::kSpace), space(MemorySpace::SMEM) {}  // NOLINT
  BlockSpecOption(pl::Buffered b) : kind(Kind::kMode), mode(b) {}                  // NOLINT
};
/// An index map: anything but a BlockSpec option or a location.
template <class F>
concept IndexMapLike = !std::is_convertible_v<F, BlockSpecOption> &&
                       !std::is_same_v<std::decay_t<F>, std::source_location>;

/// How an index map's scalar-prefetch parameter is made from the runtime's SMEM views: a
/// `pltpu::SmemRef<T>` takes one, a `std::tuple` of them (a grouped operand, as gmm's metadata
/// tuple) one per element.
template <class P>
struct PrefetchParam {
  static constexpr int leaves = 1;
  static P make(const RawRef* r) { return ref_from_raw<P>(r[0]); }
  static void dtypes(SmallVec& out) { out.push_back(static_cast<int64_t>(leaf_dtype<P>())); }
  template <class R>
  static constexpr DType leaf_dtype() {
    if constexpr (is_ref_v<R>) {
      return R::dtype;
    } else {
      return DType::kInt32;  // ref_from_raw's static_assert names the problem
    }
  }
};
template <>
struct PrefetchParam<std::nullopt_t> {  // a None leaf of a grouped operand: no SMEM view
  static constexpr int leaves = 0;
  static std::nullopt_t make(const RawRef*) { return std::nullopt; }
  static void dtypes(SmallVec&) {}
};
template <class... R>
struct PrefetchParam<std::tuple<R...>> {
  static constexpr int leaves = (0 + ... + PrefetchParam<R>::leaves);
  static std::tuple<R...> make(const RawRef* r) {
    return make_at(r, std::index_sequence_for<R...>{});
  }
  // The SMEM view of element I follows the views of the elements before it.
  template <size_t I>
  static constexpr int offset() {
    constexpr int counts[] = {PrefetchParam<R>::leaves...};
    int n = 0;
    for (size_t k = 0; k < I; ++k) n += counts[k];
    return n;
  }
  template <size_t... I>
  static std::tuple<R...> make_at(const RawRef* r, std::index_sequence<I...>) {
    return std::tuple<R...>{PrefetchParam<R>::make(r + offset<I>())...};
  }
  static void dtypes(SmallVec& out) { (PrefetchParam<R>::dtypes(out), ...); }
};
}  // namespace detail

namespace pl {

/// `pl.BlockSpec(block_shape, index_map, memory_space=..., pipeline_mode=...)`.
///
/// The index map takes one `int` per grid axis and, in a pallas_call with
/// `pltpu::PrefetchScalarGridSpec<n>`, then the first (up to n) scalar-prefetch refs
/// (`pltpu::SmemRef<T>`, or a std::tuple of them for a grouped operand):
///   pl::BlockSpec({8, 128}, [](int i, pltpu::SmemRef<int32_t> s) { return pl::idx(s(i), 0); })
/// Without an index map (`pl::BlockSpec({8, 128})`) every grid point maps to block (0, 0, ...),
/// Pallas' default. The memory space and `pl::Buffered(n)` follow in any order:
///   pl::BlockSpec({8, 128}, map, pltpu::SMEM, pl::Buffered(1))
/// `pl::BlockSpec(pl::ANY)` (Pallas' `pl.BlockSpec(memory_space=pl.ANY)`) leaves the whole operand
/// in HBM, unpipelined: the body gets an HBM ref and moves data itself with DMAs.
/// `pl::BlockSpec(pltpu::SMEM)` (or `MemorySpace::SMEM`) stages the whole operand in SMEM.
class BlockSpec {
 public:
  using Option = detail::BlockSpecOption;
  /// The whole array as one block (Pallas' default when a spec is omitted).
  BlockSpec() = default;
  /// The whole array as one block in `memory_space` (VMEM, SMEM, or ANY/HBM: no staging).
  explicit BlockSpec(Option memory_space,
                     std::source_location where = std::source_location::current())
      : where_(where) {
    apply(memory_space);
  }
  /// A block shape without an index map: block (0, 0, ...) at every grid point; then the memory
  /// space and pipeline mode in any order.
  BlockSpec(std::initializer_list<BlockDim> block_shape,
            std::source_location where = std::source_location::current())
      : whole_(false), block_(block_shape), where_(where) {}
  BlockSpec(std::initializer_list<BlockDim> block_shape, Option a,
            std::source_location where = std::source_location::current())
      : whole_(false), block_(block_shape), where_(where) {
    apply(a);
  }
  BlockSpec(std::initializer_list<BlockDim> block_shape, Option a, Option b,
            std::source_location where = std::source_location::current())
      : whole_(false), block_(block_shape), where_(where) {
    apply(a);
    apply(b);
  }
  /// A block shape and an index map taking one int per grid axis and returning pl::idx(...);
  /// then the memory space and pipeline mode in any order.
  template <detail::IndexMapLike F>
  BlockSpec(std::initializer_list<BlockDim> block_shape, F index_map,
            std::source_location where = std::source_location::current())
      : whole_(false), block_(block_shape), where_(where) {
    set_index_map(std::move(index_map));
  }
  template <detail::IndexMapLike F>
  BlockSpec(std::initializer_list<BlockDim> block_shape, F index_map, Option a,
            std::source_location where = std::source_location::current())
      : whole_(false), block_(block_shape), where_(where) {
    set_index_map(std::move(index_map));
    apply(a);
  }
  template <detail::IndexMapLike F>
  BlockSpec(std::initializer_list<BlockDim> block_shape, F index_map, Option a, Option b,
            std::source_location where = std::source_location::current())
      : whole_(false), block_(block_shape), where_(where) {
    set_index_map(std::move(index_map));
    apply(a);
    apply(b);
  }

  bool is_whole_array() const noexcept { return whole_; }
  const std::vector<BlockDim>& block_shape() const noexcept { return block_; }
  const Buffered& pipeline_mode() const noexcept { return mode_; }
  /// Whether pl::Buffered was given (otherwise the pipeline decides: 2 buffers, or 1 for a
  /// block whose index never changes).
  bool has_pipeline_mode() const noexcept { return mode_given_; }
  /// Where the body sees the operand: VMEM (the default), SMEM, or ANY/HBM (not staged).
  MemorySpace memory_space() const noexcept { return space_; }
  /// Whether memory_space was given (otherwise VMEM, the default).
  bool has_memory_space() const noexcept { return space_given_; }
  const std::source_location& where() const noexcept { return where_; }
  /// Whether the spec has an index map (a block shape without one maps to block 0 everywhere).
  bool has_index_map() const noexcept { return static_cast<bool>(map_); }
  /// The number of grid indices the index map takes (-1 for the whole-array default and for a
  /// block shape without an index map, which take any grid).
  int index_map_arity() const noexcept { return arity_; }
  /// The number of scalar-prefetch parameters the index map takes after the grid indices.
  int index_map_prefetch() const noexcept { return prefetch_; }
  /// Non-null for an index map without state (a lambda that captures nothing): one address per
  /// callable type. Two specs with the same identity map a grid point to the same indices, so a
  /// pipeline evaluates such a map once per step for all its operands.
  const void* index_map_identity() const noexcept { return map_identity_; }
  /// Per scalar-prefetch parameter, the SMEM refs it takes (1, or a tuple's size), and the
  /// dtypes of those refs in order (as DType values).
  const detail::SmallVec& index_map_prefetch_leaves() const noexcept { return prefetch_leaves_; }
  const detail::SmallVec& index_map_prefetch_dtypes() const noexcept { return prefetch_dtypes_; }

  /// Evaluates the index map at a grid point (its size must equal index_map_arity()), passing
  /// `prefetch` (the SMEM views of index_map_prefetch() parameters) after the grid indices.
  Indices block_indices(const int64_t* grid_point, int n, const detail::RawRef* prefetch = nullptr,
                        int num_prefetch = 0) const;
  /// The same without the checks, for a pipeline that validated the spec against its grid once
  /// (runtime/block_mapping.h): index_map_arity() grid indices, index_map_prefetch() parameters.
  Indices map_block(const int64_t* grid_point, const detail::RawRef* prefetch) const {
    if (whole_) return Indices{};
    if (!map_) return Indices{detail::SmallVec(static_cast<int>(block_.size()), 0)};
    return map_(grid_point, prefetch);
  }

 private:
  template <class F, class Params, size_t... K, size_t... P>
  static Indices call(const F& f, const int64_t* g, const detail::RawRef* r,
                      std::index_sequence<K...>, std::index_sequence<P...>) {
    constexpr size_t nk = sizeof...(K);
    // The SMEM view where prefetch parameter P starts: the leaves of the parameters before it.
    constexpr std::array<int, sizeof...(P) + 1> offsets = [] {
      std::array<int, sizeof...(P) + 1> o{};
      int at = 0;
      size_t j = 0;
      ((o[j++] = at, at += detail::PrefetchParam<std::tuple_element_t<nk + P, Params>>::leaves),
       ...);
      o[j] = at;
      return o;
    }();
    static_cast<void>(r);  // unused without scalar-prefetch parameters
    static_cast<void>(offsets);
    return f(static_cast<int>(g[K])...,
             detail::PrefetchParam<std::tuple_element_t<nk + P, Params>>::make(r + offsets[P])...);
  }
  template <class F>
  void set_index_map(F f);
  // A trailing option; raises when one kind is given twice.
  void apply(const Option& o);

  bool whole_ = true;
  std::vector<BlockDim> block_;
  std::function<Indices(const int64_t*, const detail::RawRef*)> map_;
  const void* map_identity_ = nullptr;
  int arity_ = -1;
  int prefetch_ = 0;
  detail::SmallVec prefetch_leaves_;
  detail::SmallVec prefetch_dtypes_;
  Buffered mode_{};
  bool mode_given_ = false;
  bool space_given_ = false;
  MemorySpace space_ = MemorySpace::VMEM;
  std::source_location where_;
};

}  // namespace pl

namespace detail {

/// One address per stateless index map type (BlockSpec::index_map_identity). Not const: a
/// linker may fold identical read-only constants into one address, never writable variables.
template <class F>
inline char index_map_identity_tag = 0;

/// The number of leading integer parameters of an index map (the grid indices).
template <class Tuple, size_t... I>
constexpr int leading_ints(std::index_sequence<I...>) {
  int n = 0;
  bool ints = true;
  ((ints = ints && std::is_integral_v<std::tuple_element_t<I, Tuple>>, n += ints ? 1 : 0), ...);
  return n;
}

template <class R>
R ref_from_raw(const RawRef& r) {
  static_assert(is_ref_v<R> && R::space == MemorySpace::SMEM,
                "tessera: after its grid indices, an index map takes the scalar-prefetch refs, "
                "as pltpu::SmemRef<T> (pltpu::PrefetchScalarGridSpec)");
  using T = typename R::element_type;
  return R(static_cast<T*>(r.data), r.shape, r.strides);
}

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
/// (smaller than the block size for a partial last block). Squeezed axes have size 1. An
/// Element axis with padding may start before the array: `skip` elements of the window then
/// precede the array's first one, and `start` is where the valid part begins in the array.
struct BlockWindow {
  SmallVec start;
  SmallVec block;
  SmallVec valid;
  SmallVec skip;
};
/// Throws UsageError (kOutOfBounds) when a block index puts the whole block outside the array,
/// and kShapeMismatch when the block rank differs from the array rank.
BlockWindow block_window(const Shape& array, const std::vector<pl::BlockDim>& block,
                         const pl::Indices& indices, std::source_location where);

}  // namespace detail

template <class F>
void pl::BlockSpec::set_index_map(F f) {
  using P = detail::CallableTraits<F>;
  static_assert(P::known,
                "tessera: a BlockSpec index map must be a non-generic lambda or function taking "
                "one int per grid axis, e.g. [](int i, int j) { return pl::idx(i, j); }");
  static_assert(!P::mutable_call,
                "tessera: the index map is a mutable lambda; every core evaluates it at every "
                "step, so state it changes would be shared between cores (a data race): make it "
                "a function of its arguments, and drop `mutable`");
  using Params = typename P::values;
  constexpr size_t total = std::tuple_size_v<Params>;
  constexpr int n = detail::leading_ints<Params>(std::make_index_sequence<total>{});
  arity_ = n;
  prefetch_ = static_cast<int>(total) - n;
  [&]<size_t... J>(std::index_sequence<J...>) {
    (prefetch_leaves_.push_back(
         detail::PrefetchParam<std::tuple_element_t<static_cast<size_t>(n) + J, Params>>::leaves),
     ...);
    (detail::PrefetchParam<std::tuple_element_t<static_cast<size_t>(n) + J, Params>>::dtypes(
         prefetch_dtypes_),
     ...);
  }
  (std::make_index_sequence<total - static_cast<size_t>(n)>{});
  // A captureless lambda's result depends on its arguments alone (a mutable one is refused
  // above); a function pointer is not empty, so two of them never share an identity.
  if constexpr (std::is_empty_v<F>) map_identity_ = &detail::index_map_identity_tag<F>;
  map_ = [f = std::move(f)](const int64_t* g, const detail::RawRef* r) {
    return call<F, Params>(f, g, r, std::make_index_sequence<static_cast<size_t>(n)>{},
                           std::make_index_sequence<total - static_cast<size_t>(n)>{});
  };
}

}  // namespace tessera
