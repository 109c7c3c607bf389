// One suite, every backend: the behaviour store/block_store.h promises,
// checked against a real RocksDB, a real directory, a real redis-server and a
// real Redis Cluster (three masters, a replica each).
#include <gtest/gtest.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <random>
#include <thread>

#include "store/block_store.h"
#include "store/publish.h"
#include "testkit/child_process.h"
#include "testkit/store_env.h"
#include "testkit/test_blocks.h"

namespace pacset {
namespace {

using store_test::MakeBlock;
using store_test::WriteForest;

#define ASSERT_OK(expr)                                     \
  do {                                                      \
    const ::pacset::Status s_ = (expr);                     \
    ASSERT_TRUE(s_.ok()) << #expr << ": " << s_.ToString(); \
  } while (0)

class BlockStoreConformance : public ::testing::TestWithParam<std::string> {
 protected:
  void SetUp() override {
    std::string error;
    env_ = store_test::MakeEnv(GetParam(), &error);
    ASSERT_TRUE(error.empty()) << error;
    Open();
  }
  void Open() {
    auto s = OpenBlockStore(env_->Uri(), env_->Options());
    ASSERT_TRUE(s.ok()) << s.status().ToString();
    store_ = std::move(*s);
  }
  void Close() { store_.reset(); }

  ForestInfo Publish(const std::string& name, uint32_t bs, uint64_t count) {
    uint64_t gen = 0;
    Status s = WriteForest(*store_, name, bs, count, &gen);
    EXPECT_TRUE(s.ok()) << s.ToString();
    auto info = store_->Lookup(name);
    EXPECT_TRUE(info.ok()) << info.status().ToString();
    EXPECT_EQ(info->generation, gen);
    return info.ok() ? *info : ForestInfo{};
  }

  // Every block of `f` reads back as written (payload seed = generation).
  void ExpectIntact(const ForestInfo& f) {
    std::string b;
    for (uint64_t i = 0; i < f.block_count; ++i) {
      Status s = store_->Get(f, i, &b);
      ASSERT_TRUE(s.ok()) << "block " << i << ": " << s.ToString();
      ASSERT_EQ(b, MakeBlock(f.block_size, i, f.generation)) << "block " << i;
    }
  }

  uint64_t Pending() {
    auto st = store_->Stat();
    EXPECT_TRUE(st.ok()) << st.status().ToString();
    return st.ok() ? st->pending : 0;
  }

