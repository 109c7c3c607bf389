// util/atomic_file.h and the outputs built on it: a crash or failure never
// leaves a torn file, and no name planted by someone else (a symlink at the
// destination or at a temporary name) makes pacset write to a victim file.
//
// The planted-symlink tests put a symlink at the temporary name the old code
// used (PATH.tmp.PID, $TMPDIR/pacset-import-PID.pac...), which it opened
// O_CREAT|O_TRUNC, following the link: the victim was truncated and
// overwritten. The victim stands for a root-owned file in a shared directory.
#include <dirent.h>
#include <sys/stat.h>
#include <unistd.h>

#include <gtest/gtest.h>

#include <cstdlib>
#include <fstream>
#include <iterator>

#include "layout/pack.h"
#include "tests/test_files.h"
#include "tests/test_forests.h"
#include "tools/commands.h"
#include "util/atomic_file.h"
#include "util/csv.h"
#include "util/file_io.h"

namespace pacset {
namespace {

const char kVictimText[] = "root:x:0:0:root:/root:/bin/bash\n";

using testing::ReadAll;
using testing::WriteAll;

bool IsSymlink(const std::string& path) {
  struct stat st;
  return lstat(path.c_str(), &st) == 0 && S_ISLNK(st.st_mode);
}

bool IsRegular(const std::string& path) {
  struct stat st;
  return lstat(path.c_str(), &st) == 0 && S_ISREG(st.st_mode);
}

std::vector<std::string> Names(const std::string& dir) {
  std::vector<std::string> out;
  if (DIR* d = opendir(dir.c_str())) {
    while (dirent* e = readdir(d))
      if (std::string(e->d_name) != "." && std::string(e->d_name) != "..") out.push_back(e->d_name);
    closedir(d);
  }
  std::sort(out.begin(), out.end());
  return out;
}

class AtomicFileTest : public ::testing::Test {
 protected:
  void SetUp() override {
    auto d = TempDir::Create("pacset-atomic-test");
    ASSERT_TRUE(d.ok()) << d.status().ToString();
    dir_ = std::move(d).value();
    victim_ = dir_->path() + "/victim";
    WriteAll(victim_, kVictimText);
  }
  std::string Path(const std::string& name) const { return dir_->path() + "/" + name; }
  void PlantSymlink(const std::string& at) {
    ASSERT_EQ(symlink(victim_.c_str(), at.c_str()), 0) << at;
  }
  void ExpectVictimIntact() const { EXPECT_EQ(ReadAll(victim_), kVictimText); }

