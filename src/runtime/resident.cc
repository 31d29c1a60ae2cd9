// The semaphores a pallas_call leaves for the next one (runtime/resident.h): their state between
// calls, and moving it into core 0's semaphore scratch for a call and back out of it.
#include "runtime/resident.h"

#include <fmt/format.h>

#include <memory>
#include <optional>

#include "core/byte_span.h"
#include "runtime/context.h"
#include "tessera/resident.h"

namespace tessera::detail {

std::shared_ptr<SemaphoreState> make_semaphore_state(int64_t count) {
  auto s = std::make_shared<SemaphoreState>();
  s->count = count;
  return s;
}

int64_t semaphore_state_value(const SemaphoreState& s, int64_t flat, int core,
                              std::source_location where) {
  if (flat < 0 || flat >= s.count) {
    raise(ErrorKind::kOutOfBounds, "SemaphoreArray.value", where,
          fmt::format("semaphore {} is outside 0..{}; the array holds {} semaphores", flat,
                      s.count - 1, s.count));
  }
  if (core < 0) {
    raise(ErrorKind::kOutOfBounds, "SemaphoreArray.value", where,
          fmt::format("core {} is negative; cores count from 0", core));
  }
  if (core >= static_cast<int>(s.cores.size())) return 0;  // no call ran on that core
  return s.cores[static_cast<size_t>(core)].counts[static_cast<size_t>(flat)];
}

void smem_copy_shape_mismatch(const Shape& first, const Shape& copy, int core,
                              std::source_location where) {
  raise(ErrorKind::kShapeMismatch, "pallas_call", where,
        fmt::format("the SmemArray's copy for core {} has shape {} but core 0's has {}; every "
                    "core's copy of an SMEM array keeps one shape (assign a copy an Array of "
                    "the same shape)",
                    core, copy.to_string(), first.to_string()));
}

void check_core_index(int core, int cores, const char* what, std::source_location where) {
  if (core >= 0 && core < cores) return;
  raise(ErrorKind::kOutOfBounds, what, where,
        fmt::format("core {} is outside 0..{}; {} core{} of the call that made the array "
                    "ha{} a copy",
                    core, cores - 1, cores, cores == 1 ? "" : "s", cores == 1 ? "s" : "ve"));
}

namespace {

// `r` moved to where this call's kernel sees its array, or nothing when no array of the call
// holds all of it.
std::optional<RawRef> place(const RawRef& r, const std::vector<ArrayPlace>& places) {
  const ByteSpan s = byte_span(r);
  if (s.empty()) return r;  // an empty view touches no memory
  for (const ArrayPlace& p : places) {
    const auto* base = static_cast<const std::byte*>(p.caller);
    if (s.first >= base && s.last <= base + p.bytes) {
      RawRef moved = r;
      moved.data =
          static_cast<std::byte*>(p.kernel) + (static_cast<const std::byte*>(r.data) - base);
      return moved;
    }
  }
  return std::nullopt;
}

}  // namespace

namespace {

// Moves carried copy `c` (on semaphore `i` of operand `what`) to where this call's kernel sees its
// arrays. A local copy needs both, a remote copy's receiving half its destination (its bytes are
// staged); its sending half's bytes have left, so without its source only the check that the
// source is not overwritten before the wait is lost.
void relocate(CarriedCopy& c, const std::vector<ArrayPlace>& places, int64_t i,
              const std::string& what) {
  using Half = CarriedCopy::Half;
  if (c.half == Half::kSend) {
    const std::optional<RawRef> src = c.source_known ? place(c.src, places) : std::nullopt;
    c.source_known = src.has_value();
    if (src) c.src = *src;
    return;
  }
  const std::optional<RawRef> src =
      c.half == Half::kLocal ? place(c.src, places) : std::optional<RawRef>(c.src);
  const std::optional<RawRef> dst = place(c.dst, places);
  if (src && dst) {
    c.src = *src;
    c.dst = *dst;
    return;
  }
  const std::string copy =
      c.half == Half::kLocal ? std::string("the async copy started here") : c.what;
  raise(ErrorKind::kInvalidArgument, "pallas_call", c.started,
        fmt::format("{} is still in flight on semaphore {} of {}, but this call does not take its "
                    "{} array ({} {}); on a TPU that memory may already hold something else: "
                    "pass the copy's {} to the call that waits for it (alias the destination to "
                    "an output, as Pallas' async kernels do)",
                    copy, i, what, !src ? "source" : "destination", dtype_name(c.src.dtype),
                    (!src ? c.src : c.dst).shape.to_string(),
                    c.half == Half::kLocal ? "source and destination" : "destination"));
}

}  // namespace

void load_semaphores(CoreContext& ctx, int core, const std::vector<ResidentSemaphore>& sems,
                     const std::vector<ArrayPlace>& places) {
  for (const ResidentSemaphore& s : sems) {
    if (core >= static_cast<int>(s.state->cores.size())) continue;  // zeros: the cells' start
    const CoreSemaphores& mine = s.state->cores[static_cast<size_t>(core)];
    for (int64_t i = 0; i < s.count; ++i) {
      const auto k = static_cast<size_t>(i);
      s.cells[i].store(mine.counts[k]);
      if (mine.copies[k].empty()) continue;
      std::vector<CarriedCopy> copies = mine.copies[k];
      for (CarriedCopy& c : copies) relocate(c, places, i, s.what);
      ctx.engine->carry_copies_in(ctx, &s.cells[i], copies);
    }
  }
}

void save_semaphores(CoreContext& ctx, const std::vector<ResidentSemaphore>& sems,
                     std::vector<CoreSemaphores>& out) {
  flush_copies(ctx);  // the copies this core holds count on the semaphores handed over
  out.assign(sems.size(), CoreSemaphores{});
  for (size_t j = 0; j < sems.size(); ++j) {
    const ResidentSemaphore& s = sems[j];
    out[j].counts.resize(static_cast<size_t>(s.count));
    out[j].copies.resize(static_cast<size_t>(s.count));
    for (int64_t i = 0; i < s.count; ++i) {
      const auto k = static_cast<size_t>(i);
      ctx.engine->carry_copies_out(ctx, &s.cells[i], out[j].copies[k]);
      out[j].counts[k] = s.cells[i].exchange(0);
    }
  }
}

}  // namespace tessera::detail
