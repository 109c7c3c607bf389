// dir: specifics: how a batch's blocks reach the generation file.
#include <fcntl.h>
#include <gtest/gtest.h>
#include <sys/mman.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <string>
#include <vector>

#include "store/block_store.h"
#include "store/internal/backends.h"
#include "testkit/store_test_util.h"

namespace pacset {
namespace {

using store_test::MakeBlock;
using store_test::TempDir;
using store_test::WriteForest;

// Which of a file's `blocks` (of `bs` bytes) are in the page cache.
std::vector<bool> Resident(const std::string& path, uint64_t bs, uint64_t blocks) {
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  EXPECT_GE(fd, 0) << path;
  if (fd < 0) return {};
  const size_t len = bs * blocks;
  void* m = mmap(nullptr, len, PROT_READ, MAP_SHARED, fd, 0);
  ::close(fd);
  EXPECT_NE(m, MAP_FAILED);
  if (m == MAP_FAILED) return {};
  const long page = sysconf(_SC_PAGESIZE);
  std::vector<unsigned char> vec(len / page);
  EXPECT_EQ(mincore(m, len, vec.data()), 0);
  munmap(m, len);
  std::vector<bool> out(blocks);
  for (uint64_t b = 0; b < blocks; ++b) out[b] = vec[b * bs / page] & 1;
  return out;
}

// Writes back and evicts the file's pages; false if they stay (a file
// system whose pages are its storage, such as tmpfs).
bool Evict(const std::string& path, uint64_t bs, uint64_t blocks) {
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return false;
  (void)fdatasync(fd);
  (void)posix_fadvise(fd, 0, 0, POSIX_FADV_DONTNEED);
  ::close(fd);
  for (bool r : Resident(path, bs, blocks))
    if (r) return false;
  return true;
}

TEST(DirStore, SingleBlocksAreReadPastThePageCacheAndRunsThroughIt) {
  TempDir tmp;
  const std::string root = tmp.path() + "/store";
  auto store = OpenBlockStore("dir:" + root, StoreOptions{});
  ASSERT_TRUE(store.ok()) << store.status().ToString();
  constexpr uint32_t kBs = 4096;
  constexpr uint64_t kBlocks = 64;
  uint64_t gen = 0;
  ASSERT_TRUE(WriteForest(**store, "model", kBs, kBlocks, &gen).ok());
  auto info = (*store)->Lookup("model");
  ASSERT_TRUE(info.ok()) << info.status().ToString();
  const std::string file = root + "/" + store_internal::DirGenerationFile("model", gen);
  {
    const int fd = ::open(file.c_str(), O_RDONLY | O_CLOEXEC | O_DIRECT);
    if (fd < 0) GTEST_SKIP() << "the file system refuses O_DIRECT: " << std::strerror(errno);
    ::close(fd);
  }
  if (!Evict(file, kBs, kBlocks)) GTEST_SKIP() << "the file system keeps its pages resident";

  // Scattered single blocks, a run of three among them, and one Get.
  const std::vector<uint64_t> want = {40, 3, 17, 50, 51, 52, 29};
  std::vector<std::string> got;
  Status s = (*store)->MultiGet(*info, want, &got);
  ASSERT_TRUE(s.ok()) << s.ToString();
  ASSERT_EQ(got.size(), want.size());
  for (size_t i = 0; i < want.size(); ++i) EXPECT_EQ(got[i], MakeBlock(kBs, want[i], gen));
  std::string one;
  ASSERT_TRUE((*store)->Get(*info, 9, &one).ok());
  EXPECT_EQ(one, MakeBlock(kBs, 9, gen));

  const std::vector<bool> resident = Resident(file, kBs, kBlocks);
  ASSERT_EQ(resident.size(), kBlocks);
  for (uint64_t b : {40, 3, 17, 29, 9}) EXPECT_FALSE(resident[b]) << "single block " << b;
  for (uint64_t b : {50, 51, 52}) EXPECT_TRUE(resident[b]) << "block " << b << " of a run";
}

TEST(DirStore, BlocksSmallerThanADirectReadAreReadThroughThePageCache) {
  TempDir tmp;
  const std::string root = tmp.path() + "/store";
  auto store = OpenBlockStore("dir:" + root, StoreOptions{});
  ASSERT_TRUE(store.ok()) << store.status().ToString();
  constexpr uint32_t kBs = 512;
  constexpr uint64_t kBlocks = 64;
  uint64_t gen = 0;
  ASSERT_TRUE(WriteForest(**store, "small", kBs, kBlocks, &gen).ok());
  auto info = (*store)->Lookup("small");
  ASSERT_TRUE(info.ok()) << info.status().ToString();
  const std::string file = root + "/" + store_internal::DirGenerationFile("small", gen);
  const bool evicted = Evict(file, kBs, kBlocks);
  const std::vector<uint64_t> want = {63, 1, 30, 7, 8, 0};
  std::vector<std::string> got;
  Status s = (*store)->MultiGet(*info, want, &got);
  ASSERT_TRUE(s.ok()) << s.ToString();
  ASSERT_EQ(got.size(), want.size());
  for (size_t i = 0; i < want.size(); ++i) EXPECT_EQ(got[i], MakeBlock(kBs, want[i], gen));
  std::string one;
  ASSERT_TRUE((*store)->Get(*info, 33, &one).ok());
  EXPECT_EQ(one, MakeBlock(kBs, 33, gen));
  if (!evicted) return;  // tmpfs: nothing more to see
  const std::vector<bool> resident = Resident(file, kBs, kBlocks);
  ASSERT_EQ(resident.size(), kBlocks);
  for (uint64_t b : {63, 1, 30, 33}) EXPECT_TRUE(resident[b]) << "block " << b;
}

}  // namespace
}  // namespace pacset
