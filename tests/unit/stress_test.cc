// Correct kernels that synchronise cores, run many times under both engines: the checked engine
// must never report a race or a deadlock in them (a false report is a bug of ours), and both
// engines must compute the right values. Cross-core handoffs through a REGULAR semaphore, ring
// exchanges, and barriers; over 100,000 synchronisations per engine in all. Timing does not
// matter here: the kernels are correct whatever the interleaving, and the point is to try many.
#include <gtest/gtest.h>

#include <cstdint>
#include <optional>

#include "support/checked_support.h"
#include "tessera/tessera.h"

namespace {
using namespace tessera;

constexpr int kLaunches = 200;
constexpr int kRounds = 250;  // synchronisations per launch and test: 50,000 per test and engine

std::optional<pltpu::InterpretParams> engine(bool checked) {
  if (!checked) return std::nullopt;
  pltpu::InterpretParams p;
  p.dma_execution_mode = pltpu::DmaExecutionMode::on_wait;
  return p;
}

template <class Builder>
auto with_engine(Builder b, bool checked) {
  if (auto p = engine(checked)) b.set(*p);
  return b;
}

// Core 0 writes round r into HBM and signals core 1, which reads it back, checks it and signals
// the acknowledgement; the next round's write waits for that acknowledgement.
void handoffs(bool checked) {
  auto k = with_engine(
      pl::kernel(pl::out_type<int32_t>({2, 128}), pltpu::TensorCoreMesh("core", 2),
                 pl::scratch_types(pltpu::VMEM<int32_t>({128}), pltpu::SemaphoreType::REGULAR,
                                   pltpu::SemaphoreType::REGULAR),
                 pltpu::CompilerParams{.wait_timeout_ms = 60000}),
      checked)([](pltpu::HbmRef<int32_t> o, pltpu::VmemRef<int32_t> v, pltpu::SemaphoreRef ready,
                  pltpu::SemaphoreRef ack) {
    const int c = lax::axis_index("core");
    int32_t errors = 0;
    for (int r = 0; r < kRounds; ++r) {
      if (c == 0) {
        v = jnp::full_like(v, r);
        pltpu::sync_copy(v, o.at(0));
        pl::semaphore_signal(ready, 1, pl::core_index(1));
        pl::semaphore_wait(ack);
      } else {
        pl::semaphore_wait(ready);
        pltpu::sync_copy(o.at(0), v);
        for (int i = 0; i < 128; ++i) errors += v(i) != r ? 1 : 0;
        pl::semaphore_signal(ack, 1, pl::core_index(0));
      }
    }
    if (c == 1) {
      v = jnp::full_like(v, errors);
      pltpu::sync_copy(v, o.at(1));
    }
  });
  for (int l = 0; l < kLaunches; ++l) {
    const Array<int32_t> o = k();
    ASSERT_EQ(o[128], 0) << "launch " << l << ": core 1 read values core 0 had not written";
    ASSERT_EQ(o[0], kRounds - 1);
  }
}

// Every core writes its slot, signals its right neighbour, waits for its left neighbour's signal
// and reads that neighbour's slot; a barrier ends each round, so no slot is rewritten while
// another core may still read it.
void ring(bool checked, int cores) {
  auto k = with_engine(
      pl::kernel(pl::out_type<int32_t>({cores, 128}), pltpu::TensorCoreMesh("core", cores),
                 pl::scratch_types(pltpu::VMEM<int32_t>({128}), pltpu::SemaphoreType::REGULAR,
                                   pltpu::SemaphoreType::REGULAR),
                 pltpu::CompilerParams{.wait_timeout_ms = 60000}),
      checked)([cores](pltpu::HbmRef<int32_t> o, pltpu::VmemRef<int32_t> v,
                       pltpu::SemaphoreRef arrived, pltpu::SemaphoreRef barrier) {
    const int c = lax::axis_index("core");
    const int left = (c + cores - 1) % cores;
    int32_t errors = 0;
    for (int r = 0; r < kRounds; ++r) {
      v = jnp::full_like(v, r * 8 + c);
      pltpu::sync_copy(v, o.at(c));
      pl::semaphore_signal(arrived, 1, pl::core_index((c + 1) % cores));
      pl::semaphore_wait(arrived);
      pltpu::sync_copy(o.at(left), v);
      errors += v(0) != r * 8 + left ? 1 : 0;
      pltpu::core_barrier(barrier, "core");
    }
    v = jnp::full_like(v, errors);
    pltpu::core_barrier(barrier, "core");
    pltpu::sync_copy(v, o.at(c));
  });
  for (int l = 0; l < kLaunches; ++l) {
    const Array<int32_t> o = k();
    for (int c = 0; c < cores; ++c) ASSERT_EQ(o[c * 128], 0) << "launch " << l << " core " << c;
  }
}

TEST(StressNative, HandoffsThroughARegularSemaphore) { handoffs(false); }
TEST(StressChecked, HandoffsThroughARegularSemaphore) { handoffs(true); }
TEST(StressNative, RingExchangesAndBarriers) { ring(false, 2); }
TEST(StressChecked, RingExchangesAndBarriers) { ring(true, 2); }
TEST(StressChecked, RingExchangesOnThreeCores) { ring(true, 3); }

}  // namespace
