#include "util/file_io.h"

#include <gtest/gtest.h>

#include <fcntl.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <climits>
#include <cstring>
#include <istream>
#include <string>
#include <vector>

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

TEST(PreadFull, ReportsAFileThatEndsEarlyAsCorruption) {
  auto dir = TempDir::Create("file-io-test").value();
  ASSERT_TRUE(WriteFileAtomically(dir->path() + "/f", "PACSET").ok());
  auto fd = OpenRegularFile(dir->path() + "/f").value();
  char buf[8];
  ASSERT_TRUE(PreadFull(fd.get(), buf, 4, 2, "f").ok());
  EXPECT_EQ(std::string(buf, 4), "CSET");
  Status s = PreadFull(fd.get(), buf, 8, 0, "f");
  EXPECT_TRUE(s.IsCorruption()) << s.ToString();
  EXPECT_EQ(s.message(), "f: file ends at byte 6, expected 2 more bytes");
  s = PreadFull(-1, buf, 1, 0, "f");
  EXPECT_EQ(s.message(), "read f: Bad file descriptor");
}

TEST(PathNames, SplitAtTheLastSlash) {
  EXPECT_EQ(DirName("a/b/c"), "a/b");
  EXPECT_EQ(DirName("c"), ".");
  EXPECT_EQ(DirName("/c"), "/");
  EXPECT_EQ(DirName("a/b/"), "a/b");
  EXPECT_EQ(BaseName("a/b/c"), "c");
  EXPECT_EQ(BaseName("c"), "c");
  EXPECT_EQ(BaseName("/c"), "c");
  EXPECT_EQ(BaseName("a/b/"), "");
  EXPECT_EQ(BaseName(""), "");
}

TEST(PathNames, MakeAbsolutePutsTheWorkingDirectoryBeforeARelativePath) {
  char cwd[PATH_MAX];
  ASSERT_NE(::getcwd(cwd, sizeof cwd), nullptr);
  std::string p = "a/../b";
  ASSERT_TRUE(MakeAbsolute(&p));
  EXPECT_EQ(p, std::string(cwd) + "/a/../b");
  p = "/x/../y";
  ASSERT_TRUE(MakeAbsolute(&p));
  EXPECT_EQ(p, "/x/../y");
  p = "";
  ASSERT_TRUE(MakeAbsolute(&p));
  EXPECT_EQ(p, std::string(cwd) + "/");
}

