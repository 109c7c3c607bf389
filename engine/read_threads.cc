#include "engine/internal/read_threads.h"

#include <utility>

namespace pacset::internal {

ReadThreads::ReadThreads(uint32_t max_threads, RunJob run)
    : max_threads_(max_threads), run_(std::move(run)) {}

ReadThreads::~ReadThreads() {
  std::vector<std::thread> threads;
  {
    MutexLock lock(&mu_);
    stop_ = true;
    threads.swap(threads_);
  }
  cv_.SignalAll();
  for (auto& t : threads) t.join();
}

void ReadThreads::Start(size_t n) {
  MutexLock lock(&mu_);
  for (size_t i = 0; i < n; ++i) threads_.emplace_back([this] { Loop(); });
}

void ReadThreads::Submit(std::vector<uint64_t> blocks, std::shared_ptr<Completions> done) {
  MutexLock lock(&mu_);
  queue_.push_back({std::move(blocks), std::move(done)});
  if (queue_.size() > idle_ && threads_.size() < max_threads_) {
    threads_.emplace_back([this] { Loop(); });
  } else {
    cv_.Signal();
  }
}

void ReadThreads::Loop() {
  mu_.Lock();
  for (;;) {
    ++idle_;
    while (!stop_ && queue_.empty()) cv_.Wait(&mu_);
    --idle_;
    if (stop_) break;
    Job job = std::move(queue_.front());
    queue_.pop_front();
    mu_.Unlock();  // no lock held across I/O
    run_(job.blocks, job.done.get());
    job.done.reset();
    mu_.Lock();
  }
  mu_.Unlock();
}

}  // namespace pacset::internal
