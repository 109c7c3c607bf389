// A mutex, a scoped lock and a condition variable that clang's thread-safety
// analysis understands (std::mutex carries no annotations in libstdc++).
// Thin wrappers: same cost and semantics as std::mutex and
// std::condition_variable.
#pragma once

#include <chrono>
#include <condition_variable>
#include <mutex>

#include "util/thread_annotations.h"

namespace pacset {

class CAPABILITY("mutex") Mutex {
 public:
  Mutex() = default;
  Mutex(const Mutex&) = delete;
  Mutex& operator=(const Mutex&) = delete;

  void Lock() ACQUIRE() { mu_.lock(); }
  void Unlock() RELEASE() { mu_.unlock(); }
  // Tells the analysis that the caller holds the lock (no run-time check).
  void AssertHeld() ASSERT_CAPABILITY(this) {}

 private:
  friend class CondVar;
  std::mutex mu_;
};

// Holds `mu` for its lifetime.
class SCOPED_CAPABILITY MutexLock {
 public:
  explicit MutexLock(Mutex* mu) ACQUIRE(mu) : mu_(mu) { mu_->Lock(); }
  ~MutexLock() RELEASE() { mu_->Unlock(); }
  MutexLock(const MutexLock&) = delete;
  MutexLock& operator=(const MutexLock&) = delete;

 private:
  Mutex* const mu_;
};

// Waits release `mu` while waiting and hold it again when they return.
class CondVar {
 public:
  explicit CondVar(Mutex* mu) : mu_(mu) {}
  void Wait() REQUIRES(mu_) {
    std::unique_lock<std::mutex> lock(mu_->mu_, std::adopt_lock);
    cv_.wait(lock);
    lock.release();
  }
  // Returns false on timeout.
  bool WaitFor(std::chrono::milliseconds d) REQUIRES(mu_) {
    std::unique_lock<std::mutex> lock(mu_->mu_, std::adopt_lock);
    const bool woken = cv_.wait_for(lock, d) == std::cv_status::no_timeout;
    lock.release();
    return woken;
  }
  void Signal() { cv_.notify_one(); }
  void SignalAll() { cv_.notify_all(); }

 private:
  Mutex* const mu_;
  std::condition_variable cv_;
};

}  // namespace pacset
