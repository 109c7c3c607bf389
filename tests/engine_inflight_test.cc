// The in-flight traversal (engine/engine.h): bit-identical to the warm walk
// and the in-memory predictor however blocks arrive, several blocks really
// in flight, and clear errors (naming the block) when a block fails, is
// corrupt or disappears — with nothing left hanging.
//
// The sources below wrap the real source over a real file on disk: they only
// hold blocks back, reorder, slow down, count or fail reads.
#include <fcntl.h>
#include <gtest/gtest.h>
#include <sys/mman.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <mutex>
#include <random>
#include <thread>

#include "engine/engine.h"
#include "layout/pack.h"
#include "model/predict.h"
#include "testkit/random_forest.h"
#include "tests/first_round_source.h"
#include "tests/flavor_params.h"
#include "tools/commands.h"
#include "util/atomic_file.h"

namespace pacset {
namespace {

using testing::DeepBinsPacking;
using testing::FirstRoundSource;
using testing::Flavor;
using testing::ForestWithDeepBins;
using testing::MakeAdversarialRows;
using testing::MakeRandomForest;
using testing::RandomForestSpec;

// A file in a TempDir, removed at the end of the test.
class TempFile {
 public:
  explicit TempFile(const std::string& bytes)
      : dir_(TempDir::Create("pacset-inflight").value()), path_(dir_->path() + "/file") {
    const int fd = open(path_.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
    EXPECT_GE(fd, 0);
    EXPECT_EQ(write(fd, bytes.data(), bytes.size()), static_cast<ssize_t>(bytes.size()));
    EXPECT_EQ(fsync(fd), 0);  // clean pages: DropPages can drop them
    close(fd);
  }
  const std::string& path() const { return path_; }
  // Evicts the file from the page cache: the next reads go to the disk.
  void DropPages() const {
    const int fd = open(path_.c_str(), O_RDONLY);
    EXPECT_EQ(posix_fadvise(fd, 0, 0, POSIX_FADV_DONTNEED), 0);
    close(fd);
  }

 private:
  std::unique_ptr<TempDir> dir_;
  std::string path_;
};

// Base for the wrappers: a block is Ready only once this wrapper delivered it
// (so every block a request needs goes through Fetch), never a warm image.
class HoldingSource : public BlockSource {
 public:
  explicit HoldingSource(std::unique_ptr<BlockSource> inner)
      : inner_(std::move(inner)), delivered_(new std::atomic<bool>[inner_->block_count()]) {
    for (uint64_t b = 0; b < inner_->block_count(); ++b) delivered_[b] = false;
  }
  uint32_t block_size() const override { return inner_->block_size(); }
  uint64_t block_count() const override { return inner_->block_count(); }
  const char* Ready(uint64_t b) override {
    return delivered_[b].load() ? inner_->Ready(b) : nullptr;
  }
  const char* WarmImage(uint64_t, uint64_t, uint64_t, bool) override { return nullptr; }

 protected:
  std::unique_ptr<BlockSource> inner_;
  std::unique_ptr<std::atomic<bool>[]> delivered_;
};

// Releases fetched blocks in random order, a random number at a time, after
// a random delay; the reads themselves are the real source's.
class ReorderingSource final : public HoldingSource {
 public:
  ReorderingSource(std::unique_ptr<BlockSource> inner, uint32_t seed)
      : HoldingSource(std::move(inner)), seed_(seed) {}
  std::unique_ptr<BlockFetcher> NewFetcher() override {
    return std::make_unique<Fetcher>(this, seed_ + fetchers_++);
  }
  uint64_t fetched() const { return fetched_; }

 private:
  class Fetcher final : public BlockFetcher {
   public:
    Fetcher(ReorderingSource* s, uint32_t seed)
        : s_(s), inner_(s->inner_->NewFetcher()), rng_(seed) {}
    void Fetch(uint64_t b) override {
      pending_.push_back(b);
      ++s_->fetched_;
    }
    Status Wait(std::vector<uint64_t>* arrived) override {
      if (pending_.empty()) return Status::Internal("nothing pending");
      std::shuffle(pending_.begin(), pending_.end(), rng_);
      const size_t n = 1 + rng_() % pending_.size();
      std::vector<uint64_t> now(pending_.end() - n, pending_.end());
      pending_.resize(pending_.size() - n);
      std::this_thread::sleep_for(std::chrono::microseconds(rng_() % 200));
      for (uint64_t b : now) inner_->Fetch(b);
      std::vector<uint64_t> got;
      while (got.size() < now.size()) {
        Status st = inner_->Wait(&got);
        if (!st.ok()) return st;
      }
      std::shuffle(got.begin(), got.end(), rng_);
      for (uint64_t b : got) s_->delivered_[b] = true;
      arrived->insert(arrived->end(), got.begin(), got.end());
      return Status::Ok();
    }

