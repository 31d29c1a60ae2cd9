// Ports of Pallas' tpu_pallas_async_test.py (docs/pallas-parity.md): a DMA started by one
// pallas_call and waited by the next, the semaphore (and a VMEM destination) carried between the
// calls as outputs (tessera/resident.h). Run under TESSERA_INTERPRET=1 (ctest's checked_env),
// the copy is still in flight between the calls and lands at the wait.
#include <gtest/gtest.h>

#include <cstdint>
#include <tuple>
#include <type_traits>

#include "support/pallas_port.h"
#include "tessera/tessera.h"

namespace {
using namespace tessera;
using namespace tessera::pallas_port;

// Pallas' make_async_copy(target_memory_space): copy_start starts x -> out and returns x
// (aliased) with the future (out, sem); copy_done waits and returns out (aliased).
template <bool kVmem>
struct AsyncCopy {
  using Out = std::conditional_t<kVmem, pltpu::VmemArray<float>, Array<float>>;
  using OutRef = std::conditional_t<kVmem, pltpu::VmemRef<float>, pltpu::AnyRef<float>>;
  using InRef = std::conditional_t<kVmem, pltpu::VmemRef<const float>, pltpu::AnyRef<const float>>;

  static auto out_item(const Shape& s) {
    if constexpr (kVmem) {
      return pltpu::VMEM<float>(s);
    } else {
      return ShapeDtypeStruct<float>{s};
    }
  }
  static pl::BlockSpec space() {
    return kVmem ? pl::BlockSpec(pltpu::VMEM) : pl::BlockSpec(pl::ANY);
  }

  static auto start(const Array<float>& x) {
    return pl::pallas_call(
        [](pltpu::AnyRef<const float> x_ref, pltpu::AnyRef<float>, OutRef o_ref,
           pltpu::DmaSemaphoreRef sem) { pltpu::make_async_copy(x_ref, o_ref, sem).start(); },
        pl::out_shape(ShapeDtypeStruct<float>{x.shape()}, out_item(x.shape()),
                      pltpu::SemaphoreType::DMA({})),
        pl::in_specs(pl::BlockSpec(pl::ANY)),
        pl::out_specs(pl::BlockSpec(pl::ANY), space(), pl::BlockSpec(pltpu::SEMAPHORE)),
        pl::input_output_aliases({{0, 0}}))(x);
  }

