// `tessera bench launch` over several processes: each process times the tiny launch against the
// OpenMP region (bench_launch, bench_command.cc) and the results are combined.
//
// Why processes: on the 2-vCPU VMs these benchmarks run on, both sides' times move from one
// process to the next (measured: the OpenMP region 772-1,272 ns and the launch 708-1,092 ns
// across processes of one binary, docs/performance.md "A fused iota"), while within a process
// they hold. One process's ratio is then one draw; the median over fresh processes is the
// figure that does not depend on which draw a run got.
#include <cstdio>
#include <iostream>
#include <string>
#include <vector>

#include "bench_command.h"
#include "bench_timing.h"

namespace tessera::cli {

namespace {

// One child's JSON object (`bench launch --processes 1 --json`), or null on any failure.
nlohmann::json run_child(const std::string& self, int cores, int repeats) {
  const std::string cmd = "'" + self + "' bench launch --processes 1 --json --cores " +
                          std::to_string(cores) + " --repeats " + std::to_string(repeats);
  FILE* pipe = ::popen(cmd.c_str(), "r");
  if (pipe == nullptr) return nullptr;
  std::string out;
  char buf[4096];
  for (size_t n; (n = std::fread(buf, 1, sizeof buf, pipe)) > 0;) out.append(buf, n);
  const int rc = ::pclose(pipe);
  if (rc != 0) return nullptr;
  try {
    return nlohmann::json::parse(out);
  } catch (const nlohmann::json::exception&) {
    return nullptr;
  }
}

}  // namespace

nlohmann::json bench_launch_processes(int cores, int repeats, int processes) {
  const std::string self = self_path();
  if (processes <= 1 || self.empty()) return bench_launch(cores, repeats, 2000);
  nlohmann::json j;  // the first process's object, its figures replaced by the combined ones
  std::vector<nlohmann::json> runs;
  std::vector<double> ours, omp, ratio;
  bool right = true;
  for (int p = 0; p < processes; ++p) {
    std::cerr << "tessera bench launch: process " << p + 1 << "/" << processes << "\n";
    nlohmann::json r = run_child(self, cores, repeats);
    if (r.is_null()) {
      std::cerr << "tessera bench launch: process " << p + 1
                << " failed; timing in this process instead\n";
      r = bench_launch(cores, repeats, 2000);
    }
    ours.push_back(r["seconds"]["median"].get<double>());
    omp.push_back(r["reference"]["seconds"]["median"].get<double>());
    ratio.push_back(r["time_ratio"].get<double>());
    right = right && r["right"].get<bool>();
    runs.push_back({{"seconds", r["seconds"]["median"]},
                    {"reference_seconds", r["reference"]["seconds"]["median"]},
                    {"time_ratio", r["time_ratio"]}});
    if (p == 0) j = std::move(r);
  }
  auto spread = [](const std::vector<double>& v) {
    const Stats st = stats_of(v);
    return nlohmann::json{{"min", st.min}, {"median", st.median}, {"max", st.max}};
  };
  // Medians over the processes of each process's median.
  j["seconds"] = spread(ours);
  j["reference"]["seconds"] = spread(omp);
  j["right"] = right;
  // The median of the processes' own ratios (each side by side in one process).
  j["time_ratio"] = stats_of(ratio).median;
  j["processes"] = processes;
  j["per_process"] = runs;
  return j;
}

}  // namespace tessera::cli
