// FaultInjectionStore over each real backend: injected failures, delays and
// damage reach callers exactly as real ones would.
#include <gtest/gtest.h>

#include <chrono>

#include "store/fault_injection_store.h"
#include "store/publish.h"
#include "testkit/store_env.h"
#include "testkit/test_blocks.h"
#include "util/atomic_file.h"

namespace pacset {
namespace {

using store_test::MakeBlock;
using store_test::WriteForest;

class FaultInjectionStoreTest : public ::testing::TestWithParam<std::string> {
 protected:
  void SetUp() override {
    std::string error;
    env_ = store_test::MakeEnv(GetParam(), &error);
    ASSERT_TRUE(error.empty()) << error;
    auto s = OpenBlockStore(env_->Uri(), env_->Options());
    ASSERT_TRUE(s.ok()) << s.status().ToString();
    store_ = std::make_unique<FaultInjectionStore>(std::move(*s));
    uint64_t gen = 0;
    ASSERT_TRUE(WriteForest(*store_, "model", 4096, 10, &gen).ok());
    auto info = store_->Lookup("model");
    ASSERT_TRUE(info.ok());
    forest_ = *info;
  }

  std::unique_ptr<store_test::StoreEnv> env_;
  std::unique_ptr<FaultInjectionStore> store_;
  ForestInfo forest_;
};

TEST_P(FaultInjectionStoreTest, FailAllReadsReturnsTheChosenCodeUntilCleared) {
  store_->FailAllReads(StatusCode::kUnavailable);
  std::string b;
  EXPECT_EQ(store_->Get(forest_, 0, &b).code(), StatusCode::kUnavailable);
  std::vector<std::string> bs;
  EXPECT_EQ(store_->MultiGet(forest_, {1, 2}, &bs).code(), StatusCode::kUnavailable);
  store_->FailAllReads(StatusCode::kIOError);
  Status s = store_->Get(forest_, 0, &b);
  EXPECT_EQ(s.code(), StatusCode::kIOError);
  EXPECT_NE(s.message().find("forest 'model' generation"), std::string::npos) << s.ToString();
  store_->ClearFaults();
  ASSERT_TRUE(store_->Get(forest_, 0, &b).ok());
  EXPECT_EQ(b, MakeBlock(4096, 0, forest_.generation));
}

TEST_P(FaultInjectionStoreTest, FailBlockReadsAffectsOnlyThatBlockOfThatForest) {
  uint64_t other_gen = 0;
  ASSERT_TRUE(WriteForest(*store_, "other", 4096, 10, &other_gen).ok());
  auto other = store_->Lookup("other");
  ASSERT_TRUE(other.ok());
  store_->FailBlockReads(4, StatusCode::kIOError, "model");
  std::string b;
  EXPECT_EQ(store_->Get(forest_, 4, &b).code(), StatusCode::kIOError);
  EXPECT_TRUE(store_->Get(forest_, 5, &b).ok());
  EXPECT_TRUE(store_->Get(*other, 4, &b).ok());
  std::vector<std::string> bs;
  EXPECT_EQ(store_->MultiGet(forest_, {3, 4, 5}, &bs).code(), StatusCode::kIOError);
  store_->FailBlockReads(4, StatusCode::kUnavailable);  // any forest
  EXPECT_EQ(store_->Get(*other, 4, &b).code(), StatusCode::kUnavailable);
}

TEST_P(FaultInjectionStoreTest, DelayReadsSlowsEveryRead) {
  store_->DelayReads(60);
  std::string b;
  const auto t0 = std::chrono::steady_clock::now();
  ASSERT_TRUE(store_->Get(forest_, 1, &b).ok());
  EXPECT_GE(std::chrono::steady_clock::now() - t0, std::chrono::milliseconds(60));
  EXPECT_EQ(b, MakeBlock(4096, 1, forest_.generation));
}

TEST_P(FaultInjectionStoreTest, CorruptBlockIsCaughtByTheRealVerification) {
  store_->CorruptBlock(6);
  std::string b = "unchanged";
  Status s = store_->Get(forest_, 6, &b);
  EXPECT_EQ(s.code(), StatusCode::kCorruption) << s.ToString();
  EXPECT_NE(s.message().find("forest 'model' generation " + std::to_string(forest_.generation) +
                             " block 6: checksum mismatch"),
            std::string::npos)
      << s.ToString();
  EXPECT_EQ(b, "unchanged");
  EXPECT_TRUE(store_->Get(forest_, 5, &b).ok());
  store_->CorruptBlock(2, "model");
  auto bad = VerifyForest(*store_, forest_);
  ASSERT_TRUE(bad.ok());
  EXPECT_EQ(*bad, (std::vector<uint64_t>{2, 6}));
  // The stored bytes themselves are fine.
  EXPECT_TRUE(store_->inner()->Get(forest_, 6, &b).ok());
}

TEST_P(FaultInjectionStoreTest, GetManyGivesEachBlockItsOwnOutcomeInOneCallWhenAllAreGood) {
  store_->CorruptBlock(6);
  store_->FailBlockReads(8, StatusCode::kIOError);
  const uint64_t calls = store_->read_calls();
  std::vector<std::string> out;
  std::vector<Status> st;
  store_->GetMany(forest_, {1, 2, 3}, &out, &st);
  EXPECT_EQ(store_->read_calls() - calls, 1u);  // one backend call for the batch
  ASSERT_EQ(st.size(), 3u);
  ASSERT_EQ(out.size(), 3u);
  for (size_t i = 0; i < 3; ++i) {
    EXPECT_TRUE(st[i].ok()) << st[i].ToString();
    EXPECT_TRUE(out[i] == MakeBlock(4096, i + 1, forest_.generation)) << "block " << i + 1;
  }
  // A corrupt and a failing block in the middle of a batch: only they fail,
  // each with its own error naming it; the others arrive intact.
  store_->GetMany(forest_, {5, 6, 7, 8, 9}, &out, &st);
  ASSERT_EQ(st.size(), 5u);
  const std::string gen = std::to_string(forest_.generation);
  for (size_t i : {0, 2, 4}) {
    EXPECT_TRUE(st[i].ok()) << st[i].ToString();
    EXPECT_TRUE(out[i] == MakeBlock(4096, 5 + i, forest_.generation)) << "block " << 5 + i;
  }
  EXPECT_EQ(st[1].code(), StatusCode::kCorruption);
  EXPECT_NE(st[1].message().find("generation " + gen + " block 6:"), std::string::npos)
      << st[1].ToString();
  EXPECT_EQ(st[3].code(), StatusCode::kIOError);
  EXPECT_NE(st[3].message().find("block 8:"), std::string::npos) << st[3].ToString();
  EXPECT_TRUE(out[1].empty() && out[3].empty());  // bad bytes are never returned
}

TEST_P(FaultInjectionStoreTest, CountsReadsAndBlocks) {
  const uint64_t calls = store_->read_calls(), blocks = store_->blocks_read();
  std::string b;
  std::vector<std::string> bs;
  ASSERT_TRUE(store_->Get(forest_, 1, &b).ok());
  ASSERT_TRUE(store_->MultiGet(forest_, {1, 2, 3}, &bs).ok());
  EXPECT_EQ(store_->read_calls() - calls, 2u);
  EXPECT_EQ(store_->blocks_read() - blocks, 4u);
}

TEST_P(FaultInjectionStoreTest, FullDiskDuringImportLosesNothing) {
  const auto tmp = TempDir::Create("pacset-store").value();
  const std::string pac = tmp->path() + "/new.pac";
  {
    std::string bytes;
    for (uint64_t i = 0; i < 40; ++i) bytes += MakeBlock(4096, i, 777);
    FILE* f = std::fopen(pac.c_str(), "wb");
    ASSERT_NE(f, nullptr);
    ASSERT_EQ(std::fwrite(bytes.data(), 1, bytes.size(), f), bytes.size());
    std::fclose(f);
  }
  store_->FailPutsAfter(25);
  uint64_t gen = 0;
  Status s = PublishFile(*store_, "model", pac, 4096, ForestInfo{}, &gen);
  EXPECT_EQ(s.code(), StatusCode::kResourceExhausted) << s.ToString();
  EXPECT_NE(s.message().find("no space left"), std::string::npos) << s.ToString();
  // The previous generation is current and whole.
  auto cur = store_->Lookup("model");
  ASSERT_TRUE(cur.ok());
  EXPECT_EQ(cur->generation, forest_.generation);
  std::string b;
  for (uint64_t i = 0; i < 10; ++i) {
    ASSERT_TRUE(store_->Get(*cur, i, &b).ok());
    EXPECT_EQ(b, MakeBlock(4096, i, forest_.generation));
  }
  // The half-written generation is garbage, collected.
  auto n = store_->CollectGarbage();
  ASSERT_TRUE(n.ok()) << n.status().ToString();
  EXPECT_EQ(*n, 1u);
  auto st = store_->Stat();
  ASSERT_TRUE(st.ok());
  EXPECT_EQ(st->pending, 0u);
  // Space again: the same import goes through.
  store_->ClearFaults();
  ASSERT_TRUE(PublishFile(*store_, "model", pac, 4096, ForestInfo{}, &gen).ok());
  EXPECT_GT(gen, forest_.generation);
  store_.reset();
  EXPECT_EQ(env_->RawBlockBytes(), 40u * 4096);
}

TEST(FaultInjectionStore, BorrowsAStoreItDoesNotOwn) {
  const auto tmp = TempDir::Create("pacset-store").value();
  auto inner = OpenBlockStore("dir:" + tmp->path() + "/s");
  ASSERT_TRUE(inner.ok());
  {
    FaultInjectionStore wrapper(inner->get());
    ASSERT_TRUE(WriteForest(wrapper, "model", 4096, 2).ok());
  }
  EXPECT_TRUE((*inner)->Lookup("model").ok());  // still usable after the wrapper is gone
}

INSTANTIATE_TEST_SUITE_P(AllBackends, FaultInjectionStoreTest,
                         ::testing::Values("rocksdb", "dir", "redis"),
                         [](const ::testing::TestParamInfo<std::string>& p) { return p.param; });

}  // namespace
}  // namespace pacset
