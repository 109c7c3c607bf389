#include "trace/trace_reader.h"

#include <cerrno>

namespace pacset {

StatusOr<std::unique_ptr<TraceReader>> TraceReader::Open(const std::string& path) {
  std::unique_ptr<TraceReader> r(new TraceReader());
  r->path_ = path;
  r->file_ = std::fopen(path.c_str(), "rb");
  if (!r->file_) return Status::FromErrno("cannot open trace " + path, errno);
  r->buffer_.resize(1 << 20);
  std::setvbuf(r->file_, r->buffer_.data(), _IOFBF, r->buffer_.size());
  char buf[kTraceHeaderSize];
  const size_t n = std::fread(buf, 1, sizeof(buf), r->file_);
  if (n < 8 || std::memcmp(buf, kTraceMagic, 8) != 0)
    return Status::InvalidArgument(path + ": not a pacsetfs trace file (no PACTRACE magic)");
  if (n < sizeof(buf))
    return Status::InvalidArgument(path + ": truncated trace header (" + std::to_string(n) +
                                   " of " + std::to_string(kTraceHeaderSize) + " bytes)");
  std::string error;
  if (!DecodeTraceHeader(buf, &r->header_, &error))
    return Status::InvalidArgument(path + ": " + error);
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
      torn_bytes_ = n;
      return false;
    }
    switch (DecodeTraceRecord(buf, r)) {
      case TraceDecodeResult::kBadChecksum:
        ++bad_records_;
        continue;
      case TraceDecodeResult::kUnknownType:
        ++unknown_records_;
        continue;
      case TraceDecodeResult::kOk:
        break;
    }
    ++records_;
    switch (r->type) {
      case TraceRecordType::kForestName: {
        std::string& name = names_[r->forest];
        const size_t at = static_cast<size_t>(r->chunk_index) * kTraceNameChunk;
        if (at > r->generation) break;  // a chunk beyond the stated length: ignore
        if (name.size() < at + r->name_chunk.size()) name.resize(at + r->name_chunk.size());
        name.replace(at, r->name_chunk.size(), r->name_chunk);
        break;
      }
      case TraceRecordType::kForestInfo:
        infos_[r->forest] = *r;
        break;
      case TraceRecordType::kThread:
        threads_.emplace(r->pid, r->tgid);
        break;
      default:
        break;
    }
    return true;
  }
}

std::string TraceReader::ForestName(uint32_t id) const {
  auto it = names_.find(id);
  return it == names_.end() ? "forest#" + std::to_string(id) : it->second;
}

const TraceRecord* TraceReader::ForestInfo(uint32_t id) const {
  auto it = infos_.find(id);
  return it == infos_.end() ? nullptr : &it->second;
}

uint32_t TraceReader::ProcessOf(uint32_t tid) const {
  auto it = threads_.find(tid);
  return it == threads_.end() ? tid : it->second;
}

StatusOr<std::vector<TraceRecord>> ReadRequestMarks(const std::string& path, uint64_t* skipped) {
  std::FILE* f = std::fopen(path.c_str(), "rb");
  if (!f) return Status::FromErrno("cannot open request marks " + path, errno);
  std::vector<TraceRecord> marks;
  *skipped = 0;
  char buf[kTraceRecordSize];
  TraceRecord r;
  size_t n;
  while ((n = std::fread(buf, 1, sizeof(buf), f)) == sizeof(buf)) {
    if (DecodeTraceRecord(buf, &r) == TraceDecodeResult::kOk &&
        (r.type == TraceRecordType::kRequestBegin || r.type == TraceRecordType::kRequestEnd)) {
      marks.push_back(r);
    } else {
      ++*skipped;
    }
  }
  if (n > 0) ++*skipped;
  std::fclose(f);
  return marks;
}

}  // namespace pacset
