#include "util/uring_reads.h"

#include <fcntl.h>
#include <gtest/gtest.h>
#include <unistd.h>

#include <random>
#include <string>
#include <vector>

#include "util/atomic_file.h"

namespace pacset {
namespace {

// More reads than the ring holds (64), in random order, of different
// lengths, from two files, some repeated, one running past the end of the file and one
// starting there: each buffer holds exactly the file's bytes at its offset
// (the file's own content is the oracle), the one past the end is short, the
// one at the end says 0 bytes.
TEST(UringReadAll, EveryReadGetsTheBytesAtItsOffsetBeyondOneRingFull) {
  if (!UringAvailable()) GTEST_SKIP() << "the kernel refuses io_uring here";
  auto dir = TempDir::Create("uring-reads-test").value();
  constexpr uint32_t kLen = 4096;
  constexpr uint64_t kBlocks = 300;
  std::string bytes(kBlocks * kLen, '\0');
  std::mt19937_64 rng(7);
  for (char& c : bytes) c = static_cast<char>(rng());
  const std::string path = dir->path() + "/f";
  ASSERT_TRUE(WriteFileAtomically(path, bytes).ok());
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  ASSERT_GE(fd, 0);
  std::vector<uint64_t> offsets;
  std::vector<uint32_t> lens;
  for (int i = 0; i < 150; ++i) {
    offsets.push_back((rng() % (kBlocks - 4)) * kLen);
    lens.push_back(kLen * static_cast<uint32_t>(1 + rng() % 4));
  }
  offsets.push_back((kBlocks - 1) * kLen);  // past the end: half of it read
  lens.push_back(2 * kLen);
  offsets.push_back(kBlocks * kLen);  // at the end: nothing to read
  lens.push_back(kLen);
  std::vector<std::string> out;
  for (uint32_t len : lens) out.emplace_back(len, 'x');
  std::vector<char*> bufs;
  for (auto& o : out) bufs.push_back(o.data());
  // Every third read from a second file of other bytes: each read uses its
  // own descriptor.
  const std::string other(bytes.rbegin(), bytes.rend());
  ASSERT_TRUE(WriteFileAtomically(dir->path() + "/g", other).ok());
  const int fd2 = ::open((dir->path() + "/g").c_str(), O_RDONLY | O_CLOEXEC);
  ASSERT_GE(fd2, 0);
  std::vector<int> fds(offsets.size(), fd);
  for (size_t i = 0; i + 2 < fds.size(); i += 3) fds[i] = fd2;
  std::vector<int> res(offsets.size(), -1);
  ASSERT_TRUE(UringReadAll(fds.data(), offsets.data(), lens.data(), bufs.data(), offsets.size(),
                           res.data()));
  const size_t n = offsets.size();
  for (size_t i = 0; i + 2 < n; ++i) {
    ASSERT_EQ(res[i], static_cast<int>(lens[i])) << "read " << i;
    const std::string& file = fds[i] == fd2 ? other : bytes;
    ASSERT_TRUE(out[i] == file.substr(offsets[i], lens[i])) << "read " << i << " at " << offsets[i];
  }
  ::close(fd2);
  fds.assign(fds.size(), fd);
  ASSERT_EQ(res[n - 2], static_cast<int>(kLen));
  EXPECT_TRUE(out[n - 2].substr(0, kLen) == bytes.substr(offsets[n - 2], kLen));
  EXPECT_EQ(res[n - 1], 0);
  // A descriptor that is not open: each read says EBADF, nothing hangs.
  ::close(fd);
  ASSERT_TRUE(UringReadAll(fds.data(), offsets.data(), lens.data(), bufs.data(), 3, res.data()));
  for (int i = 0; i < 3; ++i) EXPECT_EQ(res[i], -EBADF);
}

}  // namespace
}  // namespace pacset
