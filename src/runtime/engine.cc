// The engine interface's defaults: what an engine that keeps no books does (runtime/engine.h).
#include "runtime/engine.h"

#include "native/gather.h"
#include "native/native_engine.h"
#include "runtime/context.h"
#include "runtime/devices.h"

namespace tessera::detail {

Engine::~Engine() = default;

CoreBudget Engine::budget(int64_t vmem_limit) const {
  return CoreBudget{vmem_limit, smem_capacity_bytes(), {}, {}};
}
void Engine::core_begin(CoreContext& /*ctx*/, void* const* /*scratch*/) {}
void Engine::core_end(CoreContext& /*ctx*/) {}
void Engine::core_finished(CoreContext& /*ctx*/) noexcept {}
void Engine::launch_end(LaunchState& /*state*/) noexcept {}
void Engine::blocked(CoreContext& /*ctx*/, SemaphoreCell& /*cell*/, int64_t /*slot*/,
                     int64_t /*amount*/, const WaitSite& /*site*/) {}
void Engine::unblocked(CoreContext& /*ctx*/, int64_t /*slot*/, bool /*taken*/) noexcept {}
void Engine::transport_blocked(CoreContext& /*ctx*/, const std::string& /*what*/) {}
void Engine::transport_unblocked(CoreContext& /*ctx*/) noexcept {}
void Engine::before_evaluate(CoreContext& /*ctx*/, const ExprProgram& /*prog*/,
                             const RawRef& /*dst*/) {}
void Engine::before_dot(CoreContext& /*ctx*/, const DotCall& /*call*/, const RawRef& /*dst*/,
                        bool /*accumulate*/) {}
void Engine::gather(CoreContext& /*ctx*/, const GatherCall& call) { run_gather(call); }
bool Engine::observes_elements() const noexcept { return false; }
bool Engine::observes_evaluate() const noexcept { return false; }
void Engine::check_reshape(CoreContext& /*ctx*/, const Shape& /*in*/, const Shape& /*out*/,
                           std::source_location /*where*/) const {}
void Engine::element_access(CoreContext& /*ctx*/, const void* /*p*/, int /*size*/, bool /*read*/,
                            std::source_location /*where*/) {}
void Engine::fresh(CoreContext& /*ctx*/, void* /*data*/, int64_t /*bytes*/, DType /*dtype*/,
                   FunctionRef<std::string()> /*what*/) {}
void Engine::pad(CoreContext& /*ctx*/, void* /*data*/, int64_t /*bytes*/, DType /*dtype*/) {}
void Engine::carry_copies_out(CoreContext& /*ctx*/, SemaphoreCell* /*sem*/,
                              std::vector<CarriedCopy>& /*out*/) {}
void Engine::carry_copies_in(CoreContext& ctx, SemaphoreCell* sem,
                             const std::vector<CarriedCopy>& copies) {
  // This engine keeps no copies in flight: those a checked kernel left complete now.
  for (const CarriedCopy& c : copies) {
    if (!c.executed) {
      if (c.half == CarriedCopy::Half::kRecv) {
        const RawRef staged{c.staging->data(), c.dst.dtype, MemorySpace::VMEM, c.dst.shape,
                            row_major_strides(c.dst.shape)};
        strided_copy(staged, c.dst);
      } else {
        strided_copy(c.src, c.dst);
      }
      sem->fetch_add(c.bytes);
    }
    if (c.id != 0 && ctx.device != nullptr) ctx.device->transport->waited(c.id);
  }
}
void Engine::body_done(CoreContext& /*ctx*/) {}
bool Engine::may_use_blocks_in_place() const noexcept { return true; }
void Engine::check_block_shape(CoreContext& /*ctx*/, const Shape& /*array*/,
                               const SmallVec& /*block*/, DType /*dtype*/, int /*operand*/,
                               bool /*is_output*/, const char* /*op*/,
                               std::source_location /*where*/) const {}
void Engine::pipeline_begins(CoreContext& /*ctx*/) {}
void Engine::pipeline_step_begins(CoreContext& /*ctx*/) {}
bool Engine::observes_pipeline_steps() const noexcept { return false; }
void Engine::pipeline_ends(CoreContext& /*ctx*/) noexcept {}
std::vector<std::vector<int64_t>> Engine::parallel_order(
    CoreContext& /*ctx*/, const Shape& /*grid*/,
    const std::vector<pltpu::GridDimensionSemantics>& /*semantics*/) const {
  return {};
}

Engine& current_engine() noexcept {
  CoreContext* ctx = current_context();
  return ctx != nullptr ? *ctx->engine : native_engine();
}

// Element access through a Ref made on an observed core (tessera/ref.h).
void observe_element(const void* p, int size, bool is_const, std::source_location where) {
  if (CoreContext* ctx = current_context())
    ctx->engine->element_access(*ctx, p, size, is_const, where);
}

}  // namespace tessera::detail
