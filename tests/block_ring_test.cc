// The engine's ring of block reads (engine/internal/block_ring.h): blocks
// queued together that lie next to each other in the file go as one read,
// and every block still comes back on its own with its own bytes — the
// file's content is the oracle.
#include "engine/internal/block_ring.h"

#include <fcntl.h>
#include <gtest/gtest.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <map>
#include <random>
#include <string>
#include <vector>

#include "util/atomic_file.h"

namespace pacset::internal {
namespace {

constexpr uint32_t kBs = 4096;

struct ReadBack {
  int res;
  std::string bytes;  // the first max(res, 0) bytes of the block's buffer
};

class BlockRingTest : public testing::Test {
 protected:
  // A file of `blocks` random blocks and half a block more.
  void MakeFile(uint64_t blocks) {
    dir_ = TempDir::Create("block-ring-test").value();
    bytes_.assign(blocks * kBs + kBs / 2, '\0');
    std::mt19937_64 rng(11);
    for (char& c : bytes_) c = static_cast<char>(rng());
    const std::string path = dir_->path() + "/f";
    ASSERT_TRUE(WriteFileAtomically(path, bytes_).ok());
    fd_ = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
    ASSERT_GE(fd_, 0);
  }
  void TearDown() override {
    if (fd_ >= 0) ::close(fd_);
  }
  // Queues `blocks` in that order, sends them, and reaps until every one
  // has come back: what each came back with, by its position in `blocks`.
  std::vector<ReadBack> ReadAll(BlockRing& ring, const std::vector<uint64_t>& blocks,
                                uint64_t* reads_sent) {
    std::vector<ReadBack> got(blocks.size(), ReadBack{-1000, ""});
    std::map<uint64_t, std::vector<size_t>> where;  // block -> positions not yet back
    for (size_t i = 0; i < blocks.size(); ++i) {
      ring.Queue(fd_, blocks[i], blocks[i] * kBs);
      where[blocks[i]].push_back(i);
    }
    EXPECT_GT(ring.queued(), 0u);
    EXPECT_GE(ring.Submit(/*wait=*/false), 0);
    EXPECT_EQ(ring.queued(), 0u);
    *reads_sent = ring.submitted();
    size_t back = 0;
    while (back < blocks.size()) {
      EXPECT_GE(ring.Submit(/*wait=*/true), 0);
      ring.Reap([&](uint64_t b, int res, char* buf) {
        auto& pos = where[b];
        EXPECT_FALSE(pos.empty()) << "block " << b << " came back more often than queued";
        if (pos.empty()) return;
        got[pos.back()] = ReadBack{res, std::string(buf, res > 0 ? res : 0)};
        pos.pop_back();
        ++back;
      });
    }
    EXPECT_EQ(ring.submitted(), 0u);
    return got;
  }

  std::unique_ptr<TempDir> dir_;
  std::string bytes_;
  int fd_ = -1;
};

// Out of order, with a run of three, a run of sixteen, a block queued twice
// and a run over the end of the file (a full block, then half a block, then
// nothing): six reads, and each block its own bytes or its short count.
TEST_F(BlockRingTest, AdjacentBlocksGoAsOneReadAndEachComesBackWithItsOwnBytes) {
  if (!UringAvailable()) GTEST_SKIP() << "the kernel refuses io_uring here";
  MakeFile(40);  // blocks 0..39 whole, block 40 half, block 41 past the end
  auto ring = BlockRing::Make(64, kBs);
  ASSERT_NE(ring, nullptr);
  std::vector<uint64_t> blocks = {7, 4, 10, 39, 3, 41, 5, 10, 40};
  for (uint64_t b = 20; b < 36; ++b) blocks.push_back(b);
  std::shuffle(blocks.begin() + 9, blocks.end(), std::mt19937(3));
  uint64_t reads = 0;
  const std::vector<ReadBack> got = ReadAll(*ring, blocks, &reads);
  // {3,4,5} {7} {10} {10} {20..35} {39,40,41}
  EXPECT_EQ(reads, 6u);
  for (size_t i = 0; i < blocks.size(); ++i) {
    const uint64_t b = blocks[i];
    const int want = b < 40 ? static_cast<int>(kBs) : b == 40 ? static_cast<int>(kBs / 2) : 0;
    ASSERT_EQ(got[i].res, want) << "block " << b;
    const std::string file_has = b * kBs < bytes_.size() ? bytes_.substr(b * kBs, want) : "";
    EXPECT_TRUE(got[i].bytes == file_has) << "block " << b;
  }
  // The ring is whole again: all its buffers free for the next request.
  std::vector<uint64_t> all;
  for (uint64_t b = 0; b < 64; ++b) all.push_back(b % 40);
  const std::vector<ReadBack> again = ReadAll(*ring, all, &reads);
  for (size_t i = 0; i < all.size(); ++i)
    EXPECT_TRUE(again[i].bytes == bytes_.substr(all[i] * kBs, kBs)) << "block " << all[i];
}

// A run longer than kMaxRunBytes is split into reads of at most that.
TEST_F(BlockRingTest, ALongRunIsSplitIntoReadsOfAtMostMaxRunBytes) {
  if (!UringAvailable()) GTEST_SKIP() << "the kernel refuses io_uring here";
  const uint64_t per_read = BlockRing::kMaxRunBytes / kBs;
  MakeFile(2 * per_read + 8);
  auto ring = BlockRing::Make(static_cast<uint32_t>(2 * per_read + 1), kBs);
  ASSERT_NE(ring, nullptr);
  std::vector<uint64_t> blocks;
  for (uint64_t b = 0; b < 2 * per_read + 1; ++b) blocks.push_back(b);
  uint64_t reads = 0;
  const std::vector<ReadBack> got = ReadAll(*ring, blocks, &reads);
  EXPECT_EQ(reads, 3u);
  for (size_t i = 0; i < blocks.size(); ++i) {
    ASSERT_EQ(got[i].res, static_cast<int>(kBs)) << "block " << blocks[i];
    EXPECT_TRUE(got[i].bytes == bytes_.substr(blocks[i] * kBs, kBs)) << "block " << blocks[i];
  }
}

// A read that fails fails every block it carried, each with the error.
TEST_F(BlockRingTest, AFailedReadGivesEachOfItsBlocksTheError) {
  if (!UringAvailable()) GTEST_SKIP() << "the kernel refuses io_uring here";
  MakeFile(8);
  auto ring = BlockRing::Make(16, kBs);
  ASSERT_NE(ring, nullptr);
  const int good = fd_;
  fd_ = ::open("/dev/null", O_WRONLY | O_CLOEXEC);  // not open for reading: EBADF
  ASSERT_GE(fd_, 0);
  uint64_t reads = 0;
  const std::vector<ReadBack> got = ReadAll(*ring, {2, 3, 4, 6}, &reads);
  EXPECT_EQ(reads, 2u);
  for (const ReadBack& r : got) EXPECT_EQ(r.res, -EBADF);
  ::close(fd_);
  fd_ = good;
}

}  // namespace
}  // namespace pacset::internal
