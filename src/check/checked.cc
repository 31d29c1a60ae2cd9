// The checked engine's launch: setting up and tearing down a checked launch and its cores,
// the chip's mesh and capacity checks, unwritten outputs, the launch parameters and the
// randomised order of PARALLEL axes, and the TPU's block-shape rules. The books live in
// checked_state.h; shadow memory in checked_shadow.cc; copies, semaphores, races and deadlocks
// in checked_sync.cc. See checked.h for where the native code calls in, and
// docs/checked-mode.md for the diagnostics.
#include "check/checked.h"

#include <fmt/format.h>

#include <algorithm>
#include <bit>
#include <random>
#include <utility>

#include "check/checked_engine.h"
#include "check/checked_state.h"
#include "core/messages.h"
#include "native/native_engine.h"
#include "runtime/waits.h"
#include "tessera/error.h"
#include "tessera/vector_reduce.h"

namespace tessera::detail {

// ---- the engine ------------------------------------------------------------------------------

namespace {

class CheckedEngine final : public Engine {
 public:
  // `base`: the index in the books of this device's core 0; `device`: -1 off a device mesh.
  CheckedEngine(std::shared_ptr<CheckedLaunch> launch, int base, int device)
      : L_(std::move(launch)), base_(base), device_(device) {}

  CoreBudget budget(int64_t vmem_limit) const override {
    CoreBudget b{std::min(vmem_limit, L_->vmem_limit), smem_capacity_bytes(), {}, {}};
    if (L_->chip) {
      const std::string chip = fmt::format("the {} chip's", L_->params.chip);
      if (L_->chip->vmem_capacity_bytes < vmem_limit) b.vmem_chip = chip;
      if (L_->chip->smem_capacity_bytes < b.smem) b.smem_chip = chip;
      b.smem = std::min(b.smem, L_->chip->smem_capacity_bytes);
    }
    return b;
  }
  void core_begin(CoreContext& ctx, void* const* scratch) override {
    checked_core_begin(*L_, ctx, scratch, base_ + ctx.core);
  }
  void core_end(CoreContext& ctx) override { checked_core_end(ctx); }
  void body_done(CoreContext& ctx) override { checked_body_done(ctx); }
  void core_finished(CoreContext& ctx) noexcept override { checked_core_finished(ctx); }
  void launch_end(LaunchState& state) noexcept override { checked_finish(*L_, state, device_); }

  void copy(CoreContext* ctx, const RawRef& src, const RawRef& dst, const char* op,
            std::source_location where) override {
    if (ctx == nullptr || ctx->engine_core == nullptr) {
      strided_copy(src, dst);  // outside a core's body there are no books to keep
      return;
    }
    checked_sync_copy(*ctx, src, dst, op, where);
  }
  void dma_start(CoreContext& ctx, const RawRef& src, const RawRef& dst, SemaphoreCell* sem,
                 std::source_location made, std::source_location where) override {
    checked_dma_start(ctx, src, dst, sem, made, where);
  }
  void dma_wait(CoreContext& ctx, SemaphoreCell* sem, int64_t slot, int64_t bytes,
                const WaitSite& site) override {
    checked_dma_wait(ctx, sem, slot, bytes, site);
  }
  void carry_copies_out(CoreContext& ctx, SemaphoreCell* sem,
                        std::vector<CarriedCopy>& out) override {
    checked_carry_out(ctx, sem, out);
  }
  void carry_copies_in(CoreContext& ctx, SemaphoreCell* sem,
                       const std::vector<CarriedCopy>& copies) override {
    checked_carry_in(ctx, sem, copies);
  }
  void signal(CoreContext& ctx, int target, int64_t slot, int64_t inc) override {
    checked_signal(ctx, target, slot, inc);
  }
  void remote_dma_start(CoreContext& ctx, const RemoteCopy& copy) override {
    if (L_->ranks) return checked_rank_dma_start(ctx, copy);
    if (!L_->program) return Engine::remote_dma_start(ctx, copy);
    checked_remote_dma_start(ctx, copy);
  }
  void remote_dma_wait(CoreContext& ctx, SemaphoreCell* sem, int64_t slot, int64_t bytes,
                       const WaitSite& site, bool recv) override {
    if (L_->ranks) return checked_rank_dma_wait(ctx, sem, slot, bytes, site, recv);
    if (!L_->program) return Engine::remote_dma_wait(ctx, sem, slot, bytes, site, recv);
    checked_remote_dma_wait(ctx, sem, slot, bytes, site, recv);
  }
  void remote_signal(CoreContext& ctx, const DeviceTarget& target, int64_t slot, int64_t inc,
                     std::source_location where) override {
    if (L_->ranks) return checked_rank_signal(ctx, target, slot, inc, where);
    if (!L_->program) return Engine::remote_signal(ctx, target, slot, inc, where);
    checked_remote_signal(ctx, target, slot, inc, where);
  }
  bool try_take(CoreContext& ctx, SemaphoreCell& cell, int64_t slot, int64_t amount,
                const WaitSite& site) override {
    return checked_try_take(ctx, cell, slot, amount, site);
  }
  // Spinning would only take the launch's lock in a loop: a checked wait sleeps at once.
  bool spin_before_sleep() const noexcept override { return false; }
  void blocked(CoreContext& ctx, SemaphoreCell& cell, int64_t slot, int64_t amount,
               const WaitSite& site) override {
    checked_blocked(ctx, cell, slot, amount, site);
  }
  void unblocked(CoreContext& ctx, int64_t /*slot*/, bool /*taken*/) noexcept override {
    checked_unblocked(ctx);
  }
  void transport_blocked(CoreContext& ctx, const std::string& what) override {
    checked_transport_blocked(ctx, what);
  }
  void transport_unblocked(CoreContext& ctx) noexcept override { checked_unblocked(ctx); }

