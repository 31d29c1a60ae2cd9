// The checked engine's gather (lax.gather, jnp.take_along_axis; src/native/gather.h). A TPU
// gathers at whatever address an index names: an undefined index steers the read by garbage, and
// an index outside the operand under promise_in_bounds reads memory that is not the operand.
// Both are reported at the gather's line. Otherwise each result element takes the definedness of
// the operand element it copies (a filled one is defined), as a copy moves it, and the native
// gather computes the elements.
#include <fmt/format.h>

#include <string>

#include "check/checked_state.h"
#include "native/gather.h"

namespace tessera::detail {

namespace {

std::string position_text(const GatherOutOfBounds& o, bool take_along) {
  std::string s = "(";
  for (int i = 0; i < o.position.size(); ++i)
    s += fmt::format("{}{}", i ? ", " : "", o.position[i]);
  if (take_along) return s + (o.position.size() == 1 ? ",)" : ")");
  return s + fmt::format("{}{})", o.position.empty() ? "" : ", ", o.component);
}

[[noreturn]] void raise_out_of_bounds(const GatherPlan& g, const GatherOutOfBounds& o,
                                      SourceLocation where) {
  const bool take_along = std::string_view(g.op) == "jnp.take_along_axis";
  const std::string at = take_along ? fmt::format("indices{} (broadcast to the result's shape)",
                                                  position_text(o, true))
                                    : fmt::format("start_indices{}", position_text(o, false));
  raise(ErrorKind::kOutOfBounds, g.op, where,
        fmt::format("index {} at {} is outside 0..{} for operand dim {} (extent {}{}); mode "
                    "promise_in_bounds promises in-bounds indices, and a TPU reads whatever lies "
                    "there (the native engine clamps); keep the indices in range, or pass mode "
                    "\"clip\" or \"fill\"",
                    o.index, at, o.limit, o.dim, g.operand_view[static_cast<int>(o.dim)],
                    g.slice_sizes[static_cast<int>(o.dim)] != 1
                        ? fmt::format(", slice size {}", g.slice_sizes[static_cast<int>(o.dim)])
                        : std::string()));
}

}  // namespace

void checked_gather(CoreContext& ctx, const GatherCall& call) {
  const GatherPlan& g = *call.plan;
  const SourceLocation where = statement_site(g.where);
  const pltpu::InterpretParams& P = core_of(ctx).launch->params;
  const Runs idx = runs_of(call.indices_value);
  check_compute_vs_dma(ctx, idx, false, g.op, where);
  check_compute_vs_dma(ctx, runs_of(call.operand), false, g.op, where);
  if (Region* reg = region_of(ctx, idx.lo); reg != nullptr && !P.allow_uninitialized_reads) {
    if (const uintptr_t p = first_unwritten(*reg, idx)) {
      const uint8_t state = shadow_state(*reg, p, 1);
      settle_before_uninitialized(ctx, state, g.op, where);
      raise(ErrorKind::kUninitialized, g.op, where,
            fmt::format("an undefined index reaches {}: it reads {}; a gather at a garbage "
                        "index reads a garbage address: write the indices first",
                        g.op, undefined_text(ctx, p, state)));
    }
  }
  // The result's definedness, element by element (and the promise, before anything moves).
  Region* out_reg = region_of(ctx, reinterpret_cast<uintptr_t>(call.out));
  const int item = itemsize(call.operand.dtype);
  const auto out_base = reinterpret_cast<uintptr_t>(call.out);
  const auto src_base = reinterpret_cast<uintptr_t>(call.operand.data);
  Region* src_reg = region_of(ctx, src_base);
  if (src_reg != nullptr && src_reg->init == nullptr) src_reg = nullptr;
  const auto mark_element = [&](int64_t dst, int64_t from) {
    if (out_reg == nullptr || out_reg->init == nullptr) return;
    uint8_t state = kDefined;
    if (from >= 0 && src_reg != nullptr) {
      state = shadow_state(*src_reg, src_base + static_cast<uintptr_t>(from * item), item);
    }
    const uintptr_t p = out_base + static_cast<uintptr_t>(dst * item);
    mark_range(*out_reg, p, p + static_cast<uintptr_t>(item), state);
  };
  if (g.zeros) {
    for (int64_t i = 0; i < g.out.size(); ++i) mark_element(i, -1);
  } else {
    walk_gather(call, mark_element, [&](const GatherOutOfBounds& o) {
      if (g.mode == lax::GatherScatterMode::PROMISE_IN_BOUNDS) raise_out_of_bounds(g, o, where);
      return true;
    });
  }
  run_gather(call);
}

}  // namespace tessera::detail
