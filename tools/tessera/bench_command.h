// `tessera bench <kernel>`: times a kernel against a reference in the same process.
#pragma once

#include <CLI/CLI.hpp>
#include <cstdint>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>

namespace tessera::cli {
void register_bench_command(CLI::App& app);

/// `tessera bench matmul` (bench_matmul.cc).
struct MatmulBenchOptions {
  int64_t m, n, k;
  int64_t bm, bn, bk;
  std::string dtype;  // "f32" or "bf16"
  int cores;
  int repeats;
  bool json;
  std::string trace_path = {};  // --trace: trace the timed runs of ours
  bool check =
      false;  // also time the kernel in checked mode (docs/checked-mode.md) and report the ratio
};
int run_matmul_bench(const MatmulBenchOptions& options);
/// The same run, returning its JSON object (printing the text summary too when `print`); nullopt
/// (after a message on stderr) when the blocks do not divide the shape.
std::optional<nlohmann::json> matmul_bench_json(const MatmulBenchOptions& options, bool print);

/// `tessera bench dot` (bench_dot.cc): one dot of (m, k) x (k, n) on one core against oneDNN.
struct DotBenchOptions {
  int64_t m = 8, n = 512, k = 128;
  std::string dtype = "bf16";  // "f32", "bf16" or "int8"
  bool transpose_rhs = true;   // x @ y.T with y (n, k), as lax::dot_general ((1,), (1,))
  int repeats = 7;
};
nlohmann::json dot_bench_json(const DotBenchOptions& options);
/// `tessera bench convert`: a bfloat16 (rows, cols) VMEM block to float32 against memcpy.
nlohmann::json convert_bench_json(int64_t rows, int64_t cols, int repeats);
}  // namespace tessera::cli
