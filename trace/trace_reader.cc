#include "trace/trace_reader.h"

#include <cerrno>

namespace pacset {

StatusOr<std::unique_ptr<TraceReader>> TraceReader::Open(const std::string& path) {
  std::unique_ptr<TraceReader> r(new TraceReader());
  r->file_ = std::fopen(path.c_str(), "rb");
  if (!r->file_) return Status::FromErrno("cannot open trace " + path, errno);
  char buf[kTraceHeaderSize];
  if (std::fread(buf, 1, sizeof(buf), r->file_) != sizeof(buf))
    return Status::InvalidArgument(path + ": too short to be a pacsetfs trace");
  std::string error;
  if (!DecodeTraceHeader(buf, &r->header_, &error)) return Status::InvalidArgument(path + ": " + error);
  return r;
}

TraceReader::~TraceReader() {
  if (file_) std::fclose(file_);
}

bool TraceReader::Next(TraceRecord* r) {
  char buf[kTraceRecordSize];
  while (true) {
    const size_t n = std::fread(buf, 1, sizeof(buf), file_);
    if (n == 0) return false;
    if (n < sizeof(buf)) {
      torn_tail_ = true;
      return false;
    }
    if (!DecodeTraceRecord(buf, r)) {
      ++bad_records_;
      continue;
    }
    ++records_;
    if (r->type == TraceRecordType::kForestName) {
      std::string& name = names_[r->forest];
      const size_t at = static_cast<size_t>(r->chunk_index) * kTraceNameChunk;
      if (name.size() < at + r->name_chunk.size()) name.resize(at + r->name_chunk.size());
      name.replace(at, r->name_chunk.size(), r->name_chunk);
    }
    return true;
  }
}

std::string TraceReader::ForestName(uint32_t id) const {
  auto it = names_.find(id);
  return it == names_.end() ? "forest#" + std::to_string(id) : it->second;
}

}  // namespace pacset
