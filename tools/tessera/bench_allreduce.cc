// `tessera bench allreduce --mib S --devices N [--mpi] [--json]`: the ring all-reduce kernel
// (examples/11_ring_all_reduce.cc) on N devices, each holding S MiB of float32, against
// MPI_Allreduce of the same arrays over N ranks and against the memory-traffic floor of the same
// ring (the same kernel with every copy sent to the device itself and no start barrier: exactly
// its copies and adds, with no communication; examples/11_ring_all_reduce.cc sends the
// all-gather's copies to a receive slot there, since a copy onto itself moves nothing), in the
// same run.
//
// MPI_Allreduce needs N ranks: started outside mpirun, the command first times the kernel on N
// in-process devices and its floor, then runs itself again under `mpirun -np N` (when Tessera
// was built with MPI and mpirun is on the PATH), handing those times on in
// TESSERA_BENCH_IN_PROCESS. In the MPI job every rank times MPI_Allreduce, and with --mpi the
// kernel over the ranks themselves (one device per rank: the MPI transport). The in-process kernel
// is timed outside the job because inside it the other ranks wait meanwhile, and their waits poll
// (64 MiB on 2 devices of a 2-core VM: 28-31 ms there against 15-16 ms alone; docs/devices.md),
// and its arrays would lie in the MPI window's heap (src/mpi/mpi_window_heap.cc) rather than where
// an in-process program's lie. Started under mpirun directly, rank 0 times the in-process kernel
// inside the job, and the JSON says so ("in_process" / "memory"). Without --mpi the figures of
// record are the in-process kernel's; with --mpi the MPI transport's. Every timing is a median of
// --repeats, each the slowest device's, of a launch that follows an empty kernel's start barrier
// (device_barrier below).
#include "bench_allreduce.h"

#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <iostream>
#include <mutex>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "bench_timing.h"
#include "distributed.h"
#include "tessera/tessera.h"

#if TESSERA_HAVE_MPI
#include <mpi.h>
#endif

