// Run by ctest under mpirun (label mpi) with a window of TESSERA_SYMMETRIC_HEAP bytes: on one
// host the ranks' window segments come from the host's reserved huge pages when the pool has
// room for every rank's segment (src/mpi/mpi_huge_window.h), from memfds of the host's shared
// memory whose large blocks are collapsed into huge pages otherwise, and from MPI's shared
// window when TESSERA_MPI_HUGE_PAGES=off. Checks, on every rank:
//   - the page size the kernel maps this rank's segment and each peer's with (/proc/self/smaps)
//     is the one the runtime says it chose;
//   - huge pages were taken exactly when allowed and the pool had room (the pool is read after
//     the window was made: with the window in it, nothing else, ctest runs this test alone), and
//     MPI's window only when declined;
//   - rings of remote copies (each rank's (64, 1024) block, and a (1024, 1024) one, lands on its
//     right neighbour, twice, into its output in the window) give the right values;
//   - collapsed: the large block is mapped with huge pages in this rank's segment and in the
//     right neighbour's, which this rank wrote (where the host lets a probe collapse at all).
// Prints "WRONG" for each unmet expectation, then "mpi_huge_window: all passed (huge pages:
// yes|collapsed|no)".
#include <sys/mman.h>
#include <tessera/tessera.h>
#include <unistd.h>

#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <iostream>
#include <string>

#include "mpi/mpi_runtime.h"
#include "mpi_expect.h"

