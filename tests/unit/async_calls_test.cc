// pallas_call outputs that stay on the chip (tessera/resident.h): VMEM arrays and semaphores, so
// that a DMA started in one call is waited in the next. The cases port Pallas'
// tpu_pallas_async_test (make_async_copy / make_async_slice / make_async_dynamic_slice and the
// stateful forms), each run natively and in checked mode (where the copy stays in flight between
// the calls), plus the errors.
#include <gtest/gtest.h>

#include <optional>
#include <tuple>
#include <vector>

#include "support/expect_error.h"
#include "tessera/tessera.h"

namespace {
using namespace tessera;

Array<float> iota_f(Shape shape) {
  Array<float> a(std::move(shape));
  for (int64_t i = 0; i < a.size(); ++i) a[i] = static_cast<float>(i) * 0.5f - 3.0f;
  return a;
}

// The two engines every case runs under: natively, and checked with the copy completing as late
// as it can (at the wait in the second call) or at once.
std::vector<std::optional<pltpu::InterpretParams>> engines() {
  pltpu::InterpretParams on_wait;
  pltpu::InterpretParams eager;
  eager.dma_execution_mode = pltpu::DmaExecutionMode::eager;
  return {std::nullopt, on_wait, eager};
}

// Pallas' make_async_copy(target_memory_space): copy_start starts x -> out and returns x (aliased)
// with the future (out, sem); copy_done waits and returns out. `Vmem` picks a VMEM `out`.
template <bool Vmem>
struct AsyncCopy {
  using Out = std::conditional_t<Vmem, pltpu::VmemArray<float>, Array<float>>;
  std::optional<pltpu::InterpretParams> params;

  auto start(const Array<float>& x) const {
    using OutRef = std::conditional_t<Vmem, pltpu::VmemRef<float>, pltpu::AnyRef<float>>;
    auto body = [](pltpu::AnyRef<const float> x_ref, pltpu::AnyRef<float> /*aliased_x*/,
                   OutRef o_ref, pltpu::DmaSemaphoreRef sem) {
      pltpu::make_async_copy(x_ref, o_ref, sem).start();
    };
    auto out_item = [&] {
      if constexpr (Vmem) {
        return pltpu::VMEM<float>(x.shape());
      } else {
        return ShapeDtypeStruct<float>{x.shape()};
      }
    }();
    const pl::BlockSpec out_spec = Vmem ? pl::BlockSpec(pltpu::VMEM) : pl::BlockSpec(pl::ANY);
    auto f = pl::pallas_call(
        body,
        pl::out_shape(ShapeDtypeStruct<float>{x.shape()}, out_item, pltpu::SemaphoreType::DMA),
        pl::in_specs(pl::BlockSpec(pl::ANY)),
        pl::out_specs(pl::BlockSpec(pl::ANY), out_spec, pl::BlockSpec(pltpu::SEMAPHORE)),
        pl::input_output_aliases({{0, 0}}), pltpu::TensorCoreMesh("core", 1));
    return run(f, x);
  }

  Out done(const Array<float>& x, const Out& out, const pltpu::DmaSemaphoreArray& sem) const {
    using OutRef = std::conditional_t<Vmem, pltpu::VmemRef<float>, pltpu::AnyRef<float>>;
    using InRef = std::conditional_t<Vmem, pltpu::VmemRef<const float>, pltpu::AnyRef<const float>>;
    auto body = [](pltpu::AnyRef<const float> x_ref, InRef /*o_in*/, pltpu::DmaSemaphoreRef sem_ref,
                   OutRef o_ref) { pltpu::make_async_copy(x_ref, o_ref, sem_ref).wait(); };
    const pl::BlockSpec space = Vmem ? pl::BlockSpec(pltpu::VMEM) : pl::BlockSpec(pl::ANY);
    auto out_item = [&] {
      if constexpr (Vmem) {
        return pltpu::VMEM<float>(x.shape());
      } else {
        return ShapeDtypeStruct<float>{x.shape()};
      }
    }();
    auto f = pl::pallas_call(
        body, pl::out_shape(out_item),
        pl::in_specs(pl::BlockSpec(pl::ANY), space, pl::BlockSpec(pltpu::SEMAPHORE)),
        pl::out_specs(space), pl::input_output_aliases({{1, 0}}), pltpu::TensorCoreMesh("core", 1));
    return run(f, x, out, sem);
  }

