// File: tessera/device.h
//
// Devices: a mesh of devices with named axes, and `shard_map`, which runs one program (kernels,
// host code between them) on every device of the mesh with that device's shard of each array —
// `jax.make_mesh`, `jax.sharding.PartitionSpec` and `jax.shard_map` as Pallas' distributed
// kernels are called.
//
//   Python (JAX)                                       Tessera
//   mesh = jax.make_mesh((4,), ('x',))                 auto mesh = jax::make_mesh({4}, {"x"});
//   P = jax.sharding.PartitionSpec                     (tessera::P)
//   jax.shard_map(f, mesh=mesh, in_specs=P(None, 'x'), jax::shard_map(f, mesh, P(None, "x"),
//                 out_specs=P(None, 'x'))(x)                         P(None, "x"))(x)
//   lax.axis_index('x'), lax.axis_size('x')            lax::axis_index("x"), lax::axis_size("x")
//
//   auto right_permute = pl::pallas_call(right_permute_kernel, ...);   // an ordinary kernel
//   Array<float> y = jax::shard_map(right_permute, jax::make_mesh({4}, {"x"}),
//                                   P(None, "x"), P(None, "x"))(x);    // x: (8, 512)
//
// Devices. A kernel launched inside `f` runs on the calling device's cores (its
// `pltpu::TensorCoreMesh`) and may write other devices' memory with remote DMAs and signal their
// semaphores (remote_dma.h). Where the devices are is chosen when the program runs:
//   - in process (the default): every device is a group of threads of this process, with its own
//     cores and memory; `f` runs on every device at once, on its own thread;
//   - one device per MPI rank (`mpirun -np 4 ./app`, with the program linked to tessera::mpi):
//     this process is the device of its rank and `f` runs once, here; the mesh must have as many
//     devices as there are ranks.
// `TESSERA_TRANSPORT=inprocess` keeps a program launched by mpirun in process.
//
// Shards. `in_specs` has one PartitionSpec per argument of `f` (or one for all), `out_specs` one
// per output. In process, `shard_map(...)(x)` takes the global arrays, hands each device its
// shard (a copy) and joins the devices' outputs into global arrays; dimensions split over an axis
// must divide evenly. An output dimension not split over some mesh axis is taken from the
// devices at coordinate 0 of that axis (it is replicated: every device should hold the same).
// Under MPI the arrays are this rank's shards, in and out.
//
// Errors (UsageError): a mesh with a non-positive extent, empty or repeated axis names, or more
// than 256 devices; a spec that names an axis the mesh does not have, uses an axis twice, has
// more entries than the array has dimensions, or splits a dimension unevenly; a specs count that
// differs from the arguments or outputs. An error on any device stops every device (their waits
// raise kCancelled) and the first error is rethrown here.
#pragma once

#include <cstdint>
#include <initializer_list>
#include <optional>
#include <source_location>
#include <string>
#include <string_view>
#include <tuple>
#include <type_traits>
#include <utility>
#include <vector>

#include "tessera/array.h"
#include "tessera/detail/runtime.h"
#include "tessera/mesh.h"

namespace tessera {

/// `None` in a PartitionSpec: the dimension is not split.
struct NoneType {};
inline constexpr NoneType None{};

/// One dimension's entry of a PartitionSpec: None, one mesh axis ("x"), or several ({"x", "y"},
/// the first the major one).
class PartitionDim {
 public:
  PartitionDim(NoneType) {}  // NOLINT: implicit, as Python's None
  PartitionDim(const char* axis) : axes_{std::string(axis)} {}  // NOLINT
  PartitionDim(std::string axis) : axes_{std::move(axis)} {}    // NOLINT
  PartitionDim(std::initializer_list<std::string> axes) : axes_(axes) {}
  /// The mesh axes this dimension is split over (empty: not split).
  const std::vector<std::string>& axes() const noexcept { return axes_; }

