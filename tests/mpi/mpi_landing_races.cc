// Run by ctest under mpirun (label mpi): checked mode across MPI ranks finds a target core's
// access of a VMEM or SMEM buffer that nothing orders before another rank's remote copy into it
// (src/check/checked_history.cc), also when the access came before the copy's message arrived.
// In each planted bug device 1 touches its buffer after telling device 0 that the buffer is free
// (a signal on a REGULAR semaphore, which device 0 waits for before it starts the copy), and an
// MPI_Barrier of the test, outside Tessera, holds device 0's start() back until device 1 has
// touched it, so that the access surely precedes the landing:
//   - compute writes it (VMEM, SMEM), compute reads it (VMEM, SMEM), a local copy writes it, a
//     local copy in flight across the signal writes it, on core 0 and on core 1 of a 2-core mesh:
//     kRace on every rank, naming both devices, cores, lines and the element;
//   - a ring of several steps with no capacity semaphore (a device's next copy may land while
//     its right neighbour still reads the last one): kRace;
//   - two copies from two cores of device 0 into one buffer of device 1, both in flight, or the
//     second started before device 1's wait_recv of the first: kRace (clean twins: disjoint
//     halves; the second started after a signal that device 1 sends after that wait_recv).
// Each clean twin touches the buffer before the signal (or, in the ring, waits for the
// neighbour's capacity signal), with the same forced order, and checks what landed; they run
// three times in every DMA execution mode.
// Prints "WRONG" for each unmet expectation, "mpi_landing_races: all passed" otherwise.
#include <mpi.h>
#include <tessera/tessera.h>

#include <iostream>
#include <optional>
#include <string>
#include <vector>

#include "mpi_expect.h"

