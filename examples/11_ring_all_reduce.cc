// The bandwidth-optimal ring all-reduce, in the style of Pallas' distributed tutorial: a
// reduce-scatter (n - 1 steps: pass a chunk to the right, add the chunk that came from the left
// to our input's) and an all-gather (n - 1 steps: pass the finished chunks on, straight into the
// neighbour's output). Each device moves 7 (n - 1) / n times its array's bytes (two reads and a
// write per add, a read and a write per copy), the least a ring without reducing DMAs can.
//
// Every step writes a different receive slot with its own semaphore (n - 1 slots), so a device
// that runs ahead never overwrites a chunk its neighbour has not added yet, and no capacity
// semaphores are needed; the kernel's implicit start barrier keeps consecutive launches apart.
// With several cores per device, each core moves and adds its own rows of every chunk.
#include <algorithm>
#include <string>

#include "distributed.h"
#include "usage_error.h"

namespace tessera::examples {

namespace {
// Rows per block of the add: the largest of 512, 256, ... 8 that divides `rows`, at most 1 MiB.
int64_t add_block_rows(int64_t rows, int64_t cols) {
  for (int64_t b = 512; b > 8; b /= 2) {
    if (rows % b == 0 && b * cols * 4 <= (int64_t{1} << 20)) return b;
  }
  return 8;
}
}  // namespace

Array<float> ring_all_reduce(const Array<float>& x, int cores, bool alone,
                             std::source_location where) {
  const int n = lax::axis_size("x");
  // Each core of each device adds its own rows of every chunk, in blocks of at least 8 rows.
  if (x.shape().rank() != 2 || cores < 1 || x.shape()[0] < 1 || x.shape()[1] < 1 ||
      x.shape()[0] % (int64_t{n} * cores * 8) != 0) {
    usage_error("ring_all_reduce",
                "x is " + x.shape().to_string() + " with " + std::to_string(cores) +
                    " cores on each of " + std::to_string(n) +
                    " devices; it takes a non-empty 2-D array whose rows are a multiple of "
                    "devices * cores * 8 = " +
                    std::to_string(int64_t{n} * std::max(cores, 1) * 8) + ", and at least one core",
                "pad the rows, or use fewer cores", where);
  }
  const int64_t rows = x.shape()[0];
  const int64_t cols = x.shape()[1];
  const int64_t chunk = rows / n;          // rows of one chunk
  const int64_t per_core = chunk / cores;  // rows of a chunk each core moves
  const int64_t block = add_block_rows(per_core, cols);
  const int slots = std::max(n - 1, 1);

  auto ring_kernel = [=](pltpu::HbmRef<const float> x_ref, pltpu::HbmRef<float> o_ref,
                         pltpu::HbmRef<float> recv_ref, pltpu::DmaSemaphoreRef send_sem,
                         pltpu::DmaSemaphoreRef rs_sems, pltpu::DmaSemaphoreRef ag_sems) {
    const int my_id = lax::axis_index("x");
    const int core = lax::axis_index("core");
    const int right_neighbor = alone ? my_id : (my_id + 1) % n;
    // This core's rows of chunk c, and of receive slot s.
    auto rows_of = [&](int c) { return pl::ds(c * chunk + core * per_core, per_core); };
    auto slot_rows = [&](int s) { return pl::ds(s * chunk + core * per_core, per_core); };
    if (n == 1) {
      pltpu::sync_copy(x_ref.at(rows_of(0)), o_ref.at(rows_of(0)));
      return;
    }
    const pl::BlockSpec spec({block, cols}, [](int i) { return pl::idx(i, 0); });
    auto add = pltpu::emit_pipeline([](pltpu::VmemRef<const float> a, pltpu::VmemRef<const float> b,
                                       pltpu::VmemRef<float> o) { o = a + b; },
                                    pltpu::grid({per_core / block}), pl::in_specs(spec, spec),
                                    pl::out_specs(spec));

    // Reduce-scatter: at step s send chunk (me - s) (our input at first, then the partial sum we
    // made), receive chunk (me - s - 1) into slot s and add our input's to it.
    for (int s = 0; s < n - 1; ++s) {
      const int send_chunk = (my_id - s + n) % n;
      const int recv_chunk = (my_id - s - 1 + n) % n;
      auto copy = s == 0 ? pltpu::make_async_remote_copy(x_ref.at(rows_of(send_chunk)),
                                                         recv_ref.at(slot_rows(s)), send_sem,
                                                         rs_sems.at(s), {right_neighbor})
                         : pltpu::make_async_remote_copy(o_ref.at(rows_of(send_chunk)),
                                                         recv_ref.at(slot_rows(s)), send_sem,
                                                         rs_sems.at(s), {right_neighbor});
      copy.start();
      copy.wait();  // sent, and the left neighbour's chunk is in slot s
      add(x_ref.at(rows_of(recv_chunk)), recv_ref.at(slot_rows(s)), o_ref.at(rows_of(recv_chunk)));
    }
    // All-gather: chunk (me + 1) is complete here; pass it on, then each chunk that arrives.
    for (int s = 0; s < n - 1; ++s) {
      const int c = (my_id + 1 - s + n) % n;
      // Alone (the benchmark's floor), a copy of chunk c onto itself would move nothing (memmove
      // returns at once when source and destination coincide): it goes to a receive slot, the
      // same bytes read and written as the ring's copy into the neighbour's output.
      auto dst = alone ? recv_ref.at(slot_rows(s)) : o_ref.at(rows_of(c));
      auto copy = pltpu::make_async_remote_copy(o_ref.at(rows_of(c)), dst, send_sem, ag_sems.at(s),
                                                {right_neighbor});
      copy.start();
      copy.wait();  // sent, and chunk (me - s) has arrived from the left
    }
  };
  auto kernel = pl::kernel(
      pl::out_type(ShapeDtypeStruct<float>{{rows, cols}},
                   // The receive slots of the reduce-scatter, in HBM.
                   ShapeDtypeStruct<float>{{slots * chunk, cols}}),
      pltpu::TensorCoreMesh("core", cores),
      pl::scratch_types(pltpu::SemaphoreType::DMA,            // send_sem
                        pltpu::SemaphoreType::DMA({slots}),   // reduce-scatter receive sems
                        pltpu::SemaphoreType::DMA({slots})),  // all-gather receive sems
      pltpu::CompilerParams{.skip_device_barrier = alone},
      pl::name(alone ? "ring_all_reduce_alone" : "ring_all_reduce"))(ring_kernel);
  return std::get<0>(kernel(x));
}

Array<float> ring_all_reduce_mapped(const Array<float>& x, const Mesh& mesh, int cores,
                                    std::source_location where) {
  auto per_device = [&](const Array<float>& shard) {
    return ring_all_reduce(shard, cores, false, where);
  };
  return jax::shard_map(per_device, mesh, P(None, "x"), P(None, "x"))(x);
}

}  // namespace tessera::examples