 private:
  std::vector<std::string> axes_;
};

/// `jax.sharding.PartitionSpec`: per dimension of an array, the mesh axes it is split over.
/// Dimensions past the spec's entries are not split (`P("x")` on a 2-D array is `P("x", None)`).
class PartitionSpec {
 public:
  PartitionSpec() = default;                              // P(): nothing split (replicated)
  PartitionSpec(PartitionDim a) : dims_{std::move(a)} {}  // NOLINT
  PartitionSpec(PartitionDim a, PartitionDim b) : dims_{std::move(a), std::move(b)} {}
  PartitionSpec(PartitionDim a, PartitionDim b, PartitionDim c)
      : dims_{std::move(a), std::move(b), std::move(c)} {}
  PartitionSpec(PartitionDim a, PartitionDim b, PartitionDim c, PartitionDim d)
      : dims_{std::move(a), std::move(b), std::move(c), std::move(d)} {}
  explicit PartitionSpec(std::vector<PartitionDim> dims) : dims_(std::move(dims)) {}
  const std::vector<PartitionDim>& dims() const noexcept { return dims_; }
  /// "P(None, 'x')".
  std::string to_string() const;

 private:
  std::vector<PartitionDim> dims_;
};
/// `P = jax.sharding.PartitionSpec`.
using P = PartitionSpec;

/// The PartitionSpecs of shard_map's arguments or outputs: one spec, or a list
/// (`{P("x"), P()}`).
class PartitionSpecs {
 public:
  PartitionSpecs(PartitionSpec one) : specs_{std::move(one)}, broadcast_(true) {}  // NOLINT
  PartitionSpecs(std::initializer_list<PartitionSpec> specs) : specs_(specs) {}
  PartitionSpecs(std::vector<PartitionSpec> specs) : specs_(std::move(specs)) {}  // NOLINT
  const std::vector<PartitionSpec>& specs() const noexcept { return specs_; }
  /// True when made from a single spec (it then applies to every argument or output).
  bool broadcast() const noexcept { return broadcast_; }

 private:
  std::vector<PartitionSpec> specs_;
  bool broadcast_ = false;
};

/// `jax.sharding.Mesh`: devices arranged in a grid with named axes, row-major (the last axis
/// varies fastest; a device's LOGICAL id is its row-major index).
class Mesh {
 public:
  /// A mesh of `shape` devices (each extent >= 1, at most 256 devices in all) with one distinct,
  /// non-empty name per axis. Throws UsageError otherwise.
  Mesh(std::vector<int> shape, std::vector<std::string> axis_names,
       std::source_location where = std::source_location::current());
  const std::vector<int>& shape() const noexcept { return shape_; }
  const std::vector<std::string>& axis_names() const noexcept { return axis_names_; }
  /// The number of devices.
  int size() const noexcept { return size_; }
  /// The extent of axis `name`; throws UsageError (kUnknownAxis) for a name the mesh lacks.
  int axis_size(std::string_view name,
                std::source_location where = std::source_location::current()) const;
  /// The coordinates of device `id` (its row-major index).
  std::vector<int> coords(int id) const;
  const std::source_location& where() const noexcept { return where_; }

  /// The same mesh, made of in-process devices even when the program runs under mpirun (for
  /// comparing the two transports in one job, as `tessera bench allreduce` does).
  Mesh in_process() const {
    Mesh m = *this;
    m.in_process_ = true;
    return m;
  }
  bool is_in_process() const noexcept { return in_process_; }