  template <class F, class... A>
  auto run(const F& f, const A&... a) const {
    if (params) {
      pltpu::ForceTpuInterpretMode force(*params);
      return f(a...);
    }
    return f(a...);
  }
};

template <bool Vmem>
void basic_async_copy() {
  const Array<float> x = iota_f({8, 128});
  for (const auto& params : engines()) {
    const AsyncCopy<Vmem> copy{params};
    auto [x2, out, sem] = copy.start(x);
    // The copy's bytes sit on the semaphore between the calls (natively the copy completed when
    // it started; in checked on_wait mode it is still in flight, counted when it lands).
    if (!params || params->dma_execution_mode == pltpu::DmaExecutionMode::eager) {
      EXPECT_EQ(sem.value(), 8 * 128 * 4);
    } else {
      EXPECT_EQ(sem.value(), 0);
    }
    const auto y = copy.done(x2, out, sem);
    for (int64_t i = 0; i < y.size(); ++i) ASSERT_EQ(y[i], x[i]) << i;
    EXPECT_EQ(sem.value(), 0);
  }
}

TEST(AsyncCalls, BasicAsyncCopy) { basic_async_copy<false>(); }
TEST(AsyncCalls, BasicAsyncCopyIntoVmem) { basic_async_copy<true>(); }

template <bool Vmem>
void multiple_async_copy() {
  const Array<float> x = iota_f({8, 128});
  for (const auto& params : engines()) {
    const AsyncCopy<Vmem> copy{params};
    auto [x1, out1, sem1] = copy.start(x);
    auto [x2, out2, sem2] = copy.start(x1);
    const auto y1 = copy.done(x1, out1, sem1);
    const auto y2 = copy.done(x2, out2, sem2);
    for (int64_t i = 0; i < x.size(); ++i) {
      ASSERT_EQ(y1[i], x[i]) << i;
      ASSERT_EQ(y2[i], x[i]) << i;
    }
  }
}

TEST(AsyncCalls, MultipleAsyncCopy) { multiple_async_copy<false>(); }
TEST(AsyncCalls, MultipleAsyncCopyIntoVmem) { multiple_async_copy<true>(); }

TEST(AsyncCalls, CopyInALoop) {
  // test_copy_in_a_loop: start and wait in each iteration, carrying x through the loop.
  Array<float> x = iota_f({16, 8, 128});
  const Array<float> want = x;
  for (const auto& params : engines()) {
    const AsyncCopy<false> copy{params};
    Array<float> carry = want;
    for (int i = 0; i < 4; ++i) {
      auto [x2, out, sem] = copy.start(carry);
      carry = copy.done(x2, out, sem);
    }
    for (int64_t i = 0; i < want.size(); ++i) ASSERT_EQ(carry[i], want[i]) << i;
  }
}

TEST(AsyncCalls, StaggeredCopyInALoop) {
  // test_staggered_copy_in_a_loop: each iteration waits the previous copy, then starts the next.
  const Array<float> x = iota_f({16, 8, 128});
  for (const auto& params : engines()) {
    const AsyncCopy<false> copy{params};
    auto [x0, out0, sem0] = copy.start(x);
    Array<float> xs = std::move(x0);
    Array<float> out = std::move(out0);
    pltpu::DmaSemaphoreArray sem = sem0;
    for (int i = 0; i < 3; ++i) {
      const Array<float> y = copy.done(xs, out, sem);
      auto [x1, out1, sem1] = copy.start(y);
      xs = std::move(x1);
      out = std::move(out1);
      sem = sem1;
    }
    const Array<float> y = copy.done(xs, out, sem);
    for (int64_t i = 0; i < x.size(); ++i) ASSERT_EQ(y[i], x[i]) << i;
  }
}

// Pallas' make_async_slice(index) / make_async_dynamic_slice(index): copy x[index] into an
// output of x.shape[1:]; the dynamic form reads the index from scalar prefetch.
struct AsyncSlice {
  std::optional<pltpu::InterpretParams> params;

