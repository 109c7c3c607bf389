#include "trace/trace_writer.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>

namespace pacset {

StatusOr<std::unique_ptr<TraceWriter>> TraceWriter::Open(const std::string& path,
                                                         size_t queue_records) {
  std::unique_ptr<TraceWriter> w(new TraceWriter());
  w->path_ = path;
  const int fd =
      open(path.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, S_IRUSR | S_IWUSR);
  if (fd < 0) {
    const int err = errno;
    if (err == EEXIST)
      return Status::AlreadyExists("trace file " + path +
                                   " already exists (a trace never overwrites a file: remove it "
                                   "or choose another name)");
    return Status::FromErrno("cannot create trace file " + path, err);
  }
  w->file_ = fdopen(fd, "wb");
  if (!w->file_) {
    const int err = errno;
    close(fd);
    return Status::FromErrno("cannot create trace file " + path, err);
  }
  size_t n = 1;
  while (n < queue_records) n <<= 1;
  w->cells_.reset(new Cell[n]);
  for (size_t i = 0; i < n; ++i) w->cells_[i].seq.store(i, std::memory_order_relaxed);
  w->mask_ = n - 1;
  TraceFileHeader h;
  h.start_monotonic_ns = MonotonicNowNs();
  h.start_realtime_ns = RealtimeNowNs();
  h.pid = static_cast<uint32_t>(getpid());
  char buf[kTraceHeaderSize];
  EncodeTraceHeader(h, buf);
  w->WriteRaw(buf, sizeof(buf));
  std::fflush(w->file_);
  w->thread_ = std::thread([p = w.get()] { p->Run(); });
  return w;
}

TraceWriter::~TraceWriter() { (void)Close(); }

// Bounded MPMC queue (Vyukov): each cell's sequence number says whether it is
// free for the producer at position pos (seq == pos) or full for the consumer
// (seq == pos + 1).
void TraceWriter::Record(const TraceRecord& r) {
  uint64_t pos = enqueue_pos_.load(std::memory_order_relaxed);
  Cell* cell;
  while (true) {
    cell = &cells_[pos & mask_];
    const uint64_t seq = cell->seq.load(std::memory_order_acquire);
    const int64_t diff = static_cast<int64_t>(seq) - static_cast<int64_t>(pos);
    if (diff == 0) {
      if (enqueue_pos_.compare_exchange_weak(pos, pos + 1, std::memory_order_relaxed)) break;
    } else if (diff < 0) {
      dropped_.fetch_add(1, std::memory_order_relaxed);  // full
      return;
    } else {
      pos = enqueue_pos_.load(std::memory_order_relaxed);
    }
  }
  EncodeTraceRecord(r, cell->data);
  cell->seq.store(pos + 1, std::memory_order_release);
}

bool TraceWriter::Pop(char* out, uint64_t limit) {
  uint64_t pos = dequeue_pos_.load(std::memory_order_relaxed);
  Cell* cell;
  while (true) {
    if (pos >= limit) return false;
    cell = &cells_[pos & mask_];
    const uint64_t seq = cell->seq.load(std::memory_order_acquire);
    const int64_t diff = static_cast<int64_t>(seq) - static_cast<int64_t>(pos + 1);
    if (diff == 0) {
      if (dequeue_pos_.compare_exchange_weak(pos, pos + 1, std::memory_order_relaxed)) break;
    } else if (diff < 0) {
      return false;  // empty
    } else {
      pos = dequeue_pos_.load(std::memory_order_relaxed);
    }
  }
  std::memcpy(out, cell->data, kTraceRecordSize);
  cell->seq.store(pos + mask_ + 1, std::memory_order_release);
  return true;
}

uint32_t TraceWriter::ForestId(const std::string& name) {
  std::lock_guard<std::mutex> lock(names_mu_);
  return ForestIdLocked(name);
}

void TraceWriter::AddPendingLocked(const TraceRecord& r) {
  std::string buf(kTraceRecordSize, '\0');
  EncodeTraceRecord(r, buf.data());
  pending_.push_back(std::move(buf));
}

uint32_t TraceWriter::ForestIdLocked(const std::string& name) {
  auto it = names_.find(name);
  if (it != names_.end()) return it->second;
  const uint32_t id = static_cast<uint32_t>(names_.size() + 1);
  names_[name] = id;
  for (size_t off = 0, chunk = 0; off < name.size() || chunk == 0;
       off += kTraceNameChunk, ++chunk) {
    TraceRecord r;
    r.type = TraceRecordType::kForestName;
    r.forest = id;
    r.generation = name.size();
    r.chunk_index = static_cast<uint32_t>(chunk);
    r.name_chunk = name.substr(off, kTraceNameChunk);
    AddPendingLocked(r);
  }
  return id;
}

uint32_t TraceWriter::Forest(const ForestGeometry& f) {
  std::lock_guard<std::mutex> lock(names_mu_);
  const uint32_t id = ForestIdLocked(f.name);
  if (described_.insert({id, f.generation}).second) {
    TraceRecord r;
    r.type = TraceRecordType::kForestInfo;
    r.forest = id;
    r.header_checksum = f.header_checksum;
    r.generation = f.generation;
    r.block = f.block_count;
    r.bytes = f.block_size;
    AddPendingLocked(r);
  }
  return id;
}

void TraceWriter::NoteThread(uint32_t tid) {
  std::lock_guard<std::mutex> lock(names_mu_);
  if (!threads_.insert(tid).second) return;
  TraceRecord r;
  r.type = TraceRecordType::kThread;
  r.time_ns = MonotonicNowNs();
  r.pid = tid;
  r.tgid = tid;  // when /proc cannot tell (thread gone): assume a single-threaded process
  const std::string path = "/proc/" + std::to_string(tid) + "/status";
  if (std::FILE* f = std::fopen(path.c_str(), "r")) {
    char line[256];
    while (std::fgets(line, sizeof(line), f)) {
      unsigned long v = 0;
      if (std::sscanf(line, "Tgid: %lu", &v) == 1) {
        r.tgid = static_cast<uint32_t>(v);
        break;
      }
    }
    std::fclose(f);
  }
  AddPendingLocked(r);
}

void TraceWriter::WriteRaw(const char* data, size_t n) {
  if (write_failed_) return;
  if (std::fwrite(data, 1, n, file_) != n) {
    write_failed_ = true;
    write_errno_ = errno;
  }
}

void TraceWriter::Run() {
  char rec[kTraceRecordSize];
  while (true) {
    const bool stopping = stop_.load(std::memory_order_acquire);
    // Every record claimed before `limit` was enqueued after the metadata it
    // refers to was made pending, so writing the pending metadata first and
    // then only records below `limit` keeps definitions before uses.
    const uint64_t limit = enqueue_pos_.load(std::memory_order_acquire);
    {
      std::lock_guard<std::mutex> lock(names_mu_);
      for (const auto& n : pending_) WriteRaw(n.data(), n.size());
      pending_.clear();
    }
    uint64_t n = 0;
    while (Pop(rec, limit)) {
      WriteRaw(rec, sizeof(rec));
      ++n;
    }
    written_.fetch_add(n, std::memory_order_relaxed);
    const uint64_t dropped = dropped_.load(std::memory_order_relaxed);
    if (dropped != dropped_reported_) {
      TraceRecord d;
      d.type = TraceRecordType::kDropped;
      d.time_ns = MonotonicNowNs();
      d.block = dropped - dropped_reported_;
      EncodeTraceRecord(d, rec);
      WriteRaw(rec, sizeof(rec));
      dropped_reported_ = dropped;
    }
    // Whole records reach the file promptly, so a killed daemon leaves a
    // readable trace (at most a torn last record).
    std::fflush(file_);
    if (stopping) {
      // Records claimed before Close() are published within nanoseconds.
      if (dequeue_pos_.load(std::memory_order_relaxed) >= limit) break;
      std::this_thread::yield();
      continue;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(n ? 1 : 20));
  }
}

Status TraceWriter::Close() {
  if (closed_) return Status::Ok();
  closed_ = true;
  stop_.store(true, std::memory_order_release);
  if (thread_.joinable()) thread_.join();
  if (file_ == nullptr) return Status::Ok();  // Open failed: nothing was written
  if (std::fflush(file_) != 0 && !write_failed_) {
    write_failed_ = true;
    write_errno_ = errno;
  }
  fsync(fileno(file_));
  if (std::fclose(file_) != 0 && !write_failed_) {
    write_failed_ = true;
    write_errno_ = errno;
  }
  file_ = nullptr;
  if (write_failed_) return Status::FromErrno("cannot write trace file " + path_, write_errno_);
  return Status::Ok();
}

}  // namespace pacset
