// Pallas' distributed tutorial, line by line: right permute (lax.ppermute), the ring all-gather
// (lax.all_gather) and the all-reduce with double buffering, capacity semaphores and a double
// barrier (lax.psum). Each kernel is an ordinary pallas_call; jax::shard_map runs it on every
// device of the mesh with that device's shard.
#include "distributed.h"

namespace tessera::examples {

Array<float> right_permute(const Array<float>& input_arr, const Mesh& mesh) {
  const int num_devices = mesh.size();
  auto right_permute_kernel =
      [num_devices](pltpu::AnyRef<const float> input_ref, pltpu::AnyRef<float> output_ref,
                    pltpu::DmaSemaphoreRef send_sem, pltpu::DmaSemaphoreRef recv_sem) {
        const int my_id = lax::axis_index("x");
        const int right_neighbor = (my_id + 1) % num_devices;
        auto remote_copy_op = pltpu::make_async_remote_copy(
            /*src_ref=*/input_ref, /*dst_ref=*/output_ref, /*send_sem=*/send_sem,
            /*recv_sem=*/recv_sem, /*device_id=*/{right_neighbor},
            /*device_id_type=*/pl::DeviceIdType::MESH);
        remote_copy_op.start();
        remote_copy_op.wait();
      };

  const ShapeDtypeStruct<float> out_shape{{8, 128}};
  auto grid_spec = pltpu::PrefetchScalarGridSpec<0>(
      // pl::ANY leaves the arrays in HBM.
      pl::in_specs(pl::BlockSpec(pl::ANY)), pl::out_specs(pl::BlockSpec(pl::ANY)),
      // The DMA semaphores are scratch.
      pl::scratch_shapes(pltpu::SemaphoreType::DMA, pltpu::SemaphoreType::DMA));
  auto right_permute = pl::pallas_call(right_permute_kernel, pl::out_shape(out_shape), grid_spec,
                                       pl::name("right_permute"));
  return jax::shard_map(right_permute, mesh, /*in_specs=*/P(None, "x"),
                        /*out_specs=*/P(None, "x"))(input_arr);
}

Array<float> all_gather(const Array<float>& input_arr, const Mesh& mesh) {
  const int num_devices = mesh.size();
  auto all_gather_kernel =
      [num_devices](pltpu::AnyRef<const float> input_ref, pltpu::AnyRef<float> output_ref,
                    pltpu::DmaSemaphoreRef local_copy_sem, pltpu::DmaSemaphoreRef send_sem,
                    pltpu::DmaSemaphoreRef recv_sems) {
        const int outer_step = static_cast<int>(pl::program_id(0));
        const int my_id = lax::axis_index("x");
        const int right_neighbor = (my_id + 1) % num_devices;
        int copy_slot = my_id - outer_step;
        copy_slot = (copy_slot + num_devices) % num_devices;

        if (outer_step == 0) {
          auto local_copy_op = pltpu::make_async_copy(/*src_ref=*/input_ref,
                                                      /*dst_ref=*/output_ref.at(my_id),
                                                      /*sem=*/local_copy_sem);
          local_copy_op.start();
          local_copy_op.wait();
        }

        // Copy to our right neighbor. We also receive from our left neighbor, but at copy_slot - 1
        // rather than copy_slot: the indices of a remote DMA need not be symmetric.
        auto remote_copy_op = pltpu::make_async_remote_copy(
            /*src_ref=*/output_ref.at(copy_slot), /*dst_ref=*/output_ref.at(copy_slot),
            /*send_sem=*/send_sem, /*recv_sem=*/recv_sems.at(outer_step),
            /*device_id=*/{right_neighbor}, /*device_id_type=*/pl::DeviceIdType::MESH);
        remote_copy_op.start();
        remote_copy_op.wait();
      };

  const ShapeDtypeStruct<float> out_shape{{num_devices, 8, 128}};
  auto grid_spec = pltpu::PrefetchScalarGridSpec<0>(
      pl::in_specs(pl::BlockSpec(pl::ANY)), pl::out_specs(pl::BlockSpec(pl::ANY)),
      // One semaphore for the local HBM copy, one for the remote sends, and one receive
      // semaphore per step, so that no two DMAs in flight share one.
      pl::scratch_shapes(pltpu::SemaphoreType::DMA, pltpu::SemaphoreType::DMA,
                         pltpu::SemaphoreType::DMA({num_devices - 1})),
      pl::grid({num_devices - 1}));
  auto all_gather = pl::pallas_call(all_gather_kernel, pl::out_shape(out_shape), grid_spec,
                                    pl::name("all_gather"));
  return jax::shard_map(all_gather, mesh, P("x", None), P("x", None))(input_arr);
}

namespace {
// A barrier with both neighbours on the barrier semaphore. The second barrier (a run_scoped
// REGULAR semaphore) stops a neighbour that has already entered the next kernel with the same
// collective_id from satisfying this kernel's barrier early.
void local_barrier(int left_neighbor, int right_neighbor, bool double_barrier = true) {
  auto barrier_sem = pltpu::get_barrier_semaphore();
  for (const int neighbor : {left_neighbor, right_neighbor}) {
    pl::semaphore_signal(barrier_sem, 1, pl::device_id({neighbor}), pl::DeviceIdType::MESH);
  }
  pl::semaphore_wait(barrier_sem, 2);
  if (double_barrier) {
    pl::run_scoped(
        [&](pltpu::SemaphoreRef second_barrier) {
          for (const int neighbor : {left_neighbor, right_neighbor}) {
            pl::semaphore_signal(second_barrier, 1, pl::device_id({neighbor}),
                                 pl::DeviceIdType::MESH);
          }
          pl::semaphore_wait(second_barrier, 2);
        },
        pltpu::SemaphoreType::REGULAR);
  }
}
}  // namespace

Array<float> all_reduce(const Array<float>& input_arr, const Mesh& mesh) {
  const int num_devices = mesh.size();
  auto all_reduce_kernel =
      [num_devices](pltpu::VmemRef<const float> x_ref, pltpu::VmemRef<float> o_ref,
                    pltpu::AnyRef<float> hbm_scratch, pltpu::DmaSemaphoreRef copy_sem,
                    pltpu::DmaSemaphoreRef remote_recv_sem, pltpu::DmaSemaphoreRef remote_send_sem,
                    pltpu::SemaphoreRef capacity_sem, pltpu::VmemRef<float> receive_scratch) {
        const int outer_step = static_cast<int>(pl::program_id(0));
        const int working_slot = outer_step % 2;
        const int receiving_slot = 1 - working_slot;

        const int my_id = lax::axis_index("x");
        const int right_neighbor = (my_id + 1) % num_devices;
        const int left_neighbor = (my_id - 1 + num_devices) % num_devices;

        if (outer_step == 0) {
          // Barrier with both neighbors at the start, since we will be communicating with both.
          local_barrier(left_neighbor, right_neighbor);

          // Initialize o_ref, receive_scratch and hbm_scratch.
          o_ref = jnp::zeros_like(o_ref);
          receive_scratch = jnp::zeros_like(receive_scratch);
          auto initial_copy = pltpu::make_async_remote_copy(
              /*src_ref=*/x_ref, /*dst_ref=*/hbm_scratch.at(working_slot),
              /*send_sem=*/remote_send_sem, /*recv_sem=*/remote_recv_sem,
              /*device_id=*/{right_neighbor}, /*device_id_type=*/pl::DeviceIdType::MESH);
          initial_copy.start();
          initial_copy.wait();
        }

        // Signal to our left neighbor that we are ready to receive. Without this signal, our left
        // neighbor can be >= 1 iteration ahead, meaning it could write into our working slot.
        pl::semaphore_signal(capacity_sem, 1, pl::device_id({left_neighbor}),
                             pl::DeviceIdType::MESH);

        // Copy the partial result our left neighbor sent to us into VMEM for computation.
        auto local_copy = pltpu::make_async_copy(/*src_ref=*/hbm_scratch.at(working_slot),
                                                 /*dst_ref=*/receive_scratch, /*sem=*/copy_sem);
        local_copy.start();

        // Block until our right neighbor is ready to receive.
        pl::semaphore_wait(capacity_sem, 1);
        // Pass the value to our right neighbor.
        auto remote_copy = pltpu::make_async_remote_copy(
            /*src_ref=*/hbm_scratch.at(working_slot), /*dst_ref=*/hbm_scratch.at(receiving_slot),
            /*send_sem=*/remote_send_sem, /*recv_sem=*/remote_recv_sem,
            /*device_id=*/{right_neighbor}, /*device_id_type=*/pl::DeviceIdType::MESH);
        remote_copy.start();
        // Finish local copy and accumulate while remote_copy is happening.
        local_copy.wait();
        o_ref += receive_scratch;
        // Block until remote copy finishes.
        remote_copy.wait();
      };

  auto out_shape = pl::out_shape(ShapeDtypeStruct<float>{{8, 128}},
                                 // The double buffer is an output so that it lives in HBM.
                                 ShapeDtypeStruct<float>{{2, 8, 128}});
  auto grid_spec = pltpu::PrefetchScalarGridSpec<0>(
      // Our input lives in VMEM.
      pl::in_specs(pl::BlockSpec(MemorySpace::VMEM)),
      // Our output lives in VMEM, our double buffer in HBM.
      pl::out_specs(pl::BlockSpec(MemorySpace::VMEM), pl::BlockSpec(pl::ANY)),
      pl::grid({num_devices}),
      pl::scratch_shapes(pltpu::SemaphoreType::DMA, pltpu::SemaphoreType::DMA,
                         pltpu::SemaphoreType::DMA,
                         pltpu::SemaphoreType::REGULAR,   // capacity_sem
                         pltpu::VMEM<float>({8, 128})));  // receive_scratch
  auto kernel = pl::pallas_call(all_reduce_kernel, out_shape, grid_spec,
                                pltpu::CompilerParams{.collective_id = 0}, pl::name("all_reduce"));
  auto pallas_result = jax::shard_map(kernel, mesh, P(None, "x"), P(None, "x"))(input_arr);
  return std::get<0>(std::move(pallas_result));
}

}  // namespace tessera::examples
