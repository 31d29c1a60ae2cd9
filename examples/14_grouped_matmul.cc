// Pallas' grouped matmul kernels (megablox gmm.py), ported line by line: `gmm` and `tgmm`, with
// the group metadata (make_group_metadata), partial k and n tiles, transposed rhs, sharded groups
// (group_offset) and an existing output aliased to the result.
#include <algorithm>
#include <limits>
#include <string>
#include <type_traits>
#include <vector>

#include "grouped_matmul.h"
#include "usage_error.h"

namespace tessera::examples {

namespace {

using Smem = pltpu::SmemRef<int32_t>;
// The grouped scalar-prefetch operand: group_offsets, group_ids, m_tile_ids.
using Meta = std::tuple<Smem, Smem, Smem>;

// The dtype both operands are converted to before a product (common.select_input_dtype):
// bfloat16 when both are, else float32.
template <class L, class R>
using InputDtype =
    std::conditional_t<std::is_same_v<L, bfloat16> && std::is_same_v<R, bfloat16>, bfloat16, float>;

// What the kernels are given besides their refs (the closure of Pallas' kernel functions).
struct Static {
  int64_t tm, tk, tn;
  int64_t tiles_k;
  int64_t k_rem;  // k % tk: the last k tile's valid columns (0: the tile is whole)
  bool transpose_rhs;
};

std::string str(int64_t v) { return std::to_string(v); }

// jnp.repeat(values, repeats, total_repeat_length=n): truncated to n, or padded with the last
// value.
Array<int32_t> repeat(const std::vector<int32_t>& values, const std::vector<int64_t>& repeats,
                      int64_t n) {
  Array<int32_t> out(Shape{n});
  int64_t e = 0;
  for (size_t i = 0; i < values.size() && e < n; ++i) {
    for (int64_t r = 0; r < repeats[i] && e < n; ++r) out.data()[e++] = values[i];
  }
  const int32_t last = values.empty() ? 0 : values.back();
  for (; e < n; ++e) out.data()[e] = last;
  return out;
}

// jnp.roll(x, -shift).
void roll_left(Array<int32_t>& x, int64_t shift) {
  if (x.size() == 0) return;
  std::rotate(x.data(), x.data() + shift % x.size(), x.data() + x.size());
}

// _get_store_mask: the rows of the (tm, tn) tile of grid step grid_id that belong to its group.
// An expression of an iota and scalars (it reads no ref), so the statement that uses it computes
// it in the same pass.
auto store_mask(const Meta& meta, int64_t grid_id, int64_t tm, int64_t tn) {
  const auto& [group_offsets, group_ids, m_tile_ids] = meta;
  const int32_t group_id = group_ids(grid_id);
  const int32_t group_start = group_offsets(group_id);
  const int32_t group_end = group_offsets(group_id + 1);
  const int32_t m_id = m_tile_ids(grid_id) * static_cast<int32_t>(tm);
  auto iota = lax::broadcasted_iota<int32_t>(Shape{tm, tn}, 0) + m_id;
  return jnp::logical_and(iota >= group_start, iota < group_end);
}

// mask_k_rem: x with its columns (dim 1) or rows (dim 0) past k_rem zeroed.
template <class X>
auto mask_k_rem(X&& x, int64_t k_rem, int dim) {
  using T = typename std::remove_cvref_t<X>::value_type;
  const auto iota = lax::broadcasted_iota<int32_t>(x.shape(), dim);
  return jnp::where(iota < k_rem, std::forward<X>(x).template astype<float>(), 0.0f)
      .template astype<T>();
}

// gmm's kernel: accumulate lhs tile @ rhs tile over k, then store the group's rows of the tile.
template <class In, class L, class R, class Out>
void gmm_kernel(const Static& st, const Meta& meta, pltpu::VmemRef<const L> lhs,
                pltpu::VmemRef<const R> rhs, const pltpu::VmemRef<const Out>* existing_out,
                pltpu::VmemRef<Out> out, pltpu::VmemRef<float> acc_scratch) {
  const auto& m_tile_ids = std::get<2>(meta);
  const int64_t grid_id = pl::program_id(1);
  const int64_t k_i = pl::program_id(2);

  if (k_i == 0) {  // _zero_acc
    acc_scratch = jnp::zeros_like(acc_scratch);
    if (existing_out != nullptr) {
      const int64_t prev_grid_id = grid_id > 0 ? grid_id - 1 : 0;
      const bool is_first_processed_group = grid_id == 0;
      const bool m_tile_changed = m_tile_ids(grid_id) != m_tile_ids(prev_grid_id);
      if (is_first_processed_group || m_tile_changed) out = (*existing_out)[pl::ellipsis];
    }
  }

  auto store_accum = [&] {
    const auto mask = store_mask(meta, grid_id, st.tm, st.tn);
    out = lax::select(mask, acc_scratch[pl::ellipsis], out[pl::ellipsis].template astype<float>())
              .template astype<Out>();
  };

  const lax::DotDimensionNumbers dims = st.transpose_rhs
                                            ? lax::DotDimensionNumbers{{{1}, {1}}, {{}, {}}}
                                            : lax::DotDimensionNumbers{{{1}, {0}}, {{}, {}}};
  // _accum: the last k tile, when partial, has its columns past k masked out of both operands.
  if (k_i == st.tiles_k - 1 && st.k_rem != 0) {
    acc_scratch += lax::dot_general<float>(
        mask_k_rem(lhs[pl::ellipsis], st.k_rem, 1).template astype<In>(),
        mask_k_rem(rhs[pl::ellipsis], st.k_rem, st.transpose_rhs ? 1 : 0).template astype<In>(),
        dims);
  } else {
    acc_scratch += lax::dot_general<float>(lhs[pl::ellipsis].template astype<In>(),
                                           rhs[pl::ellipsis].template astype<In>(), dims);
  }
  if (k_i == st.tiles_k - 1) store_accum();
}

// tgmm's kernel: accumulate lhs tile^T @ rhs tile over the group's m tiles, masked to the group's
// rows, and store when the group changes.
template <class In, class L, class R, class Out>
void tgmm_kernel(const Static& st, const Meta& meta, pltpu::VmemRef<const L> lhs,
                 pltpu::VmemRef<const R> rhs, const pltpu::VmemRef<const Out>* existing_out,
                 pltpu::VmemRef<Out> out, pltpu::VmemRef<float> acc_scratch) {
  const auto& [group_offsets, group_ids, m_tile_ids] = meta;
  const int64_t grid_id = pl::program_id(2);

  const int32_t group = group_ids(grid_id);
  const int64_t prev_grid_id = grid_id > 0 ? grid_id - 1 : 0;
  const int32_t prev_group = group_ids(prev_grid_id);
  if (grid_id == 0 || prev_group != group) acc_scratch = jnp::zeros_like(acc_scratch);  // _zero_acc

  // Only a group with rows computes (_get_group_size > 0).
  if (group_offsets(group + 1) - group_offsets(group) > 0) {  // _do
    const auto rhs_mask = store_mask(meta, grid_id, st.tm, st.tn);
    const auto lhs_mask = store_mask(meta, grid_id, st.tm, st.tk);
    const jnp::Value loaded_lhs = jnp::swapaxes(
        lax::select(lhs_mask, lhs[pl::ellipsis].template astype<float>(), 0.0f), 0, 1);
    const jnp::Value loaded_rhs =
        lax::select(rhs_mask, rhs[pl::ellipsis].template astype<float>(), 0.0f);
    acc_scratch +=
        jnp::dot<float>(loaded_lhs.template astype<In>(), loaded_rhs.template astype<In>());
  }

  const bool is_end_of_grid = grid_id == pl::num_programs(2) - 1;
  const int64_t next_grid_id = is_end_of_grid ? grid_id : grid_id + 1;
  const int32_t next_group = group_ids(next_grid_id);
  if (is_end_of_grid || group != next_group) {  // _store_accum
    if (existing_out != nullptr) {
      out = (acc_scratch[pl::ellipsis] + (*existing_out)[pl::ellipsis].template astype<float>())
                .template astype<Out>();
    } else {
      out = acc_scratch[pl::ellipsis].template astype<Out>();
    }
  }
}

// The pallas_call bodies of gmm and tgmm: Pallas' kernel(group_metadata, group_offset, lhs, rhs,
// existing_out, out, acc_scratch), with existing_out None (no operand) or given.
template <class In, class L, class R, class Out>
using KernelFn = void (*)(const Static&, const Meta&, pltpu::VmemRef<const L>,
                          pltpu::VmemRef<const R>, const pltpu::VmemRef<const Out>*,
                          pltpu::VmemRef<Out>, pltpu::VmemRef<float>);

template <class In, class L, class R, class Out>
auto kernel_without_existing_out(const Static& st, KernelFn<In, L, R, Out> body) {
  return [st, body](Meta meta, Smem, pltpu::VmemRef<const L> lhs, pltpu::VmemRef<const R> rhs,
                    pltpu::VmemRef<Out> out, pltpu::VmemRef<float> acc_scratch) {
    body(st, meta, lhs, rhs, nullptr, out, acc_scratch);
  };
}

template <class In, class L, class R, class Out>
auto kernel_with_existing_out(const Static& st, KernelFn<In, L, R, Out> body) {
  return [st, body](Meta meta, Smem, pltpu::VmemRef<const L> lhs, pltpu::VmemRef<const R> rhs,
                    pltpu::VmemRef<const Out> existing_out, pltpu::VmemRef<Out> out,
                    pltpu::VmemRef<float> acc_scratch) {
    body(st, meta, lhs, rhs, &existing_out, out, acc_scratch);
  };
}

// _validate_args plus the checks a C++ caller needs (Pallas' shapes are traced, ours are not).
template <class L, class R>
void validate(const char* name, const Array<L>& lhs, const Array<R>& rhs,
              const Array<int32_t>& group_sizes, int expected_rhs_dims,
              std::source_location where) {
  if (lhs.rank() != 2) {
    usage_error(name, "expected a 2-tensor for 'lhs' but got a " + str(lhs.rank()) + "-tensor",
                "give lhs as a matrix", where);
  }
  if (rhs.rank() != expected_rhs_dims) {
    usage_error(name,
                "expected a " + str(expected_rhs_dims) + "-tensor for 'rhs' but got a " +
                    str(rhs.rank()) + "-tensor",
                expected_rhs_dims == 3 ? "give rhs as (groups, k, n)" : "give rhs as (m, n)",
                where);
  }
  if (group_sizes.rank() != 1) {
    usage_error(name, "group_sizes must be 1-D; got " + group_sizes.shape().to_string(),
                "give one size per group", where);
  }
}

// The tiling for (m, k, n): the LUT's when one is set, else options.tiling; each size positive.
GmmTiling pick_tiling(const char* name, const GmmOptions& options, int64_t m, int64_t k, int64_t n,
                      std::source_location where) {
  GmmTiling t = options.tiling;
  if (options.tiling_lut) {
    const std::optional<GmmTiling> found = options.tiling_lut(m, k, n);
    if (!found) {
      usage_error(
          name,
          "no tuned tiling found for (m, k, n) = (" + str(m) + ", " + str(k) + ", " + str(n) + ")",
          "add the shape to the tiling LUT, or pass options.tiling", where);
    }
    t = *found;
  }
  if (t.tm < 1 || t.tk < 1 || t.tn < 1) {
    usage_error(name,
                "tile sizes must be positive; got (tm, tk, tn) = (" + str(t.tm) + ", " + str(t.tk) +
                    ", " + str(t.tn) + ")",
                "use tiles such as (128, 128, 128)", where);
  }
  return t;
}

// The shard of groups this call computes: [group_offset, group_offset + count).
int64_t shard_start(const char* name, const GmmOptions& options, int64_t count,
                    int64_t total_groups, std::source_location where) {
  const int64_t start = options.group_offset.value_or(0);
  if (start < 0 || count < 0 || start > total_groups || count > total_groups - start) {
    usage_error(name,
                "the groups computed, " + str(count) + " from group_offset " + str(start) +
                    ", must lie within group_sizes' " + str(total_groups) + " groups",
                "give rhs (or num_actual_groups) the shard's groups and group_offset its first",
                where);
  }
  return start;
}

// The rows of out outside the computed groups' rows zeroed (_zero_uninitialized_memory).
template <class Out>
void zero_uninitialized_memory(Array<Out>& out, const GroupMetadata& meta, int64_t start_group,
                               int64_t num_groups) {
  const int64_t begin = meta.group_offsets[start_group];
  const int64_t end = meta.group_offsets[start_group + num_groups];
  const int64_t n = out.shape()[1];
  for (int64_t r = 0; r < out.shape()[0]; ++r) {
    if (r < begin || r >= end) std::fill(out.data() + r * n, out.data() + (r + 1) * n, Out(0));
  }
}

template <class Out, class L, class R>
Array<Out> gmm_impl(const Array<L>& lhs, const Array<R>& rhs, const Array<int32_t>& group_sizes,
                    const Array<Out>* existing_out, const GmmOptions& options,
                    std::source_location where) {
  constexpr const char* kName = "gmm";
  using In = InputDtype<L, R>;
  validate(kName, lhs, rhs, group_sizes, 3, where);
  const int64_t m = lhs.shape()[0];
  const int64_t k = lhs.shape()[1];
  const int64_t n = options.transpose_rhs ? rhs.shape()[1] : rhs.shape()[2];
  const int64_t rhs_k = options.transpose_rhs ? rhs.shape()[2] : rhs.shape()[1];
  if (rhs_k != k) {
    usage_error(kName,
                "lhs " + lhs.shape().to_string() + " and rhs " + rhs.shape().to_string() +
                    " disagree on k (" + str(k) + " against " + str(rhs_k) + ")",
                options.transpose_rhs ? "with transpose_rhs, rhs is (groups, n, k)"
                                      : "rhs is (groups, k, n); set transpose_rhs for (groups, "
                                        "n, k)",
                where);
  }
  if (existing_out != nullptr && existing_out->shape() != Shape{m, n}) {
    usage_error(kName,
                "existing_out must be the output's shape (" + str(m) + ", " + str(n) + "); got " +
                    existing_out->shape().to_string(),
                "pass the output of an earlier shard's gmm", where);
  }
  const int64_t num_current_groups = rhs.shape()[0];
  const int64_t num_total_groups = group_sizes.size();
  const int64_t start_group =
      shard_start(kName, options, num_current_groups, num_total_groups, where);
  const GmmTiling t = pick_tiling(kName, options, m, k, n, where);
  const int64_t tiles_k = (k + t.tk - 1) / t.tk;
  const int64_t tiles_n = (n + t.tn - 1) / t.tn;
  const GroupMetadata group_metadata =
      make_group_metadata(group_sizes, m, t.tm, start_group, num_current_groups, false, where);
  if (group_metadata.num_tiles == 0 || tiles_n == 0 || tiles_k == 0) {
    // Pallas' grid would be empty (no rows in the computed groups, n = 0 or k = 0), and the kernel
    // would write nothing: the output is existing_out, or zeros, with the computed groups' rows
    // their products over k = 0 (zeros) when k is 0.
    Array<Out> result = existing_out != nullptr ? *existing_out : Array<Out>(Shape{m, n}, Out(0));
    const int64_t begin = group_metadata.group_offsets[start_group];
    const int64_t end = group_metadata.group_offsets[start_group + num_current_groups];
    if (k == 0) std::fill(result.data() + begin * n, result.data() + end * n, Out(0));
    return result;
  }
  const Static st{t.tm, t.tk, t.tn, tiles_k, k % t.tk, options.transpose_rhs};

  const int64_t tm = t.tm, tk = t.tk, tn = t.tn;
  const bool transpose_rhs = options.transpose_rhs;
  auto lhs_spec = pl::BlockSpec(
      {tm, tk},
      [](int, int grid_id, int k_i, Meta meta) { return pl::idx(std::get<2>(meta)(grid_id), k_i); },
      where);
  auto rhs_map = [transpose_rhs](int n_i, int grid_id, int k_i, Meta meta, Smem group_offset) {
    if (transpose_rhs) std::swap(k_i, n_i);
    return pl::idx(std::get<1>(meta)(grid_id) - group_offset(0), k_i, n_i);
  };
  auto rhs_spec = transpose_rhs ? pl::BlockSpec({pl::squeezed, tn, tk}, rhs_map, where)
                                : pl::BlockSpec({pl::squeezed, tk, tn}, rhs_map, where);
  auto out_spec = pl::BlockSpec(
      {tm, tn},
      [](int n_i, int grid_id, int, Meta meta) { return pl::idx(std::get<2>(meta)(grid_id), n_i); },
      where);
  const auto grid = pl::grid({tiles_n, group_metadata.num_tiles, tiles_k});
  const pltpu::CompilerParams params{
      .dimension_semantics = {pltpu::PARALLEL, pltpu::ARBITRARY, pltpu::ARBITRARY}};
  const std::tuple metadata{group_metadata.group_offsets, group_metadata.group_ids,
                            group_metadata.m_tile_ids};
  const Array<int32_t> group_offset({1}, {static_cast<int32_t>(start_group)});
  const auto scratch = pl::scratch_shapes(pltpu::VMEM<float>({tm, tn}));
  const auto out_shape = pl::out_shape<Out>({m, n});
  Array<Out> result;
  if (existing_out == nullptr) {
    auto call_gmm = pl::pallas_call(
        kernel_without_existing_out<In, L, R, Out>(st, gmm_kernel<In, L, R, Out>), out_shape,
        pltpu::PrefetchScalarGridSpec<2>(grid, pl::in_specs(lhs_spec, rhs_spec),
                                         pl::out_specs(out_spec), scratch),
        params, pl::name("gmm"));
    result = call_gmm(metadata, group_offset, lhs, rhs);
    // Rows of no computed group (other shards', or past the last group) are zeroed.
    if (group_metadata.group_offsets[start_group] > 0 ||
        group_metadata.group_offsets[start_group + num_current_groups] < m) {
      zero_uninitialized_memory(result, group_metadata, start_group, num_current_groups);
    }
  } else {
    auto call_gmm = pl::pallas_call(
        kernel_with_existing_out<In, L, R, Out>(st, gmm_kernel<In, L, R, Out>), out_shape,
        pltpu::PrefetchScalarGridSpec<2>(grid, pl::in_specs(lhs_spec, rhs_spec, out_spec),
                                         pl::out_specs(out_spec), scratch),
        pl::input_output_aliases({{6, 0}}), params, pl::name("gmm"));
    result = call_gmm(metadata, group_offset, lhs, rhs, *existing_out);
  }
  return result;
}

template <class Out, class L, class R>
Array<Out> tgmm_impl(const Array<L>& lhs_in, const Array<R>& rhs, const Array<int32_t>& group_sizes,
                     const Array<Out>* existing_out, const GmmOptions& options,
                     std::source_location where) {
  constexpr const char* kName = "tgmm";
  using In = InputDtype<L, R>;
  validate(kName, lhs_in, rhs, group_sizes, 2, where);
  const int64_t k = lhs_in.shape()[0];
  const int64_t m = lhs_in.shape()[1];
  const int64_t n = rhs.shape()[1];
  if (rhs.shape()[0] != m) {
    usage_error(kName,
                "lhs " + lhs_in.shape().to_string() + " (k, m) and rhs " + rhs.shape().to_string() +
                    " (m, n) disagree on m",
                "give lhs transposed: (k, m)", where);
  }
  const int64_t num_groups = group_sizes.size();
  const int64_t num_actual_groups = options.num_actual_groups.value_or(num_groups);
  const int64_t start_group = shard_start(kName, options, num_actual_groups, num_groups, where);
  if (existing_out != nullptr && existing_out->shape() != Shape{num_actual_groups, k, n}) {
    usage_error(kName,
                "existing_out must be the output's shape (" + str(num_actual_groups) + ", " +
                    str(k) + ", " + str(n) + "); got " + existing_out->shape().to_string(),
                "pass the gradients to add to", where);
  }
  const GmmTiling t = pick_tiling(kName, options, m, k, n, where);
  const int64_t tiles_k = (k + t.tk - 1) / t.tk;
  const int64_t tiles_n = (n + t.tn - 1) / t.tn;
  const GroupMetadata group_metadata =
      make_group_metadata(group_sizes, m, t.tm, start_group, num_actual_groups, true, where);
  if (m == 0 || group_metadata.num_tiles == 0 || tiles_n == 0 || tiles_k == 0) {
    // Nothing to launch: every group is empty (m = 0; Pallas' metadata would then name more grid
    // steps than it has entries), none is computed, or the output has no elements. Each group's
    // product is zero: the output is existing_out, or zeros.
    return existing_out != nullptr ? *existing_out
                                   : Array<Out>(Shape{num_actual_groups, k, n}, Out(0));
  }
  const Static st{t.tm, t.tk, t.tn, tiles_k, 0, false};

  const int64_t tm = t.tm, tk = t.tk, tn = t.tn;
  auto lhs_spec = pl::BlockSpec(
      {tm, tk},
      [](int, int k_i, int grid_id, Meta meta) { return pl::idx(std::get<2>(meta)(grid_id), k_i); },
      where);
  auto rhs_spec = pl::BlockSpec(
      {tm, tn},
      [](int n_i, int, int grid_id, Meta meta) { return pl::idx(std::get<2>(meta)(grid_id), n_i); },
      where);
  auto out_spec = pl::BlockSpec(
      {pl::squeezed, tk, tn},
      [](int n_i, int k_i, int grid_id, Meta meta, Smem group_offset) {
        return pl::idx(std::get<1>(meta)(grid_id) - group_offset(0), k_i, n_i);
      },
      where);
  const auto grid = pl::grid({tiles_n, tiles_k, group_metadata.num_tiles});
  const pltpu::CompilerParams params{
      .dimension_semantics = {pltpu::PARALLEL, pltpu::ARBITRARY, pltpu::ARBITRARY}};
  const std::tuple metadata{group_metadata.group_offsets, group_metadata.group_ids,
                            group_metadata.m_tile_ids};
  const Array<int32_t> group_offset({1}, {static_cast<int32_t>(start_group)});
  const auto scratch = pl::scratch_shapes(pltpu::VMEM<float>({tk, tn}));
  const auto out_shape = pl::out_shape<Out>({num_actual_groups, k, n});
  // lhs.swapaxes(0, 1): the kernel reads (m, k).
  Array<L> lhs(Shape{m, k});
  for (int64_t r = 0; r < m; ++r) {
    for (int64_t c = 0; c < k; ++c) lhs.data()[r * k + c] = lhs_in.data()[c * m + r];
  }
  if (existing_out == nullptr) {
    return pl::pallas_call(
        kernel_without_existing_out<In, L, R, Out>(st, tgmm_kernel<In, L, R, Out>), out_shape,
        pltpu::PrefetchScalarGridSpec<2>(grid, pl::in_specs(lhs_spec, rhs_spec),
                                         pl::out_specs(out_spec), scratch),
        params, pl::name("tgmm"))(metadata, group_offset, lhs, rhs);
  }
  return pl::pallas_call(
      kernel_with_existing_out<In, L, R, Out>(st, tgmm_kernel<In, L, R, Out>), out_shape,
      pltpu::PrefetchScalarGridSpec<2>(grid, pl::in_specs(lhs_spec, rhs_spec, out_spec),
                                       pl::out_specs(out_spec), scratch),
      pl::input_output_aliases({{6, 0}}), params,
      pl::name("tgmm"))(metadata, group_offset, lhs, rhs, *existing_out);
}

}  // namespace

GroupMetadata make_group_metadata(const Array<int32_t>& group_sizes, int64_t m, int64_t tm,
                                  int64_t start_group, int64_t num_nonzero_groups,
                                  bool visit_empty_groups, std::source_location where) {
  constexpr const char* kName = "make_group_metadata";
  const int64_t num_groups = group_sizes.size();
  if (tm < 1 || m < 0 || m % tm != 0) {
    usage_error(kName, str(m) + " must be divisible by x-dimension tile size (" + str(tm) + ")",
                "pick tm dividing lhs's rows, or pad the rows", where);
  }
  if (m > std::numeric_limits<int32_t>::max()) {
    usage_error(kName, "m = " + str(m) + " rows do not fit the int32 metadata",
                "split the rows over calls", where);
  }
  if (num_groups < 1 || start_group < 0 || num_nonzero_groups < 0 ||
      start_group > num_groups - num_nonzero_groups) {
    usage_error(kName,
                "groups " + str(start_group) + " .. " + str(start_group + num_nonzero_groups) +
                    " must lie within the " + str(num_groups) + " of group_sizes",
                "give at least one group, and a shard within them", where);
  }
  // group_offsets: a CSR row pointer (0, the running sums of the sizes).
  std::vector<int32_t> offsets(static_cast<size_t>(num_groups) + 1, 0);
  for (int64_t g = 0; g < num_groups; ++g) {
    const int32_t size = group_sizes[g];
    if (size < 0 || size > m - offsets[g]) {
      usage_error(kName,
                  "group " + str(g) + " has size " + str(size) + ": sizes must be >= 0 and sum " +
                      "to at most m = " + str(m) + " (the groups before it end at row " +
                      str(offsets[g]) + ")",
                  "give each group's row count; rows past the last group are left out", where);
    }
    offsets[g + 1] = offsets[g] + size;
  }
  const int64_t tiles_m = m / tm;
  // Each group's tiles: its rows rounded out to whole tiles (a tile a group starts inside of is
  // visited by it too); an empty group has none, or one when visit_empty_groups.
  std::vector<int64_t> group_tiles(num_groups);
  std::vector<int32_t> iota(num_groups);
  for (int64_t g = 0; g < num_groups; ++g) {
    const int64_t rounded_end = (offsets[g + 1] + tm - 1) / tm * tm;
    const int64_t rounded_start = offsets[g] / tm * tm;
    const bool empty = group_sizes[g] == 0;
    group_tiles[g] = empty ? (visit_empty_groups ? 1 : 0) : (rounded_end - rounded_start) / tm;
    iota[g] = static_cast<int32_t>(g);
  }
  const int64_t grid_length = tiles_m + num_groups - 1;
  Array<int32_t> group_ids = repeat(iota, group_tiles, grid_length);
  // Each m tile is visited once by the group owning its first row, and once more by each group
  // that starts inside it (and by each empty group starting there, when visit_empty_groups).
  std::vector<int64_t> tile_visits(tiles_m, 1);
  for (int64_t g = 0; g < num_groups; ++g) {
    const bool empty = group_sizes[g] == 0;
    bool skip = offsets[g] % tm == 0 || empty;
    if (visit_empty_groups && empty) skip = false;
    const int64_t tile = offsets[g] / tm;
    if (!skip && tile < tiles_m) ++tile_visits[tile];
  }
  std::vector<int32_t> tiles(tiles_m);
  for (int64_t t = 0; t < tiles_m; ++t) tiles[t] = static_cast<int32_t>(t);
  Array<int32_t> m_tile_ids = repeat(tiles, tile_visits, grid_length);
  // The shard's tiles first.
  int64_t first_tile_in_shard = 0;
  for (int32_t id : group_ids) first_tile_in_shard += id < start_group ? 1 : 0;
  roll_left(group_ids, first_tile_in_shard);
  roll_left(m_tile_ids, first_tile_in_shard);
  int64_t num_tiles = 0;
  for (int64_t g = start_group; g < start_group + num_nonzero_groups; ++g) {
    num_tiles += group_tiles[g];
  }
  Array<int32_t> group_offsets(Shape{num_groups + 1});
  std::copy(offsets.begin(), offsets.end(), group_offsets.data());
  return GroupMetadata{std::move(group_offsets), std::move(group_ids), std::move(m_tile_ids),
                       num_tiles};
}

template <class Out, class L, class R>
Array<Out> gmm(const Array<L>& lhs, const Array<R>& rhs, const Array<int32_t>& group_sizes,
               const GmmOptions& options, std::source_location where) {
  return gmm_impl<Out>(lhs, rhs, group_sizes, nullptr, options, where);
}

template <class Out, class L, class R>
Array<Out> gmm(const Array<L>& lhs, const Array<R>& rhs, const Array<int32_t>& group_sizes,
               const Array<Out>& existing_out, const GmmOptions& options,
               std::source_location where) {
  return gmm_impl<Out>(lhs, rhs, group_sizes, &existing_out, options, where);
}

template <class Out, class L, class R>
Array<Out> tgmm(const Array<L>& lhs, const Array<R>& rhs, const Array<int32_t>& group_sizes,
                const GmmOptions& options, std::source_location where) {
  return tgmm_impl<Out>(lhs, rhs, group_sizes, nullptr, options, where);
}

template <class Out, class L, class R>
Array<Out> tgmm(const Array<L>& lhs, const Array<R>& rhs, const Array<int32_t>& group_sizes,
                const Array<Out>& existing_out, const GmmOptions& options,
                std::source_location where) {
  return tgmm_impl<Out>(lhs, rhs, group_sizes, &existing_out, options, where);
}

// Every pairing of float and bfloat16 operands and outputs.
#define TESSERA_GMM_INSTANCES(Out, L, R)                                                          \
  template Array<Out> gmm<Out, L, R>(const Array<L>&, const Array<R>&, const Array<int32_t>&,     \
                                     const GmmOptions&, std::source_location);                    \
  template Array<Out> gmm<Out, L, R>(const Array<L>&, const Array<R>&, const Array<int32_t>&,     \
                                     const Array<Out>&, const GmmOptions&, std::source_location); \
  template Array<Out> tgmm<Out, L, R>(const Array<L>&, const Array<R>&, const Array<int32_t>&,    \
                                      const GmmOptions&, std::source_location);                   \
  template Array<Out> tgmm<Out, L, R>(const Array<L>&, const Array<R>&, const Array<int32_t>&,    \
                                      const Array<Out>&, const GmmOptions&, std::source_location);
#define TESSERA_GMM_INSTANCES_OUT(Out)        \
  TESSERA_GMM_INSTANCES(Out, float, float)    \
  TESSERA_GMM_INSTANCES(Out, float, bfloat16) \
  TESSERA_GMM_INSTANCES(Out, bfloat16, float) \
  TESSERA_GMM_INSTANCES(Out, bfloat16, bfloat16)
TESSERA_GMM_INSTANCES_OUT(float)
TESSERA_GMM_INSTANCES_OUT(bfloat16)
#undef TESSERA_GMM_INSTANCES_OUT
#undef TESSERA_GMM_INSTANCES

}  // namespace tessera::examples
