// store_internal::DirectoryWatch: what a RocksDB reader learns about its
// writer's directory without stat'ing it (store/internal/file_util.h).
#include <fcntl.h>
#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cstdio>
#include <string>

#include "store/internal/file_util.h"
#include "util/atomic_file.h"
#include "util/file_io.h"

namespace pacset {
namespace store_internal {
namespace {

void Append(const std::string& path, const std::string& bytes) {
  UniqueFd fd(open(path.c_str(), O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0644));
  ASSERT_TRUE(fd.valid()) << path;
  ASSERT_EQ(write(fd.get(), bytes.data(), bytes.size()), static_cast<ssize_t>(bytes.size()));
}

void ReadAll(const std::string& path) {
  UniqueFd fd(open(path.c_str(), O_RDONLY | O_CLOEXEC));
  ASSERT_TRUE(fd.valid()) << path;
  char buf[64];
  while (read(fd.get(), buf, sizeof buf) > 0) {
  }
}

TEST(DirectoryWatch, SeesEveryChangeOfTheEntriesOnceAndNotReads) {
  const auto tmp = TempDir::Create("pacset-watch").value();
  const std::string dir = tmp->path() + "/store";
  ASSERT_EQ(mkdir(dir.c_str(), 0755), 0);
  Append(dir + "/CURRENT", "MANIFEST-000001\n");
  auto watch = DirectoryWatch::Open(dir);
  ASSERT_TRUE(watch.ok()) << watch.status().ToString();
  EXPECT_FALSE(watch->Changed()) << "nothing happened since Open";

  Append(dir + "/000001.log", "a record");  // created and written
  EXPECT_TRUE(watch->Changed());
  EXPECT_FALSE(watch->Changed()) << "consumed by the call before";
  Append(dir + "/000001.log", "another record");  // an append to a file that exists
  EXPECT_TRUE(watch->Changed());
  EXPECT_FALSE(watch->Changed());

  ReadAll(dir + "/000001.log");  // a reader's own reads are no change
  ReadAll(dir + "/CURRENT");
  EXPECT_FALSE(watch->Changed());

  Append(dir + "/CURRENT.tmp", "MANIFEST-000002\n");
  ASSERT_TRUE(watch->Changed());
  ASSERT_EQ(rename((dir + "/CURRENT.tmp").c_str(), (dir + "/CURRENT").c_str()), 0);
  EXPECT_TRUE(watch->Changed()) << "CURRENT switched by a rename";
  ASSERT_EQ(unlink((dir + "/000001.log").c_str()), 0);
  EXPECT_TRUE(watch->Changed()) << "a file removed";
  EXPECT_FALSE(watch->Changed());

  // Not recursive: a subdirectory's own entries are not the directory's.
  ASSERT_EQ(mkdir((dir + "/pins").c_str(), 0755), 0);
  EXPECT_TRUE(watch->Changed());
  Append(dir + "/pins/m.1.42-0", "");
  EXPECT_FALSE(watch->Changed());
}

TEST(DirectoryWatch, ADirectoryRemovedReadsAsChangedFromThenOn) {
  const auto tmp = TempDir::Create("pacset-watch").value();
  const std::string dir = tmp->path() + "/store";
  ASSERT_EQ(mkdir(dir.c_str(), 0755), 0);
  auto watch = DirectoryWatch::Open(dir);
  ASSERT_TRUE(watch.ok()) << watch.status().ToString();
  ASSERT_EQ(rmdir(dir.c_str()), 0);
  EXPECT_TRUE(watch->Changed());
  // A directory of the same name is another one: nothing about it is known.
  ASSERT_EQ(mkdir(dir.c_str(), 0755), 0);
  EXPECT_TRUE(watch->Changed());
  EXPECT_TRUE(watch->Changed());
}

TEST(DirectoryWatch, AMissingDirectoryOrAFileIsAnError) {
  const auto tmp = TempDir::Create("pacset-watch").value();
  auto missing = DirectoryWatch::Open(tmp->path() + "/none");
  EXPECT_FALSE(missing.ok());
  EXPECT_NE(missing.status().ToString().find(tmp->path() + "/none"), std::string::npos)
      << missing.status().ToString();
  Append(tmp->path() + "/file", "x");
  EXPECT_FALSE(DirectoryWatch::Open(tmp->path() + "/file").ok()) << "IN_ONLYDIR";
}

TEST(DirectoryWatch, IsNotOfferedWhereChangesMayComeFromElsewhere) {
  // procfs stands for the file systems whose changes inotify does not see
  // (another host's writes on NFS raise no event): the caller must stat.
  auto proc = DirectoryWatch::Open("/proc/self");
  ASSERT_FALSE(proc.ok());
  EXPECT_EQ(proc.status().code(), StatusCode::kNotSupported) << proc.status().ToString();
}

}  // namespace
}  // namespace store_internal
}  // namespace pacset
