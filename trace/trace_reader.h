// Streaming reader for trace files: constant memory whatever the trace size
// (plus one entry per forest and per thread seen), and robust to a torn tail
// (a daemon killed mid-write): every whole record written before the cut is
// read; a partial last record is ignored; a record whose checksum fails is
// skipped and counted; a record of a type from a newer writer is skipped and
// counted.
#pragma once

#include <cstdint>
#include <cstdio>
#include <memory>
#include <string>
#include <unordered_map>
#include <vector>

#include "trace/trace_format.h"
#include "util/status.h"

namespace pacset {

class TraceReader {
 public:
  // Fails (kInvalidArgument) for a file that is not a trace, has a truncated
  // or damaged header, or is of an unsupported version.
  static StatusOr<std::unique_ptr<TraceReader>> Open(const std::string& path);
  ~TraceReader();

  // The next record (metadata records included); false at the end.
  bool Next(TraceRecord* r);

  const TraceFileHeader& header() const { return header_; }
  const std::string& path() const { return path_; }
  // The name of forest `id` once its name records have been read
  // ("forest#ID" before).
  std::string ForestName(uint32_t id) const;
  // The last kForestInfo record read for forest `id`, or null.
  const TraceRecord* ForestInfo(uint32_t id) const;
  // The process of thread `tid` (from kThread records); `tid` itself when
  // the trace does not say (version 1 traces, or before the record).
  uint32_t ProcessOf(uint32_t tid) const;

  uint64_t records() const { return records_; }
  uint64_t bad_records() const { return bad_records_; }
  uint64_t unknown_records() const { return unknown_records_; }
  // True when the file ends with a partial record (`torn_bytes` bytes).
  bool torn_tail() const { return torn_bytes_ > 0; }
  uint64_t torn_bytes() const { return torn_bytes_; }

 private:
  TraceReader() = default;
  std::FILE* file_ = nullptr;
  std::string path_;
  std::vector<char> buffer_;
  TraceFileHeader header_;
  std::unordered_map<uint32_t, std::string> names_;
  std::unordered_map<uint32_t, TraceRecord> infos_;
  std::unordered_map<uint32_t, uint32_t> threads_;
  uint64_t records_ = 0;
  uint64_t bad_records_ = 0;
  uint64_t unknown_records_ = 0;
  uint64_t torn_bytes_ = 0;
};

// Reads a request-marks file (headerless 48-byte records, see FORMAT.md
// section 5): the request marks in it, in file order; damaged records and
// other types are skipped and counted in `skipped`.
StatusOr<std::vector<TraceRecord>> ReadRequestMarks(const std::string& path, uint64_t* skipped);

}  // namespace pacset
