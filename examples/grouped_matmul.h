// Pallas' grouped matmul kernels (jax/experimental/pallas/ops/tpu/megablox), ported line by line:
// `gmm` multiplies each group of rows of lhs by its own matrix (a mixture-of-experts layer's
// forward pass), `tgmm` multiplies each group's columns of lhs^T by the same group's rows of rhs
// (its weight gradient). The group layout becomes scalar-prefetched metadata: the grid walks the
// row tiles of every group, a tile shared by two groups visited once per group, and each visit
// stores only its group's rows.
#pragma once

#include <tessera/tessera.h>

#include <cstdint>
#include <functional>
#include <optional>
#include <source_location>

namespace tessera::examples {

/// The m, k and n tile sizes (Pallas' `tiling=(tm, tk, tn)`).
struct GmmTiling {
  int64_t tm = 128;
  int64_t tk = 128;
  int64_t tn = 128;
};

/// A tiling looked up by the problem's (m, k, n); std::nullopt when none is tuned (Pallas' LutFn).
using GmmTilingLut = std::function<std::optional<GmmTiling>(int64_t m, int64_t k, int64_t n)>;

/// The keyword arguments of Pallas' `gmm` and `tgmm` (the output dtype is a template argument).
struct GmmOptions {
  /// The tile sizes; `tiling_lut`, when set, replaces them.
  GmmTiling tiling{};
  GmmTilingLut tiling_lut{};
  /// The first group this call computes (the rhs holds groups group_offset ..
  /// group_offset + rhs.shape[0] - 1 of group_sizes): a shard of the groups.
  std::optional<int32_t> group_offset{};
  /// gmm only: rhs is (groups, n, k), multiplied transposed.
  bool transpose_rhs = false;
  /// tgmm only: the groups computed, from group_offset (default: all of group_sizes).
  std::optional<int64_t> num_actual_groups{};
};

/// make_group_metadata's results: `group_offsets` (groups + 1) each group's first row (a CSR row
/// pointer), `group_ids` and `m_tile_ids` (tiles_m + groups - 1) the group and the m tile of each
/// grid step, and `num_tiles` the grid steps this shard runs.
struct GroupMetadata {
  Array<int32_t> group_offsets;
  Array<int32_t> group_ids;
  Array<int32_t> m_tile_ids;
  int64_t num_tiles = 0;
};

/// `make_group_metadata(group_sizes=..., m=..., tm=..., start_group=..., num_nonzero_groups=...,
/// visit_empty_groups=...)`. Throws UsageError for negative sizes, sizes summing past m, m not a
/// multiple of tm, or a shard outside the groups. As in Pallas, with m = 0 and visit_empty_groups
/// num_tiles counts more steps than the arrays hold (gmm and tgmm launch nothing then).
GroupMetadata make_group_metadata(const Array<int32_t>& group_sizes, int64_t m, int64_t tm,
                                  int64_t start_group, int64_t num_nonzero_groups,
                                  bool visit_empty_groups,
                                  std::source_location where = std::source_location::current());

/// `gmm(lhs, rhs, group_sizes, preferred_element_type=Out, ...)`: lhs (m, k), rhs (groups, k, n)
/// (or (groups, n, k) with transpose_rhs), group_sizes int32 (total groups) summing to at most m.
/// Row block i of the result is lhs's rows of group i times rhs[i - group_offset]; rows of no
/// computed group are zero (Pallas zeroes them when the groups are sharded, and leaves them
/// unspecified past the last group). L, R and Out are float or bfloat16; the products run in
/// bfloat16 when both operands are bfloat16, else in float32, accumulating in float32.
template <class Out, class L, class R>
Array<Out> gmm(const Array<L>& lhs, const Array<R>& rhs, const Array<int32_t>& group_sizes,
               const GmmOptions& options = {},
               std::source_location where = std::source_location::current());

/// The same, starting from `existing_out` (m, n) (Pallas' existing_out, aliased to the output):
/// rows of no computed group keep its values.
template <class Out, class L, class R>
Array<Out> gmm(const Array<L>& lhs, const Array<R>& rhs, const Array<int32_t>& group_sizes,
               const Array<Out>& existing_out, const GmmOptions& options = {},
               std::source_location where = std::source_location::current());

/// `tgmm(lhs, rhs, group_sizes, preferred_element_type=Out, ...)`: lhs (k, m), rhs (m, n); the
/// result (num_actual_groups, k, n) holds, for each group g from group_offset, lhs's columns of
/// group g times rhs's rows of group g (zero for an empty group).
template <class Out, class L, class R>
Array<Out> tgmm(const Array<L>& lhs, const Array<R>& rhs, const Array<int32_t>& group_sizes,
                const GmmOptions& options = {},
                std::source_location where = std::source_location::current());

/// The same, adding `existing_out` (num_actual_groups, k, n) to each group's product.
template <class Out, class L, class R>
Array<Out> tgmm(const Array<L>& lhs, const Array<R>& rhs, const Array<int32_t>& group_sizes,
                const Array<Out>& existing_out, const GmmOptions& options = {},
                std::source_location where = std::source_location::current());

}  // namespace tessera::examples
