#include "engine/store_forest.h"

#include <algorithm>

#include "engine/internal/store_block_source.h"
#include "layout/pac_file.h"
#include "store/stored_metadata.h"
#include "util/le_fields.h"

namespace pacset {

using store_internal::StoreBlockSource;

namespace {

// A round reads at most this many blocks, and at most this many bytes.
constexpr uint32_t kMaxBlocksPerRound = 4096;
constexpr uint64_t kMaxBytesPerRound = 64ull << 20;

// Blocks [first, end) appended to `meta` (which holds blocks [0, first)).
Status ReadInto(StoreBlockSource& source, uint64_t first, uint64_t end, std::string* meta) {
  if (first >= end) return Status::Ok();
  std::vector<uint64_t> blocks;
  for (uint64_t b = first; b < end; ++b) blocks.push_back(b);
  std::vector<std::string> data;
  PACSET_RETURN_IF_ERROR(source.Read(blocks, &data));
  for (const std::string& d : data) meta->append(d);
  return Status::Ok();
}

}  // namespace

StoreOptions StoreForest::ReadOptions(int timeout_ms) {
  StoreOptions o;
  o.read_only = true;
  o.connect_timeout_ms = std::max(1, timeout_ms / 2);
  o.io_timeout_ms = std::max(1, timeout_ms / 2);
  return o;
}

StatusOr<std::unique_ptr<StoreForest>> StoreForest::Open(std::shared_ptr<BlockStore> store,
                                                         const std::string& name,
                                                         const StoreForestOptions& options) {
  std::unique_ptr<StoreForest> f(new StoreForest());
  f->store_ = std::move(store);
  PACSET_ASSIGN_OR_RETURN(f->info_, f->store_->Lookup(name));
  // Pinned before its blocks are read: an import that publishes meanwhile
  // cannot collect them. Collected between Lookup and Pin: look up again.
  Status pin = f->store_->Pin(name, f->info_.generation);
  if (pin.IsNotFound()) {
    PACSET_ASSIGN_OR_RETURN(f->info_, f->store_->Lookup(name));
    pin = f->store_->Pin(name, f->info_.generation);
  }
  // A reader that may not pin (no write access to a rocksdb: or dir: store's
  // pins directory) still reads; a store that does not answer fails here.
  if (pin.code() == StatusCode::kUnavailable || pin.code() == StatusCode::kDeadlineExceeded)
    return pin;
  f->pinned_ = pin.ok();
  const ForestInfo& info = f->info_;
  const std::string what = ForestContext(info.name, info.generation);
  if (!IsValidBlockSize(info.block_size) || info.block_count == 0 ||
      info.size_bytes != info.block_count * info.block_size)
    return Status::Corruption(what + ": catalog entry has " + std::to_string(info.block_count) +
                              " blocks of " + std::to_string(info.block_size) + " bytes");
  auto source = std::make_unique<StoreBlockSource>(f->store_.get(), info, options.cache_bytes);
  f->source_ = source.get();
  PACSET_ASSIGN_OR_RETURN(
      std::string meta,
      ReadStoredMetadata(info, what, [&](uint64_t first, uint64_t end, std::string* out) {
        return ReadInto(*source, first, end, out);
      }));
  PACSET_ASSIGN_OR_RETURN(auto file, PacFile::FromMetadata(std::move(meta), info.size_bytes, what));
  EngineOptions eo;
  eo.verify_blocks = false;  // BlockStore::MultiGet verified every block
  eo.sequential_reads = false;
  eo.max_in_flight = options.max_in_flight != 0
                         ? options.max_in_flight
                         : static_cast<uint32_t>(std::clamp<uint64_t>(
                               kMaxBytesPerRound / info.block_size, 1, kMaxBlocksPerRound));
  std::unique_ptr<BlockSource> owned = std::move(source);
  PACSET_ASSIGN_OR_RETURN(
      f->engine_,
      PacEngine::FromFile(std::move(file), eo, [&owned](const PacFile&, const EngineOptions&) {
        return std::move(owned);
      }));
  return f;
}

StoreForest::~StoreForest() {
  engine_.reset();
  if (pinned_) (void)store_->Unpin(info_.name, info_.generation);
}

StoreReadStats StoreForest::read_stats() const {
  StoreReadStats s;
  const auto& c = source_->counters();
  s.multigets = c.multigets.load();
  s.rounds = c.rounds.load();
  s.blocks = c.blocks.load();
  s.bytes = c.bytes.load();
  s.evicted = c.evicted.load();
  s.cached_bytes = source_->cached_bytes();
  return s;
}

}  // namespace pacset