  void before_evaluate(CoreContext& ctx, const ExprProgram& prog, const RawRef& dst) override {
    checked_evaluate(ctx, prog, dst);
  }
  bool observes_evaluate() const noexcept override { return true; }
  void before_dot(CoreContext& ctx, const DotCall& call, const RawRef& dst,
                  bool accumulate) override {
    checked_dot(ctx, call, dst, accumulate);
  }
  void gather(CoreContext& ctx, const GatherCall& call) override { checked_gather(ctx, call); }
  bool observes_elements() const noexcept override { return true; }
  void element_access(CoreContext& ctx, const void* p, int size, bool read,
                      std::source_location where) override {
    if (ctx.engine_core != nullptr) checked_element(ctx, p, size, read, where);
  }

  void fresh(CoreContext& ctx, void* data, int64_t bytes, DType dtype,
             FunctionRef<std::string()> what) override {
    checked_fresh(ctx, data, bytes, dtype, what());
  }
  void pad(CoreContext& ctx, void* data, int64_t bytes, DType dtype) override {
    checked_pad(ctx, data, bytes, dtype);
  }
  // Every copy is kept, so that no kernel can come to depend on a window being the block.
  bool may_use_blocks_in_place() const noexcept override { return false; }
  void check_block_shape(CoreContext& /*ctx*/, const Shape& array, const SmallVec& block,
                         DType dtype, int operand, bool is_output, const char* op,
                         std::source_location where) const override {
    if (L_->chip) checked_block_shape(array, block, dtype, operand, is_output, op, where);
  }
  void check_reshape(CoreContext& /*ctx*/, const Shape& in, const Shape& out,
                     std::source_location where) const override {
    if (L_->chip) check_tpu_reshape(in, out, L_->params.chip, where);
  }
  void pipeline_begins(CoreContext& ctx) override { checked_pipeline_begins(ctx); }
  void pipeline_step_begins(CoreContext& ctx) override { checked_pipeline_step_begins(ctx); }
  bool observes_pipeline_steps() const noexcept override { return true; }
  void pipeline_ends(CoreContext& ctx) noexcept override { checked_pipeline_ends(ctx); }
  std::vector<std::vector<int64_t>> parallel_order(
      CoreContext& /*ctx*/, const Shape& grid,
      const std::vector<pltpu::GridDimensionSemantics>& semantics) const override {
    return checked_parallel_order(*L_, grid, semantics);
  }

