// Launch: validate the spec and lay out scratch once, then run the body on every core of the
// pool, collecting the first exception and cancelling the rest. This is where a launch's engine
// is chosen (runtime/engine.h): the checked engine for a kernel in interpret mode, the native
// one otherwise; and where a trace session asked for by TESSERA_TRACE starts.
#include <fmt/format.h>
#include <hwy/cache_control.h>

#include <algorithm>
#include <atomic>
#include <cctype>
#include <chrono>
#include <cstdlib>
#include <exception>
#include <memory>
#include <mutex>
#include <numeric>
#include <optional>
#include <string>
#include <string_view>
#include <thread>
#include <vector>

#include "check/checked_engine.h"
#include "core/input_checks.h"
#include "core/messages.h"
#include "runtime/context.h"
#include "runtime/core_pool.h"
#include "runtime/devices.h"
#include "runtime/engine.h"
#include "runtime/events.h"
#include "runtime/value_heap.h"
#include "runtime/waits.h"
#include "tessera/compiler_params.h"
#include "tessera/detail/runtime.h"
#include "tessera/error.h"
#include "tessera/tpu_info.h"
#include "trace/recorder.h"

namespace tessera::detail {

std::string largest_scratch(const LaunchSpec& spec, MemorySpace space) {
  std::vector<size_t> idx;
  for (size_t i = 0; i < spec.scratch.size(); ++i) {
    if (spec.scratch[i].space == space) idx.push_back(i);
  }
  std::sort(idx.begin(), idx.end(),
            [&](size_t a, size_t b) { return spec.scratch[a].bytes > spec.scratch[b].bytes; });
  std::vector<std::string> top;
  for (size_t k = 0; k < idx.size() && k < 3; ++k)
    top.push_back(describe_scratch(spec.scratch[idx[k]], idx[k]));
  return fmt::format("{}", fmt::join(top, ", "));
}

namespace {
thread_local CoreContext* t_context = nullptr;

constexpr int64_t kScratchAlign = 64;

int64_t align_up(int64_t v, int64_t a) { return (v + a - 1) / a * a; }

// Fails when the scratch of one space does not fit its budget, naming the largest buffers.
void check_capacity(const LaunchSpec& spec, MemorySpace space, int64_t used, int64_t limit,
                    const char* knob) {
  if (used <= limit) return;
  throw UsageError(
      ErrorKind::kCapacityExceeded,
      fmt::format("tessera: {} at {} (kernel '{}', before launch): scratch needs {} bytes "
                  "of {} per core but the limit is {} bytes; largest buffers: {}; shrink them or "
                  "{}",
                  spec.entry, format_location(spec.where), spec.name, used, to_string(space), limit,
                  largest_scratch(spec, space), knob),
      spec.where, -1, {}, spec.name);
}
}  // namespace

std::string semaphore_type_name(SemaphoreKind kind, const Shape& shape) {
  if (shape.rank() == 0) return fmt::format("SemaphoreType.{}", to_string(kind));
  return fmt::format("SemaphoreType.{}({})", to_string(kind), shape.to_string());
}

std::string describe_scratch(const ScratchRequest& r, size_t index) {
  if (!r.what.empty()) {
    return fmt::format("{} {}<{}>{} = {} bytes", r.what, to_string(r.space), dtype_name(r.dtype),
                       r.shape.to_string(), r.bytes);
  }
  if (r.space == MemorySpace::SEMAPHORE) {
    return fmt::format("#{} {} = {} bytes", index, semaphore_type_name(r.semaphore_kind, r.shape),
                       r.bytes);
  }
  return fmt::format("#{} {}<{}>{} = {} bytes", index, to_string(r.space), dtype_name(r.dtype),
                     r.shape.to_string(), r.bytes);
}

CoreContext* current_context() noexcept { return t_context; }
void settle_streams(CoreContext& ctx) noexcept {
  if (!ctx.streams_pending) return;
  ctx.streams_pending = false;
  hwy::FlushStream();
}
CoreArena& core_arena(int core) { return CorePool::current().arena(core); }
void set_current_context(CoreContext* ctx) noexcept {
  t_context = ctx;
  set_current_error_context(ctx);
}
bool in_kernel() noexcept { return t_context != nullptr; }

int default_num_cores(std::source_location where) {
  // Kernels checked against a chip (TESSERA_INTERPRET=v5e, pltpu::ForceTpuInterpretMode) get the
  // chip's TensorCores by default, not the host's hardware threads.
  if (const pltpu::InterpretParams* p = forced_interpret(where); p != nullptr && !p->chip.empty()) {
    return chip_num_cores(*p);
  }
  static EnvCached<int> cached;
  return cached.get([&] {
    if (const std::optional<int64_t> v = env_integer("TESSERA_NUM_CORES", 1, kMaxCores,
                                                     "a core count", "TensorCoreMesh", where)) {
      return static_cast<int>(*v);
    }
    const unsigned hw = std::thread::hardware_concurrency();
    return hw == 0 ? 1 : static_cast<int>(std::min<unsigned>(hw, kMaxCores));
  });
}

void check_num_cores(int num_cores, std::source_location where) {
  if (num_cores < 1 || num_cores > kMaxCores) {
    raise(ErrorKind::kInvalidArgument, "TensorCoreMesh", where,
          fmt::format("num_cores={} is outside 1..{}; a mesh needs at least one core", num_cores,
                      kMaxCores));
  }
}

void check_scratch_shape(const Shape& shape, int64_t itemsize, MemorySpace space,
                         std::source_location where) {
  const bool hbm = space == MemorySpace::HBM;
  check_shape(shape, itemsize,
              hbm ? std::string("out_type") : fmt::format("pltpu::{}", to_string(space)),
              hbm ? "a kernel output" : fmt::format("a {} buffer", to_string(space)), where);
}

std::string default_kernel_name(std::source_location where) {
  return fmt::format("kernel@{}", format_location(where));
}

void prepare_launch(LaunchSpec& spec) {
  spec.offsets.assign(spec.scratch.size(), 0);
  spec.vmem_used = 0;
  spec.smem_used = 0;
  spec.semaphore_used = 0;
  for (size_t i = 0; i < spec.scratch.size(); ++i) {
    const MemorySpace space = spec.scratch[i].space;
    int64_t& used = space == MemorySpace::SMEM        ? spec.smem_used
                    : space == MemorySpace::SEMAPHORE ? spec.semaphore_used
                                                      : spec.vmem_used;
    spec.offsets[i] = used;
    // Semaphore buffers too start on their own cache line: other cores signal them.
    used = align_up(used + spec.scratch[i].bytes, kScratchAlign);
  }
}

namespace {
std::atomic<const pltpu::InterpretParams*> g_forced{nullptr};
}  // namespace

namespace {
// TESSERA_INTERPRET: a switch (1/true/yes/on, 0/false/no/off, any case) or a TPU generation
// ("v5e"); anything else is an error that names the variable, raised at the launch that read it.
// Parsed once (again after detail::reread_environment()).
std::optional<pltpu::InterpretParams> interpret_from_env(std::source_location where) {
  const char* env = std::getenv("TESSERA_INTERPRET");
  if (env == nullptr || *env == '\0') return std::nullopt;
  std::string v(env);
  std::string lower;
  for (char c : v) lower += static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  if (lower == "0" || lower == "false" || lower == "no" || lower == "off") return std::nullopt;
  pltpu::InterpretParams p;
  if (lower == "1" || lower == "true" || lower == "yes" || lower == "on") return p;
  try {
    (void)pltpu::get_tpu_info_for_chip(v, 1, std::source_location::current());
  } catch (const Error&) {
    raise(ErrorKind::kInvalidArgument, "kernel launch", where,
          fmt::format("the environment variable TESSERA_INTERPRET='{}' is neither a switch "
                      "(1/true/yes/on or 0/false/no/off) nor a TPU generation Tessera models ({}); "
                      "set it to one of those or unset it",
                      v, fmt::join(pltpu::known_chips(), ", ")));
  }
  p.chip = v;
  return p;
}
}  // namespace

const pltpu::InterpretParams* forced_interpret(std::source_location where) {
  if (const pltpu::InterpretParams* p = g_forced.load(std::memory_order_acquire)) return p;
  static EnvCached<std::optional<pltpu::InterpretParams>> env_params;
  const std::optional<pltpu::InterpretParams>& params =
      env_params.get([&] { return interpret_from_env(where); });
  return params ? &*params : nullptr;
}

int chip_num_cores(const pltpu::InterpretParams& p) {
  if (p.chip.empty()) return 0;
  const pltpu::TpuInfo chip =
      pltpu::get_tpu_info_for_chip(p.chip, 1, std::source_location::current());
  return pltpu::num_physical_tensor_cores_per_chip(chip.chip_version);
}

namespace {
// The kernel's VMEM, SMEM and semaphore needs against what a core has.
void check_launch_capacities(const LaunchSpec& spec, int64_t vmem_limit) {
  check_capacity(spec, MemorySpace::VMEM, spec.vmem_used, vmem_limit,
                 "raise pltpu::CompilerParams{.vmem_limit_bytes = ...}");
  check_capacity(spec, MemorySpace::SMEM, spec.smem_used, smem_capacity_bytes(),
                 "move large buffers to VMEM (SMEM holds scalars)");
  const int64_t semaphore_bytes = semaphore_capacity() * int64_t{sizeof(SemaphoreCell)};
  if (spec.semaphore_used > semaphore_bytes) {  // the hint is formatted only when it is needed
    check_capacity(spec, MemorySpace::SEMAPHORE, spec.semaphore_used, semaphore_bytes,
                   fmt::format("use fewer semaphores (each takes {} bytes and each buffer starts "
                               "on a {}-byte line; a core has {} semaphores)",
                               sizeof(SemaphoreCell), kScratchAlign, semaphore_capacity())
                       .c_str());
  }
}

// Where each scratch buffer of `spec` lies in `arena`.
void scratch_pointers(const LaunchSpec& spec, CoreArena& arena, void** ptrs) {
  for (size_t i = 0; i < spec.scratch.size(); ++i) {
    const MemorySpace space = spec.scratch[i].space;
    std::byte* base = space == MemorySpace::SMEM ? arena.smem()
                      : space == MemorySpace::SEMAPHORE
                          ? reinterpret_cast<std::byte*>(arena.semaphores())
                          : arena.vmem();
    ptrs[i] = base + spec.offsets[i];
  }
}
}  // namespace

namespace {
// On a device of a mesh: publishes the launch, after the implicit start barrier. Cancelled at
// entry, it clears its semaphores: another device may have signalled or copied into the launch
// while it was published, and no core will take that.
void enter_device_launch(DeviceLaunchScope& device, const LaunchSpec& spec, LaunchState& state) {
  try {
    device.enter();
  } catch (...) {
    state.first_error = std::current_exception();
    finish_semaphores(spec, state);
    throw;
  }
}
}  // namespace

namespace {
// set_first_error_report_delay_for_test (runtime/devices.h).
std::atomic<int> g_first_error_report_delay_ms{0};

// What a core needs of its launch, in cache lines of its own: a worker starts by fetching what
// the launcher wrote for this launch, one cache line at a time, and a core's first reads miss
// in its cache once per line (a 2-core tiny launch spent ~200 ns more in the worker's core than
// in the launcher's; docs/performance.md, "Two threads on one CPU"). Gathered here rather than
// captured by reference from the launcher's frame, they come in two lines, the ones the pool
// has a worker prefetch as it wakes (core_pool.h, JobLines): the first holds the pointers and
// the body, the second the events' tag and the budget's limits; the budget's chip names, which
// only a capacity message reads, lie beyond them.
struct alignas(64) CoreJob {
  const LaunchSpec* spec;
  LaunchState* state;
  Engine* engine;
  DeviceContext* device;
  DeviceLaunchScope* scope;
  CorePool* pool;
  FunctionRef<void(int, void* const*)> body;
  LaunchTag events;  // a copy: the launcher's LaunchEvents shares lines with its other locals
  CoreBudget budget;

