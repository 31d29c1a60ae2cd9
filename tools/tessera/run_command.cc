#include "run_command.h"

#include <cstdlib>
#include <functional>
#include <iostream>
#include <optional>
#include <string>
#include <vector>

#include "distributed.h"
#include "grid_examples.h"
#include "int_option.h"
#include "matmul.h"
#include "pipelined_add.h"
#include "quickstart.h"
#include "tessera/error.h"
#include "tessera/interpret.h"
#include "tessera/trace.h"

namespace tessera::cli {

namespace {
struct Example {
  const char* name;
  const char* summary;
  std::function<bool(std::ostream&)> run;
};

// `--devices`: the devices the collective examples run on (0: TESSERA_DEVICES or the MPI ranks,
// else 2).
int g_devices = 0;
int devices_to_use() {
  if (g_devices > 0) return g_devices;
  const int n = jax::device_count();
  return n > 1 ? n : 2;
}

const std::vector<Example>& examples() {
  static const std::vector<Example> list = {
      {"quickstart", "the Pallas TPU quickstart: fill_42 and iota (examples/01_quickstart*.cc)",
       [](std::ostream& out) { return examples::run_quickstart(out); }},
      {"add", "the pipelined add with emit_pipeline (examples/02_pipelined_add*.cc)",
       [](std::ostream& out) { return examples::run_add(out); }},
      {"correct_sum", "a reduction over the last ARBITRARY axis with pallas_call (examples/03_*)",
       [](std::ostream& out) { return examples::run_correct_sum(out); }},
      {"megacore_add", "pallas_call with PARALLEL axes split over the cores (examples/04_*)",
       [](std::ostream& out) { return examples::run_megacore_add(out); }},
      {"hbm_vmem", "an input left in HBM (pl::ANY), copied by the body itself (examples/06_*)",
       [](std::ostream& out) { return examples::run_hbm_vmem(out); }},
      {"block_dynamic_slice", "a block chosen through scalar prefetch (examples/07_*)",
       [](std::ostream& out) { return examples::run_block_dynamic_slice(out); }},
      {"matmul", "the Pallas matmul tutorial: f32, bf16, x @ y.T and relu variants (examples/05_*)",
       [](std::ostream& out) { return examples::run_matmul(out); }},
  };
  static const std::vector<Example> all = [] {
    std::vector<Example> v = list;
    int count = 0;
    const examples::CollectiveExample* c = examples::collective_examples(count);
    v.push_back({"collectives", "every collective below, in turn", [c, count](std::ostream& out) {
                   bool ok = true;
                   for (int i = 0; i < count; ++i) {
                     ok = examples::run_collective(c[i].name, devices_to_use(), out) && ok;
                   }
                   return ok;
                 }});
    for (int i = 0; i < count; ++i) {
      const char* name = c[i].name;
      v.push_back({name, c[i].summary, [name](std::ostream& out) {
                     return examples::run_collective(name, devices_to_use(), out);
                   }});
    }
    return v;
  }();
  return all;
}

std::string example_list() {
  std::string s;
  for (const auto& e : examples()) s += std::string("\n  ") + e.name + "  " + e.summary;
  return s;
}
}  // namespace

void register_run_command(CLI::App& app) {
  auto* run = app.add_subcommand(
      "run", "Run an example kernel and verify its result (exit 0 only when verified)." +
                 std::string("\nExamples:") + example_list());
  static std::string name;
  static int cores = 0;
  static std::string trace_path;
  static std::string timeline_path;
  run->add_option("example", name, "The example to run")->required();
  run->add_option("--trace", trace_path,
                  "Trace every kernel of the run: write Chrome Trace Event JSON to this file (open "
                  "it in ui.perfetto.dev) and print the per-kernel summary")
      ->type_name("FILE");
  run->add_option("--timeline", timeline_path,
                  "Trace the run and draw the per-core timeline as an SVG file")
      ->type_name("FILE");
  run->add_option("--cores", cores, "Mesh cores (sets TESSERA_NUM_CORES for this run)")
      ->check(integer_in(1, 256));
  run->add_option("--devices", g_devices,
                  "Devices of the mesh for the collective examples (default: TESSERA_DEVICES, or "
                  "the MPI ranks under mpirun, else 2)")
      ->check(integer_in(1, 256));
  static bool check = false;
  run->add_flag("--check", check,
                "Run every kernel in checked mode (docs/checked-mode.md): races, uninitialised "
                "reads, bounds, capacity, deadlocks raise");
  run->callback([] {
    if (cores > 0) setenv("TESSERA_NUM_CORES", std::to_string(cores).c_str(), 1);
    for (const auto& e : examples()) {
      if (name == e.name) {
        std::optional<pltpu::ForceTpuInterpretMode> force;
        if (check) force.emplace();
        std::optional<trace::Session> session;
        if (!trace_path.empty() || !timeline_path.empty()) {
          trace::Options o;
          o.trace_path = trace_path;
          o.timeline_path = timeline_path;
          o.summary_stream = &std::cout;
          session.emplace(std::move(o));
        }
        const bool ok = e.run(std::cout);
        if (session) session->stop();
        std::cout << name << ": " << (ok ? "verified" : "WRONG RESULT")
                  << (check ? " (checked mode: no diagnostics)" : "") << "\n";
        if (!ok) throw CLI::RuntimeError(1);
        return;
      }
    }
    std::cerr << "tessera run: unknown example '" << name << "'; available:" << example_list()
              << "\n";
    throw CLI::RuntimeError(2);
  });
}

}  // namespace tessera::cli
