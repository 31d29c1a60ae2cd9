// Run by ctest under mpirun (label mpi): a remote copy on semaphores a pallas_call returns (so
// that it could stay in flight into a later call, docs/devices.md) is refused across MPI ranks,
// natively and checked, with a message that names the rule and the ways out; the same mesh run in
// process (mesh.in_process()) takes it.
#include <tessera/tessera.h>

#include <iostream>
#include <optional>
#include <string>

namespace {
using namespace tessera;

Array<float> shifted(const Mesh& mesh, std::optional<pltpu::InterpretParams> checked) {
  auto copy_start = [&](const Array<float>& x) {
    auto body = [](pltpu::AnyRef<const float> x_ref, pltpu::AnyRef<float>,
                   pltpu::AnyRef<float> o_ref, pltpu::DmaSemaphoreRef send,
                   pltpu::DmaSemaphoreRef recv) {
      const int n = lax::axis_size("x");
      pltpu::make_async_remote_copy(x_ref, o_ref, send, recv, (lax::axis_index("x") + 1) % n)
          .start();
    };
    auto options = [&](auto... extra) {
      return pl::pallas_call(
          body,
          pl::out_shape(ShapeDtypeStruct<float>{x.shape()}, ShapeDtypeStruct<float>{x.shape()},
                        pltpu::SemaphoreType::DMA, pltpu::SemaphoreType::DMA),
          pl::in_specs(pl::BlockSpec(pl::ANY)),
          pl::out_specs(pl::BlockSpec(pl::ANY), pl::BlockSpec(pl::ANY),
                        pl::BlockSpec(pltpu::SEMAPHORE), pl::BlockSpec(pltpu::SEMAPHORE)),
          pl::input_output_aliases({{0, 0}}), pl::name("copy_start"), extra...)(x);
    };
    return checked ? options(*checked) : options();
  };
  auto done = [](const Array<float>& x, const Array<float>& out,
                 const pltpu::DmaSemaphoreArray& send, const pltpu::DmaSemaphoreArray& recv) {
    return pl::pallas_call(
        [](pltpu::AnyRef<const float> x_ref, pltpu::AnyRef<const float>,
           pltpu::DmaSemaphoreRef send_sem, pltpu::DmaSemaphoreRef recv_sem,
           pltpu::AnyRef<float> o_ref) {
          pltpu::make_async_copy(x_ref, o_ref, send_sem).wait();
          pltpu::make_async_copy(x_ref, o_ref, recv_sem).wait();
        },
        pl::out_shape<float>(x.shape()),
        pl::in_specs(pl::BlockSpec(pl::ANY), pl::BlockSpec(pl::ANY),
                     pl::BlockSpec(pltpu::SEMAPHORE), pl::BlockSpec(pltpu::SEMAPHORE)),
        pl::out_specs(pl::BlockSpec(pl::ANY)),
        pl::input_output_aliases({{1, 0}}))(x, out, send, recv);
  };
  Array<float> x({mesh.size(), 8, 128});
  for (int64_t i = 0; i < x.size(); ++i) x[i] = static_cast<float>(i);
  return jax::shard_map(
      [&](const Array<float>& xs) {
        auto [x1, out, send, recv] = copy_start(xs);
        return done(x1, out, send, recv);
      },
      mesh, P("x"), P("x"))(x);
}

}  // namespace

int main() {
  using namespace tessera;
  const int n = jax::device_count();
  const int rank = jax::process_index();
  const Mesh mesh = jax::make_mesh({n}, {"x"});
  bool ok = true;
  for (const std::optional<pltpu::InterpretParams>& checked :
       {std::optional<pltpu::InterpretParams>{}, std::optional(pltpu::InterpretParams{})}) {
    const char* how = checked ? "checked" : "native";
    try {
      (void)shifted(mesh, checked);
      std::cout << "rank " << rank << " " << how << ": MISSING error\n";
      ok = false;
    } catch (const Error& e) {
      const std::string what = e.what();
      const bool right = e.kind() == ErrorKind::kUnsupported &&
                         what.find(
                             "across MPI ranks a remote operation cannot stay in flight "
                             "past its kernel") != std::string::npos &&
                         what.find("mesh.in_process()") != std::string::npos;
      std::cout << "rank " << rank << " " << how << (right ? ": refused: " : ": WRONG error: ")
                << what << "\n";
      ok &= right;
    }
  }
  // The same program on an in-process mesh (every rank runs it whole).
  const Array<float> y = shifted(mesh.in_process(), std::nullopt);
  const int64_t block = 8 * 128;
  for (int64_t i = 0; i < y.size(); ++i) {
    if (y[i] != static_cast<float>((i + y.size() - block) % y.size())) {
      std::cout << "rank " << rank << ": WRONG value at " << i << "\n";
      return 1;
    }
  }
  if (ok) std::cout << "rank " << rank << ": mpi_between_calls: all passed\n";
  return ok ? 0 : 1;
}