 private:
  std::shared_ptr<CheckedLaunch> L_;
  int base_;
  int device_;
};

}  // namespace

std::unique_ptr<Engine> make_checked_engine(const LaunchSpec& spec,
                                            const pltpu::InterpretParams& params,
                                            const LaunchBuffer* buffers, int num_buffers,
                                            int64_t vmem_limit) {
  return std::make_unique<CheckedEngine>(
      checked_begin(spec, params, buffers, num_buffers, vmem_limit), 0, -1);
}

std::unique_ptr<Engine> make_engine_for(std::shared_ptr<CheckedLaunch> launch, int base,
                                        int device) {
  return std::make_unique<CheckedEngine>(std::move(launch), base, device);
}

// ---- launch ----------------------------------------------------------------------------------

void checked_check_chip(CheckedLaunch& L, const LaunchSpec& spec, int64_t vmem_limit) {
  L.vmem_limit = vmem_limit;
  if (!L.params.chip.empty()) {
    L.chip = pltpu::get_tpu_info_for_chip(L.params.chip, 1, spec.where);
    const pltpu::TpuInfo& chip = *L.chip;
    const int phys = pltpu::num_physical_tensor_cores_per_chip(chip.chip_version);
    if (spec.num_cores > phys) {
      throw UsageError(
          ErrorKind::kUnsupported,
          fmt::format("tessera: {} at {} (kernel '{}', before launch): the mesh has {} "
                      "cores but a {} chip has {} TensorCore{}; use "
                      "pltpu::TensorCoreMesh(\"{}\", {}) or check against another chip",
                      spec.entry, format_location(spec.where), spec.name, spec.num_cores,
                      L.params.chip, phys, phys == 1 ? "" : "s", spec.axis_name, phys),
          spec.where, -1, {}, spec.name);
    }
    L.vmem_limit = std::min(vmem_limit, chip.vmem_capacity_bytes);
    auto over = [&](MemorySpace space, int64_t used, int64_t cap) {
      if (used <= cap) return;
      throw UsageError(
          ErrorKind::kCapacityExceeded,
          fmt::format("tessera: {} at {} (kernel '{}', before launch): scratch needs {} "
                      "bytes of {} per core but a {} TensorCore has {} bytes; largest buffers: "
                      "{}; shrink them (this kernel would not fit on that chip)",
                      spec.entry, format_location(spec.where), spec.name, used, to_string(space),
                      L.params.chip, cap, largest_scratch(spec, space)),
          spec.where, -1, {}, spec.name);
    };
    over(MemorySpace::VMEM, spec.vmem_used, chip.vmem_capacity_bytes);
    over(MemorySpace::SMEM, spec.smem_used, chip.smem_capacity_bytes);
  }
}

void checked_add_buffers(CheckedLaunch& L, const LaunchBuffer* buffers, int num_buffers,
                         int device) {
  int in_index = 0;
  for (int i = 0; i < num_buffers; ++i) {
    const LaunchBuffer& b = buffers[i];
    if (!b.is_output) {
      bool aliased = false;
      for (int j = 0; j < num_buffers; ++j)
        aliased |= buffers[j].is_output && buffers[j].data == b.data;
      const int index = b.core > 0 ? in_index - 1 : in_index++;  // a core's copy: the same input
      if (aliased || b.bytes == 0) continue;                     // the output's entry stands for it
      auto h = std::make_unique<HbmBuffer>();
      h->device = device;
      h->region.base = reinterpret_cast<uintptr_t>(b.data);
      h->region.bytes = b.bytes;
      h->dtype = b.dtype;
      h->shape = b.shape;
      h->index = index;
      h->space = b.space;
      h->core = b.core;
      L.hbm.push_back(std::move(h));
      continue;
    }
    if (b.bytes == 0) continue;
    bool aliased = false;
    for (int j = 0; j < num_buffers; ++j)
      aliased |= !buffers[j].is_output && buffers[j].data == b.data;
    auto h = std::make_unique<HbmBuffer>();
    h->device = device;
    h->region.base = reinterpret_cast<uintptr_t>(b.data);
    h->region.bytes = b.bytes;
    h->dtype = b.dtype;
    h->shape = b.shape;
    h->is_output = true;
    h->index = b.index;
    h->space = b.space;
    h->core = b.core;
    if (!aliased) {
      // A fresh output: never written (aliased outputs start as their input). Its bytes are
      // poisoned only when reads of unwritten bytes are allowed: otherwise any read of them
      // (a DMA moves the shadow with the bytes) or the caller's (checked_finish) raises first.
      h->region.shift = std::countr_zero(static_cast<unsigned>(itemsize(b.dtype)));
      h->region.allocate();
      if (L.params.allow_uninitialized_reads) {
        fill_poison(const_cast<void*>(b.data), b.bytes, b.dtype, L.params.uninitialized_memory);
      }
    }
    L.hbm.push_back(std::move(h));
  }
}

void checked_add_cores(CheckedLaunch& L, int devices, int cores_per_device) {
  const int n = devices * cores_per_device;
  L.devices = devices;
  L.cores_per_device = cores_per_device;
  L.num_cores = n;
  L.vc.assign(static_cast<size_t>(n), VC(static_cast<size_t>(n), 0));
  L.blocked.resize(static_cast<size_t>(n));
  L.finished.assign(static_cast<size_t>(n), 0);
  L.arenas.assign(static_cast<size_t>(n), nullptr);
  for (int c = 0; c < n; ++c) {
    auto cc = std::make_unique<CheckedCore>();
    cc->launch = &L;
    cc->core = c;
    cc->device = c / cores_per_device;
    cc->local = c % cores_per_device;
    cc->rng.seed(L.params.random_seed * 0x9e3779b97f4a7c15ull + static_cast<uint64_t>(c));
    L.cores.push_back(std::move(cc));
  }
}

std::unique_ptr<CheckedLaunch> checked_begin(const LaunchSpec& spec,
                                             const pltpu::InterpretParams& params,
                                             const LaunchBuffer* buffers, int num_buffers,
                                             int64_t vmem_limit) {
  auto L = std::make_unique<CheckedLaunch>();
  L->spec = &spec;
  L->params = params;
  checked_check_chip(*L, spec, vmem_limit);
  checked_add_buffers(*L, buffers, num_buffers, -1);
  checked_add_cores(*L, 1, spec.num_cores);
  return L;
}

void checked_core_begin(CheckedLaunch& L, CoreContext& ctx, void* const* scratch, int core) {
  CheckedCore& cc = *L.cores[static_cast<size_t>(core)];
  ctx.engine_core = &cc;
  {
    // Under the mutex: on a device mesh other cores look up these regions (a remote copy's
    // destination, a message naming memory).
    std::lock_guard<std::mutex> lock(L.mu);
    L.arenas[static_cast<size_t>(core)] = ctx.arena;
    if (L.program) checked_device_core_begins(L, core);
    std::lock_guard<std::mutex> regions(L.regions_mu);
    cc.vmem.base = reinterpret_cast<uintptr_t>(ctx.arena->vmem());
    cc.vmem.bytes = ctx.stack.limit(MemorySpace::VMEM);
    cc.vmem.allocate();
    cc.smem.base = reinterpret_cast<uintptr_t>(ctx.arena->smem());
    cc.smem.bytes = smem_capacity_bytes();
    cc.smem.allocate();
  }
  const LaunchSpec& spec = *L.spec;
  for (size_t i = 0; i < spec.scratch.size(); ++i) {
    const ScratchRequest& r = spec.scratch[i];
    if (r.space == MemorySpace::SEMAPHORE) continue;
    fill_poison(scratch[i], r.bytes, r.dtype, L.params.uninitialized_memory);
  }
  cc.memories_made.store(true, std::memory_order_release);
  t_observe_elements = true;
}

void checked_core_end(CoreContext& ctx) {
  CheckedCore& cc = core_of(ctx);
  if (cc.launch->program) checked_remote_core_end(ctx);
  if (cc.inflight.empty()) return;
  const Dma& d = cc.inflight.front();
  raise(ErrorKind::kSemaphoreLeak, "async_copy.start", d.started,
        fmt::format("{} was never waited before the kernel ended; every started copy needs a "
                    ".wait() on its descriptor (or one of the same size on the same semaphore), "
                    "or its semaphore is left non-zero and the destination may not be written",
                    dma_text(ctx, d)));
}

void checked_body_done(CoreContext& ctx) noexcept {
  CheckedCore& cc = core_of(ctx);
  {
    std::lock_guard<std::mutex> lock(cc.launch->mu);
    cc.launch->finished[static_cast<size_t>(cc.core)] = 1;
  }
  wake_all(*cc.launch);  // a core waiting for this one may now be in a deadlock
}

void checked_core_finished(CoreContext& ctx) noexcept {
  if (ctx.engine_core == nullptr) return;
  CheckedCore& cc = core_of(ctx);
  {
    std::lock_guard<std::mutex> lock(cc.launch->mu);
    cc.launch->finished[static_cast<size_t>(cc.core)] = 1;
    cc.launch->blocked[static_cast<size_t>(cc.core)].on = false;
    if (cc.launch->program) checked_device_core_finished(*cc.launch, cc.core);
  }
  // A core that waits for this one may now be in a deadlock: it looks again when it wakes.
  wake_all(*cc.launch);
  cc.inflight.clear();
  {
    std::lock_guard<std::mutex> lock(cc.launch->mu);
    std::lock_guard<std::mutex> regions(cc.launch->regions_mu);
    cc.vmem.reset();
    cc.smem.reset();
  }
  ctx.engine_core = nullptr;
  t_observe_elements = false;
}

void checked_finish(CheckedLaunch& L, LaunchState& state, int device) noexcept {
  if (state.first_error || L.params.allow_uninitialized_reads) return;
  try {
    std::lock_guard<std::mutex> lock(L.mu);
    for (auto& b : L.hbm) {
      if (!b->is_output || b->region.init == nullptr || b->device != device) continue;
      Runs all;
      all.v.push_back({b->region.base, b->region.base + static_cast<uintptr_t>(b->region.bytes)});
      all.lo = all.v[0].lo;
      all.hi = all.v[0].hi;
      const uintptr_t p = first_unwritten(b->region, all);
      if (p == 0) continue;
      int64_t unwritten = 0;
      const int64_t cells = b->region.bytes >> b->region.shift;
      for (int64_t i = 0; i < cells; ++i) unwritten += b->region.init[i] != kDefined ? 1 : 0;
      const LaunchSpec& spec = *L.spec;
      const std::string element = elem_at(p, b->region.base, b->dtype, b->shape);
      const uint8_t state_at = *b->region.at(p);
      if (const Origin* o = origin_of(L, state_at)) {
        // A value computed from never-written data reached the output: reported where it was
        // computed, with what it read.
        const SourceLocation at = resolved(o->where);
        const SourceLocation where = at.line() != 0 ? at : SourceLocation(spec.where);
        std::string step;
        if (!o->step.empty()) step = fmt::format(", grid step ({})", fmt::join(o->step, ", "));
        const std::string what =
            o->early_hbm_read
                ? fmt::format(
                      "tessera: copy at {} (kernel '{}', core {}{}): reads {} before any "
                      "core had written it (if another core writes it, order that write "
                      "before this read with pl::semaphore_signal/wait or "
                      "pltpu::core_barrier)",
                      format_location(where), spec.name, o->core, step, o->source)
                : fmt::format(
                      "tessera: vector assignment at {} (kernel '{}', core {}{}): "
                      "computes from {}, which nothing had written since it was "
                      "allocated (fresh scratch, output windows and run_scoped buffers "
                      "hold garbage on a TPU; here: poison)",
                      format_location(where), spec.name, o->core, step, o->source);
        state.first_error = std::make_exception_ptr(KernelError(
            ErrorKind::kUninitialized,
            fmt::format("{}, and the result reached output {} {}{}{} ({} of its {} elements are "
                        "undefined): the caller would read garbage. Write it first, e.g. "
                        "initialise an accumulator under `if (pl::program_id(k) == 0)`{}",
                        what, b->index, dtype_name(b->dtype), b->shape.to_string(), element,
                        unwritten, b->shape.size(), at.line() != 0 ? "" : kKernelLineNote),
            where, o->core, o->step, spec.name));
        return;
      }
      state.first_error = std::make_exception_ptr(KernelError(
          ErrorKind::kUninitialized,
          fmt::format("tessera: {} at {} (kernel '{}', checked): output {} {}{}{} was "
                      "never written by any core ({} of its {} elements were not); the caller "
                      "would read garbage. Write every element (check the grid covers the "
                      "output, each core's slice and the last partial block), or pass "
                      "InterpretParams{{.allow_uninitialized_reads = true}}",
                      spec.entry, format_location(spec.where), spec.name, b->index,
                      dtype_name(b->dtype), b->shape.to_string(), element, unwritten,
                      b->shape.size()),
          spec.where, -1, {}, spec.name));
      return;
    }
  } catch (...) {
    state.first_error = std::current_exception();
  }
}
std::vector<std::vector<int64_t>> checked_parallel_order(
    const CheckedLaunch& launch, const Shape& grid,
    const std::vector<pltpu::GridDimensionSemantics>& semantics) {
  const pltpu::InterpretParams& P = launch.params;
  std::vector<std::vector<int64_t>> perms;
  if (!P.parallel_order_seed) return perms;
  std::mt19937_64 rng(*P.parallel_order_seed);  // the same on every core
  perms.resize(static_cast<size_t>(grid.rank()));
  for (int a = 0; a < grid.rank(); ++a) {
    if (static_cast<size_t>(a) >= semantics.size() ||
        semantics[static_cast<size_t>(a)] != pltpu::PARALLEL) {
      continue;
    }
    std::vector<int64_t>& p = perms[static_cast<size_t>(a)];
    p.resize(static_cast<size_t>(grid[a]));
    for (int64_t i = 0; i < grid[a]; ++i) p[static_cast<size_t>(i)] = i;
    std::shuffle(p.begin(), p.end(), rng);
  }
  return perms;
}

void checked_block_shape(const Shape& array, const SmallVec& block, DType dtype, int operand,
                         bool is_output, const char* op, SourceLocation where) {
  const int r = block.size();
  const std::string which = fmt::format("{} {}", is_output ? "output" : "input", operand);
  auto shape_str = [](const SmallVec& v) {
    std::vector<int64_t> x(v.begin(), v.end());
    if (x.size() == 1) return fmt::format("({},)", x[0]);
    return fmt::format("({})", fmt::join(x, ", "));
  };
  if (r < 1) {
    raise(ErrorKind::kBlockShape, op, where,
          fmt::format("{} has a block of rank 0; the TPU lowering supports blocks of rank >= 1",
                      which));
  }
  if (r == 1) {
    const int64_t bs = block[0];
    const int64_t as = array[0];
    const int bits = dtype == DType::kBool ? 32 : dtype_bits(dtype);
    const int64_t min_tiling = int64_t{128} * (32 / bits);
    const bool pow2 = bs > 0 && (bs & (bs - 1)) == 0;
    if (bs == as || bs % (8 * 128) == 0 || (pow2 && bs >= min_tiling)) return;
    raise(ErrorKind::kBlockShape, op, where,
          fmt::format("{} has the rank-1 block {} over an array of {} {}; a TPU needs a rank-1 "
                      "block equal to the array, a multiple of 1024 (8 x 128), or a power of 2 "
                      "of at least {} (128 x 32 / {} bits); pick e.g. {}",
                      which, shape_str(block), dtype_name(dtype), array.to_string(), min_tiling,
                      bits, std::max<int64_t>(min_tiling, 1024)));
  }
  const int64_t b0 = block[r - 1];
  const int64_t b1 = block[r - 2];
  const int64_t a0 = array[array.rank() - 1];
  const int64_t a1 = array[array.rank() - 2];
  const bool ok0 = b0 == a0 || b0 % 128 == 0;
  const bool ok1 = b1 == a1 || b1 % 8 == 0;
  if (ok0 && ok1) return;
  raise(ErrorKind::kBlockShape, op, where,
        fmt::format("{} has the block {} over an array of shape {}: its last two dimensions "
                    "must be divisible by 8 and 128 respectively, or equal the array's ({} and "
                    "{}); {} breaks the rule. Round the block to a multiple of (8, 128) (a "
                    "partial edge block is fine)",
                    which, shape_str(block), array.to_string(), a1, a0,
                    !ok0 ? fmt::format("the last dimension {}", b0)
                         : fmt::format("the second-to-last dimension {}", b1)));
}

}  // namespace tessera::detail
