// Run by ctest under mpirun (label mpi): remote copies into another device's VMEM and SMEM
// across MPI ranks (their bytes travel in the landing's message, src/mpi/mpi_core_memory.cc),
// natively and in checked mode (every DMA execution mode), each clean case repeated:
//   - a ring of VMEM scratch buffers: each device copies its block into its right neighbour's
//     scratch, then writes what it received to its output;
//   - the same into SMEM;
//   - on a mesh of 2 cores per device, core c copies into core 1 - c of the right neighbour
//     (and, on 1 rank, of its own device);
//   - planted bugs in checked mode: half a block sent and the whole block waited for (kDeadlock
//     over the ranks), and the destination read before wait_recv has taken the copy (kRace, found
//     by the read once the bytes have arrived, or by their landing when the read came first).
// Prints "WRONG" for each unmet expectation, "mpi_core_memory: all passed" otherwise.
#include <tessera/tessera.h>

#include <functional>
#include <initializer_list>
#include <iostream>
#include <optional>
#include <string>

namespace {
using namespace tessera;
using Mode = pltpu::DmaExecutionMode;
using Params = pltpu::InterpretParams;

const pltpu::CompilerParams kParams{.wait_timeout_ms = 20000};
int g_wrong = 0;

void wrong(const std::string& what) {
  ++g_wrong;
  std::cout << "rank " << jax::process_index() << ": WRONG " << what << std::endl;
}

// The kernels below write float(device * 100 + core * 10 + row) into row `row` of what they
// send, so a received block names where it came from.
float sent_value(int device, int core, int64_t row) {
  return static_cast<float>(device * 100 + core * 10 + row);
}

// Runs `kernel` on every device of the 1-D mesh of every rank and checks this rank's output:
// core c of device d holds the block core `from_core(c)` of device `from_device(d)` sent.
template <class K, class FromDevice, class FromCore>
void run_and_check(const std::string& name, const K& kernel, int cores, FromDevice from_device,
                   FromCore from_core) {
  const int n = jax::device_count();
  std::optional<Array<float>> out;
  jax::shard_map([&] { out.emplace(kernel()); }, jax::make_mesh({n}, {"x"}),
                 PartitionSpecs(std::vector<PartitionSpec>{}),
                 PartitionSpecs(std::vector<PartitionSpec>{}))();
  if (!out) return wrong(name + ": no output");
  const int me = jax::process_index();
  for (int c = 0; c < cores; ++c) {
    for (int64_t r = 0; r < 8; ++r) {
      const float want = sent_value(from_device(me, n), from_core(c), r);
      for (int64_t j = 0; j < 128; j += 37) {
        const float got = (*out)(c * 8 + r, j);
        if (got != want) {
          return wrong(name + ": core " + std::to_string(c) + " element (" + std::to_string(r) +
                       ", " + std::to_string(j) + ") is " + std::to_string(got) + ", expected " +
                       std::to_string(want));
        }
      }
    }
  }
}

// Core c of each device fills `v`, copies it into the `w` of core `to_core(c)` of device
// `to_device(me, n)`, waits, and writes its own `w` to its rows of the output. The bugs:
// kHalfSent sends only the first 4 rows and waits for the whole block; kReadEarly reads `w` once
// the copy's bytes have arrived (semaphore_read) but before wait_recv has taken them.
enum class Bug { kNone, kHalfSent, kReadEarly };
template <class ToDevice, class ToCore>
auto vmem_ring(int cores, ToDevice to_device, ToCore to_core, Bug bug, std::optional<Params> mode) {
  auto body = [=](pltpu::HbmRef<float> o, pltpu::VmemRef<float> v, pltpu::VmemRef<float> w,
                  pltpu::DmaSemaphoreRef send, pltpu::DmaSemaphoreRef recv) {
    const int n = lax::axis_size("x");
    const int me = lax::axis_index("x");
    const int core = lax::axis_index("core");
    v = jnp::full_like(v, static_cast<float>(me * 100 + core * 10)) +
        lax::broadcasted_iota<float>({8, 128}, 0);
    const pl::DeviceId to{{"x", to_device(me, n)}, {"core", to_core(core)}};
    auto copy = pltpu::make_async_remote_copy(v, w, send, recv, to);
    if (bug == Bug::kHalfSent) {
      auto half =
          pltpu::make_async_remote_copy(v.at(pl::ds(0, 4)), w.at(pl::ds(0, 4)), send, recv, to);
      half.start();
      half.wait_send();
      copy.wait_recv();
    } else if (bug == Bug::kReadEarly) {
      copy.start();
      copy.wait_send();
      for (int spin = 0; spin < 2000000 && pl::semaphore_read(recv) < 8 * 128 * 4; ++spin) {
      }
      pltpu::sync_copy(w, o.at(pl::ds(core * 8, 8)));
      copy.wait_recv();
    } else {
      copy.start();
      copy.wait();
    }
    pltpu::sync_copy(w, o.at(pl::ds(core * 8, 8)));
  };
  auto scratch = pl::scratch_types(pltpu::VMEM<float>({8, 128}), pltpu::VMEM<float>({8, 128}),
                                   pltpu::SemaphoreType::DMA, pltpu::SemaphoreType::DMA);
  const pltpu::TensorCoreMesh mesh("core", cores);
  const auto out = pl::out_type<float>({cores * 8, 128});
  return mode ? pl::kernel(out, mesh, scratch, *mode, kParams, pl::name("vmem_ring"))(body)
              : pl::kernel(out, mesh, scratch, kParams, pl::name("vmem_ring"))(body);
}

// Each device copies 8 int32 from its SMEM into its right neighbour's SMEM; the receiver adds
// them up into its output.
auto smem_ring(std::optional<Params> mode) {
  auto body = [](pltpu::HbmRef<int32_t> o, pltpu::SmemRef<int32_t> s, pltpu::SmemRef<int32_t> t,
                 pltpu::VmemRef<int32_t> v, pltpu::DmaSemaphoreRef send,
                 pltpu::DmaSemaphoreRef recv) {
    const int n = lax::axis_size("x");
    const int me = lax::axis_index("x");
    for (int i = 0; i < 8; ++i) s(i) = me * 100 + i;
    auto copy = pltpu::make_async_remote_copy(s, t, send, recv, {(me + 1) % n});
    copy.start();
    copy.wait();
    int32_t total = 0;
    for (int i = 0; i < 8; ++i) total += t(i);
    v = jnp::full_like(v, total);
    pltpu::sync_copy(v, o);
  };
  auto scratch = pl::scratch_types(pltpu::SMEM<int32_t>({8}), pltpu::SMEM<int32_t>({8}),
                                   pltpu::VMEM<int32_t>({8, 128}), pltpu::SemaphoreType::DMA,
                                   pltpu::SemaphoreType::DMA);
  const pltpu::TensorCoreMesh mesh("core", 1);
  const auto out = pl::out_type<int32_t>({8, 128});
  return mode ? pl::kernel(out, mesh, scratch, *mode, kParams, pl::name("smem_ring"))(body)
              : pl::kernel(out, mesh, scratch, kParams, pl::name("smem_ring"))(body);
}

void smem_case(const std::string& name, std::optional<Params> mode) {
  const int n = jax::device_count();
  std::optional<Array<int32_t>> out;
  jax::shard_map([&] { out.emplace(smem_ring(mode)()); }, jax::make_mesh({n}, {"x"}),
                 PartitionSpecs(std::vector<PartitionSpec>{}),
                 PartitionSpecs(std::vector<PartitionSpec>{}))();
  const int left = (jax::process_index() + n - 1) % n;
  const int32_t want = 8 * left * 100 + 28;
  if (!out || (*out)(3, 5) != want) {
    wrong(name + ": expected " + std::to_string(want) + ", got " +
          (out ? std::to_string((*out)(3, 5)) : std::string("no output")));
  }
}

// Expects `f` to raise `kind` with a message containing every one of `says`, or (when given) every
// one of `or_says`.
void expect_error(const std::string& name, const std::function<void()>& f, ErrorKind kind,
                  std::initializer_list<std::string> says,
                  std::initializer_list<std::string> or_says = {}) {
  auto has_all = [](const std::string& what, std::initializer_list<std::string> parts) {
    for (const std::string& s : parts) {
      if (what.find(s) == std::string::npos) return false;
    }
    return true;
  };
  try {
    f();
    wrong(name + ": no error");
  } catch (const Error& e) {
    if (e.kind() != kind) return wrong(name + ": kind " + to_string(e.kind()) + ": " + e.what());
    if (!has_all(e.what(), says) && (or_says.size() == 0 || !has_all(e.what(), or_says))) {
      wrong(name + ": unexpected message: " + e.what());
    }
  }
}

void guarded(const std::string& name, const std::function<void()>& f) {
  try {
    f();
  } catch (const std::exception& e) {
    wrong(name + ": " + e.what());
  }
}

}  // namespace

