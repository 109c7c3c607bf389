#include "store/fault_injection_store.h"

#include <chrono>
#include <thread>

namespace pacset {

namespace {

// max = the larger of max and now, against other threads doing the same.
template <typename T>
void RaiseTo(std::atomic<T>& max, T now) {
  T seen = max.load();
  while (now > seen && !max.compare_exchange_weak(seen, now)) {
  }
}

class FaultInjectionWriter final : public GenerationWriter {
 public:
  FaultInjectionWriter(FaultInjectionStore* store, std::unique_ptr<GenerationWriter> inner)
      : store_(store), inner_(std::move(inner)) {}
  uint64_t generation() const override { return inner_->generation(); }
  Status Put(uint64_t index, const char* block) override {
    PACSET_RETURN_IF_ERROR(store_->AdmitPut());
    return inner_->Put(index, block);
  }
  Status Publish(ForestInfo info) override { return inner_->Publish(std::move(info)); }

 private:
  FaultInjectionStore* store_;
  std::unique_ptr<GenerationWriter> inner_;
};

}  // namespace

FaultInjectionStore::FaultInjectionStore(std::unique_ptr<BlockStore> inner)
    : owned_(std::move(inner)), inner_(owned_.get()) {}

FaultInjectionStore::FaultInjectionStore(BlockStore* inner) : inner_(inner) {}

FaultInjectionStore::~FaultInjectionStore() = default;

void FaultInjectionStore::FailAllReads(StatusCode code) {
  std::lock_guard<std::mutex> lock(mu_);
  fail_all_ = code;
}

void FaultInjectionStore::FailBlockReads(uint64_t block, StatusCode code,
                                         const std::string& forest) {
  std::lock_guard<std::mutex> lock(mu_);
  fail_blocks_[{forest, block}] = code;
}

void FaultInjectionStore::DelayReads(int ms) {
  std::lock_guard<std::mutex> lock(mu_);
  delay_ms_ = ms;
}

void FaultInjectionStore::CorruptBlock(uint64_t block, const std::string& forest) {
  std::lock_guard<std::mutex> lock(mu_);
  corrupt_blocks_.insert({forest, block});
}

void FaultInjectionStore::FailPutsAfter(uint64_t n) {
  std::lock_guard<std::mutex> lock(mu_);
  put_limit_on_ = true;
  puts_left_ = n;
}

void FaultInjectionStore::ResetReadCounters() {
  read_calls_ = 0;
  blocks_read_ = 0;
  max_in_flight_ = in_flight_.load();
  max_blocks_in_flight_ = blocks_in_flight_.load();
  max_blocks_per_read_ = 0;
}

void FaultInjectionStore::ClearFaults() {
  std::lock_guard<std::mutex> lock(mu_);
  fail_all_ = StatusCode::kOk;
  fail_blocks_.clear();
  corrupt_blocks_.clear();
  delay_ms_ = 0;
  pin_delay_ms_ = 0;
  put_limit_on_ = false;
  hold_next_list_ = false;
  list_held_ = false;
  list_released_.notify_all();
}

Status FaultInjectionStore::AdmitPut() {
  ++puts_;
  std::lock_guard<std::mutex> lock(mu_);
  if (!put_limit_on_) return Status::Ok();
  if (puts_left_ == 0)
    return Status::ResourceExhausted("no space left on device (injected by FaultInjectionStore)");
  --puts_left_;
  return Status::Ok();
}

Status FaultInjectionStore::ReadBlocks(const ForestInfo& forest,
                                       const std::vector<uint64_t>& blocks,
                                       std::vector<std::string>* out) {
  ++read_calls_;
  blocks_read_ += blocks.size();
  const int64_t n = static_cast<int64_t>(blocks.size());
  RaiseTo(max_in_flight_, ++in_flight_);
  RaiseTo(max_blocks_in_flight_, blocks_in_flight_ += n);
  RaiseTo(max_blocks_per_read_, blocks.size());
  struct Leave {
    FaultInjectionStore* s;
    int64_t n;
    ~Leave() {
      --s->in_flight_;
      s->blocks_in_flight_ -= n;
    }
  } leave{this, n};
  int delay_ms;
  std::vector<size_t> corrupt;
  {
    std::lock_guard<std::mutex> lock(mu_);
    delay_ms = delay_ms_;
    if (fail_all_ != StatusCode::kOk)
      return Status(fail_all_, "injected read failure (FaultInjectionStore)");
    for (size_t i = 0; i < blocks.size(); ++i) {
      for (const std::string& f : {std::string(), forest.name}) {
        auto it = fail_blocks_.find({f, blocks[i]});
        if (it != fail_blocks_.end())
          return Status(it->second, "block " + std::to_string(blocks[i]) +
                                        ": injected read failure (FaultInjectionStore)");
      }
      if (corrupt_blocks_.count({"", blocks[i]}) + corrupt_blocks_.count({forest.name, blocks[i]}))
        corrupt.push_back(i);
    }
  }
  if (delay_ms > 0) std::this_thread::sleep_for(std::chrono::milliseconds(delay_ms));
  PACSET_RETURN_IF_ERROR(inner_->ReadBlocks(forest, blocks, out));
  for (size_t i : corrupt) {
    std::string& b = (*out)[i];
    if (!b.empty()) b[b.size() / 3] ^= 0x5a;
  }
  return Status::Ok();
}

StatusOr<std::unique_ptr<GenerationWriter>> FaultInjectionStore::BeginGeneration(
    const std::string& name, uint32_t block_size, uint64_t block_count) {
  PACSET_ASSIGN_OR_RETURN(std::unique_ptr<GenerationWriter> w,
                          inner_->BeginGeneration(name, block_size, block_count));
  return std::unique_ptr<GenerationWriter>(new FaultInjectionWriter(this, std::move(w)));
}

StatusOr<ForestInfo> FaultInjectionStore::Lookup(const std::string& name) {
  return inner_->Lookup(name);
}
StatusOr<std::vector<ForestInfo>> FaultInjectionStore::List() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (!hold_next_list_) return inner_->List();
    hold_next_list_ = false;
  }
  StatusOr<std::vector<ForestInfo>> list = inner_->List();
  std::unique_lock<std::mutex> lock(mu_);
  list_held_ = true;
  list_released_.wait(lock, [this] { return !list_held_; });
  return list;
}
void FaultInjectionStore::HoldNextList() {
  std::lock_guard<std::mutex> lock(mu_);
  hold_next_list_ = true;
}
void FaultInjectionStore::ReleaseHeldList() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    list_held_ = false;
  }
  list_released_.notify_all();
}
bool FaultInjectionStore::list_held() const {
  std::lock_guard<std::mutex> lock(mu_);
  return list_held_;
}
Status FaultInjectionStore::Delete(const std::string& name) { return inner_->Delete(name); }
void FaultInjectionStore::DelayPins(int ms) {
  std::lock_guard<std::mutex> lock(mu_);
  pin_delay_ms_ = ms;
}
void FaultInjectionStore::SleepPinDelay() {
  int delay;
  {
    std::lock_guard<std::mutex> lock(mu_);
    delay = pin_delay_ms_;
  }
  if (delay > 0) std::this_thread::sleep_for(std::chrono::milliseconds(delay));
}
Status FaultInjectionStore::Pin(const std::string& name, uint64_t gen) {
  pin_calls_.fetch_add(1);
  SleepPinDelay();
  Status s = inner_->Pin(name, gen);
  if (s.ok()) pins_held_.fetch_add(1);
  return s;
}
Status FaultInjectionStore::Unpin(const std::string& name, uint64_t gen) {
  SleepPinDelay();
  Status s = inner_->Unpin(name, gen);
  if (s.ok()) pins_held_.fetch_sub(1);
  return s;
}
StatusOr<uint64_t> FaultInjectionStore::CollectGarbage() { return inner_->CollectGarbage(); }
StatusOr<StoreStats> FaultInjectionStore::Stat() { return inner_->Stat(); }
Status FaultInjectionStore::Refresh() { return inner_->Refresh(); }

}  // namespace pacset
