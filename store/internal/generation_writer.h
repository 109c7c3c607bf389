// The bookkeeping of a GenerationWriter (store/block_store.h), written once
// for every backend. A backend's writer derives from GenerationWriterBase and
// implements only its I/O; the rules below hold alike on rocksdb:, dir:,
// redis: and redis-cluster: (tests/store_conformance_test.cc checks them on
// each).
//
// The rules, each checked before the backend does any I/O, and each a
// kInvalidArgument whose message starts with ForestContext(name, generation):
//   - Put and Publish of a published writer fail: "already published";
//   - Put of an index outside [0, block_count) fails:
//     "block I is beyond the block count N";
//   - Put of an index already written fails: "block I written twice";
//   - Publish fails until every block was written:
//     "only W of N blocks were written".
// A Put refused by a rule changes nothing: the writer goes on as before it.
//
// Publish hands the backend a complete ForestInfo: the caller's, with name,
// generation, block_size, block_count and size_bytes filled in, and
// created_unix_ns the time of Publish unless the caller set it.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "store/block_store.h"
#include "util/status.h"

namespace pacset {
namespace store_internal {

class GenerationWriterBase : public GenerationWriter {
 public:
  uint64_t generation() const final { return gen_; }
  Status Put(uint64_t index, const char* block) final;
  Status Publish(ForestInfo info) final;

 protected:
  GenerationWriterBase(std::string name, uint64_t gen, uint32_t block_size, uint64_t block_count);

  // Takes block `index` (in range, not written before; block_size() bytes):
  // writes it, or keeps it for a batch. Once this returns OK the block counts
  // as written; an error leaves it unwritten.
  virtual Status WriteBlock(uint64_t index, const char* block) = 0;
  // Called by Put after each block it counted: sends the batch once it is
  // full (none by default: a backend that writes each block at once). An
  // error fails that Put, and the blocks of the batch stay counted though
  // they may not be stored: a writer whose Put failed is to be abandoned,
  // as every caller does (store/publish.cc).
  virtual Status SendBatchIfFull() { return Status::Ok(); }
  // Makes the generation current (atomic), sending any batched blocks
  // first. Called once every block is counted, with `info` complete (see top
  // of file); on OK the writer is published.
  virtual Status PublishGeneration(const ForestInfo& info) = 0;

  const std::string& name() const { return name_; }
  uint32_t block_size() const { return block_size_; }
  uint64_t block_count() const { return block_count_; }
  bool published() const { return published_; }
  // How errors name this generation: ForestContext(name, generation).
  std::string context() const { return ForestContext(name_, gen_); }

 private:
  const std::string name_;
  const uint64_t gen_;
  const uint32_t block_size_;
  const uint64_t block_count_;
  std::vector<bool> written_;
  uint64_t n_written_ = 0;
  bool published_ = false;
};

}  // namespace store_internal
}  // namespace pacset
