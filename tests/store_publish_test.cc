// PublishFile / ExportToFile / VerifyForest: whole .pac files in and out.
#include <gtest/gtest.h>

#include <sys/stat.h>

#include <cerrno>
#include <chrono>
#include <cstring>
#include <fstream>
#include <sstream>

#include "store/fault_injection_store.h"
#include "store/publish.h"
#include "testkit/store_env.h"
#include "testkit/test_blocks.h"
#include "tests/deadline.h"
#include "tests/test_files.h"
#include "util/atomic_file.h"
#include "util/file_io.h"

namespace pacset {
namespace {

using store_test::MakeBlock;

void WriteFile(const std::string& path, const std::string& bytes) {
  std::ofstream(path, std::ios::binary) << bytes;
}

std::string PacBytes(uint32_t bs, uint64_t count, uint64_t seed) {
  std::string bytes;
  for (uint64_t i = 0; i < count; ++i) bytes += MakeBlock(bs, i, seed);
  return bytes;
}

class PublishTest : public ::testing::TestWithParam<std::string> {
 protected:
  void SetUp() override {
    std::string error;
    env_ = store_test::MakeEnv(GetParam(), &error);
    ASSERT_TRUE(error.empty()) << error;
    auto s = OpenBlockStore(env_->Uri(), env_->Options());
    ASSERT_TRUE(s.ok()) << s.status().ToString();
    store_ = std::move(*s);
  }
  std::string Path(const std::string& leaf) const { return tmp_->path() + "/" + leaf; }

