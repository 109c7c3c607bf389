// The read threads of a block source over a mapped file: jobs (a gather's
// blocks, or one block to pread) queued by requests and run by a pool shared
// by all of the source's requests. Where io_uring is refused, and on FUSE
// where each read is a request to the daemon anyway, this is how blocks are
// read (engine/DESIGN.md, "Reading a mapped file").
#pragma once

#include <cstdint>
#include <deque>
#include <functional>
#include <memory>
#include <thread>
#include <vector>

#include "engine/internal/completions.h"
#include "util/mutex.h"

namespace pacset::internal {

// Thread-safe.
class ReadThreads {
 public:
  // Reads `blocks` and hands them to `done`; called on a pool thread.
  using RunJob = std::function<void(const std::vector<uint64_t>& blocks, Completions* done)>;

  // At most `max_threads` threads; none is started before it is needed
  // (Start).
  ReadThreads(uint32_t max_threads, RunJob run);
  // Stops and joins the threads; jobs still queued are dropped (their
  // fetchers are gone: the source outlives its fetchers).
  ~ReadThreads();
  ReadThreads(const ReadThreads&) = delete;
  ReadThreads& operator=(const ReadThreads&) = delete;

  // Starts `n` threads now, so that the first jobs find them waiting.
  void Start(size_t n) EXCLUDES(mu_);
  // Queues a job; starts a thread for it when none is idle and the bound
  // allows one more.
  void Submit(std::vector<uint64_t> blocks, std::shared_ptr<Completions> done) EXCLUDES(mu_);

 private:
  void Loop() EXCLUDES(mu_);

  struct Job {
    std::vector<uint64_t> blocks;
    std::shared_ptr<Completions> done;
  };
  const uint32_t max_threads_;
  const RunJob run_;
  Mutex mu_;
  CondVar cv_;
  std::deque<Job> queue_ GUARDED_BY(mu_);
  std::vector<std::thread> threads_ GUARDED_BY(mu_);
  uint32_t idle_ GUARDED_BY(mu_) = 0;
  bool stop_ GUARDED_BY(mu_) = false;
};

}  // namespace pacset::internal
