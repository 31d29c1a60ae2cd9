// Run by ctest under mpirun (label mpi): a remote copy on semaphores a pallas_call returns stays
// in flight into a later call (docs/devices.md): natively across MPI ranks, several times in a
// row, each device's block landing on its right neighbour; the checked engine refuses it across
// ranks with a message that names the rule and the ways out, and the same mesh run in process
// (mesh.in_process()) takes it natively and checked.
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
  // Under MPI each rank passes its own shard (block `rank`); in process the whole array.
  const bool ranks = !mesh.is_in_process();
  Array<float> x({ranks ? 1 : mesh.size(), 8, 128});
  const int64_t first = ranks ? int64_t{jax::process_index()} * x.size() : 0;
  for (int64_t i = 0; i < x.size(); ++i) x[i] = static_cast<float>(first + i);
  return jax::shard_map(
      [&](const Array<float>& xs) {
        auto [x1, out, send, recv] = copy_start(xs);
        return done(x1, out, send, recv);
      },
      mesh, P("x"), P("x"))(x);
}

bool right_values(const Array<float>& y, int rank, const char* how) {
  const int64_t block = 8 * 128;
  const int64_t n = y.size();
  // On a rank, y is its shard; in process, the whole array. Either way block b holds b - 1's.
  const int64_t first = y.shape()[0] == 1 ? static_cast<int64_t>(rank) * block : 0;
  const int64_t total = static_cast<int64_t>(jax::device_count()) * block;
  for (int64_t i = 0; i < n; ++i) {
    const int64_t g = first + i;
    if (y[i] != static_cast<float>((g + total - block) % total)) {
      std::cout << "rank " << rank << " " << how << ": WRONG value at " << i << ": " << y[i]
                << "\n";
      return false;
    }
  }
  return true;
}

}  // namespace

int main() {
  using namespace tessera;
  const int n = jax::device_count();
  const int rank = jax::process_index();
  const Mesh mesh = jax::make_mesh({n}, {"x"});
  bool ok = true;
  for (int i = 0; i < 5 && ok; ++i) ok = right_values(shifted(mesh, std::nullopt), rank, "native");
  try {
    (void)shifted(mesh, pltpu::InterpretParams{});
    std::cout << "rank " << rank << " checked: MISSING error\n";
    ok = false;
  } catch (const Error& e) {
    const std::string what = e.what();
    const bool right =
        e.kind() == ErrorKind::kUnsupported &&
        what.find("send_sem is a semaphore operand of the pallas_call") != std::string::npos &&
        what.find("is not checked across them") != std::string::npos &&
        what.find("mesh.in_process()") != std::string::npos;
    std::cout << "rank " << rank << " checked" << (right ? ": refused: " : ": WRONG error: ")
              << what << "\n";
    ok &= right;
  }
  // The same program on an in-process mesh (every rank runs it whole), natively and checked.
  ok = ok && right_values(shifted(mesh.in_process(), std::nullopt), rank, "in process");
  ok = ok && right_values(shifted(mesh.in_process(), pltpu::InterpretParams{}), rank,
                          "in process, checked");
  if (ok) std::cout << "rank " << rank << ": mpi_between_calls: all passed\n";
  return ok ? 0 : 1;
}
