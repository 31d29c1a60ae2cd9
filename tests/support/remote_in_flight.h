// A program whose remote copies stay in flight between calls (docs/devices.md), shared by the
// in-process tests (tests/unit/remote_in_flight_test.cc) and the MPI ones
// (tests/mpi/mpi_between_calls.cc): a pallas_call on every device of the 1-D mesh "x" starts a
// remote copy of its (1, 8, 128) block to its right neighbour on semaphores it returns; later
// calls wait for it, wait_send on the sender and wait_recv on the receiver (Pallas'
// make_async_remote_copy helpers of tpu_pallas_async_test), or plant one of the bugs.
#pragma once

#include <atomic>
#include <functional>
#include <optional>
#include <tuple>

#include "tessera/tessera.h"

namespace tessera::testing {

enum class Bug {
  kNone,
  kReadDestinationBeforeWaitRecv,
  kWriteSourceBeforeWaitSend,
  kNeverWaitRecv,
  kNeverWaitSend,
  kWaitWithoutDestination,
};

// The line of the copy's .start(), written by every device's thread (the same value).
inline std::atomic<int> g_start_line{0};

// One (1, 8, 128) block per device; the copy goes to the right neighbour.
struct RemoteInFlightProgram {
  std::optional<pltpu::InterpretParams> engine;
  Bug bug = Bug::kNone;
  bool remote_waits = false;  // wait with remote descriptors (wait_send / wait_recv)

  // pallas_call(body, options...)(args...), checked with `engine` when set (an option of the
  // call: every device's calls run at once, so a process-wide force would race).
  template <class Body, class... A, class... O>
  auto call(Body body, const std::tuple<const A&...>& args, O... options) const {
    auto go = [&](const auto& f) { return std::apply(f, args); };
    if (engine) return go(pl::pallas_call(body, options..., *engine));
    return go(pl::pallas_call(body, options...));
  }

  auto start(const Array<float>& x) const {
    return call(
        [](pltpu::AnyRef<const float> x_ref, pltpu::AnyRef<float>, pltpu::AnyRef<float> o_ref,
           pltpu::DmaSemaphoreRef send, pltpu::DmaSemaphoreRef recv) {
          const int n = lax::axis_size("x");
          const int me = lax::axis_index("x");
          auto barrier = pltpu::get_barrier_semaphore();
          pl::semaphore_signal(barrier, 1, pl::device_id((me + n - 1) % n));
          pl::semaphore_wait(barrier, 1);
          g_start_line.store(__LINE__ + 1);
          pltpu::make_async_remote_copy(x_ref, o_ref, send, recv, (me + 1) % n).start();
        },
        std::forward_as_tuple(x),
        pl::out_shape(ShapeDtypeStruct<float>{x.shape()}, ShapeDtypeStruct<float>{x.shape()},
                      pltpu::SemaphoreType::DMA, pltpu::SemaphoreType::DMA),
        pl::in_specs(pl::BlockSpec(pl::ANY)),
        pl::out_specs(pl::BlockSpec(pl::ANY), pl::BlockSpec(pl::ANY),
                      pl::BlockSpec(pltpu::SEMAPHORE), pl::BlockSpec(pltpu::SEMAPHORE)),
        pl::input_output_aliases({{0, 0}}), pltpu::CompilerParams{.collective_id = 0},
        pl::name("copy_start"));
  }

