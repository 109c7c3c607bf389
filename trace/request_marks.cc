#include "trace/request_marks.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <vector>

#include "trace/trace_format.h"
#include "trace/trace_reader.h"
#include "util/atomic_file.h"

namespace pacset {

StatusOr<std::unique_ptr<RequestMarker>> RequestMarker::Open(const std::string& path) {
  std::unique_ptr<RequestMarker> m(new RequestMarker());
  m->path_ = path;
  // O_NOFOLLOW, a regular file, ours: a symlink or file planted under the
  // agreed name (e.g. in /tmp) must not make us append to someone else's file.
  m->fd_ =
      open(path.c_str(), O_WRONLY | O_APPEND | O_CREAT | O_NOFOLLOW | O_NOCTTY | O_CLOEXEC, 0600);
  if (m->fd_ < 0) {
    if (errno == ELOOP)
      return Status::InvalidArgument("request marks file " + path +
                                     " is a symbolic link; refusing to follow it");
    return Status::FromErrno("cannot open request marks file " + path, errno);
  }
  struct stat st;
  if (fstat(m->fd_, &st) != 0) return Status::FromErrno("cannot stat " + path, errno);
  if (!S_ISREG(st.st_mode))
    return Status::InvalidArgument("request marks file " + path + " is not a regular file");
  if (st.st_uid != geteuid())
    return Status::InvalidArgument("request marks file " + path + " belongs to user " +
                                   std::to_string(st.st_uid) + ", not to this user");
  return m;
}

RequestMarker::~RequestMarker() {
  if (fd_ >= 0) close(fd_);
}

void RequestMarker::Begin(uint64_t id, uint64_t first_row, uint32_t rows) {
  Mark(true, id, first_row, rows, static_cast<uint32_t>(syscall(SYS_gettid)),
       static_cast<uint32_t>(getpid()));
}

void RequestMarker::End(uint64_t id, uint64_t first_row, uint32_t rows) {
  Mark(false, id, first_row, rows, static_cast<uint32_t>(syscall(SYS_gettid)),
       static_cast<uint32_t>(getpid()));
}

void RequestMarker::Mark(bool begin, uint64_t id, uint64_t first_row, uint32_t rows, uint32_t tid,
                         uint32_t tgid) {
  TraceRecord r;
  r.type = begin ? TraceRecordType::kRequestBegin : TraceRecordType::kRequestEnd;
  r.time_ns = MonotonicNowNs();
  r.block = id;
  r.first_row = first_row;
  r.row_count = rows;
  r.pid = tid;
  r.tgid = tgid;
  char buf[kTraceRecordSize];
  EncodeTraceRecord(r, buf);
  ssize_t n;
  do {
    n = write(fd_, buf, sizeof(buf));
  } while (n < 0 && errno == EINTR);
  if (n != static_cast<ssize_t>(sizeof(buf)) && error_ == 0) error_ = n < 0 ? errno : EIO;
}

Status RequestMarker::status() const {
  if (error_ == 0) return Status::Ok();
  return Status::FromErrno("cannot write request marks to " + path_, error_);
}

namespace {

// Time of a raw record for ordering; records without a time (names, forest
// info) and damaged ones sort with what precedes them (-1: keep in place).
int64_t RecordTime(const char* raw) {
  TraceRecord r;
  if (DecodeTraceRecord(raw, &r) != TraceDecodeResult::kOk) return -1;
  // Names, geometry and threads are written ahead of the accesses queued at
  // the time (trace_writer.cc): their times do not place them among those.
  // A process with many reading threads (the engine's fetches) shows it.
  if (r.type == TraceRecordType::kForestName || r.type == TraceRecordType::kForestInfo ||
      r.type == TraceRecordType::kThread)
    return -1;
  return static_cast<int64_t>(r.time_ns);
}

}  // namespace

Status MergeRequestMarks(const std::string& trace_path, const std::string& marks_path,
                         const std::string& out_path, uint64_t* merged) {
  uint64_t skipped = 0;
  PACSET_ASSIGN_OR_RETURN(std::vector<TraceRecord> marks, ReadRequestMarks(marks_path, &skipped));
  // Stable: a begin and an end with equal times keep their written order.
  std::stable_sort(marks.begin(), marks.end(), [](const TraceRecord& a, const TraceRecord& b) {
    return a.time_ns < b.time_ns;
  });
  // Validate the trace header with the reader's messages.
  { PACSET_ASSIGN_OR_RETURN(auto check, TraceReader::Open(trace_path)); }
  std::FILE* in = std::fopen(trace_path.c_str(), "rb");
  if (!in) return Status::FromErrno("cannot open trace " + trace_path, errno);
  auto target = AtomicFile::Create(out_path);
  const int out_fd = target.ok() ? dup((*target)->fd()) : -1;
  std::FILE* out = out_fd >= 0 ? fdopen(out_fd, "wb") : nullptr;
  if (!out) {
    const int err = errno;
    if (out_fd >= 0) close(out_fd);
    std::fclose(in);
    if (!target.ok()) return target.status();
    return Status::FromErrno("cannot write " + (*target)->temp_path(), err);
  }
  const std::string& tmp = (*target)->temp_path();
  std::vector<char> inbuf(1 << 20), outbuf(1 << 20);
  std::setvbuf(in, inbuf.data(), _IOFBF, inbuf.size());
  std::setvbuf(out, outbuf.data(), _IOFBF, outbuf.size());
  char header[kTraceHeaderSize];
  bool ok = std::fread(header, 1, sizeof(header), in) == sizeof(header);
  TraceFileHeader h;
  std::string error;
  if (ok && DecodeTraceHeader(header, &h, &error) && h.version < kTraceVersion) {
    // Request marks with rows and processes are a version 2 feature.
    h.version = kTraceVersion;
    EncodeTraceHeader(h, header);
  }
  ok = ok && std::fwrite(header, 1, sizeof(header), out) == sizeof(header);
  size_t next = 0;
  char raw[kTraceRecordSize];
  auto emit_marks_until = [&](int64_t t) {
    while (ok && next < marks.size() && static_cast<int64_t>(marks[next].time_ns) < t) {
      EncodeTraceRecord(marks[next++], raw);
      ok = std::fwrite(raw, 1, sizeof(raw), out) == sizeof(raw);
    }
  };
  size_t n = 0;
  char rec[kTraceRecordSize];
  while (ok && (n = std::fread(rec, 1, sizeof(rec), in)) == sizeof(rec)) {
    const int64_t t = RecordTime(rec);
    if (t >= 0) emit_marks_until(t);
    ok = std::fwrite(rec, 1, sizeof(rec), out) == sizeof(rec);
  }
  // A torn tail of the input is left out: the output ends on whole records.
  emit_marks_until(INT64_MAX);
  const int read_err = std::ferror(in) ? errno : 0;
  std::fclose(in);
  if (ok && std::fflush(out) != 0) ok = false;
  const int write_err = errno;
  if (std::fclose(out) != 0) ok = false;
  // On any failure the AtomicFile removes its temporary file and out_path is
  // left as it was.
  if (read_err) return Status::FromErrno("cannot read trace " + trace_path, read_err);
  if (!ok) return Status::FromErrno("cannot write " + tmp, write_err);
  PACSET_RETURN_IF_ERROR((*target)->Commit());
  *merged = marks.size();
  return Status::Ok();
}

}  // namespace pacset
