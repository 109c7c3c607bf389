#include "trace/analysis/miss_ratio.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <map>
#include <optional>
#include <unordered_map>

#include "trace/trace_reader.h"
#include "util/csv.h"
#include "util/size.h"
#include "util/string_util.h"

namespace pacset {
namespace {

constexpr double kDelta = 0.01;  // the error bound holds with probability >= 1 - delta
constexpr uint64_t kCold = UINT64_MAX;
constexpr int kSampleBits = 24;

uint64_t Mix(uint64_t x) {  // splitmix64's finaliser
  x += 0x9E3779B97F4A7C15ull;
  x = (x ^ (x >> 30)) * 0xBF58476D1CE4E5B9ull;
  x = (x ^ (x >> 27)) * 0x94D049BB133111EBull;
  return x ^ (x >> 31);
}

}  // namespace

// ---- BlockSampler ----

// The seed is mixed too: with key ^ seed, small seeds would only permute
// small keys among themselves (the same hot blocks in every sample).
BlockSampler::BlockSampler(double rate, uint64_t seed) : seed_(Mix(seed)) {
  rate = std::clamp(rate, 1.0 / (uint64_t{1} << kSampleBits), 1.0);
  threshold_ =
      static_cast<uint64_t>(std::llround(rate * static_cast<double>(uint64_t{1} << kSampleBits)));
  rate_ = static_cast<double>(threshold_) / static_cast<double>(uint64_t{1} << kSampleBits);
}

bool BlockSampler::Contains(uint64_t key) const {
  return rate_ >= 1.0 || (Mix(key ^ seed_) >> (64 - kSampleBits)) < threshold_;
}

// ---- MissRatioBuilder ----

struct MissRatioBuilder::State {
  double rate = 1.0;
  uint64_t seed = 0;
  BlockSampler sampler;
  struct Live {
    uint64_t pos;
    uint32_t bytes;
  };
  std::unordered_map<uint64_t, Live> live;
  // Fenwick tree (1-based) of the bytes of each live block at the position of
  // its last access; positions are renumbered (compacted) when they run out,
  // so the tree stays O(live blocks) whatever the trace's length.
  std::vector<uint64_t> tree = std::vector<uint64_t>(17, 0);
  uint64_t next_pos = 1;
  uint64_t total = 0;  // bytes of the live blocks
  // Raw (unscaled) distance -> sampled accesses: while every block has the
  // same size, a vector indexed by distance / that size (at most the live
  // blocks); else a map by bytes.
  uint32_t unit = 0;
  std::vector<uint64_t> by_units;
  std::unordered_map<uint64_t, uint64_t> histogram;
  uint64_t accesses = 0, sampled = 0, cold = 0;
  uint32_t max_bytes = 0;
  // Sampled pass: (block id, distance) of each sampled access, for the bound.
  std::unordered_map<uint64_t, uint32_t> block_ids;
  std::vector<std::pair<uint32_t, uint64_t>> per_block;

