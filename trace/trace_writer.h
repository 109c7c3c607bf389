// Writing a block-access trace without slowing page faults down.
//
// Producers (the filesystem's worker threads) encode a record and push it
// into a bounded lock-free multi-producer queue; a background thread drains
// the queue into the file. When the queue is full the record is dropped and
// counted (the count is written to the trace as a kDropped record): a page
// fault never waits for the disk. Memory is bounded by the queue size.
//
// Metadata records (forest names, forest geometry, thread -> process) are
// never dropped, and the writer thread puts each one in the file before any
// queued record that was enqueued after it was announced, so a reader meets
// a forest's name and a thread's process before (or with) their first use.
//
// Thread-safety: Record(), ForestId(), Forest() and NoteThread() may be
// called from any thread.
#pragma once

#include <atomic>
#include <cstdint>
#include <cstdio>
#include <memory>
#include <mutex>
#include <set>
#include <string>
#include <thread>
#include <unordered_map>
#include <unordered_set>
#include <vector>

#include "trace/trace_format.h"
#include "util/status.h"

namespace pacset {

class TraceWriter {
 public:
  // Creates `path` (mode 0600) and starts the writer thread. `queue_records`
  // is rounded up to a power of two. Never opens an existing file and never
  // follows a symbolic link (O_CREAT|O_EXCL|O_NOFOLLOW: the daemon may run
  // as root and write where a user asks): an existing name, a symbolic link
  // included, is kAlreadyExists.
  static StatusOr<std::unique_ptr<TraceWriter>> Open(const std::string& path,
                                                     size_t queue_records = 1 << 16);
  ~TraceWriter();

  // Never blocks; drops (and counts) the record when the queue is full.
  void Record(const TraceRecord& r);
  // The trace's id for a forest name; the first call for a name writes its
  // name records (these are never dropped).
  uint32_t ForestId(const std::string& name);

  // Like ForestId(), and also writes a kForestInfo record the first time a
  // generation of the forest is seen.
  struct ForestGeometry {
    std::string name;
    uint64_t generation = 0;
    uint32_t block_size = 0;
    uint64_t block_count = 0;
    uint64_t header_checksum = 0;
  };
  uint32_t Forest(const ForestGeometry& f);

  // Writes a kThread record (thread -> process, from /proc/TID/status) the
  // first time thread `tid` is seen. Thread ids are recycled by the kernel;
  // a trace keeps the first process it saw for an id.
  void NoteThread(uint32_t tid);

  uint64_t dropped() const { return dropped_.load(std::memory_order_relaxed); }
  uint64_t written() const { return written_.load(std::memory_order_relaxed); }

  // Drains the queue, writes everything and syncs the file; returns the first
  // write error. Called by the destructor if not called before.
  Status Close();

 private:
  struct Cell {
    std::atomic<uint64_t> seq;
    char data[kTraceRecordSize];
  };
  TraceWriter() = default;
  bool Pop(char* out, uint64_t limit);
  uint32_t ForestIdLocked(const std::string& name);
  void AddPendingLocked(const TraceRecord& r);
  void Run();
  void WriteRaw(const char* data, size_t n);

  std::FILE* file_ = nullptr;
  std::string path_;
  std::unique_ptr<Cell[]> cells_;
  uint64_t mask_ = 0;
  alignas(64) std::atomic<uint64_t> enqueue_pos_{0};
  alignas(64) std::atomic<uint64_t> dequeue_pos_{0};
  std::atomic<uint64_t> dropped_{0};
  std::atomic<uint64_t> written_{0};
  uint64_t dropped_reported_ = 0;
  std::mutex names_mu_;
  std::unordered_map<std::string, uint32_t> names_;
  std::set<std::pair<uint32_t, uint64_t>>
      described_;  // (forest id, generation) with an info record
  std::unordered_set<uint32_t> threads_;
  std::vector<std::string> pending_;  // encoded metadata records, written first
  std::atomic<bool> stop_{false};
  std::thread thread_;
  bool write_failed_ = false;
  int write_errno_ = 0;
  bool closed_ = false;
};

}  // namespace pacset