  std::unique_ptr<TempDir> dir_;
  std::string victim_;
};

TEST_F(AtomicFileTest, CommitReplacesTheDestinationAndLeavesNoTemporaryFile) {
  WriteAll(Path("out"), "old");
  ASSERT_TRUE(WriteFileAtomically(Path("out"), "new contents").ok());
  EXPECT_EQ(ReadAll(Path("out")), "new contents");
  EXPECT_EQ(Names(dir_->path()), (std::vector<std::string>{"out", "victim"}));
}

TEST_F(AtomicFileTest, AbandonedFileLeavesTheDestinationAsItWas) {
  WriteAll(Path("out"), "old");
  {
    auto f = AtomicFile::Create(Path("out"));
    ASSERT_TRUE(f.ok()) << f.status().ToString();
    ASSERT_EQ(write((*f)->fd(), "partial", 7), 7);
    EXPECT_NE((*f)->temp_path(), Path("out"));
  }  // destroyed without Commit()
  EXPECT_EQ(ReadAll(Path("out")), "old");
  EXPECT_EQ(Names(dir_->path()), (std::vector<std::string>{"out", "victim"}));
}

TEST_F(AtomicFileTest, SymlinkAtTheDestinationIsReplacedNotFollowed) {
  PlantSymlink(Path("out"));
  ASSERT_TRUE(WriteFileAtomically(Path("out"), "output").ok());
  ExpectVictimIntact();
  EXPECT_TRUE(IsRegular(Path("out")));
  EXPECT_EQ(ReadAll(Path("out")), "output");
}

TEST_F(AtomicFileTest, CharacterDeviceIsWrittenInPlace) {
  ASSERT_TRUE(WriteFileAtomically("/dev/null", "discarded").ok());
  struct stat st;
  ASSERT_EQ(stat("/dev/null", &st), 0);
  EXPECT_TRUE(S_ISCHR(st.st_mode));
}

TEST_F(AtomicFileTest, DirectoryDestinationIsRefused) {
  ASSERT_EQ(mkdir(Path("d").c_str(), 0755), 0);
  Status s = WriteFileAtomically(Path("d"), "x");
  EXPECT_FALSE(s.ok());
  EXPECT_NE(s.message().find("is a directory"), std::string::npos) << s.ToString();
}

TEST_F(AtomicFileTest, TempDirIsPrivateAndRemovedWithItsContents) {
  std::string path;
  {
    auto t = TempDir::Create("pacset-private");
    ASSERT_TRUE(t.ok());
    path = (*t)->path();
    struct stat st;
    ASSERT_EQ(stat(path.c_str(), &st), 0);
    EXPECT_EQ(st.st_mode & 0777, 0700u);
    ASSERT_EQ(mkdir((path + "/sub").c_str(), 0700), 0);
    WriteAll(path + "/sub/file", "x");
    WriteAll(path + "/file", "y");
  }
  EXPECT_NE(access(path.c_str(), F_OK), 0);
}

TEST_F(AtomicFileTest, TempDirIsMadeUnderTmpdirElseUnderTmp) {
  const char* saved = std::getenv("TMPDIR");
  const std::string saved_value = saved ? saved : "";
  setenv("TMPDIR", dir_->path().c_str(), 1);
  auto under_tmpdir = TempDir::Create("pacset-where");
  setenv("TMPDIR", "", 1);  // empty: as if unset
  auto under_tmp = TempDir::Create("pacset-where");
  if (saved) {
    setenv("TMPDIR", saved_value.c_str(), 1);
  } else {
    unsetenv("TMPDIR");
  }
  ASSERT_TRUE(under_tmpdir.ok() && under_tmp.ok());
  EXPECT_EQ(DirName((*under_tmpdir)->path()), dir_->path());
  EXPECT_EQ(DirName((*under_tmp)->path()), "/tmp");
  const std::string name = BaseName((*under_tmpdir)->path());
  EXPECT_EQ(name.rfind("pacset-where-", 0), 0u) << name;
  EXPECT_EQ(name.size(), std::string("pacset-where-XXXXXX").size()) << name;
}

// pack -o: the old packer wrote PATH.tmp.PID with O_CREAT|O_TRUNC.
TEST_F(AtomicFileTest, PackNeverWritesThroughAPlantedTemporaryName) {
  const std::string out = Path("forest.pac");
  PlantSymlink(out + ".tmp." + std::to_string(getpid()));
  PackOptions po;
  ASSERT_TRUE(PackForestToFile(testing::TwoTreeRegression(), po, out).ok());
  ExpectVictimIntact();
  EXPECT_TRUE(IsRegular(out));
}

TEST_F(AtomicFileTest, PackReplacesASymlinkAtTheOutputPath) {
  const std::string out = Path("forest.pac");
  PlantSymlink(out);
  PackOptions po;
  ASSERT_TRUE(PackForestToFile(testing::TwoTreeRegression(), po, out).ok());
  ExpectVictimIntact();
  EXPECT_TRUE(IsRegular(out));
}

// predict --output: the old writer fopen()ed the path, following a symlink.
TEST_F(AtomicFileTest, CsvOutputReplacesASymlinkAndAppearsOnlyWhenClosed) {
  const std::string out = Path("pred.csv");
  PlantSymlink(out);
  CsvWriter w;
  ASSERT_TRUE(w.Open(out).ok());
  const double row[2] = {0.5, 1.5};
  w.WriteRow(row, 2, false);
  EXPECT_TRUE(IsSymlink(out));  // nothing replaced before Close()
  ASSERT_TRUE(w.Close().ok());
  ExpectVictimIntact();
  EXPECT_EQ(ReadAll(out), "0.5,1.5\n");
}

TEST_F(AtomicFileTest, CsvWriterDestroyedWithoutCloseKeepsTheOldOutput) {
  const std::string out = Path("pred.csv");
  WriteAll(out, "old\n");
  {
    CsvWriter w;
    ASSERT_TRUE(w.Open(out).ok());
    const double row[1] = {1};
    w.WriteRow(row, 1, false);
  }
  EXPECT_EQ(ReadAll(out), "old\n");
  EXPECT_EQ(Names(dir_->path()), (std::vector<std::string>{"pred.csv", "victim"}));
}

TEST_F(AtomicFileTest, SavedForestReplacesASymlink) {
  const std::string out = Path("forest.bin");
  PlantSymlink(out);
  ASSERT_TRUE(SaveForest(testing::TwoTreeRegression(), out).ok());
  ExpectVictimIntact();
  EXPECT_TRUE(LoadForest(out).ok());
}

// Issue 13 item 5: `pacset import MODEL` packed into $TMPDIR/pacset-import-PID.pac
// (through PATH.tmp.PID), names any local user can predict and plant.
TEST_F(AtomicFileTest, ImportNeverWritesThroughPlantedNamesInTmpdir) {
  const std::string tmpdir = Path("shared-tmp");
  ASSERT_EQ(mkdir(tmpdir.c_str(), 01777), 0);
  const std::string pid = std::to_string(getpid());
  const std::string old_temp = tmpdir + "/pacset-import-" + pid + ".pac";
  PlantSymlink(old_temp);
  PlantSymlink(old_temp + ".tmp." + pid);
  const std::string model = Path("model.forest");
  ASSERT_TRUE(SaveForest(testing::TwoTreeRegression(), model).ok());

  const char* saved = std::getenv("TMPDIR");
  const std::string saved_value = saved ? saved : "";
  setenv("TMPDIR", tmpdir.c_str(), 1);
  ImportOptions o;
  o.input = model;
  o.name = "planted";
  o.pack.block_size = "4KiB";
  o.store.store = "rocksdb:" + Path("store");
  Status s = RunImport(o);
  if (saved) {
    setenv("TMPDIR", saved_value.c_str(), 1);
  } else {
    unsetenv("TMPDIR");
  }
  ASSERT_TRUE(s.ok()) << s.ToString();
  ExpectVictimIntact();
  // Only the planted links remain: the private directory is gone.
  EXPECT_EQ(Names(tmpdir), (std::vector<std::string>{"pacset-import-" + pid + ".pac",
                                                     "pacset-import-" + pid + ".pac.tmp." + pid}));
}

}  // namespace
}  // namespace pacset
