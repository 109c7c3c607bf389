// Writing a block-access trace without slowing page faults down.
//
// Producers (the filesystem's worker threads) encode a record and push it
// into a bounded lock-free multi-producer queue; a background thread drains
// the queue into the file. When the queue is full the record is dropped and
// counted (the count is written to the trace as a kDropped record): a page
// fault never waits for the disk. Memory is bounded by the queue size.
//
// Thread-safety: Record() and ForestId() may be called from any thread.
#pragma once

#include <atomic>
#include <cstdint>
#include <cstdio>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <unordered_map>
#include <vector>

#include "trace/trace_format.h"
#include "util/status.h"

namespace pacset {

class TraceWriter {
 public:
  // Creates (truncates) `path` and starts the writer thread. `queue_records`
  // is rounded up to a power of two.
  static StatusOr<std::unique_ptr<TraceWriter>> Open(const std::string& path,
                                                     size_t queue_records = 1 << 16);
  ~TraceWriter();

  // Never blocks; drops (and counts) the record when the queue is full.
  void Record(const TraceRecord& r);
  // The trace's id for a forest name; the first call for a name writes its
  // name records (these are never dropped).
  uint32_t ForestId(const std::string& name);

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
  bool Pop(char* out);
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
  std::vector<std::string> pending_names_;  // encoded name records, written first
  std::atomic<bool> stop_{false};
  std::thread thread_;
  bool write_failed_ = false;
  int write_errno_ = 0;
  bool closed_ = false;
};

}  // namespace pacset
