// Run by ctest under mpirun (label mpi): the HBM arrays of an MPI rank come from its window's
// heap (src/mpi/mpi_window_heap.cc), which must keep hbm_allocate's promises whatever
// alignment MPI gave the window (Open MPI's base for a single rank is only 16-byte aligned):
//   - a WindowHeap over a buffer 16 bytes past a page boundary: every block 64-byte aligned,
//     blocks of 4 MiB or more on a page, padding reused by later small blocks, freed blocks
//     merged back into one range, a request larger than the heap refused;
//   - inside a program on every rank: arrays of 3 sizes allocated from the window, aligned alike,
//     and a kernel's output in it too.
// Prints "WRONG" for each unmet expectation, "mpi_window_heap: all passed" otherwise.
#include <tessera/tessera.h>

#include <cstdint>
#include <cstdlib>
#include <iostream>
#include <memory>
#include <string>
#include <vector>

#include "mpi/mpi_runtime.h"

namespace {
using namespace tessera;
using detail::mpi::WindowHeap;

int g_wrong = 0;

void wrong(const std::string& what) {
  ++g_wrong;
  std::cout << "rank " << jax::process_index() << ": WRONG " << what << std::endl;
}

void expect_aligned(const std::string& what, const void* p, uintptr_t align) {
  if (p == nullptr) return wrong(what + ": no block");
  const auto a = reinterpret_cast<uintptr_t>(p);
  if (a % align != 0) {
    wrong(what + " at " + std::to_string(a) + " is not " + std::to_string(align) +
          "-byte aligned (" + std::to_string(a % align) + " past)");
  }
}

void heap_over_a_misaligned_buffer() {
  constexpr int64_t kBytes = int64_t{64} << 20;
  std::vector<std::byte> storage(static_cast<size_t>(kBytes + 2 * WindowHeap::kPageBytes));
  auto* page = reinterpret_cast<std::byte*>(
      (reinterpret_cast<uintptr_t>(storage.data()) + WindowHeap::kPageBytes - 1) /
      WindowHeap::kPageBytes * WindowHeap::kPageBytes);
  WindowHeap heap(page + 16, kBytes);
  void* small = heap.allocate(100);
  expect_aligned("a 100-byte block", small, 64);
  void* odd = heap.allocate(1000003);
  expect_aligned("a 1000003-byte block", odd, 64);
  void* large = heap.allocate((size_t{5} << 20) + 8);
  expect_aligned("a 5 MiB block", large, WindowHeap::kPageBytes);
  if (large != nullptr && odd != nullptr && static_cast<std::byte*>(large) <= odd) {
    wrong("the 5 MiB block lies before the block allocated ahead of it");
  }
  // The padding in front of the large block is free: a small block fits there.
  void* filler = heap.allocate(64);
  if (filler == nullptr || large == nullptr || !(filler > odd && filler < large)) {
    wrong("a 64-byte block did not go into the padding before the 5 MiB block");
  }
  expect_aligned("a 64-byte block", filler, 64);
  if (heap.allocate(static_cast<size_t>(kBytes)) != nullptr) {
    wrong("a block as large as the whole heap was given out while others are in use");
  }
  for (void* p : {small, odd, large, filler}) heap.free(p);
  // Everything merged back: the largest block the heap can hold fits again, from its start.
  void* all = heap.allocate(static_cast<size_t>(kBytes - 2 * WindowHeap::kPageBytes));
  expect_aligned("a block of (nearly) the whole heap", all, WindowHeap::kPageBytes);
  if (all != small) wrong("the heap's first block after every free is not at its start");
  if (heap.allocate(static_cast<size_t>(kBytes) + 1) != nullptr) {
    wrong("a block larger than the heap was given out");
  }
}

// Whether `p` lies in this rank's MPI window.
bool in_window(const void* p) {
  auto& rt = detail::mpi::MpiRuntime::instance();
  const std::byte* base = rt.segment(rt.rank());
  const auto* b = static_cast<const std::byte*>(p);
  return base != nullptr && b >= base && b < base + rt.window_bytes();
}

void arrays_inside_a_program() {
  const int n = jax::device_count();
  if (!detail::mpi::MpiRuntime::instance().active()) return wrong("not started by mpirun");
  jax::shard_map(
      [&] {
        const Array<float> small(Shape{5, 7});
        const Array<float> medium(Shape{1000, 257});
        const Array<float> large(Shape{1500, 1024});
        for (const Array<float>* a : {&small, &medium, &large}) {
          if (!in_window(a->data())) wrong("an array outside the MPI window");
        }
        expect_aligned("a (5, 7) array", small.data(), 64);
        expect_aligned("a (1000, 257) array", medium.data(), 64);
        expect_aligned("a (1500, 1024) array", large.data(), WindowHeap::kPageBytes);
        auto kernel = pl::kernel(pl::out_type(ShapeDtypeStruct<float>{{1500, 1024}}),
                                 pltpu::TensorCoreMesh("core", 1))(
            [](pltpu::HbmRef<const float> x, pltpu::HbmRef<float> o) { pltpu::sync_copy(x, o); });
        const Array<float> out = kernel(large);
        expect_aligned("a kernel's (1500, 1024) output", out.data(), WindowHeap::kPageBytes);
      },
      jax::make_mesh({n}, {"x"}), PartitionSpecs(std::vector<PartitionSpec>{}),
      PartitionSpecs(std::vector<PartitionSpec>{}))();
}

}  // namespace

int main() {
  try {
    heap_over_a_misaligned_buffer();
    arrays_inside_a_program();
  } catch (const std::exception& e) {
    wrong(std::string("unexpected error: ") + e.what());
  }
  if (g_wrong == 0) std::cout << "mpi_window_heap: all passed" << std::endl;
  return g_wrong == 0 ? 0 : 1;
}
