// Device meshes: tessera::Mesh and PartitionSpec, the shards of shard_map, the threads that run a
// program on every in-process device, and a launch's part in its mesh (DeviceLaunchScope).
#include "runtime/devices.h"

#include <fmt/format.h>

#include <algorithm>
#include <atomic>
#include <condition_variable>
#include <cstring>
#include <mutex>
#include <thread>

#if defined(__linux__)
#include <sched.h>
#endif

#include "core/input_checks.h"
#include "core/messages.h"
#include "runtime/context.h"
#include "runtime/core_pool.h"
#include "runtime/distributed.h"
#include "runtime/engine.h"
#include "runtime/transport_inprocess.h"
#include "tessera/device.h"
#include "tessera/error.h"

namespace tessera {

namespace {
constexpr int kMaxDevices = 256;
}  // namespace

Mesh::Mesh(std::vector<int> shape, std::vector<std::string> axis_names, std::source_location where)
    : shape_(std::move(shape)), axis_names_(std::move(axis_names)), where_(where) {
  constexpr const char* op = "jax::make_mesh";
  if (shape_.size() != axis_names_.size() || shape_.empty()) {
    detail::raise(ErrorKind::kInvalidArgument, op, where,
                  fmt::format("the mesh has {} extents and {} axis names; give one name per axis "
                              "(e.g. jax::make_mesh({{4}}, {{\"x\"}}))",
                              shape_.size(), axis_names_.size()));
  }
  int64_t size = 1;
  for (size_t a = 0; a < shape_.size(); ++a) {
    if (axis_names_[a].empty()) {
      detail::raise(ErrorKind::kInvalidArgument, op, where,
                    fmt::format("axis {} has an empty name; name every mesh axis", a));
    }
    for (size_t b = 0; b < a; ++b) {
      if (axis_names_[a] == axis_names_[b]) {
        detail::raise(ErrorKind::kInvalidArgument, op, where,
                      fmt::format("the axis name \"{}\" is used twice; mesh axes need distinct "
                                  "names",
                                  axis_names_[a]));
      }
    }
    if (shape_[a] < 1) {
      detail::raise(ErrorKind::kInvalidArgument, op, where,
                    fmt::format("axis \"{}\" has extent {}; every axis needs at least 1 device",
                                axis_names_[a], shape_[a]));
    }
    size *= shape_[a];
    if (size > kMaxDevices) {
      detail::raise(
          ErrorKind::kInvalidArgument, op, where,
          fmt::format("the mesh {} has more than {} devices; use a smaller mesh",
                      Shape(std::vector<int64_t>(shape_.begin(), shape_.end())).to_string(),
                      kMaxDevices));
    }
  }
  size_ = static_cast<int>(size);
}

int Mesh::axis_size(std::string_view name, std::source_location where) const {
  for (size_t a = 0; a < axis_names_.size(); ++a) {
    if (axis_names_[a] == name) return shape_[a];
  }
  detail::raise(ErrorKind::kUnknownAxis, "Mesh.axis_size", where,
                fmt::format("the mesh has no axis \"{}\"; its axes are \"{}\"", name,
                            fmt::join(axis_names_, "\", \"")));
}

std::vector<int> Mesh::coords(int id) const {
  std::vector<int> c(shape_.size());
  for (size_t a = shape_.size(); a-- > 0;) {
    c[a] = id % shape_[a];
    id /= shape_[a];
  }
  return c;
}

std::string PartitionSpec::to_string() const {
  std::vector<std::string> parts;
  for (const PartitionDim& d : dims_) {
    if (d.axes().empty()) {
      parts.emplace_back("None");
    } else if (d.axes().size() == 1) {
      parts.push_back(fmt::format("'{}'", d.axes()[0]));
    } else {
      parts.push_back(fmt::format("('{}')", fmt::join(d.axes(), "', '")));
    }
  }
  return fmt::format("P({})", fmt::join(parts, ", "));
}

namespace detail {

std::vector<int> MeshInfo::coords(int id) const {
  std::vector<int> c(shape.size());
  for (size_t a = shape.size(); a-- > 0;) {
    c[a] = id % shape[a];
    id /= shape[a];
  }
  return c;
}

int MeshInfo::logical(const std::vector<int>& c) const {
  int id = 0;
  for (size_t a = 0; a < shape.size(); ++a) id = id * shape[a] + c[a];
  return id;
}

std::string MeshInfo::name(int id) const {
  if (shape.size() == 1) return std::to_string(id);
  return fmt::format("({})", fmt::join(coords(id), ", "));
}

int64_t first_barrier_slot() noexcept { return kSemaphoresPerCore - kBarrierSemaphores; }

std::string barrier_semaphore_name(int64_t slot) {
  if (slot < first_barrier_slot() || slot >= kSemaphoresPerCore) return {};
  return fmt::format("the barrier semaphore of collective_id {}", slot - first_barrier_slot());
}

// ---- shards ------------------------------------------------------------------------------------

void check_spec_count(const PartitionSpecs& specs, size_t n, const char* what,
                      std::source_location where) {
  if (specs.broadcast() || specs.specs().size() == n) return;
  raise(ErrorKind::kInvalidArgument, "jax::shard_map", where,
        fmt::format("{} has {} PartitionSpec{} but the function has {} {}; give one per {} (or a "
                    "single one for all)",
                    what, specs.specs().size(), specs.specs().size() == 1 ? "" : "s", n,
                    std::strcmp(what, "in_specs") == 0 ? "arguments" : "outputs",
                    std::strcmp(what, "in_specs") == 0 ? "argument" : "output"));
}

const PartitionSpec& spec_at(const PartitionSpecs& specs, size_t i) {
  return specs.broadcast() ? specs.specs()[0] : specs.specs()[i];
}

namespace {
// Per array dimension: the mesh axes it is split over (validated), and how many pieces.
struct SpecAxes {
  std::vector<std::vector<int>> axes;  // per dimension, mesh axis indices, major first
  std::vector<int64_t> pieces;
};

SpecAxes spec_axes(const Mesh& mesh, const PartitionSpec& spec, int rank, const char* what,
                   size_t index, std::source_location where) {
  constexpr const char* op = "jax::shard_map";
  const auto& dims = spec.dims();
  if (static_cast<int>(dims.size()) > rank) {
    raise(ErrorKind::kInvalidArgument, op, where,
          fmt::format("{} {}'s spec {} has {} entries but the array has {} dimension{}; give at "
                      "most one entry per dimension",
                      what, index, spec.to_string(), dims.size(), rank, rank == 1 ? "" : "s"));
  }
  SpecAxes r;
  r.axes.resize(static_cast<size_t>(rank));
  r.pieces.assign(static_cast<size_t>(rank), 1);
  std::vector<bool> used(mesh.shape().size(), false);
  for (size_t d = 0; d < dims.size(); ++d) {
    for (const std::string& name : dims[d].axes()) {
      const auto it = std::find(mesh.axis_names().begin(), mesh.axis_names().end(), name);
      if (it == mesh.axis_names().end()) {
        raise(ErrorKind::kUnknownAxis, op, where,
              fmt::format("{} {}'s spec {} names the axis \"{}\", which the mesh (axes \"{}\") "
                          "does not have",
                          what, index, spec.to_string(), name,
                          fmt::join(mesh.axis_names(), "\", \"")));
      }
      const auto a = static_cast<size_t>(it - mesh.axis_names().begin());
      if (used[a]) {
        raise(ErrorKind::kInvalidArgument, op, where,
              fmt::format("{} {}'s spec {} uses the axis \"{}\" twice; a mesh axis splits at "
                          "most one dimension",
                          what, index, spec.to_string(), name));
      }
      used[a] = true;
      r.axes[d].push_back(static_cast<int>(a));
      r.pieces[d] *= mesh.shape()[a];
    }
  }
  return r;
}

// Device `device`'s index among the pieces of dimension `d`.
int64_t piece_of(const Mesh& mesh, const SpecAxes& s, size_t d, const std::vector<int>& coords) {
  int64_t piece = 0;
  for (int a : s.axes[d]) piece = piece * mesh.shape()[static_cast<size_t>(a)] + coords[a];
  return piece;
}
}  // namespace

void shard_region(const Mesh& mesh, const PartitionSpec& spec, const Shape& global, int device,
                  Shape& local, std::vector<int64_t>& start, const char* what, size_t index,
                  std::source_location where) {
  if (device < 0) {
    raise(ErrorKind::kShapeMismatch, "jax::shard_map", where,
          fmt::format("the devices returned output {} in different shapes (one of them {}); every "
                      "device's shard of an output must have the same shape",
                      index, global.to_string()));
  }
  const SpecAxes s = spec_axes(mesh, spec, global.rank(), what, index, where);
  const std::vector<int> coords = mesh.coords(device);
  std::vector<int64_t> dims(static_cast<size_t>(global.rank()));
  start.assign(static_cast<size_t>(global.rank()), 0);
  for (int d = 0; d < global.rank(); ++d) {
    const int64_t n = s.pieces[static_cast<size_t>(d)];
    if (global[d] % n != 0) {
      raise(ErrorKind::kShapeMismatch, "jax::shard_map", where,
            fmt::format("{} {} of shape {} is split by {} into {} pieces on dimension {}, whose "
                        "extent {} is not a multiple of {}; pad the array or split another "
                        "dimension",
                        what, index, global.to_string(), spec.to_string(), n, d, global[d], n));
    }
    dims[static_cast<size_t>(d)] = global[d] / n;
    start[static_cast<size_t>(d)] =
        piece_of(mesh, s, static_cast<size_t>(d), coords) * dims[static_cast<size_t>(d)];
  }
  local = Shape(dims);
}

Shape global_shape(const Mesh& mesh, const PartitionSpec& spec, const Shape& local, size_t index,
                   std::source_location where) {
  const SpecAxes s = spec_axes(mesh, spec, local.rank(), "output", index, where);
  std::vector<int64_t> dims(static_cast<size_t>(local.rank()));
  for (int d = 0; d < local.rank(); ++d) {
    dims[static_cast<size_t>(d)] = local[d] * s.pieces[static_cast<size_t>(d)];
  }
  return Shape(dims);
}

bool joins_from(const Mesh& mesh, const PartitionSpec& spec, int device) {
  std::vector<bool> split(mesh.shape().size(), false);
  for (const PartitionDim& d : spec.dims()) {
    for (const std::string& name : d.axes()) {
      const auto it = std::find(mesh.axis_names().begin(), mesh.axis_names().end(), name);
      if (it != mesh.axis_names().end())
        split[static_cast<size_t>(it - mesh.axis_names().begin())] = true;
    }
  }
  const std::vector<int> coords = mesh.coords(device);
  for (size_t a = 0; a < split.size(); ++a) {
    if (!split[a] && coords[a] != 0) return false;
  }
  return true;
}

void copy_shard(const void* from, void* to, const Shape& global, const Shape& local,
                const std::vector<int64_t>& start, int64_t itemsize, bool to_global) {
  const int rank = global.rank();
  if (local.size() == 0) return;
  if (rank == 0) {
    std::memcpy(to, from, static_cast<size_t>(itemsize));
    return;
  }
  // Rows of the innermost dimension, each one memcpy; the outer dimensions walked as a counter.
  std::vector<int64_t> gstride(static_cast<size_t>(rank), 1);
  for (int d = rank - 2; d >= 0; --d)
    gstride[static_cast<size_t>(d)] = gstride[d + 1] * global[d + 1];
  const int64_t row = local[rank - 1] * itemsize;
  const int64_t rows = local.size() / local[rank - 1];
  std::vector<int64_t> idx(static_cast<size_t>(rank), 0);
  const auto* src = static_cast<const std::byte*>(from);
  auto* dst = static_cast<std::byte*>(to);
  for (int64_t r = 0; r < rows; ++r) {
    int64_t g = 0;
    for (int d = 0; d < rank; ++d)
      g += (start[static_cast<size_t>(d)] + idx[static_cast<size_t>(d)]) *
           gstride[static_cast<size_t>(d)];
    const int64_t l = r * local[rank - 1];
    if (to_global) {
      std::memcpy(dst + g * itemsize, src + l * itemsize, static_cast<size_t>(row));
    } else {
      std::memcpy(dst + l * itemsize, src + g * itemsize, static_cast<size_t>(row));
    }
    for (int d = rank - 2; d >= 0; --d) {
      if (++idx[static_cast<size_t>(d)] < local[d]) break;
      idx[static_cast<size_t>(d)] = 0;
    }
  }
}

// ---- running a program on every device ---------------------------------------------------------

namespace {
thread_local DeviceContext* t_device = nullptr;

// Persistent threads for in-process devices 1.. (device 0 is the caller's thread): a program
// mapped over a mesh runs device d's part on thread d, whose current core pool is device d's.
class DeviceThreads {
 public:
  static DeviceThreads& instance() {
    static DeviceThreads* t = new DeviceThreads();  // never destroyed: threads sleep at exit
    return *t;
  }