 private:
  std::vector<int> shape_;
  std::vector<std::string> axis_names_;
  int size_ = 1;
  std::source_location where_;
  bool in_process_ = false;
};

namespace detail {
/// Runs job(device) for every device of `mesh` at once: in process each on its device's thread
/// (with its cores), under MPI once, on this thread, for this rank's device. Returns when every
/// device has finished; rethrows the first error (the others' waits were cancelled). Then checks
/// that every barrier semaphore of every device is zero (kSemaphoreLeak otherwise).
void run_on_devices(const Mesh& mesh, FunctionRef<void(int)> job, std::source_location where);
/// True when `mesh`'s devices are MPI ranks (this process being one of them).
bool mesh_is_distributed(const Mesh& mesh, std::source_location where);
/// The device this process is under MPI (its rank).
int distributed_device();
/// Checks the spec counts of a shard_map call (`n` arguments or outputs).
void check_spec_count(const PartitionSpecs& specs, size_t n, const char* what,
                      std::source_location where);
const PartitionSpec& spec_at(const PartitionSpecs& specs, size_t i);
/// The shard of device `device` of an array of `global` shape split by `spec`: its shape and its
/// first element's coordinates. Throws UsageError for a spec the array or mesh cannot take.
void shard_region(const Mesh& mesh, const PartitionSpec& spec, const Shape& global, int device,
                  Shape& local, std::vector<int64_t>& start, const char* what, size_t index,
                  std::source_location where);
/// The global shape of an output whose shards have `local` shape.
Shape global_shape(const Mesh& mesh, const PartitionSpec& spec, const Shape& local, size_t index,
                   std::source_location where);
/// Whether device `device` holds the part of an output that `spec` says is joined from it (its
/// coordinate is 0 on every axis the spec does not split over).
bool joins_from(const Mesh& mesh, const PartitionSpec& spec, int device);
/// Copies the box of `local` shape at `start` in the row-major array `global` into the row-major
/// `shard` (`to_global` false), or back (`to_global` true).
void copy_shard(const void* global_or_shard, void* shard_or_global, const Shape& global,
                const Shape& local, const std::vector<int64_t>& start, int64_t itemsize,
                bool to_global);

template <class T>
Array<T> take_shard(const Mesh& mesh, const PartitionSpec& spec, const Array<T>& x, int device,
                    size_t index, std::source_location where) {
  Shape local;
  std::vector<int64_t> start;
  shard_region(mesh, spec, x.shape(), device, local, start, "argument", index, where);
  Array<T> shard(Uninitialized{}, local, where, "a device's shard");
  copy_shard(x.data(), shard.data(), x.shape(), local, start, int64_t{sizeof(T)}, false);
  return shard;
}

template <class T>
Array<T> join_shards(const Mesh& mesh, const PartitionSpec& spec,
                     const std::vector<Array<T>*>& shards, size_t index,
                     std::source_location where) {
  const Shape global = global_shape(mesh, spec, shards[0]->shape(), index, where);
  Array<T> out(Uninitialized{}, global, where, "shard_map's output");
  for (int d = 0; d < mesh.size(); ++d) {
    if (!joins_from(mesh, spec, d)) continue;
    Shape local;
    std::vector<int64_t> start;
    shard_region(mesh, spec, global, d, local, start, "output", index, where);
    if (shards[static_cast<size_t>(d)]->shape() != local) {
      shard_region(mesh, spec, shards[static_cast<size_t>(d)]->shape(), -1, local, start, "output",
                   index, where);  // raises: devices returned different shapes
    }
    copy_shard(shards[static_cast<size_t>(d)]->data(), out.data(), global, local, start,
               int64_t{sizeof(T)}, true);
  }
  return out;
}

template <class R>
struct ShardResult {
  static constexpr bool ok = false;
  static constexpr bool array = false;
  static constexpr size_t count = 0;
};
template <class T>
struct ShardResult<Array<T>> {
  static constexpr bool ok = true;
  static constexpr bool array = true;
  static constexpr size_t count = 1;
};
template <class... Ts>
struct ShardResult<std::tuple<Array<Ts>...>> {
  static constexpr bool ok = true;
  static constexpr bool array = false;
  static constexpr size_t count = sizeof...(Ts);
};
template <>
struct ShardResult<void> {
  static constexpr bool ok = true;
  static constexpr bool array = false;
  static constexpr size_t count = 0;
};
}  // namespace detail

/// A function mapped over the devices of a mesh: made by `shard_map`, called with Arrays.
template <class F>
class ShardMapped {
 public:
  ShardMapped(F f, Mesh mesh, PartitionSpecs in_specs, PartitionSpecs out_specs,
              std::source_location where)
      : f_(std::move(f)),
        mesh_(std::move(mesh)),
        in_(std::move(in_specs)),
        out_(std::move(out_specs)),
        where_(where) {}

  /// Runs f on every device (see the file comment) and returns its outputs: an Array, a tuple of
  /// them, or nothing, as f does.
  template <class... Ts>
  auto operator()(const Array<Ts>&... xs) const {
    using R = std::invoke_result_t<const F&, const Array<Ts>&...>;
    static_assert(detail::ShardResult<R>::ok,
                  "tessera: the function given to shard_map must return an Array, a std::tuple "
                  "of Arrays, or nothing");
    detail::check_spec_count(in_, sizeof...(Ts), "in_specs", where_);
    detail::check_spec_count(out_, detail::ShardResult<R>::count, "out_specs", where_);
    if (detail::mesh_is_distributed(mesh_, where_)) return run_distributed<R>(xs...);
    std::vector<std::optional<Result<R>>> results(static_cast<size_t>(mesh_.size()));
    detail::run_on_devices(
        mesh_,
        [&](int d) {
          results[static_cast<size_t>(d)].emplace(call(d, std::index_sequence_for<Ts...>{}, xs...));
        },
        where_);
    return join<R>(results);
  }

