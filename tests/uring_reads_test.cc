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

// More reads than the ring holds (64), in random order, some repeated, one
// past the end of the file: each buffer holds exactly the file's bytes at
// its offset (the file's own content is the oracle), the read past the end
// says 0 bytes.
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
  for (int i = 0; i < 150; ++i) offsets.push_back((rng() % kBlocks) * kLen);
  offsets.push_back(kBlocks * kLen);  // at the end: nothing to read
  std::vector<std::string> out(offsets.size(), std::string(kLen, 'x'));
  std::vector<char*> bufs;
  for (auto& o : out) bufs.push_back(o.data());
  std::vector<int> res(offsets.size(), -1);
  ASSERT_TRUE(UringReadAll(fd, offsets.data(), kLen, bufs.data(), offsets.size(), res.data()));
  for (size_t i = 0; i + 1 < offsets.size(); ++i) {
    ASSERT_EQ(res[i], static_cast<int>(kLen)) << "read " << i;
    ASSERT_TRUE(out[i] == bytes.substr(offsets[i], kLen)) << "read " << i << " at " << offsets[i];
  }
  EXPECT_EQ(res.back(), 0);
  // A descriptor that is not open: each read says EBADF, nothing hangs.
  ::close(fd);
  ASSERT_TRUE(UringReadAll(fd, offsets.data(), kLen, bufs.data(), 3, res.data()));
  for (int i = 0; i < 3; ++i) EXPECT_EQ(res[i], -EBADF);
}

}  // namespace
}  // namespace pacset
