// Miss-ratio curves of the daemon's own cache policy (`pacset-trace mrc
// --policy`, the memory section of `pacset-trace report`).
//
// The LRU curve (miss_ratio.h) comes from one stack-distance pass because
// LRU is a stack algorithm; W-TinyLFU, the daemon's policy (fs/block_cache.h),
// is not: its contents at one size are not a subset of those at a larger
// one. So its curve is simulated, size by size, through the policy's one home
// (cache_policies.h: SimulateCachePolicy, which runs util/w_tinylfu.h), at
// log-spaced sizes from one block to the footprint, plus the sizes asked for
// and the smallest sizes (to 1%) that reach 90/99/99.9% hits; linear in
// between. The LRU curve stays useful: on pacsetfs traffic it lies above
// W-TinyLFU's (an upper bound on the daemon's fetches; checked on a real
// mount by tests/fs/trace_test.py).
//
// For big traces, a miniature simulation (Waldspurger et al., ATC '17): only
// the blocks of a SHARDS sample (BlockSampler) go through a cache scaled by
// the sampling rate, and the sampled miss ratio estimates the whole one. No
// bound is claimed; tests/policy_curve_test.cc measures the error.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "trace/analysis/cache_policies.h"
#include "trace/analysis/miss_ratio.h"
#include "util/status.h"

namespace pacset {

struct PolicyCurveOptions {
  CachePolicy policy = CachePolicy::kWTinyLfu;
  double sample_rate = 1.0;  // (0, 1]; 1: every block
  uint64_t seed = 0;         // which blocks the sample takes
  size_t points = 40;        // log-spaced sizes
};

// `stream`'s miss ratio under `options.policy` at each capacity (blocks; 0
// gives 1). Sampled: the sampled blocks' accesses through a cache of
// max(1, round(capacity x rate)) blocks.
StatusOr<std::vector<double>> SimulateMissRatios(const BlockAccessStream& stream,
                                                 const std::vector<uint64_t>& capacity_blocks,
                                                 const PolicyCurveOptions& options);

// Replaces each forest's LRU curve in `report` (computed from `trace`) by
// the policy's simulated one, also at `extra_sizes` (bytes, or blocks for a
// version-1 trace); `report->all` too when the trace has one forest. LRU:
// nothing to do (the curve is exact already).
Status ApplyPolicyCurves(const std::string& trace, const PolicyCurveOptions& options,
                         const std::vector<uint64_t>& extra_sizes, MissRatioReport* report);

}  // namespace pacset