namespace {
using namespace tessera;
using detail::mpi::MpiRuntime;
using mpi_expect::g_wrong;
using mpi_expect::wrong;

// A field of the /proc/self/smaps entry of the mapping that holds `p` (its number, in kB, as
// "KernelPageSize" or "ShmemPmdMapped" is); -1 when not found.
int64_t smaps_kib(const void* p, const char* field) {
  std::FILE* f = std::fopen("/proc/self/smaps", "r");
  if (f == nullptr) return -1;
  const auto a = reinterpret_cast<uintptr_t>(p);
  const std::string format = std::string(field) + ": %ld kB";
  char line[512];
  bool inside = false;
  int64_t kib = -1;
  while (std::fgets(line, sizeof line, f) != nullptr) {
    uintptr_t lo = 0;
    uintptr_t hi = 0;
    if (std::sscanf(line, "%lx-%lx ", &lo, &hi) == 2 && std::strchr(line, '-') < line + 17) {
      inside = a >= lo && a < hi;
    } else if (inside && std::sscanf(line, format.c_str(), &kib) == 1) {
      break;
    }
  }
  std::fclose(f);
  return inside ? kib : -1;
}

// The page size (KiB) the kernel maps `p` with; 0 when not found.
int64_t kernel_page_kib(const void* p) {
  return std::max<int64_t>(smaps_kib(p, "KernelPageSize"), 0);
}

// The bytes of `p`'s mapping that the kernel maps with huge pages of shared memory; -1 when not
// found.
int64_t shmem_pmd_bytes(const void* p) {
  const int64_t kib = smaps_kib(p, "ShmemPmdMapped");
  return kib < 0 ? -1 : kib * 1024;
}

// Whether this host collapses shared memory into huge pages at all (a memfd of its own).
bool host_collapses() {
  constexpr size_t kHuge = size_t{2} << 20;
  const int fd = ::memfd_create("probe", MFD_CLOEXEC);
  if (fd < 0 || ::ftruncate(fd, 2 * kHuge) != 0) return false;
  auto* area =
      static_cast<char*>(::mmap(nullptr, 3 * kHuge, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0));
  auto* at =
      reinterpret_cast<char*>((reinterpret_cast<uintptr_t>(area) + kHuge - 1) / kHuge * kHuge);
  void* p = ::mmap(at, 2 * kHuge, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_FIXED, fd, 0);
  bool ok = false;
  if (p != MAP_FAILED) {
    std::memset(p, 1, 2 * kHuge);
    ok = ::madvise(p, 2 * kHuge, 25 /* MADV_COLLAPSE */) == 0;
  }
  ::munmap(area, 3 * kHuge);
  ::close(fd);
  return ok;
}

// A /proc/meminfo field (its number), or -1.
int64_t meminfo(const char* field) {
  std::FILE* f = std::fopen("/proc/meminfo", "r");
  if (f == nullptr) return -1;
  char line[256];
  int64_t v = -1;
  const size_t n = std::strlen(field);
  while (std::fgets(line, sizeof line, f) != nullptr) {
    if (std::strncmp(line, field, n) == 0 && line[n] == ':') {
      std::sscanf(line + n + 1, "%ld", &v);
      break;
    }
  }
  std::fclose(f);
  return v;
}

// Whether this run declines huge pages (ctest sets TESSERA_MPI_HUGE_PAGES=off for one test).
bool declined() {
  const char* v = std::getenv("TESSERA_MPI_HUGE_PAGES");
  return v != nullptr && std::strcmp(v, "off") == 0;
}

void window_pages() {
  MpiRuntime& rt = MpiRuntime::instance();
  const int size = rt.size();
  const bool huge = rt.huge_pages();
  if (!huge && !rt.collapsed_pages() && !declined()) {
    wrong("MPI's window taken although TESSERA_MPI_HUGE_PAGES allows the host's memfds");
  }
  if (rt.collapsed_pages() && declined()) {
    wrong("collapsed pages taken although TESSERA_MPI_HUGE_PAGES declines them");
  }
  const int64_t page_kib = meminfo("Hugepagesize");
  for (int r = 0; r < size; ++r) {
    const int64_t kib = kernel_page_kib(rt.segment(r));
    const bool huge_mapped = page_kib > 4 && kib == page_kib;
    if (huge_mapped != huge || kib == 0) {
      wrong("rank " + std::to_string(r) + "'s segment is mapped with " + std::to_string(kib) +
            " KiB pages, but the runtime says huge pages: " + (huge ? "yes" : "no"));
    }
  }
  if (huge && declined()) {
    wrong("huge pages taken although TESSERA_MPI_HUGE_PAGES declines them");
  }
  // Fallen back while the pool (now without any segment of ours) had room for all of them?
  const int64_t page_bytes = page_kib * 1024;
  if (!huge && !declined() && page_bytes > 0) {
    const int64_t per_rank = (rt.window_bytes() + page_bytes - 1) / page_bytes;
    const int64_t free_pages = meminfo("HugePages_Free") - meminfo("HugePages_Rsvd");
    if (free_pages >= per_rank * size) {
      wrong(
          "MPI's window taken although the huge page pool has room: " + std::to_string(free_pages) +
          " pages free, " + std::to_string(per_rank * size) + " needed");
    }
  }
}

// Each rank's (rows, 1024) block goes twice to the right; the output of the last program is
// kept alive in `keep` (so that its pages can be inspected).
void ring_of_copies(int64_t rows, Array<float>* keep = nullptr) {
  const int rank = jax::process_index();
  const int n = jax::device_count();
  Array<float> x(Shape{rows, 1024});
  for (int64_t i = 0; i < x.size(); ++i) x[i] = static_cast<float>(rank * x.size() + i);
  auto shift = pl::pallas_call(
      [](pltpu::AnyRef<const float> in, pltpu::AnyRef<float> out, pltpu::DmaSemaphoreRef send,
         pltpu::DmaSemaphoreRef recv) {
        const int right = (lax::axis_index("x") + 1) % lax::axis_size("x");
        auto copy =
            pltpu::make_async_remote_copy(in, out, send, recv, {right}, pl::DeviceIdType::MESH);
        copy.start();
        copy.wait();
      },
      pl::out_shape(ShapeDtypeStruct<float>{{rows, 1024}}),
      pltpu::PrefetchScalarGridSpec<0>(
          pl::in_specs(pl::BlockSpec(pl::ANY)), pl::out_specs(pl::BlockSpec(pl::ANY)),
          pl::scratch_shapes(pltpu::SemaphoreType::DMA, pltpu::SemaphoreType::DMA)));
  const Array<float> y = jax::shard_map([&](const Array<float>& xs) { return shift(shift(xs)); },
                                        jax::make_mesh({n}, {"x"}), P("x"), P("x"))(x);
  const int from = ((rank - 2) % n + n) % n;  // two steps to the right
  for (int64_t i = 0; i < y.size(); ++i) {
    if (y[i] != static_cast<float>(from * y.size() + i)) {
      return wrong("element " + std::to_string(i) + " is " + std::to_string(y[i]) +
                   ", expected rank " + std::to_string(from) + "'s");
    }
  }
  if (keep != nullptr) *keep = y;
}

// Collapsed: the (1024, 1024) output `y` (4 MiB, at least one whole huge page) is mapped with
// huge pages here, and the right neighbour's segment, which this rank's copies wrote into, has
// huge pages mapped here too.
void collapsed_blocks(const Array<float>& y) {
  MpiRuntime& rt = MpiRuntime::instance();
  if (!rt.collapsed_pages()) return;
  if (!host_collapses()) {
    std::cout << "rank " << rt.rank() << ": this host collapses no shared memory" << std::endl;
    return;
  }
  // (Whole segments: each is one mapping. The ranks need not place their blocks alike.)
  const int right = (rt.rank() + 1) % rt.size();
  const int64_t mine = shmem_pmd_bytes(y.data());
  const int64_t theirs = shmem_pmd_bytes(rt.segment(right));
  if (mine < (int64_t{2} << 20) || theirs < (int64_t{2} << 20)) {
    wrong("the 4 MiB block is not in huge pages: " + std::to_string(mine) + " bytes here, " +
          std::to_string(theirs) + " in the right neighbour's segment");
  }
}

}  // namespace

int main() {
  try {
    if (!MpiRuntime::instance().active()) {
      wrong("not started by mpirun");
    } else {
      ring_of_copies(64);  // the first program makes the window
      window_pages();
      Array<float> y;
      ring_of_copies(1024, &y);
      collapsed_blocks(y);
    }
  } catch (const std::exception& e) {
    wrong(std::string("unexpected error: ") + e.what());
  }
  if (g_wrong == 0) {
    const MpiRuntime& rt = MpiRuntime::instance();
    std::cout << "mpi_huge_window: all passed (huge pages: "
              << (rt.huge_pages()        ? "yes"
                  : rt.collapsed_pages() ? "collapsed"
                                         : "no")
              << ")" << std::endl;
  }
  return g_wrong == 0 ? 0 : 1;
}
