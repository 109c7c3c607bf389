// What a cold request reads in its first round, whatever the source
// underneath: a BlockSource that wraps a real one (engine/block_source.h)
// and records which blocks each request asked for before it first waited,
// and a forest whose bins span several blocks and levels.
#pragma once

#include <memory>
#include <mutex>
#include <vector>

#include "engine/block_source.h"
#include "layout/pack.h"
#include "testkit/random_forest.h"

namespace pacset::testing {

// 300 trees of depth 12 packed at 4 KiB with bins of 5 levels: the bins
// fill several blocks, one level after another.
inline Forest ForestWithDeepBins() {
  RandomForestSpec spec;
  spec.trees = 300;
  spec.max_depth = 12;
  spec.seed = 43;
  return MakeRandomForest(spec);
}
inline PackOptions DeepBinsPacking() {
  PackOptions o;
  o.block_size = 4096;
  o.bin_depth = 5;
  return o;
}

// Wraps a real source: records the blocks each request's fetcher was asked
// for before its first Wait (the first round), and forwards everything.
class FirstRoundSource final : public BlockSource {
 public:
  explicit FirstRoundSource(std::unique_ptr<BlockSource> inner) : inner_(std::move(inner)) {}
  uint32_t block_size() const override { return inner_->block_size(); }
  uint64_t block_count() const override { return inner_->block_count(); }
  const char* Ready(uint64_t b) override { return inner_->Ready(b); }
  const char* WarmImage(uint64_t first, uint64_t count, uint64_t work, bool read) override {
    return inner_->WarmImage(first, count, work, read);
  }
  const char* io_name() const override { return inner_->io_name(); }
  std::unique_ptr<BlockFetcher> NewFetcher() override {
    return std::make_unique<Fetcher>(this, inner_->NewFetcher());
  }
  std::vector<uint64_t> first_round() {
    std::lock_guard<std::mutex> lock(mu_);
    return first_round_;
  }

 private:
  class Fetcher final : public BlockFetcher {
   public:
    Fetcher(FirstRoundSource* s, std::unique_ptr<BlockFetcher> inner)
        : s_(s), inner_(std::move(inner)) {}
    void Fetch(uint64_t b) override {
      if (!waited_) {
        std::lock_guard<std::mutex> lock(s_->mu_);
        s_->first_round_.push_back(b);
      }
      inner_->Fetch(b);
    }
    Status Wait(std::vector<uint64_t>* arrived) override {
      waited_ = true;
      return inner_->Wait(arrived);
    }
    void Flush() override { inner_->Flush(); }
    const char* Arrived(uint64_t b) override { return inner_->Arrived(b); }
    bool Missing(uint64_t b) override { return inner_->Missing(b); }

   private:
    FirstRoundSource* s_;
    std::unique_ptr<BlockFetcher> inner_;
    bool waited_ = false;
  };
  std::unique_ptr<BlockSource> inner_;
  std::mutex mu_;
  std::vector<uint64_t> first_round_;
};

}  // namespace pacset::testing
