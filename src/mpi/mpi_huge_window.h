// Internal: the same-host window in huge pages: the host's reserved ones (hugetlb) when it has
// them, else its shared memory collapsed into huge pages block by block.
//
// MPI_Win_allocate_shared places the ranks' segments in shared memory of 4 KiB pages wherever the
// host gives its internal shared-memory mount no transparent huge pages (`shmem_enabled` `never`,
// the Debian default), and a ring all-reduce over them runs up to ~1.3x slower than over the
// process heap's huge pages (docs/devices.md, "Measured"). Two ways around it, without changing
// a mount:
//   - Huge pages that the host has reserved (`vm.nr_hugepages`): each rank maps its segment from
//     a hugetlb memfd, reserving all of it at once.
//   - Otherwise each rank's segment is a memfd of the shared memory's small pages, and the
//     window's heap asks the kernel to collapse each large block into huge pages as it hands
//     it out (madvise MADV_COLLAPSE, Linux 6.1: allowed whatever `shmem_enabled` says unless it
//     is `deny`). Every rank maps every segment at a huge page boundary, so that its huge pages
//     map whole there too.
// The other ranks map each rank's file through /proc/<pid>/fd. Either every rank gets such a
// window or none does (then MPI's).
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
  /// it: every rank calls it, `allowed` or not): hugetlb memfds when the host's reservation has
  /// room for every rank's, else memfds of the shared memory's small pages, mapped where their
  /// huge pages can be (collapsible()). False on every rank when any rank could not or was not
  /// `allowed` (no memfd, another rank's file not reachable, huge_window_allowed() false
  /// there): then nothing stays mapped.
  bool map(MPI_Comm comm, int64_t bytes, bool allowed);
  /// Whether the last map() succeeded (and unmap() has not run since).
  bool mapped() const noexcept { return !segments_.empty() && segments_.front() != nullptr; }
  /// Whether the segments are small pages that collapse() turns into huge ones (else they are
  /// the reserved huge pages).
  bool collapsible() const noexcept { return mapped() && collapsible_; }
  /// Turns the whole huge pages within [begin, end) of this rank's segment (a block just
  /// allocated: its contents are unspecified, and get written) into huge pages of the shared
  /// memory (madvise MADV_COLLAPSE, which the host allows whatever its `shmem_enabled`, unless
  /// it is `deny`), which every rank's mapping then maps whole. Returns the bytes collapsed (0:
  /// none, or not collapsible).
  int64_t collapse(std::byte* begin, std::byte* end) noexcept;
  /// The size of the huge pages collapse() makes: the transparent huge page size the kernel
  /// reports (/sys/kernel/mm/transparent_hugepage/hpage_pmd_size), 2 MiB when it does not.
  static int64_t pmd_bytes() noexcept;
  /// The segment of `rank` (after a successful map).
  std::byte* segment(int rank) const noexcept { return segments_[static_cast<size_t>(rank)]; }
  /// Unmaps every segment (after the last use of them).
  void unmap() noexcept;
  ~HugeWindow() { unmap(); }

 private:
  bool map_files(MPI_Comm comm, int64_t bytes, bool allowed, bool hugetlb);
  std::vector<std::byte*> segments_;
  int64_t mapped_ = 0;  // bytes of each mapping
  int64_t page_ = 0;    // the pages they are made of: each is mapped at a multiple of it
  bool collapsible_ = false;
};

/// Whether the same-host window may be of huge pages (reserved, or collapsed):
/// TESSERA_MPI_HUGE_PAGES unset, empty, or on/1/yes/true/auto (any case); off/0/no/false declines
/// both. Any other value raises kInvalidArgument naming the variable, its value and the settings
/// (at `where`).
bool huge_window_allowed(std::source_location where = std::source_location::current());

}  // namespace tessera::detail::mpi
