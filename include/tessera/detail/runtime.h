// Internal: the non-template boundary between the kernel templates (kernel.h) and the runtime in
// src/runtime. Templates build a LaunchSpec and a per-core callback; everything else — the core
// pool, arenas, capacity checks, error collection — lives in compiled code.
#pragma once

#include <cstdint>
#include <optional>
#include <source_location>
#include <string>
#include <string_view>
#include <type_traits>
#include <utility>
#include <vector>

#include "tessera/detail/statement.h"
#include "tessera/dtype.h"
#include "tessera/error.h"
#include "tessera/interpret.h"
#include "tessera/memory_space.h"
#include "tessera/shape.h"

namespace tessera::detail {

/// A non-owning reference to a callable (like llvm::function_ref).
template <class Sig>
class FunctionRef;
template <class R, class... A>
class FunctionRef<R(A...)> {
 public:
  /// An empty reference, for storage that is filled before use; calling it is undefined.
  constexpr FunctionRef() noexcept = default;
  template <class F>
  requires(!std::is_same_v<std::remove_cvref_t<F>, FunctionRef>) FunctionRef(F&& f)
  noexcept  // NOLINT: implicit by design
      : obj_(const_cast<void*>(static_cast<const void*>(&f))), call_([](void* o, A... a) -> R {
          return (*static_cast<std::remove_reference_t<F>*>(o))(std::forward<A>(a)...);
        }) {}
  R operator()(A... a) const { return call_(obj_, std::forward<A>(a)...); }
  /// The callable referred to (for a prefetch of its captures).
  const void* object() const noexcept { return obj_; }

