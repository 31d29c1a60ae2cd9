// Remote operations as the kernel calls them (tessera/remote_dma.h): device ids resolved against
// the mesh, remote copies and their waits, remote signals, barrier semaphores, the mesh axes
// (lax::axis_index / axis_size), and the engine's default remote hooks (the transport moves the
// bytes at once). The transport (runtime/transport.h) reaches the other devices.
#include <fmt/format.h>

#include <algorithm>
#include <limits>
#include <numeric>

#include "core/messages.h"
#include "runtime/context.h"
#include "runtime/devices.h"
#include "runtime/distributed.h"
#include "runtime/engine.h"
#include "runtime/transport.h"
#include "runtime/waits.h"
#include "tessera/error.h"
#include "tessera/remote_dma.h"

namespace tessera::detail {

namespace {

std::string axes_text(const MeshInfo& m) {
  std::vector<std::string> parts;
  for (size_t a = 0; a < m.shape.size(); ++a) {
    parts.push_back(fmt::format("\"{}\" ({})", m.axis_names[a], m.shape[a]));
  }
  return fmt::format("{}", fmt::join(parts, ", "));
}

const DeviceContext& device_of(const CoreContext& ctx, const char* op, std::source_location where) {
  if (ctx.device == nullptr) {
    raise(ErrorKind::kInvalidArgument, op, where,
          "this kernel runs on no device mesh, so there is no device to address; call it inside "
          "jax::shard_map(f, mesh, ...) (a mesh of one device is fine)");
  }
  return *ctx.device;
}

void check_coordinate(int value, const MeshInfo& m, size_t axis, const char* op,
                      std::source_location where) {
  if (value >= 0 && value < m.shape[axis]) return;
  raise(ErrorKind::kOutOfBounds, op, where,
        fmt::format("device coordinate {} on mesh axis \"{}\" is outside 0..{} (the axis has {} "
                    "device{}); wrap neighbour indices with % (lax.rem)",
                    value, m.axis_names[axis], m.shape[axis] - 1, m.shape[axis],
                    m.shape[axis] == 1 ? "" : "s"));
}

// A dict device id: omitted axes keep the caller's coordinate; the core axis picks the core;
// a joint axis ({"y", "x"}) splits its index row-major over its axes.
DeviceTarget resolve_dict(const CoreContext& ctx, const pl::DeviceId& id, const char* op,
                          std::source_location where) {
  const DeviceContext& dev = *ctx.device;
  const MeshInfo& m = *dev.mesh;
  std::vector<int> coords = dev.coords;
  DeviceTarget t;
  auto axis_of = [&](const std::string& name) -> int {
    for (size_t a = 0; a < m.axis_names.size(); ++a) {
      if (m.axis_names[a] == name) return static_cast<int>(a);
    }
    return -1;
  };
  for (const auto& [key, value] : id.dict()) {
    const std::vector<std::string>& names = key.names();
    if (names.size() == 1 && axis_of(names[0]) < 0) {
      if (ctx.axis_name != nullptr && names[0] == *ctx.axis_name) {
        if (value < 0 || value >= ctx.num_cores) {
          raise(ErrorKind::kOutOfBounds, op, where,
                fmt::format("core {} on the TensorCoreMesh axis \"{}\" is outside 0..{}", value,
                            names[0], ctx.num_cores - 1));
        }
        t.core = value;
        continue;
      }
      raise(ErrorKind::kUnknownAxis, op, where,
            fmt::format("the device id names the axis \"{}\", which is neither a mesh axis ({}) "
                        "nor the TensorCoreMesh axis \"{}\"",
                        names[0], axes_text(m), ctx.axis_name != nullptr ? *ctx.axis_name : ""));
    }
    int64_t inner = 1;
    std::vector<int> axes;
    for (const std::string& n : names) {
      const int a = axis_of(n);
      if (a < 0) {
        raise(ErrorKind::kUnknownAxis, op, where,
              fmt::format("the joint axis of the device id names \"{}\", which is not a mesh "
                          "axis ({})",
                          n, axes_text(m)));
      }
      axes.push_back(a);
      inner *= m.shape[static_cast<size_t>(a)];
    }
    if (names.size() > 1 && (value < 0 || value >= inner)) {
      raise(ErrorKind::kOutOfBounds, op, where,
            fmt::format("index {} on the joint axis (\"{}\") is outside 0..{}", value,
                        fmt::join(names, "\", \""), inner - 1));
    }
    for (int a : axes) {
      inner /= m.shape[static_cast<size_t>(a)];
      coords[static_cast<size_t>(a)] =
          names.size() > 1 ? static_cast<int>(value / inner % m.shape[static_cast<size_t>(a)])
                           : value;
      check_coordinate(coords[static_cast<size_t>(a)], m, static_cast<size_t>(a), op, where);
    }
  }
  t.device = m.logical(coords);
  return t;
}

void check_amount(int64_t v, const char* op, std::source_location where) {
  if (v >= 0 && v <= std::numeric_limits<int32_t>::max()) return;
  raise(ErrorKind::kInvalidArgument, op, where,
        fmt::format("inc={} is outside 0..{} (a TPU semaphore is a 32-bit count)", v,
                    std::numeric_limits<int32_t>::max()));
}

void validate_remote(const RawRef& src, const RawRef& dst, const char* op,
                     std::source_location where) {
  if (src.shape != dst.shape) {
    raise(ErrorKind::kShapeMismatch, op, where,
          fmt::format("source {} ref of shape {} and destination {} ref of shape {} differ; a "
                      "remote copy needs equal shapes (slice one side with .at(...))",
                      to_string(src.space), src.shape.to_string(), to_string(dst.space),
                      dst.shape.to_string()));
  }
}

}  // namespace

DeviceTarget resolve_device_id(const pl::DeviceId& id, pl::DeviceIdType type, const char* op,
                               std::source_location where) {
  const CoreContext& ctx = context_for(op, where);
  const DeviceContext& dev = device_of(ctx, op, where);
  const MeshInfo& m = *dev.mesh;
  DeviceTarget t;
  if (type == pl::DeviceIdType::LOGICAL) {
    if (id.form() != pl::DeviceId::Form::kInteger) {
      raise(ErrorKind::kInvalidArgument, op, where,
            "a LOGICAL device id is one integer (the row-major index over the mesh axes), not a "
            "tuple or a dict; give coordinates with pl::DeviceIdType::MESH");
    }
    const int v = id.coords()[0];
    if (v < 0 || v >= m.size) {
      raise(ErrorKind::kOutOfBounds, op, where,
            fmt::format("LOGICAL device id {} is outside 0..{} (the mesh of axes {} has {} "
                        "device{})",
                        v, m.size - 1, axes_text(m), m.size, m.size == 1 ? "" : "s"));
    }
    t.device = v;
    return t;
  }
  if (id.form() == pl::DeviceId::Form::kDict) return resolve_dict(ctx, id, op, where);
  const std::vector<int>& c = id.coords();
  if (c.size() != m.shape.size()) {
    raise(ErrorKind::kInvalidArgument, op, where,
          fmt::format("the MESH device id has {} coordinate{} but the mesh has {} ax{} ({}); give "
                      "one per axis (or a dict such as {{{{\"x\", i}}}}, or a LOGICAL id)",
                      c.size(), c.size() == 1 ? "" : "s", m.shape.size(),
                      m.shape.size() == 1 ? "is" : "es", axes_text(m)));
  }
  for (size_t a = 0; a < c.size(); ++a) check_coordinate(c[a], m, a, op, where);
  t.device = m.logical(c);
  return t;
}

void remote_copy_start(const RawRef& src, const RawRef& dst, SemaphoreCell* send_sem,
                       SemaphoreCell* recv_sem, DeviceTarget target, std::source_location made,
                       std::source_location where) {
  constexpr const char* op = "remote_copy.start";
  CoreContext& ctx = context_for(op, where);
  device_of(ctx, op, where);
  (void)own_slot(ctx, send_sem, op, where);  // this core's semaphore, or an error
  const int64_t recv_slot = own_slot(ctx, recv_sem, op, where);
  validate_remote(src, dst, op, where);
  if (target.core >= ctx.num_cores) {
    raise(ErrorKind::kOutOfBounds, op, where,
          fmt::format("core {} is outside the TensorCoreMesh of {} core{}", target.core,
                      ctx.num_cores, ctx.num_cores == 1 ? "" : "s"));
  }
  RemoteCopy copy;
  copy.src = src;
  copy.dst = dst;
  copy.send_sem = send_sem;
  copy.recv_slot = recv_slot;
  copy.target = target;
  copy.bytes = src.shape.size() * itemsize(src.dtype);
  copy.made = made;
  copy.where = where;
  flush_copies(ctx);
  settle_streams(ctx);
  ctx.engine->remote_dma_start(ctx, copy);
}

void remote_copy_wait(SemaphoreCell* sem, const RawRef& src, bool recv,
                      std::source_location where) {
  const char* op = recv ? "remote_copy.wait_recv" : "remote_copy.wait_send";
  CoreContext& ctx = context_for(op, where);
  const int64_t slot = own_slot(ctx, sem, op, where);
  WaitSite site{op, where,
                recv ? "bytes that never arrived: wait_recv needs remote copies of as many bytes "
                       "started towards this device's recv_sem (by the device whose right or left "
                       "neighbour this is)"
                     : "a copy that was never started: wait_send needs .start() of a remote copy "
                       "of as many bytes on this send_sem"};
  site.dma_src = &src;
  flush_copies(ctx);
  ctx.engine->remote_dma_wait(ctx, sem, slot, src.shape.size() * itemsize(src.dtype), site, recv);
}

void remote_semaphore_signal(SemaphoreCell* cell, const Shape& shape, SemaphoreKind kind,
                             int64_t inc, const pl::DeviceId& id, pl::DeviceIdType type,
                             std::optional<int> core_index, std::source_location where) {
  constexpr const char* op = "pl::semaphore_signal";
  CoreContext& ctx = context_for(op, where);
  check_single_semaphore(shape, kind, op, where);
  check_amount(inc, op, where);
  const int64_t slot = own_slot(ctx, cell, op, where);
  DeviceTarget t = resolve_device_id(id, type, op, where);
  if (core_index) {
    if (t.core >= 0) {
      raise(ErrorKind::kInvalidArgument, op, where,
            "the core is given twice: by the device id's TensorCoreMesh axis and by "
            "pl::core_index; give it once");
    }
    t.core = *core_index;
  }
  if (t.device == ctx.device->device) {
    // This device: the local signal (with the engine's books).
    semaphore_signal(cell, shape, kind, inc,
                     t.core >= 0 ? std::optional<int>(t.core) : std::nullopt, where);
    return;
  }
  if (t.core >= ctx.num_cores) {
    raise(ErrorKind::kOutOfBounds, op, where,
          fmt::format("core_index={} is outside 0..{}: the mesh axis \"{}\" has {} core{}", t.core,
                      ctx.num_cores - 1, ctx.axis_name != nullptr ? *ctx.axis_name : "",
                      ctx.num_cores, ctx.num_cores == 1 ? "" : "s"));
  }
  flush_copies(ctx);
  settle_streams(ctx);
  ctx.engine->remote_signal(ctx, t, slot, inc, where);
}

SemaphoreCell* barrier_semaphore(std::source_location where) {
  constexpr const char* op = "pltpu::get_barrier_semaphore";
  const CoreContext& ctx = context_for(op, where);
  const int id = ctx.launch->spec->collective_id;
  if (id < 0) {
    raise(ErrorKind::kInvalidArgument, op, where,
          fmt::format("kernel '{}' has no collective_id: the barrier semaphore is chosen by it; "
                      "pass pltpu::CompilerParams{{.collective_id = 0}} (0..{}) to the kernel, the "
                      "same id in kernels with the same communication pattern",
                      *ctx.kernel_name, kBarrierSemaphores - 1));
  }
  return &ctx.arena->semaphores()[first_barrier_slot() + id];
}

// ---- axes ------------------------------------------------------------------------------------

namespace {
std::string axes_known(const CoreContext* ctx, const DeviceContext* dev) {
  std::vector<std::string> names;
  if (ctx != nullptr && ctx->axis_name != nullptr) {
    names.push_back(fmt::format("\"{}\" (the TensorCoreMesh)", *ctx->axis_name));
  }
  if (dev != nullptr) {
    for (const std::string& n : dev->mesh->axis_names) {
      names.push_back(fmt::format("\"{}\" (the device mesh)", n));
    }
  }
  if (names.empty()) return "none";
  return fmt::format("{}", fmt::join(names, ", "));
}

// The index (`size` false) or extent of axis `name`.
int axis_lookup(std::string_view name, bool size, std::source_location where) {
  const char* op = size ? "lax::axis_size" : "lax::axis_index";
  const CoreContext* ctx = current_context();
  const DeviceContext* dev = current_device();
  if (ctx == nullptr && dev == nullptr) {
    raise(ErrorKind::kOutsideKernel, op, where,
          fmt::format("{}(\"{}\") was called outside a kernel body; it names the running core "
                      "(or device), so call it inside the body passed to pl::kernel (or inside "
                      "a function mapped by jax::shard_map)",
                      size ? "axis_size" : "axis_index", name));
  }
  // A named grid's axes (pl::grid({{"i", 4}})) come first, as Pallas binds them around the
  // body (pipeline.cc keeps the innermost grid's names).
  if (const int g = size ? grid_axis_size(name) : grid_axis_index(name); g >= 0) return g;
  if (ctx != nullptr && ctx->axis_name != nullptr && name == *ctx->axis_name) {
    return size ? ctx->num_cores : ctx->core;
  }
  if (dev != nullptr) {
    for (size_t a = 0; a < dev->mesh->axis_names.size(); ++a) {
      if (dev->mesh->axis_names[a] == name) return size ? dev->mesh->shape[a] : dev->coords[a];
    }
  }
  if (dev == nullptr) {
    raise(ErrorKind::kUnknownAxis, op, where,
          fmt::format("the mesh has no axis \"{}\"; its only axis is \"{}\" (the name given to "
                      "pltpu::TensorCoreMesh)",
                      name, ctx->axis_name == nullptr ? "" : *ctx->axis_name));
  }
  raise(ErrorKind::kUnknownAxis, op, where,
        fmt::format("the mesh has no axis \"{}\"; its axes are: {}", name, axes_known(ctx, dev)));
}
}  // namespace

int axis_index(std::string_view name, std::source_location where) {
  return axis_lookup(name, false, where);
}
int axis_size(std::string_view name, std::source_location where) {
  return axis_lookup(name, true, where);
}

// ---- the engine's defaults
// -----------------------------------------------------------------------

void Engine::remote_dma_start(CoreContext& ctx, const RemoteCopy& copy) {
  ctx.device->transport->put(ctx, copy);
  add_dma_bytes(ctx, copy.send_sem, copy.bytes);  // the source has been read
}

void Engine::remote_dma_wait(CoreContext& ctx, SemaphoreCell* sem, int64_t slot, int64_t bytes,
                             const WaitSite& site, bool /*recv*/) {
  block_until(ctx, *sem, slot, bytes, site);
}

void Engine::remote_signal(CoreContext& ctx, const DeviceTarget& target, int64_t slot, int64_t inc,
                           std::source_location where) {
  ctx.device->transport->signal(ctx, target, slot, inc, "pl::semaphore_signal", where);
}

}  // namespace tessera::detail

namespace tessera::pltpu {
void AsyncRemoteCopyDescriptor::already_started(std::source_location where) const {
  detail::raise(ErrorKind::kInvalidArgument, "remote_copy.start", where,
                fmt::format("this descriptor (made at {}) was started at {} and has not been "
                            "wait_send()-ed since; each .start() needs a .wait_send() (or "
                            ".wait()) before the next one (for a second copy in flight, make a "
                            "second descriptor)",
                            detail::format_location(made_), detail::format_location(started_at_)));
}
}  // namespace tessera::pltpu