namespace {
using namespace tessera;
using Mode = pltpu::DmaExecutionMode;
using Params = pltpu::InterpretParams;
using namespace mpi_expect;

const Params kModes[] = {{.dma_execution_mode = Mode::eager},
                         {.dma_execution_mode = Mode::on_wait},
                         {.dma_execution_mode = Mode::random, .random_seed = 5}};

// A wait that is not found to be a deadlock fails the test at this timeout instead of hanging.
const pltpu::CompilerParams kParams{.wait_timeout_ms = 20000};

// How device 1 touches its buffer: with compute (a write, or a read of what it wrote first), with
// a local copy into it, or with a local copy started before the signal and waited after it.
enum class Touch { kWrite, kRead, kComputeRead, kCopy, kCopyAcross };

const char* touch_name(Touch t) {
  switch (t) {
    case Touch::kWrite:
      return "write";
    case Touch::kRead:
      return "read";
    case Touch::kComputeRead:
      return "compute read";
    case Touch::kCopy:
      return "local copy";
    case Touch::kCopyAcross:
      return "local copy across the signal";
  }
  return "";
}

// The lines of the accesses the messages must name (each statement on one line).
constexpr int kVmemWriteLine = __LINE__ + 1;
void vmem_write(pltpu::VmemRef<float> buf) { buf = jnp::full_like(buf, -1.0f); }
constexpr int kVmemReadLine = __LINE__ + 1;
void vmem_read(pltpu::VmemRef<float> buf, pltpu::VmemRef<float> w) { pltpu::sync_copy(buf, w); }
// A read by an operator statement: its line needs the build's line tables (-g), so the message
// is only checked for the operation.
void vmem_compute_read(pltpu::VmemRef<float> buf, pltpu::VmemRef<float> w) { w = buf * 2.0f; }
constexpr int kSmemWriteLine = __LINE__ + 2;
void smem_write(pltpu::SmemRef<int32_t> buf) {
  for (int i = 0; i < 8; ++i) buf(i) = -1;
}
constexpr int kSmemReadLine = __LINE__ + 3;
int32_t smem_read(pltpu::SmemRef<int32_t> buf) {
  int32_t total = 0;
  for (int i = 0; i < 8; ++i) total += buf(i);
  return total;
}
constexpr int kCopyLine = __LINE__ + 1;
void start_copy(auto& copy) { copy.start(); }

// Only one thread of each rank takes part in the test's barrier: the sending core on device 0,
// the target core on device 1, core 0 elsewhere.
void test_barrier(int me, int core, int from, int to) {
  if ((me == 0 && core == from) || (me == 1 && core == to) || (me > 1 && core == 0)) {
    MPI_Barrier(MPI_COMM_WORLD);
  }
}

// Core `from` of device 0 copies rows filled with 100 * core + row into `buf` of core `to` of
// device 1, after device 1's signal that it is free; device 1 touches `buf` before the signal
// (`ordered`) or after it, and writes what landed to its rows of the output.
auto vmem_kernel(Touch touch, bool ordered, int cores, int from, int to, const Params& mode) {
  auto body = [=](pltpu::HbmRef<float> o, pltpu::VmemRef<float> v, pltpu::VmemRef<float> buf,
                  pltpu::VmemRef<float> w, pltpu::DmaSemaphoreRef send, pltpu::DmaSemaphoreRef recv,
                  pltpu::DmaSemaphoreRef local, pltpu::SemaphoreRef free) {
    const int me = lax::axis_index("x");
    const int core = lax::axis_index("core");
    const pl::DeviceId target{{"x", 1}, {"core", to}};
    auto copy = pltpu::make_async_remote_copy(v, buf, send, recv, target);
    w = jnp::zeros_like(w);
    pltpu::sync_copy(w, o.at(pl::ds(core * 8, 8)));
    if (me == 0 && core == from) {
      pl::semaphore_wait(free, 1);
      v = jnp::full_like(v, static_cast<float>(100 * core)) +
          lax::broadcasted_iota<float>({8, 128}, 0);
      test_barrier(me, core, from, to);
      copy.start();
      copy.wait_send();
    } else if (me == 1 && core == to) {
      w = jnp::full_like(w, 7.0f);
      if (touch == Touch::kRead || touch == Touch::kComputeRead) vmem_write(buf);
      auto cp = pltpu::make_async_copy(w, buf, local);
      if (touch == Touch::kCopyAcross) start_copy(cp);
      auto access = [&] {
        if (touch == Touch::kWrite) vmem_write(buf);
        if (touch == Touch::kRead) vmem_read(buf, w);
        if (touch == Touch::kComputeRead) vmem_compute_read(buf, w);
        if (touch == Touch::kCopy) start_copy(cp);
        if (touch == Touch::kCopy || touch == Touch::kCopyAcross) cp.wait();
      };
      if (ordered) access();
      pl::semaphore_signal(free, 1, pl::device_id({0}), pl::core_index(from));
      if (!ordered) access();
      test_barrier(me, core, from, to);
      copy.wait_recv();
      pltpu::sync_copy(buf, o.at(pl::ds(core * 8, 8)));
    } else {
      test_barrier(me, core, from, to);
    }
  };
  return pl::kernel(pl::out_type<float>({cores * 8, 128}), pltpu::TensorCoreMesh("core", cores),
                    pl::scratch_types(pltpu::VMEM<float>({8, 128}), pltpu::VMEM<float>({8, 128}),
                                      pltpu::VMEM<float>({8, 128}), pltpu::SemaphoreType::DMA,
                                      pltpu::SemaphoreType::DMA, pltpu::SemaphoreType::DMA,
                                      pltpu::SemaphoreType::REGULAR),
                    mode, kParams, pl::name("vmem_landing"))(body);
}

// The same with 8 int32 of SMEM on a 1-core mesh: device 1 adds up what landed.
auto smem_kernel(Touch touch, bool ordered, const Params& mode) {
  auto body = [=](pltpu::HbmRef<int32_t> o, pltpu::SmemRef<int32_t> s, pltpu::SmemRef<int32_t> buf,
                  pltpu::VmemRef<int32_t> w, pltpu::DmaSemaphoreRef send,
                  pltpu::DmaSemaphoreRef recv, pltpu::SemaphoreRef free) {
    const int me = lax::axis_index("x");
    auto copy = pltpu::make_async_remote_copy(s, buf, send, recv, {1});
    int32_t total = 0;
    if (me == 0) {
      pl::semaphore_wait(free, 1);
      for (int i = 0; i < 8; ++i) s(i) = 10 + i;
      test_barrier(me, 0, 0, 0);
      copy.start();
      copy.wait_send();
    } else if (me == 1) {
      if (touch == Touch::kRead) smem_write(buf);
      auto access = [&] {
        if (touch == Touch::kWrite) smem_write(buf);
        if (touch == Touch::kRead) total = smem_read(buf);
      };
      if (ordered) access();
      pl::semaphore_signal(free, 1, pl::device_id({0}));
      if (!ordered) access();
      test_barrier(me, 0, 0, 0);
      copy.wait_recv();
      total = smem_read(buf);
    } else {
      test_barrier(me, 0, 0, 0);
    }
    w = jnp::full_like(w, total);
    pltpu::sync_copy(w, o);
  };
  return pl::kernel(pl::out_type<int32_t>({8, 128}), pltpu::TensorCoreMesh("core", 1),
                    pl::scratch_types(pltpu::SMEM<int32_t>({8}), pltpu::SMEM<int32_t>({8}),
                                      pltpu::VMEM<int32_t>({8, 128}), pltpu::SemaphoreType::DMA,
                                      pltpu::SemaphoreType::DMA, pltpu::SemaphoreType::REGULAR),
                    mode, kParams, pl::name("smem_landing"))(body);
}

// Every device sends `steps` blocks to its right neighbour's `buf`, one per step, and adds up
// what reaches its own; with `capacity`, a device starts step s + 1 only once its neighbour has
// signalled that it has read step s (the correct ring), else at once (the bug).
auto ring_kernel(bool capacity, const Params& mode) {
  constexpr int kSteps = 4;
  auto body = [=](pltpu::HbmRef<float> o, pltpu::VmemRef<float> v, pltpu::VmemRef<float> buf,
                  pltpu::VmemRef<float> acc, pltpu::DmaSemaphoreRef send,
                  pltpu::DmaSemaphoreRef recv, pltpu::SemaphoreRef free) {
    const int n = lax::axis_size("x");
    const int me = lax::axis_index("x");
    auto copy = pltpu::make_async_remote_copy(v, buf, send, recv, {(me + 1) % n});
    acc = jnp::zeros_like(acc);
    for (int s = 0; s < kSteps; ++s) {
      if (capacity && s > 0) pl::semaphore_wait(free, 1);
      v = jnp::full_like(v, static_cast<float>(me * 10 + s));
      copy.start();
      copy.wait_send();
      copy.wait_recv();
      acc = acc + buf;
      if (capacity && s + 1 < kSteps)
        pl::semaphore_signal(free, 1, pl::device_id({(me + n - 1) % n}));
    }
    pltpu::sync_copy(acc, o);
  };
  return pl::kernel(pl::out_type<float>({8, 128}), pltpu::TensorCoreMesh("core", 1),
                    pl::scratch_types(pltpu::VMEM<float>({8, 128}), pltpu::VMEM<float>({8, 128}),
                                      pltpu::VMEM<float>({8, 128}), pltpu::SemaphoreType::DMA,
                                      pltpu::SemaphoreType::DMA, pltpu::SemaphoreType::REGULAR),
                    mode, kParams, pl::name("ring"))(body);
}

// Two copies into `buf` of device 1 core 0, from cores 0 (A) and 1 (B) of device 0, on their own
// receive semaphores. kInFlight: both start at once and device 1 waits for both after an
// MPI_Barrier that follows both starts (the bug: either may land last). kAfterWait: device 1
// takes A (wait_recv), then B starts, held back by an MPI_Barrier that orders nothing in
// Tessera's terms (the bug: B may land before A on a TPU). kDisjoint: as kInFlight, into the two
// halves of `buf` (clean). kOrdered: as kAfterWait, but device 1 signals core 1 of device 0
// after its wait_recv of A, and B starts after that signal (clean).
enum class TwoCopies { kInFlight, kAfterWait, kDisjoint, kOrdered };

auto two_copies_kernel(TwoCopies how, const Params& mode) {
  auto body = [=](pltpu::HbmRef<float> o, pltpu::VmemRef<float> v, pltpu::VmemRef<float> buf,
                  pltpu::DmaSemaphoreRef send, pltpu::DmaSemaphoreRef recv_a,
                  pltpu::DmaSemaphoreRef recv_b, pltpu::SemaphoreRef go) {
    const int me = lax::axis_index("x");
    const int core = lax::axis_index("core");
    const bool halves = how == TwoCopies::kDisjoint;
    const bool after = how == TwoCopies::kAfterWait || how == TwoCopies::kOrdered;
    const pl::DeviceId target{{"x", 1}, {"core", 0}};
    auto rows = [&](int c) { return halves ? pl::ds(4 * c, 4) : pl::ds(0, 8); };
    auto a = pltpu::make_async_remote_copy(v.at(rows(0)), buf.at(rows(0)), send, recv_a, target);
    auto b = pltpu::make_async_remote_copy(v.at(rows(1)), buf.at(rows(1)), send, recv_b, target);
    const bool barrier_thread =
        (me == 0 && core == 1) || (me == 1 && core == 0) || (me > 1 && core == 0);
    if (me == 0) {
      v = jnp::full_like(v, static_cast<float>(10 * (core + 1)));
      if (core == 1 && after) {
        if (how == TwoCopies::kOrdered) pl::semaphore_wait(go, 1);
        MPI_Barrier(MPI_COMM_WORLD);
      }
      auto& mine = core == 0 ? a : b;
      mine.start();
      mine.wait_send();
      if (core == 1 && !after) MPI_Barrier(MPI_COMM_WORLD);
    } else if (me == 1 && core == 0) {
      if (after) {
        a.wait_recv();
        if (how == TwoCopies::kOrdered) {
          pl::semaphore_signal(go, 1, pl::device_id({0}), pl::core_index(1));
        }
      }
      MPI_Barrier(MPI_COMM_WORLD);
      if (!after) a.wait_recv();
      b.wait_recv();
      pltpu::sync_copy(buf, o);
    } else if (barrier_thread) {
      MPI_Barrier(MPI_COMM_WORLD);
    }
  };
  return pl::kernel(pl::out_type<float>({8, 128}), pltpu::TensorCoreMesh("core", 2),
                    pl::scratch_types(pltpu::VMEM<float>({8, 128}), pltpu::VMEM<float>({8, 128}),
                                      pltpu::SemaphoreType::DMA, pltpu::SemaphoreType::DMA,
                                      pltpu::SemaphoreType::DMA, pltpu::SemaphoreType::REGULAR),
                    mode, kParams, pl::name("two_copies"))(body);
}

template <class T, class K>
std::optional<Array<T>> run_kernel(const K& kernel) {
  std::optional<Array<T>> out;
  run_program([&] { out.emplace(kernel()); });
  return out;
}

void check_vmem(const std::string& name, const std::optional<Array<float>>& out, int from, int to) {
  if (jax::process_index() != 1) return;
  for (int64_t r = 0; r < 8; ++r) {
    const float want = static_cast<float>(100 * from + r);
    if (!out || (*out)(to * 8 + r, 5) != want) {
      return wrong(name + ": row " + std::to_string(r) + " is " +
                   (out ? std::to_string((*out)(to * 8 + r, 5)) : std::string("missing")) +
                   ", expected " + std::to_string(want));
    }
  }
}

std::string line(int l) { return "mpi_landing_races.cc:" + std::to_string(l); }

void vmem_cases(int cores, int from, int to) {
  const std::string where = " (" + std::to_string(cores) + " cores, core " + std::to_string(from) +
                            " to core " + std::to_string(to) + ")";
  const std::string sender = "device 0 core " + std::to_string(from) + "'s remote copy writes ";
  const std::string target = "device 1 core " + std::to_string(to);
  for (const Touch t :
       {Touch::kWrite, Touch::kRead, Touch::kComputeRead, Touch::kCopy, Touch::kCopyAcross}) {
    const std::string name = std::string("vmem ") + touch_name(t) + where;
    for (const Params& mode : kModes) {
      for (int i = 0; i < 3; ++i) {
        expect_clean("clean " + name, [&] {
          check_vmem("clean " + name,
                     run_kernel<float>(vmem_kernel(t, true, cores, from, to, mode)), from, to);
        });
      }
    }
    const bool copied = t == Touch::kCopy || t == Touch::kCopyAcross;
    std::string access = "which " + target + "'s vector assignment at " + line(kVmemWriteLine) +
                         " writes with no happens-before order";
    if (t == Touch::kRead) {
      access = "which " + target + "'s sync_copy at " + line(kVmemReadLine) + " reads with no";
    } else if (t == Touch::kComputeRead) {
      access = "which " + target + "'s vector assignment at ";  // and " reads with no" below
    } else if (copied) {
      access = "which " + target + "'s async copy at " + line(kCopyLine) + " writes with no";
    }
    expect_error(name, [&] { run(vmem_kernel(t, false, cores, from, to, kModes[0])); },
                 ErrorKind::kRace,
                 {sender + target + "'s VMEM scratch #1 VMEM<float32>(8, 128) element (0, 0)",
                  access, t == Touch::kWrite || copied ? " writes with no" : " reads with no",
                  "remote_copy.start at mpi_landing_races.cc:"});
  }
}

void smem_cases() {
  for (const Touch t : {Touch::kWrite, Touch::kRead}) {
    const std::string name = std::string("smem ") + touch_name(t);
    for (const Params& mode : kModes) {
      for (int i = 0; i < 3; ++i) {
        expect_clean("clean " + name, [&] {
          const auto out = run_kernel<int32_t>(smem_kernel(t, true, mode));
          if (jax::process_index() == 1 && (!out || (*out)(3, 5) != 108)) {
            wrong("clean " + name + ": expected 108, got " +
                  (out ? std::to_string((*out)(3, 5)) : std::string("nothing")));
          }
        });
      }
    }
    const bool read = t == Touch::kRead;
    expect_error(
        name, [&] { run(smem_kernel(t, false, kModes[0])); }, ErrorKind::kRace,
        {"device 0 core 0's remote copy writes device 1 core 0's SMEM scratch #1 "
         "SMEM<int32>(8,) element (0,)",
         "which device 1 core 0's Ref element " + std::string(read ? "read" : "write") + " at " +
             line(read ? kSmemReadLine : kSmemWriteLine) + (read ? " reads" : " writes"),
         "with no happens-before order"});
  }
}

void ring_cases() {
  const int n = jax::device_count();
  const int left = (jax::process_index() + n - 1) % n;
  for (const Params& mode : kModes) {
    for (int i = 0; i < 3; ++i) {
      expect_clean("clean ring", [&] {
        const auto out = run_kernel<float>(ring_kernel(true, mode));
        const float want = static_cast<float>(left * 40 + 6);
        if (!out || (*out)(2, 3) != want) {
          wrong("clean ring: expected " + std::to_string(want) + ", got " +
                (out ? std::to_string((*out)(2, 3)) : std::string("nothing")));
        }
      });
    }
  }
  expect_error("ring without capacity semaphore", [&] { run(ring_kernel(false, kModes[0])); },
               ErrorKind::kRace, {"device ", "VMEM scratch #1", "mpi_landing_races.cc:"});
}

void two_copies_cases() {
  for (const TwoCopies how : {TwoCopies::kDisjoint, TwoCopies::kOrdered}) {
    const std::string name =
        how == TwoCopies::kDisjoint ? "two copies into disjoint halves" : "two ordered copies";
    for (const Params& mode : kModes) {
      for (int i = 0; i < 3; ++i) {
        expect_clean(name, [&] {
          std::optional<Array<float>> out;
          run_program([&] { out.emplace(two_copies_kernel(how, mode)()); });
          if (jax::process_index() != 1) return;
          // Halves: rows 0-3 from core 0 (10), rows 4-7 from core 1 (20); ordered: B's 20 last.
          const float top = how == TwoCopies::kDisjoint ? 10.0f : 20.0f;
          if (!out || (*out)(1, 7) != top || (*out)(6, 7) != 20.0f) {
            wrong(name + ": unexpected rows");
          }
        });
      }
    }
  }
  expect_error("two copies in flight into one buffer",
               [&] { run(two_copies_kernel(TwoCopies::kInFlight, kModes[0])); }, ErrorKind::kRace,
               {"'s remote copy writes device 1 core 0's VMEM scratch #1 VMEM<float32>(8, 128)",
                "remote_copy.start at mpi_landing_races.cc:"});
  expect_error("a copy started before the wait_recv of another into the same buffer",
               [&] { run(two_copies_kernel(TwoCopies::kAfterWait, kModes[0])); }, ErrorKind::kRace,
               {"device 0 core 1's remote copy writes device 1 core 0's VMEM scratch #1 "
                "VMEM<float32>(8, 128) element (0, 0), which device 1 core 0's landing of a "
                "remote copy taken by the wait_recv at mpi_landing_races.cc:",
                " writes with no happens-before order"});
}

}  // namespace

int main(int argc, char** argv) {
  if (argc > 1) g_only = argv[1];
  vmem_cases(1, 0, 0);
  vmem_cases(2, 0, 1);
  vmem_cases(2, 1, 1);
  smem_cases();
  ring_cases();
  two_copies_cases();
  if (g_wrong == 0) {
    std::cout << "rank " << jax::process_index() << ": mpi_landing_races: all passed\n";
  }
  return g_wrong == 0 ? 0 : 1;
}
