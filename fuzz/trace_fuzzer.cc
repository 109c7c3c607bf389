// libFuzzer target: the trace reader and the request-marks reader on
// arbitrary files.
#include <cstddef>
#include <cstdint>

#include "fuzz/fuzz_file.h"
#include "trace/trace_reader.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string& path = pacset::FuzzInputAsFile(data, size);
  uint64_t skipped = 0;
  (void)pacset::ReadRequestMarks(path, &skipped);
  auto r = pacset::TraceReader::Open(path);
  if (!r.ok()) return 0;
  pacset::TraceRecord rec;
  while ((*r)->Next(&rec)) (void)(*r)->ForestName(rec.forest);
  return 0;
}
