// libFuzzer target: the scikit-learn exporter's binary stream
// (docs/sklearn-export.md), the stream's magic supplied.
#include <cstddef>
#include <cstdint>
#include <string>

#include "fuzz/import_fuzz.h"
#include "model/import.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  std::string bytes(pacset::kSklearnStreamMagic, sizeof(pacset::kSklearnStreamMagic));
  bytes.append(reinterpret_cast<const char*>(data), size);
  return pacset::CheckImported(pacset::ImportSklearnStream(bytes, "fuzz.joblib"));
}
