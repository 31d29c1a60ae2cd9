// `tessera run <collective> --devices N`: each collective of distributed.h on random data,
// checked against a plain host loop (lax.ppermute, lax.all_gather, lax.psum, lax.psum_scatter
// and a matmul, computed on the global arrays).
#include <cmath>
#include <cstring>
#include <functional>
#include <ostream>
#include <random>
#include <string>
#include <vector>

#include "distributed.h"

namespace tessera::examples {

namespace {
std::string fmt_rank(int rank) { return " (MPI rank " + std::to_string(rank) + ")"; }

Array<float> random_array(Shape shape, unsigned seed) {
  std::mt19937 rng(seed);
  std::uniform_real_distribution<float> uniform(0.0f, 1.0f);
  Array<float> a(std::move(shape), 0.0f);
  for (float& v : a) v = uniform(rng);
  return a;
}

// The largest |a - b| over all elements; infinity when the shapes differ.
double max_difference(const Array<float>& a, const Array<float>& b) {
  if (a.shape() != b.shape()) return INFINITY;
  double m = 0;
  for (int64_t i = 0; i < a.size(); ++i) m = std::max(m, std::fabs(double(a[i]) - double(b[i])));
  return m;
}

// A device's slice of columns [d * w, (d + 1) * w) of a 2-D array, summed over devices, written to
// every device's slice (lax.psum of P(None, 'x') shards).
Array<float> psum_columns(const Array<float>& x, int n) {
  const int64_t r = x.shape()[0];
  const int64_t w = x.shape()[1] / n;
  Array<float> out(x.shape(), 0.0f);
  for (int64_t i = 0; i < r; ++i) {
    for (int64_t j = 0; j < w; ++j) {
      float s = 0;
      for (int d = 0; d < n; ++d) s += x(i, d * w + j);
      for (int d = 0; d < n; ++d) out(i, d * w + j) = s;
    }
  }
  return out;
}

// lax.psum_scatter of P(None, 'x') shards (16 n or rows n, 128 or cols): device d gets the sum over
// devices of their block d of rows.
Array<float> psum_scatter(const Array<float>& x, int n) {
  const int64_t rows = x.shape()[0] / n;
  const int64_t cols = x.shape()[1] / n;
  Array<float> out({rows * n, cols}, 0.0f);
  for (int d = 0; d < n; ++d) {
    for (int64_t i = 0; i < rows; ++i) {
      for (int64_t j = 0; j < cols; ++j) {
        float s = 0;
        for (int e = 0; e < n; ++e) s += x(d * rows + i, e * cols + j);
        out(d * rows + i, j) = s;
      }
    }
  }
  return out;
}

// One collective: its global inputs and their specs, the host reference of its global output
// and that output's spec, and the call. Under MPI each rank passes its shards and checks its
// shard of the output; in process the global arrays go in and come out.
struct Case {
  std::vector<Array<float>> inputs;
  std::vector<PartitionSpec> in_specs;
  Array<float> reference;
  PartitionSpec out_spec;
  std::function<Array<float>(const std::vector<Array<float>>&)> call;
  std::string what;
  double scale = 1;  // the error is divided by it (a matmul's sums of 128 products)
};

Case make_case(const std::string& name, int n, const Mesh& mesh) {
  Case c;
  if (name == "right_permute") {
    c.inputs = {random_array({8, 128 * n}, 0)};
    c.in_specs = {P(None, "x")};
    const Array<float>& x = c.inputs[0];
    c.reference = Array<float>(x.shape(), 0.0f);
    for (int64_t i = 0; i < 8; ++i) {
      for (int64_t j = 0; j < 128 * n; ++j) c.reference(i, (j + 128) % (128 * n)) = x(i, j);
    }
    c.out_spec = P(None, "x");
    c.call = [&mesh](const auto& in) { return right_permute(in[0], mesh); };
    c.what = "x (8, 128 n) sharded P(None, 'x') rotated one device right";
  } else if (name == "all_gather") {
    c.inputs = {random_array({8 * n, 128}, 1)};
    c.in_specs = {P("x", None)};
    c.reference = Array<float>({int64_t{n} * n, 8, 128}, 0.0f);
    for (int d = 0; d < n; ++d) {
      std::memcpy(c.reference.data() + int64_t{d} * n * 8 * 128, c.inputs[0].data(),
                  sizeof(float) * static_cast<size_t>(c.inputs[0].size()));
    }
    c.out_spec = P("x", None);
    c.call = [&mesh](const auto& in) { return all_gather(in[0], mesh); };
    c.what = "x (8 n, 128) gathered on every device: (n * n, 8, 128)";
  } else if (name == "all_reduce") {
    c.inputs = {random_array({8, 128 * n}, 2)};
    c.in_specs = {P(None, "x")};
    c.reference = psum_columns(c.inputs[0], n);
    c.out_spec = P(None, "x");
    c.call = [&mesh](const auto& in) { return all_reduce(in[0], mesh); };
    c.what = "lax.psum of x (8, 128 n) sharded P(None, 'x')";
  } else if (name == "reduce_scatter" || name == "reduce_scatter_nested") {
    const bool nested = name == "reduce_scatter_nested";
    c.inputs = {random_array(nested ? Shape{64 * n, 256 * n} : Shape{16 * n, 128 * n}, 3)};
    c.in_specs = {P(None, "x")};
    c.reference = psum_scatter(c.inputs[0], n);
    c.out_spec = P("x", None);
    c.call = [&mesh, nested](const auto& in) {
      return nested ? reduce_scatter_nested(in[0], mesh, 64, 256) : reduce_scatter(in[0], mesh);
    };
    c.what = nested ? "lax.psum_scatter of x (64 n, 256 n), outer blocks (64, 256), inner (8, 128)"
                    : "lax.psum_scatter of x (16 n, 128 n), blocks (16, 128)";
  } else if (name == "all_gather_bidirectional") {
    c.inputs = {random_array({16 * n, 128}, 5)};
    c.in_specs = {P("x")};
    c.reference = Array<float>(c.inputs[0]);
    c.out_spec = P(None);
    c.call = [&mesh](const auto& in) { return all_gather_bidirectional(in[0], mesh); };
    c.what = "ops/tpu/all_gather.py on x (16 n, 128): the whole x on every device";
  } else if (name == "collective_matmul") {
    c.inputs = {random_array({16 * n, 128}, 6), random_array({128, 128 * n}, 7)};
    c.in_specs = {P("x", None), P(None, "x")};
    const Array<float>& x = c.inputs[0];
    const Array<float>& w = c.inputs[1];
    c.reference = Array<float>({16 * n, 128 * n}, 0.0f);
    for (int64_t i = 0; i < 16 * n; ++i) {
      for (int64_t p = 0; p < 128; ++p) {
        for (int64_t j = 0; j < 128 * n; ++j) c.reference(i, j) += x(i, p) * w(p, j);
      }
    }
    c.out_spec = P(None, "x");
    c.call = [&mesh](const auto& in) { return collective_matmul(in[0], in[1], mesh); };
    c.what = "all_gather(x (16 n, 128)) @ w (128, 128 n), the gather fused with the matmul";
    c.scale = 128;
  } else if (name == "ring_all_reduce") {
    c.inputs = {random_array({64 * n, 256 * n}, 8)};
    c.in_specs = {P(None, "x")};
    c.reference = psum_columns(c.inputs[0], n);
    c.out_spec = P(None, "x");
    c.call = [&mesh](const auto& in) { return ring_all_reduce_mapped(in[0], mesh, 1); };
    c.what = "the bandwidth-optimal ring all-reduce of x (64 n, 256 n) sharded P(None, 'x')";
  }
  return c;
}

const CollectiveExample kExamples[] = {
    {"right_permute", "lax.ppermute to the right neighbour (the distributed tutorial)"},
    {"all_gather", "the ring all-gather of the distributed tutorial"},
    {"all_reduce", "the tutorial's all-reduce: double buffer, capacity semaphores, barrier"},
    {"reduce_scatter", "the tutorial's bidirectional reduce-scatter"},
    {"reduce_scatter_nested", "the reduce-scatter with large HBM blocks, nested emit_pipeline"},
    {"all_gather_bidirectional", "Pallas' ops/tpu/all_gather.py"},
    {"collective_matmul", "all_gather(x) @ w with the gather fused into the matmul"},
    {"ring_all_reduce", "the bandwidth-optimal ring all-reduce (tessera bench allreduce)"},
};
}  // namespace

const CollectiveExample* collective_examples(int& count) {
  count = static_cast<int>(sizeof(kExamples) / sizeof(kExamples[0]));
  return kExamples;
}

bool run_collective(const char* name, int devices, std::ostream& out) {
  const Mesh mesh = jax::make_mesh({devices}, {"x"});
  if (devices < 2 && std::strcmp(name, "all_gather") == 0) {
    out << name << ": needs at least 2 devices (its grid has n - 1 steps)  skipped\n";
    return true;
  }
  Case c = make_case(name, devices, mesh);
  if (!c.call) return false;
  // Under MPI (one device per rank) the kernels take and give this rank's shards.
  const bool distributed = detail::mesh_is_distributed(mesh, std::source_location::current());
  if (distributed) {
    const int me = jax::process_index();
    for (size_t i = 0; i < c.inputs.size(); ++i) {
      c.inputs[i] = detail::take_shard(mesh, c.in_specs[i], c.inputs[i], me, i, {});
    }
    c.reference = detail::take_shard(mesh, c.out_spec, c.reference, me, 0, {});
  }
  const double error = max_difference(c.call(c.inputs), c.reference) / c.scale;
  const bool ok = error <= 1e-5;
  out << name << " on " << devices << " device" << (devices == 1 ? "" : "s")
      << (distributed ? fmt_rank(jax::process_index()) : std::string()) << ": " << c.what
      << "; max |difference| from the host reference " << error << "  " << (ok ? "ok" : "WRONG")
      << "\n";
  return ok;
}

}  // namespace tessera::examples
