// libFuzzer target: the CSV row parser.
#include <cstddef>
#include <cstdint>
#include <string_view>

#include "util/csv.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string_view text(reinterpret_cast<const char*>(data), size);
  auto m = pacset::ParseCsvRows(text, size % 5, "fuzz.csv");
  if (m.ok() && m->values.size() != m->num_rows * m->num_cols) __builtin_trap();
  return 0;
}
