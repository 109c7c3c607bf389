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

// Runs fn(worker, begin, end) -> Status over [0, n) in chunks of `chunk`
// items (the last may be shorter), each taken by the next free worker of up
// to `threads` (worker 0 is the caller's thread; worker < the thread count
// used, so per-worker buffers may be indexed by it). A worker that runs
// slower — a busier or slower core, an uneven VM — takes fewer chunks, so
// the work ends together. Once a chunk fails no new chunk starts; returns
// the first error in chunk order.
template <typename Fn>
Status ParallelForChunks(size_t n, int threads, size_t chunk, Fn fn) {
  chunk = std::max<size_t>(1, chunk);
  const size_t chunks = (n + chunk - 1) / chunk;
  const size_t workers = std::min<size_t>(std::max(1, threads), std::max<size_t>(1, chunks));
  std::vector<Status> results(chunks);
  std::atomic<size_t> next{0};
  std::atomic<bool> failed{false};
  auto work = [&](size_t worker) {
    for (size_t i; !failed.load(std::memory_order_relaxed) && (i = next++) < chunks;) {
      results[i] = fn(worker, i * chunk, std::min(n, (i + 1) * chunk));
      if (!results[i].ok()) failed.store(true, std::memory_order_relaxed);
    }
  };
  std::vector<std::thread> pool;
  for (size_t w = 1; w < workers; ++w) pool.emplace_back(work, w);
  work(0);
  for (auto& t : pool) t.join();
  for (auto& s : results) PACSET_RETURN_IF_ERROR(s);
  return Status::Ok();
}

// Items per chunk for ParallelForChunks: about `per_thread` chunks for each
// of `threads` threads (enough for a fast thread to take over a slow one's
// share), at least `min_chunk` items, at most `max_chunk`; one thread:
// as few chunks as max_chunk allows.
inline size_t BalancedChunk(size_t n, int threads, size_t min_chunk, size_t max_chunk,
                            size_t per_thread = 8) {
  if (threads <= 1) return std::max<size_t>(1, std::min(n, max_chunk));
  const size_t t = static_cast<size_t>(threads);
  return std::max<size_t>(1, std::min(max_chunk, std::max(min_chunk, n / (t * per_thread))));
}

}  // namespace pacset
