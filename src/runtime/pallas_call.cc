// pl::pallas_call behind its template: validates the call once, before launch (the grid walk
// through map_grid, the aliases, the semaphore operands, the VMEM budget), lays out the kernel
// (the user's scratch, one SMEM buffer per scalar-prefetch array, one semaphore buffer per
// semaphore operand), starts the aliased outputs as copies of their inputs, and launches; each
// core copies the scalar-prefetch arrays into SMEM and runs its share of the grid
// (pipeline_run.h), calling the typed body back once per step. Core 0 also holds the semaphore
// operands' counts for the call (runtime/resident.h).
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
#include "runtime/resident.h"

namespace tessera::detail {

namespace {

[[noreturn]] void fail(ErrorKind kind, const std::string& name, std::source_location where,
                       const std::string& what) {
  throw UsageError(kind,
                   fmt::format("tessera: pallas_call at {} (kernel '{}', before launch): {}",
                               format_location(where), name, what),
                   where, -1, {}, name);
}

// The call's operands by their alias index (inputs: among the input leaves, scalar prefetch
// first; outputs: among the outputs).
struct Operands {
  int input_leaves = 0;
  int outputs = 0;
  std::vector<const PallasOperand*> input;   // by input leaf (null: not an array operand)
  std::vector<const PallasOperand*> output;  // by output (null: a semaphore output)
};
Operands index_operands(const std::vector<PallasPrefetch>& prefetch,
                        const std::vector<PallasOperand>& operands,
                        const std::vector<PallasSemaphore>& semaphores) {
  Operands o;
  o.input_leaves = static_cast<int>(prefetch.size());
  for (const PallasOperand& op : operands) {
    (op.is_output ? o.outputs : o.input_leaves) =
        std::max(op.is_output ? o.outputs : o.input_leaves, op.index + 1);
  }
  for (const PallasSemaphore& s : semaphores) {
    (s.is_output ? o.outputs : o.input_leaves) =
        std::max(s.is_output ? o.outputs : o.input_leaves, s.index + 1);
  }
  o.input.assign(static_cast<size_t>(o.input_leaves), nullptr);
  o.output.assign(static_cast<size_t>(o.outputs), nullptr);
  for (const PallasOperand& op : operands) {
    (op.is_output ? o.output : o.input)[static_cast<size_t>(op.index)] = &op;
  }
  return o;
}

void check_aliases(const PallasCallSpec& call, const std::vector<PallasPrefetch>& prefetch,
                   const Operands& ops) {
  const int num_prefetch = static_cast<int>(prefetch.size());
  std::vector<bool> in_used(static_cast<size_t>(ops.input_leaves), false);
  std::vector<bool> out_used(static_cast<size_t>(ops.outputs), false);
  const std::string& name = call.name;
  const std::source_location where = call.where;
  for (const auto& [in, out] : call.aliases) {
    if (in < 0 || in >= ops.input_leaves) {
      fail(ErrorKind::kInvalidArgument, name, where,
           fmt::format("input_output_aliases names input {}, but the call has {} inputs "
                       "(scalar-prefetch arrays counted first, an absent optional input not at "
                       "all)",
                       in, ops.input_leaves));
    }
    if (out < 0 || out >= ops.outputs) {
      fail(ErrorKind::kInvalidArgument, name, where,
           fmt::format("input_output_aliases names output {}, but the call has {} outputs", out,
                       ops.outputs));
    }
    if (in < num_prefetch) {
      fail(ErrorKind::kInvalidArgument, name, where,
           fmt::format("input_output_aliases names input {}, a scalar-prefetch operand; those "
                       "are copied into SMEM and cannot alias an output",
                       in));
    }
    const PallasOperand* i = ops.input[static_cast<size_t>(in)];
    const PallasOperand* o = ops.output[static_cast<size_t>(out)];
    if (i == nullptr || o == nullptr) {
      fail(ErrorKind::kInvalidArgument, name, where,
           fmt::format("input_output_aliases {{{}: {}}} names a semaphore operand; semaphores "
                       "are shared by reference between calls and need no alias",
                       in, out));
    }
    if (in_used[static_cast<size_t>(in)] || out_used[static_cast<size_t>(out)]) {
      fail(ErrorKind::kInvalidArgument, name, where,
           fmt::format("input_output_aliases uses input {} or output {} twice; each input and "
                       "each output may alias at most once",
                       in, out));
    }
    in_used[static_cast<size_t>(in)] = true;
    out_used[static_cast<size_t>(out)] = true;
    if (i->dtype != o->dtype || i->shape != o->shape) {
      fail(ErrorKind::kShapeMismatch, name, where,
           fmt::format("input_output_aliases {{{}: {}}}: input {} is {}{} but output {} is {}{}; "
                       "an aliased pair must have the same shape and dtype",
                       in, out, in, dtype_name(i->dtype), i->shape.to_string(), out,
                       dtype_name(o->dtype), o->shape.to_string()));
    }
  }
}

// A semaphore operand's BlockSpec is the default or pl::BlockSpec(pltpu::SEMAPHORE).
void check_semaphore_specs(const PallasCallSpec& call,
                           const std::vector<PallasSemaphore>& semaphores) {
  for (const PallasSemaphore& s : semaphores) {
    const pl::BlockSpec& spec = *s.spec;
    const bool ok = spec.is_whole_array() &&
                    (spec.memory_space() == MemorySpace::SEMAPHORE || !spec.has_memory_space());
    if (!ok) {
      fail(ErrorKind::kInvalidArgument, call.name,
           spec.where().line() != 0 ? spec.where() : call.where,
           fmt::format("{} {} is a semaphore array, but its BlockSpec is {}{}; semaphores are "
                       "passed whole: pl::BlockSpec(pltpu::SEMAPHORE)",
                       s.is_output ? "output" : "input", s.index,
                       spec.is_whole_array() ? "in " : "blocked",
                       spec.is_whole_array() ? to_string(spec.memory_space()) : ""));
    }
  }
}

// Each pipelined operand's windows (window bytes x buffer count, 2 unless its BlockSpec says
// otherwise or its block never changes, 1 for a whole array), the VMEM arrays the call works on
// in place (each once), plus the VMEM scratch must fit the kernel's VMEM budget.
void check_vmem_budget(const PallasCallSpec& call, const GridMapping& g, int64_t limit) {
  struct Use {
    std::string what;
    int64_t bytes;
  };
  std::vector<Use> uses;
  std::vector<const void*> resident;
  int64_t total = 0;
  for (const BlockMapping& m : g.blocks) {
    if (m.space != MemorySpace::VMEM) continue;  // HBM: no window; SMEM: the SMEM budget's
    if (m.resident()) {
      if (std::find(resident.begin(), resident.end(), m.hbm.data) != resident.end()) continue;
      resident.push_back(m.hbm.data);
      const int64_t bytes = m.hbm.shape.size() * itemsize(m.hbm.dtype);
      total += bytes;
      uses.push_back({fmt::format("{}: the VMEM array {} {} = {} bytes", m.name(),
                                  m.hbm.shape.to_string(), dtype_name(m.hbm.dtype), bytes),
                      bytes});
      continue;
    }
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

// Where the kernel reads operand `op`: an aliased input from its output's buffer.
const void* kernel_data(const PallasCallSpec& call, const Operands& ops, const PallasOperand& op) {
  if (op.is_output) return op.data;
  for (const auto& [ai, ao] : call.aliases) {
    if (ai == op.index) return ops.output[static_cast<size_t>(ao)]->data;
  }
  return op.data;
}

// The operands as the kernel sees them, validated and mapped once (map_grid), then the budget.
GridMapping map_operands(const PallasCallSpec& call, const std::vector<PallasPrefetch>& prefetch,
                         const std::vector<PallasOperand>& operands, const Operands& ops) {
  std::vector<MappedOperand> mapped;
  mapped.reserve(operands.size());
  for (const PallasOperand& op : operands) {
    MappedOperand m;
    m.hbm = RawRef{const_cast<void*>(kernel_data(call, ops, op)), op.dtype,
                   op.source == MemorySpace::VMEM ? MemorySpace::VMEM : MemorySpace::HBM, op.shape,
                   row_major_strides(op.shape)};
    m.spec = op.spec;
    m.is_output = op.is_output;
    m.read_only = op.read_only;
    m.declared = op.declared;
    m.index = op.position;
    mapped.push_back(std::move(m));
  }
  GridRequest request;
  request.kind = GridRequest::Kind::kPallasCall;
  request.op = "pallas_call";
  request.where = call.where;
  request.kernel_name = &call.name;
  request.grid = call.grid;
  request.grid_names = &call.grid_names;
  request.semantics = call.params.dimension_semantics;
  for (const PallasPrefetch& p : prefetch) {
    if (request.prefetch_leaves.size() <= static_cast<size_t>(p.group)) {
      request.prefetch_leaves.resize(static_cast<size_t>(p.group) + 1, 0);
    }
    ++request.prefetch_leaves[static_cast<size_t>(p.group)];
    request.prefetch_dtypes.push_back(p.dtype);
  }
  GridMapping g = map_grid(request, mapped);
  pltpu::check_compiler_params(call.params, call.where);
  check_vmem_budget(call, g, call.params.vmem_limit_bytes.value_or(default_vmem_limit_bytes()));
  return g;
}

// Aliased outputs start as a copy of their input.
void copy_aliased_inputs(const PallasCallSpec& call, const Operands& ops) {
  for (const auto& [ai, ao] : call.aliases) {
    const PallasOperand& i = *ops.input[static_cast<size_t>(ai)];
    const PallasOperand& o = *ops.output[static_cast<size_t>(ao)];
    const size_t bytes = static_cast<size_t>(o.shape.size() * itemsize(o.dtype));
    if (bytes != 0) std::memcpy(const_cast<void*>(o.data), i.data, bytes);
  }
}

// The kernel: the user's scratch, then one SMEM buffer per scalar-prefetch array, then one
// semaphore buffer per semaphore operand.
LaunchSpec make_launch_spec(const PallasCallSpec& call, const std::vector<PallasPrefetch>& prefetch,
                            const std::vector<PallasSemaphore>& semaphores) {
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
  for (const PallasSemaphore& s : semaphores) {
    spec.scratch.push_back(ScratchRequest{MemorySpace::SEMAPHORE, DType::kInt32, s.shape,
                                          s.shape.size() * int64_t{sizeof(SemaphoreCell)}, s.kind});
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

// What every core needs besides its scratch.
struct CallPlan {
  const PallasCallSpec* call;
  const std::vector<PallasPrefetch>* prefetch;
  const std::vector<PallasSemaphore>* semaphores;
  const GridMapping* g;
  std::vector<ArrayPlace> places;      // where the kernel sees the callers' input arrays
  std::vector<SemaphoreState>* saved;  // core 0's semaphore states after its body
  int cores = 1;
};

// One core's part: the scalar-prefetch arrays copied into its SMEM, core 0's semaphore operands
// loaded, then its share of the grid, calling the body at every step; core 0 saves the semaphore
// operands after it.
void run_core(const CallPlan& p, int core, void* const* scratch,
              FunctionRef<void(const PallasStep&)> body) {
  const PallasCallSpec& call = *p.call;
  const size_t first_prefetch = call.scratch.size();
  const size_t first_semaphore = first_prefetch + p.prefetch->size();
  std::vector<RawRef> smem;
  smem.reserve(p.prefetch->size());
  for (size_t k = 0; k < p.prefetch->size(); ++k) {
    const PallasPrefetch& pf = (*p.prefetch)[k];
    const RawRef src{const_cast<void*>(pf.data), pf.dtype, MemorySpace::HBM, pf.shape,
                     row_major_strides(pf.shape)};
    const RawRef dst{scratch[first_prefetch + k], pf.dtype, MemorySpace::SMEM, pf.shape,
                     row_major_strides(pf.shape)};
    dma_copy(src, dst, "sync_copy", call.where);
    smem.push_back(dst);
  }
  std::vector<SemaphoreCell*> cells;
  std::vector<ResidentSemaphore> resident;
  for (size_t k = 0; k < p.semaphores->size(); ++k) {
    const PallasSemaphore& s = (*p.semaphores)[k];
    cells.push_back(static_cast<SemaphoreCell*>(scratch[first_semaphore + k]));
    resident.push_back(
        ResidentSemaphore{s.state, cells.back(), s.shape.size(),
                          fmt::format("{} {}", s.is_output ? "output" : "input", s.index)});
  }
  CoreContext& ctx = *current_context();
  if (core == 0) load_semaphores(ctx, resident, p.places);
  const GridMapping& g = *p.g;
  PipelineConfig cfg;
  cfg.grid = g.grid;
  cfg.grid_names = call.grid_names;
  cfg.semantics = g.semantics;
  cfg.where = call.where;
  cfg.op = "pallas_call";
  cfg.scalar_prefetch = smem;
  const IterationRange range =
      pallas_call_core_range(g.grid, g.semantics, p.cores, core, call.where);
  cfg.range_begin = range.begin;
  cfg.range_end = range.end;
  std::vector<RawRef> arrays;
  std::vector<Shape> shapes;
  for (const BlockMapping& m : g.blocks) {
    arrays.push_back(m.hbm);
    shapes.push_back(m.window);
  }
  auto step = [&](const WindowRef* windows) {
    body(PallasStep{smem.data(), windows, shapes.data(), arrays.data(), scratch, cells.data()});
  };
  run_mapped_pipeline(cfg, g, step);
  if (core == 0) save_semaphores(ctx, resident, *p.saved);
}

}  // namespace

void run_pallas_call(const PallasCallSpec& call, const std::vector<PallasPrefetch>& prefetch,
                     const std::vector<PallasOperand>& operands,
                     const std::vector<PallasSemaphore>& semaphores,
                     FunctionRef<void(const PallasStep&)> body) {
  const Operands ops = index_operands(prefetch, operands, semaphores);
  check_aliases(call, prefetch, ops);
  check_semaphore_specs(call, semaphores);
  const GridMapping g = map_operands(call, prefetch, operands, ops);
  copy_aliased_inputs(call, ops);
  const LaunchSpec spec = make_launch_spec(call, prefetch, semaphores);
  std::vector<SemaphoreState> saved;
  CallPlan plan{&call, &prefetch, &semaphores, &g, {}, &saved, spec.num_cores};
  for (const PallasOperand& op : operands) {
    if (op.is_output) continue;
    plan.places.push_back(ArrayPlace{op.data, const_cast<void*>(kernel_data(call, ops, op)),
                                     op.shape.size() * itemsize(op.dtype)});
  }
  // What an engine that keeps books of the arrays sees: every scalar-prefetch array, then the
  // operands (inputs, then outputs).
  auto buffers = [&](std::vector<LaunchBuffer>& books) {
    for (size_t k = 0; k < prefetch.size(); ++k) {
      const PallasPrefetch& pf = prefetch[k];
      books.push_back(LaunchBuffer{pf.data, pf.shape.size() * itemsize(pf.dtype), pf.dtype,
                                   pf.shape, false, static_cast<int>(k)});
    }
    for (const BlockMapping& m : g.blocks) {
      books.push_back(LaunchBuffer{m.hbm.data, m.hbm.shape.size() * itemsize(m.hbm.dtype),
                                   m.hbm.dtype, m.hbm.shape, m.is_output, m.index});
    }
  };
  auto per_core = [&](int core, void* const* scratch) { run_core(plan, core, scratch, body); };
  launch(spec, per_core, buffers);
  // The call succeeded: its semaphore operands keep what core 0 left in them.
  for (size_t k = 0; k < semaphores.size() && k < saved.size(); ++k) {
    *semaphores[k].state = std::move(saved[k]);
  }
}

}  // namespace tessera::detail
