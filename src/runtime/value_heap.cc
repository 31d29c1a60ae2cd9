#include "runtime/value_heap.h"

#include <iterator>

namespace tessera::detail {

void ValueHeap::reset(int64_t new_limit) noexcept {
  // Per heap, not one counter for all: a value is only ever compared with its own arena's heap
  // (values.cc), and a shared counter cost every core of every launch a cache line from the
  // core that bumped it last.
  ++epoch;
  floor = limit = new_limit;
  held = live = 0;
  free.clear();
}

int64_t ValueHeap::allocate(int64_t bytes, int64_t stack_top) {
  // Best fit among the freed ranges (few: one per value freed out of order).
  auto best = free.end();
  for (auto it = free.begin(); it != free.end(); ++it) {
    if (it->second >= bytes && (best == free.end() || it->second < best->second)) best = it;
  }
  int64_t offset = -1;
  if (best != free.end()) {
    offset = best->first + best->second - bytes;  // the top part: the rest stays where it was
    if (best->second == bytes) {
      free.erase(best);
    } else {
      best->second -= bytes;
    }
  } else {
    const int64_t below = floor - bytes;
    if (below < stack_top) return -1;
    offset = floor = below;
  }
  held += bytes;
  ++live;
  return offset;
}

void ValueHeap::release(int64_t offset, int64_t bytes) noexcept {
  held -= bytes;
  --live;
  auto it = free.emplace(offset, bytes).first;
  // Merge with the range that ends where this one starts, and with the one that follows.
  if (it != free.begin()) {
    auto prev = std::prev(it);
    if (prev->first + prev->second == it->first) {
      prev->second += it->second;
      free.erase(it);
      it = prev;
    }
  }
  auto next = std::next(it);
  if (next != free.end() && it->first + it->second == next->first) {
    it->second += next->second;
    free.erase(next);
  }
  // A free range at the floor gives its bytes back to the stack.
  if (it->first == floor) {
    floor += it->second;
    free.erase(it);
  }
}

}  // namespace tessera::detail
