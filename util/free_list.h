// Objects kept for reuse: the one home for "take a kept one or make one, give
// it back up to a bound". The engine keeps io_uring rings, gather channels and
// job buffers this way (engine/pac_file_source.cc): each costs system calls or
// page faults to make, and a request needs one only while it reads.
#pragma once

#include <cstddef>
#include <utility>
#include <vector>

#include "util/mutex.h"

namespace pacset {

// `Ptr` is an owning pointer (std::unique_ptr<T> or std::unique_ptr<T[]>).
// Thread-safe.
template <typename Ptr>
class FreeList {
 public:
  explicit FreeList(size_t keep) : keep_(keep) {}
  FreeList(const FreeList&) = delete;
  FreeList& operator=(const FreeList&) = delete;

  // A kept object, or null when none is kept.
  Ptr Take() EXCLUDES(mu_) {
    MutexLock lock(&mu_);
    if (free_.empty()) return nullptr;
    Ptr p = std::move(free_.back());
    free_.pop_back();
    return p;
  }
  // A kept object, or make() when none is kept (made without the lock held).
  template <typename Make>
  Ptr TakeOr(Make make) {
    if (Ptr p = Take()) return p;
    return make();
  }
  // Kept for the next Take unless `keep` are kept already (then destroyed).
  void Give(Ptr p) EXCLUDES(mu_) {
    if (!p) return;
    MutexLock lock(&mu_);
    if (free_.size() < keep_) free_.push_back(std::move(p));
  }
  size_t size() const EXCLUDES(mu_) {
    MutexLock lock(&mu_);
    return free_.size();
  }

 private:
  const size_t keep_;
  mutable Mutex mu_;
  std::vector<Ptr> free_ GUARDED_BY(mu_);
};

}  // namespace pacset
