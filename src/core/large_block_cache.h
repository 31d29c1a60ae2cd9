// Internal: the freed large HBM blocks that src/core/array.cc keeps for reuse.
//
// A kernel called in a loop allocates same-sized outputs on every call; a fresh mapping costs a
// page fault per page on first touch, which for a large output is several times the cost of
// streaming it once. So freed blocks are kept, keyed by their exact byte count, up to a cap.
// When a freed block does not fit under the cap, the blocks freed longest ago are unmapped to
// make room: a program that moves on from one array size to another then reuses the new size's
// blocks. Refusing the newest block instead left the cache full of a size no longer used, and
// every later allocation paid its page faults (measured: a 2048² add 2.7x slower after four
// 8192² arrays had been freed; docs/performance.md, "Freed blocks of an earlier size").
#pragma once

#include <cstddef>
#include <deque>
#include <mutex>
#include <vector>

namespace tessera::detail {

class LargeBlockCache {
 public:
  /// Releases a block the cache lets go (munmap for array.cc's blocks).
  using Release = void (*)(void* p, size_t bytes) noexcept;

  LargeBlockCache(size_t cap_bytes, Release release) : cap_(cap_bytes), release_(release) {}
  LargeBlockCache(const LargeBlockCache&) = delete;
  LargeBlockCache& operator=(const LargeBlockCache&) = delete;

  /// The most recently given block of exactly `bytes`, taken out of the cache; null if none.
  void* take(size_t bytes) {
    std::lock_guard<std::mutex> lock(mu_);
    for (size_t i = blocks_.size(); i-- > 0;) {
      if (blocks_[i].bytes != bytes) continue;
      void* p = blocks_[i].p;
      blocks_.erase(blocks_.begin() + static_cast<std::ptrdiff_t>(i));
      cached_ -= bytes;
      return p;
    }
    return nullptr;
  }

  /// Keeps `p` (`bytes` long), releasing the oldest blocks that no longer fit beside it; a block
  /// larger than the whole cap is released at once, as is one the book-keeping has no memory
  /// for. Releases happen outside the lock.
  void give(void* p, size_t bytes) noexcept {
    std::vector<Block> victims;
    bool kept = false;
    if (bytes <= cap_) {
      try {
        std::lock_guard<std::mutex> lock(mu_);
        while (cached_ + bytes > cap_) {
          victims.push_back(blocks_.front());  // before the pop: a throw leaves the books whole
          cached_ -= blocks_.front().bytes;
          blocks_.pop_front();
        }
        blocks_.push_back(Block{p, bytes});
        cached_ += bytes;
        kept = true;
      } catch (...) {  // out of memory for the books: the block goes back to the system
      }
    }
    if (!kept) release_(p, bytes);
    for (const Block& b : victims) release_(b.p, b.bytes);
  }

  /// Bytes held now.
  size_t cached_bytes() {
    std::lock_guard<std::mutex> lock(mu_);
    return cached_;
  }

 private:
  struct Block {
    void* p;
    size_t bytes;
  };
  const size_t cap_;
  const Release release_;
  std::mutex mu_;
  std::deque<Block> blocks_;  // oldest first
  size_t cached_ = 0;
};

}  // namespace tessera::detail
