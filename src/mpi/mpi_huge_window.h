// Internal: the same-host window in the host's reserved huge pages (hugetlb), when it has them.
//
// MPI_Win_allocate_shared places the ranks' segments in shared memory of 4 KiB pages wherever the
// host gives its internal shared-memory mount no transparent huge pages (`shmem_enabled` `never`,
// the Debian default), and a ring all-reduce over them runs up to ~1.2x slower than over the
// process heap's huge pages (docs/devices.md, "Measured"). Huge pages that the host has reserved
// (`vm.nr_hugepages`) are the one kind a process can share without changing a mount: each rank
// maps its segment from a hugetlb memfd, reserving all of it at once, and the other ranks map the
// same file through /proc/<pid>/fd. Either every rank gets such a window or none does.
#pragma once

#include <mpi.h>

#include <cstddef>
#include <cstdint>
#include <source_location>
#include <vector>

namespace tessera::detail::mpi {

class HugeWindow {
 public:
  /// Maps one segment of at least `bytes` per rank of `comm` (all on this host; collective over
  /// it: every rank calls it, `allowed` or not). False on every rank when any rank could not or
  /// was not `allowed` (no reservation large enough, a memfd without MFD_HUGETLB, another rank's
  /// file not reachable, huge_window_allowed() false there): then nothing stays mapped.
  bool map(MPI_Comm comm, int64_t bytes, bool allowed);
  /// Whether the last map() succeeded (and unmap() has not run since).
  bool mapped() const noexcept { return !segments_.empty() && segments_.front() != nullptr; }
  /// The segment of `rank` (after a successful map).
  std::byte* segment(int rank) const noexcept { return segments_[static_cast<size_t>(rank)]; }
  /// Unmaps every segment (after the last use of them).
  void unmap() noexcept;
  ~HugeWindow() { unmap(); }

 private:
  std::vector<std::byte*> segments_;
  int64_t mapped_ = 0;  // bytes of each mapping
};

/// Whether the same-host window may come from huge pages: TESSERA_MPI_HUGE_PAGES unset, empty,
/// or on/1/yes/true/auto (any case); off/0/no/false declines them. Any other value raises
/// kInvalidArgument naming the variable, its value and the settings (at `where`).
bool huge_window_allowed(std::source_location where = std::source_location::current());

}  // namespace tessera::detail::mpi
