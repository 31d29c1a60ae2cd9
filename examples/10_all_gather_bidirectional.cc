// Pallas' ops/tpu/all_gather.py, line by line: each device splits its shard in two and sends
// the halves around the ring in both directions, in VMEM blocks, after a barrier on the barrier
// semaphore. And a collective matmul: all_gather(x) @ w with the gather fused into the matmul.
#include <algorithm>
#include <optional>
#include <string>
#include <vector>

#include "distributed.h"
#include "usage_error.h"

namespace tessera::examples {

namespace {
// The mesh coordinates of a neighbour of `idx` along `axis_name` (the other axes keep ours).
std::vector<int> get_neighbor(int idx, const Mesh& mesh, const std::string& axis_name,
                              const std::string& direction) {
  const std::vector<std::string>& axis_names = mesh.axis_names();
  const auto which_axis = static_cast<size_t>(
      std::find(axis_names.begin(), axis_names.end(), axis_name) - axis_names.begin());
  std::vector<int> mesh_index;
  for (size_t i = 0; i < axis_names.size(); ++i) {
    mesh_index.push_back(i == which_axis ? idx : lax::axis_index(axis_names[i]));
  }
  const int axis_size = lax::axis_size(axis_name);
  int next_idx = 0;
  if (direction == "right") {
    next_idx = (idx + 1) % axis_size;
  } else {
    const int left = idx - 1;
    next_idx = left < 0 ? left + axis_size : left;
  }
  mesh_index[which_axis] = next_idx;
  return mesh_index;
}

void ag_kernel(pltpu::VmemRef<const float> x_ref, pltpu::VmemRef<float> o_ref,
               pltpu::DmaSemaphoreRef send_sem, pltpu::DmaSemaphoreRef recv_sem,
               const std::string& axis_name, const Mesh& mesh) {
  const int my_id = lax::axis_index(axis_name);
  pltpu::async_copy(x_ref, o_ref.at(my_id), recv_sem.at(0)).wait();  // the initial copy

  const int axis_size = lax::axis_size(axis_name);  // neighbour lookup
  const std::vector<int> left_neighbor = get_neighbor(my_id, mesh, axis_name, "left");
  const std::vector<int> right_neighbor = get_neighbor(my_id, mesh, axis_name, "right");

  auto sem = pltpu::get_barrier_semaphore();  // the main barrier
  pl::semaphore_signal(sem, 1, pl::device_id(left_neighbor));
  pl::semaphore_signal(sem, 1, pl::device_id(right_neighbor));
  pl::semaphore_wait(sem, 2);

  const int64_t shard_size = x_ref.shape()[0];
  std::optional<pltpu::AsyncRemoteCopyDescriptor> right_dma, left_dma;
  // Carve the input into two slices and send each along one direction until it has reached
  // every device.
  for (int i = 0; i < axis_size - 1; ++i) {
    const int right_slot = my_id - i;
    const auto right_slice = pl::ds(shard_size / 2, shard_size / 2);
    int slot = right_slot < 0 ? axis_size + right_slot : right_slot;
    if (right_dma) right_dma->wait();
    right_dma = pltpu::async_remote_copy(o_ref.at(slot, right_slice), o_ref.at(slot, right_slice),
                                         send_sem.at(1), recv_sem.at(1), right_neighbor);

    const int left_slot = my_id + i;
    const auto left_slice = pl::ds(0, shard_size / 2);
    slot = left_slot % axis_size;
    if (left_dma) left_dma->wait();
    left_dma = pltpu::async_remote_copy(o_ref.at(slot, left_slice), o_ref.at(slot, left_slice),
                                        send_sem.at(0), recv_sem.at(0), left_neighbor);
  }
  right_dma->wait();  // wait for all DMAs
  left_dma->wait();
}
}  // namespace

Array<float> all_gather_bidirectional(const Array<float>& x, const Mesh& mesh) {
  const std::string axis_name = "x";
  if (mesh.axis_size(axis_name) == 1) return x;  // nothing to gather
  auto ag_local = [&](const Array<float>& x_shard) {
    const int axis_size = lax::axis_size(axis_name);
    std::vector<int64_t> dims{axis_size};
    for (int a = 0; a < x_shard.shape().rank(); ++a) dims.push_back(x_shard.shape()[a]);
    auto kernel = pl::pallas_call(
        [&](pltpu::VmemRef<const float> x_ref, pltpu::VmemRef<float> o_ref,
            pltpu::DmaSemaphoreRef send_sem, pltpu::DmaSemaphoreRef recv_sem) {
          ag_kernel(x_ref, o_ref, send_sem, recv_sem, axis_name, mesh);
        },
        pl::out_shape<float>(Shape(dims)), pltpu::CompilerParams{.collective_id = 0},
        pltpu::PrefetchScalarGridSpec<0>(
            // (send_sem[0], send_sem[1]) and (recv_sem[0], recv_sem[1])
            pl::scratch_shapes(pltpu::SemaphoreType::DMA({2}), pltpu::SemaphoreType::DMA({2})),
            pl::in_specs(pl::BlockSpec(MemorySpace::VMEM)),
            pl::out_specs(pl::BlockSpec(MemorySpace::VMEM))),
        pl::name("all_gather_bidirectional"));
    const Array<float> out = kernel(x_shard);
    // out.reshape((axis_size * x_shard.shape[0], *x_shard.shape[1:]))
    dims[1] *= axis_size;
    dims.erase(dims.begin());
    Array<float> flat(detail::Uninitialized{}, Shape(dims));
    std::copy(out.begin(), out.end(), flat.begin());
    return flat;
  };
  return jax::shard_map(ag_local, mesh, P(axis_name), P(None))(x);
}

namespace {
// One device's part: its rows of x (m, k) and its columns of w (k, n).
Array<float> collective_matmul_local(const Array<float>& x_shard, const Array<float>& w_shard) {
  const int num_devices = lax::axis_size("x");
  const int64_t m = x_shard.shape()[0];  // rows of x per device
  const int64_t k = x_shard.shape()[1];
  const int64_t n = w_shard.shape()[1];  // columns of w per device
  // Blocks of up to 128: a partial last block of rows or columns is padded and only its valid
  // part reaches the output, but the contraction's blocks must divide k (padding would enter the
  // sums): the largest divisor of k up to 128 where it is at least 8, else all of k.
  const int64_t bm = std::min<int64_t>(m, 128);
  const int64_t bn = std::min<int64_t>(n, 128);
  int64_t bk = std::min<int64_t>(k, 128);
  while (k % bk != 0) --bk;
  if (bk < std::min<int64_t>(k, 8)) bk = k;

  auto kernel = pl::kernel(
      pl::out_type(ShapeDtypeStruct<float>{{m * num_devices, n}},
                   // The gathered x: one slot per device's block, so that no block is
                   // overwritten while it is still being multiplied or sent.
                   ShapeDtypeStruct<float>{{num_devices, m, k}}),
      pltpu::TensorCoreMesh("core", 1),
      pl::scratch_types(pltpu::SemaphoreType::DMA, pltpu::SemaphoreType::DMA,
                        pltpu::SemaphoreType::DMA({std::max(num_devices - 1, 1)})),
      pl::name("collective_matmul"))(
      [=](pltpu::HbmRef<const float> x_ref, pltpu::HbmRef<const float> w_ref,
          pltpu::HbmRef<float> o_ref, pltpu::HbmRef<float> x_blocks,
          pltpu::DmaSemaphoreRef local_sem, pltpu::DmaSemaphoreRef send_sem,
          pltpu::DmaSemaphoreRef recv_sems) {
        const int my_id = lax::axis_index("x");
        const int right_neighbor = (my_id + 1) % num_devices;
        pltpu::async_copy(x_ref, x_blocks.at(my_id), local_sem).wait();

        const pl::BlockSpec x_spec({bm, bk}, [](int i, int, int kk) { return pl::idx(i, kk); });
        const pl::BlockSpec w_spec({bk, bn}, [](int, int j, int kk) { return pl::idx(kk, j); });
        const pl::BlockSpec o_spec({bm, bn}, [](int i, int j, int) { return pl::idx(i, j); });
        auto matmul = pltpu::emit_pipeline(
            [](pltpu::VmemRef<const float> x_blk, pltpu::VmemRef<const float> w_blk,
               pltpu::VmemRef<float> o_blk) {
              if (pl::program_id(2) == 0) o_blk = jnp::zeros_like(o_blk);
              o_blk += jnp::dot(x_blk, w_blk);
            },
            pltpu::grid({pl::cdiv(m, bm), pl::cdiv(n, bn), k / bk}), pl::in_specs(x_spec, w_spec),
            pl::out_specs(o_spec));

        for (int step = 0; step < num_devices; ++step) {
          // The block of x this device holds at this step, which it passes on to the right while
          // it multiplies it.
          const int block = (my_id - step + num_devices) % num_devices;
          std::optional<pltpu::AsyncRemoteCopyDescriptor> send;
          if (step < num_devices - 1) {
            send = pltpu::make_async_remote_copy(x_blocks.at(block), x_blocks.at(block), send_sem,
                                                 recv_sems.at(step), {right_neighbor});
            send->start();
          }
          matmul(x_blocks.at(block), w_ref, o_ref.at(pl::ds(block * m, m)));
          if (send) send->wait();  // sent, and the next block has arrived from the left
        }
      });
  return std::get<0>(kernel(x_shard, w_shard));
}
}  // namespace

Array<float> collective_matmul(const Array<float>& x, const Array<float>& w, const Mesh& mesh,
                               std::source_location where) {
  if (x.shape().rank() != 2 || w.shape().rank() != 2 || x.shape()[1] != w.shape()[0] ||
      x.size() == 0 || w.size() == 0) {
    usage_error("collective_matmul",
                "x is " + x.shape().to_string() + " and w " + w.shape().to_string() +
                    ": x @ w needs x (M, K) and w (K, N), none of M, K, N zero",
                "pass two non-empty 2-D arrays whose contraction sizes agree", where);
  }
  return jax::shard_map(collective_matmul_local, mesh, {P("x", None), P(None, "x")}, P(None, "x"))(
      x, w);
}

}  // namespace tessera::examples
