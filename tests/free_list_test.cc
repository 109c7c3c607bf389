#include "util/free_list.h"

#include <gtest/gtest.h>

#include <atomic>
#include <memory>
#include <set>
#include <thread>
#include <vector>

namespace pacset {
namespace {

TEST(FreeList, TakeReturnsWhatWasGivenAndNullWhenEmpty) {
  FreeList<std::unique_ptr<int>> list(4);
  EXPECT_EQ(list.Take(), nullptr);
  auto p = std::make_unique<int>(7);
  int* const address = p.get();
  list.Give(std::move(p));
  std::unique_ptr<int> back = list.Take();
  ASSERT_NE(back, nullptr);
  EXPECT_EQ(back.get(), address);  // the same object, not a copy
  EXPECT_EQ(list.Take(), nullptr);
}

TEST(FreeList, KeepsAtMostItsBoundAndDestroysTheRest) {
  FreeList<std::unique_ptr<int>> list(2);
  for (int i = 0; i < 5; ++i) list.Give(std::make_unique<int>(i));
  EXPECT_EQ(list.size(), 2u);
  list.Give(nullptr);  // nothing to keep
  EXPECT_EQ(list.size(), 2u);
  std::set<int> kept;
  while (auto p = list.Take()) kept.insert(*p);
  EXPECT_EQ(kept, (std::set<int>{0, 1}));
}

TEST(FreeList, TakeOrMakesOnlyWhenNoneIsKept) {
  FreeList<std::unique_ptr<char[]>> list(1);
  int made = 0;
  auto make = [&] {
    ++made;
    return std::make_unique<char[]>(16);
  };
  auto a = list.TakeOr(make);
  EXPECT_EQ(made, 1);
  char* const address = a.get();
  list.Give(std::move(a));
  auto b = list.TakeOr(make);
  EXPECT_EQ(made, 1);
  EXPECT_EQ(b.get(), address);
}

TEST(FreeList, ConcurrentTakersNeverShareAnObject) {
  FreeList<std::unique_ptr<std::atomic<int>>> list(8);
  for (int i = 0; i < 8; ++i) list.Give(std::make_unique<std::atomic<int>>(0));
  std::atomic<int> shared{0}, made{0};
  std::vector<std::thread> threads;
  for (int t = 1; t <= 4; ++t)
    threads.emplace_back([&, t] {
      for (int i = 0; i < 20000; ++i) {
        auto p = list.TakeOr([&] {
          ++made;
          return std::make_unique<std::atomic<int>>(0);
        });
        if (p->exchange(t) != 0) ++shared;  // another taker holds it too
        std::this_thread::yield();
        if (p->exchange(0) != t) ++shared;
        list.Give(std::move(p));
      }
    });
  for (auto& t : threads) t.join();
  EXPECT_EQ(shared.load(), 0);
  // Four takers never hold more than four of the eight: none is ever made.
  EXPECT_EQ(made.load(), 0);
  EXPECT_EQ(list.size(), 8u);
}

}  // namespace
}  // namespace pacset
