#include "util/file_io.h"

#include <gtest/gtest.h>

#include <fcntl.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include <chrono>
#include <cstring>
#include <istream>
#include <string>

#include "tests/deadline.h"
#include "util/atomic_file.h"

namespace pacset {
namespace {

TEST(ReadWholeFile, ReadsEveryByteOfAFileLargerThanOneRead) {
  auto dir = TempDir::Create("file-io-test").value();
  std::string bytes;
  for (int i = 0; i < 200000; ++i) bytes.push_back(static_cast<char>(i * 7 + (i >> 9)));
  const std::string path = dir->path() + "/f";
  ASSERT_TRUE(WriteFileAtomically(path, bytes).ok());
  auto read = ReadWholeFile(path);
  ASSERT_TRUE(read.ok()) << read.status().ToString();
  EXPECT_TRUE(*read == bytes);
  ASSERT_TRUE(WriteFileAtomically(path, "").ok());
  EXPECT_EQ(ReadWholeFile(path).value(), "");
}

TEST(ReadWholeFile, ReadsFilesWhoseSizeIsNotKnownInAdvance) {
  auto status = ReadWholeFile("/proc/self/status");  // st_size 0
  ASSERT_TRUE(status.ok()) << status.status().ToString();
  EXPECT_NE(status->find("Pid:"), std::string::npos);
}

TEST(ReadWholeFile, NamesAMissingFileAsNotFound) {
  auto dir = TempDir::Create("file-io-test").value();
  auto r = ReadWholeFile(dir->path() + "/missing");
  ASSERT_FALSE(r.ok());
  EXPECT_TRUE(r.status().IsNotFound());
  EXPECT_EQ(r.status().message(), "open " + dir->path() + "/missing: No such file or directory");
  auto d = ReadWholeFile(dir->path());  // a directory: read fails with EISDIR
  ASSERT_FALSE(d.ok());
  EXPECT_EQ(d.status().message(), "read " + dir->path() + ": Is a directory");
}

// A call that would block on a FIFO (or read a device without end) fails the
// test after this long instead of hanging it.
constexpr std::chrono::seconds kHang{20};

StatusOr<UniqueFd> OpenWithin(const std::string& path) {
  return ::pacset::testing::FinishesWithin(kHang, path.c_str(),
                                           [path] { return OpenRegularFile(path); });
}

TEST(OpenRegularFile, OpensARegularFileForBlockingReads) {
  auto dir = TempDir::Create("file-io-test").value();
  const std::string path = dir->path() + "/model.json";
  ASSERT_TRUE(WriteFileAtomically(path, "{}").ok());
  auto fd = OpenRegularFile(path);
  ASSERT_TRUE(fd.ok()) << fd.status().ToString();
  EXPECT_EQ(::fcntl(fd->get(), F_GETFL) & (O_NONBLOCK | O_ACCMODE), O_RDONLY);
  EXPECT_NE(::fcntl(fd->get(), F_GETFD) & FD_CLOEXEC, 0);
  char buf[4] = {};
  EXPECT_EQ(::read(fd->get(), buf, sizeof buf), 2);
  EXPECT_EQ(std::string(buf, 2), "{}");
}

TEST(OpenRegularFile, RefusesAFifoAtOnceWithoutWaitingForAWriter) {
  auto dir = TempDir::Create("file-io-test").value();
  const std::string fifo = dir->path() + "/model.pac";
  ASSERT_EQ(::mkfifo(fifo.c_str(), 0600), 0) << std::strerror(errno);
  auto fd = OpenWithin(fifo);  // no writer ever opens it
  ASSERT_FALSE(fd.ok());
  EXPECT_EQ(fd.status().code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(fd.status().message(), fifo + " is a FIFO, not a regular file");
}

TEST(OpenRegularFile, RefusesADirectoryADeviceAndASocket) {
  auto dir = TempDir::Create("file-io-test").value();
  auto d = OpenWithin(dir->path());
  ASSERT_FALSE(d.ok());
  EXPECT_EQ(d.status().message(), dir->path() + " is a directory, not a regular file");
  for (const std::string device : {"/dev/null", "/dev/zero"}) {
    auto c = OpenWithin(device);
    ASSERT_FALSE(c.ok()) << device;
    EXPECT_EQ(c.status().code(), StatusCode::kInvalidArgument);
    EXPECT_EQ(c.status().message(), device + " is a character device, not a regular file");
  }
  const std::string sock = dir->path() + "/sock";
  const int s = ::socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
  ASSERT_GE(s, 0);
  sockaddr_un addr{};
  addr.sun_family = AF_UNIX;
  ASSERT_LT(sock.size(), sizeof addr.sun_path);
  std::memcpy(addr.sun_path, sock.c_str(), sock.size() + 1);
  ASSERT_EQ(::bind(s, reinterpret_cast<sockaddr*>(&addr), sizeof addr), 0) << std::strerror(errno);
  auto k = OpenWithin(sock);
  ::close(s);
  ASSERT_FALSE(k.ok());
  EXPECT_EQ(k.status().message(), sock + " is a socket, not a regular file");
}

TEST(OpenRegularFile, NamesAMissingFileAsNotFound) {
  auto dir = TempDir::Create("file-io-test").value();
  auto r = OpenRegularFile(dir->path() + "/missing");
  ASSERT_FALSE(r.ok());
  EXPECT_TRUE(r.status().IsNotFound());
  EXPECT_EQ(r.status().message(),
            "cannot open " + dir->path() + "/missing: No such file or directory");
}

TEST(ReadWholeRegularFile, RefusesADeviceThatNeverEnds) {
  auto r = ::pacset::testing::FinishesWithin(kHang, "ReadWholeRegularFile(/dev/zero)",
                                             [] { return ReadWholeRegularFile("/dev/zero"); });
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().message(), "/dev/zero is a character device, not a regular file");
}

TEST(ReadWholeRegularFile, ReadsARegularFile) {
  auto dir = TempDir::Create("file-io-test").value();
  ASSERT_TRUE(WriteFileAtomically(dir->path() + "/m", "tree\n").ok());
  EXPECT_EQ(ReadWholeRegularFile(dir->path() + "/m").value(), "tree\n");
}

TEST(PreadUpTo, ReadsFewerBytesOnlyAtTheEnd) {
  auto dir = TempDir::Create("file-io-test").value();
  ASSERT_TRUE(WriteFileAtomically(dir->path() + "/f", "PACSET").ok());
  auto fd = OpenRegularFile(dir->path() + "/f").value();
  char buf[8];
  EXPECT_EQ(PreadUpTo(fd.get(), buf, sizeof buf, 0, "f").value(), 6u);
  EXPECT_EQ(PreadUpTo(fd.get(), buf, 2, 4, "f").value(), 2u);
  EXPECT_EQ(std::string(buf, 2), "ET");
}

TEST(FdStreambuf, ReadsADescriptorAndTellsHowFarItHasRead) {
  auto dir = TempDir::Create("file-io-test").value();
  std::string bytes(200000, 'x');
  bytes[150000] = 'y';
  ASSERT_TRUE(WriteFileAtomically(dir->path() + "/f", bytes).ok());
  auto fd = OpenRegularFile(dir->path() + "/f").value();
  FdStreambuf buf(fd.get());
  std::istream in(&buf);
  std::string got(150000, '\0');
  ASSERT_TRUE(in.read(got.data(), 150000));
  EXPECT_EQ(in.tellg(), 150000);
  EXPECT_EQ(in.get(), 'y');
  EXPECT_EQ(in.tellg(), 150001);
  in.seekg(0);  // forward-only: other seeks fail
  EXPECT_TRUE(in.fail());
  EXPECT_EQ(buf.error(), 0);
}

}  // namespace
}  // namespace pacset
