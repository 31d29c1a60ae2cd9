// `tessera run <collective> --devices N`: each collective of distributed.h on random data,
// checked against a plain host loop (lax.ppermute, lax.all_gather, lax.psum, lax.psum_scatter
// and a matmul, computed on the global arrays).
#include <cmath>
#include <cstring>
#include <ostream>
#include <random>
#include <string>

#include "distributed.h"

namespace tessera::examples {

namespace {
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

struct Outcome {
  double error = 0;
  std::string what;
};

Outcome run_one(const std::string& name, int n, const Mesh& mesh) {
  if (name == "right_permute") {
    const Array<float> x = random_array({8, 128 * n}, 0);
    const Array<float> y = right_permute(x, mesh);
    Array<float> ref(x.shape(), 0.0f);
    for (int64_t i = 0; i < 8; ++i) {
      for (int64_t j = 0; j < 128 * n; ++j) ref(i, (j + 128) % (128 * n)) = x(i, j);
    }
    return {max_difference(y, ref), "x (8, 128 n) sharded P(None, 'x') rotated one device right"};
  }
  if (name == "all_gather") {
    const Array<float> x = random_array({8 * n, 128}, 1);
    const Array<float> y = all_gather(x, mesh);
    Array<float> ref({int64_t{n} * n, 8, 128}, 0.0f);
    for (int d = 0; d < n; ++d) {
      std::memcpy(ref.data() + int64_t{d} * n * 8 * 128, x.data(), sizeof(float) * x.size());
    }
    return {max_difference(y, ref), "x (8 n, 128) gathered on every device: (n * n, 8, 128)"};
  }
  if (name == "all_reduce") {
    const Array<float> x = random_array({8, 128 * n}, 2);
    return {max_difference(all_reduce(x, mesh), psum_columns(x, n)),
            "lax.psum of x (8, 128 n) sharded P(None, 'x')"};
  }
  if (name == "reduce_scatter") {
    const Array<float> x = random_array({16 * n, 128 * n}, 3);
    return {max_difference(reduce_scatter(x, mesh), psum_scatter(x, n)),
            "lax.psum_scatter of x (16 n, 128 n), blocks (16, 128)"};
  }
  if (name == "reduce_scatter_nested") {
    const Array<float> x = random_array({64 * n, 256 * n}, 4);
    return {max_difference(reduce_scatter_nested(x, mesh, 64, 256), psum_scatter(x, n)),
            "lax.psum_scatter of x (64 n, 256 n), outer blocks (64, 256), inner (8, 128)"};
  }
  if (name == "all_gather_bidirectional") {
    const Array<float> x = random_array({16 * n, 128}, 5);
    return {max_difference(all_gather_bidirectional(x, mesh), x),
            "ops/tpu/all_gather.py on x (16 n, 128): the whole x on every device"};
  }
  if (name == "collective_matmul") {
    const Array<float> x = random_array({16 * n, 128}, 6);
    const Array<float> w = random_array({128, 128 * n}, 7);
    Array<float> ref({16 * n, 128 * n}, 0.0f);
    for (int64_t i = 0; i < 16 * n; ++i) {
      for (int64_t p = 0; p < 128; ++p) {
        for (int64_t j = 0; j < 128 * n; ++j) ref(i, j) += x(i, p) * w(p, j);
      }
    }
    return {max_difference(collective_matmul(x, w, mesh), ref) / 128.0,
            "all_gather(x (16 n, 128)) @ w (128, 128 n), the gather fused with the matmul"};
  }
  if (name == "ring_all_reduce") {
    const Array<float> x = random_array({64 * n, 256 * n}, 8);
    return {max_difference(ring_all_reduce_mapped(x, mesh, 1), psum_columns(x, n)),
            "the bandwidth-optimal ring all-reduce of x (64 n, 256 n) sharded P(None, 'x')"};
  }
  return {-1, ""};
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
  const Outcome o = run_one(name, devices, mesh);
  if (o.error < 0) return false;
  const bool ok = o.error <= 1e-5;
  out << name << " on " << devices << " device" << (devices == 1 ? "" : "s") << ": " << o.what
      << "; max |difference| from the host reference " << o.error << "  " << (ok ? "ok" : "WRONG")
      << "\n";
  return ok;
}

}  // namespace tessera::examples
