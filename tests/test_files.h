// Whole-file reads and writes for tests that make or inspect files.
#pragma once

#include <fstream>
#include <iterator>
#include <string>

namespace pacset::testing {

inline std::string ReadAll(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  return std::string(std::istreambuf_iterator<char>(in), {});
}

inline void WriteAll(const std::string& path, const std::string& bytes) {
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  out << bytes;
}

}  // namespace pacset::testing