  auto start(const Array<float>& x, int index) const {
    const Shape row({x.shape()[1], x.shape()[2]});
    auto f = pl::pallas_call(
        [](pltpu::SmemRef<int32_t> idx, pltpu::AnyRef<const float> x_ref, pltpu::AnyRef<float>,
           pltpu::AnyRef<float> o_ref, pltpu::DmaSemaphoreRef sem) {
          pltpu::make_async_copy(x_ref.at(idx(0)), o_ref, sem).start();
        },
        pl::out_shape(ShapeDtypeStruct<float>{x.shape()}, ShapeDtypeStruct<float>{row},
                      pltpu::SemaphoreType::DMA({})),
        pltpu::PrefetchScalarGridSpec<1>(
            pl::in_specs(pl::BlockSpec(pl::ANY)),
            pl::out_specs(pl::BlockSpec(pl::ANY), pl::BlockSpec(pl::ANY),
                          pl::BlockSpec(pltpu::SEMAPHORE))),
        pl::input_output_aliases({{1, 0}}), pltpu::TensorCoreMesh("core", 1));
    const Array<int32_t> idx({1}, {index});
    if (params) {
      pltpu::ForceTpuInterpretMode force(*params);
      return f(idx, x);
    }
    return f(idx, x);
  }

  Array<float> done(const Array<float>& x, const Array<float>& out,
                    const pltpu::DmaSemaphoreArray& sem) const {
    auto f = pl::pallas_call(
        [](pltpu::AnyRef<const float> x_ref, pltpu::AnyRef<const float>,
           pltpu::DmaSemaphoreRef sem_ref, pltpu::AnyRef<float> o_ref) {
          pltpu::make_async_copy(x_ref.at(0), o_ref, sem_ref).wait();
        },
        pl::out_shape<float>(out.shape()),
        pl::in_specs(pl::BlockSpec(pl::ANY), pl::BlockSpec(pl::ANY),
                     pl::BlockSpec(pltpu::SEMAPHORE)),
        pl::out_specs(pl::BlockSpec(pl::ANY)), pl::input_output_aliases({{1, 0}}),
        pltpu::TensorCoreMesh("core", 1));
    if (params) {
      pltpu::ForceTpuInterpretMode force(*params);
      return f(x, out, sem);
    }
    return f(x, out, sem);
  }
};

TEST(AsyncCalls, AsyncDynamicSlice) {
  // test_async_slice / test_async_dynamic_slice / test_multi_async_dynamic_slice.
  const Array<float> x = iota_f({4, 8, 128});
  for (const auto& params : engines()) {
    const AsyncSlice slice{params};
    auto [xa, out_a, sem_a] = slice.start(x, 2);
    auto [xb, out_b, sem_b] = slice.start(xa, 3);
    const Array<float> ya = slice.done(xa, out_a, sem_a);
    const Array<float> yb = slice.done(xb, out_b, sem_b);
    for (int64_t i = 0; i < 8 * 128; ++i) {
      ASSERT_EQ(ya[i], x[2 * 8 * 128 + i]) << i;
      ASSERT_EQ(yb[i], x[3 * 8 * 128 + i]) << i;
    }
  }
}

TEST(AsyncCalls, FullCopyInALoop) {
  // test_full_copy_in_a_loop: every row copied through its own start/done pair.
  const Array<float> x = iota_f({4, 8, 128});
  for (const auto& params : engines()) {
    const AsyncSlice slice{params};
    for (int i = 0; i < 4; ++i) {
      auto [xs, out, sem] = slice.start(x, i);
      const Array<float> y = slice.done(xs, out, sem);
      for (int64_t k = 0; k < 8 * 128; ++k) ASSERT_EQ(y[k], x[i * 8 * 128 + k]) << i << "," << k;
    }
  }
}

// Pallas' stateful forms: copy_start returns only the semaphore; copy_done has no outputs at all
// and only waits (the copy's arrays are the caller's). Here they are passed as ANY operands, the
// destination aliased through the start call.
TEST(AsyncCalls, StatefulAsyncCopyWithNoOutputs) {
  const Array<float> x = iota_f({8, 128});
  for (const auto& params : engines()) {
    auto start = pl::pallas_call(
        [](pltpu::AnyRef<const float> x_ref, pltpu::AnyRef<float> o_ref,
           pltpu::DmaSemaphoreRef sem) { pltpu::make_async_copy(x_ref, o_ref, sem).start(); },
        pl::out_shape(ShapeDtypeStruct<float>{x.shape()}, pltpu::SemaphoreType::DMA),
        pl::in_specs(pl::BlockSpec(pl::ANY)),
        pl::out_specs(pl::BlockSpec(pl::ANY), pl::BlockSpec(pltpu::SEMAPHORE)),
        pltpu::TensorCoreMesh("core", 1));
    auto done = pl::pallas_call(
        [](pltpu::AnyRef<const float> x_ref, pltpu::AnyRef<const float> /*o_ref*/,
           pltpu::DmaSemaphoreRef sem, pltpu::VmemRef<float> v) {
          // The descriptor only sizes the wait (its source's bytes).
          pltpu::make_async_copy(x_ref, v, sem).wait();
        },
        pl::in_specs(pl::BlockSpec(pl::ANY), pl::BlockSpec(pl::ANY),
                     pl::BlockSpec(pltpu::SEMAPHORE)),
        pl::scratch_shapes(pltpu::VMEM<float>({8, 128})), pltpu::TensorCoreMesh("core", 1));
    std::optional<pltpu::ForceTpuInterpretMode> force;
    if (params) force.emplace(*params);
    auto [y, sem] = start(x);
    done(x, y, sem);  // returns nothing: pallas_call with no outputs
    for (int64_t i = 0; i < x.size(); ++i) ASSERT_EQ(y[i], x[i]) << i;
    EXPECT_EQ(sem.value(), 0);
  }
}

TEST(AsyncCalls, CarriedCopyMustFindItsArrays) {
  // In checked mode the copy is still in flight at the end of the first call; a call that waits
  // for it without taking its destination cannot know where it lands: on a TPU that memory may
  // already be reused. Natively the copy completed within the first call, and the same calls are
  // fine.
  const Array<float> x = iota_f({8, 128});
  auto start = pl::pallas_call(
      [](pltpu::AnyRef<const float> x_ref, pltpu::AnyRef<float> o_ref, pltpu::DmaSemaphoreRef sem) {
        pltpu::make_async_copy(x_ref, o_ref, sem).start();
      },
      pl::out_shape(ShapeDtypeStruct<float>{x.shape()}, pltpu::SemaphoreType::DMA),
      pl::in_specs(pl::BlockSpec(pl::ANY)),
      pl::out_specs(pl::BlockSpec(pl::ANY), pl::BlockSpec(pltpu::SEMAPHORE)),
      pltpu::TensorCoreMesh("core", 1));
  const int start_line = __LINE__ - 6;
  auto wait_only = pl::pallas_call(
      [](pltpu::AnyRef<const float> x_ref, pltpu::DmaSemaphoreRef sem, pltpu::VmemRef<float> v) {
        pltpu::make_async_copy(x_ref, v, sem).wait();  // sizes the wait: 4096 bytes
      },
      pl::in_specs(pl::BlockSpec(pl::ANY), pl::BlockSpec(pltpu::SEMAPHORE)),
      pl::scratch_shapes(pltpu::VMEM<float>({8, 128})), pltpu::TensorCoreMesh("core", 1));
  {
    auto [y, sem] = start(x);
    wait_only(x, sem);
    for (int64_t i = 0; i < x.size(); ++i) ASSERT_EQ(y[i], x[i]) << i;
  }
  pltpu::ForceTpuInterpretMode force{pltpu::InterpretParams{}};
  auto [y, sem] = start(x);
  auto e = tessera::testing::catch_error<KernelError>([&] { wait_only(x, sem); });
  ASSERT_TRUE(e);
  EXPECT_EQ(e->kind(), ErrorKind::kInvalidArgument);
  EXPECT_EQ(static_cast<int>(e->where().line()), start_line) << e->what();
  EXPECT_NE(std::string(e->what()).find("does not take its destination array"), std::string::npos)
      << e->what();
}

TEST(AsyncCalls, ACopyNeverWaitedStillLeaks) {
  // A semaphore output carries its count out of the call, but scratch semaphores still must be
  // zero at exit: the semaphore exemption is only for semaphores the call returns.
  const Array<float> x = iota_f({8, 128});
  auto f = pl::pallas_call(
      [](pltpu::AnyRef<const float> x_ref, pltpu::AnyRef<float> o_ref, pltpu::DmaSemaphoreRef sem) {
        pltpu::make_async_copy(x_ref, o_ref, sem).start();
      },
      pl::out_shape<float>({8, 128}), pl::in_specs(pl::BlockSpec(pl::ANY)),
      pl::out_specs(pl::BlockSpec(pl::ANY)), pl::scratch_shapes(pltpu::SemaphoreType::DMA),
      pltpu::TensorCoreMesh("core", 1));
  EXPECT_THROW(f(x), KernelError);
}

TEST(AsyncCalls, SemaphoreArrayValueIsBoundsChecked) {
  const pltpu::DmaSemaphoreArray sems(Shape{2});
  EXPECT_EQ(sems.value(1), 0);
  const int line = __LINE__ + 1;
  EXPECT_TESSERA_ERROR(sems.value(2), UsageError, ErrorKind::kOutOfBounds, "outside 0..1", line);
}

TEST(AsyncCalls, SemaphoreOperandsNeedTheirSpec) {
  const Array<float> x = iota_f({8, 128});
  const int line = __LINE__ + 7;
  auto f = pl::pallas_call(
      [](pltpu::AnyRef<const float> x_ref, pltpu::AnyRef<float> o_ref, pltpu::DmaSemaphoreRef sem) {
        pltpu::make_async_copy(x_ref, o_ref, sem).start();
      },
      pl::out_shape(ShapeDtypeStruct<float>{x.shape()}, pltpu::SemaphoreType::DMA),
      pl::in_specs(pl::BlockSpec(pl::ANY)),
      pl::out_specs(pl::BlockSpec(pl::ANY), pl::BlockSpec(pltpu::VMEM)),
      pltpu::TensorCoreMesh("core", 1));
  EXPECT_TESSERA_ERROR(f(x), UsageError, ErrorKind::kInvalidArgument,
                       "output 1 is a semaphore array, but its BlockSpec is in VMEM", line);
}

TEST(AsyncCalls, VmemOutputsCountAgainstTheBudget) {
  // A VMEM array lives in VMEM for the call: 12 MiB of it under an 8 MiB limit is refused.
  const int line = __LINE__ + 2;
  auto f = pl::pallas_call([](pltpu::VmemRef<float> o) { o = jnp::zeros_like(o); },
                           pl::out_shape(pltpu::VMEM<float>({3 << 20})),
                           pltpu::CompilerParams{.vmem_limit_bytes = 8 << 20},
                           pltpu::TensorCoreMesh("core", 1));
  EXPECT_TESSERA_ERROR(f(), UsageError, ErrorKind::kCapacityExceeded, "the VMEM array (3145728,)",
                       line);
  auto g = pl::pallas_call([](pltpu::VmemRef<float> o) { o = jnp::full_like(o, 2.0f); },
                           pl::out_shape(pltpu::VMEM<float>({1 << 20})),
                           pltpu::CompilerParams{.vmem_limit_bytes = 8 << 20},
                           pltpu::TensorCoreMesh("core", 1));
  const pltpu::VmemArray<float> v = g();
  for (float e : v) ASSERT_EQ(e, 2.0f);
}

}  // namespace