  // Waits for the bytes to leave x (aliased to the output); the bug overwrites x first.
  Array<float> send_done(const Array<float>& x, const pltpu::DmaSemaphoreArray& sem) const {
    return call(
        [bug = bug, remote = remote_waits](pltpu::AnyRef<const float> x_ref,
                                           pltpu::DmaSemaphoreRef s, pltpu::AnyRef<float> o_ref,
                                           pltpu::VmemRef<float> v) {
          v = jnp::zeros_like(v);
          if (bug == Bug::kWriteSourceBeforeWaitSend) pltpu::sync_copy(v, o_ref);
          if (remote) {
            const int n = lax::axis_size("x");
            pltpu::make_async_remote_copy(x_ref, o_ref, s, s, (lax::axis_index("x") + 1) % n)
                .wait_send();
          } else {
            pltpu::make_async_copy(x_ref, o_ref, s).wait();
          }
        },
        std::forward_as_tuple(x, sem), pl::out_shape<float>(x.shape()),
        pl::in_specs(pl::BlockSpec(pl::ANY), pl::BlockSpec(pltpu::SEMAPHORE)),
        pl::out_specs(pl::BlockSpec(pl::ANY)), pl::input_output_aliases({{0, 0}}),
        pl::scratch_shapes(pltpu::VMEM<float>(x.shape())), pl::name("send_done"));
  }

  // Waits for the bytes to land in `out` (aliased to the output), then reads them; the bug reads
  // first.
  Array<float> recv_done(const Array<float>& x, const Array<float>& out,
                         const pltpu::DmaSemaphoreArray& sem) const {
    return call(
        [bug = bug, remote = remote_waits](pltpu::AnyRef<const float> x_ref,
                                           pltpu::AnyRef<const float>, pltpu::DmaSemaphoreRef s,
                                           pltpu::AnyRef<float> o_ref, pltpu::VmemRef<float> v) {
          if (bug == Bug::kReadDestinationBeforeWaitRecv) pltpu::sync_copy(o_ref, v);
          if (remote) {
            const int n = lax::axis_size("x");
            pltpu::make_async_remote_copy(x_ref, o_ref, s, s, (lax::axis_index("x") + 1) % n)
                .wait_recv();
          } else {
            pltpu::make_async_copy(x_ref, o_ref, s).wait();
          }
          pltpu::sync_copy(o_ref, v);
        },
        std::forward_as_tuple(x, out, sem), pl::out_shape<float>(x.shape()),
        pl::in_specs(pl::BlockSpec(pl::ANY), pl::BlockSpec(pl::ANY),
                     pl::BlockSpec(pltpu::SEMAPHORE)),
        pl::out_specs(pl::BlockSpec(pl::ANY)), pl::input_output_aliases({{1, 0}}),
        pl::scratch_shapes(pltpu::VMEM<float>(x.shape())), pl::name("recv_done"));
  }

  // A wait that takes the semaphore but not the destination (the descriptor names scratch).
  void recv_done_without_destination(const Array<float>& x,
                                     const pltpu::DmaSemaphoreArray& sem) const {
    call([](pltpu::AnyRef<const float> x_ref, pltpu::DmaSemaphoreRef s,
            pltpu::VmemRef<float> v) { pltpu::make_async_copy(x_ref, v, s).wait(); },
         std::forward_as_tuple(x, sem),
         pl::in_specs(pl::BlockSpec(pl::ANY), pl::BlockSpec(pltpu::SEMAPHORE)),
         pl::scratch_shapes(pltpu::VMEM<float>(x.shape())), pl::name("recv_done_no_dst"));
  }

  // One device's part: `rounds` times start, send_done, recv_done (the result carried round).
  // `between(send, recv)`, when given, sees the semaphores' counts between the calls.
  Array<float> device(const Array<float>& xs, int rounds,
                      const std::function<void(int64_t, int64_t)>& between = {}) const {
    Array<float> carry = xs;
    for (int i = 0; i < rounds; ++i) {
      auto [x1, out, send, recv] = start(carry);
      if (between) between(send.value(), recv.value());
      Array<float> x2 = x1;
      if (bug != Bug::kNeverWaitSend) x2 = send_done(x1, send);
      if (bug == Bug::kNeverWaitRecv) return x2;
      if (bug == Bug::kWaitWithoutDestination) {
        recv_done_without_destination(x2, recv);
        return out;
      }
      carry = recv_done(x2, out, recv);
    }
    return carry;
  }
};

}  // namespace tessera::testing
