// Run by ctest under mpirun (label mpi): device 1's kernel body throws while the others wait for
// its copy; every rank must stop at once (no timeout) and report device 1's error.
#include <tessera/tessera.h>

#include <iostream>
#include <stdexcept>
#include <string>

int main() {
  using namespace tessera;
  const int n = jax::device_count();
  auto kernel = pl::kernel(pl::out_type<float>({8, 128}), pltpu::TensorCoreMesh("core", 1),
                           pl::scratch_types(pltpu::VMEM<float>({8, 128}),
                                             pltpu::SemaphoreType::DMA, pltpu::SemaphoreType::DMA),
                           pltpu::CompilerParams{.wait_timeout_ms = 30000}, pl::name("fails"))(
      [n](pltpu::HbmRef<float> o, pltpu::VmemRef<float> v, pltpu::DmaSemaphoreRef send,
          pltpu::DmaSemaphoreRef recv) {
        const int me = lax::axis_index("x");
        if (me == 1) throw std::runtime_error("device 1 gives up");
        v = jnp::zeros_like(v);
        auto copy = pltpu::make_async_remote_copy(v, o, send, recv, {(me + 1) % n});
        copy.start();
        copy.wait();  // device 2 waits for device 1, which never sends
      });
  const int rank = jax::process_index();
  try {
    jax::shard_map([&] { (void)kernel(); }, jax::make_mesh({n}, {"x"}),
                   PartitionSpecs(std::vector<PartitionSpec>{}),
                   PartitionSpecs(std::vector<PartitionSpec>{}))();
    std::cout << "rank " << rank << ": MISSING error\n";
    return 1;
  } catch (const std::exception& e) {
    const bool ok = std::string(e.what()).find("device 1 gives up") != std::string::npos;
    std::cout << "rank " << rank << (ok ? ": stopped with device 1's error: " : ": MISSING ")
              << e.what() << "\n";
    return ok ? 0 : 1;
  }
}