 private:
  void* obj_ = nullptr;
  R (*call_)(void*, A...) = nullptr;
};

/// One scratch buffer a launch (or a `pl::run_scoped` scope) needs on every core.
struct ScratchRequest {
  MemorySpace space = MemorySpace::VMEM;
  DType dtype = DType::kFloat32;  // unused for SEMAPHORE buffers
  Shape shape;
  int64_t bytes = 0;
  SemaphoreKind semaphore_kind = SemaphoreKind::REGULAR;  // SEMAPHORE buffers only
  /// Set: not scratch but room held for an array that lives in this space during the launch (a
  /// pallas_call's SMEM array), named so in capacity messages ("input 0: the SMEM array").
  std::string what = {};
  /// A SEMAPHORE buffer that stands for a pallas_call's semaphore operand (a SemaphoreArray):
  /// its counts outlive the launch, so a copy may stay in flight on it into a later call.
  bool outlives_launch = false;
};

/// Everything the runtime needs to know about a launch. Built once per kernel (by
/// prepare_launch), reused by every call, so a launch allocates nothing for it.
struct LaunchSpec {
  std::string name;
  /// The call the user wrote, as errors about the whole launch name it.
  const char* entry = "pl::kernel";
  std::string axis_name;
  int num_cores = 1;
  std::vector<ScratchRequest> scratch;
  int64_t vmem_limit_bytes = 0;  // 0: the default
  int64_t wait_timeout_ms = 0;   // 0: the default (TESSERA_WAIT_TIMEOUT_MS, else 10 s)
  int collective_id = -1;        // -1: none (CompilerParams::collective_id)
  bool skip_device_barrier = false;
  std::source_location where;  // the kernel's definition
  /// Set: run checked (interpret mode) with these params. TESSERA_INTERPRET=1 sets defaults for
  /// kernels that have none.
  std::optional<pltpu::InterpretParams> interpret;
  // Filled by prepare_launch: the scratch layout, identical on every core.
  std::vector<int64_t> offsets;  // per scratch buffer, in bytes within its space's region
  int64_t vmem_used = 0;
  int64_t smem_used = 0;
  int64_t semaphore_used = 0;  // bytes of the core's semaphore region (8 per semaphore)
};

/// Lays out the scratch of `spec` (64-byte aligned offsets per memory space). Does not throw for
/// capacity: launch() checks that, so the error comes at the call, before any core runs.
void prepare_launch(LaunchSpec& spec);

/// One HBM array a launch reads or writes, for the checked engine's shadow state.
struct LaunchBuffer {
  const void* data = nullptr;
  int64_t bytes = 0;
  DType dtype = DType::kFloat32;
  Shape shape;
  bool is_output = false;
  int index = 0;                         // among the inputs or the outputs
  MemorySpace space = MemorySpace::HBM;  // where it stands (a pallas_call's VMEM/SMEM array)
  int core = -1;  // >= 0: core `core`'s copy of an SMEM array (each core has its own)
};

/// The HBM arrays of a launch (inputs, then outputs), for an engine that keeps books of them:
/// appends them to its argument. Only called when the launch's engine asks.
using LaunchBuffers = FunctionRef<void(std::vector<LaunchBuffer>&)>;

/// Runs `body(core, scratch_pointers)` on every core of the launch, concurrently, and waits.
/// Throws UsageError before any core runs for a bad spec (scratch over capacity, ...); rethrows
/// the first exception a core raised (other cores are cancelled at their next blocking point).
void launch(const LaunchSpec& spec, FunctionRef<void(int, void* const*)> body,
            LaunchBuffers buffers);
/// The same for a launch with no HBM arrays.
void launch(const LaunchSpec& spec, FunctionRef<void(int, void* const*)> body);

/// The params every kernel without its own runs checked with: pltpu::ForceTpuInterpretMode's,
/// else TESSERA_INTERPRET's (a switch, any case, or a chip name), else null. Throws UsageError for
/// a TESSERA_INTERPRET value that is neither, located at `where` (the call that asked).
const pltpu::InterpretParams* forced_interpret(std::source_location where = {});
/// The TensorCores per chip of `p`'s chip, or 0 without one.
int chip_num_cores(const pltpu::InterpretParams& p);

/// The default number of mesh cores: a forced chip's TensorCores (TESSERA_INTERPRET=v5e), else
/// TESSERA_NUM_CORES, else the hardware threads. A bad TESSERA_NUM_CORES raises at `where`.
int default_num_cores(std::source_location where = {});
/// Validates a mesh's core count; throws UsageError naming it.
void check_num_cores(int num_cores, std::source_location where);

/// The index of the running core along `name` (the TensorCoreMesh axis), or of its device
/// along a device mesh axis; throws kUnknownAxis / kOutsideKernel.
int axis_index(std::string_view name, std::source_location where);
/// The extent of axis `name` (the TensorCoreMesh's cores, or a device mesh axis).
int axis_size(std::string_view name, std::source_location where);
/// True while the calling thread runs a kernel body.
bool in_kernel() noexcept;

/// Throws the right Error for a misuse: KernelError (with core, kernel, grid step) inside a
/// kernel, UsageError outside. `op` names the operation ("sync_copy", "Ref.at", ...). A `where`
/// without a line (a C++ operator has no call site to capture) is the running statement
/// (StatementScope), else the innermost user frame on the stack, else the kernel's line.
[[noreturn]] void raise(ErrorKind kind, std::string_view op, SourceLocation where,
                        const std::string& detail);

/// The default per-core VMEM limit and the largest one `vmem_limit_bytes` may ask for.
int64_t default_vmem_limit_bytes() noexcept;
int64_t max_vmem_limit_bytes() noexcept;
/// Per-core SMEM capacity.
int64_t smem_capacity_bytes() noexcept;
/// Semaphores per core (scratch and run_scoped together), and the bytes they take.
int64_t semaphore_capacity() noexcept;
/// The wait timeout of kernels that do not set one: TESSERA_WAIT_TIMEOUT_MS, else 10000 ms.
/// Throws UsageError at `where` for an environment value that is not a positive integer.
int64_t default_wait_timeout_ms(std::source_location where = {});

/// Makes the next launch re-read the TESSERA_* environment variables (TESSERA_INTERPRET,
/// TESSERA_NUM_CORES, TESSERA_WAIT_TIMEOUT_MS), which are otherwise read once, at first use. For a
/// program (or a test) that changes them with setenv while it runs; call it while no kernel runs.
void reread_environment() noexcept;

/// The most axes a shape may have (numpy's limit).
inline constexpr int kMaxRank = 32;
/// Validates a user-given shape of `itemsize`-byte elements: extents >= 0, rank <= kMaxRank, and
/// an element count and byte count that fit 64 bits. Raises kInvalidArgument at `where`, naming
/// the shape and the rule; `op` is the user's call ("Array", "out_type"), `noun` what the shape
/// is of ("an Array", "a VMEM buffer").
void check_shape(const Shape& shape, int64_t itemsize, std::string_view op, std::string_view noun,
                 std::source_location where);

}  // namespace tessera::detail
