// rocksdb: specifics: one writer process (LOCK) and secondary readers.
#include <gtest/gtest.h>
#include <sys/stat.h>

#include <chrono>

#include "store/block_store.h"
#include "testkit/store_test_util.h"

namespace pacset {
namespace {

using store_test::MakeBlock;
using store_test::TempDir;
using store_test::WriteForest;

StoreOptions Opts(bool read_only) {
  StoreOptions o;
  o.read_only = read_only;
  o.busy_timeout_ms = 300;
  o.rocksdb_block_cache_bytes = 8u << 20;
  return o;
}

TEST(RocksDbStore, SecondaryReaderSeesAGenerationPublishedByTheWriterAfterRefresh) {
  TempDir tmp;
  const std::string uri = "rocksdb:" + tmp.path() + "/store";
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

TEST(RocksDbStore, SecondaryReaderPinKeepsItsGenerationFromTheWritersCollection) {
  TempDir tmp;
  const std::string uri = "rocksdb:" + tmp.path() + "/store";
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
  TempDir tmp;
  const std::string uri = "rocksdb:" + tmp.path() + "/store";
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
  TempDir tmp;
  const std::string uri = "rocksdb:" + tmp.path() + "/store";
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
  TempDir tmp;
  const std::string path = tmp.path() + "/store";
  ASSERT_TRUE(OpenBlockStore("rocksdb:" + path, Opts(false)).ok());
  {
    auto reader = OpenBlockStore("rocksdb:" + path, Opts(true));
    ASSERT_TRUE(reader.ok());
    auto names = store_internal::ListDir(path + "/secondary");
    ASSERT_TRUE(names.ok());
    EXPECT_EQ(names->size(), 1u);
  }
  auto names = store_internal::ListDir(path + "/secondary");
  ASSERT_TRUE(names.ok());
  EXPECT_TRUE(names->empty());
}

TEST(RocksDbStore, GarbageCollectionReclaimsTheSpaceOfLargeGenerations) {
  TempDir tmp;
  const std::string uri = "rocksdb:" + tmp.path() + "/store";
  auto store = OpenBlockStore(uri, Opts(false));
  ASSERT_TRUE(store.ok());
  // 3 x 16 MiB generations; only the last one's bytes remain.
  for (int i = 0; i < 3; ++i) ASSERT_TRUE(WriteForest(**store, "big", 65536, 256).ok());
  store->reset();
  uint64_t sst_bytes = 0;
  auto files = store_internal::ListDir(tmp.path() + "/store");
  ASSERT_TRUE(files.ok());
  for (const auto& f : *files) {
    if (f.size() > 4 && f.substr(f.size() - 4) == ".sst") {
      struct stat st;
      ASSERT_EQ(::stat((tmp.path() + "/store/" + f).c_str(), &st), 0);
      sst_bytes += st.st_size;
    }
  }
  EXPECT_GE(sst_bytes, 16u << 20);
  EXPECT_LT(sst_bytes, 24u << 20) << "old generations were not reclaimed";
}

}  // namespace
}  // namespace pacset
