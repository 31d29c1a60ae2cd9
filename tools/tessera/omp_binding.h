// A reference's OpenMP team pinned one thread per CPU for the length of a benchmark.
#pragma once

#include <omp.h>
#include <sched.h>

#include <vector>

namespace tessera::cli {

/// While it lives, thread i of an OpenMP team of `threads` (the calling thread is thread 0)
/// runs pinned to the i-th CPU the calling thread may use, as OMP_PROC_BIND=true would pin it;
/// each thread's own mask comes back at the end. Unpinned, a team on a 2-vCPU VM was measured
/// sharing one CPU, or waking a halted one late, for whole runs: a 2048² add at 3.2-6.6 ms
/// against 2.0 ms pinned (docs/performance.md, "Two threads on one CPU"), and a reference so
/// handicapped says nothing about the kernel it is compared with. Nothing is pinned when the
/// caller may use fewer CPUs than `threads`. Make Tessera's core threads before (they inherit
/// the mask of the thread that makes them).
class PinnedOmpTeam {
 public:
  explicit PinnedOmpTeam(int threads) : threads_(threads) {
    cpu_set_t allowed;
    CPU_ZERO(&allowed);
    if (::sched_getaffinity(0, sizeof allowed, &allowed) != 0) return;
    std::vector<int> cpus;
    for (int c = 0; c < CPU_SETSIZE; ++c) {
      if (CPU_ISSET(c, &allowed)) cpus.push_back(c);
    }
    if (static_cast<int>(cpus.size()) < threads) return;
    saved_.assign(static_cast<size_t>(threads), allowed);
#pragma omp parallel num_threads(threads)
    {
      const int i = omp_get_thread_num();
      cpu_set_t one;
      CPU_ZERO(&one);
      CPU_SET(cpus[static_cast<size_t>(i)], &one);
      (void)::sched_getaffinity(0, sizeof(cpu_set_t), &saved_[static_cast<size_t>(i)]);
      (void)::sched_setaffinity(0, sizeof one, &one);
    }
  }
  ~PinnedOmpTeam() {
    if (saved_.empty()) return;
#pragma omp parallel num_threads(threads_)
    {
      const int i = omp_get_thread_num();
      (void)::sched_setaffinity(0, sizeof(cpu_set_t), &saved_[static_cast<size_t>(i)]);
    }
  }
  PinnedOmpTeam(const PinnedOmpTeam&) = delete;
  PinnedOmpTeam& operator=(const PinnedOmpTeam&) = delete;

 private:
  int threads_;
  std::vector<cpu_set_t> saved_;
};

}  // namespace tessera::cli
