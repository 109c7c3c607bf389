// FaultInjectionStore: a BlockStore that wraps a real one and forwards every
// call, with switches to make reads fail, slow down or return damaged bytes,
// and to make an import run out of space. Damage is applied to what the inner
// backend's ReadBlocks returned, so the real verification in BlockStore::Get
// is what catches it. For tests of the store's callers (the filesystem).
//
// Thread-safety: like every BlockStore; the switches may be flipped from any
// thread while other threads read.
#pragma once

#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "store/block_store.h"

namespace pacset {

class FaultInjectionStore final : public BlockStore {
 public:
  // Owns `inner`.
  explicit FaultInjectionStore(std::unique_ptr<BlockStore> inner);
  // Borrows `inner`, which must outlive this store.
  explicit FaultInjectionStore(BlockStore* inner);
  ~FaultInjectionStore() override;

  BlockStore* inner() const { return inner_; }

  // Every read (Get/MultiGet) fails with `code` (not kOk).
  void FailAllReads(StatusCode code);
  // Reads that include `block` fail with `code`; `forest` "" matches every forest.
  void FailBlockReads(uint64_t block, StatusCode code, const std::string& forest = "");
  // Reads sleep `ms` milliseconds before going to the inner store.
  void DelayReads(int ms);
  // `block` comes back with one byte flipped (in its payload), so Get reports
  // kCorruption; `forest` "" matches every forest.
  void CorruptBlock(uint64_t block, const std::string& forest = "");
  // After `n` more successful Put calls (across all writers of this store),
  // Put fails with kResourceExhausted, like a full disk.
  void FailPutsAfter(uint64_t n);
  // Pin and Unpin sleep `ms` milliseconds before going to the inner store
  // (a slow or hung store's round trip).
  void DelayPins(int ms);
  // The next List reads the inner store's catalog, then waits until
  // ReleaseHeldList before returning it: a listing that is overtaken by
  // later ones (a slow round trip). list_held() tells when it waits.
  void HoldNextList();
  void ReleaseHeldList();
  bool list_held() const;
  // Back to forwarding everything unchanged (counters are kept; a held
  // List is released).
  void ClearFaults();

  // Counters of reads that reached this store (including failed ones).
  uint64_t read_calls() const { return read_calls_.load(); }
  uint64_t blocks_read() const { return blocks_read_.load(); }
  // The most reads (ReadBlocks calls, delay included) that were under way at
  // once: how many reads a caller keeps in flight.
  int64_t max_reads_in_flight() const { return max_in_flight_.load(); }
  // The most blocks those reads asked for at once, and the most one read
  // asked for: how a caller batches the blocks it keeps in flight.
  int64_t max_blocks_in_flight() const { return max_blocks_in_flight_.load(); }
  uint64_t max_blocks_per_read() const { return max_blocks_per_read_.load(); }
  uint64_t puts() const { return puts_.load(); }
  // Read counters back to zero (the maxima start again from the reads
  // under way now).
  void ResetReadCounters();
  // Pin calls that started, and pins held now (successful Pins minus Unpins).
  uint64_t pin_calls() const { return pin_calls_.load(); }
  int64_t pins_held() const { return pins_held_.load(); }

  StatusOr<std::unique_ptr<GenerationWriter>> BeginGeneration(const std::string& name,
                                                              uint32_t block_size,
                                                              uint64_t block_count) override;
  StatusOr<ForestInfo> Lookup(const std::string& name) override;
  StatusOr<std::vector<ForestInfo>> List() override;
  Status Delete(const std::string& name) override;
  Status Pin(const std::string& name, uint64_t gen) override;
  Status Unpin(const std::string& name, uint64_t gen) override;
  StatusOr<uint64_t> CollectGarbage() override;
  StatusOr<StoreStats> Stat() override;
  Status Refresh() override;
  uint32_t read_parallelism() const override { return inner_->read_parallelism(); }
  uint32_t blocks_read_at_once() const override { return inner_->blocks_read_at_once(); }

  // Called by writers: whether this Put may go through.
  Status AdmitPut();

 protected:
  Status ReadBlocks(const ForestInfo& forest, const std::vector<uint64_t>& blocks,
                    std::vector<std::string>* out) override;

 private:
  void SleepPinDelay();

  std::unique_ptr<BlockStore> owned_;
  BlockStore* inner_;

  mutable std::mutex mu_;
  StatusCode fail_all_ = StatusCode::kOk;
  std::map<std::pair<std::string, uint64_t>, StatusCode> fail_blocks_;  // ("" = any forest, block)
  std::set<std::pair<std::string, uint64_t>> corrupt_blocks_;
  int delay_ms_ = 0;
  int pin_delay_ms_ = 0;
  bool hold_next_list_ = false;
  bool list_held_ = false;
  std::condition_variable list_released_;
  bool put_limit_on_ = false;
  uint64_t puts_left_ = 0;

  std::atomic<uint64_t> read_calls_{0};
  std::atomic<uint64_t> blocks_read_{0};
  std::atomic<int64_t> in_flight_{0};
  std::atomic<int64_t> max_in_flight_{0};
  std::atomic<int64_t> blocks_in_flight_{0};
  std::atomic<int64_t> max_blocks_in_flight_{0};
  std::atomic<uint64_t> max_blocks_per_read_{0};
  std::atomic<uint64_t> puts_{0};
  std::atomic<uint64_t> pin_calls_{0};
  std::atomic<int64_t> pins_held_{0};
};

}  // namespace pacset
