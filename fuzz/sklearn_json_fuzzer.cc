// libFuzzer target: the scikit-learn export JSON (docs/sklearn-export.md) importer on arbitrary
// bytes.
#include <cstddef>
#include <cstdint>
#include <string_view>

#include "fuzz/import_fuzz.h"
#include "model/import.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string_view bytes(reinterpret_cast<const char*>(data), size);
  return pacset::CheckImported(pacset::ImportSklearnJson(bytes, "fuzz.json"));
}