   private:
    ReorderingSource* s_;
    std::unique_ptr<BlockFetcher> inner_;
    std::mt19937 rng_;
    std::vector<uint64_t> pending_;
  };
  uint32_t seed_;
  std::atomic<uint32_t> fetchers_{0};
  std::atomic<uint64_t> fetched_{0};
};

// Every fetch is a real read of the block on its own thread after a sleep;
// counts how many reads run at once. Block `fail` (if set) fails its read.
class SlowSource final : public HoldingSource {
 public:
  SlowSource(std::unique_ptr<BlockSource> inner, const PacFile& file,
             std::chrono::microseconds delay, uint64_t fail = UINT64_MAX)
      : HoldingSource(std::move(inner)), file_(file), delay_(delay), fail_(fail) {}
  ~SlowSource() override {
    for (auto& t : threads_) t.join();
  }
  std::unique_ptr<BlockFetcher> NewFetcher() override { return std::make_unique<Fetcher>(this); }
  int max_concurrent() const { return max_concurrent_; }

 private:
  struct Done {
    std::mutex mu;
    std::condition_variable cv;
    std::vector<uint64_t> arrived;
    Status error;
  };
  class Fetcher final : public BlockFetcher {
   public:
    explicit Fetcher(SlowSource* s) : s_(s), done_(std::make_shared<Done>()) {}
    void Fetch(uint64_t b) override {
      std::lock_guard<std::mutex> lock(s_->mu_);
      s_->threads_.emplace_back([s = s_, done = done_, b] { s->Read(b, done.get()); });
    }
    Status Wait(std::vector<uint64_t>* arrived) override {
      std::unique_lock<std::mutex> lock(done_->mu);
      done_->cv.wait(lock, [&] { return !done_->arrived.empty() || !done_->error.ok(); });
      if (!done_->error.ok()) return done_->error;
      arrived->insert(arrived->end(), done_->arrived.begin(), done_->arrived.end());
      done_->arrived.clear();
      return Status::Ok();
    }

   private:
    SlowSource* s_;
    std::shared_ptr<Done> done_;
  };

  void Read(uint64_t b, Done* done) {
    const int now = ++concurrent_;
    for (int m = max_concurrent_; now > m && !max_concurrent_.compare_exchange_weak(m, now);) {
    }
    std::this_thread::sleep_for(delay_);
    std::string buf(file_.header().block_size, '\0');
    Status s = b == fail_ ? Status::IOError(file_.name() + " block " + std::to_string(b) +
                                            ": injected read failure")
                          : file_.ReadBlock(b, buf.data());
    if (s.ok())
      s = VerifyBlock(buf.data(), file_.header().block_size, b, file_.header().block_seed(),
                      file_.name());
    --concurrent_;
    if (s.ok()) delivered_[b] = true;
    std::lock_guard<std::mutex> lock(done->mu);
    if (s.ok()) {
      done->arrived.push_back(b);
    } else if (done->error.ok()) {
      done->error = s;
    }
    done->cv.notify_one();
  }

