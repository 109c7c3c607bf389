// Request marks: how an inference engine tells a trace where its requests
// begin and end, so that block accesses can be attributed to requests.
//
// An engine appends kRequestBegin / kRequestEnd records (trace/FORMAT.md
// section 5) to a marks file: O_APPEND, one write() per 48-byte record, so
// several processes and threads can share one file without locks. The file
// has no header. `pacset-trace record` creates one, passes its path to the
// workload in $PACSET_REQUEST_MARKS and merges it into the trace afterwards
// (MergeRequestMarks); `pacset-trace merge` does the same by hand.
//
// A request is attributed the block accesses made by the marking thread
// (or, when the access comes from another thread, by the marking process)
// between its begin and end marks.
#pragma once

#include <cstdint>
#include <memory>
#include <string>

#include "util/status.h"

namespace pacset {

// The environment variable naming the marks file, and the one choosing the
// request unit of `pacset predict` ("row" or "batch"; default batch).
inline constexpr const char* kRequestMarksEnv = "PACSET_REQUEST_MARKS";
inline constexpr const char* kRequestMarksUnitEnv = "PACSET_REQUEST_MARKS_UNIT";

// Thread-safety: Begin/End may be called from any thread at once.
class RequestMarker {
 public:
  // Opens (creating if needed, mode 0600) `path` for appending. Refuses a
  // symbolic link, anything but a regular file, and a file of another user.
  static StatusOr<std::unique_ptr<RequestMarker>> Open(const std::string& path);
  ~RequestMarker();

  // Marks request `id` covering input rows [first_row, first_row + rows)
  // (rows = 0: unknown), from the calling thread. A failed write is kept
  // and reported by status(); the request itself is never disturbed.
  void Begin(uint64_t id, uint64_t first_row, uint32_t rows);
  void End(uint64_t id, uint64_t first_row, uint32_t rows);

  // A mark on behalf of thread `tid` of process `tgid`.
  void Mark(bool begin, uint64_t id, uint64_t first_row, uint32_t rows, uint32_t tid,
            uint32_t tgid);

  // The first write error, if any.
  Status status() const;

 private:
  RequestMarker() = default;
  int fd_ = -1;
  std::string path_;
  int error_ = 0;  // first errno (relaxed races are harmless: any error is reported)
};

// Merges the marks of `marks_path` into the trace at `trace_path`, ordered
// by time, writing the result to `out_path` (which may be `trace_path`: the
// result is written next to it and renamed over it). Streams the trace;
// holds the marks in memory (48 bytes each). `merged` gets the number of
// marks merged.
Status MergeRequestMarks(const std::string& trace_path, const std::string& marks_path,
                         const std::string& out_path, uint64_t* merged);

}  // namespace pacset