namespace tessera::cli {

namespace {

constexpr int64_t kCols = 1024;

// Device d's array: element i is (d + 1) + (i % 7) / 8, exact in float32 and in every partial
// sum of the ring, so the result is exact too.
float value(int d, int64_t i) { return static_cast<float>(d + 1) + static_cast<float>(i % 7) / 8; }

Array<float> device_array(int d, int64_t rows) {
  Array<float> x(detail::Uninitialized{}, Shape{rows, kCols});
  for (int64_t i = 0; i < x.size(); ++i) x[i] = value(d, i);
  return x;
}

// The largest |y - expected| of the all-reduced array of `n` devices.
double error_of(const Array<float>& y, int n) {
  double e = 0;
  for (int64_t i = 0; i < y.size(); ++i) {
    double want = 0;
    for (int d = 0; d < n; ++d) want += value(d, i);
    e = std::max(e, std::fabs(static_cast<double>(y[i]) - want));
  }
  return e;
}

// A kernel that does nothing but start: a kernel of a device mesh begins with a barrier over
// all its devices, so every device returns from it within a message's latency of the others.
// Each timed launch follows one, so that no launch's time includes waiting for a device still
// busy with what came before (checking the last result takes milliseconds, and not the same
// number on every device): without it, one device's time included up to 6 ms of such a wait in
// some runs (docs/devices.md). MPI_Allreduce is timed after MPI_Barrier for the same reason.
void device_barrier() {
  pl::kernel(pl::out_type<float>({8}), pltpu::TensorCoreMesh("core", 1),
             pl::scratch_types(pltpu::VMEM<float>({8})),
             pl::name("device_barrier"))([](pltpu::HbmRef<float> o_ref, pltpu::VmemRef<float> v) {
    v = jnp::zeros_like(v);
    pltpu::sync_copy(v, o_ref);
  })();
}

// The kernel's times in one program on `mesh`: per device a warm-up, then the ring kernel and
// its floor (the same copies and adds, each copy to the device itself, no barrier) alternately
// `launches` times; per launch the slowest device of this process. `error` gets the largest
// error of the ring's result.
struct Times {
  std::vector<double> ring, floor;
};
Times time_program(const Mesh& mesh, int64_t rows, int cores, int launches, double& error) {
  const int n = mesh.size();
  std::vector<Times> per_device(static_cast<size_t>(n));
  std::mutex mu;
  auto f = [&] {
    const int d = lax::axis_index("x");
    const Array<float> x = device_array(d, rows);
    const double e = error_of(examples::ring_all_reduce(x, cores), n);
    (void)examples::ring_all_reduce(x, cores, /*alone=*/true);
    Times mine;
    auto timed = [&](bool alone) {
      // Every device starts the launch within a message's latency of the others (the floor too,
      // so that the devices' memory traffic overlaps as in the ring).
      device_barrier();
      const auto t0 = std::chrono::steady_clock::now();
      const Array<float> y = examples::ring_all_reduce(x, cores, alone);
      return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    };
    for (int r = 0; r < launches; ++r) {
      mine.ring.push_back(timed(false));
      mine.floor.push_back(timed(true));
    }
    std::lock_guard<std::mutex> lock(mu);
    error = std::max(error, e);
    per_device[static_cast<size_t>(d)] = std::move(mine);
  };
  jax::shard_map(f, mesh, PartitionSpecs(std::vector<PartitionSpec>{}),
                 PartitionSpecs(std::vector<PartitionSpec>{}))();
  Times slowest{std::vector<double>(static_cast<size_t>(launches), 0.0),
                std::vector<double>(static_cast<size_t>(launches), 0.0)};
  for (const Times& t : per_device) {
    for (size_t r = 0; r < t.ring.size(); ++r) {
      slowest.ring[r] = std::max(slowest.ring[r], t.ring[r]);
      slowest.floor[r] = std::max(slowest.floor[r], t.floor[r]);
    }
  }
  return slowest;
}

// One repeat of the ring and its floor on `n` in-process devices, appended to `ring` / `floor`.
void time_in_process(int n, int64_t rows, int cores, std::vector<double>& ring,
                     std::vector<double>& floor, double& error) {
  const Times t = time_program(jax::make_mesh({n}, {"x"}).in_process(), rows, cores, 1, error);
  ring.push_back(t.ring[0]);
  floor.push_back(t.floor[0]);
}

nlohmann::json stats_json(const std::vector<double>& v) {
  const Stats s = stats_of(v);
  return {{"min", s.min}, {"median", s.median}, {"max", s.max}};
}

std::string cpu_model() {
  std::ifstream f("/proc/cpuinfo");
  for (std::string line; std::getline(f, line);) {
    if (line.rfind("model name", 0) == 0) return line.substr(line.find(':') + 2);
  }
  return "unknown";
}

// What the ranks' window is made of (this rank's, as every rank's): the mapping that
// src/mpi/mpi_huge_window.cc names "tessera-window" is the host's reserved huge pages.
std::string window_memory() {
  std::ifstream f("/proc/self/maps");
  for (std::string line; std::getline(f, line);) {
    if (line.find("memfd:tessera-window-shm") != std::string::npos) {
      return "the host's shared memory, its blocks collapsed into huge pages";
    }
    if (line.find("memfd:tessera-window") != std::string::npos) {
      return "huge pages the host reserved (hugetlb)";
    }
  }
  return "MPI's shared window (the host's shared memory pages)";
}

double load_average() {
  double l = 0;
  std::ifstream("/proc/loadavg") >> l;
  return l;
}

#if TESSERA_HAVE_MPI
// A barrier that sleeps instead of spinning (Open MPI's blocking calls poll a core), for ranks
// that wait while rank 0 measures.
void sleepy_barrier() {
  MPI_Request req;
  MPI_Ibarrier(MPI_COMM_WORLD, &req);
  for (int done = 0;;) {
    MPI_Test(&req, &done, MPI_STATUS_IGNORE);
    if (done != 0) return;
    std::this_thread::sleep_for(std::chrono::microseconds(200));
  }
}

// One MPI_Allreduce of `x` over all ranks after a barrier: the slowest rank's seconds.
double time_mpi_allreduce(const Array<float>& x, Array<float>& y) {
  sleepy_barrier();
  const auto t0 = std::chrono::steady_clock::now();
  MPI_Allreduce(x.data(), y.data(), static_cast<int>(x.size()), MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD);
  double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  MPI_Allreduce(MPI_IN_PLACE, &s, 1, MPI_DOUBLE, MPI_MAX, MPI_COMM_WORLD);
  return s;
}

// Whether rerun_under_mpirun can start the job.
bool can_rerun_under_mpirun() {
  return std::getenv("TESSERA_BENCH_NO_MPIRUN") == nullptr &&
         std::system("command -v mpirun > /dev/null 2>&1") == 0;
}

// Runs this command again under `mpirun -np n` (can_rerun_under_mpirun() having said it can) and
// returns its exit status, or -1 when it cannot find its own path.
int rerun_under_mpirun(int n) {
  const std::string self = self_path();
  if (self.empty()) return -1;
  // Unbound: rank 0's in-process devices need every core, as the ranks' devices do.
  std::vector<std::string> args = {"mpirun",
                                   "--allow-run-as-root",
                                   "--oversubscribe",
                                   "--bind-to",
                                   "none",
                                   "-np",
                                   std::to_string(n),
                                   self};
  // This command's own arguments, after the program's name.
  std::ifstream cmdline("/proc/self/cmdline", std::ios::binary);
  std::string arg;
  for (bool first = true; std::getline(cmdline, arg, '\0'); first = false) {
    if (!first) args.push_back(arg);
  }
  std::string cmd;
  for (const std::string& a : args) cmd += "'" + a + "' ";
  setenv("TESSERA_BENCH_NO_MPIRUN", "1", 1);
  const int rc = std::system(cmd.c_str());
  return WIFEXITED(rc) ? WEXITSTATUS(rc) : 1;
}

// The in-process kernel's times, as the command hands them to its rerun under mpirun:
// "error;ring,floor;ring,floor;..." with every number in full precision.
constexpr const char* kInProcessEnv = "TESSERA_BENCH_IN_PROCESS";

std::string encode_in_process(const std::vector<double>& ring, const std::vector<double>& floor,
                              double error) {
  char buf[64];
  std::snprintf(buf, sizeof buf, "%.17g", error);
  std::string out = buf;
  for (size_t r = 0; r < ring.size(); ++r) {
    std::snprintf(buf, sizeof buf, ";%.17g,%.17g", ring[r], floor[r]);
    out += buf;
  }
  return out;
}

// Reads encode_in_process's text; false (nothing changed) unless it holds `repeats` pairs.
bool decode_in_process(const char* text, int repeats, std::vector<double>& ring,
                       std::vector<double>& floor, double& error) {
  if (text == nullptr) return false;
  std::vector<double> r, f;
  char* at = nullptr;
  const double e = std::strtod(text, &at);
  while (at != nullptr && *at == ';') {
    char* next = nullptr;
    r.push_back(std::strtod(at + 1, &next));
    if (next == nullptr || *next != ',') return false;
    f.push_back(std::strtod(next + 1, &at));
  }
  if (at == nullptr || *at != '\0' || static_cast<int>(r.size()) != repeats) return false;
  ring = std::move(r);
  floor = std::move(f);
  error = std::max(error, e);
  return true;
}
#endif

// Every timing of the run: the ring and its floor in process, over MPI ranks, MPI_Allreduce.
struct Series {
  std::vector<double> in, floor, mpi_ring, mpi_floor, ref;
  bool in_window = false;  // the in-process kernel was timed on the MPI window's memory
};

// Prints the result (JSON, or a line).
void report(const AllreduceBenchOptions& o, int64_t rows, double error, const Series& t) {
  const int n = o.devices;
  const double bytes = o.mib * 1024 * 1024;
  // What each device moves: 7 (n - 1) / n of its array (per step, a copy reads and writes a
  // chunk, an add reads two and writes one).
  const double traffic = 7.0 * (n - 1) / n * bytes;
  const auto& [t_in, t_floor, t_mpi_ring, t_mpi_floor, t_ref, in_window] = t;
  const bool mpi = o.mpi && !t_mpi_ring.empty();
  const std::vector<double>& ours = mpi ? t_mpi_ring : t_in;
  const std::vector<double>& floor = mpi ? t_mpi_floor : t_floor;
  const Stats s = stats_of(ours);
  nlohmann::json j;
  j["kernel"] = "allreduce";
  j["dtype"] = "f32";
  j["shape"] = {rows, kCols};
  j["mib"] = o.mib;
  j["devices"] = n;
  j["cores"] = o.cores;
  j["transport"] = mpi ? "mpi" : "in-process";
  j["repeats"] = o.repeats;
  j["seconds"] = stats_json(ours);
  j["gbps"] = traffic / s.median / 1e9;
  j["max_error"] = error;
  j["floor"] = {{"name", "the same kernel with every copy to the device itself and no barrier"},
                {"seconds", stats_json(floor)},
                {"gbps", traffic / stats_of(floor).median / 1e9}};
  j["ratio_to_floor"] = s.median / stats_of(floor).median;
  j["in_process"] = {{"seconds", stats_json(t_in)},
                     {"floor_seconds", stats_json(t_floor)},
                     {"ratio_to_floor", stats_of(t_in).median / stats_of(t_floor).median},
                     {"memory", in_window ? "the MPI window (the command ran under mpirun)"
                                          : "the process heap, as an in-process program's"}};
  if (!t_ref.empty()) {
    j["reference"] = {{"name", "MPI_Allreduce"}, {"seconds", stats_json(t_ref)}};
    j["ratio_to_mpi_allreduce"] = stats_of(t_ref).median / s.median;
  } else {
    j["reference"] = {{"name", "MPI_Allreduce"},
                      {"unavailable", "Tessera was built without MPI, or mpirun is missing"}};
    j["ratio_to_mpi_allreduce"] = nullptr;
  }
  if (!t_mpi_ring.empty()) {
    j["mpi_transport"] = {
        {"seconds", stats_json(t_mpi_ring)},
        {"ratio_to_in_process", stats_of(t_mpi_ring).median / stats_of(t_in).median},
        {"window", window_memory()}};
  }
  j["cpu"] = cpu_model();
  j["load_average"] = load_average();
  if (o.json) {
    std::cout << j.dump(2) << "\n";
  } else {
    std::cout << "allreduce of " << o.mib << " MiB float32 on " << n << " devices x " << o.cores
              << " core" << (o.cores == 1 ? "" : "s") << " (" << j["transport"].get<std::string>()
              << "), medians of " << o.repeats << ": " << s.median * 1e3 << " ms, floor "
              << stats_of(floor).median * 1e3 << " ms (ratio " << j["ratio_to_floor"] << ")";
    if (!t_ref.empty()) {
      std::cout << ", MPI_Allreduce " << stats_of(t_ref).median * 1e3 << " ms (speed-up "
                << j["ratio_to_mpi_allreduce"] << ")";
    }
    if (!t_mpi_ring.empty()) {
      std::cout << ", in process " << stats_of(t_in).median * 1e3 << " ms";
    }
    std::cout << ", max error " << error << "\n";
  }
}

}  // namespace

int run_allreduce_bench(const AllreduceBenchOptions& o) {
  const int n = o.devices;
  const int64_t rows = static_cast<int64_t>(o.mib * 1024 * 1024 / 4) / kCols;
  const int64_t unit = int64_t{8} * n * o.cores;
  if (rows < unit || rows % unit != 0) {
    std::cerr << "tessera bench allreduce: --mib " << o.mib << " gives " << rows
              << " rows of 1024 floats per device; they must be a multiple of 8 x devices x cores"
              << " (" << unit << ")\n";
    return 2;
  }
  const int ranks = jax::process_count();
  double error = 0;
  std::vector<double> t_in, t_floor, t_mpi_ring, t_mpi_floor, t_ref;
  // The in-process kernel's times, when they were taken before this MPI job started.
  bool have_in = false;
#if TESSERA_HAVE_MPI
  if (ranks == 1 && n > 1 && can_rerun_under_mpirun()) {
    for (int r = 0; r < o.repeats; ++r) time_in_process(n, rows, o.cores, t_in, t_floor, error);
    setenv(kInProcessEnv, encode_in_process(t_in, t_floor, error).c_str(), 1);
    if (const int rc = rerun_under_mpirun(n); rc >= 0) return rc;
    have_in = true;  // the job could not start: report what was timed here
  }
  if (ranks > 1) {
    have_in = decode_in_process(std::getenv(kInProcessEnv), o.repeats, t_in, t_floor, error);
  }
#endif
  if (ranks > 1 && ranks != n) {
    std::cerr << "tessera bench allreduce: the job has " << ranks << " ranks but --devices is " << n
              << "\n";
    return 2;
  }
  const int rank = jax::process_index();
  // Every repeat measures everything once, in turn, so that each ratio compares runs made under
  // the same conditions (this machine's memory bandwidth drifts with other work); the in-process
  // kernel, when timed before the job, ran just before it.
#if TESSERA_HAVE_MPI
  std::optional<Array<float>> ref_x, ref_y;
  if (ranks > 1) {
    ref_x.emplace(device_array(rank, rows));
    ref_y.emplace(detail::Uninitialized{}, ref_x->shape());
    (void)time_mpi_allreduce(*ref_x, *ref_y);  // warm-up
  }
#endif
  for (int r = 0; r < o.repeats; ++r) {
    if (rank == 0 && !have_in) time_in_process(n, rows, o.cores, t_in, t_floor, error);
#if TESSERA_HAVE_MPI
    if (ranks > 1) {
      t_ref.push_back(time_mpi_allreduce(*ref_x, *ref_y));
      if (o.mpi) {
        // Each rank saw its own device: the slowest rank's times.
        const Times t = time_program(jax::make_mesh({n}, {"x"}), rows, o.cores, 1, error);
        double both[2] = {t.ring[0], t.floor[0]};
        MPI_Allreduce(MPI_IN_PLACE, both, 2, MPI_DOUBLE, MPI_MAX, MPI_COMM_WORLD);
        t_mpi_ring.push_back(both[0]);
        t_mpi_floor.push_back(both[1]);
      }
    }
#endif
  }
#if TESSERA_HAVE_MPI
  if (ranks > 1) {
    error = std::max(error, error_of(*ref_y, ranks));
    MPI_Allreduce(MPI_IN_PLACE, &error, 1, MPI_DOUBLE, MPI_MAX, MPI_COMM_WORLD);
  }
#endif
  if (rank != 0) return error == 0 ? 0 : 1;
  report(o, rows, error,
         Series{t_in, t_floor, t_mpi_ring, t_mpi_floor, t_ref, ranks > 1 && !have_in});
  return error == 0 ? 0 : 1;
}

}  // namespace tessera::cli
