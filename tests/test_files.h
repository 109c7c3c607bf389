// Whole-file reads and writes for tests that make or inspect files.
#pragma once

#include <fstream>
#include <iterator>
#include <memory>
#include <string>

#include "util/atomic_file.h"

namespace pacset::testing {

inline std::string ReadAll(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  return std::string(std::istreambuf_iterator<char>(in), {});
}

inline void WriteAll(const std::string& path, const std::string& bytes) {
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  out << bytes;
}

// A path in a directory of this test process's own, made at first use and
// removed with everything in it at exit: a name never meets a file that an
// earlier run (a process with the same pid) left behind.
inline std::string TempPath(const std::string& name) {
  static const std::unique_ptr<TempDir> dir = TempDir::Create("pacset-test").value();
  return dir->path() + "/" + name;
}

}  // namespace pacset::testing
