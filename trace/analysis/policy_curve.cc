#include "trace/analysis/policy_curve.h"

#include <algorithm>
#include <cmath>
#include <map>

namespace pacset {

StatusOr<std::vector<double>> SimulateMissRatios(const BlockAccessStream& stream,
                                                 const std::vector<uint64_t>& capacity_blocks,
                                                 const PolicyCurveOptions& options) {
  if (!(options.sample_rate > 0 && options.sample_rate <= 1))
    return Status::InvalidArgument("sample rate must be in (0, 1]");
  const BlockSampler sampler(options.sample_rate, options.seed);
  const double rate = sampler.rate();
  BlockAccessStream sample;
  const BlockAccessStream* s = &stream;
  if (rate < 1) {  // the sampled blocks' accesses, the drops where they fall among them
    size_t next_drop = 0;
    for (size_t i = 0; i <= stream.keys.size(); ++i) {
      for (; next_drop < stream.drops.size() && stream.drops[next_drop] <= i; ++next_drop)
        if (sample.drops.empty() || sample.drops.back() != sample.keys.size())
          sample.drops.push_back(sample.keys.size());
      if (i < stream.keys.size() && sampler.Contains(stream.keys[i]))
        sample.keys.push_back(stream.keys[i]);
    }
    s = &sample;
  }
  std::vector<double> out;
  out.reserve(capacity_blocks.size());
  for (uint64_t c : capacity_blocks) {
    if (c == 0 || s->keys.empty()) {
      out.push_back(c == 0 && !stream.keys.empty() ? 1.0 : 0.0);
      continue;
    }
    CacheModelOptions o;
    o.capacity_blocks =
        rate < 1 ? std::max<uint64_t>(1, std::llround(static_cast<double>(c) * rate)) : c;
    PACSET_ASSIGN_OR_RETURN(PolicyOutcome r, SimulateCachePolicy(*s, options.policy, o));
    // Sampled: by the expected sample, rate x all accesses (as SHARDS-adj):
    // a hot block in or out of the sample moves the estimate by its misses,
    // not by its accesses.
    out.push_back(std::min(
        1.0, static_cast<double>(r.misses()) / (rate * static_cast<double>(stream.keys.size()))));
  }
  return out;
}

namespace {

// The policy's curve of one forest: at log-spaced sizes, the text's
// fractions of the footprint, `extra` sizes, and the memory targets refined.
StatusOr<MissRatioCurve> SimulatedCurve(const BlockAccessStream& stream, const MissRatioCurve& lru,
                                        uint64_t unit, const PolicyCurveOptions& options,
                                        const std::vector<uint64_t>& extra) {
  const uint64_t fp_blocks = (lru.footprint_bytes() + unit - 1) / unit;
  std::map<uint64_t, double> by_blocks;  // capacity (blocks) -> miss ratio
  auto simulate = [&](std::vector<uint64_t> blocks) -> Status {
    blocks.erase(std::remove_if(blocks.begin(), blocks.end(),
                                [&](uint64_t b) { return by_blocks.count(b) != 0; }),
                 blocks.end());
    std::sort(blocks.begin(), blocks.end());
    blocks.erase(std::unique(blocks.begin(), blocks.end()), blocks.end());
    PACSET_ASSIGN_OR_RETURN(std::vector<double> r, SimulateMissRatios(stream, blocks, options));
    for (size_t i = 0; i < blocks.size(); ++i) by_blocks[blocks[i]] = r[i];
    return Status::Ok();
  };
  std::map<uint64_t, uint64_t> sizes;  // bytes (or blocks) -> capacity in blocks
  sizes[0] = 0;
  sizes[fp_blocks * unit] = fp_blocks;
  const size_t n = std::max<size_t>(2, options.points);
  for (size_t i = 0; i < n && fp_blocks > 0; ++i) {
    const double f = static_cast<double>(i) / static_cast<double>(n - 1);
    const uint64_t b = std::llround(std::pow(static_cast<double>(fp_blocks), f));
    sizes[b * unit] = b;
  }
  for (int k : {64, 32, 16, 8, 4, 2, 1})
    sizes[lru.footprint_bytes() / k] = lru.footprint_bytes() / k / unit;
  for (uint64_t c : extra) sizes[c] = c / unit;
  std::vector<uint64_t> blocks;
  for (const auto& [bytes, b] : sizes) blocks.push_back(b);
  PACSET_RETURN_IF_ERROR(simulate(blocks));
  // The smallest size (to 1%, between two simulated ones) reaching each
  // target, so that "memory for 99% hits" is a simulated figure.
  for (double h : {0.9, 0.99, 0.999}) {
    const double allowed = 1 - h + 1e-12;
    auto hi = std::find_if(by_blocks.begin(), by_blocks.end(),
                           [&](const auto& p) { return p.second <= allowed; });
    if (hi == by_blocks.end() || hi == by_blocks.begin()) continue;
    uint64_t lo_b = std::prev(hi)->first, hi_b = hi->first;
    while (hi_b - lo_b > std::max<uint64_t>(1, lo_b / 100)) {
      const uint64_t mid = lo_b + (hi_b - lo_b) / 2;
      PACSET_RETURN_IF_ERROR(simulate({mid}));
      (by_blocks[mid] <= allowed ? hi_b : lo_b) = mid;
    }
    sizes[hi_b * unit] = hi_b;
  }
  std::vector<MissRatioPoint> points;
  for (const auto& [bytes, b] : sizes) {
    MissRatioPoint p;
    p.cache_bytes = bytes;
    p.miss_ratio = by_blocks.at(b);
    p.misses = p.miss_ratio * static_cast<double>(lru.accesses());
    points.push_back(p);
  }
  return MissRatioCurve::Simulated(lru, CachePolicyName(options.policy),
                                   BlockSampler(options.sample_rate, options.seed).rate(),
                                   std::move(points));
}

}  // namespace

Status ApplyPolicyCurves(const std::string& trace, const PolicyCurveOptions& options,
                         const std::vector<uint64_t>& extra_sizes, MissRatioReport* report) {
  if (options.policy == CachePolicy::kLru) return Status::Ok();
  if (options.policy == CachePolicy::kOptimal || options.policy == CachePolicy::kBinLru)
    return Status::InvalidArgument(std::string("no miss-ratio curve for ") +
                                   CachePolicyName(options.policy) + " (lru, w-tinylfu)");
  for (ForestMissRatio& f : report->forests) {
    PACSET_ASSIGN_OR_RETURN(BlockAccessStream stream, ReadBlockAccesses(trace, f.name));
    const uint64_t unit = f.curve.unit_bytes() ? std::max<uint32_t>(1, f.block_size) : 1;
    PACSET_ASSIGN_OR_RETURN(f.curve, SimulatedCurve(stream, f.curve, unit, options, extra_sizes));
  }
  if (report->forests.size() == 1) report->all = report->forests[0].curve;
  return Status::Ok();
}

}  // namespace pacset
