// The same-host window in huge pages (mpi_huge_window.h).
#include "mpi/mpi_huge_window.h"

#include <fcntl.h>
#include <fmt/format.h>
#include <sys/mman.h>
#include <unistd.h>

#include <cctype>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>

#include "tessera/detail/runtime.h"
#include "tessera/error.h"

namespace tessera::detail::mpi {

namespace {

// The default huge page size (what MFD_HUGETLB maps), from /proc/meminfo; 0 when unknown.
int64_t huge_page_bytes() {
  std::FILE* f = std::fopen("/proc/meminfo", "r");
  if (f == nullptr) return 0;
  char line[256];
  int64_t kib = 0;
  while (std::fgets(line, sizeof line, f) != nullptr) {
    if (std::sscanf(line, "Hugepagesize: %ld kB", &kib) == 1) break;
  }
  std::fclose(f);
  return kib > 0 ? kib * 1024 : 0;
}

// The size of a transparent huge page (what MADV_COLLAPSE makes), as the kernel reports it;
// 2 MiB (x86-64's) when it does not.
int64_t reported_pmd_bytes() {
  std::FILE* f = std::fopen("/sys/kernel/mm/transparent_hugepage/hpage_pmd_size", "r");
  long bytes = 0;
  if (f != nullptr) {
    if (std::fscanf(f, "%ld", &bytes) != 1) bytes = 0;
    std::fclose(f);
  }
  // A power of two of at least a page, or the default.
  return bytes >= 4096 && (bytes & (bytes - 1)) == 0 ? bytes : int64_t{2} << 20;
}

// Every rank's `ok` and-ed together (collective over `comm`; also a barrier).
bool all_ranks(MPI_Comm comm, bool ok) {
  int mine = ok ? 1 : 0;
  int all = 0;
  MPI_Allreduce(&mine, &all, 1, MPI_INT, MPI_MIN, comm);
  return all == 1;
}

// madvise's synchronous collapse into huge pages (Linux 6.1; glibc 2.36 does not name it yet).
#if defined(__linux__) && !defined(MADV_COLLAPSE)
constexpr int MADV_COLLAPSE = 25;
#endif

// Maps `fd` at an address that is a multiple of `align` (a power of two), so that the file's
// huge pages (offset 0 is aligned) can be mapped whole, here as in every other rank.
std::byte* map_file(int fd, int64_t bytes, int64_t align) {
  const auto len = static_cast<size_t>(bytes);
  const auto pad = static_cast<size_t>(align);
  void* area =
      ::mmap(nullptr, len + pad, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
  if (area == MAP_FAILED) return nullptr;
  const auto start = reinterpret_cast<uintptr_t>(area);
  const uintptr_t aligned = (start + pad - 1) / pad * pad;
  void* p = ::mmap(reinterpret_cast<void*>(aligned), len, PROT_READ | PROT_WRITE,
                   MAP_SHARED | MAP_FIXED, fd, 0);
  // What is left of the reservation on either side goes back.
  if (aligned > start) ::munmap(area, aligned - start);
  const uintptr_t end = aligned + len;
  const uintptr_t area_end = start + len + pad;
  if (area_end > end) ::munmap(reinterpret_cast<void*>(end), area_end - end);
  if (p == MAP_FAILED) {
    ::munmap(reinterpret_cast<void*>(aligned), len);
    return nullptr;
  }
  return static_cast<std::byte*>(p);
}

}  // namespace

bool huge_window_allowed(std::source_location where) {
  const char* v = std::getenv("TESSERA_MPI_HUGE_PAGES");
  if (v == nullptr || *v == '\0') return true;
  std::string s(v);
  for (char& c : s) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  for (const char* yes : {"1", "on", "yes", "true", "auto"}) {
    if (s == yes) return true;
  }
  for (const char* no : {"0", "off", "no", "false"}) {
    if (s == no) return false;
  }
  raise(ErrorKind::kInvalidArgument, "MPI start", where,
        fmt::format("TESSERA_MPI_HUGE_PAGES={} is not a setting; use off (or 0, no, false) to "
                    "keep the ranks' window in MPI's shared memory of small pages, or on (1, yes, "
                    "true, auto: the default) to take the host's reserved huge pages when the pool "
                    "has room and to collapse its shared memory into huge pages otherwise",
                    v));
}

bool HugeWindow::map(MPI_Comm comm, int64_t bytes, bool allowed) {
  collapsible_ = false;
  if (map_files(comm, bytes, allowed, true)) return true;
  // No reservation: shared memory of small pages, which collapse() turns into huge ones.
  collapsible_ = map_files(comm, bytes, allowed, false);
  return collapsible_;
}

bool HugeWindow::map_files(MPI_Comm comm, int64_t bytes, bool allowed, bool hugetlb) {
  int rank = 0;
  int size = 1;
  MPI_Comm_rank(comm, &rank);
  MPI_Comm_size(comm, &size);
  segments_.assign(static_cast<size_t>(size), nullptr);
  static_cast<void>(allowed);  // (unused where memfd has no MFD_HUGETLB)
  static_cast<void>(hugetlb);
  int fd = -1;
#ifdef MFD_HUGETLB
  const int64_t page = hugetlb ? huge_page_bytes() : pmd_bytes();
  if (allowed && page > 0) {
    mapped_ = (bytes + page - 1) / page * page;
    page_ = page;
    fd = ::memfd_create(hugetlb ? "tessera-window" : "tessera-window-shm",
                        (hugetlb ? MFD_HUGETLB : 0) | MFD_CLOEXEC);
    // A shared hugetlb mapping reserves all its pages here: it fails now rather than at a
    // later page fault when the host's pool is short.
    if (fd >= 0 && ::ftruncate(fd, mapped_) == 0) {
      segments_[static_cast<size_t>(rank)] = map_file(fd, mapped_, page);
    }
  }
#endif
  if (!all_ranks(comm, segments_[static_cast<size_t>(rank)] != nullptr)) {
    if (fd >= 0) ::close(fd);
    unmap();
    return false;
  }
  // Every rank maps every other's file, which stays alive while any mapping of it does. The
  // segments must be of one size (each rank maps the others' with its own).
  const int64_t mine[3] = {static_cast<int64_t>(::getpid()), fd, mapped_};
  std::vector<int64_t> ids(3 * static_cast<size_t>(size));
  MPI_Allgather(mine, 3, MPI_INT64_T, ids.data(), 3, MPI_INT64_T, comm);
  bool ok = true;
  for (int r = 0; r < size && ok; ++r) {
    if (r == rank) continue;
    const size_t at = 3 * static_cast<size_t>(r);
    if (ids[at + 2] != mapped_) {
      ok = false;
      break;
    }
    const std::string path =
        "/proc/" + std::to_string(ids[at]) + "/fd/" + std::to_string(ids[at + 1]);
    const int peer = ::open(path.c_str(), O_RDWR | O_CLOEXEC);
    if (peer < 0) {
      ok = false;
      break;
    }
    segments_[static_cast<size_t>(r)] = map_file(peer, mapped_, page_);
    ::close(peer);
    ok = segments_[static_cast<size_t>(r)] != nullptr;
  }
  ok = all_ranks(comm, ok);  // every rank has opened its peers' files: this one may close its own
  ::close(fd);
  if (!ok) unmap();
  return ok;
}

int64_t HugeWindow::pmd_bytes() noexcept {
  static const int64_t bytes = reported_pmd_bytes();
  return bytes;
}

int64_t HugeWindow::collapse(std::byte* begin, std::byte* end) noexcept {
#ifdef __linux__
  if (!collapsible_) return 0;
  const auto huge = static_cast<uintptr_t>(pmd_bytes());
  const auto lo = (reinterpret_cast<uintptr_t>(begin) + huge - 1) / huge * huge;
  const auto hi = reinterpret_cast<uintptr_t>(end) / huge * huge;
  if (hi <= lo) return 0;
  // A page of each: the kernel collapses only ranges that hold one (the rest it fills with
  // zeros). The block is freshly allocated: its contents are unspecified.
  for (uintptr_t c = lo; c < hi; c += huge) *reinterpret_cast<volatile char*>(c) = 0;
  if (::madvise(reinterpret_cast<void*>(lo), hi - lo, MADV_COLLAPSE) != 0) return 0;
  return static_cast<int64_t>(hi - lo);
#else
  static_cast<void>(begin);
  static_cast<void>(end);
  return 0;
#endif
}

void HugeWindow::unmap() noexcept {
  for (std::byte*& s : segments_) {
    if (s != nullptr) ::munmap(s, static_cast<size_t>(mapped_));
    s = nullptr;
  }
}

}  // namespace tessera::detail::mpi