  const Mesh& mesh() const noexcept { return mesh_; }

 private:
  // f's result, with void as an empty tuple.
  template <class R>
  using Result = std::conditional_t<std::is_void_v<R>, std::tuple<>, R>;

  template <size_t... I, class... Ts>
  auto call([[maybe_unused]] int d, std::index_sequence<I...>, const Array<Ts>&... xs) const {
    using R = std::invoke_result_t<const F&, const Array<Ts>&...>;
    auto shards =
        std::make_tuple(detail::take_shard(mesh_, detail::spec_at(in_, I), xs, d, I, where_)...);
    if constexpr (std::is_void_v<R>) {
      f_(std::get<I>(shards)...);
      return std::tuple<>{};
    } else {
      return f_(std::get<I>(shards)...);
    }
  }

  template <class R, class... Ts>
  R run_distributed(const Array<Ts>&... xs) const {
    std::optional<Result<R>> result;
    detail::run_on_devices(
        mesh_,
        [&](int) {
          if constexpr (std::is_void_v<R>) {
            f_(xs...);
            result.emplace();
          } else {
            result.emplace(f_(xs...));
          }
        },
        where_);
    if constexpr (!std::is_void_v<R>) return std::move(*result);
  }

  template <class R>
  R join(std::vector<std::optional<Result<R>>>& results) const {
    if constexpr (std::is_void_v<R>) {
      return;
    } else if constexpr (detail::ShardResult<R>::array) {
      std::vector<R*> shards;
      for (auto& r : results) shards.push_back(&*r);
      return detail::join_shards(mesh_, detail::spec_at(out_, 0), shards, 0, where_);
    } else {
      return join_tuple<R>(results, std::make_index_sequence<std::tuple_size_v<R>>{});
    }
  }

  template <class R, size_t... I>
  R join_tuple(std::vector<std::optional<R>>& results, std::index_sequence<I...>) const {
    auto one = [&](auto index) {
      constexpr size_t k = decltype(index)::value;
      std::vector<std::tuple_element_t<k, R>*> shards;
      for (auto& r : results) shards.push_back(&std::get<k>(*r));
      return detail::join_shards(mesh_, detail::spec_at(out_, k), shards, k, where_);
    };
    return R{one(std::integral_constant<size_t, I>{})...};
  }

  F f_;
  Mesh mesh_;
  PartitionSpecs in_;
  PartitionSpecs out_;
  std::source_location where_;
};

/// `jax.shard_map(f, mesh=mesh, in_specs=..., out_specs=...)`: f run on every device of `mesh`
/// with its shards (see the file comment). `f` is any callable taking the shards as
/// `const Array<T>&` (a `pl::kernel`, a `pl::pallas_call`, a lambda calling several).
template <class F>
ShardMapped<std::decay_t<F>> shard_map(
    F&& f, Mesh mesh, PartitionSpecs in_specs, PartitionSpecs out_specs,
    std::source_location where = std::source_location::current()) {
  return ShardMapped<std::decay_t<F>>(std::forward<F>(f), std::move(mesh), std::move(in_specs),
                                      std::move(out_specs), where);
}

namespace jax {
using tessera::Mesh;
using tessera::shard_map;
/// `jax.make_mesh(shape, axis_names)`.
inline Mesh make_mesh(std::vector<int> shape, std::vector<std::string> axis_names,
                      std::source_location where = std::source_location::current()) {
  return Mesh(std::move(shape), std::move(axis_names), where);
}
/// `jax.device_count()`: the devices a program may use: the MPI ranks when it runs under
/// mpirun (linked to tessera::mpi), else TESSERA_DEVICES, else 1.
int device_count();
/// `jax.local_device_count()`: the devices of this process (1 under MPI).
int local_device_count();
/// `jax.process_index()` / `jax.process_count()`: this process's MPI rank and the number of
/// ranks (0 and 1 without MPI).
int process_index();
int process_count();
namespace sharding {
using tessera::Mesh;
using tessera::PartitionSpec;
}  // namespace sharding
}  // namespace jax

}  // namespace tessera
