// pallas_call's checks before launch: the grid, the semantics, the specs, and the VMEM budget.
#include "tessera/pallas_call.h"

#include <fmt/format.h>

#include <algorithm>
#include <string>
#include <vector>

#include "core/messages.h"

namespace tessera::detail {

namespace {
[[noreturn]] void fail(ErrorKind kind, const std::string& name, std::source_location where,
                       const std::string& what) {
  throw UsageError(kind,
                   fmt::format("tessera: pallas_call at {} (kernel '{}', before launch): {}",
                               format_location(where), name, what),
                   where, -1, {}, name);
}

std::string operand_name(const std::vector<PallasOperandInfo>& ops, size_t k) {
  size_t inputs = 0;
  for (const auto& o : ops) inputs += o.is_output ? 0 : 1;
  return ops[k].is_output ? fmt::format("output {}", k - inputs) : fmt::format("input {}", k);
}
}  // namespace

void check_pallas_call(const std::vector<PallasOperandInfo>& operands, const Shape& grid,
                       const std::vector<pltpu::GridDimensionSemantics>& semantics,
                       const std::vector<ScratchRequest>& scratch, int64_t vmem_limit,
                       const std::string& name, std::source_location where) {
  for (int a = 0; a < grid.rank(); ++a) {
    if (grid[a] < 1) {
      fail(ErrorKind::kInvalidArgument, name, where,
           fmt::format("grid {} has extent {} on axis {}; every grid extent must be at least 1",
                       grid.to_string(), grid[a], a));
    }
  }
  if (static_cast<int>(semantics.size()) != grid.rank()) {
    fail(ErrorKind::kInvalidArgument, name, where,
         fmt::format("dimension_semantics has {} entries but the grid {} has rank {}; give one "
                     "per grid axis",
                     semantics.size(), grid.to_string(), grid.rank()));
  }
  bool arbitrary_seen = false;
  for (size_t a = 0; a < semantics.size(); ++a) {
    if (semantics[a] != pltpu::PARALLEL)
      arbitrary_seen = true;
    else if (arbitrary_seen) {
      fail(ErrorKind::kInvalidArgument, name, where,
           fmt::format("axis {} is PARALLEL after an ARBITRARY axis; PARALLEL axes must form a "
                       "prefix of the grid (reorder the grid so the reduction axes come last)",
                       a));
    }
  }
  // VMEM: each blocked operand double-buffers its window unless its BlockSpec says otherwise
  // (pl::Buffered(n)); a whole-array block is copied once, so it takes one buffer.
  struct Use {
    std::string what;
    int64_t bytes;
  };
  std::vector<Use> uses;
  int64_t total = 0;
  for (size_t k = 0; k < operands.size(); ++k) {
    const PallasOperandInfo& op = operands[k];
    const pl::BlockSpec& s = *op.spec;
    if (!s.is_whole_array()) {
      if (static_cast<int>(s.block_shape().size()) != op.shape.rank()) {
        fail(ErrorKind::kShapeMismatch, name, s.where(),
             fmt::format("{} has shape {} but its BlockSpec has {} block axes; give one per "
                         "array axis",
                         operand_name(operands, k), op.shape.to_string(), s.block_shape().size()));
      }
      if (s.index_map_arity() != grid.rank()) {
        fail(ErrorKind::kInvalidArgument, name, s.where(),
             fmt::format("the index map of {} takes {} grid indices but the grid {} has rank {}",
                         operand_name(operands, k), s.index_map_arity(), grid.to_string(),
                         grid.rank()));
      }
    }
    const Shape window = window_shape(s, op.shape);
    const int buffers = s.is_whole_array() ? 1 : std::max(1, s.pipeline_mode().buffer_count);
    const int64_t bytes = window.size() * itemsize(op.dtype) * buffers;
    total += bytes;
    uses.push_back({fmt::format("{}: window {} of {} {} x {} buffer{} = {} bytes",
                                operand_name(operands, k), window.to_string(), op.shape.to_string(),
                                dtype_name(op.dtype), buffers, buffers == 1 ? "" : "s", bytes),
                    bytes});
  }
  for (size_t i = 0; i < scratch.size(); ++i) {
    if (scratch[i].space != MemorySpace::VMEM) continue;
    total += scratch[i].bytes;
    uses.push_back(
        {fmt::format("scratch #{}: VMEM<{}>{} = {} bytes", i, dtype_name(scratch[i].dtype),
                     scratch[i].shape.to_string(), scratch[i].bytes),
         scratch[i].bytes});
  }
  if (total > vmem_limit) {
    std::sort(uses.begin(), uses.end(),
              [](const Use& a, const Use& b) { return a.bytes > b.bytes; });
    std::vector<std::string> top;
    for (size_t i = 0; i < uses.size() && i < 3; ++i) top.push_back(uses[i].what);
    fail(ErrorKind::kCapacityExceeded, name, where,
         fmt::format("the blocks and scratch need {} bytes of VMEM per core but the limit is {} "
                     "bytes; largest: {}; use smaller blocks, pl::Buffered(1), or raise "
                     "pltpu::CompilerParams{{.vmem_limit_bytes}}",
                     total, vmem_limit, fmt::join(top, "; ")));
  }
}

}  // namespace tessera::detail
