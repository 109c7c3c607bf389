#include "util/file_io.h"

#include <gtest/gtest.h>

#include <string>

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

}  // namespace
}  // namespace pacset
