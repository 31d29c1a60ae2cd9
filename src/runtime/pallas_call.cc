// pl::pallas_call behind its template: validates the call once, before launch (the grid walk
// through map_grid, the aliases, the VMEM budget), lays out the kernel (the user's scratch plus
// one SMEM buffer per scalar-prefetch operand), starts the aliased outputs as copies of their
// inputs, and launches; each core copies the scalar-prefetch operands into SMEM and runs its
// share of the grid (pipeline_run.h), calling the typed body back once per step.
#include "tessera/pallas_call.h"

#include <fmt/format.h>

#include <algorithm>
#include <cstring>
#include <string>
#include <vector>

#include "core/messages.h"
#include "runtime/block_mapping.h"
#include "runtime/context.h"
#include "runtime/pipeline_run.h"

namespace tessera::detail {

namespace {

[[noreturn]] void fail(ErrorKind kind, const std::string& name, std::source_location where,
                       const std::string& what) {
  throw UsageError(kind,
                   fmt::format("tessera: pallas_call at {} (kernel '{}', before launch): {}",
                               format_location(where), name, what),
                   where, -1, {}, name);
}

void check_aliases(const PallasCallSpec& call, int num_prefetch,
                   const std::vector<PallasOperand>& ops) {
  std::vector<const PallasOperand*> inputs;
  std::vector<const PallasOperand*> outputs;
  for (const auto& o : ops) (o.is_output ? outputs : inputs).push_back(&o);
  const int num_args = num_prefetch + static_cast<int>(inputs.size());
  std::vector<bool> in_used(static_cast<size_t>(std::max(num_args, 0)), false);
  std::vector<bool> out_used(outputs.size(), false);
  const std::string& name = call.name;
  const std::source_location where = call.where;
  for (const auto& [in, out] : call.aliases) {
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
    const PallasOperand& i = *inputs[static_cast<size_t>(in - num_prefetch)];
    const PallasOperand& o = *outputs[static_cast<size_t>(out)];
    if (i.dtype != o.dtype || i.shape != o.shape) {
      fail(ErrorKind::kShapeMismatch, name, where,
           fmt::format("input_output_aliases {{{}: {}}}: input {} is {}{} but output {} is {}{}; "
                       "an aliased pair must have the same shape and dtype",
                       in, out, in, dtype_name(i.dtype), i.shape.to_string(), out,
                       dtype_name(o.dtype), o.shape.to_string()));
    }
  }
}

// Each pipelined operand's windows (window bytes x buffer count, 2 unless its BlockSpec says
// otherwise, 1 for a whole array) plus the VMEM scratch must fit the kernel's VMEM budget.
void check_vmem_budget(const PallasCallSpec& call, const GridMapping& g, int64_t limit) {
  struct Use {
    std::string what;
    int64_t bytes;
  };
  std::vector<Use> uses;
  int64_t total = 0;
  for (const BlockMapping& m : g.blocks) {
    if (m.space != MemorySpace::VMEM) continue;  // HBM: no window; SMEM: the SMEM budget's
    const int64_t bytes = m.window_bytes * m.buffers;
    total += bytes;
    uses.push_back(
        {fmt::format("{}: window {} of {} {} x {} buffer{} = {} bytes", m.name(),
                     m.window.to_string(), m.hbm.shape.to_string(), dtype_name(m.hbm.dtype),
                     m.buffers, m.buffers == 1 ? "" : "s", bytes),
         bytes});
  }
  for (size_t i = 0; i < call.scratch.size(); ++i) {
    const ScratchRequest& r = call.scratch[i];
    if (r.space != MemorySpace::VMEM) continue;
    total += r.bytes;
    uses.push_back({fmt::format("scratch #{}: VMEM<{}>{} = {} bytes", i, dtype_name(r.dtype),
                                r.shape.to_string(), r.bytes),
                    r.bytes});
  }
  if (total <= limit) return;
  std::sort(uses.begin(), uses.end(), [](const Use& a, const Use& b) { return a.bytes > b.bytes; });
  std::vector<std::string> top;
  for (size_t i = 0; i < uses.size() && i < 3; ++i) top.push_back(uses[i].what);
  fail(ErrorKind::kCapacityExceeded, call.name, call.where,
       fmt::format("the blocks and scratch need {} bytes of VMEM per core but the limit is {} "
                   "bytes; largest: {}; use smaller blocks, pl::Buffered(1), or raise "
                   "pltpu::CompilerParams{{.vmem_limit_bytes}}",
                   total, limit, fmt::join(top, "; ")));
}

// The operands as the kernel sees them (an aliased input is read from its output's buffer),
// validated and mapped once (map_grid), then the budget.
GridMapping map_operands(const PallasCallSpec& call, int num_prefetch,
                         const std::vector<PallasOperand>& operands, const void* const* args,
                         void* const* outputs) {
  std::vector<MappedOperand> mapped;
  mapped.reserve(operands.size());
  int in = 0;
  int out = 0;
  for (const PallasOperand& op : operands) {
    const void* data = nullptr;
    if (op.is_output) {
      data = outputs[out++];
    } else {
      const int arg = num_prefetch + in++;
      data = args[arg];
      for (const auto& [ai, ao] : call.aliases) {
        if (ai == arg) data = outputs[ao];
      }
    }
    mapped.push_back(MappedOperand{RawRef{const_cast<void*>(data), op.dtype, MemorySpace::HBM,
                                          op.shape, row_major_strides(op.shape)},
                                   op.spec, op.is_output, op.read_only, op.declared});
  }
  GridRequest request;
  request.kind = GridRequest::Kind::kPallasCall;
  request.op = "pallas_call";
  request.where = call.where;
  request.kernel_name = &call.name;
  request.grid = call.grid;
  request.semantics = call.params.dimension_semantics;
  request.num_prefetch = num_prefetch;
  GridMapping g = map_grid(request, mapped);
  pltpu::check_compiler_params(call.params, call.where);
  check_vmem_budget(call, g, call.params.vmem_limit_bytes.value_or(default_vmem_limit_bytes()));
  return g;
}

// Aliased outputs start as a copy of their input.
void copy_aliased_inputs(const PallasCallSpec& call, const GridMapping& g, const void* const* args,
                         void* const* outputs) {
  for (const auto& [ai, ao] : call.aliases) {
    const BlockMapping& o = g.blocks[static_cast<size_t>(g.num_inputs + ao)];
    const size_t bytes = static_cast<size_t>(o.hbm.shape.size() * itemsize(o.hbm.dtype));
    if (bytes != 0) std::memcpy(outputs[ao], args[ai], bytes);
  }
}

// The kernel: the user's scratch, then one SMEM buffer per scalar-prefetch operand.
LaunchSpec make_launch_spec(const PallasCallSpec& call,
                            const std::vector<PallasPrefetch>& prefetch) {
  // Without a mesh: this machine's cores, or those of the chip the call is checked against.
  const int chip_cores = call.interpret ? chip_num_cores(*call.interpret) : 0;
  const pltpu::TensorCoreMesh mesh =
      call.mesh ? *call.mesh
      : chip_cores > 0
          ? pltpu::TensorCoreMesh("core", std::min(chip_cores, default_num_cores()), call.where)
          : pltpu::TensorCoreMesh("core", call.where);
  LaunchSpec spec;
  spec.entry = "pl::pallas_call";
  spec.name = call.name;
  spec.axis_name = mesh.axis_name();
  spec.num_cores = mesh.num_cores();
  spec.scratch = call.scratch;
  for (const PallasPrefetch& p : prefetch) {
    spec.scratch.push_back(
        ScratchRequest{MemorySpace::SMEM, p.dtype, p.shape, p.shape.size() * itemsize(p.dtype)});
  }
  spec.vmem_limit_bytes = call.params.vmem_limit_bytes.value_or(0);
  spec.wait_timeout_ms = call.params.wait_timeout_ms.value_or(0);
  spec.collective_id = call.params.collective_id.value_or(-1);
  spec.skip_device_barrier = call.params.skip_device_barrier;
  spec.where = call.where;
  spec.interpret = call.interpret;
  prepare_launch(spec);
  return spec;
}

// One core's part: the scalar-prefetch operands copied into its SMEM, then its share of the grid,
// calling the body at every step.
void run_core(const PallasCallSpec& call, const std::vector<PallasPrefetch>& prefetch,
              const GridMapping& g, const void* const* args, int core, int cores,
              void* const* scratch, FunctionRef<void(const PallasStep&)> body) {
  std::vector<RawRef> smem;
  smem.reserve(prefetch.size());
  for (size_t p = 0; p < prefetch.size(); ++p) {
    const PallasPrefetch& pf = prefetch[p];
    const RawRef src{const_cast<void*>(args[p]), pf.dtype, MemorySpace::HBM, pf.shape,
                     row_major_strides(pf.shape)};
    const RawRef dst{scratch[call.scratch.size() + p], pf.dtype, MemorySpace::SMEM, pf.shape,
                     row_major_strides(pf.shape)};
    dma_copy(src, dst, "sync_copy", call.where);
    smem.push_back(dst);
  }
  PipelineConfig cfg;
  cfg.grid = g.grid;
  cfg.semantics = g.semantics;
  cfg.where = call.where;
  cfg.op = "pallas_call";
  cfg.scalar_prefetch = smem;
  const IterationRange range = pallas_call_core_range(g.grid, g.semantics, cores, core, call.where);
  cfg.range_begin = range.begin;
  cfg.range_end = range.end;
  std::vector<RawRef> arrays;
  std::vector<Shape> shapes;
  for (const BlockMapping& m : g.blocks) {
    arrays.push_back(m.hbm);
    shapes.push_back(m.window);
  }
  auto step = [&](const WindowRef* windows) {
    body(PallasStep{smem.data(), windows, shapes.data(), arrays.data(), scratch});
  };
  run_mapped_pipeline(cfg, g, step);
}

}  // namespace

void run_pallas_call(const PallasCallSpec& call, const std::vector<PallasPrefetch>& prefetch,
                     const std::vector<PallasOperand>& operands, const void* const* args,
                     void* const* outputs, FunctionRef<void(const PallasStep&)> body) {
  const int num_prefetch = static_cast<int>(prefetch.size());
  check_aliases(call, num_prefetch, operands);
  const GridMapping g = map_operands(call, num_prefetch, operands, args, outputs);
  copy_aliased_inputs(call, g, args, outputs);
  const LaunchSpec spec = make_launch_spec(call, prefetch);
  // What an engine that keeps books of the arrays sees: every argument, then the outputs.
  auto buffers = [&](std::vector<LaunchBuffer>& books) {
    for (int p = 0; p < num_prefetch; ++p) {
      const PallasPrefetch& pf = prefetch[static_cast<size_t>(p)];
      books.push_back(LaunchBuffer{args[p], pf.shape.size() * itemsize(pf.dtype), pf.dtype,
                                   pf.shape, false, p});
    }
    for (const BlockMapping& m : g.blocks) {
      books.push_back(LaunchBuffer{m.hbm.data, m.hbm.shape.size() * itemsize(m.hbm.dtype),
                                   m.hbm.dtype, m.hbm.shape, m.is_output,
                                   m.is_output ? m.index : num_prefetch + m.index});
    }
  };
  auto per_core = [&](int core, void* const* scratch) {
    run_core(call, prefetch, g, args, core, spec.num_cores, scratch, body);
  };
  launch(spec, per_core, buffers);
}

}  // namespace tessera::detail
