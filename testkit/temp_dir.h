// A fresh directory for a test, removed with everything in it.
#pragma once

#include <string>

namespace pacset {
namespace store_test {

// A fresh directory under $TMPDIR (or /tmp), removed with everything in it.
class TempDir {
 public:
  TempDir();
  ~TempDir();
  TempDir(const TempDir&) = delete;
  TempDir& operator=(const TempDir&) = delete;
  const std::string& path() const { return path_; }

 private:
  std::string path_;
};

}  // namespace store_test
}  // namespace pacset
