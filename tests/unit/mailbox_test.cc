// The mailbox through which MPI ranks on one host hand each other signals (src/mpi/mpi_mailbox.h):
// a bounded queue of many producers and consumers in memory the processes share. Here its
// threads stand in for the processes; tests/mpi/mpi_signals.cc runs it between ranks.
#include <gtest/gtest.h>

#include <atomic>
#include <cstddef>
#include <memory>
#include <new>
#include <thread>
#include <vector>

#include "mpi/mpi_mailbox.h"

namespace tessera::detail::mpi {
namespace {

Mailbox::Letter letter(int from, int64_t n) {
  return Mailbox::Letter{Mailbox::Kind::kSignal, from, Signal{1, n, 0, 0, n}};
}

// A mailbox at an address only 8-byte aligned, as a window's base may be.
struct Placed {
  std::unique_ptr<std::byte[]> bytes{new std::byte[sizeof(Mailbox) + 64]};
  Mailbox* box = nullptr;
  Placed() {
    auto at = reinterpret_cast<uintptr_t>(bytes.get());
    at = (at + 63) / 64 * 64 + 8;
    box = new (reinterpret_cast<void*>(at)) Mailbox();
  }
  ~Placed() { box->~Mailbox(); }
};

TEST(Mailbox, KeepsOrderAndRefusesWhenFull) {
  Placed p;
  Mailbox& box = *p.box;
  Mailbox::Letter out;
  EXPECT_FALSE(box.pop(out));
  EXPECT_FALSE(box.may_hold_letters());
  for (int round = 0; round < 5; ++round) {  // the cells are reused round after round
    for (uint64_t i = 0; i < Mailbox::kCells; ++i) {
      ASSERT_TRUE(box.push(letter(round, static_cast<int64_t>(i))));
    }
    EXPECT_FALSE(box.push(letter(round, -1))) << "a full mailbox must refuse";
    EXPECT_TRUE(box.may_hold_letters());
    for (uint64_t i = 0; i < Mailbox::kCells; ++i) {
      ASSERT_TRUE(box.pop(out));
      EXPECT_EQ(out.from, round);
      EXPECT_EQ(out.s.seq, static_cast<int64_t>(i));
      if (i == 0) {
        ASSERT_TRUE(box.push(letter(round, 1000)));  // room again after one pop
      }
    }
    ASSERT_TRUE(box.pop(out));
    EXPECT_EQ(out.s.seq, 1000);
    EXPECT_FALSE(box.pop(out));
  }
}

TEST(Mailbox, EveryLetterOfManyProducersReachesExactlyOneConsumer) {
  Placed p;
  Mailbox& box = *p.box;
  constexpr int kProducers = 3;
  constexpr int kConsumers = 2;
  constexpr int64_t kEach = 20000;
  std::vector<std::atomic<int>> seen(static_cast<size_t>(kProducers * kEach));
  for (auto& s : seen) s.store(0);
  std::atomic<int64_t> taken{0};
  std::atomic<bool> out_of_order{false};
  std::vector<std::thread> threads;
  for (int t = 0; t < kProducers; ++t) {
    threads.emplace_back([&, t] {
      for (int64_t i = 0; i < kEach; ++i) {
        while (!box.push(letter(t, i))) std::this_thread::yield();  // full: the sender retries
      }
    });
  }
  for (int c = 0; c < kConsumers; ++c) {
    threads.emplace_back([&] {
      std::vector<int64_t> last(kProducers, -1);  // what this consumer saw last, per producer
      Mailbox::Letter out;
      while (taken.load() < kProducers * kEach) {
        if (!box.pop(out)) {
          std::this_thread::yield();
          continue;
        }
        taken.fetch_add(1);
        seen[static_cast<size_t>(out.from * kEach + out.s.seq)].fetch_add(1);
        if (out.s.seq <= last[static_cast<size_t>(out.from)]) out_of_order.store(true);
        last[static_cast<size_t>(out.from)] = out.s.seq;
        EXPECT_EQ(out.s.inc, out.s.seq);  // the letter arrives whole
      }
    });
  }
  for (auto& t : threads) t.join();
  for (size_t i = 0; i < seen.size(); ++i) ASSERT_EQ(seen[i].load(), 1) << "letter " << i;
  // One consumer sees one producer's letters in the order they were sent.
  EXPECT_FALSE(out_of_order.load());
  Mailbox::Letter out;
  EXPECT_FALSE(box.pop(out));
}

}  // namespace
}  // namespace tessera::detail::mpi
