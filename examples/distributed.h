// The collective kernels of Pallas' distributed tutorial (docs/pallas/tpu/distributed.md in the
// JAX repository) and of its `ops/tpu/all_gather.py`, written line by line in Tessera, plus a
// collective matmul and the bandwidth-optimal ring all-reduce that `tessera bench allreduce`
// times. Each runs on a 1-D device mesh with axis "x" (jax::shard_map) and has a host reference.
#pragma once

#include <tessera/tessera.h>

#include <iosfwd>
#include <source_location>

namespace tessera::examples {

/// `lax.ppermute` to the right: every device sends its (8, 128) slice of x (8, 128 * n), sharded
/// P(None, "x"), to its right neighbour.
Array<float> right_permute(const Array<float>& x, const Mesh& mesh);
/// `lax.all_gather` over a ring (the tutorial's all_gather_kernel): x (8 * n, 128) sharded
/// P("x", None); every device ends with all n slices, (n, 8, 128); out_specs P("x", None) stacks
/// the devices' copies into (n * n, 8, 128). Needs n >= 2.
Array<float> all_gather(const Array<float>& x, const Mesh& mesh);
/// `lax.psum` (the tutorial's all_reduce_kernel: double-buffered, capacity semaphores, a double
/// barrier on the barrier semaphore): x (8, 128 * n) sharded P(None, "x"); every device ends with
/// the sum of the n slices; returns the (8, 128 * n) joined result.
Array<float> all_reduce(const Array<float>& x, const Mesh& mesh);
/// `lax.psum_scatter`, bidirectional (the tutorial's reduce_scatter_kernel): x (16 * n, 128 * n)
/// sharded P(None, "x"), block (16, 128); returns the (16 * n, 128) result sharded P("x", None).
Array<float> reduce_scatter(const Array<float>& x, const Mesh& mesh,
                            std::source_location where = std::source_location::current());
/// The same with large HBM blocks and a nested emit_pipeline for the accumulation (the
/// tutorial's second reduce_scatter_kernel): outer block (rows, cols), inner block (8, 128) (the
/// tutorial's (4096, 4096) and (128, 128), scaled down); x (rows * n, cols * n). rows must be a
/// multiple of 16 and cols of 128, and each shard (rows * n, cols); else a UsageError at `where`
/// (reduce_scatter likewise for a shard other than (16 * n, 128)).
Array<float> reduce_scatter_nested(const Array<float>& x, const Mesh& mesh, int64_t rows,
                                   int64_t cols,
                                   std::source_location where = std::source_location::current());
/// `ops/tpu/all_gather.py`: the bidirectional all-gather (half of each shard goes left, half
/// right), VMEM blocks, a barrier on the barrier semaphore. x sharded P("x"); replicated result.
Array<float> all_gather_bidirectional(const Array<float>& x, const Mesh& mesh);
/// A collective matmul: all_gather(x) @ w, the gather fused with the matmul (each device
/// multiplies the block of x it holds while it passes it on). x (m * n, k) sharded P("x", None),
/// w (k, cols * n) sharded P(None, "x"); returns the (m * n, cols * n) product, sharded on columns.
/// Operands that are not (M, K) and (K, N) matrices raise a UsageError at `where`; M and N need
/// not be multiples of its blocks (128), and K need not be one either.
Array<float> collective_matmul(const Array<float>& x, const Array<float>& w, const Mesh& mesh,
                               std::source_location where = std::source_location::current());

/// The bandwidth-optimal ring all-reduce (reduce-scatter, then all-gather, n - 1 steps each,
/// N-slot receive buffers), on `cores` cores per device: the kernel `tessera bench allreduce`
/// times. `x` is one device's (rows, cols) array (rows a multiple of n * cores * 8, else a
/// UsageError at `where`); returns the sum over the devices. Call it on a device (inside
/// jax::shard_map). `alone`: every copy goes to the device itself and the kernel starts without
/// the device barrier — the same copies and adds with no communication, the memory-traffic floor
/// of the ring (its result is not the sum).
Array<float> ring_all_reduce(const Array<float>& x, int cores, bool alone = false,
                             std::source_location where = std::source_location::current());
/// The same kernel mapped over `mesh`: x (rows, cols * n) sharded P(None, "x").
Array<float> ring_all_reduce_mapped(const Array<float>& x, const Mesh& mesh, int cores,
                                    std::source_location where = std::source_location::current());

/// Runs the named collective on `devices` devices with random data, verifies it against a host
/// reference and prints one line; true when verified. Names: right_permute, all_gather,
/// all_reduce, reduce_scatter, reduce_scatter_nested, all_gather_bidirectional,
/// collective_matmul, ring_all_reduce.
bool run_collective(const char* name, int devices, std::ostream& out);
/// The names run_collective knows, with a one-line summary each.
struct CollectiveExample {
  const char* name;
  const char* summary;
};
const CollectiveExample* collective_examples(int& count);

}  // namespace tessera::examples
