// Predicting straight from a block store, without a mount: for functions and
// containers that cannot mount FUSE, and for blocks smaller than a page
// (256 B .. 1 MiB; the paper's serverless deployment found small blocks in
// Redis fastest).
//
//   auto store = OpenBlockStore("redis://10.0.0.5:6379/0", StoreForest::ReadOptions(5000));
//   auto forest = StoreForest::Open(std::move(*store), "fraud");
//   (*forest)->engine().PredictAll(rows, /*margin=*/false, 1, &out);
//
// Open reads the forest's catalog entry and its metadata blocks (the header,
// which may flow over several small blocks, the tree table, base score) and
// pins the generation, so a re-import does not take its blocks away (the
// forest keeps predicting with the generation it opened). Predictions then
// read node blocks on demand through the engine's in-flight traversal
// (engine/engine.h): every round of the traversal reads all the blocks its
// walks wait for with one BlockStore::MultiGet — one pipelined round trip to
// redis; for dir and rocksdb split over BlockStore::read_parallelism()
// threads — and keeps them, verified (checksum and position), in a bounded
// in-process cache, so a process that answers many requests reads each hot
// block once. Results are bit-identical to every other path.
//
// Errors: a name that is not a valid forest name is kInvalidArgument; a
// forest the store does not have is kNotFound; an unreachable store is
// kUnavailable within the store's timeouts; a corrupt or missing block is
// kCorruption naming forest, generation and block — at Open for metadata,
// from Predict for node blocks. Nothing is retried: the caller decides.
//
// Thread-safety: engine() may predict from many threads at once.
#pragma once

#include <cstdint>
#include <memory>
#include <string>

#include "engine/engine.h"
#include "store/block_store.h"
#include "util/status.h"

namespace pacset {

namespace store_internal {
class StoreBlockSource;
}

struct StoreForestOptions {
  // Bound on the cached node blocks (bytes). Blocks a round is still using
  // may exceed it briefly.
  uint64_t cache_bytes = 256ull << 20;
  // Most blocks one request reads in one round; 0: 4096, or fewer for large
  // blocks (at most 64 MiB a round).
  uint32_t max_in_flight = 0;
};

// What the forest read from its store so far (metadata included).
struct StoreReadStats {
  uint64_t multigets = 0;  // BlockStore::MultiGet calls (redis: round trips)
  uint64_t rounds = 0;     // rounds of the traversal that read from the store
  uint64_t blocks = 0;     // blocks read from the store
  uint64_t bytes = 0;
  uint64_t evicted = 0;       // blocks evicted from the cache
  uint64_t cached_bytes = 0;  // now
};

class StoreForest {
 public:
  ~StoreForest();
  StoreForest(const StoreForest&) = delete;
  StoreForest& operator=(const StoreForest&) = delete;

  // Opens forest `name` of `store` (which the StoreForest keeps).
  static StatusOr<std::unique_ptr<StoreForest>> Open(std::shared_ptr<BlockStore> store,
                                                     const std::string& name,
                                                     const StoreForestOptions& options = {});

  // Store options for a reader whose every store call gives up after about
  // `timeout_ms` (connecting and each command get half of it; a call that
  // reconnects once may use both halves).
  static StoreOptions ReadOptions(int timeout_ms);

  const ForestInfo& info() const { return info_; }
  const PacEngine& engine() const { return *engine_; }
  StoreReadStats read_stats() const;

 private:
  StoreForest() = default;

  std::shared_ptr<BlockStore> store_;
  ForestInfo info_;
  bool pinned_ = false;
  store_internal::StoreBlockSource* source_ = nullptr;  // owned by engine_
  std::unique_ptr<PacEngine> engine_;
};

}  // namespace pacset
