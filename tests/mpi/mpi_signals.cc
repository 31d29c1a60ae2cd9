// Run by ctest under mpirun (label mpi): semaphore signals and start barriers between ranks,
// which on one host go through the ranks' mailboxes (src/mpi/mpi_mailbox.h) and through MPI
// when a mailbox is full, natively: a ping-pong of thousands of signals round the ring in one
// launch; a burst of signals larger than a mailbox that nobody takes until all have been sent,
// and one towards every neighbour at once; hundreds of launches with the implicit start barrier,
// each checked by a right permute of its launch number; and a signal sent to a device that
// never waits for it, which every rank must report, in every one of several programs.
#include <tessera/tessera.h>

#include <chrono>
#include <cstdlib>
#include <iostream>
#include <string>
#include <thread>

#include "mpi_expect.h"

namespace {
using namespace tessera;
using mpi_expect::expect_clean;
using mpi_expect::run_program;
using mpi_expect::wrong;

// Each device signals its right neighbour and waits for its left one's signal, `rounds` times.
void ping_ring(int rounds) {
  expect_clean("ping_ring", [&] {
    run_program([&] {
      auto body = [rounds](pltpu::SemaphoreRef sem) {
        const int n = lax::axis_size("x");
        const int right = (lax::axis_index("x") + 1) % n;
        for (int r = 0; r < rounds; ++r) {
          pl::semaphore_signal(sem, 1, pl::device_id({right}), pl::DeviceIdType::MESH);
          pl::semaphore_wait(sem, 1);
        }
      };
      pl::kernel(pl::out_type<float>({8, 128}), pltpu::TensorCoreMesh("core", 1),
                 pl::scratch_types(pltpu::SemaphoreType::REGULAR), pl::name("ping_ring"))(
          [&](pltpu::HbmRef<float>, pltpu::SemaphoreRef sem) { body(sem); })();
    });
  });
}

// Device 0 signals device 1 `count` times (inc 1 and 2 alternately) while device 1 sleeps, then
// device 1 waits for the sum once; with `everyone`, every device does so towards its right
// neighbour at once, without sleeping.
void burst(int count, bool everyone) {
  const std::string name = everyone ? "burst_everyone" : "burst_one";
  expect_clean(name, [&] {
    run_program([&] {
      auto body = [count, everyone](pltpu::SemaphoreRef sem) {
        const int n = lax::axis_size("x");
        const int me = lax::axis_index("x");
        const int right = (me + 1) % n;
        int sum = 0;
        for (int i = 0; i < count; ++i) sum += 1 + i % 2;
        if (everyone || me == 0) {
          for (int i = 0; i < count; ++i) {
            pl::semaphore_signal(sem, 1 + i % 2, pl::device_id({right}), pl::DeviceIdType::MESH);
          }
        }
        if (!everyone && me == 1 % n) {
          // Nothing takes the signals until device 0 has sent them all (the mailbox fills).
          std::this_thread::sleep_for(std::chrono::milliseconds(20));
        }
        if (everyone || me == 1 % n) pl::semaphore_wait(sem, sum);
      };
      pl::kernel(pl::out_type<float>({8, 128}), pltpu::TensorCoreMesh("core", 1),
                 pl::scratch_types(pltpu::SemaphoreType::REGULAR), pl::name("burst"))(
          [&](pltpu::HbmRef<float>, pltpu::SemaphoreRef sem) { body(sem); })();
    });
  });
}

// `launches` launches with the implicit start barrier, each moving its number to the right.
void barriers(int launches) {
  expect_clean("barriers", [&] {
    run_program([&] {
      const int n = lax::axis_size("x");
      const int me = lax::axis_index("x");
      for (int l = 0; l < launches; ++l) {
        Array<float> x({8, 128});
        for (int64_t i = 0; i < x.size(); ++i) x[i] = static_cast<float>(l * n + me);
        auto permute = pl::kernel(
            pl::out_type<float>({8, 128}), pltpu::TensorCoreMesh("core", 1),
            pl::scratch_types(pltpu::SemaphoreType::DMA, pltpu::SemaphoreType::DMA),
            pl::name("permute"))([n](pltpu::HbmRef<const float> in, pltpu::HbmRef<float> out,
                                     pltpu::DmaSemaphoreRef send, pltpu::DmaSemaphoreRef recv) {
          const int right = (lax::axis_index("x") + 1) % n;
          auto copy = pltpu::make_async_remote_copy(in, out, send, recv, {right});
          copy.start();
          copy.wait();
        });
        const Array<float> y = permute(x);
        const auto want = static_cast<float>(l * n + (me + n - 1) % n);
        if (y[0] != want || y[y.size() - 1] != want) {
          wrong("barriers: launch " + std::to_string(l) + " holds " + std::to_string(y[0]) +
                ", expected " + std::to_string(want));
          return;
        }
      }
    });
  });
}

// Device 0 signals device 1, whose kernel ends without waiting: every rank reports it.
void never_waited(int programs) {
  for (int p = 0; p < programs; ++p) {
    if (!mpi_expect::wanted("never_waited")) return;
    try {
      run_program([] {
        pl::kernel(pl::out_type<float>({8, 128}), pltpu::TensorCoreMesh("core", 1),
                   pl::scratch_types(pltpu::SemaphoreType::REGULAR),
                   pl::name("stray"))([](pltpu::HbmRef<float>, pltpu::SemaphoreRef sem) {
          const int n = lax::axis_size("x");
          if (lax::axis_index("x") == 0) {
            pl::semaphore_signal(sem, 1, pl::device_id({1 % n}), pl::DeviceIdType::MESH);
          }
        })();
      });
      wrong("never_waited: program " + std::to_string(p) + " raised nothing");
      return;
    } catch (const Error& e) {
      const std::string what = e.what();
      if (std::getenv("MPI_EXPECT_VERBOSE") != nullptr) {
        std::cout << "rank " << jax::process_index() << ": never_waited: " << what << std::endl;
      }
      // Device 1 finds the signal on its semaphore as its kernel ends, or receives it after it.
      if (what.find("semaphore") == std::string::npos &&
          what.find("after it had left") == std::string::npos) {
        wrong("never_waited: " + what);
        return;
      }
    }
  }
}

}  // namespace

int main(int argc, char** argv) {
  if (argc > 1) mpi_expect::g_only = argv[1];
  ping_ring(3000);
  burst(3 * 256 + 5, false);
  burst(3 * 256 + 5, true);
  barriers(300);
  never_waited(10);
  if (mpi_expect::g_wrong == 0 && tessera::jax::process_index() == 0) {
    std::cout << "mpi_signals: all passed" << std::endl;
  }
  return mpi_expect::g_wrong == 0 ? 0 : 1;
}
