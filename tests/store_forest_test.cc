// StoreForest: predictions straight from a real RocksDB, a real directory and
// a real redis-server, at block sizes from 256 B to 64 KiB, bit-identical to
// the in-memory predictor; one MultiGet per round and a bounded number of
// rounds per row; a cache under eviction and threads; corrupt blocks and
// failing stores. (Exactness against the libraries themselves and the CLI:
// tests/exact/store_exact_test.py, tests/store/store_predict_test.py.)
#include <gtest/gtest.h>
#include <signal.h>

#include <algorithm>
#include <chrono>
#include <cstring>
#include <thread>

#include "engine/internal/store_block_source.h"
#include "engine/store_forest.h"
#include "layout/pack.h"
#include "model/predict.h"
#include "store/fault_injection_store.h"
#include "store/publish.h"
#include "testkit/pac_edit.h"
#include "testkit/random_forest.h"
#include "testkit/store_env.h"
#include "tests/expect_exact.h"
#include "tests/first_round_source.h"

namespace pacset {
namespace {

using testing::DeepBinsPacking;
using testing::ExpectSameAsInMemory;
using testing::FirstRoundSource;
using testing::Flavor;
using testing::ForestWithDeepBins;
using testing::MakeAdversarialRows;
using testing::MakeRandomForest;
using testing::RandomForestSpec;

// Publishes packed bytes as a new generation of `name`.
Status PublishBytes(BlockStore& store, const std::string& name, const std::string& bytes,
                    uint32_t bs) {
  PACSET_ASSIGN_OR_RETURN(auto w, store.BeginGeneration(name, bs, bytes.size() / bs));
  for (uint64_t b = 0; b < bytes.size() / bs; ++b)
    PACSET_RETURN_IF_ERROR(w->Put(b, bytes.data() + b * bs));
  PACSET_ASSIGN_OR_RETURN(PacHeader h, PacHeader::DecodeFromFile(bytes.data(), bytes.size(), name));
  ForestInfo info;
  info.source_format = "pac";
  info.header_checksum = h.checksum;
  info.block_seed = h.block_seed();
  return w->Publish(info);
}

Forest TestForest(Flavor flavor, uint32_t seed = 7) {
  RandomForestSpec spec;
  spec.flavor = flavor;
  spec.trees = 30;
  spec.max_depth = 10;
  spec.seed = seed;
  return MakeRandomForest(spec);
}

RowMatrix OneRow(const RowMatrix& rows, size_t r) {
  RowMatrix one;
  one.num_rows = 1;
  one.num_cols = rows.num_cols;
  one.values.assign(rows.row(r), rows.row(r) + rows.num_cols);
  return one;
}

class StoreForestTest : public ::testing::TestWithParam<std::string> {
 protected:
  void SetUp() override {
    std::string error;
    env_ = store_test::MakeEnv(GetParam(), &error);
    ASSERT_TRUE(error.empty()) << error;
    Open();
  }
  void Open() {
    StoreOptions o = env_->Options();
    auto s = OpenBlockStore(env_->Uri(), o);
    ASSERT_TRUE(s.ok()) << s.status().ToString();
    store_ = std::move(*s);
  }
  // Packs `f` with `bs`-byte blocks and publishes it as `name`.
  void Import(const std::string& name, const Forest& f, uint32_t bs, uint32_t format_version = 0) {
    PackOptions o;
    o.block_size = bs;
    o.format_version = format_version;
    auto bytes = PackForestToBuffer(f, o);
    ASSERT_TRUE(bytes.ok()) << bytes.status().ToString();
    Status s = PublishBytes(*store_, name, *bytes, bs);
    ASSERT_TRUE(s.ok()) << s.ToString();
  }
  std::unique_ptr<StoreForest> OpenForest(const std::string& name,
                                          std::shared_ptr<BlockStore> store = nullptr,
                                          StoreForestOptions options = {}) {
    auto f = StoreForest::Open(store ? store : store_, name, options);
    EXPECT_TRUE(f.ok()) << f.status().ToString();
    return f.ok() ? std::move(*f) : nullptr;
  }

