#include "store/internal/generation_writer.h"

#include <utility>

#include "store/internal/codec.h"

namespace pacset {
namespace store_internal {

GenerationWriterBase::GenerationWriterBase(std::string name, uint64_t gen, uint32_t block_size,
                                           uint64_t block_count)
    : name_(std::move(name)),
      gen_(gen),
      block_size_(block_size),
      block_count_(block_count),
      written_(block_count, false) {}

Status GenerationWriterBase::Put(uint64_t index, const char* block) {
  if (published_) return Status::InvalidArgument(context() + ": already published");
  if (index >= block_count_)
    return Status::InvalidArgument(context() + ": block " + std::to_string(index) +
                                   " is beyond the block count " + std::to_string(block_count_));
  if (written_[index])
    return Status::InvalidArgument(context() + ": block " + std::to_string(index) +
                                   " written twice");
  PACSET_RETURN_IF_ERROR(WriteBlock(index, block));
  written_[index] = true;
  ++n_written_;
  return SendBatchIfFull();
}

Status GenerationWriterBase::Publish(ForestInfo info) {
  if (published_) return Status::InvalidArgument(context() + ": already published");
  if (n_written_ != block_count_)
    return Status::InvalidArgument(context() + ": only " + std::to_string(n_written_) + " of " +
                                   std::to_string(block_count_) + " blocks were written");
  info.name = name_;
  info.generation = gen_;
  info.block_size = block_size_;
  info.block_count = block_count_;
  info.size_bytes = uint64_t{block_size_} * block_count_;
  if (info.created_unix_ns == 0) info.created_unix_ns = NowUnixNs();
  PACSET_RETURN_IF_ERROR(PublishGeneration(info));
  published_ = true;
  return Status::Ok();
}

}  // namespace store_internal
}  // namespace pacset
