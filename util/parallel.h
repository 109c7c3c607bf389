// Splitting work over threads: the one home for "rows [0, n) in contiguous
// chunks, one thread per chunk" (ParallelFor) and "items of uneven cost, each
// taken by the next free thread" (ParallelForEach).
#pragma once

#include <algorithm>
#include <atomic>
#include <cstddef>
#include <thread>
#include <vector>

#include "util/status.h"

namespace pacset {

// Threads to use for `requested` (0 or less: one per hardware thread).
inline int ResolveThreads(int requested) {
  if (requested > 0) return requested;
  return std::max(1u, std::thread::hardware_concurrency());
}

// Runs fn(begin, end) -> Status over [0, n) split into at most `threads`
// contiguous chunks of at least `min_chunk` items, each on its own thread
// (the caller's thread when there is one chunk). Returns the first error in
// chunk order. fn must be safe to call concurrently on disjoint ranges.
template <typename Fn>
Status ParallelFor(size_t n, int threads, size_t min_chunk, Fn fn) {
  const size_t by_size = std::max<size_t>(1, n / std::max<size_t>(1, min_chunk));
  const int t = static_cast<int>(std::min<size_t>(std::max(1, threads), by_size));
  if (t <= 1) return fn(size_t{0}, n);
  std::vector<Status> results(t);
  std::vector<std::thread> pool;
  const size_t chunk = (n + t - 1) / t;
  for (int i = 0; i < t; ++i) {
    const size_t b = std::min(n, i * chunk), e = std::min(n, b + chunk);
    pool.emplace_back([&, i, b, e] { results[i] = fn(b, e); });
  }
  for (auto& th : pool) th.join();
  for (auto& s : results) PACSET_RETURN_IF_ERROR(s);
  return Status::Ok();
}

// Runs fn(i) for every i in [0, n) on up to `threads` threads (the caller's
// among them), each taking the next index not yet taken: for items of uneven
// cost. fn must be safe to call concurrently for distinct i; results it
// stores by index do not depend on the thread count.
template <typename Fn>
void ParallelForEach(size_t n, int threads, Fn fn) {
  std::atomic<size_t> next{0};
  auto work = [&] {
    for (size_t i; (i = next++) < n;) fn(i);
  };
  std::vector<std::thread> pool;
  for (size_t i = 1; i < std::min<size_t>(std::max(1, threads), n); ++i) pool.emplace_back(work);
  work();
  for (auto& t : pool) t.join();
}

}  // namespace pacset
