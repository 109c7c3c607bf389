// Trace-driven node weights: `pacset pack MODEL --weights-from-trace TRACE
// --traced-pac OLD.pac` lays a forest out for the traffic it really gets.
//
// Method (FORMAT.md section 7 has the reasoning and the limits):
//  1. Map every node of MODEL to the block that held it in OLD.pac, by
//     walking both trees in step (nodes carry no ids; the walk also checks
//     that OLD.pac was packed from MODEL: same shape, same split features).
//     An inlined leaf lives in its parent's block.
//  2. Replay every request of the trace (request marks): one unit of flow
//     enters each tree's root and goes down. A child is feasible when some
//     path below it lies entirely in blocks the request read; the flow goes
//     to the feasible child, or is split by a prior when both are (MODEL's
//     training counts, else block popularity). Blocks read during the request
//     are tried first, then also blocks read earlier since the last drop.
//  3. A node's weight is the flow it received; CardinalitySource::kTrace.
// Decisions are exact where the two sides of a branch lie in different
// blocks and the request ran cold (e.g. `pacset predict --mark-requests row
// --evict-between-rows`); elsewhere the prior decides.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "model/forest.h"
#include "util/status.h"

namespace pacset {

struct TraceWeightsOptions {
  std::string trace;
  std::string traced_pac;  // the .pac file whose blocks the trace counts
  std::string forest;      // forest name in the trace; "" = the only one
};

struct TraceWeightsReport {
  std::string forest;
  uint64_t requests_used = 0;     // requests that read the forest
  uint64_t requests_skipped = 0;  // requests that read nothing of it
  bool used_marks = true;         // false: no marks, popularity only
  double decided_by_trace = 0;    // flow-weighted share of branch decisions the trace decided
  uint64_t accesses = 0;          // demand accesses of the forest in the trace
};

class PacFile;

// The block of `pac` that holds each node of `forest` (an inlined leaf: its
// parent's block; kNodeWithoutBlock for unreachable nodes and single-leaf
// trees). Fails when `pac` was not packed from `forest`.
inline constexpr uint64_t kNodeWithoutBlock = ~uint64_t{0};
StatusOr<std::vector<uint64_t>> MapNodesToBlocks(const Forest& forest, const PacFile& pac);

// Sets forest.cardinality and cardinality_source = kTrace.
Status ApplyTraceWeights(Forest& forest, const TraceWeightsOptions& options,
                         TraceWeightsReport* report);

}  // namespace pacset
