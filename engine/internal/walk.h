// The routing step and the leaf rule of a walk through a .pac node region,
// shared by the warm lockstep loop (engine/warm_walk.cc) and the in-flight
// scheduler (engine/inflight_walk.cc): one definition keeps both
// bit-identical to each other and to the in-memory predictor.
#pragma once

#include <cstdint>
#include <cstring>
#include <type_traits>

#include "engine/block_source.h"
#include "engine/engine.h"
#include "layout/pac_file.h"
#include "model/output.h"
#include "model/routing.h"
#include "util/row_matrix.h"

namespace pacset::internal {

template <typename NodeT>
struct NodeView;
template <>
struct NodeView<CompactNode> {
  static uint32_t Feature(const CompactNode& n) { return n.feature_flags & 0xFFFFFFu; }
  static uint8_t Flags(const CompactNode& n) { return static_cast<uint8_t>(n.feature_flags >> 24); }
};
template <>
struct NodeView<WideNode> {
  static uint32_t Feature(const WideNode& n) { return n.feature; }
  static uint8_t Flags(const WideNode& n) { return n.flags; }
};

inline constexpr uint32_t kNodeKind = static_cast<uint32_t>(RefKind::kNode);

// A file's categorical splits (PacFile::categorical_splits), for Step.
struct CategoricalTable {
  const CategoricalSplit* splits = nullptr;
  uint64_t count = 0;
  const uint32_t* words = nullptr;
};
inline CategoricalTable CategoricalTableOf(const PacFile& f) {
  return {f.categorical_splits().data(), f.categorical_splits().size(), f.category_words().data()};
}

// One step down from the node stored at `at` (copied first, then checked and
// used): sets `ref`/`kind` to the chosen child. False when the node splits on
// a feature the model does not have, or is a categorical node that is not
// sound (CategoricalNodeOk). `went_left` (optional) tells the leaf-id lookup which child
// was taken.
template <typename NodeT, bool kF32Input>
inline bool Step(const char* at, uint32_t num_features, const CategoricalTable& cats,
                 const float* xf, const double* xd, uint64_t& ref, uint32_t& kind,
                 bool* went_left = nullptr) {
  using V = NodeView<NodeT>;
  NodeT n;
  std::memcpy(&n, at, sizeof(NodeT));
  const uint32_t feature = V::Feature(n);
  const uint32_t flags = V::Flags(n);
  if (__builtin_expect(feature >= num_features, 0)) return false;
  bool left;
  if (__builtin_expect(flags & kNodeFlagCategorical, 0)) {
    const uint64_t index = SplitIndex(n);
    if (!CategoricalNodeOk(flags, index, cats.count)) return false;
    if constexpr (kF32Input) {
      left = CategoricalGoesLeft<float>(xf[feature], static_cast<uint8_t>(flags),
                                        cats.splits[index], cats.words);
    } else {
      left = CategoricalGoesLeft<double>(xd[feature], static_cast<uint8_t>(flags),
                                         cats.splits[index], cats.words);
    }
  } else if constexpr (kF32Input) {
    if constexpr (std::is_same_v<NodeT, CompactNode>) {
      left = GoesLeft<float>(xf[feature], n.threshold, static_cast<uint8_t>(flags));
    } else {
      left = GoesLeft<double>(xf[feature], n.threshold, static_cast<uint8_t>(flags));
    }
  } else {
    left = GoesLeft<double>(xd[feature], n.threshold, static_cast<uint8_t>(flags));
  }
  if (went_left) *went_left = left;
  const uint32_t right = !left;
  kind = (flags >> (kLeftKindShift + 2 * right)) & 3u;
  const auto mask = static_cast<decltype(n.left)>(0) - right;
  ref = (n.left & ~mask) | (n.right & mask);
  return true;
}

// Adds the leaf a walk of a tree of output `group` ended on to the row's
// sums `a` (num_outputs values). `record` holds the leaf record's leaf_width
// float64 values (kind kLeafRecord only; the caller checked its bounds).
// False for a class index out of range or a node kind.
template <typename Acc>
inline bool AddLeaf(Acc* a, uint32_t group, uint32_t num_outputs, uint32_t leaf_width, uint64_t ref,
                    uint32_t kind, const char* record) {
  switch (static_cast<RefKind>(kind)) {
    case RefKind::kInlineValue: {
      const uint32_t bits = static_cast<uint32_t>(ref);
      float v;
      std::memcpy(&v, &bits, 4);
      a[group] += static_cast<Acc>(v);
      return true;
    }
    case RefKind::kInlineClass:
      if (__builtin_expect(ref >= num_outputs, 0)) return false;
      a[ref] += Acc(1);
      return true;
    case RefKind::kLeafRecord:
      if (leaf_width == 1) {
        double x;
        std::memcpy(&x, record, 8);
        a[group] += static_cast<Acc>(x);
      } else {
        for (uint32_t c = 0; c < leaf_width; ++c) {
          double x;
          std::memcpy(&x, record + 8 * c, 8);
          a[c] += static_cast<Acc>(x);
        }
      }
      return true;
    case RefKind::kNode:
      break;
  }
  return false;
}

// Bytes of a leaf record of `leaf_width` values (16-byte units).
inline uint32_t LeafRecordBytes(uint32_t leaf_width) {
  return static_cast<uint32_t>((8ull * leaf_width + kUnit - 1) / kUnit * kUnit);
}

// What went wrong in a walk, as plain data: walks run where a SIGBUS may
// jump out (engine/internal/sigbus.h), so they build no Status themselves.
struct WalkFault {
  enum Code : uint8_t {
    kNone = 0,
    kBadReference,  // outside the node region or across a trailer, or a path longer than max_depth
    kBadFeature,    // splits on a feature (or a categorical split) the model does not have
    kBadLeaf,       // leaf outside the node region, class out of range
    kLockstep,      // one of the above in a lockstep walk, not told apart
  };
  Code code = kNone;
  uint64_t tree = 0;
};

// The Status for a fault in `file`.
Status FaultStatus(const PacFile& file, const WalkFault& fault);

// One request of rows: predictions (or margins) into `out`, or library leaf
// ids into `leaves` when it is not null.
struct WalkJob {
  const RowMatrix* rows = nullptr;
  // Warm walks only: when set, the rows are these float32 values instead
  // (row i at rows32 + i * num_features) and `rows` is unused.
  const float* rows32 = nullptr;
  size_t begin = 0, end = 0;
  bool margin = false;
  double* out = nullptr;      // (end - begin) * columns
  int32_t* leaves = nullptr;  // (end - begin) * num_trees
  // Warm walks add the rows a SIMD kernel walked (may be null).
  uint64_t* simd_rows = nullptr;
};

// Calls fn.template Call<NodeT, kF32Input, Acc>() with the file's node
// format, input precision and accumulation type.
template <typename Fn>
Status DispatchByFormat(const PacHeader& h, const Fn& fn) {
  const bool compact = h.node_format == static_cast<uint8_t>(NodeFormat::kCompact16);
  const bool f32in = h.input_precision == static_cast<uint8_t>(Precision::kFloat32);
  const bool f32acc = h.accumulate_precision == static_cast<uint8_t>(Precision::kFloat32);
  if (compact) {
    if (f32in) {
      if (f32acc) return fn.template Call<CompactNode, true, float>();
      return fn.template Call<CompactNode, true, double>();
    }
    if (f32acc) return fn.template Call<CompactNode, false, float>();
    return fn.template Call<CompactNode, false, double>();
  }
  if (f32in) {
    if (f32acc) return fn.template Call<WideNode, true, float>();
    return fn.template Call<WideNode, true, double>();
  }
  if (f32acc) return fn.template Call<WideNode, false, float>();
  return fn.template Call<WideNode, false, double>();
}

// The warm loop (engine/warm_walk.cc): walks `image`, where every block the
// job can touch is in memory and verified, with no per-node checks beyond
// the format's safety checks. A SIGBUS (a page evicted and now unreadable)
// gives kIOError naming the block.
// `warm` (may be null) is the file's warm forest (engine/internal/warm_forest.h):
// walked instead of the mapping's nodes, same results bit for bit; with
// rows of float32 and no NaN, by the SIMD kernel of `isa` when it has one
// (engine/internal/warm_simd.h).
struct WarmForest;
Status WarmWalk(const PacFile& file, const OutputRule& rule, const char* image,
                const WarmForest* warm, WarmIsa isa, const WalkJob& job);

// The in-flight scheduler (engine/inflight_walk.cc): walks every (row, tree)
// of the job until its next block is not Ready, fetches those blocks (at
// most `max_in_flight` at a time) and continues each walk as its block
// arrives. Same results as WarmWalk, bit for bit.
struct InFlightStats {
  uint64_t blocks_fetched = 0;
  uint64_t waits = 0;  // Wait calls (rounds of arrivals)
};
Status InFlightWalk(const PacFile& file, const OutputRule& rule, BlockSource& source,
                    uint32_t max_in_flight, const WalkJob& job, InFlightStats* stats);

}  // namespace pacset::internal
