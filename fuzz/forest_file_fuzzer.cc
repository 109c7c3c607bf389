// libFuzzer target: LoadForest (the cereal-encoded forest file that
// `ImportModel` recognises by its first bytes) on arbitrary files.
#include <cstddef>
#include <cstdint>

#include "fuzz/fuzz_file.h"
#include "fuzz/import_fuzz.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  return pacset::CheckImported(pacset::LoadForest(pacset::FuzzInputAsFile(data, size)));
}
