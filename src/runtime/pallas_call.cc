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
const char* space_word(MemorySpace s) {
  return s == MemorySpace::ANY || s == MemorySpace::HBM ? "pl::ANY (an HBM ref)" : to_string(s);
}

// The BlockSpec's memory space and the body's parameter type must agree; ANY/HBM operands are
// not pipelined, so their BlockSpec must be the whole array.
void check_memory_space(const std::vector<PallasOperandInfo>& ops, size_t k,
                        const std::string& name, std::source_location where) {
  const PallasOperandInfo& op = ops[k];
  const pl::BlockSpec& s = *op.spec;
  const std::source_location at = s.where().line() != 0 ? s.where() : where;
  MemorySpace spec = s.memory_space();
  if (spec == MemorySpace::HBM) spec = MemorySpace::ANY;
  if (spec != op.declared) {
    fail(ErrorKind::kInvalidArgument, name, at,
         fmt::format("the BlockSpec of {} puts it in {} but the body takes it as a {} ref; "
                     "make them agree (pl::BlockSpec(pl::ANY) with a pltpu::AnyRef/HbmRef "
                     "parameter, pl::BlockSpec(MemorySpace::SMEM) with an SmemRef, a VMEM "
                     "BlockSpec with a VmemRef)",
                     operand_name(ops, k), space_word(spec), space_word(op.declared)));
  }
  if (spec == MemorySpace::ANY && !s.is_whole_array()) {
    fail(ErrorKind::kInvalidArgument, name, at,
         fmt::format("{} is in pl::ANY with a block shape; operands left in HBM are not "
                     "pipelined, so their BlockSpec is the whole array: pl::BlockSpec(pl::ANY)",
                     operand_name(ops, k)));
  }
}

void check_aliases(const std::vector<PallasOperandInfo>& ops,
                   const std::vector<std::pair<int, int>>& aliases, int num_prefetch,
                   const std::string& name, std::source_location where) {
  std::vector<const PallasOperandInfo*> inputs;
  std::vector<const PallasOperandInfo*> outputs;
  for (const auto& o : ops) (o.is_output ? outputs : inputs).push_back(&o);
  const int num_args = num_prefetch + static_cast<int>(inputs.size());
  std::vector<bool> in_used(static_cast<size_t>(std::max(num_args, 0)), false);
  std::vector<bool> out_used(outputs.size(), false);
  for (const auto& [in, out] : aliases) {
    if (in < 0 || in >= num_args) {
      fail(ErrorKind::kInvalidArgument, name, where,
           fmt::format("input_output_aliases names input {}, but the call has {} inputs "
                       "(scalar-prefetch operands counted first)",
                       in, num_args));
    }
    if (out < 0 || out >= static_cast<int>(outputs.size())) {
      fail(ErrorKind::kInvalidArgument, name, where,
           fmt::format("input_output_aliases names output {}, but the call has {} outputs", out,
                       outputs.size()));
    }
    if (in < num_prefetch) {
      fail(ErrorKind::kInvalidArgument, name, where,
           fmt::format("input_output_aliases names input {}, a scalar-prefetch operand; those "
                       "are copied into SMEM and cannot alias an output",
                       in));
    }
    if (in_used[static_cast<size_t>(in)] || out_used[static_cast<size_t>(out)]) {
      fail(ErrorKind::kInvalidArgument, name, where,
           fmt::format("input_output_aliases uses input {} or output {} twice; each input and "
                       "each output may alias at most once",
                       in, out));
    }
    in_used[static_cast<size_t>(in)] = true;
    out_used[static_cast<size_t>(out)] = true;
    const PallasOperandInfo& i = *inputs[static_cast<size_t>(in - num_prefetch)];
    const PallasOperandInfo& o = *outputs[static_cast<size_t>(out)];
    if (i.dtype != o.dtype || i.shape != o.shape) {
      fail(ErrorKind::kShapeMismatch, name, where,
           fmt::format("input_output_aliases {{{}: {}}}: input {} is {}{} but output {} is {}{}; "
                       "an aliased pair must have the same shape and dtype",
                       in, out, in, dtype_name(i.dtype), i.shape.to_string(), out,
                       dtype_name(o.dtype), o.shape.to_string()));
    }
  }
}

}  // namespace

void check_pallas_call(const std::vector<PallasOperandInfo>& operands, const Shape& grid,
                       const std::vector<pltpu::GridDimensionSemantics>& semantics,
                       const std::vector<ScratchRequest>& scratch, int64_t vmem_limit,
                       const std::vector<std::pair<int, int>>& aliases, int num_prefetch,
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
  check_aliases(operands, aliases, num_prefetch, name, where);
  for (size_t k = 0; k < operands.size(); ++k) {
    const PallasOperandInfo& op = operands[k];
    const pl::BlockSpec& s = *op.spec;
    check_memory_space(operands, k, name, where);
    if (op.declared == MemorySpace::ANY) continue;  // stays in HBM: no window, no VMEM
    const pl::Buffered& mode = s.pipeline_mode();
    if (mode.buffer_count < 1 || mode.buffer_count > 2) {
      fail(ErrorKind::kInvalidArgument, name, s.where(),
           fmt::format("{} asks for pl::Buffered({}); pallas_call pipelines take single (1) or "
                       "double (2) buffering (emit_pipeline takes more for inputs)",
                       operand_name(operands, k), mode.buffer_count));
    }
    if (mode.use_lookahead) {
      fail(ErrorKind::kInvalidArgument, name, s.where(),
           fmt::format("{} asks for lookahead; pallas_call does not fetch ahead (use "
                       "emit_pipeline inside a kernel for pl::Buffered(n, true))",
                       operand_name(operands, k)));
    }
    if (!s.is_whole_array()) {
      int elements = 0;
      int blocked = 0;
      for (const pl::BlockDim& d : s.block_shape()) {
        elements += d.is_element() ? 1 : 0;
        blocked += d.kind == pl::BlockDim::Kind::kBlocked ? 1 : 0;
      }
      if (elements > 0 && blocked > 0) {
        fail(ErrorKind::kInvalidArgument, name, s.where(),
             fmt::format("the BlockSpec of {} mixes pl::Element and blocked axes; in a "
                         "pallas_call all block axes are pl::Element (or squeezed), or none are",
                         operand_name(operands, k)));
      }
      if (static_cast<int>(s.block_shape().size()) != op.shape.rank()) {
        fail(ErrorKind::kShapeMismatch, name, s.where(),
             fmt::format("{} has shape {} but its BlockSpec has {} block axes; give one per "
                         "array axis",
                         operand_name(operands, k), op.shape.to_string(), s.block_shape().size()));
      }
      if (s.index_map_prefetch() != num_prefetch) {
        fail(ErrorKind::kInvalidArgument, name, s.where(),
             fmt::format("the index map of {} takes {} scalar-prefetch refs after its grid "
                         "indices, but the call has {}; with pltpu::PrefetchScalarGridSpec<n> "
                         "every index map takes the grid indices then all n SMEM refs",
                         operand_name(operands, k), s.index_map_prefetch(), num_prefetch));
      }
      if (s.index_map_arity() != grid.rank()) {
        fail(ErrorKind::kInvalidArgument, name, s.where(),
             fmt::format("the index map of {} takes {} grid indices but the grid {} has rank {}",
                         operand_name(operands, k), s.index_map_arity(), grid.to_string(),
                         grid.rank()));
      }
    }
    if (s.memory_space() == MemorySpace::SMEM) continue;  // SMEM: checked by the engine
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
