// dir: specifics: how a batch's blocks reach the generation file.
#include <gtest/gtest.h>
#include <unistd.h>

#include <string>
#include <vector>

#include "store/block_store.h"
#include "store/internal/backends.h"
#include "testkit/page_cache.h"
#include "testkit/test_blocks.h"
#include "util/atomic_file.h"

namespace pacset {
namespace {

using store_test::DirectReadsWork;
using store_test::EvictFromPageCache;
using store_test::MakeBlock;
using store_test::ResidentPages;
using store_test::WriteForest;

// A dir store in a temporary directory with one forest of `blocks` blocks of
// `bs` bytes, whose generation file is out of the page cache.
class DirStoreTest : public ::testing::Test {
 protected:
  // False (and the test skipped) where the file system keeps the file's
  // pages resident (tmpfs) or, with `direct`, refuses O_DIRECT.
  bool Make(bool direct, uint32_t bs, uint64_t blocks) {
    StoreOptions o;
    o.direct_reads = direct;
    auto store = OpenBlockStore("dir:" + tmp_->path() + "/store", o);
    EXPECT_TRUE(store.ok()) << store.status().ToString();
    if (!store.ok()) return false;
    store_ = std::move(*store);
    bs_ = bs;
    uint64_t gen = 0;
    EXPECT_TRUE(WriteForest(*store_, "model", bs, blocks, &gen).ok());
    auto info = store_->Lookup("model");
    EXPECT_TRUE(info.ok()) << info.status().ToString();
    if (!info.ok()) return false;
    info_ = *info;
    file_ = tmp_->path() + "/store/" + store_internal::DirGenerationFile("model", gen);
    return true;
  }
  bool Evict(bool direct) {
    if (direct && !DirectReadsWork(file_)) return false;
    return EvictFromPageCache(file_);
  }

  // Reads `want` in one batch and each of `singles` with Get; checks bytes.
  void Read(const std::vector<uint64_t>& want, const std::vector<uint64_t>& singles) {
    std::vector<std::string> got;
    Status s = store_->MultiGet(info_, want, &got);
    ASSERT_TRUE(s.ok()) << s.ToString();
    ASSERT_EQ(got.size(), want.size());
    for (size_t i = 0; i < want.size(); ++i)
      EXPECT_EQ(got[i], MakeBlock(bs_, want[i], info_.generation)) << "block " << want[i];
    for (uint64_t b : singles) {
      std::string one;
      ASSERT_TRUE(store_->Get(info_, b, &one).ok()) << "block " << b;
      EXPECT_EQ(one, MakeBlock(bs_, b, info_.generation)) << "block " << b;
    }
  }

  // Whether the page holding the first byte of block b is in the page cache.
  bool Resident(uint64_t b) {
    const std::vector<bool> pages = ResidentPages(file_);
    const uint64_t page = b * bs_ / static_cast<uint64_t>(sysconf(_SC_PAGESIZE));
    EXPECT_LT(page, pages.size());
    return page < pages.size() && pages[page];
  }

  std::unique_ptr<TempDir> tmp_ = TempDir::Create("pacset-store").value();
  std::unique_ptr<BlockStore> store_;
  ForestInfo info_;
  uint32_t bs_ = 0;
  std::string file_;
};

TEST_F(DirStoreTest, WithDirectReadsSingleBlocksBypassThePageCacheAndRunsGoThroughIt) {
  ASSERT_TRUE(Make(/*direct=*/true, 4096, 64));
  if (!Evict(/*direct=*/true)) GTEST_SKIP() << "no O_DIRECT, or pages stay resident here";
  // Scattered single blocks with a run of three among them, then one Get.
  Read({40, 3, 17, 50, 51, 52, 29}, {9});
  for (uint64_t b : {40, 3, 17, 29, 9}) EXPECT_FALSE(Resident(b)) << "single block " << b;
  for (uint64_t b : {50, 51, 52}) EXPECT_TRUE(Resident(b)) << "block " << b << " of a run";
}

TEST_F(DirStoreTest, WithoutDirectReadsSingleBlocksGoThroughThePageCache) {
  ASSERT_TRUE(Make(/*direct=*/false, 4096, 64));
  if (!Evict(/*direct=*/false)) GTEST_SKIP() << "pages stay resident here";
  Read({40, 3, 17}, {9});
  for (uint64_t b : {40, 3, 17, 9}) EXPECT_TRUE(Resident(b)) << "block " << b;
}

TEST_F(DirStoreTest, BlocksSmallerThanADirectReadAreReadThroughThePageCache) {
  ASSERT_TRUE(Make(/*direct=*/true, 512, 64));
  const bool evicted = Evict(/*direct=*/false);
  Read({63, 1, 30, 7, 8, 0}, {33});
  if (!evicted) return;  // tmpfs: the bytes were checked, residency says nothing
  for (uint64_t b : {63, 1, 30, 33}) EXPECT_TRUE(Resident(b)) << "block " << b;
}

}  // namespace
}  // namespace pacset
