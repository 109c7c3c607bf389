// rocksdb: specifics: one writer process (LOCK) and secondary readers.
#include <fcntl.h>
#include <gtest/gtest.h>
#include <rocksdb/file_system.h>
#include <sys/stat.h>

#include <algorithm>
#include <chrono>
#include <fstream>
#include <map>
#include <numeric>
#include <random>

#include "store/block_store.h"
#include "store/fault_injection_store.h"
#include "store/internal/backends.h"
#include "store/internal/uring_file_system.h"
#include "store/parallel_reads.h"
#include "testkit/child_process.h"
#include "testkit/page_cache.h"
#include "testkit/test_blocks.h"
#include "util/atomic_file.h"
#include "util/file_io.h"
#include "util/uring_reads.h"

namespace pacset {
namespace {

using store_test::MakeBlock;
using store_test::WriteForest;

StoreOptions Opts(bool read_only) {
  StoreOptions o;
  o.read_only = read_only;
  o.busy_timeout_ms = 300;
  o.rocksdb_block_cache_bytes = 8u << 20;
  return o;
}

TEST(RocksDbStore, SecondaryReaderSeesAGenerationPublishedByTheWriterAfterRefresh) {
  const auto tmp = TempDir::Create("pacset-store").value();
  const std::string uri = "rocksdb:" + tmp->path() + "/store";
  auto writer = OpenBlockStore(uri, Opts(false));
  ASSERT_TRUE(writer.ok()) << writer.status().ToString();
  uint64_t g1 = 0;
  ASSERT_TRUE(WriteForest(**writer, "model", 4096, 5, &g1).ok());

  auto reader = OpenBlockStore(uri, Opts(true));
  ASSERT_TRUE(reader.ok()) << reader.status().ToString();
  auto info = (*reader)->Lookup("model");
  ASSERT_TRUE(info.ok()) << info.status().ToString();
  EXPECT_EQ(info->generation, g1);
  EXPECT_EQ((*reader)->Lookup("later").status().code(), StatusCode::kNotFound);

  uint64_t g2 = 0, later = 0;
  ASSERT_TRUE(WriteForest(**writer, "model", 4096, 7, &g2).ok());
  ASSERT_TRUE(WriteForest(**writer, "later", 8192, 2, &later).ok());
  // Not yet: the secondary shows what it caught up to.
  EXPECT_EQ((*reader)->Lookup("model")->generation, g1);
  ASSERT_TRUE((*reader)->Refresh().ok());
  info = (*reader)->Lookup("model");
  ASSERT_TRUE(info.ok());
  EXPECT_EQ(info->generation, g2);
  std::string b;
  for (uint64_t i = 0; i < 7; ++i) {
    ASSERT_TRUE((*reader)->Get(*info, i, &b).ok()) << i;
    EXPECT_EQ(b, MakeBlock(4096, i, g2));
  }
  auto l = (*reader)->Lookup("later");
  ASSERT_TRUE(l.ok());
  ASSERT_TRUE((*reader)->Get(*l, 1, &b).ok());
  EXPECT_EQ(b, MakeBlock(8192, 1, later));
}

// What a reader lists (a daemon's catalog: every refresh and lookup) follows
// the writer's publications and deletions at each Refresh, and a listing
// repeated without one is the same.
TEST(RocksDbStore, SecondaryReaderListsWhatTheWriterPublishedAndDeletedAfterRefresh) {
  const auto tmp = TempDir::Create("pacset-store").value();
  const std::string uri = "rocksdb:" + tmp->path() + "/store";
  auto writer = OpenBlockStore(uri, Opts(false));
  ASSERT_TRUE(writer.ok()) << writer.status().ToString();
  uint64_t a1 = 0;
  ASSERT_TRUE(WriteForest(**writer, "a", 4096, 3, &a1).ok());
  auto reader = OpenBlockStore(uri, Opts(true));
  ASSERT_TRUE(reader.ok()) << reader.status().ToString();
  using Listing = std::map<std::string, uint64_t>;
  auto listed = [&] {
    Listing m;
    auto list = (*reader)->List();
    EXPECT_TRUE(list.ok()) << list.status().ToString();
    if (list.ok())
      for (const auto& f : *list) m[f.name] = f.generation;
    return m;
  };
  EXPECT_EQ(listed(), (Listing{{"a", a1}}));
  for (int round = 0; round < 5; ++round) {
    uint64_t a = 0, b = 0;
    ASSERT_TRUE(WriteForest(**writer, "a", 4096, 3, &a).ok());
    ASSERT_TRUE(WriteForest(**writer, "b", 4096, 2, &b).ok());
    ASSERT_TRUE((*reader)->Refresh().ok());
    EXPECT_EQ(listed(), (Listing{{"a", a}, {"b", b}})) << round;
    EXPECT_EQ(listed(), (Listing{{"a", a}, {"b", b}})) << round;
    ASSERT_TRUE((*writer)->Delete("b").ok());
    ASSERT_TRUE((*reader)->Refresh().ok());
    EXPECT_EQ(listed(), (Listing{{"a", a}})) << round;
    ASSERT_TRUE((*reader)->Refresh().ok());  // nothing new
    EXPECT_EQ(listed(), (Listing{{"a", a}})) << round;
  }
}

// A Refresh with nothing new skips RocksDB's catch-up (a fingerprint of the
// primary's files): every forest published right before a Refresh, in quick
// succession by one writer, is seen after it, and Refreshes with nothing new
// change nothing. (New names: a generation replaced and collected by the
// same long-lived writer is another matter, in the closing note of issue 34.)
// Whether the reader learns of the writer's writes from a watch of the store
// directory or by stat'ing its files (where inotify cannot see every change).
class RocksDbReaderNotices : public ::testing::TestWithParam<bool> {};

TEST_P(RocksDbReaderNotices, SecondaryReaderSeesEveryQuickPublishAfterRefresh) {
  const auto tmp = TempDir::Create("pacset-store").value();
  const std::string uri = "rocksdb:" + tmp->path() + "/store";
  auto writer = OpenBlockStore(uri, Opts(false));
  ASSERT_TRUE(writer.ok()) << writer.status().ToString();
  uint64_t gen = 0;
  ASSERT_TRUE(WriteForest(**writer, "m", 4096, 3, &gen).ok());
  store_internal::RocksDbTuning tuning;
  tuning.watch_writer_directory = GetParam();
  auto reader = store_internal::OpenRocksDbStore(tmp->path() + "/store", Opts(true), tuning);
  ASSERT_TRUE(reader.ok()) << reader.status().ToString();
  for (int round = 0; round < 30; ++round) {
    const std::string name = "m" + std::to_string(round);
    SCOPED_TRACE(name);
    ASSERT_TRUE(WriteForest(**writer, name, 4096, 3, &gen).ok());
    EXPECT_EQ((*reader)->Lookup(name).status().code(), StatusCode::kNotFound) << "not yet";
    ASSERT_TRUE((*reader)->Refresh().ok());
    auto info = (*reader)->Lookup(name);
    ASSERT_TRUE(info.ok()) << info.status().ToString();
    EXPECT_EQ(info->generation, gen);
    ASSERT_TRUE((*reader)->Refresh().ok());  // nothing new
    ASSERT_TRUE((*reader)->Lookup(name).ok());
    std::string b;
    ASSERT_TRUE((*reader)->Get(*info, 2, &b).ok());
    EXPECT_EQ(b, MakeBlock(4096, 2, gen));
  }
  auto all = (*reader)->List();
  ASSERT_TRUE(all.ok());
  EXPECT_EQ(all->size(), 31u);
  // A deletion whose generation the reader pins writes only to the WAL (no
  // table file comes or goes): still seen after a Refresh.
  ASSERT_TRUE((*reader)->Pin("m29", gen).ok());
  ASSERT_TRUE((*reader)->Refresh().ok());
  ASSERT_TRUE((*writer)->Delete("m29").ok());
  ASSERT_TRUE((*reader)->Refresh().ok());
  EXPECT_EQ((*reader)->Lookup("m29").status().code(), StatusCode::kNotFound);
  ASSERT_TRUE((*reader)->Unpin("m29", gen).ok());
}

INSTANTIATE_TEST_SUITE_P(WatchOrStat, RocksDbReaderNotices, ::testing::Bool(),
                         [](const ::testing::TestParamInfo<bool>& p) {
                           return p.param ? "Watch" : "Stat";
                         });

// One long-lived writer replaces a generation again and again, collecting
// the old one each time (its tables flushed, deleted and compacted away), or
// deletes the forest: a reader sees each change after one Refresh. Before
// catalog records bypassed the WAL, the reader kept the first generation it
// had replayed from the WAL in its memtable and never saw the next
// (rocksdb#14444; RocksDbStore::WriteCatalog).
TEST(RocksDbStore, SecondaryReaderSeesAGenerationReplacedAndCollectedByALongLivedWriter) {
  const auto tmp = TempDir::Create("pacset-store").value();
  const std::string uri = "rocksdb:" + tmp->path() + "/store";
  auto writer = OpenBlockStore(uri, Opts(false));
  ASSERT_TRUE(writer.ok()) << writer.status().ToString();
  uint64_t gen = 0;
  ASSERT_TRUE(WriteForest(**writer, "model", 4096, 3, &gen).ok());
  auto reader = OpenBlockStore(uri, Opts(true));
  ASSERT_TRUE(reader.ok()) << reader.status().ToString();
  ASSERT_EQ((*reader)->Lookup("model")->generation, gen);
  for (int round = 0; round < 12; ++round) {
    SCOPED_TRACE("round " + std::to_string(round));
    if (round % 4 == 3) {
      ASSERT_TRUE((*writer)->Delete("model").ok());
      ASSERT_TRUE((*reader)->Refresh().ok());
      EXPECT_EQ((*reader)->Lookup("model").status().code(), StatusCode::kNotFound);
      continue;
    }
    ASSERT_TRUE(WriteForest(**writer, "model", 4096, 3, &gen).ok());
    ASSERT_TRUE((*reader)->Refresh().ok());
    auto info = (*reader)->Lookup("model");
    ASSERT_TRUE(info.ok()) << info.status().ToString();
    EXPECT_EQ(info->generation, gen);
    std::string b;
    ASSERT_TRUE((*reader)->Get(*info, 2, &b).ok());
    EXPECT_EQ(b, MakeBlock(4096, 2, gen));
  }
}

TEST(RocksDbStore, SecondaryReaderPinKeepsItsGenerationFromTheWritersCollection) {
  const auto tmp = TempDir::Create("pacset-store").value();
  const std::string uri = "rocksdb:" + tmp->path() + "/store";
  auto writer = OpenBlockStore(uri, Opts(false));
  ASSERT_TRUE(writer.ok());
  uint64_t g1 = 0;
  ASSERT_TRUE(WriteForest(**writer, "model", 4096, 5, &g1).ok());
  auto reader = OpenBlockStore(uri, Opts(true));
  ASSERT_TRUE(reader.ok());
  auto info = (*reader)->Lookup("model");
  ASSERT_TRUE(info.ok());
  ASSERT_TRUE((*reader)->Pin("model", g1).ok());
  ASSERT_TRUE(WriteForest(**writer, "model", 4096, 5).ok());  // publishes and collects
  ASSERT_TRUE((*reader)->Refresh().ok());
  std::string b;
  for (uint64_t i = 0; i < 5; ++i) {
    ASSERT_TRUE((*reader)->Get(*info, i, &b).ok()) << i;
    EXPECT_EQ(b, MakeBlock(4096, i, g1));
  }
  ASSERT_TRUE((*reader)->Unpin("model", g1).ok());
  auto n = (*writer)->CollectGarbage();
  ASSERT_TRUE(n.ok());
  EXPECT_EQ(*n, 1u);
}

TEST(RocksDbStore, ASecondWriterInTheSameProcessWaitsThenFailsWithStoreIsBusy) {
  const auto tmp = TempDir::Create("pacset-store").value();
  const std::string uri = "rocksdb:" + tmp->path() + "/store";
  auto first = OpenBlockStore(uri, Opts(false));
  ASSERT_TRUE(first.ok());
  const auto t0 = std::chrono::steady_clock::now();
  Status s = OpenBlockStore(uri, Opts(false)).status();
  const auto waited = std::chrono::steady_clock::now() - t0;
  EXPECT_EQ(s.code(), StatusCode::kUnavailable) << s.ToString();
  EXPECT_NE(s.message().find("is busy"), std::string::npos) << s.ToString();
  EXPECT_GE(waited, std::chrono::milliseconds(300));
  EXPECT_LT(waited, std::chrono::seconds(5));
  // Readers are never blocked by the writer.
  EXPECT_TRUE(OpenBlockStore(uri, Opts(true)).ok());
}

TEST(RocksDbStore, AWriterInAnotherProcessMakesThisOneBusyUntilItExits) {
  const auto tmp = TempDir::Create("pacset-store").value();
  const std::string uri = "rocksdb:" + tmp->path() + "/store";
  ASSERT_TRUE(OpenBlockStore(uri, Opts(false)).ok());  // create it
  store_test::ChildProcess child;
  ASSERT_TRUE(child.Spawn({PACSET_STORE_CHILD, "hold", uri}));
  ASSERT_EQ(child.ReadLine(10000), "ready");
  Status s = OpenBlockStore(uri, Opts(false)).status();
  EXPECT_EQ(s.code(), StatusCode::kUnavailable) << s.ToString();
  EXPECT_NE(s.message().find("is busy"), std::string::npos) << s.ToString();
  child.Kill();
  EXPECT_TRUE(OpenBlockStore(uri, Opts(false)).ok());
}

TEST(RocksDbStore, SecondaryInstanceDirectoryIsRemovedWhenTheReaderCloses) {
  const auto tmp = TempDir::Create("pacset-store").value();
  const std::string path = tmp->path() + "/store";
  ASSERT_TRUE(OpenBlockStore("rocksdb:" + path, Opts(false)).ok());
  {
    auto reader = OpenBlockStore("rocksdb:" + path, Opts(true));
    ASSERT_TRUE(reader.ok());
    auto names = ListDir(path + "/secondary");
    ASSERT_TRUE(names.ok());
    EXPECT_EQ(names->size(), 1u);
  }
  auto names = ListDir(path + "/secondary");
  ASSERT_TRUE(names.ok());
  EXPECT_TRUE(names->empty());
}

TEST(RocksDbStore, AReaderWritesNoInfoLogButTheWriterDoes) {
  const auto tmp = TempDir::Create("pacset-store").value();
  const std::string path = tmp->path() + "/store";
  auto writer = OpenBlockStore("rocksdb:" + path, Opts(false));
  ASSERT_TRUE(writer.ok());
  auto reader = OpenBlockStore("rocksdb:" + path, Opts(true));
  ASSERT_TRUE(reader.ok());
  ASSERT_TRUE(WriteForest(**writer, "f", 4096, 8).ok());
  ASSERT_TRUE((*reader)->Refresh().ok());
  EXPECT_EQ((*reader)->List().value().size(), 1u);
  auto secondaries = ListDir(path + "/secondary");
  ASSERT_TRUE(secondaries.ok());
  ASSERT_EQ(secondaries->size(), 1u);
  auto files = ListDir(path + "/secondary/" + secondaries->front());
  ASSERT_TRUE(files.ok());
  EXPECT_EQ(*files, std::vector<std::string>{"owner.lock"});
  EXPECT_TRUE(PathExists(path + "/LOG"));
}

TEST(RocksDbStore, GarbageCollectionReclaimsTheSpaceOfLargeGenerations) {
  const auto tmp = TempDir::Create("pacset-store").value();
  const std::string uri = "rocksdb:" + tmp->path() + "/store";
  auto store = OpenBlockStore(uri, Opts(false));
  ASSERT_TRUE(store.ok());
  // 3 x 16 MiB generations; only the last one's bytes remain.
  for (int i = 0; i < 3; ++i) ASSERT_TRUE(WriteForest(**store, "big", 65536, 256).ok());
  store->reset();
  uint64_t sst_bytes = 0;
  auto files = ListDir(tmp->path() + "/store");
  ASSERT_TRUE(files.ok());
  for (const auto& f : *files) {
    if (f.size() > 4 && f.substr(f.size() - 4) == ".sst") {
      struct stat st;
      ASSERT_EQ(::stat((tmp->path() + "/store/" + f).c_str(), &st), 0);
      sst_bytes += st.st_size;
    }
  }
  EXPECT_GE(sst_bytes, 16u << 20);
  EXPECT_LT(sst_bytes, 24u << 20) << "old generations were not reclaimed";
}

// The read system calls this process has made (/proc/self/io's syscr): an
// io_uring's reads are not among them.
uint64_t ReadCalls() {
  std::ifstream io("/proc/self/io");
  std::string key;
  uint64_t value = 0;
  while (io >> key >> value)
    if (key == "syscr:") return value;
  return 0;
}

// Debian's RocksDB answers a MultiGet's batch of table blocks with one pread
// after another; the store's file system reads the batch through an
// io_uring. A fresh reader (none of the blocks in any cache of the process)
// gets 256 blocks in far fewer read calls than blocks, each block its own
// bytes.
// A store in a temporary directory holding "model" (`blocks` blocks of
// 4 KiB, generation `gen`), and a reader of it that has looked it up.
struct ReaderOfModel {
  std::unique_ptr<TempDir> tmp;
  std::unique_ptr<BlockStore> reader;
  ForestInfo info;
  uint64_t gen = 0;
};
void OpenReaderOfModel(uint64_t blocks, ReaderOfModel* m) {
  m->tmp = TempDir::Create("pacset-store").value();
  const std::string uri = "rocksdb:" + m->tmp->path() + "/store";
  {
    auto writer = OpenBlockStore(uri, Opts(false));
    ASSERT_TRUE(writer.ok()) << writer.status().ToString();
    ASSERT_TRUE(WriteForest(**writer, "model", 4096, blocks, &m->gen).ok());
  }
  auto reader = OpenBlockStore(uri, Opts(true));
  ASSERT_TRUE(reader.ok()) << reader.status().ToString();
  m->reader = std::move(*reader);
  auto info = m->reader->Lookup("model");
  ASSERT_TRUE(info.ok()) << info.status().ToString();
  m->info = *info;
}

TEST(RocksDbStore, AMultiGetReadsItsBlocksWithoutAReadCallPerBlock) {
  if (!store_internal::UringMultiReadUsable())
    GTEST_SKIP() << "no io_uring here, or a ThreadSanitizer build";
  constexpr uint64_t kBlocks = 256;
  ReaderOfModel m;
  ASSERT_NO_FATAL_FAILURE(OpenReaderOfModel(kBlocks, &m));
  std::vector<uint64_t> blocks(kBlocks);
  std::iota(blocks.begin(), blocks.end(), 0);
  std::vector<std::string> out;
  const uint64_t before = ReadCalls();
  ASSERT_TRUE(m.reader->MultiGet(m.info, blocks, &out).ok());
  const uint64_t calls = ReadCalls() - before;
  ASSERT_EQ(out.size(), kBlocks);
  for (uint64_t i = 0; i < kBlocks; ++i) ASSERT_EQ(out[i], MakeBlock(4096, i, m.gen)) << i;
  EXPECT_LT(calls, kBlocks / 4) << calls << " read calls for " << kBlocks << " blocks";
}

// RocksDB has a MultiGet's keys in flight 32 at a time, so the daemon's
// gathers of 32 blocks are one store call on the thread that asked, and only
// bigger batches are split over threads (in parts of at least 32 keys).
TEST(RocksDbStore, ParallelReadsSplitOnlyBatchesOfMoreThan32BlocksOverThreads) {
  if (!store_internal::UringMultiReadUsable())
    GTEST_SKIP() << "no io_uring here, or a ThreadSanitizer build: RocksDB reads block by block";
  constexpr uint64_t kBlocks = 512;
  ReaderOfModel m;
  ASSERT_NO_FATAL_FAILURE(OpenReaderOfModel(kBlocks, &m));
  FaultInjectionStore counting(m.reader.get());
  ParallelReads reads(&counting);
  // Scattered blocks, in no order: batch sizes -> store calls.
  std::vector<uint64_t> all(kBlocks);
  std::iota(all.begin(), all.end(), 0);
  std::shuffle(all.begin(), all.end(), std::mt19937(7));
  for (auto [n, calls] : {std::pair<size_t, uint64_t>{1, 1},
                          {32, 1},
                          {33, 2},
                          {64, 2},
                          {100, 4},
                          {256, 8},
                          {512, 8}}) {
    std::vector<uint64_t> blocks(all.begin(), all.begin() + n);
    std::vector<std::string> out;
    const uint64_t before = counting.read_calls();
    ASSERT_TRUE(reads.MultiGet(m.info, blocks, &out).ok()) << n;
    EXPECT_EQ(counting.read_calls() - before, calls) << n << " blocks";
    ASSERT_EQ(out.size(), n);
    for (size_t i = 0; i < n; ++i) ASSERT_EQ(out[i], MakeBlock(4096, blocks[i], m.gen)) << i;
  }
}

// The table files of a store, out of the page cache; false (the caller
// skips) where pages stay resident (tmpfs) or O_DIRECT is refused.
bool EvictTables(const std::string& dir, std::vector<std::string>* tables) {
  tables->clear();
  auto names = ListDir(dir);
  if (!names.ok()) return false;
  for (const std::string& n : *names)
    if (n.size() > 4 && n.compare(n.size() - 4, 4, ".sst") == 0) tables->push_back(dir + "/" + n);
  for (const std::string& t : *tables)
    if (!store_test::DirectReadsWork(t) || !store_test::EvictFromPageCache(t)) return false;
  return !tables->empty();
}

size_t ResidentTablePages(const std::vector<std::string>& tables) {
  size_t n = 0;
  for (const std::string& t : tables) n += store_test::CountResident(store_test::ResidentPages(t));
  return n;
}

// A reader that asks for direct reads (the daemon) reads a MultiGet's
// scattered blocks past the page cache, still through one io_uring; one that
// does not reads them into the page cache.
TEST(RocksDbStore, AReaderWithDirectReadsReadsScatteredBlocksPastThePageCache) {
  if (!store_internal::UringMultiReadUsable())
    GTEST_SKIP() << "no io_uring here, or a ThreadSanitizer build";
  const auto tmp = TempDir::Create("pacset-store").value();
  const std::string dir = tmp->path() + "/store";
  constexpr uint64_t kBlocks = 256;
  uint64_t gen = 0;
  {
    auto writer = OpenBlockStore("rocksdb:" + dir, Opts(false));
    ASSERT_TRUE(writer.ok()) << writer.status().ToString();
    ASSERT_TRUE(WriteForest(**writer, "model", 4096, kBlocks, &gen).ok());
  }
  std::vector<uint64_t> want;  // scattered: every 7th block, from the end
  for (uint64_t b = kBlocks; b-- > 0;)
    if (b % 7 == 3) want.push_back(b);
  for (bool direct : {true, false}) {
    SCOPED_TRACE(direct ? "direct reads" : "through the page cache");
    std::vector<std::string> tables;
    if (!EvictTables(dir, &tables)) GTEST_SKIP() << "no O_DIRECT, or pages stay resident here";
    StoreOptions o = Opts(true);
    o.rocksdb_block_cache_bytes = 0;
    o.direct_reads = direct;
    auto reader = OpenBlockStore("rocksdb:" + dir, o);
    ASSERT_TRUE(reader.ok()) << reader.status().ToString();
    auto info = (*reader)->Lookup("model");
    ASSERT_TRUE(info.ok()) << info.status().ToString();
    // Opening the tables read their footers, indexes and filters: not counted.
    const size_t opened = ResidentTablePages(tables);
    std::vector<std::string> out;
    const uint64_t before = ReadCalls();
    ASSERT_TRUE((*reader)->MultiGet(*info, want, &out).ok());
    const uint64_t calls = ReadCalls() - before;
    ASSERT_EQ(out.size(), want.size());
    for (size_t i = 0; i < want.size(); ++i)
      ASSERT_EQ(out[i], MakeBlock(4096, want[i], gen)) << want[i];
    EXPECT_LT(calls, want.size() / 4) << calls << " read calls for " << want.size();
    const size_t added = ResidentTablePages(tables) - opened;
    if (direct) {
      EXPECT_EQ(added, 0u);
    } else {
      EXPECT_GE(added, want.size());
    }
  }
}

// The file system's MultiRead on its own, on a file of random bytes: every
// request gets the bytes at its offset (the file's content is the oracle),
// in any order, beyond one ring full (64); one running past the end is short.
TEST(UringMultiReadFileSystem, EveryRequestGetsTheBytesAtItsOffset) {
  if (!UringAvailable()) GTEST_SKIP() << "the kernel refuses io_uring here";
  const auto tmp = TempDir::Create("pacset-store").value();
  const std::string path = tmp->path() + "/table";
  constexpr size_t kLen = 4101, kSize = 200 * 4096;
  std::string bytes(kSize, '\0');
  std::mt19937_64 rng(11);
  for (char& c : bytes) c = static_cast<char>(rng());
  std::ofstream(path, std::ios::binary) << bytes;
  auto fs = store_internal::NewUringMultiReadFileSystem(rocksdb::FileSystem::Default());
  std::unique_ptr<rocksdb::FSRandomAccessFile> file;
  ASSERT_TRUE(fs->NewRandomAccessFile(path, rocksdb::FileOptions(), &file, nullptr).ok());
  std::vector<rocksdb::FSReadRequest> reqs(100);
  std::vector<std::string> scratch(reqs.size(), std::string(kLen, 'x'));
  for (size_t i = 0; i < reqs.size(); ++i) {
    reqs[i].offset = (i * 7919) % (kSize - kLen);
    reqs[i].len = kLen;
    reqs[i].scratch = scratch[i].data();
  }
  reqs.back().offset = kSize - 100;  // past the end: 100 bytes
  ASSERT_TRUE(file->MultiRead(reqs.data(), reqs.size(), rocksdb::IOOptions(), nullptr).ok());
  for (size_t i = 0; i < reqs.size(); ++i) {
    ASSERT_TRUE(reqs[i].status.ok()) << i << ": " << reqs[i].status.ToString();
    const size_t want = std::min(kLen, kSize - reqs[i].offset);
    ASSERT_EQ(reqs[i].result.ToString(), bytes.substr(reqs[i].offset, want)) << i;
  }
}

// With direct reads, a batch of scattered requests at unaligned offsets and
// of unaligned lengths (one running past the unaligned end of the file) is
// read past the page cache, and every request gets the bytes at its offset.
TEST(UringMultiReadFileSystem, WithDirectReadsScatteredRequestsGetTheBytesAtTheirOffsets) {
  if (!UringAvailable()) GTEST_SKIP() << "the kernel refuses io_uring here";
  const auto tmp = TempDir::Create("pacset-store").value();
  const std::string path = tmp->path() + "/table";
  constexpr size_t kSize = 200 * 4096 + 1234;
  std::string bytes(kSize, '\0');
  std::mt19937_64 rng(12);
  for (char& c : bytes) c = static_cast<char>(rng());
  std::ofstream(path, std::ios::binary) << bytes;
  if (!store_test::DirectReadsWork(path) || !store_test::EvictFromPageCache(path))
    GTEST_SKIP() << "no O_DIRECT, or pages stay resident here";
  auto fs = store_internal::NewUringMultiReadFileSystem(rocksdb::FileSystem::Default(),
                                                        /*direct_reads=*/true);
  std::unique_ptr<rocksdb::FSRandomAccessFile> file;
  ASSERT_TRUE(fs->NewRandomAccessFile(path, rocksdb::FileOptions(), &file, nullptr).ok());
  // Request i at page 5 * i plus an odd offset, 1 to 9,000 bytes: no two
  // aligned spans touch. Then the last one past the end.
  std::vector<rocksdb::FSReadRequest> reqs(40);
  std::vector<std::string> scratch(reqs.size() + 1, std::string(9000, 'x'));
  for (size_t i = 0; i < reqs.size(); ++i) {
    reqs[i].offset = i * 5 * 4096 + (i * 613) % 4096;
    reqs[i].len = 1 + (i * 2311) % 9000;
    reqs[i].scratch = scratch[i].data();
  }
  reqs.back().offset = kSize - 1000;  // past the end: 1000 bytes
  reqs.back().len = 9000;
  std::shuffle(reqs.begin(), reqs.end(), rng);
  ASSERT_TRUE(file->MultiRead(reqs.data(), reqs.size(), rocksdb::IOOptions(), nullptr).ok());
  for (size_t i = 0; i < reqs.size(); ++i) {
    ASSERT_TRUE(reqs[i].status.ok()) << i << ": " << reqs[i].status.ToString();
    const size_t want = std::min<size_t>(reqs[i].len, kSize - reqs[i].offset);
    ASSERT_EQ(reqs[i].result.ToString(), bytes.substr(reqs[i].offset, want))
        << "offset " << reqs[i].offset << " length " << reqs[i].len;
  }
  EXPECT_EQ(store_test::CountResident(store_test::ResidentPages(path)), 0u);
}

// Neighbouring RocksDB blocks of 4 KiB values are a little over 4 KiB, so
// they touch and their aligned spans share pages: a batch with runs of
// touching and overlapping requests (and some alone) gets each request the
// bytes at its offset, with direct reads or without; with them it is read
// past the page cache, but for a batch that is one run (a sequential
// reader), which goes through the page cache.
TEST(UringMultiReadFileSystem,
     RunsOfTouchingRequestsGetTheirBytesAndWithDirectReadsSkipThePageCache) {
  if (!UringAvailable()) GTEST_SKIP() << "the kernel refuses io_uring here";
  const auto tmp = TempDir::Create("pacset-store").value();
  const std::string path = tmp->path() + "/table";
  constexpr size_t kLen = 4101, kSize = 300 * 4096 + 77;
  std::string bytes(kSize, '\0');
  std::mt19937_64 rng(13);
  for (char& c : bytes) c = static_cast<char>(rng());
  std::ofstream(path, std::ios::binary) << bytes;
  if (!store_test::DirectReadsWork(path) || !store_test::EvictFromPageCache(path))
    GTEST_SKIP() << "no O_DIRECT, or pages stay resident here";
  std::unique_ptr<rocksdb::FSRandomAccessFile> file;
  auto read = [&](std::vector<uint64_t> offsets) {
    std::shuffle(offsets.begin(), offsets.end(), rng);
    std::vector<rocksdb::FSReadRequest> reqs(offsets.size());
    std::vector<std::string> scratch(reqs.size(), std::string(kLen, 'x'));
    for (size_t i = 0; i < reqs.size(); ++i) {
      reqs[i].offset = offsets[i];
      reqs[i].len = kLen;
      reqs[i].scratch = scratch[i].data();
    }
    ASSERT_TRUE(file->MultiRead(reqs.data(), reqs.size(), rocksdb::IOOptions(), nullptr).ok());
    for (size_t i = 0; i < reqs.size(); ++i) {
      ASSERT_TRUE(reqs[i].status.ok()) << i << ": " << reqs[i].status.ToString();
      const size_t want = std::min<size_t>(kLen, kSize - reqs[i].offset);
      ASSERT_EQ(reqs[i].result.ToString(), bytes.substr(reqs[i].offset, want))
          << "offset " << reqs[i].offset;
    }
  };
  std::vector<uint64_t> offsets;
  for (uint64_t k = 0; k < 6; ++k) offsets.push_back(1000 + k * kLen);        // back to back
  for (uint64_t k = 0; k < 4; ++k) offsets.push_back(100 * 4096 + k * 2000);  // overlapping
  offsets.push_back(150 * 4096 + 5);                                          // alone
  for (uint64_t k = 0; k < 3; ++k) offsets.push_back(200 * 4096 + 9 + k * kLen);
  offsets.push_back(kSize - 50);  // past the end: 50 bytes
  auto buffered = store_internal::NewUringMultiReadFileSystem(rocksdb::FileSystem::Default());
  ASSERT_TRUE(buffered->NewRandomAccessFile(path, rocksdb::FileOptions(), &file, nullptr).ok());
  read(offsets);
  ASSERT_TRUE(store_test::EvictFromPageCache(path));
  auto direct = store_internal::NewUringMultiReadFileSystem(rocksdb::FileSystem::Default(),
                                                            /*direct_reads=*/true);
  ASSERT_TRUE(direct->NewRandomAccessFile(path, rocksdb::FileOptions(), &file, nullptr).ok());
  read(offsets);
  EXPECT_EQ(store_test::CountResident(store_test::ResidentPages(path)), 0u);
  // One run of back-to-back requests: through the page cache.
  std::vector<uint64_t> sequential;
  for (uint64_t k = 0; k < 8; ++k) sequential.push_back(250 * 4096 + k * kLen);
  read(sequential);
  EXPECT_GT(store_test::CountResident(store_test::ResidentPages(path)), 0u);
}

}  // namespace
}  // namespace pacset
