// `tessera bench allreduce` (bench_allreduce.cc).
#pragma once

namespace tessera::cli {

struct AllreduceBenchOptions {
  double mib = 64;  // float32 MiB per device
  int devices = 2;
  int cores = 1;  // per device
  int repeats = 5;
  bool mpi = false;  // the figures of record are the MPI transport's
  bool json = false;
};

/// Runs the benchmark (re-running the command under mpirun for MPI_Allreduce when it can);
/// returns the exit status.
int run_allreduce_bench(const AllreduceBenchOptions& options);

}  // namespace tessera::cli
