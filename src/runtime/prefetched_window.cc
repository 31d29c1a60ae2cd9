// Windows filled before a pipeline starts: the checks of `pl::Buffered(prefetched_count=)` and
// `BufferedRef::with_window_ref` (tessera/buffered_ref.h). The pipeline's use of such windows is
// in src/runtime/pipeline.cc (PipelineRun::begin_step); map_grid (block_mapping.cc) asks
// prefetched_problem whether an operand can run.
#include <fmt/format.h>

#include "runtime/block_mapping.h"
#include "tessera/detail/runtime.h"
#include "tessera/error.h"
#include "tessera/pipeline.h"

namespace tessera::detail {

namespace {

constexpr const char* kOp = "pltpu::BufferedRef";

// Trivial windowing: the block is the whole array, at every step of `grid` (fetched once).
bool whole_array_every_step(const pl::BlockSpec& spec, const Shape& array, const Shape& grid) {
  if (!spec.is_whole_array()) {
    const std::vector<pl::BlockDim>& dims = spec.block_shape();
    if (static_cast<int>(dims.size()) != array.rank()) return false;
    for (int a = 0; a < array.rank(); ++a) {
      const pl::BlockDim& d = dims[static_cast<size_t>(a)];
      if (d.is_squeezed || d.is_element() || d.is_bounded() || d.size != array[a]) return false;
    }
  }
  return constant_block(spec, grid);
}

std::string count_rule(int prefetched, int buffer_count, const std::string& who) {
  return fmt::format(
      "prefetched_count={} with buffer_count={} for {}; the pipeline needs a free window to fetch "
      "its next block into while the prefetched ones are in use, so prefetched_count must be "
      "less than buffer_count (only a block that is the whole array at every step, fetched "
      "once, may have them equal); raise buffer_count or prefetch fewer blocks",
      prefetched, buffer_count, who);
}

}  // namespace

void check_prefetched_count(int prefetched, int buffer_count, bool is_input,
                            std::source_location where) {
  if (prefetched < 0) {
    raise(ErrorKind::kInvalidArgument, kOp, where,
          fmt::format("pl::Buffered(prefetched_count={}); it counts the blocks the caller copied "
                      "into the windows before the pipeline starts: 0 or more",
                      prefetched));
  }
  if (prefetched > 0 && !is_input) {
    raise(ErrorKind::kInvalidArgument, kOp, where,
          fmt::format("pl::Buffered(prefetched_count={}) on an output; only an input's first "
                      "blocks can be fetched before the pipeline starts (drop prefetched_count "
                      "from the output's BlockSpec)",
                      prefetched));
  }
  if (prefetched > buffer_count) {
    raise(ErrorKind::kInvalidArgument, kOp, where,
          count_rule(prefetched, buffer_count, "an input"));
  }
}

void check_prefetched_block(const pl::BlockSpec& spec, int buffer_count, const Shape& array,
                            const Shape& grid, std::source_location where) {
  const int p = spec.has_pipeline_mode() ? spec.pipeline_mode().prefetched_count : 0;
  if (p > 0 && p >= buffer_count && !whole_array_every_step(spec, array, grid)) {
    raise(ErrorKind::kInvalidArgument, kOp, where,
          count_rule(p, buffer_count, fmt::format("the input of shape {}", array.to_string())));
  }
}

void check_window_ref(const Shape& shape, const SmallVec& strides, int buffer_count,
                      const Shape& window, std::source_location where) {
  // The layouts Pallas' windows have: (n, *window); (n * w,) for a 1-D window; the window
  // itself for one buffer.
  SmallVec stacked{buffer_count};
  for (int64_t e : window) stacked.push_back(e);
  bool ok = shape == Shape(std::move(stacked)) || (buffer_count == 1 && shape == window);
  int64_t flat = 0;
  if (window.rank() == 1 && !__builtin_mul_overflow(int64_t{buffer_count}, window[0], &flat)) {
    ok = ok || shape == Shape{flat};
  }
  if (!ok) {
    raise(ErrorKind::kShapeMismatch, "BufferedRef::with_window_ref", where,
          fmt::format(
              "the window ref has shape {} but the BufferedRef holds {} window{} of {}; "
              "bind a VMEM ref of shape ({}, {}){}",
              shape.to_string(), buffer_count, buffer_count == 1 ? "" : "s", window.to_string(),
              buffer_count, fmt::join(window.begin(), window.end(), ", "),
              buffer_count == 1    ? fmt::format(" or {}", window.to_string())
              : window.rank() == 1 ? fmt::format(" or ({},)", int64_t{buffer_count} * window[0])
                                   : std::string()));
  }
  if (row_major_strides(shape) != strides && shape.size() > 1) {
    raise(ErrorKind::kInvalidArgument, "BufferedRef::with_window_ref", where,
          fmt::format("the window ref of shape {} is a strided view (strides ({})); the "
                      "pipeline's windows lie one after another in contiguous VMEM, so bind a "
                      "whole VMEM buffer, or a contiguous part of one",
                      shape.to_string(), fmt::join(strides.begin(), strides.end(), ", ")));
  }
}

std::optional<MappingProblem> prefetched_problem(const GridRequest& r, const MappedOperand& op,
                                                 const BlockMapping& m, std::source_location at) {
  const pl::BlockSpec& s = *op.spec;
  const int p = s.has_pipeline_mode() ? s.pipeline_mode().prefetched_count : 0;
  if (p == 0) return std::nullopt;
  const std::string buffered = fmt::format("pl::Buffered(prefetched_count={})", p);
  if (r.kind == GridRequest::Kind::kPallasCall) {
    return MappingProblem{ErrorKind::kInvalidArgument, at,
                          fmt::format("{} asks for {}; a pallas_call fetches every block itself "
                                      "(a window filled before the pipeline starts is for "
                                      "emit_pipeline_with_allocations inside a kernel, bound with "
                                      "BufferedRef::with_window_ref)",
                                      m.name(), buffered)};
  }
  if (p < 0 || m.is_output) {
    return MappingProblem{ErrorKind::kInvalidArgument, at,
                          fmt::format("{} on {}; it counts the blocks of an input that the caller "
                                      "copied into its windows before the pipeline starts (an "
                                      "input's, 0 or more)",
                                      buffered, m.name())};
  }
  if (m.resident() || m.space != MemorySpace::VMEM) {
    return MappingProblem{
        ErrorKind::kInvalidArgument, at,
        fmt::format("{} on {}, whose blocks {}; only VMEM windows filled from HBM can be "
                    "prefetched (drop prefetched_count)",
                    buffered, m.name(),
                    m.resident() ? "are used where they lie (no windows)" : "are staged in SMEM")};
  }
  if (op.storage == nullptr) {
    const std::source_location where = op.allocations_where.line() != 0 ? op.allocations_where : at;
    return MappingProblem{
        ErrorKind::kInvalidArgument, where,
        fmt::format(
            "expected external window buffer to be bound for prefetched input {} ({}), but {}; "
            "the caller fills the first window{} itself, so bind its VMEM ref: "
            "pltpu::allocations(x_bref.with_window_ref(x_vmem), ...){}",
            m.index, buffered,
            op.storage_buffers > 0 ? "its BufferedRef has no window ref"
                                   : "the pipeline was called without pltpu::allocations",
            p == 1 ? "" : "s",
            op.storage_buffers > 0 ? ""
                                   : " with BufferedRefs from emit_pipeline_with_allocations' "
                                     "make_allocations, allocated by pl::run_scoped")};
  }
  if (p >= m.buffers && !whole_array_every_step(s, op.hbm.shape, r.grid)) {
    return MappingProblem{ErrorKind::kInvalidArgument, at, count_rule(p, m.buffers, m.name())};
  }
  return std::nullopt;
}

}  // namespace tessera::detail