  void operator()(int core) const {
    CoreContext ctx;
    ctx.core = core;
    ctx.num_cores = spec->num_cores;
    ctx.axis_name = &spec->axis_name;
    ctx.kernel_name = &spec->name;
    ctx.launch = state;
    ctx.kernel_where = spec->where;
    ctx.engine = engine;
    ctx.device = device;
    CoreArena& arena = pool->arena(core);
    ctx.arena = &arena;
    ctx.stack.reset(arena, spec->vmem_used, spec->smem_used, spec->semaphore_used, budget);
    constexpr size_t kInline = 16;
    void* inline_ptrs[kInline];
    std::vector<void*> heap_ptrs;
    void** ptrs = inline_ptrs;
    if (spec->scratch.size() > kInline) {
      heap_ptrs.resize(spec->scratch.size());
      ptrs = heap_ptrs.data();
    }
    scratch_pointers(*spec, arena, ptrs);
    set_current_context(&ctx);
    try {
      const CoreEvents core_events(events, core);
      engine->core_begin(ctx, ptrs);
      ctx.body_frame = __builtin_frame_address(0);
      body(core, ptrs);
      flush_copies(ctx);
      settle_streams(ctx);
      check_values_released(ctx);
      engine->core_end(ctx);
    } catch (...) {
      std::exception_ptr first;
      {
        std::lock_guard<std::mutex> lock(state->mu);
        if (!state->first_error) state->first_error = std::current_exception();
        first = state->first_error;
        state->cancelled.store(true);
      }
      // Cores blocked in a semaphore wait would otherwise sleep until their timeout.
      wake_semaphore_waiters(spec->num_cores);
      if (const int ms = g_first_error_report_delay_ms.load(std::memory_order_relaxed);
          ms > 0 && first == std::current_exception()) {
        std::this_thread::sleep_for(std::chrono::milliseconds(ms));
      }
      // And those of the other devices, with the launch's first error, not this core's: a core
      // this one's failure woke (kCancelled) may tell the mesh before this one does, and the
      // program reports the error the mesh heard first.
      scope->core_failed(first);
    }
    settle_streams(ctx);  // (a body that threw)
    engine->core_finished(ctx);
    // A value that outlived the body (reported above) refers to nothing from now on.
    arena.values().reset(0);
    set_current_context(nullptr);
  }
};
static_assert(6 * sizeof(void*) + sizeof(FunctionRef<void(int, void* const*)>) == 64 &&
                  sizeof(LaunchTag) + 2 * sizeof(int64_t) <= 64,
              "a CoreJob's pointers and body fill its first line; its tag and limits, the second");
}  // namespace

void set_first_error_report_delay_for_test(int ms) noexcept {
  g_first_error_report_delay_ms.store(ms, std::memory_order_relaxed);
}

void launch(const LaunchSpec& spec, FunctionRef<void(int, void* const*)> body) {
  launch(spec, body, [](std::vector<LaunchBuffer>&) {});
}

void launch(const LaunchSpec& spec, FunctionRef<void(int, void* const*)> body,
            LaunchBuffers buffers) {
  if (in_kernel()) {
    raise(ErrorKind::kInvalidArgument, "pl::kernel", spec.where,
          fmt::format("kernel '{}' was launched from inside a kernel body; kernels cannot nest "
                      "(a core cannot start a mesh)",
                      spec.name));
  }
  const int64_t vmem_limit =
      spec.vmem_limit_bytes > 0 ? spec.vmem_limit_bytes : default_vmem_limit_bytes();
  check_launch_capacities(spec, vmem_limit);

  LaunchState state;
  state.spec = &spec;
  state.wait_timeout_ms =
      spec.wait_timeout_ms > 0 ? spec.wait_timeout_ms : default_wait_timeout_ms(spec.where);
  state.semaphore_high.store(spec.semaphore_used, std::memory_order_relaxed);
  // On a device of a mesh: numbered, with its arrays gathered for the other devices.
  DeviceLaunchScope device(spec, state, buffers);

  // The engine: a checked one (with its books) for a kernel in interpret mode, else native. On a
  // device mesh the checked books are shared with the same launch of the other devices.
  std::unique_ptr<Engine> checked;
  if (const pltpu::InterpretParams* params =
          spec.interpret ? &*spec.interpret : forced_interpret(spec.where)) {
    if (device.device() != nullptr) {
      checked =
          make_checked_device_engine(spec, *params, vmem_limit, *device.device(), device.launch());
    } else {
      std::vector<LaunchBuffer> arrays;
      buffers(arrays);
      checked = make_checked_engine(spec, *params, arrays.data(), static_cast<int>(arrays.size()),
                                    vmem_limit);
    }
  }
  Engine& engine = checked ? *checked : native_engine();
  const CoreBudget budget = engine.budget(vmem_limit);
  enter_device_launch(device, spec, state);
  CorePool& pool = CorePool::current();
  trace::detail::start_from_env();
  const LaunchEvents launch_events(spec.name, spec.num_cores);
  // Two copies of the job: one the workers read, and the launcher's own for the cores it runs
  // (core_pool.h, CorePool::run: a line a worker has read costs the launcher a transfer).
  const CoreJob run_core{
      &spec, &state, &engine, device.device(), &device, &pool, body, launch_events.tag(), budget};
  const CoreJob own_core = run_core;
  // The semaphore exit check and clearing run under the pool's launch lock: a launch from
  // another host thread must not start on these arenas before they are clear again.
  auto after = [&] {
    device.leave();  // no other device writes here any more
    finish_semaphores(spec, state);
    engine.launch_end(state);
  };
  // A worker's first reads besides its CoreJob: the body's captures (up to two lines). Nothing
  // else of this frame: a line a worker has read costs the launcher a transfer when it next
  // touches it (measured: device.leave() and finish_semaphores each ~80 ns after a worker had
  // read `state`, ~17 ns without).
  const auto* captures = static_cast<const char*>(body.object());
  const JobLines lines{{captures, captures + 64}};
  pool.run(spec.num_cores, run_core, own_core, after, lines);
  if (state.first_error) std::rethrow_exception(state.first_error);
}

}  // namespace tessera::detail