TEST(PathNames, MakeAbsoluteFailsWithoutAWorkingDirectory) {
  auto dir = TempDir::Create("file-io-test").value();
  const std::string gone = dir->path() + "/gone";
  ASSERT_TRUE(MakeDirs(gone).ok());
  const int back = ::open(".", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  ASSERT_GE(back, 0);
  ASSERT_EQ(::chdir(gone.c_str()), 0);
  ASSERT_EQ(::rmdir(gone.c_str()), 0);
  std::string p = "rel";
  errno = 0;
  const bool ok = MakeAbsolute(&p);
  const int err = errno;
  ASSERT_EQ(::fchdir(back), 0);
  ::close(back);
  EXPECT_FALSE(ok);
  EXPECT_EQ(err, ENOENT);
  EXPECT_EQ(p, "rel");
}

TEST(MakeDirs, CreatesMissingParentsAndAcceptsAnExistingDirectory) {
  auto dir = TempDir::Create("file-io-test").value();
  const std::string deep = dir->path() + "/a/b/c";
  ASSERT_TRUE(MakeDirs(deep).ok());
  EXPECT_TRUE(IsDirectory(deep));
  EXPECT_TRUE(MakeDirs(deep).ok());
  EXPECT_TRUE(MakeDirs(dir->path() + "/a").ok());
}

TEST(MakeDirs, RefusesAFileInTheWay) {
  auto dir = TempDir::Create("file-io-test").value();
  const std::string file = dir->path() + "/f";
  ASSERT_TRUE(WriteFileAtomically(file, "x").ok());
  Status s = MakeDirs(file);
  EXPECT_EQ(s.code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(s.message(), file + " exists and is not a directory");
  s = MakeDirs(file + "/sub");
  EXPECT_EQ(s.message(), file + " exists and is not a directory");
  EXPECT_EQ(MakeDirs("").message(), "empty directory path");
}

TEST(IsDirectoryAndPathExists, FollowOrNotFollowSymlinks) {
  auto dir = TempDir::Create("file-io-test").value();
  const std::string d = dir->path() + "/d", link = dir->path() + "/link",
                    dangling = dir->path() + "/dangling";
  ASSERT_TRUE(MakeDirs(d).ok());
  ASSERT_EQ(::symlink(d.c_str(), link.c_str()), 0);
  ASSERT_EQ(::symlink((dir->path() + "/nowhere").c_str(), dangling.c_str()), 0);
  EXPECT_TRUE(IsDirectory(d));
  EXPECT_TRUE(IsDirectory(link));  // stat follows
  EXPECT_FALSE(IsDirectory(dangling));
  EXPECT_TRUE(PathExists(dangling));  // lstat does not
  EXPECT_FALSE(PathExists(dir->path() + "/nowhere"));
}

TEST(ListDir, ListsEveryNameButDotAndDotDot) {
  auto dir = TempDir::Create("file-io-test").value();
  EXPECT_TRUE(ListDir(dir->path()).value().empty());
  ASSERT_TRUE(WriteFileAtomically(dir->path() + "/f", "x").ok());
  ASSERT_TRUE(MakeDirs(dir->path() + "/d").ok());
  std::vector<std::string> names = ListDir(dir->path()).value();
  std::sort(names.begin(), names.end());
  EXPECT_EQ(names, (std::vector<std::string>{"d", "f"}));
  auto missing = ListDir(dir->path() + "/missing");
  ASSERT_FALSE(missing.ok());
  EXPECT_TRUE(missing.status().IsNotFound());
  EXPECT_EQ(missing.status().message(),
            "list directory " + dir->path() + "/missing: No such file or directory");
}

TEST(RemoveTree, RemovesADirectoryWithEverythingInIt) {
  auto dir = TempDir::Create("file-io-test").value();
  const std::string top = dir->path() + "/top";
  ASSERT_TRUE(MakeDirs(top + "/a/b/c").ok());
  for (const char* f : {"/f", "/a/f", "/a/b/f", "/a/b/c/f"})
    ASSERT_TRUE(WriteFileAtomically(top + f, "x").ok());
  for (int i = 0; i < 300; ++i)  // more names than one readdir buffer holds
    ASSERT_TRUE(WriteFileAtomically(top + "/a/many-" + std::to_string(i), "x").ok());
  RemoveTree(top);
  EXPECT_FALSE(PathExists(top));
  RemoveTree(top);  // missing: fine
  ASSERT_TRUE(WriteFileAtomically(top, "x").ok());
  RemoveTree(top);  // a file
  EXPECT_FALSE(PathExists(top));
}

TEST(RemoveTree, RemovesSymlinksNeverWhatTheyPointTo) {
  auto dir = TempDir::Create("file-io-test").value();
  const std::string victim = dir->path() + "/victim", top = dir->path() + "/top";
  ASSERT_TRUE(MakeDirs(victim).ok());
  ASSERT_TRUE(WriteFileAtomically(victim + "/keep", "x").ok());
  ASSERT_TRUE(MakeDirs(top).ok());
  ASSERT_EQ(::symlink(victim.c_str(), (top + "/to-dir").c_str()), 0);
  ASSERT_EQ(::symlink((victim + "/keep").c_str(), (top + "/to-file").c_str()), 0);
  RemoveTree(top);
  EXPECT_FALSE(PathExists(top));
  const std::string link = dir->path() + "/link";
  ASSERT_EQ(::symlink(victim.c_str(), link.c_str()), 0);
  RemoveTree(link);
  EXPECT_FALSE(PathExists(link));
  EXPECT_TRUE(PathExists(victim + "/keep"));
}

TEST(Fsync, SyncsAFileAndADirectoryAndNamesWhatFailed) {
  auto dir = TempDir::Create("file-io-test").value();
  ASSERT_TRUE(WriteFileAtomically(dir->path() + "/f", "x").ok());
  auto fd = OpenRegularFile(dir->path() + "/f").value();
  EXPECT_TRUE(FsyncFd(fd.get(), "f").ok());
  EXPECT_EQ(FsyncFd(-1, "f").message(), "fsync f: Bad file descriptor");
  EXPECT_TRUE(FsyncDir(dir->path()).ok());
  EXPECT_EQ(FsyncDir(dir->path() + "/missing").message(),
            "cannot open directory " + dir->path() + "/missing: No such file or directory");
}

}  // namespace
}  // namespace pacset
