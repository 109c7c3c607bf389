// A block source kept cold: it wraps a real one (engine/block_source.h) and
// says each block is missing the first time the engine asks for it, and it
// never offers a warm image, so every request walks in flight and reads
// every block it needs through a fetcher — the path of a cold row on a big
// file, which a small test file never takes otherwise (it goes warm at once).
// For tests and fuzz targets:
//
//   PacEngine::FromFile(std::move(file), options,
//       [](const PacFile& f, const EngineOptions& o) {
//         return std::make_unique<testing::ColdSource>(
//             NewPacFileSource(f, o.verify_blocks, o.max_in_flight, o.block_io));
//       });
#pragma once

#include <atomic>
#include <memory>
#include <vector>

#include "engine/block_source.h"

namespace pacset::testing {

class ColdSource final : public BlockSource {
 public:
  explicit ColdSource(std::unique_ptr<BlockSource> base)
      : base_(std::move(base)), asked_(base_->block_count()) {}
  uint32_t block_size() const override { return base_->block_size(); }
  uint64_t block_count() const override { return base_->block_count(); }
  const char* Ready(uint64_t b) override {
    if (b < asked_.size() && !asked_[b].exchange(true, std::memory_order_relaxed)) return nullptr;
    return base_->Ready(b);
  }
  std::unique_ptr<BlockFetcher> NewFetcher() override { return base_->NewFetcher(); }
  const char* WarmImage(uint64_t, uint64_t, uint64_t, bool) override { return nullptr; }
  const char* io_name() const override { return base_->io_name(); }
  uint32_t default_max_in_flight() const override { return base_->default_max_in_flight(); }

 private:
  const std::unique_ptr<BlockSource> base_;
  std::vector<std::atomic<bool>> asked_;  // per block: Ready was asked once
};

}  // namespace pacset::testing
