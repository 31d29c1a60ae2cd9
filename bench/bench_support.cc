#include "bench_support.h"

#include <benchmark/benchmark.h>

#include <cstdio>
#include <map>

namespace tessera::bench {

namespace {
// Collects each run's real time per iteration; medians when repetitions report aggregates.
class CollectingReporter : public benchmark::ConsoleReporter {
 public:
  void ReportRuns(const std::vector<Run>& runs) override {
    for (const Run& r : runs) {
      // Keyed by the function name, so "BM_X/real_time" and its aggregates map to "BM_X".
      const std::string name = r.run_name.function_name;
      const double t = r.GetAdjustedRealTime();
      if (r.run_type == Run::RT_Aggregate) {
        if (r.aggregate_name == "median") median_[name] = t;
      } else {
        last_[name] = t;
      }
    }
    ConsoleReporter::ReportRuns(runs);
  }
  double time_of(const std::string& name) const {
    if (auto it = median_.find(name); it != median_.end()) return it->second;
    if (auto it = last_.find(name); it != last_.end()) return it->second;
    return 0.0;
  }

 private:
  std::map<std::string, double> median_;
  std::map<std::string, double> last_;
};
}  // namespace

int run_with_ratios(int argc, char** argv, const std::vector<Ratio>& ratios) {
  benchmark::Initialize(&argc, argv);
  if (benchmark::ReportUnrecognizedArguments(argc, argv)) return 1;
  CollectingReporter reporter;
  benchmark::RunSpecifiedBenchmarks(&reporter);
  std::printf("\n");
  for (const Ratio& r : ratios) {
    const double s = reporter.time_of(r.subject);
    const double ref = reporter.time_of(r.reference);
    if (s > 0 && ref > 0) {
      std::printf("ratio %s / %s = %.3f\n", r.subject.c_str(), r.reference.c_str(), s / ref);
    }
  }
  benchmark::Shutdown();
  return 0;
}

}  // namespace tessera::bench