  // Runs job(d) for d in [0, n): 0 here, the others on their threads; returns when all have.
  void run(int n, FunctionRef<void(int)> job) {
    std::unique_lock<std::mutex> lock(mu_);
    while (static_cast<int>(threads_.size()) + 1 < n) {
      const int d = static_cast<int>(threads_.size()) + 1;
      threads_.emplace_back([this, d] { main(d); });
    }
    job_ = job;
    pending_ = n - 1;
    active_ = n;
#if defined(__linux__)
    launcher_cpu_ = CorePool::current().spinning() ? ::sched_getcpu() : -1;
#endif
    ++generation_;
    lock.unlock();
    cv_.notify_all();
    job(0);
    lock.lock();
    done_.wait(lock, [&] { return pending_ == 0; });
  }

 private:
  void main(int d) {
    CorePool::set_current(&CorePool::for_device(d));
#if defined(__linux__)
    cpu_set_t allowed;
    if (::sched_getaffinity(0, sizeof allowed, &allowed) != 0) CPU_ZERO(&allowed);
#endif
    uint64_t seen = 0;
    std::unique_lock<std::mutex> lock(mu_);
    for (;;) {
      cv_.wait(lock, [&] { return generation_ != seen; });
      seen = generation_;
      if (d >= active_) continue;
      const FunctionRef<void(int)> job = job_;
      [[maybe_unused]] const int launcher_cpu = launcher_cpu_;
      lock.unlock();
#if defined(__linux__)
      // The scheduler tends to wake a thread beside its waker, device 0's thread here: device d
      // moves off that CPU (spread_out) while the process has no more threads than CPUs. Why
      // devices must not share a CPU, and the same move at each launch:
      // InProcessTransport::keep_apart (transport_inprocess.cc).
      (void)spread_out(launcher_cpu, d, allowed);
#endif
      job(d);
      lock.lock();
      if (--pending_ == 0) done_.notify_all();
    }
  }

