// Pallas' distributed tutorial, line by line: the bidirectional reduce-scatter (lax.psum_scatter)
// — the top half of each block travels right to left, the bottom half left to right, each
// device adding its input to the partial sums that pass through — and the same kernel with
// large HBM blocks whose accumulation is a nested emit_pipeline.
#include <string>
#include <utility>

#include "distributed.h"
#include "usage_error.h"

namespace tessera::examples {

namespace {
constexpr int LEFT = 0;
constexpr int RIGHT = 1;

int mod(int x, int n) { return (x + n) % n; }

// The reduce-scatter's block: (16, 128), so that a half block is at least (8, 128), a vector
// register.
constexpr int64_t block_size[2] = {16, 128};

void signal(int left_or_right, const pltpu::SemaphoreRef& semaphore) {
  const int my_id = lax::axis_index("x");
  const int num_devices = lax::axis_size("x");
  const int neighbor =
      left_or_right == LEFT ? mod(my_id - 1, num_devices) : mod(my_id + 1, num_devices);
  pl::semaphore_signal(semaphore, 1, pl::device_id({neighbor}), pl::DeviceIdType::MESH);
}

// A barrier with both neighbours (the all-reduce's, 08_collectives.cc).
void local_barrier(int left_neighbor, int right_neighbor) {
  auto barrier_sem = pltpu::get_barrier_semaphore();
  for (const int neighbor : {left_neighbor, right_neighbor}) {
    pl::semaphore_signal(barrier_sem, 1, pl::device_id({neighbor}), pl::DeviceIdType::MESH);
  }
  pl::semaphore_wait(barrier_sem, 2);
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

// At the start of a phase after the first: start the DMA of what the previous phase computed,
// once the neighbour it goes to says it may (the tutorial writes these blocks inline).
void start_phase(int phase, pltpu::AsyncRemoteCopyDescriptor& left_copy,
                 pltpu::AsyncRemoteCopyDescriptor& right_copy,
                 const pltpu::SemaphoreRef& left_capacity_sem,
                 const pltpu::SemaphoreRef& right_capacity_sem) {
  if (phase == LEFT) {
    // Block until our right neighbor tells us we may send to the right.
    pl::semaphore_wait(right_capacity_sem, 1);
    right_copy.start();
  }
  if (phase == RIGHT) {
    // Block until our left neighbor tells us we may send to the left.
    pl::semaphore_wait(left_capacity_sem, 1);
    left_copy.start();
  }
}

// At the end of such a phase: wait on that DMA, so that its results are ready for the next
// phase, and tell the neighbour it came from that it may send again.
void end_phase(int phase, pltpu::AsyncRemoteCopyDescriptor& left_copy,
               pltpu::AsyncRemoteCopyDescriptor& right_copy,
               const pltpu::SemaphoreRef& left_capacity_sem,
               const pltpu::SemaphoreRef& right_capacity_sem) {
  if (phase == LEFT) {
    right_copy.wait();
    signal(LEFT, right_capacity_sem);
  }
  if (phase == RIGHT) {
    left_copy.wait();
    signal(RIGHT, left_capacity_sem);
  }
}

// A device's shard (n * rows, cols) seen as n blocks of (rows, cols): input_arr.reshape(n, rows,
// cols). Any other shard is refused: the reshape needs its elements, no more and no fewer.
Array<float> as_blocks(const Array<float>& x, int n, int64_t rows, int64_t cols, const char* name,
                       std::source_location where) {
  const Shape want{int64_t{n} * rows, cols};
  if (x.shape() != want) {
    usage_error(name,
                "each device's shard of x is " + x.shape().to_string() + "; the kernel takes " +
                    want.to_string() + " (" + std::to_string(n) + " blocks of (" +
                    std::to_string(rows) + ", " + std::to_string(cols) + "))",
                "pass x of shape (" + std::to_string(int64_t{n} * rows) + ", " +
                    std::to_string(int64_t{n} * cols) + "), sharded P(None, 'x')",
                where);
  }
  Array<float> blocks(detail::Uninitialized{}, Shape{n, rows, cols});
  std::copy(x.begin(), x.end(), blocks.begin());
  return blocks;
}
void reduce_scatter_kernel(pltpu::VmemRef<const float> x_ref, pltpu::VmemRef<float> o_ref,
                           pltpu::AnyRef<float> hbm_scratch, pltpu::DmaSemaphoreRef local_copy_sem,
                           pltpu::DmaSemaphoreRef left_recv_sem,
                           pltpu::DmaSemaphoreRef left_send_sem,
                           pltpu::DmaSemaphoreRef right_recv_sem,
                           pltpu::DmaSemaphoreRef right_send_sem,
                           pltpu::SemaphoreRef left_capacity_sem,
                           pltpu::SemaphoreRef right_capacity_sem,
                           pltpu::VmemRef<float> accum_scratch) {
  const int num_devices = lax::axis_size("x");
  const int outer_step = static_cast<int>(pl::program_id(0));
  const int phase = static_cast<int>(pl::program_id(1));
  const bool is_start = outer_step == 0 && phase == 0;
  const bool last_iteration = outer_step == pl::num_programs(0) - 1;

  const int working_slot = outer_step % 2;
  const int receiving_slot = 1 - working_slot;
  const int my_id = lax::axis_index("x");
  const int right_neighbor = mod(my_id + 1, num_devices);
  const int left_neighbor = mod(my_id - 1, num_devices);

  const int left_copy_device = mod(my_id + outer_step + 1, num_devices);
  const int right_copy_device = mod(my_id - outer_step - 1, num_devices);
  // Slices are pl::ds(start, size).
  const auto left_copy_slice = pl::ds(0, block_size[0] / 2);
  const auto right_copy_slice = pl::ds(block_size[0] / 2, block_size[0] / 2);
  const auto current_phase_slice = pl::ds(phase * (block_size[0] / 2), block_size[0] / 2);

  auto initial_left_copy = pltpu::make_async_remote_copy(
      x_ref.at(my_id, left_copy_slice), hbm_scratch.at(working_slot, left_copy_slice),
      left_send_sem, left_recv_sem, {left_neighbor}, pl::DeviceIdType::MESH);
  auto initial_right_copy = pltpu::make_async_remote_copy(
      x_ref.at(my_id, right_copy_slice), hbm_scratch.at(working_slot, right_copy_slice),
      right_send_sem, right_recv_sem, {right_neighbor}, pl::DeviceIdType::MESH);
  auto left_copy =
      pltpu::make_async_remote_copy(hbm_scratch.at(working_slot, left_copy_slice),
                                    hbm_scratch.at(receiving_slot, left_copy_slice), left_send_sem,
                                    left_recv_sem, {left_neighbor}, pl::DeviceIdType::MESH);
  auto right_copy = pltpu::make_async_remote_copy(
      // The right copy is flipped with regard to slots: it is for the next outer step.
      hbm_scratch.at(receiving_slot, right_copy_slice),
      hbm_scratch.at(working_slot, right_copy_slice), right_send_sem, right_recv_sem,
      {right_neighbor}, pl::DeviceIdType::MESH);

  // --- Prologue ---
  if (is_start) {
    // Barrier with both neighbors at the start, since we will be communicating with both.
    local_barrier(left_neighbor, right_neighbor);
    // Initialize o_ref, accum_scratch, and hbm_scratch with initial copies.
    o_ref = jnp::zeros_like(o_ref);
    accum_scratch = jnp::zeros_like(accum_scratch);
    initial_left_copy.start();
    initial_left_copy.wait();
    initial_right_copy.start();
    // Tell our left neighbor that it may send to the right (and the right one to the left).
    signal(LEFT, right_capacity_sem);
    signal(RIGHT, left_capacity_sem);
  }

  // --- Body ---
  // Start the DMA of what the previous phase computed to our neighbor, to overlap it with
  // this phase's computation.
  if (!is_start) start_phase(phase, left_copy, right_copy, left_capacity_sem, right_capacity_sem);

  auto local_copy = pltpu::make_async_copy(hbm_scratch.at(working_slot, current_phase_slice),
                                           accum_scratch, local_copy_sem);
  local_copy.start();
  local_copy.wait();

  if (!last_iteration) {
    if (phase == LEFT) accum_scratch += x_ref.at(left_copy_device, left_copy_slice);
    if (phase == RIGHT) accum_scratch += x_ref.at(right_copy_device, right_copy_slice);
  }
  local_copy = pltpu::make_async_copy(
      accum_scratch, hbm_scratch.at(working_slot, current_phase_slice), local_copy_sem);
  local_copy.start();
  local_copy.wait();

  if (is_start) initial_right_copy.wait();

  // At the end of the body, wait on the DMA of the previous phase so that its results are
  // ready for the next phase.
  if (!is_start) end_phase(phase, left_copy, right_copy, left_capacity_sem, right_capacity_sem);

  // --- Epilogue ---
  // Store the result on the last iteration, and leave the semaphores at zero.
  if (last_iteration) {
    if (phase == LEFT) {
      o_ref.at(left_copy_slice) = accum_scratch;
      pl::semaphore_wait(right_capacity_sem, 1);
    }
    if (phase == RIGHT) {
      o_ref.at(right_copy_slice) = accum_scratch;
      pl::semaphore_wait(left_capacity_sem, 1);
    }
  }
}

void reduce_scatter_nested_kernel(
    pltpu::AnyRef<const float> x_ref, pltpu::AnyRef<float> o_ref, pltpu::AnyRef<float> hbm_scratch,
    pltpu::DmaSemaphoreRef left_recv_sem, pltpu::DmaSemaphoreRef left_send_sem,
    pltpu::DmaSemaphoreRef copy_sem, pltpu::DmaSemaphoreRef right_recv_sem,
    pltpu::DmaSemaphoreRef right_send_sem, pltpu::SemaphoreRef left_capacity_sem,
    pltpu::SemaphoreRef right_capacity_sem) {
  const int num_devices = lax::axis_size("x");
  // The outer block (the body gets x as (n, rows, cols)), and the inner pipeline's.
  const int64_t outer_block_size[2] = {x_ref.shape()[1], x_ref.shape()[2]};
  constexpr int64_t inner_block_size[2] = {8, 128};
  const int64_t inner_grid[2] = {outer_block_size[0] / inner_block_size[0] / 2,
                                 outer_block_size[1] / inner_block_size[1]};
  const pl::BlockSpec inner_block_spec({inner_block_size[0], inner_block_size[1]},
                                       [](int i, int j) { return pl::idx(i, j); });

  const int outer_step = static_cast<int>(pl::program_id(0));
  const int phase = static_cast<int>(pl::program_id(1));
  const bool is_start = outer_step == 0 && phase == 0;
  const bool last_iteration = outer_step == pl::num_programs(0) - 1;

  const int working_slot = outer_step % 2;
  const int receiving_slot = 1 - working_slot;
  const int my_id = lax::axis_index("x");
  const int right_neighbor = mod(my_id + 1, num_devices);
  const int left_neighbor = mod(my_id - 1, num_devices);

  const int left_copy_device = mod(my_id + outer_step + 1, num_devices);
  const int right_copy_device = mod(my_id - outer_step - 1, num_devices);
  const auto left_copy_slice = pl::ds(0, outer_block_size[0] / 2);
  const auto right_copy_slice = pl::ds(outer_block_size[0] / 2, outer_block_size[0] / 2);
  const auto current_phase_slice =
      pl::ds(phase * (outer_block_size[0] / 2), outer_block_size[0] / 2);

  auto initial_left_copy = pltpu::make_async_remote_copy(
      x_ref.at(my_id, left_copy_slice), hbm_scratch.at(working_slot, left_copy_slice),
      left_send_sem, left_recv_sem, {left_neighbor}, pl::DeviceIdType::MESH);
  auto initial_right_copy = pltpu::make_async_remote_copy(
      x_ref.at(my_id, right_copy_slice), hbm_scratch.at(working_slot, right_copy_slice),
      right_send_sem, right_recv_sem, {right_neighbor}, pl::DeviceIdType::MESH);
  auto left_copy =
      pltpu::make_async_remote_copy(hbm_scratch.at(working_slot, left_copy_slice),
                                    hbm_scratch.at(receiving_slot, left_copy_slice), left_send_sem,
                                    left_recv_sem, {left_neighbor}, pl::DeviceIdType::MESH);
  auto right_copy =
      pltpu::make_async_remote_copy(hbm_scratch.at(receiving_slot, right_copy_slice),
                                    hbm_scratch.at(working_slot, right_copy_slice), right_send_sem,
                                    right_recv_sem, {right_neighbor}, pl::DeviceIdType::MESH);

  // --- Prologue ---
  if (is_start) {
    local_barrier(left_neighbor, right_neighbor);
    initial_left_copy.start();
    initial_left_copy.wait();
    initial_right_copy.start();
    signal(LEFT, right_capacity_sem);
    signal(RIGHT, left_capacity_sem);
  }
  if (!is_start) start_phase(phase, left_copy, right_copy, left_capacity_sem, right_capacity_sem);

  // --- Body ---
  // The inner kernel adds the input block to the partial sum block. An output window of a
  // pipeline is never read from HBM, so the partial sum comes in as an input too (the
  // tutorial's inner kernel accumulates into the output window itself; see docs/devices.md).
  auto inner_kernel = [](pltpu::VmemRef<const float> input_ref,
                         pltpu::VmemRef<const float> partial_ref,
                         pltpu::VmemRef<float> accum_ref) { accum_ref = partial_ref + input_ref; };
  auto accum_pipeline = pltpu::emit_pipeline(
      inner_kernel, pl::in_specs(inner_block_spec, inner_block_spec),
      pl::out_specs(inner_block_spec), pltpu::grid({inner_grid[0], inner_grid[1]}));
  if (!last_iteration) {
    if (phase == LEFT) {
      accum_pipeline(x_ref.at(left_copy_device, left_copy_slice),
                     hbm_scratch.at(working_slot, left_copy_slice),
                     hbm_scratch.at(working_slot, left_copy_slice));
    }
    if (phase == RIGHT) {
      accum_pipeline(x_ref.at(right_copy_device, right_copy_slice),
                     hbm_scratch.at(working_slot, right_copy_slice),
                     hbm_scratch.at(working_slot, right_copy_slice));
    }
  }

  // --- Epilogue ---
  if (is_start) initial_right_copy.wait();
  if (!is_start) end_phase(phase, left_copy, right_copy, left_capacity_sem, right_capacity_sem);

  // Store the result on the last iteration.
  if (last_iteration) {
    auto output_copy = pltpu::make_async_copy(hbm_scratch.at(working_slot, current_phase_slice),
                                              o_ref.at(current_phase_slice), copy_sem);
    output_copy.start();
    output_copy.wait();
    // Clean up semaphores so that they exit with a value of 0.
    if (phase == LEFT) pl::semaphore_wait(right_capacity_sem, 1);
    if (phase == RIGHT) pl::semaphore_wait(left_capacity_sem, 1);
  }
}
}  // namespace

Array<float> reduce_scatter(const Array<float>& input_arr, const Mesh& mesh,
                            std::source_location where) {
  const int num_devices = mesh.size();

  auto out_shape = pl::out_shape(
      ShapeDtypeStruct<float>{
          {block_size[0], block_size[1]}},  // output
                                            // Shape: [working/recv, block[0], block[1]]
      ShapeDtypeStruct<float>{{2, block_size[0], block_size[1]}});  // hbm_scratch
  auto grid_spec = pltpu::PrefetchScalarGridSpec<0>(
      pl::in_specs(pl::BlockSpec(MemorySpace::VMEM)),
      pl::out_specs(pl::BlockSpec(MemorySpace::VMEM), pl::BlockSpec(pl::ANY)),
      pl::grid({num_devices, 2}),
      pl::scratch_shapes(pltpu::SemaphoreType::DMA, pltpu::SemaphoreType::DMA,
                         pltpu::SemaphoreType::DMA, pltpu::SemaphoreType::DMA,
                         pltpu::SemaphoreType::DMA,
                         pltpu::SemaphoreType::REGULAR,  // capacity semaphores
                         pltpu::SemaphoreType::REGULAR,
                         pltpu::VMEM<float>({block_size[0] / 2, block_size[1]})));  // accum

  auto kernel =
      pl::pallas_call(reduce_scatter_kernel, out_shape, grid_spec,
                      pltpu::CompilerParams{.collective_id = 0}, pl::name("reduce_scatter"));
  auto pallas_reduce_scatter = [&](const Array<float>& x) {
    return std::get<0>(
        kernel(as_blocks(x, num_devices, block_size[0], block_size[1], "reduce_scatter", where)));
  };
  return jax::shard_map(pallas_reduce_scatter, mesh, P(None, "x"), P("x", None))(input_arr);
}

Array<float> reduce_scatter_nested(const Array<float>& input_arr, const Mesh& mesh,
                                   int64_t outer_rows, int64_t outer_cols,
                                   std::source_location where) {
  const int num_devices = mesh.size();
  // The inner pipeline walks each half of an outer block in (8, 128) blocks.
  if (outer_rows < 16 || outer_cols < 128 || outer_rows % 16 != 0 || outer_cols % 128 != 0) {
    usage_error("reduce_scatter_nested",
                "the outer block (" + std::to_string(outer_rows) + ", " +
                    std::to_string(outer_cols) +
                    ") must have rows a multiple of 16 and columns a multiple of 128 (two halves "
                    "of rows, each walked in (8, 128) blocks)",
                "round the block up, e.g. (" + std::to_string((outer_rows + 15) / 16 * 16) + ", " +
                    std::to_string((outer_cols + 127) / 128 * 128) + ")",
                where);
  }
  // A large outer block, which would not fit VMEM (the kernel's inner pipeline has small ones).
  const int64_t outer_block_size[2] = {outer_rows, outer_cols};

  auto out_shape = pl::out_shape(
      ShapeDtypeStruct<float>{{outer_block_size[0], outer_block_size[1]}},
      // Shape: [working/recv, block[0], block[1]]
      ShapeDtypeStruct<float>{{2, outer_block_size[0], outer_block_size[1]}});  // hbm_scratch
  auto grid_spec = pltpu::PrefetchScalarGridSpec<0>(
      pl::in_specs(pl::BlockSpec(pl::ANY)),
      pl::out_specs(pl::BlockSpec(pl::ANY), pl::BlockSpec(pl::ANY)), pl::grid({num_devices, 2}),
      pl::scratch_shapes(pltpu::SemaphoreType::DMA, pltpu::SemaphoreType::DMA,
                         pltpu::SemaphoreType::DMA, pltpu::SemaphoreType::DMA,
                         pltpu::SemaphoreType::DMA,
                         pltpu::SemaphoreType::REGULAR,  // capacity semaphores
                         pltpu::SemaphoreType::REGULAR));
  auto kernel =
      pl::pallas_call(reduce_scatter_nested_kernel, out_shape, grid_spec,
                      pltpu::CompilerParams{.collective_id = 0}, pl::name("reduce_scatter_nested"));
  auto pallas_reduce_scatter = [&](const Array<float>& x) {
    return std::get<0>(kernel(as_blocks(x, num_devices, outer_block_size[0], outer_block_size[1],
                                        "reduce_scatter_nested", where)));
  };
  return jax::shard_map(pallas_reduce_scatter, mesh, P(None, "x"), P("x", None))(input_arr);
}

}  // namespace tessera::examples