  const PacFile& file_;
  const std::chrono::microseconds delay_;
  const uint64_t fail_;
  std::atomic<int> concurrent_{0}, max_concurrent_{0};
  std::mutex mu_;
  std::vector<std::thread> threads_;
};

std::string PackToBytes(const Forest& f, const PackOptions& o) {
  auto bytes = PackForestToBuffer(f, o);
  EXPECT_TRUE(bytes.ok()) << bytes.status().ToString();
  return bytes.ok() ? *bytes : std::string();
}

// Predictions, margins and leaf ids, bit for bit.
struct Outputs {
  std::vector<double> pred, margin;
  std::vector<int32_t> leaves;
};

Outputs PredictEverything(const PacEngine& e, const RowMatrix& rows, int threads, bool leaves) {
  Outputs o;
  Status s = e.PredictAll(rows, false, threads, &o.pred);
  EXPECT_TRUE(s.ok()) << s.ToString();
  s = e.PredictAll(rows, true, threads, &o.margin);
  EXPECT_TRUE(s.ok()) << s.ToString();
  if (leaves) {
    s = e.PredictLeaves(rows, threads, &o.leaves);
    EXPECT_TRUE(s.ok()) << s.ToString();
  }
  return o;
}

void ExpectSameBits(const Outputs& a, const Outputs& b, const std::string& what) {
  ASSERT_EQ(a.pred.size(), b.pred.size()) << what;
  EXPECT_EQ(0, std::memcmp(a.pred.data(), b.pred.data(), a.pred.size() * 8)) << what;
  EXPECT_EQ(0, std::memcmp(a.margin.data(), b.margin.data(), a.margin.size() * 8)) << what;
  EXPECT_EQ(a.leaves, b.leaves) << what;
}

// The sequential reference: the in-memory predictor, one row and one tree at a time.
Outputs Reference(const Forest& f, const RowMatrix& rows) {
  ForestPredictor ref(f);
  Outputs o;
  const size_t C = f.num_prediction_columns(), K = f.num_outputs;
  o.pred.resize(rows.num_rows * C);
  o.margin.resize(rows.num_rows * K);
  for (size_t r = 0; r < rows.num_rows; ++r) {
    ref.Predict(rows.row(r), o.pred.data() + r * C);
    ref.PredictMargin(rows.row(r), o.margin.data() + r * K);
    for (size_t t = 0; t < f.num_trees(); ++t) o.leaves.push_back(ref.LeafIndex(t, rows.row(r)));
  }
  return o;
}

class InFlightEveryLayout : public ::testing::TestWithParam<testing::FlavorCase> {};

TEST_P(InFlightEveryLayout, MatchesTheSequentialWalkWithBlocksArrivingInRandomOrder) {
  RandomForestSpec spec;
  spec.flavor = GetParam().flavor;
  spec.trees = 40;
  spec.max_depth = 10;
  spec.seed = 17;
  const Forest f = MakeRandomForest(spec);
  const RowMatrix rows = MakeAdversarialRows(f, 120, 5);
  const Outputs want = Reference(f, rows);
  uint32_t seed = 1;
  for (LayoutKind layout : AllLayoutKinds()) {
    for (uint32_t bs : {4096u, 16384u}) {
      for (bool wide : {false, true}) {
        PackOptions o;
        o.layout = layout;
        o.block_size = bs;
        o.bin_depth = 2;
        o.force_wide_nodes = wide;
        const TempFile file(PackToBytes(f, o));
        const std::string what = std::string(GetParam().name) + " " + LayoutKindName(layout) +
                                 " bs " + std::to_string(bs) + (wide ? " wide" : "");
        ReorderingSource* reorder = nullptr;
        EngineOptions eo;
        eo.max_in_flight = 1 + seed % 16;
        auto engine = PacEngine::FromFile(
            PacFile::Open(file.path()).value(), eo,
            [&](const PacFile& pf, const EngineOptions& opts) -> std::unique_ptr<BlockSource> {
              auto s = std::make_unique<ReorderingSource>(
                  NewPacFileSource(pf, opts.verify_blocks, opts.max_in_flight), seed++);
              reorder = s.get();
              return s;
            });
        ASSERT_TRUE(engine.ok()) << engine.status().ToString();
        ExpectSameBits(want, PredictEverything(**engine, rows, 1 + seed % 2, true), what);
        EXPECT_GT(reorder->fetched(), 0u) << what;
        EXPECT_EQ((*engine)->stats().warm_requests, 0u) << what;
        // One row at a time too: the smallest request.
        std::vector<double> one(f.num_prediction_columns());
        for (size_t r = 0; r < 5; ++r) {
          ASSERT_TRUE((*engine)->Predict(rows, r, r + 1, false, one.data()).ok()) << what;
          EXPECT_EQ(0, std::memcmp(one.data(), &want.pred[r * one.size()], one.size() * 8))
              << what << " row " << r;
        }
        // And the same file walked warm (mapped, every block resident).
        auto warm = PacEngine::Open(file.path());
        ASSERT_TRUE(warm.ok());
        ExpectSameBits(want, PredictEverything(**warm, rows, 1, true), what + " warm");
        EXPECT_GT((*warm)->stats().warm_requests, 0u) << what;
      }
    }
  }
}

INSTANTIATE_TEST_SUITE_P(Flavors, InFlightEveryLayout, testing::AllFlavors(),
                         testing::FlavorCaseName);

TEST(InFlight, SplitsLargeRequestsIntoChunksWithTheSameResults) {
  RandomForestSpec spec;
  spec.flavor = Flavor::kSklearnReg;  // leaf records: values copied per chunk
  spec.trees = 300;
  spec.max_depth = 6;
  spec.seed = 3;
  const Forest f = MakeRandomForest(spec);
  const RowMatrix rows = MakeAdversarialRows(f, 700, 9);  // > 65536 walks: several chunks
  PackOptions o;
  o.block_size = 4096;
  const TempFile file(PackToBytes(f, o));
  auto engine = PacEngine::FromFile(
      PacFile::Open(file.path()).value(), {},
      [](const PacFile& pf, const EngineOptions& opts) -> std::unique_ptr<BlockSource> {
        return std::make_unique<ReorderingSource>(NewPacFileSource(pf, true, 8), 77);
      });
  ASSERT_TRUE(engine.ok());
  const Outputs want = Reference(f, rows);
  ExpectSameBits(want, PredictEverything(**engine, rows, 1, true), "chunks");
}

TEST(InFlight, KeepsSeveralBlocksInFlightWithinTheBound) {
  RandomForestSpec spec;
  spec.trees = 60;
  spec.max_depth = 12;
  spec.seed = 4;
  const Forest f = MakeRandomForest(spec);
  const RowMatrix rows = MakeAdversarialRows(f, 4, 2);
  PackOptions o;
  o.block_size = 4096;
  const TempFile file(PackToBytes(f, o));
  SlowSource* slow = nullptr;
  EngineOptions eo;
  eo.max_in_flight = 6;
  auto engine = PacEngine::FromFile(
      PacFile::Open(file.path()).value(), eo,
      [&](const PacFile& pf, const EngineOptions& opts) -> std::unique_ptr<BlockSource> {
        auto s = std::make_unique<SlowSource>(NewPacFileSource(pf, true, 1), pf,
                                              std::chrono::milliseconds(3));
        slow = s.get();
        return s;
      });
  ASSERT_TRUE(engine.ok());
  std::vector<double> out;
  ASSERT_TRUE((*engine)->PredictAll(rows, false, 1, &out).ok());
  EXPECT_GT(slow->max_concurrent(), 1);
  EXPECT_LE(slow->max_concurrent(), 6);
  ExpectSameBits(Reference(f, rows), PredictEverything(**engine, rows, 1, true), "slow");
}

// A forest, its bytes at 4 KiB and a row-0 block past the first one fetched.
struct Damaged {
  Forest forest;
  RowMatrix rows;
  std::string bytes;
  uint64_t block = 0;  // a node block row 0 touches, not its first
};

Damaged MakeDamaged() {
  Damaged d;
  RandomForestSpec spec;
  spec.trees = 50;
  spec.max_depth = 12;
  spec.seed = 8;
  d.forest = MakeRandomForest(spec);
  d.rows = MakeAdversarialRows(d.forest, 200, 3);
  PackOptions o;
  o.block_size = 4096;
  d.bytes = PackToBytes(d.forest, o);
  auto e = PacEngine::FromFile(PacFile::FromBuffer(d.bytes, "x").value());
  std::vector<uint64_t> touched;
  EXPECT_TRUE((*e)->TouchedBlocks(d.rows.row(0), &touched).ok());
  EXPECT_GT(touched.size(), 3u);
  d.block = touched[touched.size() / 2];
  return d;
}

TEST(InFlight, AFailedBlockMidBatchNamesTheBlockAndNothingHangs) {
  const Damaged d = MakeDamaged();
  const TempFile file(d.bytes);
  for (uint32_t bound : {1u, 4u, 32u}) {
    EngineOptions eo;
    eo.max_in_flight = bound;
    auto engine = PacEngine::FromFile(
        PacFile::Open(file.path()).value(), eo,
        [&](const PacFile& pf, const EngineOptions& opts) -> std::unique_ptr<BlockSource> {
          return std::make_unique<SlowSource>(NewPacFileSource(pf, true, 1), pf,
                                              std::chrono::microseconds(500), d.block);
        });
    ASSERT_TRUE(engine.ok());
    std::vector<double> out;
    Status s = (*engine)->PredictAll(d.rows, false, 2, &out);
    EXPECT_EQ(s.code(), StatusCode::kIOError) << s.ToString();
    EXPECT_NE(s.message().find("block " + std::to_string(d.block) + ": injected read failure"),
              std::string::npos)
        << s.message();
    // The engine (and its source, with reads still running) goes away here.
  }
}

// A cold request that walks many trees reads the whole node region in large
// sequential reads (cheaper than thousands of random ones), verifies it and
// walks it warm; a small one fetches only its blocks.
TEST(InFlight, ALargeColdRequestReadsTheRegionSequentiallyASmallOneOnlyItsBlocks) {
  RandomForestSpec spec;
  spec.trees = 20;
  spec.max_depth = 16;
  spec.split_probability = 0.88;  // big trees: one row walks far fewer trees than there are blocks
  Damaged d;
  d.forest = MakeRandomForest(spec);
  d.rows = MakeAdversarialRows(d.forest, 200, 3);
  PackOptions o;
  o.block_size = 4096;
  const TempFile file(PackToBytes(d.forest, o));
  const Outputs want = Reference(d.forest, d.rows);
  file.DropPages();
  auto engine = PacEngine::Open(file.path());
  ASSERT_TRUE(engine.ok());
  std::vector<double> one(d.forest.num_prediction_columns());
  ASSERT_TRUE((*engine)->Predict(d.rows, 0, 1, false, one.data()).ok());
  EXPECT_EQ(0, std::memcmp(one.data(), want.pred.data(), one.size() * 8));
  EngineStats s = (*engine)->stats();
  EXPECT_EQ(s.inflight_requests, 1u);
  EXPECT_GT(s.blocks_fetched, 0u);
  file.DropPages();
  std::vector<double> out;
  ASSERT_TRUE((*engine)->PredictAll(d.rows, false, 1, &out).ok());
  EXPECT_EQ(0, std::memcmp(out.data(), want.pred.data(), out.size() * 8));
  const EngineStats s2 = (*engine)->stats();
  EXPECT_EQ(s2.warm_requests, 1u);
  EXPECT_EQ(s2.blocks_fetched, s.blocks_fetched);  // nothing fetched block by block
  // Without sequential reads (per-request tracing) it fetches only what it walks.
  engine->reset();  // unmapped, so the pages can be dropped
  file.DropPages();
  EngineOptions exact;
  exact.sequential_reads = false;
  auto engine2 = PacEngine::Open(file.path(), exact);
  ASSERT_TRUE(engine2.ok());
  ASSERT_TRUE((*engine2)->PredictAll(d.rows, false, 1, &out).ok());
  EXPECT_EQ(0, std::memcmp(out.data(), want.pred.data(), out.size() * 8));
  EXPECT_EQ((*engine2)->stats().warm_requests, 0u);
  EXPECT_GT((*engine2)->stats().blocks_fetched, 0u);
}

// Issue 13 item 9: one flipped bit in a node block of a local file is caught
// the first time a walk needs the block, cold or warm, and no prediction is
// ever made from it.
TEST(InFlight, AFlippedBitInANodeBlockIsAnErrorNamingItNeverAWrongPrediction) {
  const Damaged d = MakeDamaged();
  const Outputs ref = Reference(d.forest, d.rows);
  // Flip the sign bit of a threshold in the block: the first node whose flip
  // changes some prediction when nothing verifies (so there is something to
  // catch).
  EngineOptions off;
  off.verify_blocks = false;
  std::string bad;
  std::vector<double> out;
  for (uint32_t node = 0; node < 4080 / 16 && bad.empty(); ++node) {
    std::string b = d.bytes;
    b[d.block * 4096 + node * 16 + 3] ^= static_cast<char>(0x80);
    auto e = PacEngine::FromFile(PacFile::FromBuffer(b, "x").value(), off);
    if ((*e)->PredictAll(d.rows, false, 1, &out).ok() &&
        std::memcmp(out.data(), ref.pred.data(), out.size() * 8) != 0)
      bad = b;
  }
  ASSERT_FALSE(bad.empty());
  const TempFile file(bad);
  const std::string want = "block " + std::to_string(d.block) + ": checksum mismatch";
  const size_t C = d.forest.num_prediction_columns();

  // Cold: one row at a time through the in-flight walk; every row either
  // fails naming the block or predicts exactly.
  auto cold = PacEngine::Open(file.path());
  ASSERT_TRUE(cold.ok());
  int failed = 0;
  std::vector<double> one(C);
  for (size_t r = 0; r < d.rows.num_rows; ++r) {
    file.DropPages();  // each row starts cold
    Status s = (*cold)->Predict(d.rows, r, r + 1, false, one.data());
    if (!s.ok()) {
      ++failed;
      EXPECT_TRUE(s.IsCorruption()) << s.ToString();
      EXPECT_NE(s.message().find(want), std::string::npos) << s.message();
    } else {
      EXPECT_EQ(0, std::memcmp(one.data(), &ref.pred[r * C], C * 8)) << "row " << r;
    }
  }
  EXPECT_GT(failed, 0);
  // Warm: a fresh engine, a request big enough to promote: refused, checked walk reports it.
  auto warm = PacEngine::Open(file.path());
  ASSERT_TRUE(warm.ok());
  Status s = (*warm)->PredictAll(d.rows, false, 1, &out);
  EXPECT_TRUE(s.IsCorruption()) << s.ToString();
  EXPECT_NE(s.message().find(want), std::string::npos) << s.message();
  // The command line: a nonzero exit (an error status), no output rows.
  const TempFile csv("");
  {
    std::ofstream out_csv(csv.path());
    char num[64];
    for (size_t r = 0; r < d.rows.num_rows; ++r) {
      for (size_t c = 0; c < d.rows.num_cols; ++c) {
        std::snprintf(num, sizeof(num), "%.17g", d.rows.row(r)[c]);
        out_csv << (c ? "," : "") << num;
      }
      out_csv << "\n";
    }
  }
  PredictOptions po;
  po.model = file.path();
  po.input = csv.path();
  po.output = csv.path() + ".out";
  s = RunPredict(po);
  EXPECT_TRUE(s.IsCorruption()) << s.ToString();
  unlink(po.output.c_str());
  // --no-verify opts out, and then the flipped bit does give wrong
  // predictions from the file too: what verification prevents.
  auto unverified = PacEngine::Open(file.path(), off);
  ASSERT_TRUE(unverified.ok());
  ASSERT_TRUE((*unverified)->PredictAll(d.rows, false, 1, &out).ok());
  EXPECT_NE(0, std::memcmp(out.data(), ref.pred.data(), out.size() * 8));
}

// Issue 13 item 12: a file truncated after it was opened. A block the
// engine has not read yet fails its pread (a Status); a block it walks from
// the mapping raises SIGBUS, which becomes kIOError without jumping over any
// destructor (run under the sanitizer build). Either names the block.
TEST(InFlight, AFileTruncatedAfterOpeningGivesAnIOErrorNamingTheBlock) {
  const Damaged d = MakeDamaged();
  for (BlockIo io : {BlockIo::kUring, BlockIo::kThreads}) {
    const TempFile file(d.bytes);
    file.DropPages();
    EngineOptions eo;
    eo.block_io = io;
    auto cold = PacEngine::Open(file.path(), eo);
    ASSERT_TRUE(cold.ok());
    ASSERT_EQ(truncate(file.path().c_str(), 4096 * 4), 0);
    std::vector<double> out;
    Status s = (*cold)->PredictAll(d.rows, false, 1, &out);
    EXPECT_EQ(s.code(), StatusCode::kIOError) << s.ToString();
    EXPECT_NE(s.message().find(": block "), std::string::npos) << s.message();
    EXPECT_NE(s.message().find("could not be read"), std::string::npos) << s.message();
  }
  {
    const TempFile file(d.bytes);
    // The mapping's nodes, not the warm forest's private copy of them.
    EngineOptions mapping_only;
    mapping_only.warm_forest = false;
    auto warm = PacEngine::Open(file.path(), mapping_only);
    ASSERT_TRUE(warm.ok());
    std::vector<double> out;
    ASSERT_TRUE((*warm)->PredictAll(d.rows, false, 1, &out).ok());
    ASSERT_EQ((*warm)->stats().warm_requests, 1u);  // now walking the mapping
    ASSERT_EQ(truncate(file.path().c_str(), 4096 * 4), 0);
    Status s = (*warm)->PredictAll(d.rows, false, 1, &out);
    EXPECT_EQ((*warm)->stats().warm_requests, 2u);
    EXPECT_EQ(s.code(), StatusCode::kIOError) << s.ToString();
    EXPECT_NE(s.message().find(": block "), std::string::npos) << s.message();
    EXPECT_NE(s.message().find("could not be read"), std::string::npos) << s.message();
  }
}

// A 60-tree forest of paths up to 14 deep packed at 4 KiB into a file on
// disk (more blocks than one ring holds), `n` adversarial rows and the
// in-memory predictor's outputs for them.
struct ColdForest {
  static Forest Make(uint32_t seed) {
    RandomForestSpec spec;
    spec.trees = 60;
    spec.max_depth = 14;
    spec.split_probability = 0.85;
    spec.seed = seed;
    return MakeRandomForest(spec);
  }
  static std::string Pack(const Forest& f) {
    PackOptions o;
    o.block_size = 4096;
    return PackToBytes(f, o);
  }
  ColdForest(uint32_t seed, size_t n)
      : forest(Make(seed)),
        rows(MakeAdversarialRows(forest, n, 4)),
        want(Reference(forest, rows)),
        file(Pack(forest)) {}
  // An engine that fetches every block it needs through `io` (never the
  // node region in one sequential read).
  StatusOr<std::unique_ptr<PacEngine>> OpenForFetches(BlockIo io) const {
    EngineOptions eo;
    eo.block_io = io;
    eo.sequential_reads = false;
    return PacEngine::Open(file.path(), eo);
  }
  Forest forest;
  RowMatrix rows;
  Outputs want;
  TempFile file;
};

// Both ways of reading a cold file's blocks (io_uring, a pread thread pool)
// give the reference's bits, one row at a time and for every row at once,
// with more blocks to read than one ring holds; --timing names which ran.
TEST(InFlight, IoUringAndThreadReadsOfAColdFileGiveTheSameBits) {
  const ColdForest cold(23, 40);
  const Forest& f = cold.forest;
  const RowMatrix& rows = cold.rows;
  const Outputs& want = cold.want;
  const TempFile& file = cold.file;
  for (BlockIo io : {BlockIo::kThreads, BlockIo::kUring, BlockIo::kAuto}) {
    for (uint32_t depth : {1u, 4u, 32u}) {
      const std::string what = std::string("io ") + std::to_string(static_cast<int>(io)) +
                               " depth " + std::to_string(depth);
      file.DropPages();
      EngineOptions eo;
      eo.block_io = io;
      eo.max_in_flight = depth;
      eo.sequential_reads = false;  // every block through the fetcher
      auto engine = PacEngine::Open(file.path(), eo);
      ASSERT_TRUE(engine.ok()) << engine.status().ToString();
      const std::string used = (*engine)->stats().block_io;
      if (io == BlockIo::kThreads) {
        EXPECT_EQ(used, "threads") << what;
      }
      if (io != BlockIo::kThreads && used != "io_uring") {
        GTEST_SKIP() << "this kernel refuses io_uring (" << used << " used)";
      }
      std::vector<double> one(f.num_prediction_columns());
      for (size_t r = 0; r < 3; ++r) {
        ASSERT_TRUE((*engine)->Predict(rows, r, r + 1, false, one.data()).ok()) << what;
        EXPECT_EQ(0, std::memcmp(one.data(), &want.pred[r * one.size()], one.size() * 8))
            << what << " row " << r;
      }
      ExpectSameBits(want, PredictEverything(**engine, rows, 2, true), what);
      EXPECT_GT((*engine)->stats().blocks_fetched, depth) << what;
      EXPECT_EQ((*engine)->stats().warm_requests, 0u) << what;
    }
  }
}

// KiB of `path`'s mappings in this process that are in its page tables
// (/proc/self/smaps Rss): the pages walks touched through the mapping.
uint64_t MappedResidentKiB(const std::string& path) {
  std::ifstream smaps("/proc/self/smaps");
  std::string line;
  bool in_file = false;
  uint64_t kib = 0;
  while (std::getline(smaps, line)) {
    // A mapping's first line has its address range, then the path (if any).
    const bool header = line.find('-') < line.find(' ') && line.find(':') > line.find(' ');
    if (header)
      in_file = line.size() >= path.size() &&
                line.compare(line.size() - path.size(), path.size(), path) == 0;
    if (in_file && line.rfind("Rss:", 0) == 0) kib += std::stoull(line.substr(4));
  }
  return kib;
}

// The blocks a cold request read reach its walks as the fetcher's copies:
// they are not touched through the mapping (a page fault each), whichever
// way they were read. Only a block a walk reaches after the wait that
// brought it (walks of another tree) is read through the mapping.
TEST(InFlight, AColdRequestWalksTheBlocksItReadWithoutMappingThem) {
  const ColdForest cold(29, 4);
  for (BlockIo io : {BlockIo::kThreads, BlockIo::kUring}) {
    const std::string what = io == BlockIo::kThreads ? "threads" : "io_uring";
    cold.file.DropPages();
    auto engine = cold.OpenForFetches(io);
    ASSERT_TRUE(engine.ok()) << engine.status().ToString();
    if (io == BlockIo::kUring && std::string((*engine)->stats().block_io) != "io_uring")
      GTEST_SKIP() << "this kernel refuses io_uring";
    const uint64_t before = MappedResidentKiB(cold.file.path());
    std::vector<double> one(cold.forest.num_prediction_columns());
    ASSERT_TRUE((*engine)->Predict(cold.rows, 0, 1, false, one.data()).ok()) << what;
    EXPECT_EQ(0, std::memcmp(one.data(), cold.want.pred.data(), one.size() * 8)) << what;
    const uint64_t fetched = (*engine)->stats().blocks_fetched;
    const uint64_t mapped_pages = (MappedResidentKiB(cold.file.path()) - before) / 4;
    ASSERT_GT(fetched, 20u) << what;
    EXPECT_LT(mapped_pages, fetched / 2)
        << what << ": " << fetched << " blocks read, " << mapped_pages << " pages mapped";
  }
}

// Every row passes through (nearly) every block of the bins, striped level
// by level: a cold request asks for all of them before its first wait, not
// one level per round, and predicts the reference's bits; a warm one asks
// for none of them.
TEST(InFlight, AColdRequestAsksForTheWholeBinRegionInItsFirstRound) {
  const Forest f = ForestWithDeepBins();
  const RowMatrix rows = MakeAdversarialRows(f, 2, 5);
  const PackOptions o = DeepBinsPacking();
  const TempFile file(PackToBytes(f, o));
  const Outputs want = Reference(f, rows);
  auto pf = PacFile::Open(file.path());
  ASSERT_TRUE(pf.ok());
  const uint64_t first = (*pf)->header().node_first_block;
  const uint64_t bins = (*pf)->header().bin_block_count;
  ASSERT_GE(bins, 8u);  // levels 0-4 of 300 trees: several blocks, several levels
  for (BlockIo io : {BlockIo::kThreads, BlockIo::kUring}) {
    const std::string what = io == BlockIo::kThreads ? "threads" : "io_uring";
    file.DropPages();
    FirstRoundSource* source = nullptr;
    EngineOptions eo;
    eo.block_io = io;
    eo.sequential_reads = false;
    eo.max_in_flight = 128;
    auto engine = PacEngine::FromFile(
        PacFile::Open(file.path()).value(), eo,
        [&](const PacFile& p, const EngineOptions& opts) -> std::unique_ptr<BlockSource> {
          auto s = std::make_unique<FirstRoundSource>(NewPacFileSource(p, true, 8, opts.block_io));
          source = s.get();
          return s;
        });
    ASSERT_TRUE(engine.ok()) << engine.status().ToString();
    std::vector<double> one(f.num_prediction_columns());
    ASSERT_TRUE((*engine)->Predict(rows, 0, 1, false, one.data()).ok()) << what;
    EXPECT_EQ(0, std::memcmp(one.data(), want.pred.data(), one.size() * 8)) << what;
    std::vector<uint64_t> asked = source->first_round();
    std::sort(asked.begin(), asked.end());
    for (uint64_t b = first; b < first + bins; ++b)
      EXPECT_TRUE(std::binary_search(asked.begin(), asked.end(), b))
          << what << ": bin block " << b << " not asked for in the first round";
    // Warm now: the second row's request asks for no bin block at all.
    const uint64_t before = source->first_round().size();
    ASSERT_TRUE((*engine)->Predict(rows, 1, 2, false, one.data()).ok()) << what;
    EXPECT_EQ(0, std::memcmp(one.data(), &want.pred[one.size()], one.size() * 8)) << what;
    const std::vector<uint64_t> later = source->first_round();
    for (size_t i = before; i < later.size(); ++i)
      EXPECT_FALSE(later[i] >= first && later[i] < first + bins)
          << what << ": bin block " << later[i] << " asked for again";
  }
}

// A file partly in the page cache: a request fetches exactly the blocks it
// needs that are not there (found by one look per window of the file) and
// walks the others in place, with the reference's bits.
TEST(InFlight, APartlyResidentFileFetchesExactlyTheMissingBlocksARowNeeds) {
  const ColdForest cold(31, 4);
  std::vector<uint64_t> touched;
  {
    auto engine = PacEngine::Open(cold.file.path());
    ASSERT_TRUE(engine.ok());
    ASSERT_TRUE((*engine)->TouchedBlocks(cold.rows.row(1), &touched).ok());
  }
  ASSERT_GT(touched.size(), 20u);
  for (BlockIo io : {BlockIo::kThreads, BlockIo::kUring}) {
    const std::string what = io == BlockIo::kThreads ? "threads" : "io_uring";
    cold.file.DropPages();
    // Every third block the row needs is read back (no read-ahead: only it).
    const int fd = open(cold.file.path().c_str(), O_RDONLY);
    ASSERT_GE(fd, 0);
    ASSERT_EQ(posix_fadvise(fd, 0, 0, POSIX_FADV_RANDOM), 0);
    std::string buf(4096, '\0');
    uint64_t resident = 0;
    for (size_t i = 0; i < touched.size(); i += 3, ++resident)
      ASSERT_EQ(pread(fd, buf.data(), buf.size(), static_cast<off_t>(touched[i] * 4096)), 4096);
    close(fd);
    auto engine = cold.OpenForFetches(io);
    ASSERT_TRUE(engine.ok()) << engine.status().ToString();
    if (io == BlockIo::kUring && std::string((*engine)->stats().block_io) != "io_uring")
      GTEST_SKIP() << "this kernel refuses io_uring";
    std::vector<double> one(cold.forest.num_prediction_columns());
    ASSERT_TRUE((*engine)->Predict(cold.rows, 1, 2, false, one.data()).ok()) << what;
    EXPECT_EQ(0, std::memcmp(one.data(), &cold.want.pred[one.size()], one.size() * 8)) << what;
    EXPECT_EQ((*engine)->stats().blocks_fetched, touched.size() - resident) << what;
  }
}

// A block the kernel evicted after the engine verified it (memory is short)
// is fetched again with the request's other misses, not faulted in through
// the mapping one page at a time in the walk's path (engine/DESIGN.md,
// "When memory is short").
TEST(InFlight, ABlockEvictedAfterItWasVerifiedIsFetchedAgainNotFaultedIn) {
  const ColdForest cold(37, 4);
  std::vector<uint64_t> touched;
  {
    auto engine = PacEngine::Open(cold.file.path());
    ASSERT_TRUE(engine.ok());
    ASSERT_TRUE((*engine)->TouchedBlocks(cold.rows.row(1), &touched).ok());
  }
  ASSERT_GT(touched.size(), 20u);
  for (BlockIo io : {BlockIo::kThreads, BlockIo::kUring}) {
    const std::string what = io == BlockIo::kThreads ? "threads" : "io_uring";
    cold.file.DropPages();
    auto engine = cold.OpenForFetches(io);
    ASSERT_TRUE(engine.ok()) << engine.status().ToString();
    if (io == BlockIo::kUring && std::string((*engine)->stats().block_io) != "io_uring")
      GTEST_SKIP() << "this kernel refuses io_uring";
    std::vector<double> one(cold.forest.num_prediction_columns());
    ASSERT_TRUE((*engine)->Predict(cold.rows, 1, 2, false, one.data()).ok()) << what;
    const uint64_t first = (*engine)->stats().blocks_fetched;
    EXPECT_EQ(first, touched.size()) << what;
    // Evicted: unmapped from this process and dropped from the page cache.
    const PacFile& file = (*engine)->file();
    ASSERT_EQ(madvise(const_cast<char*>(file.data()), file.size(), MADV_DONTNEED), 0);
    cold.file.DropPages();
    ASSERT_TRUE((*engine)->Predict(cold.rows, 1, 2, false, one.data()).ok()) << what;
    EXPECT_EQ(0, std::memcmp(one.data(), &cold.want.pred[one.size()], one.size() * 8)) << what;
    EXPECT_EQ((*engine)->stats().blocks_fetched - first, touched.size()) << what;
  }
}

// A request that ends with reads queued or in flight (it failed, or gave
// up) leaves the source's pooled ring clean: the next request gets exactly
// the blocks it asked for.
TEST(InFlight, AFetcherDroppedWithReadsInFlightLeavesTheNextRequestItsOwnBlocks) {
  RandomForestSpec spec;
  spec.trees = 30;
  spec.max_depth = 12;
  const Forest f = MakeRandomForest(spec);
  PackOptions o;
  o.block_size = 4096;
  const TempFile file(PackToBytes(f, o));
  file.DropPages();
  auto pf = PacFile::Open(file.path());
  ASSERT_TRUE(pf.ok());
  auto source = NewPacFileSource(**pf, true, 8, BlockIo::kUring);
  if (std::string(source->io_name()) != "io_uring") GTEST_SKIP() << "no io_uring here";
  const uint64_t n = source->block_count();
  ASSERT_GT(n, 20u);
  {
    auto dropped = source->NewFetcher();
    for (uint64_t b = 0; b < 12; ++b) dropped->Fetch(b);  // queued, never waited for
  }
  {
    auto waited_once = source->NewFetcher();
    for (uint64_t b = 0; b < 12; ++b) waited_once->Fetch(b);
    std::vector<uint64_t> arrived;
    ASSERT_TRUE(waited_once->Wait(&arrived).ok());  // some still in flight when dropped
  }
  auto fetcher = source->NewFetcher();
  std::vector<uint64_t> want;
  for (uint64_t b = n - 1; b >= n - 10; --b) {
    if (source->Ready(b)) continue;
    fetcher->Fetch(b);
    want.push_back(b);
  }
  std::vector<uint64_t> got;
  while (got.size() < want.size()) ASSERT_TRUE(fetcher->Wait(&got).ok());
  std::sort(want.begin(), want.end());
  std::sort(got.begin(), got.end());
  EXPECT_EQ(got, want);
  for (uint64_t b : got) EXPECT_NE(source->Ready(b), nullptr) << "block " << b;
}

}  // namespace
}  // namespace pacset
