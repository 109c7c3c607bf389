#include "store/parallel_reads.h"

#include <algorithm>

namespace pacset {

ParallelReads::ParallelReads(BlockStore* store)
    : store_(store),
      parallelism_(std::max<uint32_t>(1, store->read_parallelism())),
      at_once_(std::max<uint32_t>(1, store->blocks_read_at_once())) {}

ParallelReads::~ParallelReads() {
  std::vector<std::thread> pool;
  {
    MutexLock lock(&mu_);
    stop_ = true;
    pool.swap(pool_);
  }
  cv_.SignalAll();
  for (auto& t : pool) t.join();
}

ParallelReads::Split ParallelReads::SplitBatch(const std::vector<uint64_t>& blocks) const {
  Split s;
  const size_t n = blocks.size(), parts = Parts(n);
  std::vector<size_t> order(n);
  for (size_t i = 0; i < n; ++i) order[i] = i;
  std::sort(order.begin(), order.end(), [&](size_t a, size_t b) { return blocks[a] < blocks[b]; });
  s.ask.resize(parts);
  s.at.resize(n);
  // Part p: sorted positions [p n / parts, (p + 1) n / parts), never empty.
  for (size_t p = 0; p < parts; ++p) {
    const size_t begin = p * n / parts, end = (p + 1) * n / parts;
    for (size_t k = begin; k < end; ++k) {
      s.ask[p].push_back(blocks[order[k]]);
      s.at[order[k]] = {p, k - begin};
    }
  }
  return s;
}

Status ParallelReads::MultiGet(const ForestInfo& forest, const std::vector<uint64_t>& blocks,
                               std::vector<std::string>* out) {
  const size_t parts = Parts(blocks.size());
  if (parts <= 1) return store_->MultiGet(forest, blocks, out);
  Split split = SplitBatch(blocks);
  std::vector<std::vector<std::string>> got(parts);
  std::vector<Status> status(parts);
  RunParallel(parts,
              [&](size_t p) { status[p] = store_->MultiGet(forest, split.ask[p], &got[p]); });
  for (const Status& s : status) PACSET_RETURN_IF_ERROR(s);
  out->assign(blocks.size(), std::string());
  for (size_t i = 0; i < blocks.size(); ++i)
    (*out)[i] = std::move(got[split.at[i].first][split.at[i].second]);
  return Status::Ok();
}

void ParallelReads::GetMany(const ForestInfo& forest, const std::vector<uint64_t>& blocks,
                            std::vector<std::string>* out, std::vector<Status>* status) {
  const size_t parts = Parts(blocks.size());
  if (parts <= 1) return store_->GetMany(forest, blocks, out, status);
  Split split = SplitBatch(blocks);
  std::vector<std::vector<std::string>> got(parts);
  std::vector<std::vector<Status>> got_status(parts);
  RunParallel(parts,
              [&](size_t p) { store_->GetMany(forest, split.ask[p], &got[p], &got_status[p]); });
  out->assign(blocks.size(), std::string());
  status->assign(blocks.size(), Status::Ok());
  for (size_t i = 0; i < blocks.size(); ++i) {
    const auto [p, k] = split.at[i];
    (*out)[i] = std::move(got[p][k]);
    (*status)[i] = std::move(got_status[p][k]);
  }
}

void ParallelReads::RunParallel(size_t n, const std::function<void(size_t)>& fn) {
  Mutex done_mu;
  CondVar done_cv;
  size_t left = n - 1;  // guarded by done_mu
  {
    MutexLock lock(&mu_);
    for (size_t i = 1; i < n; ++i) {
      tasks_.push_back([&, i] {
        fn(i);
        MutexLock l(&done_mu);
        if (--left == 0) done_cv.Signal();
      });
    }
    while (pool_.size() < std::min<size_t>(parallelism_ - 1, tasks_.size()))
      pool_.emplace_back([this] { PoolThread(); });
  }
  cv_.SignalAll();
  fn(0);
  MutexLock lock(&done_mu);
  while (left != 0) done_cv.Wait(&done_mu);
}

void ParallelReads::PoolThread() {
  mu_.Lock();
  for (;;) {
    while (!stop_ && tasks_.empty()) cv_.Wait(&mu_);
    if (stop_) break;
    std::function<void()> task = std::move(tasks_.front());
    tasks_.pop_front();
    mu_.Unlock();
    task();
    mu_.Lock();
  }
  mu_.Unlock();
}

}  // namespace pacset
