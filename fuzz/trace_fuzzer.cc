// libFuzzer target: the trace reader on arbitrary files.
#include <unistd.h>

#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <string>

#include "trace/trace_reader.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  static const std::string path = "/tmp/pacset-trace-fuzz-" + std::to_string(getpid());
  std::FILE* f = std::fopen(path.c_str(), "wb");
  if (!f) return 0;
  std::fwrite(data, 1, size, f);
  std::fclose(f);
  auto r = pacset::TraceReader::Open(path);
  if (!r.ok()) return 0;
  pacset::TraceRecord rec;
  while ((*r)->Next(&rec)) (void)(*r)->ForestName(rec.forest);
  return 0;
}
