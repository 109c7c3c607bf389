// OpenBlockStore: URI parsing, missing and wrong paths, the default URI.
#include <gtest/gtest.h>
#include <sys/stat.h>

#include <cstdlib>
#include <fstream>

#include "store/block_store.h"
#include "testkit/free_port.h"
#include "util/atomic_file.h"
#include "util/file_io.h"

namespace pacset {
namespace {

Status OpenStatus(const std::string& uri, bool read_only = false) {
  StoreOptions o;
  o.read_only = read_only;
  o.connect_timeout_ms = 500;
  return OpenBlockStore(uri, o).status();
}

void ExpectBadUri(const std::string& uri, const std::string& why) {
  Status s = OpenStatus(uri);
  EXPECT_EQ(s.code(), StatusCode::kInvalidArgument) << uri << ": " << s.ToString();
  EXPECT_NE(s.message().find(why), std::string::npos) << uri << ": " << s.ToString();
  EXPECT_NE(s.message().find("expected rocksdb:PATH"), std::string::npos) << s.ToString();
}

TEST(StoreUri, MalformedUrisAreRejectedWithTheReason) {
  ExpectBadUri("", "empty");
  ExpectBadUri("/var/lib/pacsetfs/store", "no scheme");
  ExpectBadUri("s3://bucket/x", "unknown scheme 's3'");
  ExpectBadUri("rocksdb:", "path is empty");
  ExpectBadUri("dir:", "path is empty");
  ExpectBadUri("rocksdb://host/x", "not a host");
  ExpectBadUri("redis:host:6379", "'//'");
  ExpectBadUri("redis://", "host is empty");
  ExpectBadUri("redis://:6379", "host is empty");
  ExpectBadUri("redis://localhost:", "port is empty");
  ExpectBadUri("redis://localhost:http", "'http' is not a port");
  ExpectBadUri("redis://localhost:70000", "'70000' is not a port");
  ExpectBadUri("redis://localhost:6379/x", "'x' is not a database");
  ExpectBadUri("redis://secret@localhost:6379", "':PASSWORD@'");
  ExpectBadUri("redis://localhost:6379?timeout=1", "query");
  ExpectBadUri("rediss://localhost:6379", "TLS");
  ExpectBadUri("redis://:bad%zz@localhost:1", "%-escape");
}

TEST(StoreUri, ReadOnlyOpenOfAMissingStoreIsNotFound) {
  const auto tmp = TempDir::Create("pacset-store").value();
  for (const std::string scheme : {"rocksdb:", "dir:"}) {
    Status s = OpenStatus(scheme + tmp->path() + "/nothing-here", true);
    EXPECT_EQ(s.code(), StatusCode::kNotFound) << s.ToString();
    EXPECT_NE(s.message().find("no store at " + scheme + tmp->path()), std::string::npos)
        << s.ToString();
  }
}

TEST(StoreUri, WritableOpenCreatesTheStoreAndItsParents) {
  const auto tmp = TempDir::Create("pacset-store").value();
  EXPECT_TRUE(OpenStatus("rocksdb:" + tmp->path() + "/a/b/rocks").ok());
  EXPECT_TRUE(OpenStatus("dir:" + tmp->path() + "/c/d/dir").ok());
  EXPECT_TRUE(IsDirectory(tmp->path() + "/a/b/rocks"));
  EXPECT_TRUE(PathExists(tmp->path() + "/c/d/dir/catalog"));
  // ... and then opens them read-only.
  EXPECT_TRUE(OpenStatus("rocksdb:" + tmp->path() + "/a/b/rocks", true).ok());
  EXPECT_TRUE(OpenStatus("dir:" + tmp->path() + "/c/d/dir", true).ok());
}

TEST(StoreUri, AFileWhereTheStoreDirectoryShouldBeIsRejected) {
  const auto tmp = TempDir::Create("pacset-store").value();
  const std::string file = tmp->path() + "/plain-file";
  std::ofstream(file) << "x";
  for (const std::string scheme : {"rocksdb:", "dir:"}) {
    Status s = OpenStatus(scheme + file);
    EXPECT_EQ(s.code(), StatusCode::kInvalidArgument) << s.ToString();
    EXPECT_NE(s.message().find("is not a directory"), std::string::npos) << s.ToString();
  }
  // A path *under* a file cannot be created either.
  EXPECT_FALSE(OpenStatus("dir:" + file + "/sub").ok());
}

TEST(StoreUri, AForeignNonEmptyDirectoryIsNotTakenOver) {
  const auto tmp = TempDir::Create("pacset-store").value();
  std::ofstream(tmp->path() + "/notes.txt") << "mine";
  for (const std::string scheme : {"rocksdb:", "dir:"}) {
    Status s = OpenStatus(scheme + tmp->path());
    EXPECT_EQ(s.code(), StatusCode::kInvalidArgument) << s.ToString();
    EXPECT_NE(s.message().find("is not empty"), std::string::npos) << s.ToString();
  }
}

TEST(StoreUri, OpeningAStoreWithTheWrongSchemeNamesTheRightOne) {
  const auto tmp = TempDir::Create("pacset-store").value();
  ASSERT_TRUE(OpenStatus("rocksdb:" + tmp->path() + "/r").ok());
  ASSERT_TRUE(OpenStatus("dir:" + tmp->path() + "/d").ok());
  Status s = OpenStatus("dir:" + tmp->path() + "/r");
  EXPECT_NE(s.message().find("open it as rocksdb:"), std::string::npos) << s.ToString();
  s = OpenStatus("rocksdb:" + tmp->path() + "/d");
  EXPECT_NE(s.message().find("open it as dir:"), std::string::npos) << s.ToString();
}

TEST(StoreUri, UnwritableStoreDirectoryIsAClearError) {
  if (::geteuid() == 0) GTEST_SKIP() << "root can write anywhere";
  const auto tmp = TempDir::Create("pacset-store").value();
  ASSERT_TRUE(OpenStatus("dir:" + tmp->path() + "/d").ok());
  ASSERT_EQ(::chmod((tmp->path() + "/d").c_str(), 0555), 0);
  Status s = OpenStatus("dir:" + tmp->path() + "/d");
  EXPECT_FALSE(s.ok());
  EXPECT_NE(s.message().find("not writable"), std::string::npos) << s.ToString();
  EXPECT_TRUE(OpenStatus("dir:" + tmp->path() + "/d", true).ok());
  ::chmod((tmp->path() + "/d").c_str(), 0755);
}

TEST(StoreUri, RelativeAndHomePathsAreMadeAbsolute) {
  const auto tmp = TempDir::Create("pacset-store").value();
  const char* old_home = std::getenv("HOME");
  const std::string saved = old_home != nullptr ? old_home : "";
  ::setenv("HOME", tmp->path().c_str(), 1);
  auto store = OpenBlockStore("dir:~/stores/x");
  ASSERT_TRUE(store.ok()) << store.status().ToString();
  auto st = (*store)->Stat();
  ASSERT_TRUE(st.ok());
  EXPECT_EQ(st->location, tmp->path() + "/stores/x");
  EXPECT_EQ(st->backend, "dir");
  ::setenv("HOME", saved.c_str(), 1);

  char cwd[4096];
  ASSERT_NE(::getcwd(cwd, sizeof cwd), nullptr);
  ASSERT_EQ(::chdir(tmp->path().c_str()), 0);
  auto rel = OpenBlockStore("rocksdb:rel/store/");
  ASSERT_EQ(::chdir(cwd), 0);
  ASSERT_TRUE(rel.ok()) << rel.status().ToString();
  st = (*rel)->Stat();
  ASSERT_TRUE(st.ok());
  EXPECT_EQ(st->location, tmp->path() + "/rel/store");
  EXPECT_EQ(st->backend, "rocksdb");
}

TEST(StoreUri, DefaultStoreUriFollowsPacsetStoreThenHome) {
  const char* env = std::getenv("PACSET_STORE");
  const std::string saved = env != nullptr ? env : "";
  ::setenv("PACSET_STORE", "dir:/srv/forests", 1);
  EXPECT_EQ(DefaultStoreUri(), "dir:/srv/forests");
  ::unsetenv("PACSET_STORE");
  if (::geteuid() == 0) {
    EXPECT_EQ(DefaultStoreUri(), "rocksdb:/var/lib/pacsetfs/store");
  } else {
    const char* old_home = std::getenv("HOME");
    const std::string home = old_home != nullptr ? old_home : "";
    ::setenv("HOME", "/home/someone", 1);
    EXPECT_EQ(DefaultStoreUri(), "rocksdb:/home/someone/.local/share/pacsetfs/store");
    ::setenv("HOME", home.c_str(), 1);
  }
  if (!saved.empty()) ::setenv("PACSET_STORE", saved.c_str(), 1);
}

TEST(StoreUri, RedisUriAcceptsPasswordPortAndDatabase) {
  // Nothing listens on these ports: parsing succeeds, connecting fails.
  const int port = store_test::FreePort();
  for (const std::string& uri : {"redis://127.0.0.1:" + std::to_string(port),
                                 "redis://:p%40ss@127.0.0.1:" + std::to_string(port) + "/3",
                                 "redis://user:pw@[::1]:" + std::to_string(port) + "/0"}) {
    Status s = OpenStatus(uri);
    EXPECT_EQ(s.code(), StatusCode::kUnavailable) << uri << ": " << s.ToString();
  }
}

}  // namespace
}  // namespace pacset
