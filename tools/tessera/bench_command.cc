// `tessera bench add|steps|launch|suite`: the pipelined add (Pallas' pipelining tutorial) on N x N
// float32 against a plain multi-threaded loop computing the same sum, alternating the two so that
// both see the same machine state; an empty-body pipeline's cost per grid step; a tiny kernel's
// launch against an OpenMP region; and the suite of all of them (with the matmul of
// bench_matmul.cc), one JSON object per line. docs/performance.md lists the fields.
#include "bench_command.h"

#include <omp.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <functional>
#include <iostream>
#include <nlohmann/json.hpp>
#include <optional>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "bench_allreduce.h"
#include "bench_timing.h"
#include "int_option.h"
#include "matmul.h"
#include "omp_binding.h"
#include "pipelined_add.h"
#include "tessera/tessera.h"

namespace tessera::cli {

// The pipelined add against the plain loop; the JSON object that `bench add --json` prints.
nlohmann::json bench_add(const AddOptions& o) {
  const int64_t n = o.n;
  const int cores = o.cores;
  Array<float> x({n, n});
  Array<float> y({n, n});
  std::mt19937 rng(11);
  std::uniform_real_distribution<float> d(-1.0f, 1.0f);
  for (float& v : x) v = d(rng);
  for (float& v : y) v = d(rng);
  const double bytes = 3.0 * 4.0 * static_cast<double>(n) * static_cast<double>(n);

  auto plain = [&] {
    Array<float> out(detail::Uninitialized{}, x.shape());
    const float* xp = x.data();
    const float* yp = y.data();
    float* op = out.data();
    const int64_t total = out.size();
#pragma omp parallel for num_threads(cores) schedule(static)
    for (int64_t i = 0; i < total; ++i) op[i] = xp[i] + yp[i];
    return out;
  };
  auto ours = [&] { return examples::pipelined_add(x, y, cores, o.bm, o.bn); };
  // Warm up both (pages, pools, caches of freed blocks), then alternate.
  double max_error = 0;
  {
    const Array<float> out = ours();
    for (int64_t i = 0; i < out.size(); ++i) {
      max_error = std::max(max_error, static_cast<double>(std::fabs(out[i] - (x[i] + y[i]))));
    }
    (void)plain();
  }
  // A repeat times a batch of back-to-back calls of at least 50 ms, the same count for both
  // (one call of ours, timed after a pause, sets it), as `bench matmul` does: one call of a
  // millisecond or two after a pause times how fast the threads and the memory wake more than
  // the add (docs/performance.md, "The add in batches").
  const int calls = calls_per_batch(seconds([&] { (void)ours(); }));
  std::vector<double> t_pipe, t_plain;
  {
    // With --trace the timed runs of the pipeline are traced (the plain loop has no kernels),
    // so the timings include what tracing costs; the summary goes to stderr.
    std::optional<trace::Session> session;
    if (!o.trace_path.empty()) {
      trace::Options to;
      to.trace_path = o.trace_path;
      session.emplace(std::move(to));
    }
    const PinnedOmpTeam pinned(cores);  // after the warm-up made Tessera's core threads
    Progress progress("tessera bench add", o.repeats);
    for (int r = 0; r < o.repeats; ++r) {
      t_pipe.push_back(seconds_per_call([&] { (void)ours(); }, calls));
      t_plain.push_back(seconds_per_call([&] { (void)plain(); }, calls));
      progress.done(r + 1);
    }
  }
  std::vector<double> t_checked;
  if (o.check) {
    const pltpu::ForceTpuInterpretMode force;
    (void)ours();  // warm-up, and any diagnostic
    for (int r = 0; r < o.repeats; ++r) t_checked.push_back(seconds([&] { (void)ours(); }));
  }
  const Stats sp = stats_of(t_pipe);
  const Stats sr = stats_of(t_plain);
  nlohmann::json j;
  j["kernel"] = "add";
  j["dtype"] = "f32";
  j["shape"] = {n, n};
  j["cores"] = cores;
  j["block"] = {o.bm, o.bn};
  j["simd_target"] = pltpu::get_tpu_info().cpu->simd_target;
  j["repeats"] = o.repeats;
  j["calls_per_repeat"] = calls;
  j["seconds"] = {{"min", sp.min}, {"median", sp.median}, {"max", sp.max}};
  j["gbps"] = bytes / sp.median / 1e9;
  j["max_error"] = max_error;
  j["traced"] = !o.trace_path.empty();
  j["reference"] = {{"name", "plain loop (OpenMP)"},
                    {"threads", "pinned, one per CPU (tools/tessera/omp_binding.h)"},
                    {"seconds", {{"min", sr.min}, {"median", sr.median}, {"max", sr.max}}},
                    {"gbps", bytes / sr.median / 1e9}};
  j["ratio_gbps"] = sr.median / sp.median;
  // Each repeat times the two back to back, so their ratio cancels the drift of this machine's
  // memory bandwidth between repeats; the median of those ratios is the steadier figure.
  j["ratio_paired"] = paired_ratio(t_plain, t_pipe);
  if (!t_checked.empty()) {
    const Stats sc = stats_of(t_checked);
    j["checked"] = {{"seconds", {{"min", sc.min}, {"median", sc.median}, {"max", sc.max}}},
                    {"over_native", sc.median / sp.median}};
  }
  return j;
}

namespace {
int run_add(const AddOptions& o, bool json) {
  const nlohmann::json j = bench_add(o);
  const double max_error = j["max_error"].get<double>();
  if (json) {
    std::cout << j.dump(2) << "\n";
  } else {
    const double tp = j["seconds"]["median"].get<double>();
    const double tr = j["reference"]["seconds"]["median"].get<double>();
    const int calls = j["calls_per_repeat"].get<int>();
    std::cout << "add " << o.n << "x" << o.n << " f32, blocks (" << o.bm << ", " << o.bn << ") on "
              << o.cores << " cores, " << o.repeats << " repeats of " << calls
              << (calls == 1 ? " call" : " calls") << " (medians): pipeline " << tp * 1e3 << " ms ("
              << j["gbps"].get<double>() << " GB/s), plain loop " << tr * 1e3 << " ms ("
              << j["reference"]["gbps"].get<double>() << " GB/s), ratio " << tr / tp
              << " (median of paired repeats " << j["ratio_paired"].get<double>() << "), max error "
              << max_error << "\n";
    if (j.contains("checked")) {
      std::cout << "checked mode: " << j["checked"]["seconds"]["median"].get<double>() * 1e3
                << " ms, " << j["checked"]["over_native"].get<double>() << "x native\n";
    }
  }
  return max_error == 0 ? 0 : 1;
}

}  // namespace

// Per grid step cost of the pipeline machinery: emit_pipeline over `steps` (8, 128) blocks of a
// read-only input and an output with an empty body (the native engine uses both blocks where
// they lie, so nothing is copied), timed inside one kernel launch, so that the launch is not
// counted. `cores` cores split the grid (PARALLEL); the figure is a core's time per step.
nlohmann::json bench_steps(int64_t steps, int cores, int repeats) {
  const int64_t per_core = (steps + cores - 1) / cores;
  Array<float> x({steps * 8, 128}, 1.0f);
  // Seconds of each repeat, per core.
  std::vector<double> t(static_cast<size_t>(repeats * cores), 0.0);
  // The throughput probe on each core's thread before each repeat (bench_timing.h).
  std::vector<double> probe(t.size(), 0.0);
  auto kernel = pl::kernel(pl::out_type<float>({steps * 8, 128}),
                           pltpu::TensorCoreMesh("core", cores), pl::name("empty_pipeline"))(
      [&](pltpu::HbmRef<const float> x_hbm, pltpu::HbmRef<float> o_hbm) {
        const int core = lax::axis_index("core");
        const pl::BlockSpec spec({8, 128}, [](int i) { return pl::idx(i, 0); });
        auto pipeline = pltpu::emit_pipeline(
            [](pltpu::VmemRef<const float>, pltpu::VmemRef<float>) {}, pltpu::grid({steps}),
            pl::in_specs(spec), pl::out_specs(spec), pltpu::core_axis_name("core"),
            pltpu::dimension_semantics(pltpu::PARALLEL));
        pipeline(x_hbm, o_hbm);  // warm-up
        for (int r = 0; r < repeats; ++r) {
          probe[static_cast<size_t>(r * cores + core)] = throughput_probe_ns();
          const auto t0 = std::chrono::steady_clock::now();
          pipeline(x_hbm, o_hbm);
          t[static_cast<size_t>(r * cores + core)] =
              std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
        }
      });
  (void)kernel(x);
  std::vector<double> per_step;
  for (double s : t) per_step.push_back(s / static_cast<double>(per_core));
  const Stats st = stats_of(per_step);
  nlohmann::json j;
  j["kernel"] = "steps";
  j["dtype"] = "f32";
  j["shape"] = {steps};
  j["block"] = {8, 128};
  j["cores"] = cores;
  j["repeats"] = repeats;
  j["seconds_per_step"] = {{"min", st.min}, {"median", st.median}, {"max", st.max}};
  j["ns_per_step"] = st.median * 1e9;
  j["target_ns_per_step"] = 100;
  const Stats sp = stats_of(probe);
  j["throughput_probe_ns"] = {{"min", sp.min}, {"median", sp.median}, {"max", sp.max}};
  return j;
}

// A tiny kernel on `cores` cores (each fills a (128,) VMEM block and copies it to its slice of the
// output: the quickstart's iota, as bench/launch_bench.cc) against an OpenMP parallel region of
// as many threads doing the same work on the same allocation. Each sample is the mean of
// `batch` back-to-back calls after a pause (spinning threads of the other runtime go to sleep)
// and a warm-up; samples alternate between the two.
nlohmann::json bench_launch(int cores, int repeats, int batch) {
  auto kernel = pl::kernel(pl::out_type<float>({128 * cores}), pltpu::TensorCoreMesh("core", cores),
                           pl::scratch_types(pltpu::VMEM<float>({128})), pl::name("tiny_launch"))(
      [](pltpu::HbmRef<float> o_ref, pltpu::VmemRef<float> o_vmem) {
        const int i = lax::axis_index("core");
        o_vmem = jnp::arange<float>(128) + float(i * 128);
        pltpu::sync_copy(o_vmem, o_ref.at(pl::ds(i * 128, 128)));
      });
  auto omp_region = [cores] {
    Array<float> out(detail::Uninitialized{}, Shape{128 * cores});
    float* o = out.data();
#pragma omp parallel num_threads(cores)
    {
      alignas(64) float block[128];
      const int i = omp_get_thread_num();
      for (int k = 0; k < 128; ++k) block[k] = static_cast<float>(k) + static_cast<float>(i * 128);
      std::memcpy(o + i * 128, block, sizeof block);
    }
    return out;
  };
  bool right = true;
  {
    const Array<float> a = kernel();
    const Array<float> b = omp_region();
    for (int k = 0; k < 128 * cores; ++k) right = right && a[k] == b[k] && a[k] == float(k);
  }
  std::vector<double> t_ours, t_omp;
  auto timed_batch = [batch](auto&& f) {
    std::this_thread::sleep_for(std::chrono::milliseconds(150));
    for (int i = 0; i < batch / 10 + 1; ++i) (void)f();  // wake the threads, warm the caches
    const auto t0 = std::chrono::steady_clock::now();
    for (int i = 0; i < batch; ++i) (void)f();
    return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count() / batch;
  };
  {
    const PinnedOmpTeam pinned(cores);  // after the warm-up made Tessera's core threads
    for (int r = 0; r < repeats; ++r) {
      t_ours.push_back(timed_batch([&] { return kernel(); }));
      t_omp.push_back(timed_batch(omp_region));
    }
  }
  const Stats so = stats_of(t_ours);
  const Stats sr = stats_of(t_omp);
  nlohmann::json j;
  j["kernel"] = "launch";
  j["dtype"] = "f32";
  j["shape"] = {128 * cores};
  j["cores"] = cores;
  j["repeats"] = repeats;
  j["batch"] = batch;
  j["seconds"] = {{"min", so.min}, {"median", so.median}, {"max", so.max}};
  j["right"] = right;
  j["reference"] = {{"name", "OpenMP parallel region"},
                    {"seconds", {{"min", sr.min}, {"median", sr.median}, {"max", sr.max}}}};
  j["time_ratio"] = so.median / sr.median;  // ours / OpenMP: <= 1 is as fast or faster
  return j;
}

namespace {

/// What `tessera bench` was given (CLI11 writes into it while parsing).
struct BenchArgs {
  std::string kernel;
  int64_t size = 0;
  int cores = 0;
  int repeats = 0;
  bool json = false;
  bool quick = false;
  bool check = false;
  std::vector<int64_t> block{128, 128};
  std::string trace_path;
  bool transpose_rhs = false;
  bool no_transpose_rhs = false;
  int processes = 5;  // launch: fresh processes (bench_launch.cc)
  // Set when the user gave them (dot's defaults differ from matmul's).
  CLI::Option* m_opt = nullptr;
  CLI::Option* dtype_opt = nullptr;
  AllreduceBenchOptions allreduce;
  MatmulBenchOptions mm{2048,
                        2048,
                        2048,
                        examples::kDefaultMatmulBlocks.bm,
                        examples::kDefaultMatmulBlocks.bn,
                        examples::kDefaultMatmulBlocks.bk,
                        "f32",
                        0,
                        5,
                        false};
};

void add_common_options(CLI::App* bench, BenchArgs& a) {
  bench->add_option("kernel", a.kernel, "The kernel to time")
      ->required()
      ->check(CLI::IsMember(
          {"add", "matmul", "dot", "convert", "steps", "launch", "suite", "allreduce"}));
  bench
      ->add_option("--size", a.size,
                   "add: N for N x N inputs (default 8192); steps: grid steps "
                   "(default 4096); convert: rows of a (rows, 128) block (default 512)")
      ->check(integer_in(1, 65536));
  bench->add_option("--cores", a.cores, "Mesh cores (default: this machine's; steps: 1)")
      ->check(integer_in(1, 256));
  bench->add_option("--repeats", a.repeats, "Timed repetitions (default 5; suite 7)")
      ->check(integer_in(1, 1000));
  bench->add_option("--block", a.block, "add: block shape BM BN (default 128 128)")
      ->expected(2)
      ->check(integer_in(1, 65536));
  bench->add_flag("--json", a.json, "Print JSON (fields: docs/performance.md)");
  bench->add_flag("--quick", a.quick, "suite: tiny sizes (seconds, for tests)");
  bench
      ->add_option("--trace", a.trace_path,
                   "add, matmul: trace the timed runs of the Tessera kernel (Chrome JSON to FILE, "
                   "summary to stderr); the timings then include tracing's cost")
      ->type_name("FILE");
  bench->add_option("--mib", a.allreduce.mib, "allreduce: float32 MiB per device (default 64)")
      ->check(CLI::Range(0.001, 65536.0));
  bench->add_option("--devices", a.allreduce.devices, "allreduce: devices (default 2)")
      ->check(integer_in(1, 256));
  bench->add_flag("--mpi", a.allreduce.mpi,
                  "allreduce: report the kernel over MPI ranks (one device per rank)");
  bench
      ->add_option("--processes", a.processes,
                   "launch: time it in this many fresh processes and report the median of their "
                   "ratios (default 5; a process's figures vary from one to the next)")
      ->check(integer_in(1, 100));
  bench->add_flag("--check", a.check,
                  "Also time the kernel in checked mode (docs/checked-mode.md) and report its "
                  "ratio to native");
}

void add_matmul_options(CLI::App* bench, BenchArgs& a) {
  MatmulBenchOptions& mm = a.mm;
  a.m_opt = bench->add_option("--m", mm.m, "matmul, dot: M (default 2048; dot: a sweep)")
                ->check(integer_in(1, 1 << 16));
  bench->add_option("--n", mm.n, "matmul, dot: N (default 2048; dot 512)")
      ->check(integer_in(1, 1 << 16));
  bench->add_option("--k", mm.k, "matmul, dot: K (default 2048; dot 128)")
      ->check(integer_in(1, 1 << 16));
  bench->add_option("--bm", mm.bm, "matmul: block rows (default: chosen from the CPU's caches)")
      ->check(integer_in(1, 1 << 16));
  bench->add_option("--bn", mm.bn, "matmul: block columns")->check(integer_in(1, 1 << 16));
  bench->add_option("--bk", mm.bk, "matmul: block depth")->check(integer_in(1, 1 << 16));
  a.dtype_opt = bench
                    ->add_option("--dtype", mm.dtype,
                                 "matmul: f32 or bf16 (default f32); dot: also int8 (default: "
                                 "each)")
                    ->check(CLI::IsMember({"f32", "bf16", "int8"}));
  bench->add_flag("--transpose-rhs", a.transpose_rhs, "dot: x @ y.T with y (N, K) (the default)");
  bench->add_flag("--no-transpose-rhs", a.no_transpose_rhs, "dot: x @ y with y (K, N)");
}

// `bench dot`: one shape when --m is given, else the suite's sweep (in the dtype given, or each).
int run_dot_command(const BenchArgs& a) {
  std::vector<DotBenchOptions> shapes;
  if (a.m_opt->count() > 0) {
    DotBenchOptions d;
    d.m = a.mm.m;
    d.n = a.mm.n == 2048 ? 512 : a.mm.n;
    d.k = a.mm.k == 2048 ? 128 : a.mm.k;
    d.dtype = a.dtype_opt->count() > 0 ? a.mm.dtype : "bf16";
    d.transpose_rhs = !a.no_transpose_rhs;
    shapes.push_back(d);
  } else {
    for (const DotBenchOptions& d : dot_shapes(false)) {
      if (a.dtype_opt->count() == 0 || d.dtype == a.mm.dtype) shapes.push_back(d);
    }
  }
  bool ok = true;
  for (DotBenchOptions d : shapes) {
    if (a.repeats > 0) d.repeats = a.repeats;
    const nlohmann::json j = dot_bench_json(d);
    if (d.dtype == "int8") ok = ok && j["max_abs_diff_from_reference"] == 0;
    if (a.json) {
      std::cout << j.dump() << "\n" << std::flush;
      continue;
    }
    std::cout << "dot " << dot_label(d)
              << ", 1 core: " << j["seconds"]["median"].get<double>() * 1e6 << " us ("
              << j["gflops"].get<double>() << " GFLOP/s), "
              << j["reference"]["name"].get<std::string>() << " "
              << j["reference"]["seconds"]["median"].get<double>() * 1e6 << " us, ratio "
              << j["ratio"].get<double>() << ", max diff "
              << j["max_abs_diff_from_reference"].get<double>() << "\n"
              << std::flush;
  }
  return ok ? 0 : 1;
}

int run_convert_command(const BenchArgs& a) {
  const int64_t rows = a.size > 0 ? a.size : 512;
  const nlohmann::json j = convert_bench_json(rows, 128, a.repeats > 0 ? a.repeats : 7);
  if (a.json) {
    std::cout << j.dump(2) << "\n";
  } else {
    std::cout << "astype bf16 -> f32 of a (" << rows
              << ", 128) VMEM block, 1 core: " << j["seconds"]["median"].get<double>() * 1e6
              << " us (" << j["gbps"].get<double>() << " GB/s read + written), memcpy of the f32 "
              << "bytes " << j["reference"]["seconds"]["median"].get<double>() * 1e6
              << " us, ratio " << j["ratio"].get<double>() << "\n";
  }
  return j["right"].get<bool>() ? 0 : 1;
}

int run_steps_command(const BenchArgs& a) {
  const int64_t steps = a.size > 0 ? a.size : 4096;
  const nlohmann::json j =
      bench_steps(steps, a.cores > 0 ? a.cores : 1, a.repeats > 0 ? a.repeats : 21);
  if (a.json) {
    std::cout << j.dump(2) << "\n";
  } else {
    std::cout << "empty-body pipeline, " << steps << " steps of (8, 128) blocks on "
              << j["cores"].get<int>() << (j["cores"].get<int>() == 1 ? " core" : " cores") << ": "
              << j["ns_per_step"].get<double>() << " ns per step (median of "
              << j["repeats"].get<int>() << " runs; target 100 ns); throughput probe "
              << j["throughput_probe_ns"]["median"].get<double>()
              << " ns an iteration on the same thread (docs/performance.md)\n";
  }
  return 0;
}

int run_launch_command(const BenchArgs& a, int cores) {
  const nlohmann::json j =
      bench_launch_processes(cores, a.repeats > 0 ? a.repeats : 9, a.processes);
  if (a.json) {
    std::cout << j.dump(2) << "\n";
  } else {
    const std::string over =
        j.contains("processes") ? "; over " + std::to_string(j["processes"].get<int>()) +
                                      " processes, medians of theirs and the median of their ratios"
                                : "";
    std::cout << "launch of a tiny kernel on " << cores
              << " cores: " << j["seconds"]["median"].get<double>() * 1e9 << " ns, OpenMP region "
              << j["reference"]["seconds"]["median"].get<double>() * 1e9 << " ns, time ratio "
              << j["time_ratio"].get<double>() << " (medians of " << j["repeats"].get<int>()
              << " batches of " << j["batch"].get<int>() << over << ")\n";
  }
  return j["right"].get<bool>() ? 0 : 1;
}

int run_bench_kernel(BenchArgs& a) {
  const int c = a.cores > 0 ? a.cores : pltpu::get_tpu_info().num_cores;
  // Only these two trace their kernel; elsewhere --trace would be silently ignored.
  if (!a.trace_path.empty() && a.kernel != "add" && a.kernel != "matmul") {
    std::cerr << "tessera bench " << a.kernel << ": --trace traces `bench add` and `bench matmul` "
              << "only; run without it, or trace an example with `tessera run NAME --trace FILE`\n";
    return 2;
  }
  if (a.kernel == "matmul") {
    if (a.mm.dtype == "int8") {
      std::cerr << "tessera bench matmul: --dtype int8 is for `bench dot`; the matmul runs f32 or "
                   "bf16\n";
      return 2;
    }
    a.mm.cores = c;
    a.mm.repeats = a.repeats > 0 ? a.repeats : 5;
    a.mm.json = a.json;
    a.mm.trace_path = a.trace_path;
    a.mm.check = a.check;
    return run_matmul_bench(a.mm);
  }
  if (a.kernel == "steps") return run_steps_command(a);
  if (a.kernel == "dot") return run_dot_command(a);
  if (a.kernel == "convert") return run_convert_command(a);
  if (a.kernel == "launch") return run_launch_command(a, c);
  if (a.kernel == "suite") return run_suite(c, a.quick, a.json, a.repeats);
  if (a.kernel == "allreduce") {
    a.allreduce.cores = a.cores > 0 ? a.cores : 1;
    a.allreduce.repeats = a.repeats > 0 ? a.repeats : 5;
    a.allreduce.json = a.json;
    return run_allreduce_bench(a.allreduce);
  }
  AddOptions o;
  o.n = a.size > 0 ? a.size : 8192;
  o.bm = a.block[0];
  o.bn = a.block[1];
  o.cores = c;
  o.repeats = a.repeats > 0 ? a.repeats : 5;
  o.trace_path = a.trace_path;
  o.check = a.check;
  return run_add(o, a.json);
}

}  // namespace

void register_bench_command(CLI::App& app) {
  auto* bench = app.add_subcommand(
      "bench",
      "Time a kernel against a reference computed in the same process.\nKernels:\n  "
      "add     the pipelined add (emit_pipeline, 128x128 blocks) vs a plain loop\n  "
      "matmul  the Pallas matmul tutorial (pallas_call + jnp::dot) vs oneDNN and OpenBLAS\n  "
      "dot     skinny and transposed dots (1-32 rows; f32, bf16, int8) vs oneDNN matmul\n  "
      "convert astype bf16 -> f32 of a VMEM block vs memcpy\n  "
      "steps   an empty-body pipeline's cost per grid step (target 100 ns)\n  "
      "launch  a tiny kernel launch vs an OpenMP parallel region doing the same work\n  "
      "allreduce  the ring all-reduce on --devices N vs MPI_Allreduce and the memory floor\n  "
      "suite   all of them at their default sizes, one JSON object per line with --json");
  static BenchArgs args;  // CLI11 keeps pointers into it until the callback runs
  add_common_options(bench, args);
  add_matmul_options(bench, args);
  bench->callback([] {
    if (const int rc = run_bench_kernel(args); rc != 0) throw CLI::RuntimeError(rc);
  });
}

}  // namespace tessera::cli