  std::unique_ptr<store_test::StoreEnv> env_;
  std::shared_ptr<BlockStore> store_;
};

TEST_P(StoreForestTest, PredictsExactlyLikeTheInMemoryForestFrom256BTo64KiBBlocksInEveryVersion) {
  for (Flavor flavor : {Flavor::kXgboost, Flavor::kSklearnProba, Flavor::kLightgbm}) {
    const Forest f = TestForest(flavor);
    const RowMatrix rows = MakeAdversarialRows(f, 150, 5);
    for (uint32_t bs : {256u, 1024u, 4096u, 65536u}) {
      // Format version 3 (blocks bound to the file), and the older files.
      const uint32_t version = bs == 1024u || bs == 65536u ? 2 : 3;
      const std::string name =
          "f" + std::to_string(static_cast<int>(flavor)) + "-" + std::to_string(bs);
      Import(name, f, bs, version);
      auto forest = OpenForest(name);
      ASSERT_NE(forest, nullptr);
      EXPECT_EQ(forest->engine().file().header().version, version == 3 ? 3u : bs < 4096 ? 2u : 1u);
      ExpectSameAsInMemory(f, forest->engine(), rows, GetParam() + " " + name);
      // One row at a time, cold: the same answers.
      auto cold = OpenForest(name);
      ASSERT_NE(cold, nullptr);
      ExpectSameAsInMemory(f, cold->engine(), OneRow(rows, 3), GetParam() + " one row " + name);
    }
  }
}

TEST_P(StoreForestTest, ReadsEachRoundWithOneMultiGetPerThreadAndBoundsRoundsPerRow) {
  const Forest f = TestForest(Flavor::kXgboost);
  Import("model", f, 256);
  auto counting = std::make_shared<FaultInjectionStore>(store_.get());
  auto forest = OpenForest("model", counting);
  ASSERT_NE(forest, nullptr);
  const StoreReadStats open = forest->read_stats();
  EXPECT_EQ(counting->read_calls(), open.multigets) << "the counting wrapper sees every read";
  // Metadata: the first 4 KiB, then (if the header or tree table goes on) the rest.
  EXPECT_LE(open.multigets, 2u * store_->read_parallelism());
  const PacHeader& h = forest->engine().file().header();
  const RowMatrix rows = MakeAdversarialRows(f, 20, 9);
  std::vector<double> out;
  ASSERT_TRUE(forest->engine().PredictAll(OneRow(rows, 0), false, 1, &out).ok());
  const StoreReadStats one = forest->read_stats();
  const uint64_t rounds = one.rounds - open.rounds, blocks = one.blocks - open.blocks;
  // A walk enters at most max_depth + 1 nodes and a leaf record: rounds are
  // bounded by the depth, not by the number of blocks.
  EXPECT_GE(rounds, 1u);
  EXPECT_LE(rounds, h.max_depth + 2u);
  EXPECT_GT(blocks, rounds) << "rounds read many blocks each";
  EXPECT_LE(one.multigets - open.multigets, rounds * store_->read_parallelism());
  EXPECT_EQ(counting->read_calls(), one.multigets);
  // The same row again: everything is cached.
  ASSERT_TRUE(forest->engine().PredictAll(OneRow(rows, 0), false, 1, &out).ok());
  EXPECT_EQ(forest->read_stats().blocks, one.blocks);
  EXPECT_EQ(counting->read_calls(), one.multigets);
}

// The bins hold the top levels of every tree, striped level by level: a
// cold request from a store asks for all of them in its first round (one
// MultiGet, or its parallel parts), not one level per round, and predicts
// the in-memory forest's bits; a warm request asks for none of them.
TEST_P(StoreForestTest, AColdRequestReadsTheWholeBinRegionInItsFirstRound) {
  const Forest f = ForestWithDeepBins();
  const RowMatrix rows = MakeAdversarialRows(f, 2, 5);
  const PackOptions o = DeepBinsPacking();
  auto bytes = PackForestToBuffer(f, o);
  ASSERT_TRUE(bytes.ok()) << bytes.status().ToString();
  ASSERT_TRUE(PublishBytes(*store_, "model", *bytes, o.block_size).ok());
  auto info = store_->Lookup("model");
  ASSERT_TRUE(info.ok()) << info.status().ToString();
  auto file = PacFile::FromBuffer(*bytes, "model");
  ASSERT_TRUE(file.ok()) << file.status().ToString();
  const uint64_t first = (*file)->header().node_first_block;
  const uint64_t bins = (*file)->header().bin_block_count;
  ASSERT_GE(bins, 8u);  // levels 0-4 of 300 trees: several blocks, several levels
  FirstRoundSource* source = nullptr;
  EngineOptions eo;
  eo.verify_blocks = false;  // the store verified every block it returned
  eo.sequential_reads = false;
  eo.max_in_flight = 1024;
  auto engine = PacEngine::FromFile(
      std::move(*file), eo,
      [&](const PacFile&, const EngineOptions&) -> std::unique_ptr<BlockSource> {
        auto s = std::make_unique<FirstRoundSource>(
            std::make_unique<store_internal::StoreBlockSource>(store_.get(), *info, 64 << 20));
        source = s.get();
        return s;
      });
  ASSERT_TRUE(engine.ok()) << engine.status().ToString();
  ExpectSameAsInMemory(f, **engine, OneRow(rows, 0), GetParam() + " cold row");
  std::vector<uint64_t> asked = source->first_round();
  std::sort(asked.begin(), asked.end());
  for (uint64_t b = first; b < first + bins; ++b)
    EXPECT_TRUE(std::binary_search(asked.begin(), asked.end(), b))
        << GetParam() << ": bin block " << b << " not asked for in the first round";
  // Warm now: the second row's request asks for no bin block at all.
  const size_t before = source->first_round().size();
  ExpectSameAsInMemory(f, **engine, OneRow(rows, 1), GetParam() + " warm row");
  const std::vector<uint64_t> later = source->first_round();
  for (size_t i = before; i < later.size(); ++i)
    EXPECT_FALSE(later[i] >= first && later[i] < first + bins)
        << GetParam() << ": bin block " << later[i] << " asked for again";
}

TEST_P(StoreForestTest, ASmallCacheEvictsUnderManyThreadsAndStaysExact) {
  const Forest f = TestForest(Flavor::kSklearnProba, 3);
  Import("model", f, 256);
  StoreForestOptions o;
  o.cache_bytes = 32 * 256;
  auto forest = OpenForest("model", nullptr, o);
  ASSERT_NE(forest, nullptr);
  const RowMatrix rows = MakeAdversarialRows(f, 400, 4);
  for (int pass = 0; pass < 2; ++pass)
    ExpectSameAsInMemory(f, forest->engine(), rows, GetParam() + " small cache", 4);
  const StoreReadStats s = forest->read_stats();
  EXPECT_GT(s.evicted, 0u);
  EXPECT_LE(s.cached_bytes, o.cache_bytes) << "no request is running: back under the bound";
  // No cache at all: a finished request leaves nothing behind (the blocks
  // its last round kept are all referenced, so this takes both sweeps).
  StoreForestOptions none;
  none.cache_bytes = 0;
  auto uncached = OpenForest("model", nullptr, none);
  ASSERT_NE(uncached, nullptr);
  ExpectSameAsInMemory(f, uncached->engine(), rows, GetParam() + " no cache");
  EXPECT_GT(uncached->read_stats().evicted, 0u);
  EXPECT_EQ(uncached->read_stats().cached_bytes, 0u);
}

// A writer of the store (not `pacset import`, which refuses such files)
// publishes crafted forests whose checksums are all valid: opening them,
// predicting and verifying give errors naming what is wrong, never a signal
// or a memory error (CI runs the store tests under AddressSanitizer).
TEST_P(StoreForestTest, ACraftedForestPublishedPastImportGivesErrorsNeverSignals) {
  const Forest f = TestForest(Flavor::kSklearnProba);
  const RowMatrix rows = MakeAdversarialRows(f, 80, 4);
  for (uint32_t bs : {256u, 4096u}) {
    PackOptions o;
    o.block_size = bs;
    auto packed = PackForestToBuffer(f, o);
    ASSERT_TRUE(packed.ok());
    {  // Tree 0 ends on an inline value added to a group far outside the outputs.
      testing::PacEditor ed(*packed);
      TreeRecord r = ed.Tree(0);
      r.root_kind = static_cast<uint8_t>(RefKind::kInlineValue);
      r.group = 0x7FFFFFFF;
      ed.SetTree(0, r);
      const std::string name = "group-" + std::to_string(bs);
      ASSERT_TRUE(PublishBytes(*store_, name, ed.Reseal(), bs).ok());
      auto opened = StoreForest::Open(store_, name);
      EXPECT_TRUE(opened.status().IsCorruption()) << opened.status().ToString();
      EXPECT_NE(opened.status().message().find("tree 0 has output group 2147483647"),
                std::string::npos)
          << opened.status().message();
      auto info = store_->Lookup(name);
      ASSERT_TRUE(info.ok());
      auto checked = CheckStoredStructure(*store_, *info);
      EXPECT_TRUE(checked.status().IsCorruption()) << checked.status().ToString();
    }
    {  // Tree 1's root is tree 0's: in bounds everywhere, two trees share nodes.
      testing::PacEditor ed(*packed);
      TreeRecord r = ed.Tree(1);
      r.root = ed.Tree(0).root;
      r.root_kind = ed.Tree(0).root_kind;
      ed.SetTree(1, r);
      const std::string name = "shared-" + std::to_string(bs);
      ASSERT_TRUE(PublishBytes(*store_, name, ed.Reseal(), bs).ok());
      auto forest = OpenForest(name);
      ASSERT_NE(forest, nullptr);
      std::vector<double> out;
      for (int i = 0; i < 4; ++i) {
        const Status s = forest->engine().PredictAll(rows, false, 1, &out);
        EXPECT_TRUE(s.ok() || s.IsCorruption()) << s.ToString();
      }
      auto info = store_->Lookup(name);
      ASSERT_TRUE(info.ok());
      auto checked = CheckStoredStructure(*store_, *info);
      EXPECT_TRUE(checked.status().IsCorruption()) << checked.status().ToString();
      EXPECT_NE(checked.status().message().find("tree 1"), std::string::npos)
          << checked.status().message();
    }
  }
}

TEST_P(StoreForestTest, ABlockOfAnotherGenerationAtTheSameIndexIsCorruptionNamingTheBlock) {
  // Two generations of one name, packed differently: every block of the
  // newer one verifies only as its own (version 3 seeds with the file's id).
  const Forest f = TestForest(Flavor::kXgboost);
  Import("model", f, 4096);
  auto older = store_->Lookup("model");
  ASSERT_TRUE(older.ok());
  PackOptions o;
  o.block_size = 4096;
  o.layout = LayoutKind::kBfs;
  auto other = PackForestToBuffer(f, o);
  ASSERT_TRUE(other.ok());
  auto h = PacHeader::DecodeFromFile(other->data(), other->size(), "other");
  ASSERT_TRUE(h.ok());
  const uint64_t block = h->node_first_block;
  // The other packing's first node block, stored at that index of the model.
  auto w = store_->BeginGeneration("model", 4096, older->block_count);
  ASSERT_TRUE(w.ok());
  std::string block_bytes(4096, '\0');
  for (uint64_t b = 0; b < older->block_count; ++b) {
    std::string mine;
    ASSERT_TRUE(store_->Get(*older, b, &mine).ok());
    const std::string& bytes = b == block ? other->substr(b * 4096, 4096) : mine;
    ASSERT_TRUE((*w)->Put(b, bytes.data()).ok());
  }
  ASSERT_TRUE((*w)->Publish(*older).ok());
  auto spliced = store_->Lookup("model");
  ASSERT_TRUE(spliced.ok());
  ASSERT_NE(spliced->generation, older->generation);
  std::string got;
  const Status s = store_->Get(*spliced, block, &got);
  EXPECT_TRUE(s.IsCorruption()) << s.ToString();
  EXPECT_NE(s.message().find("block " + std::to_string(block)), std::string::npos) << s.message();
  auto forest = OpenForest("model");
  ASSERT_NE(forest, nullptr);
  std::vector<double> out;
  const Status p = forest->engine().PredictAll(MakeAdversarialRows(f, 5, 1), false, 1, &out);
  EXPECT_TRUE(p.IsCorruption()) << p.ToString();
}

TEST_P(StoreForestTest, ACorruptNodeBlockIsAnErrorNamingItAndACorruptHeaderFailsOpen) {
  const Forest f = TestForest(Flavor::kXgboost);
  Import("model", f, 1024);
  auto info = store_->Lookup("model");
  ASSERT_TRUE(info.ok());
  uint64_t first_node_block = 0;
  {
    auto forest = OpenForest("model");
    ASSERT_NE(forest, nullptr);
    first_node_block = forest->engine().file().header().node_first_block;
  }
  store_.reset();  // rocksdb: damaged with the store closed
  ASSERT_EQ(env_->CorruptStoredBlock(*info, first_node_block), "");
  Open();
  auto forest = OpenForest("model");
  ASSERT_NE(forest, nullptr);
  std::vector<double> out;
  // Every row starts in the first bin block.
  Status s = forest->engine().PredictAll(MakeAdversarialRows(f, 5, 1), false, 1, &out);
  EXPECT_TRUE(s.IsCorruption()) << s.ToString();
  EXPECT_NE(s.message().find("forest 'model' generation " + std::to_string(info->generation) +
                             " block " + std::to_string(first_node_block)),
            std::string::npos)
      << s.message();
  forest.reset();  // it shares the store
  store_.reset();
  ASSERT_EQ(env_->CorruptStoredBlock(*info, 0), "");
  Open();
  auto bad = StoreForest::Open(store_, "model");
  ASSERT_FALSE(bad.ok());
  EXPECT_TRUE(bad.status().IsCorruption()) << bad.status().ToString();
  EXPECT_NE(bad.status().message().find("block 0"), std::string::npos) << bad.status().message();
}

TEST_P(StoreForestTest, MissingForestsAndBadNamesAreClearErrors) {
  auto missing = StoreForest::Open(store_, "nothing-here");
  EXPECT_EQ(missing.status().code(), StatusCode::kNotFound) << missing.status().ToString();
  EXPECT_NE(missing.status().message().find("nothing-here"), std::string::npos);
  auto bad = StoreForest::Open(store_, "../etc");
  EXPECT_EQ(bad.status().code(), StatusCode::kInvalidArgument) << bad.status().ToString();
}

INSTANTIATE_TEST_SUITE_P(AllBackends, StoreForestTest,
                         ::testing::Values("rocksdb", "dir", "redis"));

// Forwards to a real store; while `fail` is set, reads fail as an
// unreachable store's do.
TEST(StoreForestFaults, AStoreFailingMidRequestGivesItsErrorAndTheNextRequestWorks) {
  std::string error;
  auto env = store_test::MakeEnv("dir", &error);
  auto opened = OpenBlockStore(env->Uri(), env->Options());
  ASSERT_TRUE(opened.ok());
  std::shared_ptr<BlockStore> store = std::move(*opened);
  const Forest f = TestForest(Flavor::kXgboost);
  PackOptions o;
  o.block_size = 256;
  auto bytes = PackForestToBuffer(f, o);
  ASSERT_TRUE(bytes.ok());
  ASSERT_TRUE(PublishBytes(*store, "model", *bytes, 256).ok());
  auto faults = std::make_shared<FaultInjectionStore>(store.get());
  auto forest = StoreForest::Open(faults, "model");
  ASSERT_TRUE(forest.ok()) << forest.status().ToString();
  const RowMatrix rows = MakeAdversarialRows(f, 10, 2);
  faults->FailAllReads(StatusCode::kUnavailable);
  std::vector<double> out;
  Status s = (*forest)->engine().PredictAll(rows, false, 1, &out);
  EXPECT_EQ(s.code(), StatusCode::kUnavailable) << s.ToString();
  faults->ClearFaults();
  ExpectSameAsInMemory(f, (*forest)->engine(), rows, "after the store came back");
}

// A real redis-server that dies or stops answering mid-request: an error
// within the store timeout (plus slack for a loaded machine), never a hang.
TEST(StoreForestFaults, ARedisServerThatDiesOrHangsGivesAnErrorWithinTheTimeout) {
  store_test::RedisEnv env;
  ASSERT_EQ(env.Start(), "");
  auto opened = OpenBlockStore(env.Uri(), StoreForest::ReadOptions(1000));
  auto writer = OpenBlockStore(env.Uri(), env.Options());
  ASSERT_TRUE(opened.ok() && writer.ok());
  const Forest f = TestForest(Flavor::kXgboost);
  PackOptions o;
  o.block_size = 256;
  auto bytes = PackForestToBuffer(f, o);
  ASSERT_TRUE(bytes.ok());
  ASSERT_TRUE(PublishBytes(**writer, "model", *bytes, 256).ok());
  writer->reset();
  StoreForestOptions no_cache;  // every request reads from the server
  no_cache.cache_bytes = 0;
  auto forest = StoreForest::Open(std::move(*opened), "model", no_cache);
  ASSERT_TRUE(forest.ok()) << forest.status().ToString();
  const RowMatrix rows = MakeAdversarialRows(f, 4, 2);
  std::vector<double> out;
  ::kill(env.server().pid(), SIGSTOP);
  auto t0 = std::chrono::steady_clock::now();
  Status s = (*forest)->engine().PredictAll(OneRow(rows, 0), false, 1, &out);
  double waited = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  ::kill(env.server().pid(), SIGCONT);
  EXPECT_EQ(s.code(), StatusCode::kUnavailable) << s.ToString();
  EXPECT_NE(s.message().find("no reply within"), std::string::npos) << s.message();
  EXPECT_LT(waited, 1.0 + 5.0) << "bounded by the 1 s store timeout";
  // The server answers again: so does the forest.
  ASSERT_TRUE((*forest)->engine().PredictAll(OneRow(rows, 1), false, 1, &out).ok());
  env.server().Kill();
  t0 = std::chrono::steady_clock::now();
  s = (*forest)->engine().PredictAll(OneRow(rows, 2), false, 1, &out);
  waited = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  EXPECT_EQ(s.code(), StatusCode::kUnavailable) << s.ToString();
  EXPECT_LT(waited, 1.0 + 5.0);
}

}  // namespace
}  // namespace pacset