int main() {
  const auto right = [](int me, int n) { return (me + 1) % n; };
  const auto left = [](int me, int n) { return (me + n - 1) % n; };
  const auto same = [](int c) { return c; };
  const auto other = [](int c) { return 1 - c; };
  const auto self = [](int me, int) { return me; };
  std::vector<std::optional<Params>> modes{
      std::nullopt, Params{.dma_execution_mode = Mode::eager},
      Params{.dma_execution_mode = Mode::on_wait},
      Params{.dma_execution_mode = Mode::random, .random_seed = 3}};
  for (const auto& mode : modes) {
    const std::string m = mode ? " (checked)" : " (native)";
    for (int i = 0; i < 3; ++i) {
      guarded("vmem ring" + m, [&] {
        run_and_check("vmem ring" + m, vmem_ring(1, right, same, Bug::kNone, mode), 1, left, same);
      });
      guarded("vmem ring, other core" + m, [&] {
        run_and_check("vmem ring, other core" + m, vmem_ring(2, right, other, Bug::kNone, mode), 2,
                      left, other);
      });
      guarded("vmem, own device's other core" + m, [&] {
        run_and_check("vmem, own device's other core" + m,
                      vmem_ring(2, self, other, Bug::kNone, mode), 2, self, other);
      });
      guarded("smem ring" + m, [&] { smem_case("smem ring" + m, mode); });
    }
    if (!mode) continue;
    expect_error(
        "vmem, half sent" + m,
        [&] {
          run_and_check("vmem, half sent" + m, vmem_ring(1, right, same, Bug::kHalfSent, mode), 1,
                        left, same);
        },
        ErrorKind::kDeadlock,
        {"deadlock over the MPI ranks", "holds 2048 bytes", "needs 4096", "mpi_core_memory.cc:"});
    expect_error(
        "vmem read before wait_recv" + m,
        [&] {
          run_and_check("vmem read before wait_recv" + m,
                        vmem_ring(1, right, same, Bug::kReadEarly, mode), 1, left, same);
        },
        ErrorKind::kRace,
        {"reads VMEM scratch #1", "may still be writing it", "has not taken it with wait_recv",
         "mpi_core_memory.cc:"},
        // The spin ended before the bytes arrived (a loaded machine): the landing finds the read.
        {"'s remote copy writes device", "'s VMEM scratch #1",
         "'s sync_copy at mpi_core_memory.cc:", "reads with no happens-before order"});
  }
  if (g_wrong == 0) {
    std::cout << "rank " << jax::process_index() << ": mpi_core_memory: all passed\n";
  }
  return g_wrong == 0 ? 0 : 1;
}
