// pl::pallas_call behind its template: validates the call once, before launch (the grid walk
// through map_grid, the aliases, the semaphore operands, the VMEM budget), lays out the kernel
// (the user's scratch, one SMEM buffer per scalar-prefetch array, one semaphore buffer per
// semaphore operand), starts the aliased outputs as copies of their inputs, and launches; each
// core copies the scalar-prefetch arrays into SMEM and runs its share of the grid
// (pipeline_run.h), calling the typed body back once per step. Each core holds its own counts
// of the semaphore operands for the call (runtime/resident.h), and works on its own copy of each
// SMEM array.
#include "tessera/pallas_call.h"

#include <fmt/format.h>

#include <algorithm>
#include <cstring>
#include <optional>
#include <string>
#include <vector>

#include "core/messages.h"
#include "runtime/block_mapping.h"
#include "runtime/context.h"
#include "runtime/devices.h"
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
  if (call.aliases.empty()) return;
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

// An SMEM array aliases only an SMEM array output (each core keeps its own copy), and a call
// takes one with a copy for each of its cores.
void check_smem_arrays(const PallasCallSpec& call, const Operands& ops, int cores) {
  for (const auto& [in, out] : call.aliases) {
    const PallasOperand& i = *ops.input[static_cast<size_t>(in)];
    const PallasOperand& o = *ops.output[static_cast<size_t>(out)];
    if ((i.source == MemorySpace::SMEM) != (o.source == MemorySpace::SMEM)) {
      fail(ErrorKind::kInvalidArgument, call.name, call.where,
           fmt::format("input_output_aliases {{{}: {}}}: input {} is {}an SMEM array but output "
                       "{} is {}; an SMEM array (one copy per core) aliases only an output made "
                       "with pl::out_shape(pltpu::SMEM<T>(shape))",
                       in, out, in, i.source == MemorySpace::SMEM ? "" : "not ", out,
                       o.source == MemorySpace::SMEM ? "one" : "not"));
    }
  }
  for (const PallasOperand* op : ops.input) {
    if (op == nullptr || op->source != MemorySpace::SMEM) continue;
    const int have = std::max(1, static_cast<int>(op->copies.size()));
    if (have >= cores) continue;
    fail(ErrorKind::kInvalidArgument, call.name, call.where,
         fmt::format("input {} is an SMEM array with {} cop{} (one per core of the call that made "
                     "it), but this call runs on {} cores, and each core works on its own copy "
                     "in its own SMEM; run it on at most {} core{} "
                     "(pltpu::TensorCoreMesh(\"core\", {})), or make the array on {} cores",
                     op->position, have, have == 1 ? "y" : "ies", cores, have, have == 1 ? "" : "s",
                     have, cores));
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
  // Sums the VMEM the call needs; with `uses`, also says what each part is. The descriptions
  // are made only for the error (a second pass): formatting them on every call cost ~7% of a
  // tiny pallas_call.
  auto tally = [&](std::vector<Use>* uses) {
    std::vector<const void*> resident;
    int64_t total = 0;
    for (const BlockMapping& m : g.blocks) {
      if (m.space != MemorySpace::VMEM) continue;  // HBM: no window; SMEM: the SMEM budget's
      if (m.resident()) {
        if (std::find(resident.begin(), resident.end(), m.hbm.data) != resident.end()) continue;
        resident.push_back(m.hbm.data);
        const int64_t bytes = m.hbm.shape.size() * itemsize(m.hbm.dtype);
        total += bytes;
        if (uses != nullptr) {
          uses->push_back({fmt::format("{}: the VMEM array {} {} = {} bytes", m.name(),
                                       m.hbm.shape.to_string(), dtype_name(m.hbm.dtype), bytes),
                           bytes});
        }
        continue;
      }
      const int64_t bytes = m.window_bytes * m.buffers;
      total += bytes;
      if (uses != nullptr) {
        uses->push_back(
            {fmt::format("{}: window {} of {} {} x {} buffer{} = {} bytes", m.name(),
                         m.window.to_string(), m.hbm.shape.to_string(), dtype_name(m.hbm.dtype),
                         m.buffers, m.buffers == 1 ? "" : "s", bytes),
             bytes});
      }
    }
    for (size_t i = 0; i < call.scratch.size(); ++i) {
      const ScratchRequest& r = call.scratch[i];
      if (r.space != MemorySpace::VMEM) continue;
      total += r.bytes;
      if (uses != nullptr) {
        uses->push_back({fmt::format("scratch #{}: VMEM<{}>{} = {} bytes", i, dtype_name(r.dtype),
                                     r.shape.to_string(), r.bytes),
                         r.bytes});
      }
    }
    return total;
  };
  const int64_t total = tally(nullptr);
  if (total <= limit) return;
  std::vector<Use> uses;
  (void)tally(&uses);
  std::sort(uses.begin(), uses.end(), [](const Use& a, const Use& b) { return a.bytes > b.bytes; });
  std::vector<std::string> top;
  for (size_t i = 0; i < uses.size() && i < 3; ++i) top.push_back(uses[i].what);
  fail(ErrorKind::kCapacityExceeded, call.name, call.where,
       fmt::format("the blocks and scratch need {} bytes of VMEM per core but the limit is {} "
                   "bytes; largest: {}; use smaller blocks, pl::Buffered(1), or raise "
                   "pltpu::CompilerParams{{.vmem_limit_bytes}}",
                   total, limit, fmt::join(top, "; ")));
}

// Core `core`'s copy of `op` (the one array every core shares, unless it is an SMEM array).
const void* copy_of(const PallasOperand& op, int core) {
  return op.copies.empty() ? op.data : op.copies[static_cast<size_t>(core)];
}

// Where core `core`'s kernel reads operand `op`: an aliased input from its output's buffer.
const void* kernel_data(const PallasCallSpec& call, const Operands& ops, const PallasOperand& op,
                        int core = 0) {
  if (op.is_output) return copy_of(op, core);
  for (const auto& [ai, ao] : call.aliases) {
    if (ai == op.index) return copy_of(*ops.output[static_cast<size_t>(ao)], core);
  }
  return copy_of(op, core);
}

// The operands as the kernel sees them, validated and mapped once (map_grid), then the budget.
GridMapping map_operands(const PallasCallSpec& call, const std::vector<PallasPrefetch>& prefetch,
                         const std::vector<PallasOperand>& operands, const Operands& ops) {
  std::vector<MappedOperand> mapped;
  mapped.reserve(operands.size());
  for (const PallasOperand& op : operands) {
    MappedOperand m;
    m.hbm = RawRef{const_cast<void*>(kernel_data(call, ops, op)), op.dtype, op.source, op.shape,
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

// Aliased outputs start as a copy of their input (an SMEM array's, core by core).
void copy_aliased_inputs(const PallasCallSpec& call, const Operands& ops) {
  for (const auto& [ai, ao] : call.aliases) {
    const PallasOperand& i = *ops.input[static_cast<size_t>(ai)];
    const PallasOperand& o = *ops.output[static_cast<size_t>(ao)];
    const size_t bytes = static_cast<size_t>(o.shape.size() * itemsize(o.dtype));
    const int copies = std::max(1, static_cast<int>(o.copies.size()));
    for (int c = 0; c < copies && bytes != 0; ++c) {
      std::memcpy(const_cast<void*>(copy_of(o, c)), copy_of(i, c), bytes);
    }
  }
}

// The call's mesh: its own, else this machine's cores, or those of the chip it is checked
// against.
pltpu::TensorCoreMesh call_mesh(const PallasCallSpec& call) {
  if (call.mesh) return *call.mesh;
  const int chip_cores = call.interpret ? chip_num_cores(*call.interpret) : 0;
  return chip_cores > 0
             ? pltpu::TensorCoreMesh("core", std::min(chip_cores, default_num_cores()), call.where)
             : pltpu::TensorCoreMesh("core", call.where);
}

// The room each SMEM array the call works on (each once) holds in every core's SMEM: counted
// against the SMEM capacity with the scratch, and kept from the core's SMEM blocks and
// run_scoped buffers.
std::vector<ScratchRequest> smem_arrays(const GridMapping& g) {
  std::vector<ScratchRequest> held;
  std::vector<const void*> seen;
  for (const BlockMapping& m : g.blocks) {
    if (m.hbm.space != MemorySpace::SMEM) continue;
    if (std::find(seen.begin(), seen.end(), m.hbm.data) != seen.end()) continue;
    seen.push_back(m.hbm.data);
    held.push_back(ScratchRequest{
        MemorySpace::SMEM, m.hbm.dtype, m.hbm.shape, m.hbm.shape.size() * itemsize(m.hbm.dtype),
        SemaphoreKind::REGULAR, fmt::format("{}: the SMEM array", m.name())});
  }
  return held;
}

// The kernel: the user's scratch, then one SMEM buffer per scalar-prefetch array, then one
// semaphore buffer per semaphore operand, then the room the SMEM arrays hold.
LaunchSpec make_launch_spec(const PallasCallSpec& call, const std::vector<PallasPrefetch>& prefetch,
                            const std::vector<PallasSemaphore>& semaphores, const GridMapping& g) {
  const pltpu::TensorCoreMesh mesh = call_mesh(call);
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
    ScratchRequest r{MemorySpace::SEMAPHORE, DType::kInt32, s.shape,
                     s.shape.size() * int64_t{sizeof(SemaphoreCell)}, s.kind};
    r.outlives_launch = true;  // a SemaphoreArray: its counts outlive the launch
    spec.scratch.push_back(std::move(r));
  }
  for (ScratchRequest& r : smem_arrays(g)) spec.scratch.push_back(std::move(r));
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
  const std::vector<PallasOperand>* operands;
  const Operands* ops;
  const GridMapping* g;
  std::vector<ArrayPlace> places;  // where the kernel sees the callers' input arrays
  // Per core, its semaphore operands' states after its body.
  std::vector<std::vector<CoreSemaphores>>* saved;
  bool per_core = false;  // some operand is an SMEM array: each core has its own copy
  int cores = 1;
};

// The operands as core `core` sees them: its own copy of each SMEM array.
GridMapping core_mapping(const CallPlan& p, int core) {
  GridMapping g = *p.g;
  for (size_t k = 0; k < g.blocks.size(); ++k) {
    g.blocks[k].hbm.data = const_cast<void*>(kernel_data(*p.call, *p.ops, (*p.operands)[k], core));
  }
  return g;
}

// One core's part: the scalar-prefetch arrays copied into its SMEM, its semaphore operands
// loaded, then its share of the grid, calling the body at every step; it saves the semaphore
// operands after it.
void run_core(const CallPlan& p, int core, void* const* scratch,
              FunctionRef<void(const PallasStep&)> body) {
  const PallasCallSpec& call = *p.call;
  // This core's share of the grid (a core's own mapping, core_mapping, differs only in where its
  // SMEM arrays lie).
  const IterationRange range =
      pallas_call_core_range(p.g->grid, p.g->semantics, p.cores, core, call.where);
  if (core != 0 && p.semaphores->empty() && range.begin >= range.end) {
    // A core with no grid step (a grid with no PARALLEL axis, or fewer parallel blocks than
    // cores) has nothing to do: its pipeline would only check and place what core 0's does
    // (the same blocks, rules and windows), and setting it up on a worker, whose first reads of
    // this launch's data all miss, made such a call on 2 cores about twice its time on 1
    // (docs/performance.md, "A core without steps"). Not with semaphore operands, whose counts
    // each core carries in and out.
    return;
  }
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
  load_semaphores(ctx, core, resident, p.places);
  std::optional<GridMapping> own;
  if (p.per_core) own.emplace(core_mapping(p, core));
  const GridMapping& g = own ? *own : *p.g;
  PipelineConfig cfg;
  cfg.grid = g.grid;
  cfg.grid_names = call.grid_names;
  // (No copy of the semantics: run_mapped_pipeline reads the mapping's, g.semantics.)
  cfg.where = call.where;
  cfg.op = "pallas_call";
  cfg.scalar_prefetch = smem;
  cfg.range_begin = range.begin;
  cfg.range_end = range.end;
  std::vector<RawRef> arrays;
  std::vector<Shape> shapes;
  arrays.reserve(g.blocks.size());
  shapes.reserve(g.blocks.size());
  for (const BlockMapping& m : g.blocks) {
    arrays.push_back(m.hbm);
    shapes.push_back(m.window);
  }
  auto step = [&](const WindowRef* windows) {
    body(PallasStep{smem.data(), windows, shapes.data(), arrays.data(), scratch, cells.data()});
  };
  run_mapped_pipeline(cfg, g, step);
  // Copies and signals other devices send in this launch arrive before the counts are saved.
  if (!resident.empty()) mesh_bodies_done(ctx);
  save_semaphores(ctx, resident, (*p.saved)[static_cast<size_t>(core)]);
}

// Every input array (an SMEM array: the copy of each core of the call): where its caller's bytes
// are and where the kernel sees them.
std::vector<ArrayPlace> array_places(const PallasCallSpec& call, const Operands& ops,
                                     const std::vector<PallasOperand>& operands, int cores) {
  std::vector<ArrayPlace> places;
  for (const PallasOperand& op : operands) {
    if (op.is_output) continue;
    const int copies = op.copies.empty() ? 1 : cores;
    for (int c = 0; c < copies; ++c) {
      places.push_back(ArrayPlace{copy_of(op, c), const_cast<void*>(kernel_data(call, ops, op, c)),
                                  op.shape.size() * itemsize(op.dtype)});
    }
  }
  return places;
}

// What an engine that keeps books of the arrays sees: every scalar-prefetch array, then the
// operands (inputs, then outputs; an SMEM array once per core).
void book_buffers(const CallPlan& p, std::vector<LaunchBuffer>& books) {
  for (size_t k = 0; k < p.prefetch->size(); ++k) {
    const PallasPrefetch& pf = (*p.prefetch)[k];
    books.push_back(LaunchBuffer{pf.data, pf.shape.size() * itemsize(pf.dtype), pf.dtype, pf.shape,
                                 false, static_cast<int>(k)});
  }
  for (size_t k = 0; k < p.g->blocks.size(); ++k) {
    const BlockMapping& m = p.g->blocks[k];
    const PallasOperand& op = (*p.operands)[k];
    const int copies = op.copies.empty() ? 1 : p.cores;
    for (int c = 0; c < copies; ++c) {
      books.push_back(LaunchBuffer{
          kernel_data(*p.call, *p.ops, op, c), m.hbm.shape.size() * itemsize(m.hbm.dtype),
          m.hbm.dtype, m.hbm.shape, m.is_output, m.index, m.hbm.space, op.copies.empty() ? -1 : c});
    }
  }
}

}  // namespace

int pallas_call_num_cores(const PallasCallSpec& call) { return call_mesh(call).num_cores(); }

void run_pallas_call(const PallasCallSpec& call, const std::vector<PallasPrefetch>& prefetch,
                     const std::vector<PallasOperand>& operands,
                     const std::vector<PallasSemaphore>& semaphores,
                     FunctionRef<void(const PallasStep&)> body) {
  const Operands ops = index_operands(prefetch, operands, semaphores);
  check_aliases(call, prefetch, ops);
  check_semaphore_specs(call, semaphores);
  const GridMapping g = map_operands(call, prefetch, operands, ops);
  const LaunchSpec spec = make_launch_spec(call, prefetch, semaphores, g);
  check_smem_arrays(call, ops, spec.num_cores);
  copy_aliased_inputs(call, ops);
  std::vector<std::vector<CoreSemaphores>> saved(static_cast<size_t>(spec.num_cores));
  CallPlan plan{&call, &prefetch, &semaphores, &operands, &ops,
                &g,    {},        &saved,      false,     spec.num_cores};
  plan.places = array_places(call, ops, operands, spec.num_cores);
  for (const PallasOperand& op : operands) plan.per_core |= !op.copies.empty();
  auto buffers = [&](std::vector<LaunchBuffer>& books) { book_buffers(plan, books); };
  auto per_core = [&](int core, void* const* scratch) { run_core(plan, core, scratch, body); };
  launch(spec, per_core, buffers);
  // The call succeeded: its semaphore operands keep what each core left in them.
  for (size_t k = 0; k < semaphores.size(); ++k) {
    SemaphoreState& state = *semaphores[k].state;
    if (state.cores.size() < saved.size()) {
      state.cores.resize(
          saved.size(),
          CoreSemaphores{std::vector<int64_t>(static_cast<size_t>(state.count), 0),
                         std::vector<std::vector<CarriedCopy>>(static_cast<size_t>(state.count))});
    }
    for (size_t c = 0; c < saved.size(); ++c) {
      if (k < saved[c].size()) state.cores[c] = std::move(saved[c][k]);
    }
  }
}

}  // namespace tessera::detail
