#include "testkit/temp_dir.h"

#include <cstdlib>

#include "store/internal/file_util.h"

namespace pacset {
namespace store_test {

TempDir::TempDir() {
  const char* t = std::getenv("TMPDIR");
  std::string tmpl = std::string(t != nullptr && *t != '\0' ? t : "/tmp") + "/pacset-store-XXXXXX";
  char* p = ::mkdtemp(tmpl.data());
  path_ = p != nullptr ? p : "";
}

TempDir::~TempDir() {
  if (!path_.empty()) store_internal::RemoveTree(path_);
}

}  // namespace store_test
}  // namespace pacset
