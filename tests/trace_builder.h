// Test traces built record by record (the encoder is the one under test
// elsewhere; here it is the way to make exact inputs).
#pragma once

#include <unistd.h>

#include <gtest/gtest.h>

#include <string>

#include "tests/test_files.h"
#include "trace/trace_format.h"

namespace pacset {

// One block access of a trace (4 KiB, at time 1 ns; `failed`: the fetch failed).
inline TraceRecord BlockAccessRecord(uint32_t forest, uint64_t block, uint64_t generation = 1,
                                     TraceSource src = TraceSource::kStore, bool failed = false) {
  TraceRecord r;
  r.type = TraceRecordType::kBlockAccess;
  r.source = src;
  r.forest = forest;
  r.generation = generation;
  r.block = block;
  r.bytes = 4096;
  r.time_ns = 1;
  r.flags = failed ? kTraceFlagError : 0;
  return r;
}

// Builds a trace file record by record.
class TraceBuilder {
 public:
  explicit TraceBuilder(uint32_t version = kTraceVersion) {
    TraceFileHeader h;
    h.version = version;
    h.start_monotonic_ns = 1000;
    char buf[kTraceHeaderSize];
    EncodeTraceHeader(h, buf);
    bytes_.assign(buf, sizeof(buf));
  }
  TraceBuilder& Add(const TraceRecord& r) {
    char buf[kTraceRecordSize];
    EncodeTraceRecord(r, buf);
    bytes_.append(buf, sizeof(buf));
    return *this;
  }
  TraceBuilder& Name(uint32_t forest, const std::string& name) {
    TraceRecord r;
    r.type = TraceRecordType::kForestName;
    r.forest = forest;
    r.generation = name.size();
    for (size_t off = 0, i = 0; off < name.size() || i == 0; off += kTraceNameChunk, ++i) {
      r.chunk_index = static_cast<uint32_t>(i);
      r.name_chunk = name.substr(off, kTraceNameChunk);
      Add(r);
    }
    return *this;
  }
  TraceBuilder& Access(uint32_t forest, uint64_t block, uint64_t t, uint32_t tid,
                       TraceSource src = TraceSource::kStore, uint32_t latency = 100) {
    TraceRecord r = BlockAccessRecord(forest, block, 1, src);
    r.time_ns = t;
    r.pid = tid;
    r.latency_ns = latency;
    return Add(r);
  }
  TraceBuilder& Mark(bool begin, uint64_t id, uint64_t t, uint32_t tid, uint32_t tgid,
                     uint64_t first_row = 0, uint32_t rows = 0) {
    TraceRecord r;
    r.type = begin ? TraceRecordType::kRequestBegin : TraceRecordType::kRequestEnd;
    r.time_ns = t;
    r.block = id;
    r.pid = tid;
    r.tgid = tgid;
    r.first_row = first_row;
    r.row_count = rows;
    return Add(r);
  }
  TraceBuilder& Info(uint32_t forest, uint64_t generation, uint32_t block_size,
                     uint64_t block_count) {
    TraceRecord r;
    r.type = TraceRecordType::kForestInfo;
    r.forest = forest;
    r.generation = generation;
    r.bytes = block_size;
    r.block = block_count;
    return Add(r);
  }
  TraceBuilder& Drop(uint32_t forest, uint64_t t) {
    TraceRecord r;
    r.type = TraceRecordType::kDropCache;
    r.forest = forest;
    r.time_ns = t;
    return Add(r);
  }
  TraceBuilder& Thread(uint32_t tid, uint32_t tgid) {
    TraceRecord r;
    r.type = TraceRecordType::kThread;
    r.pid = tid;
    r.tgid = tgid;
    return Add(r);
  }
  const std::string& bytes() const { return bytes_; }
  // Writes the trace to a file of the test process's own directory named
  // after `name` (testing::TempPath).
  std::string Save(const std::string& name) const {
    const std::string path = testing::TempPath(name);
    testing::WriteAll(path, bytes_);
    return path;
  }

 private:
  std::string bytes_;
};

}  // namespace pacset
