// Unit tests of fs/ below the FUSE boundary: the block cache (single flight,
// eviction), the block reader (retries, deadline, corruption), the forest
// table (pins, generations, no lock across store calls, who may gather), the
// gather file's handles and caps, mount options, the control protocol and
// the errno mapping. Stores are real directory stores,
// wrapped in FaultInjectionStore where a test needs a slow or failing one.
#include <gtest/gtest.h>
#include <functional>

#include <atomic>
#include <cerrno>
#include <chrono>
#include <memory>
#include <random>
#include <thread>
#include <vector>

#include <nlohmann/json.hpp>

#include "fs/block_cache.h"
#include "fs/errno.h"
#include "fs/internal/block_reader.h"
#include "fs/internal/forest_table.h"
#include "fs/internal/gather_handles.h"
#include "fs/internal/notifier.h"
#include "fs/internal/tracing.h"
#include "fs/pacsetfs.h"
#include "fs/stats.h"
#include "protocol/control.h"
#include "store/fault_injection_store.h"
#include "testkit/test_blocks.h"
#include "util/atomic_file.h"

namespace pacset {
namespace {

using fs_internal::BlockReader;
using fs_internal::ForestInode;
using fs_internal::ForestTable;
using fs_internal::GatherHandles;
using fs_internal::Notifier;
using fs_internal::Tracing;
using store_test::MakeBlock;
using store_test::WriteForest;

constexpr uint32_t kBs = 4096;

// A real dir: store with forests, behind a fault-injecting wrapper.
struct StoreFixture {
  std::unique_ptr<TempDir> dir = TempDir::Create("pacset-store").value();
  std::unique_ptr<BlockStore> real;
  std::unique_ptr<FaultInjectionStore> store;
  StoreFixture() {
    real = OpenBlockStore("dir:" + dir->path() + "/store").value();
    store = std::make_unique<FaultInjectionStore>(real.get());
  }
};

std::shared_ptr<ForestInode> InodeOf(const ForestInfo& info) {
  auto f = std::make_shared<ForestInode>();
  f->ino = 16;
  f->name = info.name;
  f->forest_id = 1;
  f->info = info;
  f->stats = std::make_shared<ForestStats>();
  return f;
}

// ---- block cache ----

TEST(BlockCache, ConcurrentMissesOfOneBlockFetchItOnce) {
  BlockCache cache(1 << 20);
  std::atomic<int> fetches{0};
  std::atomic<int> from_store{0}, joined{0};
  std::vector<std::thread> threads;
  for (int i = 0; i < 8; ++i)
    threads.emplace_back([&] {
      BlockCache::Source src;
      auto r = cache.GetOrFetch(
          {1, 1, 7},
          [&](std::string* out) {
            fetches++;
            std::this_thread::sleep_for(std::chrono::milliseconds(100));
            *out = MakeBlock(kBs, 7, 1);
            return Status::Ok();
          },
          &src);
      ASSERT_TRUE(r.ok());
      EXPECT_EQ(**r, MakeBlock(kBs, 7, 1));
      (src == BlockCache::Source::kStore ? from_store : joined)++;
    });
  for (auto& t : threads) t.join();
  EXPECT_EQ(fetches.load(), 1);
  EXPECT_EQ(from_store.load(), 1);
  EXPECT_EQ(joined.load(), 7);
}

TEST(BlockCache, ABatchFetchesItsMissesInOneCallJoinsOthersAndNeverWaitsFirst) {
  BlockCache cache(1 << 20);
  ASSERT_TRUE(cache
                  .GetOrFetch({1, 1, 0},
                              [](std::string* out) {
                                *out = MakeBlock(kBs, 0, 1);
                                return Status::Ok();
                              })
                  .ok());
  // Block 1 is being fetched by another caller, who waits until the batch
  // below has fetched its own misses: a batch that waited for it first
  // would never get there.
  std::atomic<bool> batch_fetched{false}, other_started{false};
  std::thread other([&] {
    auto r = cache.GetOrFetch({1, 1, 1}, [&](std::string* out) {
      other_started = true;
      while (!batch_fetched) std::this_thread::sleep_for(std::chrono::milliseconds(1));
      *out = MakeBlock(kBs, 1, 1);
      return Status::Ok();
    });
    EXPECT_TRUE(r.ok());
  });
  while (!other_started) std::this_thread::sleep_for(std::chrono::milliseconds(1));
  int calls = 0;
  std::vector<size_t> asked;
  std::vector<BlockData> data;
  std::vector<Status> status;
  std::vector<BlockCache::Source> source;
  cache.GetOrFetchMany(
      {{1, 1, 0}, {1, 1, 1}, {1, 1, 2}, {1, 1, 3}},
      [&](const std::vector<size_t>& which, std::vector<std::string>* out,
          std::vector<Status>* st) {
        ++calls;
        asked = which;
        (*out)[0] = MakeBlock(kBs, 2, 1);
        (*st)[1] = Status::Corruption("block 3: checksum mismatch");
        batch_fetched = true;
      },
      &data, &status, &source);
  other.join();
  EXPECT_EQ(calls, 1);
  EXPECT_EQ(asked, (std::vector<size_t>{2, 3}));
  EXPECT_EQ(source, (std::vector<BlockCache::Source>{
                        BlockCache::Source::kCache, BlockCache::Source::kJoined,
                        BlockCache::Source::kStore, BlockCache::Source::kStore}));
  ASSERT_TRUE(status[0].ok() && status[1].ok() && status[2].ok());
  EXPECT_EQ(*data[0], MakeBlock(kBs, 0, 1));
  EXPECT_EQ(*data[1], MakeBlock(kBs, 1, 1));
  EXPECT_EQ(*data[2], MakeBlock(kBs, 2, 1));
  EXPECT_EQ(status[3].code(), StatusCode::kCorruption);
  EXPECT_EQ(data[3], nullptr);
  EXPECT_EQ(cache.bytes(), 3 * kBs);  // the failed block is not cached
}

TEST(BlockCache, FailedFetchIsSharedByWaitersAndNotCached) {
  BlockCache cache(1 << 20);
  int fetches = 0;
  auto fail = [&](std::string*) {
    fetches++;
    return Status::Unavailable("store down");
  };
  EXPECT_EQ(cache.GetOrFetch({1, 1, 0}, fail).status().code(), StatusCode::kUnavailable);
  EXPECT_EQ(cache.GetOrFetch({1, 1, 0}, fail).status().code(), StatusCode::kUnavailable);
  EXPECT_EQ(fetches, 2);
  EXPECT_EQ(cache.bytes(), 0u);
}

// A fetch that counts its calls and makes block `b` of 4 KiB.
struct CountingFetch {
  int calls = 0;
  std::function<Status(std::string*)> operator()(uint64_t b) {
    return [this, b](std::string* out) {
      ++calls;
      *out = MakeBlock(kBs, b, 1);
      return Status::Ok();
    };
  }
};

TEST(BlockCache, KeepsItsBoundAndServesWhatItHoldsFromMemory) {
  BlockCache cache(3 * kBs);
  CountingFetch fetch;
  BlockCache::Source src;
  for (uint64_t b = 0; b < 50; ++b) {
    ASSERT_TRUE(cache.GetOrFetch({1, 1, b % 7}, fetch(b % 7), &src).ok());
    ASSERT_LE(cache.bytes(), 3 * kBs);
    // What the cache says it served from memory, it did not fetch.
    const int before = fetch.calls;
    ASSERT_TRUE(cache.GetOrFetch({1, 1, b % 7}, fetch(b % 7), &src).ok());
    if (src == BlockCache::Source::kCache) {
      EXPECT_EQ(fetch.calls, before);
    }
  }
  EXPECT_GT(cache.bytes(), 0u);
  // A block larger than the whole cache is served but never cached.
  BlockCache tiny(kBs / 2);
  ASSERT_TRUE(tiny.GetOrFetch({1, 1, 0}, fetch(0)).ok());
  EXPECT_EQ(tiny.bytes(), 0u);
}

// The policy holds each block with its key (util/w_tinylfu.h): whatever
// segment a key moves through, a hit serves the bytes fetched for that key,
// and a block evicted or dropped is no longer held (its memory is freed
// once no reader holds it).
TEST(BlockCache, ServesEachKeyItsOwnBlockAndFreesWhatItEvictsOrDrops) {
  BlockCache cache(40 * kBs);
  CountingFetch fetch;
  std::mt19937_64 rng(7);
  std::vector<std::weak_ptr<const std::string>> served(120);
  for (int i = 0; i < 5000; ++i) {
    // Keys 0..19 hot, the rest now and then: every segment sees traffic.
    const uint64_t b = rng() % 4 != 0 ? rng() % 20 : 20 + rng() % 100;
    auto data = cache.GetOrFetch({1, 1, b}, fetch(b));
    ASSERT_TRUE(data.ok());
    ASSERT_EQ(**data, MakeBlock(kBs, b, 1)) << "access " << i << ", block " << b;
    served[b] = *data;
  }
  ASSERT_LE(cache.bytes(), 40 * kBs);
  size_t held = 0;
  for (const auto& w : served) held += !w.expired();
  EXPECT_GT(held, 0u);
  EXPECT_LE(held * kBs, 40 * kBs);  // the rest were released at eviction
  cache.Drop(1);
  for (uint64_t b = 0; b < served.size(); ++b) EXPECT_TRUE(served[b].expired()) << b;
  const int before = fetch.calls;
  ASSERT_TRUE(cache.GetOrFetch({1, 1, 3}, fetch(3)).ok());
  EXPECT_EQ(fetch.calls, before + 1);  // dropped: fetched again
}

// The claim of the policy (fs/block_cache.h): blocks used by most requests
// survive a burst of blocks used once, ten times the cache's size, which
// under LRU would have evicted every one of them.
TEST(BlockCache, AScanOfBlocksUsedOnceDoesNotEvictTheHotBlocks) {
  BlockCache cache(200 * kBs);
  CountingFetch fetch;
  for (int round = 0; round < 20; ++round)
    for (uint64_t b = 0; b < 100; ++b) ASSERT_TRUE(cache.GetOrFetch({1, 1, b}, fetch(b)).ok());
  EXPECT_EQ(fetch.calls, 100);
  for (uint64_t b = 1000; b < 3000; ++b) ASSERT_TRUE(cache.GetOrFetch({1, 1, b}, fetch(b)).ok());
  EXPECT_LE(cache.bytes(), 200 * kBs);
  const int before = fetch.calls;
  BlockCache::Source src;
  for (uint64_t b = 0; b < 100; ++b) {
    ASSERT_TRUE(cache.GetOrFetch({1, 1, b}, fetch(b), &src).ok());
    EXPECT_EQ(src, BlockCache::Source::kCache) << b;
  }
  EXPECT_EQ(fetch.calls, before);
}

// ... and the cache still follows a change of traffic: blocks that become
// the most used replace the old hot ones.
TEST(BlockCache, BlocksThatBecomeTheMostUsedAreKeptInstead) {
  BlockCache cache(200 * kBs);
  CountingFetch fetch;
  for (int round = 0; round < 5; ++round)
    for (uint64_t b = 0; b < 150; ++b) ASSERT_TRUE(cache.GetOrFetch({1, 1, b}, fetch(b)).ok());
  for (int round = 0; round < 30; ++round)
    for (uint64_t b = 500; b < 650; ++b) ASSERT_TRUE(cache.GetOrFetch({1, 1, b}, fetch(b)).ok());
  const int before = fetch.calls;
  for (uint64_t b = 500; b < 650; ++b) ASSERT_TRUE(cache.GetOrFetch({1, 1, b}, fetch(b)).ok());
  EXPECT_EQ(fetch.calls, before);
}

TEST(BlockCache, DropsOneForestOrOneGenerationOrAll) {
  BlockCache cache(1 << 20);
  auto fetch = [](std::string* out) {
    *out = std::string(kBs, 'x');
    return Status::Ok();
  };
  for (uint32_t forest : {1u, 2u})
    for (uint64_t gen : {1u, 2u}) ASSERT_TRUE(cache.GetOrFetch({forest, gen, 0}, fetch).ok());
  EXPECT_EQ(cache.bytes(), 4 * kBs);
  cache.DropGeneration(1, 1);
  EXPECT_EQ(cache.bytes(), 3 * kBs);
  cache.Drop(2);
  EXPECT_EQ(cache.bytes(), 1 * kBs);
  cache.Drop(0);
  EXPECT_EQ(cache.bytes(), 0u);
}

// ---- block reader ----

TEST(BlockReader, ServesVerifiedBlocksAndCountsWhereTheyCameFrom) {
  StoreFixture s;
  ASSERT_TRUE(WriteForest(*s.store, "f", kBs, 4).ok());
  auto f = InodeOf(s.store->Lookup("f").value());
  BlockCache cache(1 << 20);
  BlockReader reader(s.store.get(), &cache, "test store", 2000);
  BlockCache::Source src;
  auto b = reader.Get(*f, 2, &src);
  ASSERT_TRUE(b.ok()) << b.status().ToString();
  EXPECT_EQ(**b, MakeBlock(kBs, 2, 1));
  EXPECT_EQ(src, BlockCache::Source::kStore);
  ASSERT_TRUE(reader.Get(*f, 2, &src).ok());
  EXPECT_EQ(src, BlockCache::Source::kCache);
  EXPECT_EQ(f->stats->blocks_fetched.load(), 1u);
  EXPECT_EQ(f->stats->cache_hits.load(), 1u);
}

TEST(BlockReader, RetriesACorruptBlockOnceThenFailsWithoutCachingIt) {
  StoreFixture s;
  ASSERT_TRUE(WriteForest(*s.store, "f", kBs, 4).ok());
  auto f = InodeOf(s.store->Lookup("f").value());
  s.store->CorruptBlock(1);
  BlockCache cache(1 << 20);
  BlockReader reader(s.store.get(), &cache, "test store", 2000);
  BlockCache::Source src;
  const uint64_t reads = s.store->read_calls();
  auto b = reader.Get(*f, 1, &src);
  EXPECT_EQ(b.status().code(), StatusCode::kCorruption);
  EXPECT_EQ(StatusToErrno(b.status()), EIO);
  EXPECT_EQ(s.store->read_calls() - reads, 2u);  // the read and one retry
  EXPECT_EQ(f->stats->corrupt_blocks.load(), 2u);
  EXPECT_EQ(cache.bytes(), 0u);
  s.store->ClearFaults();
  ASSERT_TRUE(reader.Get(*f, 1, &src).ok());
}

TEST(BlockReader, AnUnreachableStoreFailsByTheDeadlineThenFastUntilItAnswers) {
  StoreFixture s;
  ASSERT_TRUE(WriteForest(*s.store, "f", kBs, 4).ok());
  auto f = InodeOf(s.store->Lookup("f").value());
  s.store->FailAllReads(StatusCode::kUnavailable);
  BlockCache cache(1 << 20);
  BlockReader reader(s.store.get(), &cache, "test store", 300);
  BlockCache::Source src;
  auto b = reader.Get(*f, 0, &src);
  EXPECT_EQ(b.status().code(), StatusCode::kDeadlineExceeded);
  EXPECT_GT(f->stats->store_retries.load(), 0u);
  // Known down: the next fetch does not go to the store at all.
  const uint64_t reads = s.store->read_calls();
  EXPECT_EQ(reader.Get(*f, 1, &src).status().code(), StatusCode::kUnavailable);
  EXPECT_EQ(s.store->read_calls(), reads);
  s.store->ClearFaults();
  std::this_thread::sleep_for(std::chrono::milliseconds(350));  // the quiet period (300 ms)
  EXPECT_TRUE(reader.Get(*f, 1, &src).ok());
}

// ---- notifier ----

// A request handler fetches blocks, replies, then queues their push; a drop
// whose client sent it after that reply can come before the push is queued.
// The handler passes drops() from before its fetch: such a push is discarded
// (it would fill the page cache again after the drop). Without a kernel
// (se null), a push reads its block through the reader: a block not read is
// not in the cache.
TEST(Notifier, APushOfBlocksFetchedBeforeADropIsDiscardedEvenWhenQueuedAfterIt) {
  StoreFixture s;
  ASSERT_TRUE(WriteForest(*s.store, "f", kBs, 4).ok());
  auto f = InodeOf(s.store->Lookup("f").value());
  BlockCache cache(1 << 20);
  BlockReader reader(s.store.get(), &cache, "test store", 2000);
  Tracing tracing(16);
  Notifier n(nullptr, &reader, &tracing);
  n.Start();
  const uint64_t before_drop = n.drops();
  std::atomic<bool> dropped{false};
  n.Invalidate({f}, [&] { dropped = true; });
  for (int i = 0; i < 500 && !dropped; ++i)
    std::this_thread::sleep_for(std::chrono::milliseconds(2));
  ASSERT_TRUE(dropped.load());
  EXPECT_EQ(n.drops(), before_drop + 1);
  const uint64_t reads = s.store->read_calls();
  n.Push(f, 2, 1, before_drop);  // fetched before the drop: discarded
  n.Push(f, 3, 1, n.drops());    // fetched after it: pushed (queued behind block 2's)
  for (int i = 0; i < 500 && s.store->read_calls() == reads; ++i)
    std::this_thread::sleep_for(std::chrono::milliseconds(2));
  n.Stop();
  EXPECT_EQ(s.store->read_calls(), reads + 1);
  BlockCache::Source src;
  ASSERT_TRUE(reader.Get(*f, 2, &src).ok());
  EXPECT_EQ(src, BlockCache::Source::kStore) << "block 2 was pushed after the drop";
  ASSERT_TRUE(reader.Get(*f, 3, &src).ok());
  EXPECT_EQ(src, BlockCache::Source::kCache) << "block 3 was not pushed";
}

// ---- forest table ----

struct TableFixture : StoreFixture {
  BlockCache cache{1 << 20};
  MountStats stats;
  ForestTable table{store.get(), &cache, &stats};
};

TEST(ForestTable, PinsAnOpenGenerationOnceAndUnpinsItWhenReplacedAndClosed) {
  TableFixture t;
  ASSERT_TRUE(WriteForest(*t.store, "f", kBs, 2).ok());
  ASSERT_TRUE(t.table.Refresh().ok());
  auto f = t.table.Lookup("f");
  ASSERT_NE(f, nullptr);
  bool first = false;
  ASSERT_TRUE(t.table.Open(f, 0, &first).ok());
  EXPECT_TRUE(first);
  ASSERT_TRUE(t.table.Open(f, 0, &first).ok());
  EXPECT_FALSE(first);
  EXPECT_EQ(t.store->pins_held(), 1);
  // A new generation: the old one stays pinned while open.
  ASSERT_TRUE(WriteForest(*t.store, "f", kBs, 2).ok());
  auto changed = t.table.Refresh();
  ASSERT_TRUE(changed.ok());
  EXPECT_EQ(*changed, std::vector<std::string>{"f"});
  EXPECT_EQ(t.store->pins_held(), 1);
  t.table.Release(f->ino, 0);
  EXPECT_EQ(t.store->pins_held(), 1);
  t.table.Release(f->ino, 0);
  EXPECT_EQ(t.store->pins_held(), 0);
  auto g = t.table.Lookup("f");
  EXPECT_NE(g->ino, f->ino);
  EXPECT_EQ(g->info.generation, f->info.generation + 1);
}

// A refresh whose listing comes back after a later refresh's (the refresher
// thread's and a lookup's at once, on a busy machine) must not bring back the
// generation that the later listing replaced: a lookup would resolve the
// name to it again, and a new open would get the old generation after
// others had the new one. What any refresh changed is announced once.
TEST(ForestTable, AListingOvertakenByALaterRefreshNeverBringsBackAnOlderGeneration) {
  TableFixture t;
  uint64_t g1 = 0, g2 = 0;
  ASSERT_TRUE(WriteForest(*t.store, "f", kBs, 2, &g1).ok());
  ASSERT_TRUE(t.table.Refresh().ok());
  EXPECT_EQ(t.table.TakeChangedNames(), std::vector<std::string>{"f"});
  t.store->HoldNextList();
  StatusOr<std::vector<std::string>> slow = std::vector<std::string>{};
  std::thread slow_refresh([&] { slow = t.table.Refresh(); });  // lists generation 1
  while (!t.store->list_held()) std::this_thread::yield();
  ASSERT_TRUE(WriteForest(*t.store, "f", kBs, 2, &g2).ok());
  auto changed = t.table.Refresh();  // lists generation 2
  ASSERT_TRUE(changed.ok());
  EXPECT_EQ(*changed, std::vector<std::string>{"f"});
  t.store->ReleaseHeldList();
  slow_refresh.join();
  ASSERT_TRUE(slow.ok());
  EXPECT_TRUE(slow->empty()) << "the overtaken listing changed the catalog";
  auto f = t.table.Lookup("f");
  ASSERT_NE(f, nullptr);
  EXPECT_EQ(f->info.generation, g2);
  EXPECT_EQ(t.table.TakeChangedNames(), std::vector<std::string>{"f"});
  EXPECT_TRUE(t.table.TakeChangedNames().empty());
}

TEST(ForestTable, AFailedOpenCountsNothingAndHoldsNoPin) {
  TableFixture t;
  ASSERT_TRUE(WriteForest(*t.store, "f", kBs, 2).ok());
  ASSERT_TRUE(t.table.Refresh().ok());
  auto f = t.table.Lookup("f");
  // The generation disappears before the open pins it.
  ASSERT_TRUE(WriteForest(*t.store, "f", kBs, 2).ok());
  ASSERT_TRUE(t.real->CollectGarbage().ok());
  bool first = true;
  EXPECT_EQ(t.table.Open(f, 0, &first).code(), StatusCode::kNotFound);
  EXPECT_FALSE(first);
  EXPECT_EQ(t.store->pins_held(), 0);
  t.table.UnpinAll();
  EXPECT_EQ(t.store->pins_held(), 0);
}

TEST(ForestTable, AStoreRoundTripOfOnePinBlocksNoOtherLookupOrRead) {
  TableFixture t;
  ASSERT_TRUE(WriteForest(*t.store, "a", kBs, 2).ok());
  ASSERT_TRUE(WriteForest(*t.store, "b", kBs, 2).ok());
  ASSERT_TRUE(t.table.Refresh().ok());
  auto a = t.table.Lookup("a");
  t.store->DelayPins(1500);
  std::atomic<bool> opened{false};
  std::thread opener([&] {
    bool first;
    EXPECT_TRUE(t.table.Open(a, 0, &first).ok());
    opened = true;
  });
  while (t.store->pin_calls() == 0) std::this_thread::yield();
  // The pin is under way in the store: everything else goes on.
  EXPECT_NE(t.table.Find(a->ino), nullptr);
  EXPECT_NE(t.table.Lookup("b"), nullptr);
  EXPECT_EQ(t.table.DirEntries().size(), 2u);
  uint64_t files, bytes;
  t.table.Totals(&files, &bytes);
  EXPECT_EQ(files, 2u);
  EXPECT_FALSE(opened.load()) << "the lookups waited for the pin";
  opener.join();
  t.store->ClearFaults();
  t.table.Release(a->ino, 0);
  t.table.UnpinAll();
  EXPECT_EQ(t.store->pins_held(), 0);
}

TEST(ForestTable, ConcurrentOpensOfOneGenerationPinItOnce) {
  TableFixture t;
  ASSERT_TRUE(WriteForest(*t.store, "f", kBs, 2).ok());
  ASSERT_TRUE(t.table.Refresh().ok());
  auto f = t.table.Lookup("f");
  t.store->DelayPins(200);
  std::vector<std::thread> threads;
  std::atomic<int> firsts{0};
  for (int i = 0; i < 4; ++i)
    threads.emplace_back([&] {
      bool first;
      EXPECT_TRUE(t.table.Open(f, 0, &first).ok());
      if (first) firsts++;
    });
  for (auto& th : threads) th.join();
  EXPECT_EQ(firsts.load(), 1);
  EXPECT_EQ(t.store->pin_calls(), 1u);
  EXPECT_EQ(t.store->pins_held(), 1);
  t.store->ClearFaults();
  for (int i = 0; i < 4; ++i) t.table.Release(f->ino, 0);
  t.table.Forget(f->ino, 1);  // the kernel forgets it: the current generation is unpinned too
  EXPECT_EQ(t.store->pins_held(), 0);
}

// A forest's blocks may be gathered (protocol/gather.h) as its file may be read:
// by anyone while it is its name's current generation and open (pinned);
// once replaced or removed, only by the users who hold it open.
TEST(ForestTable, AGenerationIsGatherableByAnyoneWhileCurrentThenOnlyByItsHolders) {
  TableFixture t;
  constexpr uint32_t kHolder = 1000, kOther = 1001;
  ASSERT_TRUE(WriteForest(*t.store, "f", kBs, 2).ok());
  ASSERT_TRUE(t.table.Refresh().ok());
  auto f = t.table.Lookup("f");
  EXPECT_EQ(t.table.FindGatherable(f->ino, kOther), nullptr) << "not open: not pinned";
  bool first = false;
  ASSERT_TRUE(t.table.Open(f, kHolder, &first).ok());
  EXPECT_EQ(t.table.FindGatherable(f->ino, kOther), f);
  EXPECT_EQ(t.table.FindGatherable(f->ino, 0), f);
  // Replaced by a new generation.
  ASSERT_TRUE(WriteForest(*t.store, "f", kBs, 2).ok());
  ASSERT_TRUE(t.table.Refresh().ok());
  EXPECT_EQ(t.table.FindGatherable(f->ino, kOther), nullptr);
  EXPECT_EQ(t.table.FindGatherable(f->ino, 0), nullptr) << "root never opened it either";
  EXPECT_EQ(t.table.FindGatherable(f->ino, kHolder), f);
  // The new generation, opened by the holder, then removed.
  auto g = t.table.Lookup("f");
  ASSERT_TRUE(t.table.Open(g, kHolder, &first).ok());
  ASSERT_TRUE(t.table.Open(g, kHolder, &first).ok());
  EXPECT_EQ(t.table.FindGatherable(g->ino, kOther), g);
  ASSERT_TRUE(t.real->Delete("f").ok());
  ASSERT_TRUE(t.table.Refresh().ok());
  EXPECT_EQ(t.table.FindGatherable(g->ino, kOther), nullptr);
  EXPECT_EQ(t.table.FindGatherable(g->ino, kHolder), g);
  // Counted per handle: the holder's last release ends it.
  t.table.Release(g->ino, kHolder);
  EXPECT_EQ(t.table.FindGatherable(g->ino, kHolder), g);
  t.table.Release(g->ino, kHolder);
  EXPECT_EQ(t.table.FindGatherable(g->ino, kHolder), nullptr);
  t.table.Release(f->ino, kHolder);
  EXPECT_EQ(t.table.FindGatherable(f->ino, kHolder), nullptr);
  t.table.UnpinAll();
}

// ---- the gather file's handles ----

std::shared_ptr<const GatherHandles::Request> RequestOf(size_t blocks) {
  auto r = std::make_shared<GatherHandles::Request>();
  r->blocks.resize(blocks);
  return r;
}

TEST(GatherHandles, CapsEachUsersHandlesAndTheOthersTotalAndGivesTrustedUsersTheirOwnBudget) {
  constexpr uint32_t kMounter = 1000, kA = 2001, kB = 2002;
  GatherHandles h({/*handles_per_user=*/2, /*handles=*/3, /*bytes_per_user=*/1 << 20,
                   /*bytes=*/1 << 20},
                  kMounter);
  uint64_t fh = 0;
  std::vector<uint64_t> a;
  for (int i = 0; i < 2; ++i) {
    ASSERT_EQ(h.Open(kA, &fh), 0);
    a.push_back(fh);
  }
  EXPECT_EQ(h.Open(kA, &fh), EMFILE);
  ASSERT_EQ(h.Open(kB, &fh), 0);
  const uint64_t b = fh;
  EXPECT_EQ(h.Open(kB, &fh), ENFILE) << "B is under its cap, the others' total is not";
  // Root and the mounting user: no cap of their own, a total apart.
  for (uint32_t trusted : {0u, kMounter, 0u}) EXPECT_EQ(h.Open(trusted, &fh), 0) << trusted;
  EXPECT_EQ(h.Open(kMounter, &fh), ENFILE);
  EXPECT_EQ(h.UsageOf(kA).handles, 2u);
  EXPECT_EQ(h.UsageOf(0).handles, 3u);
  EXPECT_EQ(h.UsageOf(kMounter).handles, 3u) << "one budget for both";
  // A closed handle is gone, and what it counted is free again.
  h.Close(a[0]);
  std::shared_ptr<const GatherHandles::Request> r;
  EXPECT_FALSE(h.Get(a[0], &r));
  EXPECT_EQ(h.SetRequest(a[0], RequestOf(1)), EBADF);
  EXPECT_EQ(h.Open(kB, &fh), 0);
  EXPECT_EQ(h.Open(kA, &fh), ENFILE);
  h.Close(b);
  EXPECT_EQ(h.Open(kA, &fh), 0);
  const GatherHandles::Totals t = h.totals();
  EXPECT_EQ(t.all.handles, 6u);
  EXPECT_EQ(t.refused_opens, 4u);
}

TEST(GatherHandles, CapsRequestBytesPerUserAndInTotalAndARequestMayBeReplacedByOneAsLarge) {
  constexpr uint32_t kA = 2001, kB = 2002;
  const uint64_t r100 = GatherHandles::RequestBytes(100);
  GatherHandles h({10, 10, 2 * r100, 3 * r100}, /*mounting_uid=*/1000);
  uint64_t a1, a2, a3, b1, b2, root;
  ASSERT_EQ(h.Open(kA, &a1) | h.Open(kA, &a2) | h.Open(kA, &a3), 0);
  ASSERT_EQ(h.Open(kB, &b1) | h.Open(kB, &b2) | h.Open(0, &root), 0);
  std::shared_ptr<const GatherHandles::Request> r;
  ASSERT_TRUE(h.Get(a1, &r));
  EXPECT_EQ(r, nullptr) << "no request before the first write";
  const auto first = RequestOf(100);
  EXPECT_EQ(h.SetRequest(a1, first), 0);
  EXPECT_EQ(h.SetRequest(a2, RequestOf(100)), 0);
  EXPECT_EQ(h.SetRequest(a3, RequestOf(1)), ENOMEM);
  EXPECT_EQ(h.SetRequest(a1, RequestOf(100)), 0) << "as large as the one it replaces";
  const auto smaller = RequestOf(10);
  EXPECT_EQ(h.SetRequest(a2, smaller), 0);
  EXPECT_EQ(h.UsageOf(kA).bytes, r100 + GatherHandles::RequestBytes(10));
  EXPECT_EQ(h.SetRequest(b1, RequestOf(100)), 0);
  EXPECT_EQ(h.SetRequest(b2, RequestOf(100)), ENOMEM) << "over the others' total";
  ASSERT_TRUE(h.Get(b2, &r));
  EXPECT_EQ(r, nullptr) << "a refused request leaves the handle as it was";
  ASSERT_TRUE(h.Get(a2, &r));
  EXPECT_EQ(r, smaller);
  EXPECT_EQ(h.SetRequest(root, RequestOf(300)), 0) << "root's budget is apart";
  h.Close(a1);
  EXPECT_EQ(h.SetRequest(b2, RequestOf(100)), 0);
  EXPECT_EQ(h.totals().refused_requests, 2u);
  h.Close(a2);
  h.Close(a3);
  h.Close(b1);
  h.Close(b2);
  h.Close(root);
  EXPECT_EQ(h.totals().all.bytes, 0u);
  EXPECT_EQ(h.totals().all.handles, 0u);
  EXPECT_EQ(h.UsageOf(kA).handles, 0u);
}

// malloc_trim is asked for once what the handles hold fell a MiB below its
// peak since the last trim: after a flood closes, not after an engine's few.
TEST(GatherHandles, AsksForATrimOnlyOnceWhatTheyHoldFellAMebibyteBelowItsPeak) {
  GatherHandles h({1 << 20, 1 << 20, 1 << 30, 1 << 30}, 1000);
  std::vector<uint64_t> fhs(400);
  for (uint64_t& fh : fhs) {
    ASSERT_EQ(h.Open(2001, &fh), 0);
    ASSERT_EQ(h.SetRequest(fh, RequestOf(1024)), 0);
  }
  // 400 handles of ~8 KiB: ~3.2 MiB held; trims come every MiB released.
  int trims = 0;
  for (uint64_t fh : fhs) trims += h.Close(fh) ? 1 : 0;
  EXPECT_EQ(trims, 3);
  for (int i = 0; i < 100; ++i) {  // an engine's handles come and go
    uint64_t fh;
    ASSERT_EQ(h.Open(2001, &fh), 0);
    ASSERT_EQ(h.SetRequest(fh, RequestOf(32)), 0);
    EXPECT_FALSE(h.Close(fh));
  }
}

// ---- mount options ----

TEST(MountOptions, ParsesEveryOptionAndSize) {
  MountOptions o;
  ASSERT_TRUE(ParseMountOptionString(
                  "ro,allow_other,cache_size=64M,trace=/t,store_timeout=2500,catalog_refresh=5,"
                  "no_push_blocks,no_direct_store_reads,prefetch_bins,readahead=128K,threads=4000,"
                  "no_auto_unmount,"
                  "password_file=/etc/pw,store=redis://h:1",
                  &o)
                  .ok());
  EXPECT_TRUE(o.read_only);
  EXPECT_TRUE(o.allow_other);
  EXPECT_EQ(o.cache_bytes, 64u << 20);
  EXPECT_EQ(o.trace_path, "/t");
  EXPECT_EQ(o.store_timeout_ms, 2500);
  EXPECT_EQ(o.catalog_refresh_ms, 10);  // floor
  EXPECT_FALSE(o.push_blocks);
  EXPECT_FALSE(o.direct_store_reads);
  EXPECT_TRUE(o.prefetch_bins);
  EXPECT_EQ(o.max_readahead, 128u << 10);
  EXPECT_EQ(o.max_threads, 1024);  // ceiling
  EXPECT_FALSE(o.auto_unmount);
  EXPECT_EQ(o.password_file, "/etc/pw");
  EXPECT_EQ(o.store_uri, "redis://h:1");
  ASSERT_TRUE(ParseMountOptionString("rw,cache_size=1G,debug", &o).ok());
  EXPECT_FALSE(o.read_only);
  EXPECT_EQ(o.cache_bytes, 1u << 30);
  EXPECT_TRUE(o.debug && o.foreground);
}

TEST(MountOptions, TheGatherCapsHaveDefaultsCeilingsAndAUsersCapIsAtMostTheTotal) {
  MountOptions o;
  EXPECT_EQ(o.max_gather_handles_per_user, 4096u);
  EXPECT_EQ(o.max_gather_handles, 16384u);
  EXPECT_EQ(o.gather_memory_per_user, 4u << 20);
  EXPECT_EQ(o.gather_memory, 16u << 20);
  ASSERT_TRUE(ParseMountOptionString("max_gather_handles_per_user=100,max_gather_handles=1K,"
                                     "gather_memory_per_user=1MiB,gather_memory=64M",
                                     &o)
                  .ok());
  EXPECT_EQ(o.max_gather_handles_per_user, 100u);
  EXPECT_EQ(o.max_gather_handles, 1024u);
  EXPECT_EQ(o.gather_memory_per_user, 1u << 20);
  EXPECT_EQ(o.gather_memory, 64u << 20);
  ASSERT_TRUE(ParseMountOptionString("max_gather_handles=10,gather_memory=100K", &o).ok());
  EXPECT_EQ(o.max_gather_handles_per_user, 10u);
  EXPECT_EQ(o.gather_memory_per_user, 100u << 10);
  ASSERT_TRUE(ParseMountOptionString("max_gather_handles=1G,gather_memory=1048576G", &o).ok());
  EXPECT_EQ(o.max_gather_handles, 1u << 24);
  EXPECT_EQ(o.gather_memory, uint64_t{1} << 36);
  ASSERT_TRUE(ParseMountOptionString("max_gather_handles_per_user=0", &o).ok());
  EXPECT_EQ(o.max_gather_handles_per_user, 0u) << "0: only root and the mounting user gather";
  for (const char* bad : {"max_gather_handles=", "max_gather_handles_per_user=x",
                          "gather_memory=-1", "gather_memory_per_user"})
    EXPECT_EQ(ParseMountOptionString(bad, &o).code(), StatusCode::kInvalidArgument) << bad;
}

TEST(MountOptions, TheFaultReadAheadHasDefaultsCeilingsAndAUsersCapIsAtMostTheTotal) {
  MountOptions o;
  EXPECT_EQ(o.fault_readahead, 1u << 20);
  EXPECT_EQ(o.fault_readahead_per_user, 32u << 20);
  EXPECT_EQ(o.fault_readahead_total, 128u << 20);
  EXPECT_EQ(o.fault_readahead_file_max, 256u << 20);
  ASSERT_TRUE(ParseMountOptionString("fault_readahead=256K,fault_readahead_per_user=8M,"
                                     "fault_readahead_total=64M,fault_readahead_file_max=4G",
                                     &o)
                  .ok());
  EXPECT_EQ(o.fault_readahead_file_max, uint64_t{4} << 30);
  EXPECT_EQ(o.fault_readahead, 256u << 10);
  EXPECT_EQ(o.fault_readahead_per_user, 8u << 20);
  EXPECT_EQ(o.fault_readahead_total, 64u << 20);
  ASSERT_TRUE(ParseMountOptionString("fault_readahead_total=1M,fault_readahead=1G", &o).ok());
  EXPECT_EQ(o.fault_readahead_per_user, 1u << 20);
  EXPECT_EQ(o.fault_readahead, 64u << 20);  // the ceiling
  ASSERT_TRUE(ParseMountOptionString("fault_readahead=0", &o).ok());
  EXPECT_EQ(o.fault_readahead, 0u) << "0: no read-ahead";
  for (const char* bad : {"fault_readahead=", "fault_readahead_total=x", "fault_readahead_per_user",
                          "fault_readahead_file_max=-1"})
    EXPECT_EQ(ParseMountOptionString(bad, &o).code(), StatusCode::kInvalidArgument) << bad;
}

TEST(MountOptions, IgnoresMountTableOptionsAndRejectsUnknownOnes) {
  MountOptions o;
  EXPECT_TRUE(
      ParseMountOptionString("defaults,dev,suid,nofail,_netdev,noatime,x-systemd.after=x", &o)
          .ok());
  EXPECT_FALSE(o.read_only);
  auto s = ParseMountOptionString("bogus=1", &o);
  EXPECT_EQ(s.code(), StatusCode::kInvalidArgument);
  EXPECT_NE(s.message().find("bogus"), std::string::npos);
  EXPECT_FALSE(ParseMountOptionString("cache_size=12X", &o).ok());
  EXPECT_FALSE(ParseMountOptionString("cache_size=", &o).ok());
  EXPECT_FALSE(ParseMountOptionString("password_file=", &o).ok());
}

// ---- control protocol ----

TEST(ControlProtocol, ParsesTheFourCommands) {
  auto c = ParseControlCommand("drop rf\n");
  ASSERT_TRUE(c.ok());
  EXPECT_EQ(c->kind, ControlCommand::Kind::kDrop);
  EXPECT_EQ(c->arg, "rf");
  c = ParseControlCommand("drop *");
  ASSERT_TRUE(c.ok());
  EXPECT_EQ(c->arg, "*");
  c = ParseControlCommand("trace start /tmp/a b.trace\n");
  ASSERT_TRUE(c.ok());
  EXPECT_EQ(c->kind, ControlCommand::Kind::kTraceStart);
  EXPECT_EQ(c->arg, "/tmp/a b.trace");
  c = ParseControlCommand("trace stop");
  ASSERT_TRUE(c.ok());
  EXPECT_EQ(c->kind, ControlCommand::Kind::kTraceStop);
  // Names are the daemon's to judge (an unknown one is ENOENT there), bytes included.
  c = ParseControlCommand("drop \xff");
  ASSERT_TRUE(c.ok());
  EXPECT_EQ(c->arg, "\xff");
}

TEST(ControlProtocol, RejectsWhatOnlyLooksLikeACommand) {
  for (const char* bad : {"dropX", "drop", "drop ", "drop  rf", "drop a b", "trace", "trace start",
                          "trace start rel/path", "trace stopp", "", "DROP *"}) {
    auto c = ParseControlCommand(bad);
    EXPECT_EQ(c.status().code(), StatusCode::kInvalidArgument) << "'" << bad << "'";
  }
}

TEST(ControlProtocol, LinesRoundTrip) {
  for (const auto& cmd : {ControlCommand::Drop("*"), ControlCommand::Drop("rf"),
                          ControlCommand::TraceStart("/x/y.trace"), ControlCommand::TraceStop()}) {
    auto back = ParseControlCommand(cmd.ToLine());
    ASSERT_TRUE(back.ok()) << cmd.ToLine();
    EXPECT_EQ(back->kind, cmd.kind);
    EXPECT_EQ(back->arg, cmd.arg);
  }
}

// ---- errno mapping, stats ----

TEST(StatusToErrno, MapsEveryCode) {
  EXPECT_EQ(StatusToErrno(Status::Ok()), 0);
  EXPECT_EQ(StatusToErrno(Status::NotFound("x")), ENOENT);
  EXPECT_EQ(StatusToErrno(Status::InvalidArgument("x")), EINVAL);
  EXPECT_EQ(StatusToErrno(Status::NotSupported("x")), ENOTSUP);
  EXPECT_EQ(StatusToErrno(Status::AlreadyExists("x")), EEXIST);
  EXPECT_EQ(StatusToErrno(Status::ResourceExhausted("x")), ENOMEM);
  for (const Status& s : {Status::Corruption("x"), Status::IOError("x"), Status::Unavailable("x"),
                          Status::DeadlineExceeded("x"), Status::Internal("x")})
    EXPECT_EQ(StatusToErrno(s), EIO) << s.ToString();
}

TEST(MountStats, JsonOfBytesThatAreNotUtf8IsValid) {
  MountStats stats;
  stats.For("rf")->reads = 3;
  const std::string json = stats.ToJson("{\"mountpoint\": \"/mnt\"}");
  EXPECT_NE(json.find("\"reads\": 3"), std::string::npos) << json;
  nlohmann::json extra = {{"path", std::string("/tmp/\xff\xfe.trace")}};
  const std::string bad =
      stats.ToJson(extra.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace));
  EXPECT_NE(bad.find("\xef\xbf\xbd"), std::string::npos) << bad;  // U+FFFD
}

TEST(RedactStoreUri, HidesEveryPasswordAndNothingElse) {
  EXPECT_EQ(RedactStoreUri("redis://:s3cret@h:6379/2"), "redis://:***@h:6379/2");
  EXPECT_EQ(RedactStoreUri("redis://user:s3:c@ret@h:1"), "redis://user:***@h:1");
  EXPECT_EQ(RedactStoreUri("redis://pa/ss@h:1"), "redis://***@h:1");
  EXPECT_EQ(RedactStoreUri("redis://h:6379"), "redis://h:6379");
  EXPECT_EQ(RedactStoreUri("rocksdb:/var/lib/x@y"), "rocksdb:/var/lib/x@y");
  auto s = OpenBlockStore("redis://:s3cret@h:99999");
  EXPECT_EQ(s.status().message().find("s3cret"), std::string::npos) << s.status().ToString();
}

}  // namespace
}  // namespace pacset
