#include "engine/internal/completions.h"

namespace pacset::internal {

void Completions::Done(const std::vector<uint64_t>& blocks, std::vector<Status>* status,
                       BufferPool::Buffer buf) {
  MutexLock lock(&mu_);
  for (size_t i = 0; i < blocks.size(); ++i) {
    if ((*status)[i].ok()) {
      arrived_.emplace_back(blocks[i], buf.get() + i * bs_);
    } else if (error_.ok()) {
      error_ = std::move((*status)[i]);
    }
  }
  bufs_.push_back(std::move(buf));
  cv_.Signal();
}

Status Completions::Wait(std::vector<uint64_t>* out, ArrivedBlocks* keep) {
  MutexLock lock(&mu_);
  while (arrived_.empty() && error_.ok()) cv_.Wait(&mu_);
  if (!error_.ok()) return error_;
  for (const auto& a : arrived_) out->push_back(a.first);
  keep->Adopt(arrived_, &bufs_);
  arrived_.clear();
  return Status::Ok();
}

}  // namespace pacset::internal