  static Out done(const Array<float>& x, const Out& out, const pltpu::DmaSemaphoreArray& sem) {
    return pl::pallas_call(
        [](pltpu::AnyRef<const float> x_ref, InRef, pltpu::DmaSemaphoreRef s, OutRef o_ref) {
          pltpu::make_async_copy(x_ref, o_ref, s).wait();
        },
        pl::out_shape(out_item(x.shape())),
        pl::in_specs(pl::BlockSpec(pl::ANY), space(), pl::BlockSpec(pltpu::SEMAPHORE)),
        pl::out_specs(space()), pl::input_output_aliases({{1, 0}}))(x, out, sem);
  }
};

void expect_same(const Array<float>& y, const Array<float>& x, int64_t offset = 0) {
  for (int64_t i = 0; i < y.size(); ++i) ASSERT_EQ(y[i], x[offset + i]) << i;
}

TEST(TpuPallasAsyncTest, AsyncCopyBasicAsyncCopy) {
  const Array<float> x = random_array<float>({8, 128}, 0);
  auto [x1, out, sem] = AsyncCopy<false>::start(x);
  expect_same(AsyncCopy<false>::done(x1, out, sem), x);
}

TEST(TpuPallasAsyncTest, AsyncCopyMultipleAsyncCopy) {
  const Array<float> x = random_array<float>({8, 128}, 0);
  auto [x1, out1, sem1] = AsyncCopy<false>::start(x);
  auto [x2, out2, sem2] = AsyncCopy<false>::start(x1);
  expect_same(AsyncCopy<false>::done(x1, out1, sem1), x);
  expect_same(AsyncCopy<false>::done(x2, out2, sem2), x);
}

TEST(TpuPallasAsyncTest, AsyncCopyBasicAsyncCopyIntoVmem) {
  const Array<float> x = random_array<float>({8, 128}, 0);
  auto [x1, out, sem] = AsyncCopy<true>::start(x);
  expect_same(AsyncCopy<true>::done(x1, out, sem), x);
}

TEST(TpuPallasAsyncTest, AsyncCopyMultipleAsyncCopyIntoVmem) {
  const Array<float> x = random_array<float>({8, 128}, 0);
  auto [x1, out1, sem1] = AsyncCopy<true>::start(x);
  auto [x2, out2, sem2] = AsyncCopy<true>::start(x);
  expect_same(AsyncCopy<true>::done(x1, out1, sem1), x);
  expect_same(AsyncCopy<true>::done(x2, out2, sem2), x);
}

TEST(TpuPallasAsyncTest, AsyncCopyCopyInALoop) {
  const Array<float> x = random_array<float>({16, 8, 128}, 0);
  Array<float> carry = x;
  for (int i = 0; i < 16; ++i) {  // lax.fori_loop(0, x.shape[0], ...)
    auto [x1, out, sem] = AsyncCopy<false>::start(carry);
    carry = AsyncCopy<false>::done(x1, out, sem);
  }
  expect_same(carry, x);
}

TEST(TpuPallasAsyncTest, AsyncCopyStaggeredCopyInALoop) {
  const Array<float> x = random_array<float>({16, 8, 128}, 0);
  auto fut = AsyncCopy<false>::start(x);
  for (int i = 0; i < 15; ++i) {
    auto& [xs, out, sem] = fut;
    const Array<float> y = AsyncCopy<false>::done(xs, out, sem);
    fut = AsyncCopy<false>::start(y);
  }
  auto& [xs, out, sem] = fut;
  expect_same(AsyncCopy<false>::done(xs, out, sem), x);
}

// Pallas' make_async_slice(index) (a static index) and make_async_dynamic_slice(index) (the
// index a scalar-prefetch operand): copy x[index] into an output of x.shape[1:].
auto slice_start(const Array<float>& x, int index) {
  const Shape row({x.shape()[1], x.shape()[2]});
  return pl::pallas_call(
      [index](pltpu::AnyRef<const float> x_ref, pltpu::AnyRef<float>, pltpu::AnyRef<float> o_ref,
              pltpu::DmaSemaphoreRef sem) {
        pltpu::make_async_copy(x_ref.at(index), o_ref, sem).start();
      },
      pl::out_shape(ShapeDtypeStruct<float>{x.shape()}, ShapeDtypeStruct<float>{row},
                    pltpu::SemaphoreType::DMA({})),
      pl::in_specs(pl::BlockSpec(pl::ANY)),
      pl::out_specs(pl::BlockSpec(pl::ANY), pl::BlockSpec(pl::ANY),
                    pl::BlockSpec(pltpu::SEMAPHORE)),
      pl::input_output_aliases({{0, 0}}))(x);
}

auto dynamic_slice_start(const Array<float>& x, int index) {
  const Shape row({x.shape()[1], x.shape()[2]});
  return pl::pallas_call(
      [](pltpu::SmemRef<int32_t> idx, pltpu::AnyRef<const float> x_ref, pltpu::AnyRef<float>,
         pltpu::AnyRef<float> o_ref, pltpu::DmaSemaphoreRef sem) {
        pltpu::make_async_copy(x_ref.at(idx(0)), o_ref, sem).start();
      },
      pl::out_shape(ShapeDtypeStruct<float>{x.shape()}, ShapeDtypeStruct<float>{row},
                    pltpu::SemaphoreType::DMA({})),
      pltpu::PrefetchScalarGridSpec<1>(pl::in_specs(pl::BlockSpec(pl::ANY)),
                                       pl::out_specs(pl::BlockSpec(pl::ANY), pl::BlockSpec(pl::ANY),
                                                     pl::BlockSpec(pltpu::SEMAPHORE))),
      pl::input_output_aliases({{1, 0}}))(Array<int32_t>({1}, {index}), x);
}

// The done kernel's descriptor only sizes the wait: the dynamic form's names x[0], the static
// form's x[index].
Array<float> slice_done(const Array<float>& x, const Array<float>& out,
                        const pltpu::DmaSemaphoreArray& sem, int index) {
  return pl::pallas_call(
      [index](pltpu::AnyRef<const float> x_ref, pltpu::AnyRef<const float>,
              pltpu::DmaSemaphoreRef s, pltpu::AnyRef<float> o_ref) {
        pltpu::make_async_copy(x_ref.at(index), o_ref, s).wait();
      },
      pl::out_shape<float>(out.shape()),
      pl::in_specs(pl::BlockSpec(pl::ANY), pl::BlockSpec(pl::ANY), pl::BlockSpec(pltpu::SEMAPHORE)),
      pl::out_specs(pl::BlockSpec(pl::ANY)), pl::input_output_aliases({{1, 0}}))(x, out, sem);
}

constexpr int64_t kRow = 8 * 128;

TEST(TpuPallasAsyncTest, AsyncCopyAsyncSlice) {
  const Array<float> x = random_array<float>({4, 8, 128}, 0);
  auto [x1, out, sem] = slice_start(x, 2);
  expect_same(slice_done(x1, out, sem, 2), x, 2 * kRow);
}

TEST(TpuPallasAsyncTest, AsyncCopyAsyncDynamicSlice) {
  const Array<float> x = random_array<float>({4, 8, 128}, 0);
  auto [x1, out, sem] = dynamic_slice_start(x, 2);
  expect_same(slice_done(x1, out, sem, 0), x, 2 * kRow);
}

TEST(TpuPallasAsyncTest, AsyncCopyMultiAsyncDynamicSlice) {
  const Array<float> x = random_array<float>({4, 8, 128}, 0);
  auto [x1, out1, sem1] = dynamic_slice_start(x, 2);
  auto [x2, out2, sem2] = dynamic_slice_start(x1, 3);
  expect_same(slice_done(x1, out1, sem1, 0), x, 2 * kRow);
  expect_same(slice_done(x2, out2, sem2, 0), x, 3 * kRow);
}

TEST(TpuPallasAsyncTest, AsyncCopyFullCopyInALoop) {
  const Array<float> x = random_array<float>({16, 8, 128}, 0);
  Array<float> ys({16, 8, 128}, 0.0f);
  Array<float> xs = x;
  for (int i = 0; i < 16; ++i) {
    auto [x1, out, sem] = dynamic_slice_start(xs, i);
    const Array<float> y = slice_done(x1, out, sem, 0);
    for (int64_t k = 0; k < kRow; ++k) ys[i * kRow + k] = y[k];  // ys.at[i].set(y)
    xs = x1;
  }
  expect_same(ys, x);
}

TEST(TpuPallasAsyncTest, AsyncCopyStaggeredFullCopyInALoop) {
  const Array<float> x = random_array<float>({16, 8, 128}, 0);
  Array<float> ys({16, 8, 128}, 0.0f);
  auto fut = dynamic_slice_start(x, 0);
  for (int i = 0; i < 15; ++i) {
    auto& [xs, out, sem] = fut;
    const Array<float> y = slice_done(xs, out, sem, 0);
    for (int64_t k = 0; k < kRow; ++k) ys[i * kRow + k] = y[k];
    const Array<float> carried = xs;
    fut = dynamic_slice_start(carried, i + 1);
  }
  auto& [xs, out, sem] = fut;
  const Array<float> y = slice_done(xs, out, sem, 0);
  for (int64_t k = 0; k < kRow; ++k) ys[15 * kRow + k] = y[k];
  expect_same(ys, x);
}

// ---- PallasCallStatefulAsyncTest ----------------------------------------------------------------
// Pallas' stateful form: run_state's refs x and o are closed over by the kernels; copy_start
// returns only the semaphore and copy_done has no outputs. Here the refs are operands: the start
// call takes x and returns o (its destination) with the semaphore; the done call takes x, o and
// the semaphore and returns nothing.

auto stateful_start(const Array<float>& x, const Shape& o_shape, int index) {
  return pl::pallas_call(
      [index](pltpu::AnyRef<const float> x_ref, pltpu::AnyRef<float> o_ref,
              pltpu::DmaSemaphoreRef sem) {
        const auto src = index < 0 ? x_ref : x_ref.at(index);
        pltpu::make_async_copy(src, o_ref, sem).start();
      },
      pl::out_shape(ShapeDtypeStruct<float>{o_shape}, pltpu::SemaphoreType::DMA({})),
      pl::in_specs(pl::BlockSpec(pl::ANY)),
      pl::out_specs(pl::BlockSpec(pl::ANY), pl::BlockSpec(pltpu::SEMAPHORE)))(x);
}

void stateful_done(const Array<float>& x, const Array<float>& o,
                   const pltpu::DmaSemaphoreArray& sem, int index) {
  // The descriptor only sizes the wait (its source's bytes); o is taken so that, in checked
  // mode, the copy in flight finds its destination. A const ref is no DMA destination, so the
  // descriptor names a VMEM buffer of o's shape.
  pl::pallas_call(
      [index](pltpu::AnyRef<const float> x_ref, pltpu::AnyRef<const float>,
              pltpu::DmaSemaphoreRef s, pltpu::VmemRef<float> sized) {
        const auto src = index < 0 ? x_ref : x_ref.at(index);
        pltpu::make_async_copy(src, sized, s).wait();
      },
      pl::in_specs(pl::BlockSpec(pl::ANY), pl::BlockSpec(pl::ANY), pl::BlockSpec(pltpu::SEMAPHORE)),
      pl::scratch_shapes(pltpu::VMEM<float>(o.shape())))(x, o, sem);
}

TEST(TpuPallasAsyncTest, StatefulAsyncBasicStatefulAsyncCopy) {
  const Array<float> x = random_array<float>({8, 128}, 0);
  auto [y, sem] = stateful_start(x, x.shape(), -1);
  stateful_done(x, y, sem, -1);
  expect_same(y, x);
}

TEST(TpuPallasAsyncTest, StatefulAsyncMultipleStatefulAsyncCopy) {
  const Array<float> x = random_array<float>({8, 128}, 0);
  auto [y, sem] = stateful_start(x, x.shape(), -1);
  auto [y2, sem2] = stateful_start(x, x.shape(), -1);
  stateful_done(x, y, sem, -1);
  stateful_done(x, y2, sem2, -1);
  expect_same(y, x);
  expect_same(y2, x);
}

TEST(TpuPallasAsyncTest, StatefulAsyncBasicStatefulAsyncSlice) {
  const Array<float> x = random_array<float>({4, 8, 128}, 0);
  auto [y, sem] = stateful_start(x, {8, 128}, 2);
  stateful_done(x, y, sem, 2);
  expect_same(y, x, 2 * kRow);
}

// ---- Remote copies (single call) --------------------------------------------------------------

// test_device_id_as_axis_dict: on a 2 x 2 device mesh, the devices at index 0 of `axis` copy their
// shard to their own output and, remotely, to the output of the device at index 1 of `axis`
// (device_id={axis: 1}; the other axis keeps its coordinate), which waits for it.
void device_id_as_axis_dict(bool joint_axis) {
  const Mesh mesh = jax::make_mesh({2, 2}, {"x", "y"});
  const int64_t xlocal = 8, ylocal = 128;
  const Array<float> input = joint_axis ? random_array<float>({xlocal * 4, ylocal}, 0)
                                        : random_array<float>({xlocal * 2, ylocal * 2}, 0);
  auto copy = pl::pallas_call(
      [joint_axis](pltpu::AnyRef<const float> in, pltpu::AnyRef<float> out,
                   pltpu::DmaSemaphoreRef send_sem, pltpu::DmaSemaphoreRef recv_sem,
                   pltpu::DmaSemaphoreRef local_sem) {
        const int xid =
            joint_axis ? lax::axis_index("x") * 2 + lax::axis_index("y") : lax::axis_index("x");
        auto local_copy = pltpu::make_async_copy(in, out, local_sem);
        auto remote =
            joint_axis
                ? pltpu::make_async_remote_copy(in, out, send_sem, recv_sem, {{{"x", "y"}, 1}})
                : pltpu::make_async_remote_copy(in, out, send_sem, recv_sem, {{"x", 1}});
        if (xid == 0) {
          remote.start();
          local_copy.start();
          local_copy.wait();
          remote.wait_send();
        }
        if (xid == 1) remote.wait_recv();
      },
      pl::out_shape<float>({xlocal, ylocal}), pl::in_specs(pl::BlockSpec(pl::ANY)),
      pl::out_specs(pl::BlockSpec(pl::ANY)),
      pl::scratch_shapes(pltpu::SemaphoreType::DMA, pltpu::SemaphoreType::DMA,
                         pltpu::SemaphoreType::DMA));
  const auto spec = joint_axis ? P({"x", "y"}, None) : P("x", "y");
  const Array<float> out = jax::shard_map([&](const Array<float>& shard) { return copy(shard); },
                                          mesh, spec, spec)(input);
  // Rows 0..7 (x = 0) are the input's; rows 8..15 (x = 1, or joint index 1) equal them.
  const int64_t cols = input.shape()[1];
  for (int64_t r = 0; r < xlocal; ++r) {
    for (int64_t c = 0; c < cols; ++c) {
      ASSERT_EQ(out(r, c), input(r, c)) << joint_axis;
      ASSERT_EQ(out(xlocal + r, c), out(r, c)) << joint_axis;
    }
  }
}

TEST(TpuPallasAsyncTest, AsyncCopyDeviceIdAsAxisDict) {
  device_id_as_axis_dict(true);
  device_id_as_axis_dict(false);
}

// test_axis_dict_with_core_single_device: one device of two cores; every core copies its half
// of the columns, then core 0 sends its half to core 1 (device_id={'core': 1}), which writes it
// over its own half. run_state's (in, out) refs are pl::kernel's input and output.
TEST(TpuPallasAsyncTest, AsyncCopyAxisDictWithCoreSingleDevice) {
  constexpr int kDdim = 1, kCores = 2;
  constexpr int64_t xlocal = 8, ylocal = 256, slc_size = ylocal / kCores;
  const Mesh mesh = jax::make_mesh({kDdim}, {"device"});
  const Array<int32_t> input = arange<int32_t>({xlocal * kDdim, ylocal});
  auto core_copy =
      pl::kernel(pl::out_type<int32_t>({xlocal, ylocal}), pltpu::TensorCoreMesh("core", kCores),
                 pltpu::CompilerParams{.collective_id = 7})([](pltpu::HbmRef<const int32_t> in_ref,
                                                               pltpu::HbmRef<int32_t> out_ref) {
        pl::run_scoped(
            [&](pltpu::VmemRef<int32_t> out_vmem, pltpu::DmaSemaphoreRef sem,
                pltpu::DmaSemaphoreRef send_sem, pltpu::DmaSemaphoreRef recv_sem) {
              const int core_index = lax::axis_index("core");
              const auto slc = pl::ds(core_index * slc_size, slc_size);
              // Every core has entered run_scoped.
              auto barrier = pltpu::get_barrier_semaphore();
              for (int i = 0; i < kDdim; ++i) {
                for (int j = 0; j < kCores; ++j) {
                  pl::semaphore_signal(barrier, 1, pl::device_id({{"device", i}, {"core", j}}),
                                       pl::DeviceIdType::MESH);
                }
              }
              pl::semaphore_wait(barrier, kDdim * kCores);
              pltpu::async_copy(in_ref.at(pl::all, slc), out_ref.at(pl::all, slc), sem).wait();
              auto copy_c0_to_c1 =
                  pltpu::make_async_remote_copy(in_ref.at(pl::all, slc), out_vmem, send_sem,
                                                recv_sem, {{"core", 1}}, pl::DeviceIdType::MESH);
              if (core_index == 0) {
                copy_c0_to_c1.start();
                copy_c0_to_c1.wait_send();
              }
              if (core_index == 1) {
                copy_c0_to_c1.wait_recv();
                pltpu::async_copy(out_vmem, out_ref.at(pl::all, slc), sem).wait();
              }
            },
            pltpu::VMEM<int32_t>({xlocal, slc_size}), pltpu::SemaphoreType::DMA,
            pltpu::SemaphoreType::DMA, pltpu::SemaphoreType::DMA);
      });
  const Array<int32_t> out =
      jax::shard_map([&](const Array<int32_t>& shard) { return core_copy(shard); }, mesh,
                     P("device", None), P("device", None))(input);
  for (int64_t r = 0; r < xlocal; ++r) {
    for (int64_t c = 0; c < slc_size; ++c) {
      ASSERT_EQ(out(r, slc_size + c), input(r, c));  // core 1's half holds core 0's
      ASSERT_EQ(out(r, c), input(r, c));
    }
  }
}

}  // namespace