  std::unique_ptr<TempDir> tmp_ = TempDir::Create("pacset-store").value();
  std::unique_ptr<store_test::StoreEnv> env_;
  std::unique_ptr<BlockStore> store_;
};

TEST_P(PublishTest, ExportIsByteIdenticalToThePublishedFile) {
  for (uint32_t bs : {4096u, 65536u}) {
    const std::string bytes = PacBytes(bs, 1500 * 4096 / bs + 3, bs);  // more than one batch
    WriteFile(Path("in.pac"), bytes);
    ForestInfo meta;
    meta.header_checksum = 0x1234;
    meta.source_format = "pac";
    meta.source_library = "";
    uint64_t gen = 0;
    Status s = PublishFile(*store_, "model", Path("in.pac"), bs, meta, &gen);
    ASSERT_TRUE(s.ok()) << s.ToString();
    auto info = store_->Lookup("model");
    ASSERT_TRUE(info.ok());
    EXPECT_EQ(info->generation, gen);
    EXPECT_EQ(info->size_bytes, bytes.size());
    EXPECT_EQ(info->header_checksum, 0x1234u);
    EXPECT_EQ(info->source_file, "in.pac");
    ASSERT_TRUE(ExportToFile(*store_, *info, Path("out.pac")).ok());
    EXPECT_TRUE(::pacset::testing::ReadAll(Path("out.pac")) == bytes) << "block size " << bs;
    auto bad = VerifyForest(*store_, *info);
    ASSERT_TRUE(bad.ok());
    EXPECT_TRUE(bad->empty());
  }
}

TEST_P(PublishTest, AFileThatIsNotAWholeNumberOfBlocksIsRejected) {
  WriteFile(Path("cut.pac"), PacBytes(4096, 3, 1).substr(0, 3 * 4096 - 100));
  Status s = PublishFile(*store_, "model", Path("cut.pac"), 4096, ForestInfo{}, nullptr);
  EXPECT_EQ(s.code(), StatusCode::kInvalidArgument) << s.ToString();
  EXPECT_NE(s.message().find("not a multiple of the block size 4096"), std::string::npos)
      << s.ToString();
  EXPECT_EQ(store_->Lookup("model").status().code(), StatusCode::kNotFound);
}

TEST_P(PublishTest, MissingEmptyAndBadBlockSizeInputsAreClearErrors) {
  EXPECT_EQ(PublishFile(*store_, "m", Path("nope.pac"), 4096, ForestInfo{}, nullptr).code(),
            StatusCode::kNotFound);
  WriteFile(Path("empty.pac"), "");
  EXPECT_EQ(PublishFile(*store_, "m", Path("empty.pac"), 4096, ForestInfo{}, nullptr).code(),
            StatusCode::kInvalidArgument);
  WriteFile(Path("ok.pac"), PacBytes(4096, 1, 1));
  EXPECT_EQ(PublishFile(*store_, "m", Path("ok.pac"), 3000, ForestInfo{}, nullptr).code(),
            StatusCode::kInvalidArgument);
  EXPECT_EQ(PublishFile(*store_, "bad/name", Path("ok.pac"), 4096, ForestInfo{}, nullptr).code(),
            StatusCode::kInvalidArgument);
}

TEST_P(PublishTest, AnInputThatIsNotARegularFileIsRefusedAtOnce) {
  const std::string fifo = Path("fifo.pac");  // nobody writes to it: open(2) used to wait
  ASSERT_EQ(::mkfifo(fifo.c_str(), 0600), 0) << std::strerror(errno);
  Status s = ::pacset::testing::FinishesWithin(std::chrono::seconds(20), "PublishFile(FIFO)", [&] {
    return PublishFile(*store_, "m", fifo, 4096, ForestInfo{}, nullptr);
  });
  EXPECT_EQ(s.code(), StatusCode::kInvalidArgument) << s.ToString();
  EXPECT_EQ(s.message(), fifo + " is a FIFO, not a regular file");
  s = PublishFile(*store_, "m", tmp_->path(), 4096, ForestInfo{}, nullptr);
  EXPECT_EQ(s.message(), tmp_->path() + " is a directory, not a regular file");
  EXPECT_EQ(store_->Lookup("m").status().code(), StatusCode::kNotFound);
}

TEST_P(PublishTest, ACorruptInputFileIsRejectedAndThePreviousGenerationStays) {
  WriteFile(Path("good.pac"), PacBytes(4096, 8, 1));
  uint64_t g1 = 0;
  ASSERT_TRUE(PublishFile(*store_, "model", Path("good.pac"), 4096, ForestInfo{}, &g1).ok());
  std::string bytes = PacBytes(4096, 8, 2);
  bytes[5 * 4096 + 17] ^= 0x40;
  WriteFile(Path("bad.pac"), bytes);
  Status s = PublishFile(*store_, "model", Path("bad.pac"), 4096, ForestInfo{}, nullptr);
  EXPECT_EQ(s.code(), StatusCode::kCorruption) << s.ToString();
  EXPECT_NE(s.message().find("file " + Path("bad.pac") + " block 5"), std::string::npos)
      << s.ToString();
  auto cur = store_->Lookup("model");
  ASSERT_TRUE(cur.ok());
  EXPECT_EQ(cur->generation, g1);
  ASSERT_TRUE(ExportToFile(*store_, *cur, Path("out.pac")).ok());
  EXPECT_TRUE(::pacset::testing::ReadAll(Path("out.pac")) == PacBytes(4096, 8, 1));
  ASSERT_TRUE(store_->CollectGarbage().ok());
  EXPECT_EQ(store_->Stat()->pending, 0u);
}

TEST_P(PublishTest, BlocksInTheWrongPlaceAreRejected) {
  std::string bytes = PacBytes(4096, 4, 1);
  std::string swapped = bytes.substr(0, 4096) + bytes.substr(2 * 4096, 4096) +
                        bytes.substr(4096, 4096) + bytes.substr(3 * 4096);
  WriteFile(Path("swapped.pac"), swapped);
  Status s = PublishFile(*store_, "model", Path("swapped.pac"), 4096, ForestInfo{}, nullptr);
  EXPECT_EQ(s.code(), StatusCode::kCorruption) << s.ToString();
  EXPECT_NE(s.message().find("block 1: holds block 2 instead"), std::string::npos) << s.ToString();
}

TEST_P(PublishTest, AFailedExportLeavesTheDestinationUntouched) {
  WriteFile(Path("in.pac"), PacBytes(4096, 6, 1));
  ASSERT_TRUE(PublishFile(*store_, "model", Path("in.pac"), 4096, ForestInfo{}, nullptr).ok());
  auto info = store_->Lookup("model");
  ASSERT_TRUE(info.ok());
  WriteFile(Path("dest.pac"), "previous contents");
  FaultInjectionStore faulty(store_.get());
  faulty.CorruptBlock(4);
  Status s = ExportToFile(faulty, *info, Path("dest.pac"));
  EXPECT_EQ(s.code(), StatusCode::kCorruption) << s.ToString();
  EXPECT_EQ(::pacset::testing::ReadAll(Path("dest.pac")), "previous contents");
  auto names = ListDir(tmp_->path());
  ASSERT_TRUE(names.ok());
  for (const auto& n : *names) EXPECT_EQ(n.find(".tmp-"), std::string::npos) << n;
}

TEST_P(PublishTest, VerifyForestReportsEveryBadBlockAcrossBatches) {
  WriteFile(Path("in.pac"), PacBytes(4096, 2100, 1));
  ASSERT_TRUE(PublishFile(*store_, "model", Path("in.pac"), 4096, ForestInfo{}, nullptr).ok());
  auto info = store_->Lookup("model");
  ASSERT_TRUE(info.ok());
  FaultInjectionStore faulty(store_.get());
  for (uint64_t b : {0u, 1023u, 1024u, 2099u}) faulty.CorruptBlock(b);
  auto bad = VerifyForest(faulty, *info);
  ASSERT_TRUE(bad.ok()) << bad.status().ToString();
  EXPECT_EQ(*bad, (std::vector<uint64_t>{0, 1023, 1024, 2099}));
  faulty.ClearFaults();
  faulty.FailAllReads(StatusCode::kUnavailable);
  EXPECT_EQ(VerifyForest(faulty, *info).status().code(), StatusCode::kUnavailable);
}

INSTANTIATE_TEST_SUITE_P(AllBackends, PublishTest, ::testing::Values("rocksdb", "dir", "redis"),
                         [](const ::testing::TestParamInfo<std::string>& p) { return p.param; });

}  // namespace
}  // namespace pacset