namespace tessera::pltpu {
ForceTpuInterpretMode::ForceTpuInterpretMode(InterpretParams params) : params_(std::move(params)) {
  detail::g_forced.store(&params_, std::memory_order_release);
}
ForceTpuInterpretMode::~ForceTpuInterpretMode() {
  detail::g_forced.store(nullptr, std::memory_order_release);
}

void check_compiler_params(const CompilerParams& params, std::source_location where) {
  if (params.wait_timeout_ms.has_value() && *params.wait_timeout_ms < 1) {
    detail::raise(ErrorKind::kInvalidArgument, "pltpu::CompilerParams", where,
                  fmt::format("wait_timeout_ms={} must be at least 1 (milliseconds a semaphore or "
                              "DMA wait may block before it fails)",
                              *params.wait_timeout_ms));
  }
  if (params.collective_id.has_value() &&
      (*params.collective_id < 0 || *params.collective_id >= detail::kBarrierSemaphores)) {
    detail::raise(ErrorKind::kInvalidArgument, "pltpu::CompilerParams", where,
                  fmt::format("collective_id={} is outside 0..{} (a core has {} barrier "
                              "semaphores)",
                              *params.collective_id, detail::kBarrierSemaphores - 1,
                              detail::kBarrierSemaphores));
  }
  if (params.vmem_limit_bytes.has_value()) {
    const int64_t v = *params.vmem_limit_bytes;
    if (v < 1 || v > detail::max_vmem_limit_bytes()) {
      detail::raise(
          ErrorKind::kInvalidArgument, "pltpu::CompilerParams", where,
          fmt::format("vmem_limit_bytes={} is outside 1..{} (the per-core VMEM arena); "
                      "ask for at most {} MiB",
                      v, detail::max_vmem_limit_bytes(), detail::max_vmem_limit_bytes() >> 20));
    }
  }
}
}  // namespace tessera::pltpu
