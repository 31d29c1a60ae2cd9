// `tessera bench <kernel>`: times a kernel against a reference in the same process.
#pragma once

#include <CLI/CLI.hpp>
#include <cstdint>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

namespace tessera::cli {
void register_bench_command(CLI::App& app);

/// `tessera bench add` (bench_command.cc): the pipelined add against the plain loop.
struct AddOptions {
  int64_t n = 8192;
  int64_t bm = 128, bn = 128;
  int cores = 1;
  int repeats = 5;
  std::string trace_path;
  bool check = false;
};
nlohmann::json bench_add(const AddOptions& o);
/// `tessera bench steps`: an empty-body pipeline's time per grid step.
nlohmann::json bench_steps(int64_t steps, int cores, int repeats);
/// `tessera bench launch`: a tiny kernel's launch against an OpenMP region.
nlohmann::json bench_launch(int cores, int repeats, int batch);
/// The same in `processes` fresh processes of this program (bench_launch.cc): the median of
/// their ratios, each process's figures in "per_process". One process: bench_launch here.
nlohmann::json bench_launch_processes(int cores, int repeats, int processes);
/// `tessera bench suite` (bench_suite.cc).
int run_suite(int cores, bool quick, bool json, int repeats_override);

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
/// For `tessera bench matmul` and `suite` (the benchmarks with an OpenBLAS reference): when
/// OpenBLAS fell back to its generic kernels on a CPU with AVX2 or AVX-512 and OPENBLAS_CORETYPE
/// is unset, runs this program again (same `argv`) with it set to the library's best kernels for
/// the CPU (bench_matmul.cc); otherwise returns.
void rerun_with_openblas_kernels(char** argv);
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
/// The decode-sized dots of the suite (and of `bench dot` without a shape); `quick`: tiny ones.
std::vector<DotBenchOptions> dot_shapes(bool quick);
/// "bf16 (8, 128) x (512, 128).T".
std::string dot_label(const DotBenchOptions& d);
/// `tessera bench convert`: a bfloat16 (rows, cols) VMEM block to float32 against memcpy.
nlohmann::json convert_bench_json(int64_t rows, int64_t cols, int repeats);
}  // namespace tessera::cli