  std::mutex mu_;
  std::condition_variable cv_;
  std::condition_variable done_;
  std::vector<std::thread> threads_;
  FunctionRef<void(int)> job_;
  int launcher_cpu_ = -1;  // the CPU that started the running program (-1: none to avoid)
  uint64_t generation_ = 0;
  int pending_ = 0;
  int active_ = 0;
};

// Programs mapped over meshes run one at a time (they share the device threads).
std::mutex g_program_mu;

}  // namespace

MeshInfo mesh_info(const Mesh& mesh) {
  MeshInfo m;
  m.axis_names = mesh.axis_names();
  m.shape = mesh.shape();
  m.size = mesh.size();
  return m;
}

void check_barrier_semaphores(const MeshInfo& mesh, int device, CorePool& pool,
                              std::exception_ptr& error, std::source_location where) {
  // Barrier semaphores outlive kernels, so no kernel's exit check covers them: they are checked
  // (and cleared, for the next program) when the program ends.
  for (int c = 0;; ++c) {
    CoreArena* arena = pool.arena_if_made(c);
    if (arena == nullptr) break;
    for (int64_t s = first_barrier_slot(); s < kSemaphoresPerCore; ++s) {
      const int64_t v = arena->semaphores()[s].exchange(0);
      if (v == 0 || error) continue;
      try {
        raise(ErrorKind::kSemaphoreLeak, "jax::shard_map", where,
              fmt::format("device {} core {}: {} holds {} when the program ends; barrier "
                          "semaphores outlive kernels but must be 0 when the devices stop: each "
                          "pl::semaphore_signal on it needs a matching pl::semaphore_wait",
                          mesh.name(device), c, barrier_semaphore_name(s), v));
      } catch (...) {
        error = std::current_exception();
      }
    }
  }
}

void check_never_waited(Transport& transport, std::exception_ptr& error) {
  // Remote copies that a checked kernel left in flight on semaphores the pallas_call returned:
  // the program has ended, so no later call will wait for them.
  const std::vector<Transport::Carried> left = transport.never_waited();
  if (left.empty() || error) return;
  std::string more;
  if (left.size() > 1) {
    more = fmt::format(" (and {} more, the next: {})", left.size() - 1, left[1].what);
  }
  try {
    raise(ErrorKind::kSemaphoreLeak, "remote_copy.start", left[0].started,
          fmt::format("the program ends with {}{}; every remote copy needs a wait_send on its "
                      "sender and a wait_recv on its receiver, in the kernel that starts it or "
                      "in a later call that takes the semaphore the pallas_call returned",
                      left[0].what, more));
  } catch (...) {
    error = std::current_exception();
  }
}

void run_as_device(Transport& transport, int device, FunctionRef<void(int)> job,
                   std::exception_ptr& error) {
  DeviceContext dev;
  dev.transport = &transport;
  dev.mesh = &transport.mesh();
  dev.device = device;
  dev.coords = transport.mesh().coords(device);
  t_device = &dev;
  try {
    job(device);
  } catch (...) {
    error = std::current_exception();
    transport.fail(device, error);
  }
  transport.finished(device);
  t_device = nullptr;
}

DeviceContext* current_device() noexcept {
  if (const CoreContext* ctx = current_context(); ctx != nullptr) return ctx->device;
  return t_device;
}

void run_on_devices(const Mesh& mesh, FunctionRef<void(int)> job, std::source_location where) {
  if (current_device() != nullptr || in_kernel()) {
    raise(ErrorKind::kInvalidArgument, "jax::shard_map", where,
          "shard_map was called from a program already running on a device mesh (or a kernel); "
          "mapped programs cannot nest");
  }
  std::lock_guard<std::mutex> program(g_program_mu);
  if (mesh_is_distributed(mesh, where)) {
    distributed_runtime()->run_program(mesh, job, where);
    return;
  }
  const MeshInfo info = mesh_info(mesh);
  InProcessTransport transport(info);
  std::vector<std::exception_ptr> errors(static_cast<size_t>(info.size));
  DeviceThreads::instance().run(
      info.size, [&](int d) { run_as_device(transport, d, job, errors[static_cast<size_t>(d)]); });
  std::exception_ptr error = transport.failure();
  for (const std::exception_ptr& e : errors) {
    if (!error && e) error = e;
  }
  for (int d = 0; d < info.size; ++d) {
    check_barrier_semaphores(info, d, CorePool::for_device(d), error, where);
  }
  check_never_waited(transport, error);
  if (error) std::rethrow_exception(error);
}

// ---- a launch on a device
// ------------------------------------------------------------------------

DeviceLaunchScope::DeviceLaunchScope(const LaunchSpec& spec, LaunchState& state,
                                     LaunchBuffers buffers) {
  DeviceContext* dev = t_device;
  if (dev == nullptr) return;
  device_ = dev;
  launch_.seq = ++dev->launches;
  launch_.spec = &spec;
  launch_.state = &state;
  launch_.pool = &CorePool::current();
  launch_.pool->reserve(spec.num_cores);  // the others may reach these cores once published
  buffers(launch_.buffers);
}

void DeviceLaunchScope::enter() {
  if (device_ == nullptr) return;
  device_->launch = &launch_;
  const LaunchSpec& spec = *launch_.spec;
  const bool barrier = spec.collective_id < 0 && !spec.skip_device_barrier;
  try {
    device_->transport->enter(device_->device, launch_, barrier);
  } catch (...) {
    left_ = true;  // enter() withdrew the launch
    device_->launch = nullptr;
    throw;
  }
}

DeviceLaunchScope::~DeviceLaunchScope() { leave(); }

void DeviceLaunchScope::core_failed(std::exception_ptr error) noexcept {
  if (device_ != nullptr) device_->transport->fail(device_->device, std::move(error));
}

void DeviceLaunchScope::leave() noexcept {
  if (device_ == nullptr || left_) return;
  left_ = true;
  device_->transport->leave(device_->device, launch_);
  device_->launch = nullptr;
}

void mesh_bodies_done(CoreContext& ctx) {
  if (ctx.device == nullptr || ctx.device->mesh->size == 1) return;
  Transport& t = *ctx.device->transport;
  ctx.engine->body_done(ctx);
  t.bodies_done(ctx);
}

// ---- axes
// ----------------------------------------------------------------------------------------

bool device_axis(std::string_view name, int& index, int& size) {
  const DeviceContext* dev = current_device();
  if (dev == nullptr) return false;
  for (size_t a = 0; a < dev->mesh->axis_names.size(); ++a) {
    if (dev->mesh->axis_names[a] == name) {
      index = dev->coords[a];
      size = dev->mesh->shape[a];
      return true;
    }
  }
  return false;
}

DistributedRuntime::~DistributedRuntime() = default;

namespace {
std::atomic<DistributedRuntime*> g_distributed{nullptr};
}  // namespace

DistributedRuntime* distributed_runtime() noexcept {
  return g_distributed.load(std::memory_order_acquire);
}
void register_distributed_runtime(DistributedRuntime* runtime) noexcept {
  g_distributed.store(runtime, std::memory_order_release);
}

int default_device_count() {
  if (DistributedRuntime* d = distributed_runtime(); d != nullptr && d->active()) return d->size();
  static EnvCached<int> cached;
  return cached.get([] {
    return static_cast<int>(env_integer("TESSERA_DEVICES", 1, kMaxDevices, "a device count",
                                        "jax::device_count", std::source_location::current())
                                .value_or(1));
  });
}

bool mesh_is_distributed(const Mesh& mesh, std::source_location /*where*/) {
  if (mesh.is_in_process()) return false;
  DistributedRuntime* d = distributed_runtime();
  return d != nullptr && d->active();
}

int distributed_device() {
  DistributedRuntime* d = distributed_runtime();
  return d != nullptr && d->active() ? d->rank() : 0;
}

}  // namespace detail

namespace jax {
int device_count() { return detail::default_device_count(); }
int local_device_count() {
  detail::DistributedRuntime* d = detail::distributed_runtime();
  return d != nullptr && d->active() ? 1 : detail::default_device_count();
}
int process_index() {
  detail::DistributedRuntime* d = detail::distributed_runtime();
  return d != nullptr && d->active() ? d->rank() : 0;
}
int process_count() {
  detail::DistributedRuntime* d = detail::distributed_runtime();
  return d != nullptr && d->active() ? d->size() : 1;
}
}  // namespace jax

}  // namespace tessera