  std::unique_ptr<store_test::StoreEnv> env_;
  std::unique_ptr<BlockStore> store_;
};

void RoundTrip(BlockStore& store, uint32_t bs) {
  uint64_t gen = 0;
  Status s = WriteForest(store, "forest-a", bs, 12, &gen);
  ASSERT_TRUE(s.ok()) << s.ToString();
  auto info = store.Lookup("forest-a");
  ASSERT_TRUE(info.ok()) << info.status().ToString();
  EXPECT_EQ(info->name, "forest-a");
  EXPECT_EQ(info->generation, gen);
  EXPECT_EQ(info->block_size, bs);
  EXPECT_EQ(info->block_count, 12u);
  EXPECT_EQ(info->size_bytes, 12ull * bs);
  EXPECT_EQ(info->source_file, "forest-a.pac");
  EXPECT_GT(info->created_unix_ns, 0);
  std::string b;
  for (uint64_t i = 0; i < 12; ++i) {
    ASSERT_TRUE(store.Get(*info, i, &b).ok());
    EXPECT_EQ(b, MakeBlock(bs, i, gen));
  }
  std::vector<uint64_t> want = {11, 0, 5, 5, 3};
  std::vector<std::string> got;
  s = store.MultiGet(*info, want, &got);
  ASSERT_TRUE(s.ok()) << s.ToString();
  ASSERT_EQ(got.size(), want.size());
  for (size_t i = 0; i < want.size(); ++i) EXPECT_EQ(got[i], MakeBlock(bs, want[i], gen));
  // Runs of adjacent blocks among single ones, as a wave of walks asks for
  // them (dir: each run one read, all of them in flight at once).
  want = {2, 3, 4, 8, 10, 11, 6, 0, 1};
  s = store.MultiGet(*info, want, &got);
  ASSERT_TRUE(s.ok()) << s.ToString();
  ASSERT_EQ(got.size(), want.size());
  for (size_t i = 0; i < want.size(); ++i) EXPECT_EQ(got[i], MakeBlock(bs, want[i], gen));
}

TEST_P(BlockStoreConformance, PutGetMultiGetRoundTrip4KiBBlocks) { RoundTrip(*store_, 4096); }

TEST_P(BlockStoreConformance, PutGetMultiGetRoundTrip64KiBBlocks) { RoundTrip(*store_, 65536); }

TEST_P(BlockStoreConformance, BlocksMayBePutInAnyOrder) {
  auto w = store_->BeginGeneration("shuffled", 4096, 20);
  ASSERT_TRUE(w.ok()) << w.status().ToString();
  std::vector<uint64_t> order(20);
  for (uint64_t i = 0; i < 20; ++i) order[i] = i;
  std::shuffle(order.begin(), order.end(), std::mt19937(7));
  for (uint64_t i : order) ASSERT_OK((*w)->Put(i, MakeBlock(4096, i, (*w)->generation()).data()));
  ASSERT_OK((*w)->Publish(ForestInfo{}));
  auto info = store_->Lookup("shuffled");
  ASSERT_TRUE(info.ok());
  ExpectIntact(*info);
}

TEST_P(BlockStoreConformance, NothingIsVisibleBeforePublish) {
  auto w = store_->BeginGeneration("unseen", 4096, 4);
  ASSERT_TRUE(w.ok()) << w.status().ToString();
  for (uint64_t i = 0; i < 4; ++i) ASSERT_OK((*w)->Put(i, MakeBlock(4096, i, 1).data()));
  EXPECT_EQ(store_->Lookup("unseen").status().code(), StatusCode::kNotFound);
  auto list = store_->List();
  ASSERT_TRUE(list.ok());
  EXPECT_TRUE(list->empty());
  ASSERT_OK((*w)->Publish(ForestInfo{}));
  EXPECT_TRUE(store_->Lookup("unseen").ok());
}

TEST_P(BlockStoreConformance, PublishSwitchesTheCurrentGenerationInOneStep) {
  const ForestInfo g1 = Publish("model", 4096, 8);
  auto w = store_->BeginGeneration("model", 4096, 5);
  ASSERT_TRUE(w.ok());
  EXPECT_GT((*w)->generation(), g1.generation);
  for (uint64_t i = 0; i < 5; ++i)
    ASSERT_OK((*w)->Put(i, MakeBlock(4096, i, (*w)->generation()).data()));
  // Until Publish returns, readers see the old generation, whole.
  auto before = store_->Lookup("model");
  ASSERT_TRUE(before.ok());
  EXPECT_EQ(before->generation, g1.generation);
  EXPECT_EQ(before->block_count, 8u);
  ASSERT_OK((*w)->Publish(ForestInfo{}));
  auto after = store_->Lookup("model");
  ASSERT_TRUE(after.ok());
  EXPECT_EQ(after->generation, (*w)->generation());
  EXPECT_EQ(after->block_count, 5u);
  ExpectIntact(*after);
}

TEST_P(BlockStoreConformance, PublishFailsUntilEveryBlockIsWritten) {
  auto w = store_->BeginGeneration("partial", 4096, 3);
  ASSERT_TRUE(w.ok());
  ASSERT_OK((*w)->Put(0, MakeBlock(4096, 0, 1).data()));
  ASSERT_OK((*w)->Put(2, MakeBlock(4096, 2, 1).data()));
  Status s = (*w)->Publish(ForestInfo{});
  EXPECT_EQ(s.code(), StatusCode::kInvalidArgument) << s.ToString();
  EXPECT_NE(s.message().find("2 of 3 blocks"), std::string::npos) << s.ToString();
  EXPECT_EQ(store_->Lookup("partial").status().code(), StatusCode::kNotFound);
}

TEST_P(BlockStoreConformance, PutRejectsOutOfRangeAndRepeatedBlocks) {
  auto w = store_->BeginGeneration("strict", 4096, 2);
  ASSERT_TRUE(w.ok());
  const std::string b = MakeBlock(4096, 0, 1);
  EXPECT_EQ((*w)->Put(2, b.data()).code(), StatusCode::kInvalidArgument);
  ASSERT_OK((*w)->Put(0, b.data()));
  EXPECT_EQ((*w)->Put(0, b.data()).code(), StatusCode::kInvalidArgument);
}

TEST_P(BlockStoreConformance, RejectedPutsNameTheBlockAndChangeNothing) {
  auto w = store_->BeginGeneration("strict", 4096, 3);
  ASSERT_TRUE(w.ok());
  const std::string context = ForestContext("strict", (*w)->generation());
  Status s = (*w)->Put(3, MakeBlock(4096, 3, 1).data());
  EXPECT_EQ(s.code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(s.message(), context + ": block 3 is beyond the block count 3");
  ASSERT_OK((*w)->Put(1, MakeBlock(4096, 1, 1).data()));
  s = (*w)->Put(1, MakeBlock(4096, 1, 2).data());
  EXPECT_EQ(s.code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(s.message(), context + ": block 1 written twice");
  // Neither refusal counted a block nor replaced one: the rest completes it.
  ASSERT_OK((*w)->Put(0, MakeBlock(4096, 0, 1).data()));
  s = (*w)->Publish(ForestInfo{});
  EXPECT_EQ(s.message(), context + ": only 2 of 3 blocks were written");
  ASSERT_OK((*w)->Put(2, MakeBlock(4096, 2, 1).data()));
  ASSERT_OK((*w)->Publish(ForestInfo{}));
  auto info = store_->Lookup("strict");
  ASSERT_TRUE(info.ok()) << info.status().ToString();
  std::string b;
  for (uint64_t i = 0; i < 3; ++i) {
    ASSERT_OK(store_->Get(*info, i, &b));
    EXPECT_EQ(b, MakeBlock(4096, i, 1)) << "block " << i;
  }
}

TEST_P(BlockStoreConformance, PutAndPublishAfterPublishAreRejected) {
  auto w = store_->BeginGeneration("done", 4096, 2);
  ASSERT_TRUE(w.ok());
  const uint64_t gen = (*w)->generation();
  for (uint64_t i = 0; i < 2; ++i) ASSERT_OK((*w)->Put(i, MakeBlock(4096, i, gen).data()));
  ASSERT_OK((*w)->Publish(ForestInfo{}));
  const std::string context = ForestContext("done", gen);
  Status s = (*w)->Put(0, MakeBlock(4096, 0, 7).data());
  EXPECT_EQ(s.code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(s.message(), context + ": already published");
  s = (*w)->Publish(ForestInfo{});
  EXPECT_EQ(s.code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(s.message(), context + ": already published");
  // The published generation is untouched and still current.
  auto info = store_->Lookup("done");
  ASSERT_TRUE(info.ok()) << info.status().ToString();
  EXPECT_EQ(info->generation, gen);
  ExpectIntact(*info);
}

TEST_P(BlockStoreConformance, PublishFillsInWhatTheWriterKnowsAndKeepsTheRest) {
  auto w = store_->BeginGeneration("filled", 8192, 3);
  ASSERT_TRUE(w.ok());
  const uint64_t gen = (*w)->generation();
  for (uint64_t i = 0; i < 3; ++i) ASSERT_OK((*w)->Put(i, MakeBlock(8192, i, gen).data()));
  ForestInfo given;  // what the writer knows, given wrong; the rest the caller's
  given.name = "other";
  given.generation = gen + 100;
  given.block_size = 4096;
  given.block_count = 7;
  given.size_bytes = 1;
  given.header_checksum = 0x1234;
  given.created_unix_ns = 42;
  given.source_file = "filled.json";
  given.source_format = "xgboost-json";
  given.source_library = "xgboost 1.7.4";
  ASSERT_OK((*w)->Publish(given));
  EXPECT_EQ(store_->Lookup("other").status().code(), StatusCode::kNotFound);
  auto info = store_->Lookup("filled");
  ASSERT_TRUE(info.ok()) << info.status().ToString();
  EXPECT_EQ(info->name, "filled");
  EXPECT_EQ(info->generation, gen);
  EXPECT_EQ(info->block_size, 8192u);
  EXPECT_EQ(info->block_count, 3u);
  EXPECT_EQ(info->size_bytes, 3u * 8192);
  EXPECT_EQ(info->header_checksum, 0x1234u);
  EXPECT_EQ(info->created_unix_ns, 42);  // set by the caller: kept
  EXPECT_EQ(info->source_file, "filled.json");
  EXPECT_EQ(info->source_format, "xgboost-json");
  EXPECT_EQ(info->source_library, "xgboost 1.7.4");
  ExpectIntact(*info);
}

TEST_P(BlockStoreConformance, BeginRejectsBadBlockSizesAndEmptyForests) {
  EXPECT_EQ(store_->BeginGeneration("x", 1000, 1).status().code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(store_->BeginGeneration("x", 128, 1).status().code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(store_->BeginGeneration("x", 2u << 20, 1).status().code(),
            StatusCode::kInvalidArgument);
  EXPECT_EQ(store_->BeginGeneration("x", 4096, 0).status().code(), StatusCode::kInvalidArgument);
}

TEST_P(BlockStoreConformance, ReadsBeyondTheLastBlockAreInvalidArgument) {
  const ForestInfo f = Publish("small", 4096, 2);
  std::string b;
  Status s = store_->Get(f, 2, &b);
  EXPECT_EQ(s.code(), StatusCode::kInvalidArgument) << s.ToString();
}

TEST_P(BlockStoreConformance, ReaderOfOldGenerationKeepsReadingItAfterPublish) {
  const ForestInfo g1 = Publish("model", 4096, 16);
  ASSERT_OK(store_->Pin("model", g1.generation));
  const ForestInfo g2 = Publish("model", 4096, 16);  // Publish collects garbage
  ASSERT_GT(g2.generation, g1.generation);
  ASSERT_TRUE(store_->CollectGarbage().ok());
  ExpectIntact(g1);
  ExpectIntact(g2);
  ASSERT_OK(store_->Unpin("model", g1.generation));
  auto n = store_->CollectGarbage();
  ASSERT_TRUE(n.ok()) << n.status().ToString();
  EXPECT_EQ(*n, 1u);
  std::string b;
  Status s = store_->Get(g1, 0, &b);
  EXPECT_EQ(s.code(), StatusCode::kCorruption) << s.ToString();
  EXPECT_NE(s.message().find("missing"), std::string::npos) << s.ToString();
  ExpectIntact(g2);
}

TEST_P(BlockStoreConformance, PinsAreCountedPerProcess) {
  const ForestInfo g1 = Publish("model", 4096, 4);
  ASSERT_OK(store_->Pin("model", g1.generation));
  ASSERT_OK(store_->Pin("model", g1.generation));
  Publish("model", 4096, 4);
  ASSERT_OK(store_->Unpin("model", g1.generation));
  ASSERT_TRUE(store_->CollectGarbage().ok());
  ExpectIntact(g1);  // still pinned once
  ASSERT_OK(store_->Unpin("model", g1.generation));
  EXPECT_EQ(store_->Unpin("model", g1.generation).code(), StatusCode::kInvalidArgument);
  auto n = store_->CollectGarbage();
  ASSERT_TRUE(n.ok());
  EXPECT_EQ(*n, 1u);
}

TEST_P(BlockStoreConformance, TwoStoresOfOneProcessPinTheSameGenerationIndependently) {
  const ForestInfo g1 = Publish("model", 4096, 4);
  StoreOptions o = env_->Options();
  o.read_only = !env_->ConcurrentWriterProcesses();  // rocksdb: a second writer would be busy
  auto other = OpenBlockStore(env_->Uri(), o);
  ASSERT_TRUE(other.ok()) << other.status().ToString();
  ASSERT_OK(store_->Pin("model", g1.generation));
  ASSERT_OK((*other)->Pin("model", g1.generation));
  Publish("model", 4096, 4);
  ASSERT_OK(store_->Unpin("model", g1.generation));
  ASSERT_TRUE(store_->CollectGarbage().ok());
  ExpectIntact(g1);  // the other store still pins it
  // Closing a store releases its pins at once (no lease to wait for).
  other->reset();
  auto n = store_->CollectGarbage();
  ASSERT_TRUE(n.ok()) << n.status().ToString();
  EXPECT_EQ(*n, 1u);
}

TEST_P(BlockStoreConformance, PinOfACollectedGenerationIsNotFound) {
  const ForestInfo g1 = Publish("model", 4096, 4);
  Publish("model", 4096, 4);  // collects g1: nobody pinned it
  Status s = store_->Pin("model", g1.generation);
  EXPECT_EQ(s.code(), StatusCode::kNotFound) << s.ToString();
  // And the failed pin holds nothing.
  EXPECT_EQ(store_->Unpin("model", g1.generation).code(), StatusCode::kInvalidArgument);
}

TEST_P(BlockStoreConformance, OldUnpinnedGenerationsAreCollected) {
  Publish("model", 4096, 10);
  Publish("model", 4096, 10);
  const ForestInfo g3 = Publish("model", 4096, 10);
  Publish("other", 4096, 3);
  auto st = store_->Stat();
  ASSERT_TRUE(st.ok());
  EXPECT_EQ(st->forests, 2u);
  EXPECT_EQ(st->generations, 2u);
  EXPECT_EQ(st->blocks, 13u);
  EXPECT_EQ(st->bytes, 13u * 4096);
  EXPECT_EQ(st->pending, 0u);
  ExpectIntact(g3);
  Close();
  EXPECT_EQ(env_->RawBlockBytes(), 13u * 4096);
}

TEST_P(BlockStoreConformance, ListLookupAndDelete) {
  Publish("b-forest", 4096, 2);
  Publish("a-forest", 8192, 3);
  auto list = store_->List();
  ASSERT_TRUE(list.ok());
  ASSERT_EQ(list->size(), 2u);
  EXPECT_EQ((*list)[0].name, "a-forest");
  EXPECT_EQ((*list)[0].block_size, 8192u);
  EXPECT_EQ((*list)[1].name, "b-forest");

  ASSERT_OK(store_->Delete("a-forest"));
  Status s = store_->Lookup("a-forest").status();
  EXPECT_EQ(s.code(), StatusCode::kNotFound);
  EXPECT_NE(s.message().find("a-forest"), std::string::npos) << s.ToString();
  EXPECT_EQ(store_->Delete("a-forest").code(), StatusCode::kNotFound);
  list = store_->List();
  ASSERT_TRUE(list.ok());
  ASSERT_EQ(list->size(), 1u);
  EXPECT_EQ((*list)[0].name, "b-forest");
  auto st = store_->Stat();
  ASSERT_TRUE(st.ok());
  EXPECT_EQ(st->generations, 1u);  // Delete collected a-forest's only generation
  Close();
  EXPECT_EQ(env_->RawBlockBytes(), 2u * 4096);
}

TEST_P(BlockStoreConformance, GenerationNumbersAreNeverReusedAfterDelete) {
  const ForestInfo g1 = Publish("model", 4096, 2);
  ASSERT_OK(store_->Delete("model"));
  const ForestInfo again = Publish("model", 4096, 2);
  EXPECT_GT(again.generation, g1.generation);
}

TEST_P(BlockStoreConformance, InvalidNamesAreRejectedClearly) {
  for (const std::string& bad :
       {std::string(), std::string("a/b"), std::string(".."), std::string("."),
        std::string(".hidden"), std::string(201, 'x'), std::string("tab\there"),
        std::string("nul\0x", 5), std::string("caf\xc3\xa9"), std::string("a b"),
        std::string("a:b")}) {
    auto w = store_->BeginGeneration(bad, 4096, 1);
    EXPECT_EQ(w.status().code(), StatusCode::kInvalidArgument) << "'" << bad << "'";
    EXPECT_NE(w.status().message().find("invalid forest name"), std::string::npos);
    EXPECT_EQ(store_->Lookup(bad).status().code(), StatusCode::kInvalidArgument);
    EXPECT_EQ(store_->Delete(bad).code(), StatusCode::kInvalidArgument);
  }
  EXPECT_TRUE(store_->BeginGeneration(std::string(200, 'x'), 4096, 1).ok());
  EXPECT_TRUE(store_->BeginGeneration("Model_v1.2-final", 4096, 1).ok());
}

TEST_P(BlockStoreConformance, CorruptStoredBlockIsReportedWithForestGenerationAndBlock) {
  const ForestInfo f = Publish("model", 4096, 10);
  Close();
  ASSERT_EQ(env_->CorruptStoredBlock(f, 3), "");
  ASSERT_EQ(env_->CorruptStoredBlock(f, 7), "");
  Open();
  std::string b = "untouched";
  Status s = store_->Get(f, 3, &b);
  EXPECT_EQ(s.code(), StatusCode::kCorruption) << s.ToString();
  EXPECT_NE(
      s.message().find("forest 'model' generation " + std::to_string(f.generation) + " block 3"),
      std::string::npos)
      << s.ToString();
  EXPECT_EQ(b, "untouched");  // the bad bytes are never handed out
  std::vector<std::string> blocks;
  s = store_->MultiGet(f, {1, 2, 3, 4}, &blocks);
  EXPECT_EQ(s.code(), StatusCode::kCorruption);
  EXPECT_TRUE(blocks.empty());
  // Scattered blocks (dir: read at once through an io_uring) alike.
  s = store_->MultiGet(f, {8, 1, 3, 5}, &blocks);
  EXPECT_EQ(s.code(), StatusCode::kCorruption);
  EXPECT_NE(s.message().find("block 3"), std::string::npos) << s.ToString();
  EXPECT_TRUE(blocks.empty());
  ASSERT_TRUE(store_->Get(f, 2, &b).ok());
  auto bad = VerifyForest(*store_, f);
  ASSERT_TRUE(bad.ok()) << bad.status().ToString();
  EXPECT_EQ(*bad, (std::vector<uint64_t>{3, 7}));
}

TEST_P(BlockStoreConformance, MissingStoredBlockOfAPublishedGenerationIsCorruption) {
  const ForestInfo f = Publish("model", 4096, 6);
  Close();
  ASSERT_EQ(env_->DeleteStoredBlock(f, 5), "");
  Open();
  std::string b;
  Status s = store_->Get(f, 5, &b);
  EXPECT_EQ(s.code(), StatusCode::kCorruption) << s.ToString();
  EXPECT_NE(s.message().find("block 5"), std::string::npos) << s.ToString();
  auto bad = VerifyForest(*store_, f);
  ASSERT_TRUE(bad.ok()) << bad.status().ToString();
  EXPECT_EQ(*bad, std::vector<uint64_t>{5});
}

TEST_P(BlockStoreConformance, AbandonedImportLeavesPreviousGenerationAndIsCollected) {
  const ForestInfo g1 = Publish("model", 65536, 4);
  {
    auto w = store_->BeginGeneration("model", 65536, 200);
    ASSERT_TRUE(w.ok());
    for (uint64_t i = 0; i < 150; ++i)  // more than one write batch of every backend
      ASSERT_OK((*w)->Put(i, MakeBlock(65536, i, 99).data()));
  }  // destroyed without Publish
  auto cur = store_->Lookup("model");
  ASSERT_TRUE(cur.ok());
  EXPECT_EQ(cur->generation, g1.generation);
  ExpectIntact(g1);
  EXPECT_EQ(Pending(), 1u);
  auto n = store_->CollectGarbage();
  ASSERT_TRUE(n.ok()) << n.status().ToString();
  EXPECT_EQ(*n, 1u);
  EXPECT_EQ(Pending(), 0u);
  ExpectIntact(g1);
  Close();
  EXPECT_EQ(env_->RawBlockBytes(), 4u * 65536);
}

TEST_P(BlockStoreConformance, ImportKilledWithSigkillLeavesPreviousGenerationAndIsCollectedLater) {
  const ForestInfo g1 = Publish("model", 4096, 8);
  const bool concurrent = env_->ConcurrentWriterProcesses();
  if (!concurrent) Close();  // rocksdb: one writer process at a time
  store_test::ChildProcess child;
  ASSERT_TRUE(child.Spawn({PACSET_STORE_CHILD, "import", env_->Uri(), "model", "4096", "300", "200",
                           std::to_string(env_->Options().lease_ms)}));
  const std::string line = child.ReadLine(10000);
  ASSERT_EQ(line.rfind("ready ", 0), 0u) << line;
  if (concurrent) {
    // The import is alive in another process: its blocks must stay.
    EXPECT_EQ(Pending(), 1u);
    auto n = store_->CollectGarbage();
    ASSERT_TRUE(n.ok()) << n.status().ToString();
    EXPECT_EQ(*n, 0u);
    EXPECT_EQ(Pending(), 1u);
  }
  child.Kill();  // SIGKILL mid-import
  if (!concurrent) Open();
  auto cur = store_->Lookup("model");
  ASSERT_TRUE(cur.ok());
  EXPECT_EQ(cur->generation, g1.generation);
  ExpectIntact(g1);
  // Collected once the importer is known dead (redis: after its lease expires).
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(10);
  while (Pending() != 0 && std::chrono::steady_clock::now() < deadline) {
    ASSERT_TRUE(store_->CollectGarbage().ok());
    if (Pending() != 0) std::this_thread::sleep_for(std::chrono::milliseconds(100));
  }
  EXPECT_EQ(Pending(), 0u);
  ExpectIntact(g1);
  Close();
  EXPECT_EQ(env_->RawBlockBytes(), 8u * 4096);
}

TEST_P(BlockStoreConformance, PinOfADeadProcessDoesNotKeepAGeneration) {
  const ForestInfo g1 = Publish("model", 4096, 4);
  const bool concurrent = env_->ConcurrentWriterProcesses();
  store_test::ChildProcess child;
  // rocksdb: the reader is a secondary (read-only) instance beside our writer.
  ASSERT_TRUE(
      child.Spawn({PACSET_STORE_CHILD, "pin", env_->Uri(), "model", std::to_string(g1.generation),
                   concurrent ? "0" : "1", std::to_string(env_->Options().lease_ms)}));
  ASSERT_EQ(child.ReadLine(10000), "ready");
  Publish("model", 4096, 4);
  ASSERT_TRUE(store_->CollectGarbage().ok());
  ExpectIntact(g1);  // pinned by a live process
  child.Kill();
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(10);
  uint64_t collected = 0;
  while (collected == 0 && std::chrono::steady_clock::now() < deadline) {
    auto n = store_->CollectGarbage();
    ASSERT_TRUE(n.ok()) << n.status().ToString();
    collected = *n;
    if (collected == 0) std::this_thread::sleep_for(std::chrono::milliseconds(100));
  }
  EXPECT_EQ(collected, 1u);
  std::string b;
  EXPECT_EQ(store_->Get(g1, 0, &b).code(), StatusCode::kCorruption);
}

TEST_P(BlockStoreConformance, OverlappingImportsOfOneNameFirstPublisherWins) {
  auto w1 = store_->BeginGeneration("model", 4096, 2);
  auto w2 = store_->BeginGeneration("model", 4096, 2);
  ASSERT_TRUE(w1.ok() && w2.ok());
  EXPECT_NE((*w1)->generation(), (*w2)->generation());
  for (uint64_t i = 0; i < 2; ++i) {
    ASSERT_OK((*w1)->Put(i, MakeBlock(4096, i, (*w1)->generation()).data()));
    ASSERT_OK((*w2)->Put(i, MakeBlock(4096, i, (*w2)->generation()).data()));
  }
  ASSERT_OK((*w2)->Publish(ForestInfo{}));
  Status s = (*w1)->Publish(ForestInfo{});
  EXPECT_EQ(s.code(), StatusCode::kAlreadyExists) << s.ToString();
  auto cur = store_->Lookup("model");
  ASSERT_TRUE(cur.ok());
  EXPECT_EQ(cur->generation, (*w2)->generation());
  ExpectIntact(*cur);
}

TEST_P(BlockStoreConformance, ReadOnlyStoreReadsButRefusesWrites) {
  const ForestInfo f = Publish("model", 4096, 3);
  StoreOptions o = env_->Options();
  o.read_only = true;
  auto ro = OpenBlockStore(env_->Uri(), o);
  ASSERT_TRUE(ro.ok()) << ro.status().ToString();
  auto info = (*ro)->Lookup("model");
  ASSERT_TRUE(info.ok()) << info.status().ToString();
  std::string b;
  ASSERT_TRUE((*ro)->Get(*info, 2, &b).ok());
  EXPECT_EQ(b, MakeBlock(4096, 2, f.generation));
  EXPECT_EQ((*ro)->BeginGeneration("x", 4096, 1).status().code(), StatusCode::kNotSupported);
  EXPECT_EQ((*ro)->Delete("model").code(), StatusCode::kNotSupported);
  EXPECT_EQ((*ro)->CollectGarbage().status().code(), StatusCode::kNotSupported);
}

TEST_P(BlockStoreConformance, EightConcurrentReadersWhileGenerationsArePublished) {
  Publish("model", 4096, 64);
  std::atomic<bool> stop{false};
  std::atomic<uint64_t> reads{0};
  std::vector<std::string> errors(8);
  std::vector<std::thread> readers;
  for (int t = 0; t < 8; ++t) {
    readers.emplace_back([&, t] {
      std::mt19937_64 rng(t);
      std::string b;
      std::vector<std::string> bs;
      while (!stop.load() && errors[t].empty()) {
        auto info = store_->Lookup("model");
        if (!info.ok()) {
          errors[t] = info.status().ToString();
          break;
        }
        Status s = store_->Pin("model", info->generation);
        if (s.IsNotFound()) continue;  // collected between Lookup and Pin: look up again
        if (!s.ok()) {
          errors[t] = s.ToString();
          break;
        }
        for (int i = 0; i < 20 && errors[t].empty(); ++i) {
          const uint64_t k = rng() % info->block_count;
          s = store_->Get(*info, k, &b);
          if (!s.ok() || b != MakeBlock(4096, k, info->generation))
            errors[t] = "Get: " + s.ToString();
          std::vector<uint64_t> ks = {rng() % info->block_count, rng() % info->block_count};
          s = store_->MultiGet(*info, ks, &bs);
          if (!s.ok() || bs[1] != MakeBlock(4096, ks[1], info->generation))
            errors[t] = "MultiGet: " + s.ToString();
          ++reads;
        }
        s = store_->Unpin("model", info->generation);
        if (!s.ok()) errors[t] = s.ToString();
      }
    });
  }
  for (int i = 0; i < 4; ++i) {
    Publish("model", 4096, 64);
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  stop = true;
  for (auto& r : readers) r.join();
  for (int t = 0; t < 8; ++t) EXPECT_EQ(errors[t], "") << "reader " << t;
  EXPECT_GT(reads.load(), 8u);
  ASSERT_TRUE(store_->CollectGarbage().ok());
  auto st = store_->Stat();
  ASSERT_TRUE(st.ok());
  EXPECT_EQ(st->generations, 1u);
}

INSTANTIATE_TEST_SUITE_P(AllBackends, BlockStoreConformance,
                         ::testing::Values("rocksdb", "dir", "redis", "redis-cluster"),
                         [](const ::testing::TestParamInfo<std::string>& p) {
                           std::string name = p.param;  // gtest names: [A-Za-z0-9_]
                           std::replace(name.begin(), name.end(), '-', '_');
                           return name;
                         });

}  // namespace
}  // namespace pacset
