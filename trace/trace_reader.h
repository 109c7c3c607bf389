// Streaming reader for trace files: constant memory whatever the trace size,
// and robust to a torn tail (a daemon killed mid-write): every whole record
// written before the cut is read; a partial last record is ignored; a record
// whose checksum fails is skipped and counted.
#pragma once

#include <cstdint>
#include <cstdio>
#include <memory>
#include <string>
#include <unordered_map>

#include "trace/trace_format.h"
#include "util/status.h"

namespace pacset {

class TraceReader {
 public:
  static StatusOr<std::unique_ptr<TraceReader>> Open(const std::string& path);
  ~TraceReader();

  // The next record (forest name records included); false at the end.
  bool Next(TraceRecord* r);

  const TraceFileHeader& header() const { return header_; }
  // The name of forest `id` once its name records have been read.
  std::string ForestName(uint32_t id) const;
  uint64_t records() const { return records_; }
  uint64_t bad_records() const { return bad_records_; }
  bool torn_tail() const { return torn_tail_; }

 private:
  TraceReader() = default;
  std::FILE* file_ = nullptr;
  TraceFileHeader header_;
  std::unordered_map<uint32_t, std::string> names_;
  uint64_t records_ = 0;
  uint64_t bad_records_ = 0;
  bool torn_tail_ = false;
};

}  // namespace pacset
