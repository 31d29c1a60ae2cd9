// A consumer of the installed package's MPI transport (tessera::mpi): every device of the mesh
// (one per rank under mpirun, otherwise the process' in-process devices) sends its index to its
// right neighbour with a remote copy and checks what arrived from the left. Prints
// "consumer mpi: ok" only when the value is right on this process' devices.
#include <tessera/tessera.h>

#include <atomic>
#include <cstdio>
#include <exception>
#include <vector>

using namespace tessera;

int main() {
  try {
    const int n = jax::device_count() > 1 ? jax::device_count() : 2;
    std::atomic<int> wrong{0};
    auto permute =
        pl::kernel(pl::out_type<float>({8, 128}), pltpu::TensorCoreMesh("core", 1),
                   pl::scratch_types(pltpu::VMEM<float>({8, 128}), pltpu::SemaphoreType::DMA,
                                     pltpu::SemaphoreType::DMA))(
            [n](pltpu::HbmRef<float> o, pltpu::VmemRef<float> v, pltpu::DmaSemaphoreRef send,
                pltpu::DmaSemaphoreRef recv) {
              const int me = lax::axis_index("x");
              v = jnp::full_like(v, static_cast<float>(me));
              auto copy = pltpu::make_async_remote_copy(v, o, send, recv, {(me + 1) % n});
              copy.start();
              copy.wait();
            });
    jax::shard_map(
        [&] {
          const int me = lax::axis_index("x");
          const Array<float> got = permute();
          const float want = static_cast<float>((me + n - 1) % n);
          for (int64_t i = 0; i < got.size(); ++i) {
            if (got[i] != want) ++wrong;
          }
        },
        jax::make_mesh({n}, {"x"}), PartitionSpecs(std::vector<PartitionSpec>{}),
        PartitionSpecs(std::vector<PartitionSpec>{}))();
    if (wrong.load() != 0) {
      std::fprintf(stderr, "consumer mpi: %d wrong elements\n", wrong.load());
      return 1;
    }
    std::printf("consumer mpi: ok (process %d, %d devices)\n", jax::process_index(), n);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "consumer mpi: %s\n", e.what());
    return 1;
  }
  return 0;
}