  uint64_t Capacity() const { return tree.size() - 1; }
  void Add(uint64_t pos, int64_t delta) {
    for (uint64_t i = pos; i < tree.size(); i += i & (~i + 1))
      tree[i] += static_cast<uint64_t>(delta);
  }
  uint64_t Prefix(uint64_t pos) const {  // sum over [1, pos]
    uint64_t s = 0;
    for (uint64_t i = pos; i > 0; i -= i & (~i + 1)) s += tree[i];
    return s;
  }
  // Renumbers the live blocks 1..L in recency order into a tree with room for
  // at least as many new accesses as there are live blocks.
  void Compact() {
    std::vector<std::pair<uint64_t, Live*>> order;
    order.reserve(live.size());
    for (auto& [k, l] : live) order.push_back({l.pos, &l});
    std::sort(order.begin(), order.end(),
              [](const auto& a, const auto& b) { return a.first < b.first; });
    const uint64_t cap = std::max<uint64_t>(16, 2 * order.size());
    tree.assign(cap + 1, 0);
    for (size_t i = 0; i < order.size(); ++i) {
      order[i].second->pos = i + 1;
      tree[i + 1] += order[i].second->bytes;
    }
    for (uint64_t i = 1; i <= cap; ++i) {  // linear-time Fenwick build
      const uint64_t parent = i + (i & (~i + 1));
      if (parent <= cap) tree[parent] += tree[i];
    }
    next_pos = order.size() + 1;
  }
};

MissRatioBuilder::MissRatioBuilder(double rate, uint64_t seed) : s_(std::make_unique<State>()) {
  s_->sampler = BlockSampler(rate, seed);
  s_->rate = s_->sampler.rate();
  s_->seed = seed;
}
MissRatioBuilder::~MissRatioBuilder() = default;

MissRatioBuilder MissRatioBuilder::Copy() const {
  MissRatioBuilder b(s_->rate, s_->seed);
  *b.s_ = *s_;
  return b;
}
MissRatioBuilder::MissRatioBuilder(MissRatioBuilder&&) noexcept = default;

void MissRatioBuilder::Access(uint64_t key, uint32_t bytes) {
  State& s = *s_;
  ++s.accesses;
  if (!s.sampler.Contains(key)) return;
  ++s.sampled;
  s.max_bytes = std::max(s.max_bytes, bytes);
  if (s.unit == 0) s.unit = bytes;
  if (s.unit != bytes && s.unit != UINT32_MAX) {  // sizes differ: count by bytes from now on
    for (size_t i = 0; i < s.by_units.size(); ++i)
      if (s.by_units[i]) s.histogram[i * uint64_t{s.unit}] += s.by_units[i];
    s.by_units = {};
    s.unit = UINT32_MAX;
  }
  if (s.next_pos > s.Capacity()) s.Compact();
  uint64_t distance = kCold;
  auto [it, fresh] = s.live.try_emplace(key, State::Live{0, bytes});
  if (!fresh) {
    // Bytes of the blocks used since, this one's included.
    distance = s.total - s.Prefix(it->second.pos - 1);
    s.Add(it->second.pos, -static_cast<int64_t>(it->second.bytes));
    s.total -= it->second.bytes;
    if (s.unit != UINT32_MAX) {
      const uint64_t i = distance / s.unit;  // <= the live blocks
      if (i >= s.by_units.size())
        s.by_units.resize(std::max<uint64_t>(i + 1, 2 * s.by_units.size()));
      ++s.by_units[i];
    } else {
      ++s.histogram[distance];
    }
  } else {
    ++s.cold;
  }
  it->second.pos = s.next_pos++;
  it->second.bytes = bytes;
  s.Add(it->second.pos, bytes);
  s.total += bytes;
  if (s.rate < 1.0) {
    auto id = s.block_ids.try_emplace(key, static_cast<uint32_t>(s.block_ids.size())).first->second;
    s.per_block.push_back({id, distance});
  }
}

std::vector<uint64_t> MissRatioBuilder::LiveKeys() const {
  std::vector<uint64_t> keys;
  keys.reserve(s_->live.size());
  for (const auto& [k, l] : s_->live) keys.push_back(k);
  return keys;
}

void MissRatioBuilder::DropKeys(const std::vector<uint64_t>& keys) {
  State& s = *s_;
  for (uint64_t k : keys) {
    auto it = s.live.find(k);
    if (it == s.live.end()) continue;
    s.Add(it->second.pos, -static_cast<int64_t>(it->second.bytes));
    s.total -= it->second.bytes;
    s.live.erase(it);
  }
}

void MissRatioBuilder::DropAll() {
  State& s = *s_;
  s.live.clear();
  s.tree.assign(17, 0);
  s.next_pos = 1;
  s.total = 0;
}

MissRatioCurve MissRatioBuilder::Finish(uint32_t unit_bytes) const {
  const State& s = *s_;
  MissRatioCurve c;
  c.accesses_ = s.accesses;
  c.sampled_accesses_ = s.sampled;
  c.sampled_cold_ = s.cold;
  c.rate_ = s.rate;
  c.unit_bytes_ = unit_bytes;
  c.max_block_bytes_ = s.max_bytes;
  // Scaled by 1 / rate for a sampled pass.
  auto scaled = [&](uint64_t raw) {
    return s.rate < 1.0 ? static_cast<uint64_t>(std::llround(static_cast<double>(raw) / s.rate))
                        : raw;
  };
  if (s.unit != UINT32_MAX) {
    for (size_t i = 0; i < s.by_units.size(); ++i)
      if (s.by_units[i]) c.distances_.push_back({scaled(i * uint64_t{s.unit}), s.by_units[i]});
  } else {
    for (const auto& [d, n] : s.histogram) c.distances_.push_back({scaled(d), n});
    std::sort(c.distances_.begin(), c.distances_.end());
  }
  uint64_t cumulative = 0;
  for (auto& [d, n] : c.distances_) n = cumulative += n;
  if (s.rate < 1.0) {
    auto per = s.per_block;
    std::sort(per.begin(), per.end());
    c.block_first_.assign(s.block_ids.size() + 1, 0);
    c.block_distances_.reserve(per.size());
    for (const auto& [id, d] : per) {
      c.block_distances_.push_back(d == kCold ? kCold : scaled(d));
      ++c.block_first_[id + 1];
    }
    for (size_t i = 1; i < c.block_first_.size(); ++i) c.block_first_[i] += c.block_first_[i - 1];
    if (c.sampled_accesses_) {
      const uint64_t mid = c.footprint_bytes() / 4;
      c.by_expected_sample_ = c.ErrorBound(mid, true) < c.ErrorBound(mid, false);
    }
  }
  return c;
}

// ---- MissRatioCurve ----

// A sampled pass has two estimators of the miss ratio (miss_ratio.h): by the
// sampled accesses (better when popularity is even) or by the expected
// sample, rate x all accesses (SHARDS-adj; better when a few blocks are
// hot); Finish keeps the one whose bound is smaller.
double MissRatioCurve::ToRatio(uint64_t sampled_misses) const {
  if (!accesses_ || !sampled_accesses_) return 0;
  const double base = exact() || !by_expected_sample_ ? static_cast<double>(sampled_accesses_)
                                                      : rate_ * static_cast<double>(accesses_);
  return std::min(1.0, static_cast<double>(sampled_misses) / base);
}

double MissRatioCurve::ErrorBound(uint64_t cache_bytes, bool by_expected_sample) const {
  const double n_all = static_cast<double>(accesses_);
  const double n_s = static_cast<double>(sampled_accesses_);
  const double ratio = static_cast<double>(sampled_accesses_ - SampledHits(cache_bytes)) / n_s;
  double sum_sq = 0;
  for (size_t b = 0; b + 1 < block_first_.size(); ++b) {
    const auto first = block_distances_.begin() + block_first_[b];
    const auto last = block_distances_.begin() + block_first_[b + 1];
    const double m = static_cast<double>(last - std::upper_bound(first, last, cache_bytes));
    const double a = by_expected_sample ? m : m - ratio * static_cast<double>(last - first);
    sum_sq += a * a;
  }
  return std::sqrt(std::log(2 / kDelta) * sum_sq / (2 * rate_)) /
         (by_expected_sample ? rate_ * n_all : n_s);
}

double MissRatioCurve::cold_misses() const {
  return ToRatio(sampled_cold_) * static_cast<double>(accesses_);
}

uint64_t MissRatioCurve::SampledHits(uint64_t cache_bytes) const {
  auto it = std::upper_bound(distances_.begin(), distances_.end(),
                             std::make_pair(cache_bytes, UINT64_MAX));
  return it == distances_.begin() ? 0 : std::prev(it)->second;
}

MissRatioCurve MissRatioCurve::Simulated(const MissRatioCurve& lru, const std::string& policy,
                                         double rate, std::vector<MissRatioPoint> points) {
  MissRatioCurve c = lru;
  c.policy_ = policy;
  c.rate_ = rate;
  c.block_first_.clear();
  c.block_distances_.clear();
  c.simulated_ = std::move(points);
  return c;
}

double MissRatioCurve::MissRatio(uint64_t cache_bytes) const {
  if (cache_bytes == 0 && accesses_) return 1;  // known without sampling
  if (simulated()) {                            // simulated at the points, linear in between
    auto hi =
        std::lower_bound(simulated_.begin(), simulated_.end(), cache_bytes,
                         [](const MissRatioPoint& p, uint64_t c) { return p.cache_bytes < c; });
    if (hi == simulated_.end()) return simulated_.back().miss_ratio;
    if (hi->cache_bytes == cache_bytes || hi == simulated_.begin()) return hi->miss_ratio;
    const auto lo = std::prev(hi);
    const double f = static_cast<double>(cache_bytes - lo->cache_bytes) /
                     static_cast<double>(hi->cache_bytes - lo->cache_bytes);
    return lo->miss_ratio + f * (hi->miss_ratio - lo->miss_ratio);
  }
  return ToRatio(sampled_accesses_ - SampledHits(cache_bytes));
}

double MissRatioCurve::Misses(uint64_t cache_bytes) const {
  if (exact() && !simulated())
    return static_cast<double>(sampled_accesses_ - SampledHits(cache_bytes));
  return MissRatio(cache_bytes) * static_cast<double>(accesses_);
}

MissRatioPoint MissRatioCurve::At(uint64_t cache_bytes) const {
  MissRatioPoint p;
  p.cache_bytes = cache_bytes;
  p.miss_ratio = MissRatio(cache_bytes);
  p.misses = Misses(cache_bytes);
  if (exact() || simulated() || !sampled_accesses_ || cache_bytes == 0) return p;
  p.error = ErrorBound(cache_bytes, by_expected_sample_);
  const double blocks =
      static_cast<double>(cache_bytes) / std::max<double>(1, unit_bytes_ ? max_block_bytes_ : 1);
  p.size_error = blocks > 0 ? std::sqrt(3 * std::log(2 / kDelta) / (rate_ * blocks)) : 1;
  return p;
}

std::optional<uint64_t> MissRatioCurve::BytesForHitRatio(double hit_ratio) const {
  if (!accesses_) return 0;
  // ratio <= 1 - h, with room for the rounding of h.
  const double allowed = 1 - hit_ratio + 1e-12;
  if (ToRatio(sampled_accesses_) <= allowed) return 0;
  if (simulated()) {
    for (const auto& p : simulated_)
      if (p.miss_ratio <= allowed) return p.cache_bytes;
    return std::nullopt;
  }
  for (const auto& [d, hits] : distances_)
    if (ToRatio(sampled_accesses_ - hits) <= allowed) return d;
  return std::nullopt;
}

std::vector<MissRatioPoint> MissRatioCurve::Points(size_t max_points) const {
  if (simulated()) {  // every simulated point, thinned evenly
    if (simulated_.size() <= max_points || max_points < 2) return simulated_;
    std::vector<MissRatioPoint> out;
    for (size_t i = 0; i < max_points; ++i)
      out.push_back(simulated_[i * (simulated_.size() - 1) / (max_points - 1)]);
    return out;
  }
  std::vector<uint64_t> sizes = {0};
  if (distances_.size() + 1 <= max_points) {
    for (const auto& [d, n] : distances_) sizes.push_back(d);
  } else if (max_points > 1) {
    // Geometric spacing from the smallest distance to the footprint: the
    // plot's x axis is logarithmic.
    const double lo = static_cast<double>(std::max<uint64_t>(1, distances_.front().first));
    const double hi = static_cast<double>(footprint_bytes());
    for (size_t i = 0; i + 1 < max_points; ++i) {
      const double f = max_points > 2 ? static_cast<double>(i) / (max_points - 2) : 1;
      const uint64_t v = static_cast<uint64_t>(std::llround(lo * std::pow(hi / lo, f)));
      if (v > sizes.back()) sizes.push_back(v);
    }
    if (sizes.back() != footprint_bytes()) sizes.push_back(footprint_bytes());
  }
  std::vector<MissRatioPoint> out;
  out.reserve(sizes.size());
  for (uint64_t c : sizes) out.push_back(At(c));
  return out;
}

nlohmann::json MissRatioCurve::ToJson(size_t max_points) const {
  nlohmann::json j = {{"policy", policy_},
                      {"simulated", simulated()},
                      {"accesses", accesses_},
                      {"sample_rate", rate_},
                      {"exact", exact()},
                      {"unit", unit_bytes_ ? "bytes" : "blocks"},
                      {"cold_misses", cold_misses()},
                      {"footprint", footprint_bytes()}};
  if (!exact()) j["sampled_accesses"] = sampled_accesses_;
  nlohmann::json targets = nlohmann::json::object();
  for (const auto& [name, h] :
       {std::pair<const char*, double>{"90", 0.9}, {"99", 0.99}, {"99.9", 0.999}}) {
    auto b = BytesForHitRatio(h);
    targets[name] = b ? nlohmann::json(*b) : nlohmann::json(nullptr);
  }
  j["memory_for_hit_ratio"] = targets;
  nlohmann::json pts = nlohmann::json::array();
  for (const auto& p : Points(max_points)) {
    nlohmann::json q = {
        {"cache", p.cache_bytes}, {"miss_ratio", p.miss_ratio}, {"misses", p.misses}};
    if (!exact() && !simulated()) {
      q["error"] = p.error;
      q["size_error"] = p.size_error;
    }
    pts.push_back(q);
  }
  j["points"] = pts;
  return j;
}

// ---- Reading a trace ----

namespace {

constexpr uint64_t kBlockBits = 44;  // key = generation id << 44 | block

std::string SizeText(uint64_t v, uint32_t unit_bytes) {
  return unit_bytes ? FormatByteSize(v) : std::to_string(v) + " blocks";
}

}  // namespace

StatusOr<MissRatioReport> ComputeMissRatio(const std::string& path,
                                           const MissRatioOptions& options) {
  if (!(options.sample_rate > 0 && options.sample_rate <= 1))
    return Status::InvalidArgument("sample rate must be in (0, 1]");
  PACSET_ASSIGN_OR_RETURN(auto reader, TraceReader::Open(path));
  const bool sized = reader->header().version >= 2;  // v1 has no forest info: count blocks
  MissRatioReport out;
  out.path = path;
  // (forest, generation) -> dense id; its block size (0: unknown) and forest.
  std::map<std::pair<uint32_t, uint64_t>, uint32_t> gen_ids;
  std::vector<uint32_t> gen_bytes, gen_forest;
  // While the trace has shown one forest, `all` is that forest's builder too
  // (half the memory); at the second forest it is copied into `per_forest`.
  MissRatioBuilder all(options.sample_rate, options.seed);
  std::optional<uint32_t> only_forest;
  std::map<uint32_t, MissRatioBuilder> per_forest;  // grows only with accesses read
  std::map<uint32_t, uint32_t> forest_block_size;
  TraceRecord r;
  while (reader->Next(&r)) {
    switch (r.type) {
      case TraceRecordType::kForestInfo: {
        auto [it, fresh] =
            gen_ids.try_emplace({r.forest, r.generation}, static_cast<uint32_t>(gen_bytes.size()));
        if (fresh) {
          gen_bytes.push_back(r.bytes);
          gen_forest.push_back(r.forest);
        }
        break;
      }
      case TraceRecordType::kBlockAccess: {
        ++out.accesses;
        if (r.flags & kTraceFlagError) {
          ++out.failed_accesses;
          break;
        }
        auto [it, fresh] =
            gen_ids.try_emplace({r.forest, r.generation}, static_cast<uint32_t>(gen_bytes.size()));
        if (fresh) {
          gen_bytes.push_back(0);
          gen_forest.push_back(r.forest);
        }
        const uint32_t bytes = sized ? gen_bytes[it->second] : 1;
        if (bytes == 0 || it->second >= (1u << (64 - kBlockBits)) ||
            r.block >= (uint64_t{1} << kBlockBits)) {
          ++out.unsized_accesses;  // no geometry, or out of any forest's range: hostile
          break;
        }
        const uint64_t key = (static_cast<uint64_t>(it->second) << kBlockBits) | r.block;
        if (!only_forest) only_forest = r.forest;
        if (per_forest.empty() && *only_forest != r.forest)
          per_forest.emplace(*only_forest, all.Copy());
        all.Access(key, bytes);
        if (!per_forest.empty())
          per_forest.try_emplace(r.forest, options.sample_rate, options.seed)
              .first->second.Access(key, bytes);
        if (sized) forest_block_size[r.forest] = bytes;
        break;
      }
      case TraceRecordType::kDropCache:
        ++out.drops;
        if (r.forest == 0) {
          all.DropAll();
          for (auto& [id, b] : per_forest) b.DropAll();
        } else if (per_forest.empty()) {
          if (only_forest == r.forest) all.DropAll();  // all it holds
        } else if (auto f = per_forest.find(r.forest); f != per_forest.end()) {
          // The forest's own builder holds exactly its live keys (the same
          // sample): the work is bounded by the accesses since its last drop.
          all.DropKeys(f->second.LiveKeys());
          f->second.DropAll();
        }
        break;
      case TraceRecordType::kDropped:
        out.dropped_events += r.block;
        break;
      default:
        break;
    }
  }
  const uint32_t unit = sized ? 1 : 0;
  if (per_forest.empty() && only_forest) {
    ForestMissRatio f;
    f.id = *only_forest;
    f.name = reader->ForestName(f.id);
    f.block_size = sized ? forest_block_size[f.id] : 0;
    f.curve = all.Finish(unit);
    out.forests.push_back(std::move(f));
  }
  for (const auto& [id, b] : per_forest) {
    ForestMissRatio f;
    f.id = id;
    f.name = reader->ForestName(id);
    f.block_size = sized ? forest_block_size[id] : 0;
    f.curve = b.Finish(unit);
    out.forests.push_back(std::move(f));
  }
  out.all = all.Finish(unit);
  return out;
}

// ---- Output ----

nlohmann::json MissRatioReport::ToJson(size_t max_points) const {
  nlohmann::json j = {{"accesses", accesses},
                      {"failed_accesses", failed_accesses},
                      {"unsized_accesses", unsized_accesses},
                      {"drops", drops},
                      {"dropped_events", dropped_events},
                      {"all_forests", all.ToJson(max_points)}};
  nlohmann::json fs = nlohmann::json::array();
  for (const auto& f : forests) {
    nlohmann::json x = f.curve.ToJson(max_points);
    x["name"] = f.name;
    x["block_size"] = f.block_size;
    fs.push_back(std::move(x));
  }
  j["forests"] = fs;
  return j;
}

std::string MissRatioReport::ToText() const {
  std::string out;
  const MissRatioCurve& main = forests.size() == 1 ? forests[0].curve : all;
  const bool exact = main.exact();
  const bool bounded = !exact && !main.simulated();  // a sampled LRU pass has an error bound
  if (main.simulated()) {
    StringAppendF(
        &out,
        "memory for the daemon's block cache (%s miss-ratio curve, simulated at %zu size%s%s)\n",
        main.policy().c_str(), main.Points(SIZE_MAX).size(),
        main.Points(SIZE_MAX).size() == 1 ? "" : "s", exact ? "" : ", sampled");
    if (!exact)
      StringAppendF(
          &out, "  sampled %.4g of the blocks, the cache scaled by it (a miniature simulation)\n",
          main.sample_rate());
  } else {
    StringAppendF(&out, "memory for the daemon's block cache (%s miss-ratio curve, %s)\n",
                  main.policy().c_str(), exact ? "exact" : "sampled");
  }
  if (bounded)
    StringAppendF(&out, "  sampled %.4g of the blocks: +- = the error bound at 99%% confidence\n",
                  main.sample_rate());
  if (forests.size() > 1 && forests[0].curve.simulated())
    StringAppendF(&out, "  (all forests): the LRU curve (policies are simulated per forest)\n");
  if (dropped_events)
    StringAppendF(
        &out, "  WARNING: the trace lost %llu accesses (queue full): the curve leaves them out\n",
        static_cast<unsigned long long>(dropped_events));
  if (failed_accesses || unsized_accesses)
    StringAppendF(&out,
                  "  not counted: %llu failed accesses, %llu accesses without forest geometry\n",
                  static_cast<unsigned long long>(failed_accesses),
                  static_cast<unsigned long long>(unsized_accesses));
  StringAppendF(&out, "  %-20s %10s %9s %12s %12s %12s %12s\n", "forest", "accesses", "cold",
                "90% hits", "99% hits", "99.9% hits", "all (footprint)");
  auto row = [&](const std::string& name, const MissRatioCurve& c) {
    std::string cells[3];
    const double targets[3] = {0.9, 0.99, 0.999};
    for (int i = 0; i < 3; ++i) {
      auto b = c.BytesForHitRatio(targets[i]);
      cells[i] = b ? SizeText(*b, c.unit_bytes()) : "unreachable";
    }
    StringAppendF(&out, "  %-20s %10llu %8.2f%% %12s %12s %12s %12s\n", name.c_str(),
                  static_cast<unsigned long long>(c.accesses()),
                  c.accesses() ? 100 * c.cold_misses() / static_cast<double>(c.accesses()) : 0.0,
                  cells[0].c_str(), cells[1].c_str(), cells[2].c_str(),
                  c.footprint_bytes() == 0 && c.accesses() > 0
                      ? "no reuse"
                      : SizeText(c.footprint_bytes(), c.unit_bytes()).c_str());
  };
  for (const auto& f : forests) row(f.name, f.curve);
  if (forests.size() > 1) row("(all forests)", all);
  StringAppendF(
      &out,
      "  (\"unreachable\": first accesses alone miss more often; \"cold\" = first accesses)\n");
  // The miss ratio at fractions of the footprint: of the only forest, or of
  // all forests together.
  const uint64_t fp = main.footprint_bytes();
  if (fp == 0 && main.accesses() > 0)
    StringAppendF(&out,
                  "  no block was read twice in this trace: no cache would have saved a fetch; "
                  "record longer traffic to size one\n");
  if (fp) {
    StringAppendF(&out, "  %-14s %12s %10s %12s\n", "cache", "of footprint", "miss ratio",
                  "misses");
    for (int k : {64, 32, 16, 8, 4, 2, 1}) {
      const MissRatioPoint p = main.At(fp / k);
      std::string err = bounded ? "  +- " + std::to_string(p.error).substr(0, 6) : "";
      StringAppendF(&out, "  %-14s %11s %9.2f%% %12.0f%s\n",
                    SizeText(p.cache_bytes, main.unit_bytes()).c_str(),
                    ("1/" + std::to_string(k)).c_str(), 100 * p.miss_ratio, p.misses, err.c_str());
    }
  }
  return out;
}

std::string MissRatioReport::ToCsv(size_t max_points) const {
  std::string out = "forest,cache_bytes,miss_ratio,misses,error,size_error\n";
  char line[256];
  auto emit = [&](const std::string& name, const MissRatioCurve& c) {
    for (const auto& p : c.Points(max_points)) {
      std::snprintf(line, sizeof(line), ",%llu,%.9g,%.9g,%.6g,%.6g\n",
                    static_cast<unsigned long long>(p.cache_bytes), p.miss_ratio, p.misses, p.error,
                    p.size_error);
      out += CsvField(name) + line;
    }
  };
  for (const auto& f : forests) emit(f.name, f.curve);
  emit("*", all);
  return out;
}

}  // namespace pacset
