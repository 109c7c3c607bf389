// Every function that opens a model or a .pac file by path refuses, at once,
// a path that is not a regular file (util/file_io.h OpenRegularFile): a FIFO
// blocked the open until a writer came (forever), /dev/zero was read into
// memory without end, a directory failed with "the file is empty".
#include <gtest/gtest.h>

#include <sys/stat.h>

#include <cerrno>
#include <chrono>
#include <cstring>
#include <functional>
#include <string>
#include <utility>
#include <vector>

#include "engine/engine.h"
#include "layout/pac_file.h"
#include "model/forest.h"
#include "model/import.h"
#include "tests/deadline.h"
#include "util/atomic_file.h"

namespace pacset {
namespace {

// Each way a path is opened as a model or a .pac file.
std::vector<std::pair<std::string, std::function<Status(const std::string&)>>> Openers() {
  std::vector<std::pair<std::string, std::function<Status(const std::string&)>>> openers = {
      {"PacFile::Open", [](const std::string& p) { return PacFile::Open(p).status(); }},
      {"PacEngine::Open", [](const std::string& p) { return PacEngine::Open(p).status(); }},
      {"DetectModelFormat", [](const std::string& p) { return DetectModelFormat(p).status(); }},
      {"LoadForest", [](const std::string& p) { return LoadForest(p).status(); }},
  };
  for (ModelFormat f : {ModelFormat::kAuto, ModelFormat::kXgboostJson, ModelFormat::kXgboostUbjson,
                        ModelFormat::kSklearnJson, ModelFormat::kSklearnPickle,
                        ModelFormat::kLightgbmText, ModelFormat::kPacsetForest}) {
    HelperPrograms helpers;
    helpers.sklearn_exporter = "/nonexistent/pacset-sklearn-export";
    openers.emplace_back(
        std::string("ImportModel ") + ModelFormatName(f),
        [f, helpers](const std::string& p) { return ImportModel(p, f, helpers).status(); });
  }
  return openers;
}

// Opens `path` with every opener; each must refuse it with `message`.
void ExpectEveryOpenerRefuses(const std::string& path, const std::string& message) {
  for (const auto& [name, open] : Openers()) {
    const std::string what = name + "(" + path + ")";
    Status s = ::pacset::testing::FinishesWithin(std::chrono::seconds(20), what.c_str(),
                                                 [open = open, path] { return open(path); });
    EXPECT_EQ(s.code(), StatusCode::kInvalidArgument) << what << ": " << s.ToString();
    EXPECT_EQ(s.message(), message) << what;
  }
}

TEST(ModelPath, AFifoIsRefusedAtOnceByEveryOpener) {
  auto dir = TempDir::Create("model-path-test").value();
  for (const std::string name : {"model.json", "model.pac", "model.joblib"}) {
    const std::string fifo = dir->path() + "/" + name;
    ASSERT_EQ(::mkfifo(fifo.c_str(), 0600), 0) << std::strerror(errno);
    ExpectEveryOpenerRefuses(fifo, fifo + " is a FIFO, not a regular file");
  }
}

TEST(ModelPath, ADeviceThatNeverEndsIsRefusedByEveryOpener) {
  ExpectEveryOpenerRefuses("/dev/zero", "/dev/zero is a character device, not a regular file");
  ExpectEveryOpenerRefuses("/dev/null", "/dev/null is a character device, not a regular file");
}

TEST(ModelPath, ADirectoryIsRefusedByEveryOpener) {
  auto dir = TempDir::Create("model-path-test").value();
  ExpectEveryOpenerRefuses(dir->path(), dir->path() + " is a directory, not a regular file");
}

TEST(ModelPath, AMissingFileIsNotFoundForEveryOpener) {
  auto dir = TempDir::Create("model-path-test").value();
  const std::string path = dir->path() + "/missing.json";
  for (const auto& [name, open] : Openers()) {
    Status s = open(path);
    EXPECT_TRUE(s.IsNotFound()) << name << ": " << s.ToString();
    EXPECT_EQ(s.message(), "cannot open " + path + ": No such file or directory") << name;
  }
}

}  // namespace
}  // namespace pacset
