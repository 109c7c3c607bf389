#include "trace/analysis/trace_weights.h"

#include <cmath>
#include <cstdio>
#include <cstring>
#include <limits>
#include <unordered_set>
#include <vector>

#include "layout/pac_file.h"
#include "trace/analysis/trace_scan.h"

namespace pacset {
namespace {

constexpr uint64_t kNoBlock = kNodeWithoutBlock;

}  // namespace

StatusOr<std::vector<uint64_t>> MapNodesToBlocks(const Forest& f, const PacFile& pac) {
  const PacHeader& h = pac.header();
  if (h.num_trees != f.num_trees())
    return Status::InvalidArgument(pac.name() + " has " + std::to_string(h.num_trees) +
                                   " trees, the model " + std::to_string(f.num_trees()) +
                                   ": it was not packed from this model");
  const bool compact = h.node_format == static_cast<uint8_t>(NodeFormat::kCompact16);
  const uint32_t node_bytes = compact ? 16 : 32;
  const uint32_t record_bytes =
      static_cast<uint32_t>((8ull * h.leaf_width + kUnit - 1) / kUnit * kUnit);
  std::vector<uint64_t> block(f.num_nodes(), kNoBlock);
  struct Item {
    uint64_t g;
    uint64_t ref;
    uint8_t kind;
    uint64_t parent_block;
  };
  std::vector<Item> stack;
  for (size_t t = 0; t < f.num_trees(); ++t) {
    const uint64_t base = f.tree_offset[t];
    const TreeRecord& tr = pac.trees()[t];
    stack.assign(1, Item{base, tr.root, tr.root_kind, kNoBlock});
    auto mismatch = [&](uint64_t g) {
      return Status::InvalidArgument(pac.name() + " was not packed from this model: tree " +
                                     std::to_string(t) + " differs at node " +
                                     std::to_string(g - base));
    };
    while (!stack.empty()) {
      const Item it = stack.back();
      stack.pop_back();
      const bool leaf = f.left_child[it.g] < 0;
      const auto kind = static_cast<RefKind>(it.kind);
      if (leaf != (kind != RefKind::kNode)) return mismatch(it.g);
      if (leaf) {
        if (kind == RefKind::kLeafRecord) {
          if (!pac.RefInNodeRegion(it.ref, record_bytes)) return mismatch(it.g);
          block[it.g] = it.ref * kUnit / h.block_size;
        } else {
          block[it.g] = it.parent_block;
        }
        continue;
      }
      if (!pac.RefInNodeRegion(it.ref, node_bytes)) return mismatch(it.g);
      const uint64_t b = it.ref * kUnit / h.block_size;
      block[it.g] = b;
      uint32_t feature;
      uint8_t flags;
      uint64_t left, right;
      const char* p = pac.data() + it.ref * kUnit;
      if (compact) {
        CompactNode n;
        std::memcpy(&n, p, sizeof(n));
        feature = n.feature_flags & 0xFFFFFFu;
        flags = static_cast<uint8_t>(n.feature_flags >> 24);
        left = n.left;
        right = n.right;
      } else {
        WideNode n;
        std::memcpy(&n, p, sizeof(n));
        feature = n.feature;
        flags = n.flags;
        left = n.left;
        right = n.right;
      }
      if (feature != f.split_feature[it.g]) return mismatch(it.g);
      stack.push_back({base + static_cast<uint64_t>(f.left_child[it.g]), left,
                       static_cast<uint8_t>((flags >> kLeftKindShift) & 3), b});
      stack.push_back({base + static_cast<uint64_t>(f.right_child[it.g]), right,
                       static_cast<uint8_t>((flags >> kRightKindShift) & 3), b});
    }
  }
  return block;
}

namespace {

// Pass 1: demand accesses per block of the chosen forest generation(s).
class PopularityVisitor : public TraceVisitor {
 public:
  PopularityVisitor(uint32_t forest, const std::unordered_set<uint64_t>* gens, uint64_t blocks)
      : forest_(forest), gens_(gens), count(blocks, 0) {}
  void OnAccess(const TraceRecord& r, uint32_t, const ScannedRequest*) override {
    if (r.forest != forest_ || r.block >= count.size() || r.source == TraceSource::kPrefetch)
      return;
    if (gens_ && !gens_->count(r.generation)) return;
    ++count[r.block];
    ++accesses;
  }
  uint32_t forest_;
  const std::unordered_set<uint64_t>* gens_;
  std::vector<uint64_t> count;
  uint64_t accesses = 0;
};

// Pass 2: replays requests as flows through the trees.
class FlowVisitor : public TraceVisitor {
 public:
  FlowVisitor(const Forest& f, const std::vector<uint64_t>& node_block,
              const std::vector<uint64_t>& popularity, uint32_t forest,
              const std::unordered_set<uint64_t>* gens, std::vector<double>* weight,
              TraceWeightsReport* report)
      : f_(f),
        node_block_(node_block),
        pop_(popularity),
        forest_(forest),
        gens_(gens),
        weight_(weight),
        report_(report),
        resident_(popularity.size(), 0),
        stamp_(popularity.size(), 0),
        mass_(f.num_nodes(), 0.0) {
    tree_of_.resize(f.num_nodes());
    for (size_t t = 0; t < f.num_trees(); ++t)
      for (uint64_t g = f.tree_offset[t]; g < f.tree_offset[t + 1]; ++g)
        tree_of_[g] = static_cast<uint32_t>(t);
  }

  void OnAccess(const TraceRecord& r, uint32_t, const ScannedRequest*) override {
    if (r.forest != forest_ || r.block >= resident_.size()) return;
    if (gens_ && !gens_->count(r.generation)) return;
    resident_[r.block] = 1;
  }

  void OnDropCache(uint32_t forest, uint64_t) override {
    if (forest == 0 || forest == forest_) std::fill(resident_.begin(), resident_.end(), 0);
  }

  void OnRequestEnd(const ScannedRequest& req) override {
    ++epoch_;
    bool any = false;
    for (const auto& [key, src] : req.blocks) {
      if (BlockKeyForest(key) != forest_) continue;
      const uint64_t b = BlockKeyBlock(key);
      if (b < stamp_.size()) {
        stamp_[b] = epoch_;
        any = true;
      }
    }
    if (!any) {
      ++report_->requests_skipped;
      return;
    }
    ++report_->requests_used;
    for (size_t t = 0; t < f_.num_trees(); ++t) {
      // Strongest evidence first: a path through blocks read during the
      // request; else also through blocks read earlier since the last drop
      // (page cache); else the prior alone.
      if (TreeFlow(t, 1.0, [&](uint64_t b) { return b < stamp_.size() && stamp_[b] == epoch_; }))
        continue;
      if (TreeFlow(t, 1.0, [&](uint64_t b) {
            return b < stamp_.size() && (stamp_[b] == epoch_ || resident_[b]);
          }))
        continue;
      TreeFlow(t, 1.0, [](uint64_t) { return true; });
    }
  }

  // No marks: one flow per tree, constrained to the blocks the trace read.
  void PopularityOnly(double scale) {
    for (size_t t = 0; t < f_.num_trees(); ++t)
      if (!TreeFlow(t, scale, [&](uint64_t b) { return b < pop_.size() && pop_[b] > 0; }))
        TreeFlow(t, scale, [](uint64_t) { return true; });
  }

  double decided() const { return decided_; }
  double total() const { return decided_ + prior_; }

 private:
  // Prior probability of going left at internal node g: the model's own
  // training counts when it has them, else block popularity in the trace.
  double Prior(uint64_t g) const {
    const uint64_t base = f_.tree_offset[f_.num_trees() ? TreeOf(g) : 0];
    const uint64_t l = base + static_cast<uint64_t>(f_.left_child[g]);
    const uint64_t r = base + static_cast<uint64_t>(f_.right_child[g]);
    const double cl = f_.cardinality[l], cr = f_.cardinality[r];
    if (f_.cardinality_source != CardinalitySource::kNone && cl + cr > 0) return cl / (cl + cr);
    const uint64_t bl = node_block_[l], br = node_block_[r];
    const double pl = bl < pop_.size() ? static_cast<double>(pop_[bl]) : 0;
    const double pr = br < pop_.size() ? static_cast<double>(pop_[br]) : 0;
    return (pl + 1) / (pl + pr + 2);
  }

  size_t TreeOf(uint64_t g) const { return tree_of_[g]; }

  // Posterior flow of one request through tree t: the path is one of the
  // root-to-leaf paths whose blocks are all `allowed`, weighted by the
  // prior. mass[g] = prior probability that a path from g stays allowed.
  // Returns false (and adds nothing) when no allowed path exists.
  template <typename Allowed>
  bool TreeFlow(size_t t, double scale, Allowed allowed) {
    const uint64_t base = f_.tree_offset[t];
    order_.clear();
    stack_.assign(1, base);
    while (!stack_.empty()) {
      const uint64_t g = stack_.back();
      stack_.pop_back();
      const uint64_t b = node_block_[g];
      if (b != kNoBlock && !allowed(b)) {
        mass_[g] = 0;
        continue;
      }
      order_.push_back(g);
      if (f_.left_child[g] >= 0) {
        stack_.push_back(base + static_cast<uint64_t>(f_.left_child[g]));
        stack_.push_back(base + static_cast<uint64_t>(f_.right_child[g]));
      }
    }
    for (size_t i = order_.size(); i-- > 0;) {
      const uint64_t g = order_[i];
      if (f_.left_child[g] < 0) {
        mass_[g] = 1;
        continue;
      }
      const double p = Prior(g);
      mass_[g] = p * mass_[base + f_.left_child[g]] + (1 - p) * mass_[base + f_.right_child[g]];
    }
    if (!(mass_[base] > 0)) return false;
    flow_.assign(1, {base, scale});
    while (!flow_.empty()) {
      const auto [g, w] = flow_.back();
      flow_.pop_back();
      (*weight_)[g] += w;
      if (f_.left_child[g] < 0) continue;
      const uint64_t l = base + static_cast<uint64_t>(f_.left_child[g]);
      const uint64_t r = base + static_cast<uint64_t>(f_.right_child[g]);
      const double p = Prior(g);
      // Feasibility decides; among feasible children the prior splits. (Weighting
      // by mass_ would favour paths through blocks that other trees make
      // every request read, e.g. the bins.)
      const double a = mass_[l] > 0 ? p : 0, c = mass_[r] > 0 ? 1 - p : 0;
      const double pl = a / (a + c);
      // A branch is decided by the trace when only one side can hold the path.
      ((a == 0 || c == 0) ? decided_ : prior_) += w / scale;
      if (a > 0) flow_.push_back({l, w * pl});
      if (c > 0) flow_.push_back({r, w * (1 - pl)});
    }
    return true;
  }

  const Forest& f_;
  const std::vector<uint64_t>& node_block_;
  const std::vector<uint64_t>& pop_;
  uint32_t forest_;
  const std::unordered_set<uint64_t>* gens_;
  std::vector<double>* weight_;
  TraceWeightsReport* report_;
  std::vector<char> resident_;
  std::vector<uint64_t> stamp_;
  uint64_t epoch_ = 0;
  std::vector<uint32_t> tree_of_;
  std::vector<double> mass_;
  std::vector<uint64_t> stack_, order_;
  std::vector<std::pair<uint64_t, double>> flow_;
  double decided_ = 0, prior_ = 0;
};

}  // namespace

Status ApplyTraceWeights(Forest& forest, const TraceWeightsOptions& o, TraceWeightsReport* report) {
  if (o.traced_pac.empty())
    return Status::InvalidArgument(
        "--weights-from-trace needs --traced-pac: the .pac file that was "
        "traced (blocks are positions in that file)");
  PACSET_ASSIGN_OR_RETURN(auto pac, PacFile::Open(o.traced_pac));
  PACSET_ASSIGN_OR_RETURN(std::vector<uint64_t> node_block, MapNodesToBlocks(forest, *pac));
  PACSET_ASSIGN_OR_RETURN(ScanResult scan, ScanTrace(o.trace, nullptr));
  PACSET_ASSIGN_OR_RETURN(uint32_t id, FindTraceForest(scan, o.forest));
  TraceWeightsReport local;
  TraceWeightsReport& rep = report ? *report : local;
  rep = TraceWeightsReport();
  rep.forest = scan.forests[id].name;
  std::unordered_set<uint64_t> gens;
  const auto& meta = scan.forests[id];
  for (const auto& [g, info] : meta.generations)
    if (info.header_checksum == pac->header().checksum) gens.insert(g);
  if (!meta.generations.empty() && gens.empty())
    return Status::InvalidArgument(o.traced_pac + " is not the file traced as forest '" +
                                   rep.forest +
                                   "' (header checksums differ): pass the .pac that was mounted");
  const std::unordered_set<uint64_t>* gp = gens.empty() ? nullptr : &gens;
  const uint64_t nblocks = pac->header().block_count;
  PopularityVisitor pop(id, gp, nblocks);
  PACSET_RETURN_IF_ERROR(ScanTrace(o.trace, &pop).status());
  rep.accesses = pop.accesses;
  if (pop.accesses == 0)
    return Status::InvalidArgument(o.trace + ": forest '" + rep.forest +
                                   "' has no block reads in the trace: nothing to weigh with");
  std::vector<double> weight(forest.num_nodes(), 0.0);
  FlowVisitor flow(forest, node_block, pop.count, id, gp, &weight, &rep);
  if (scan.requests > 0) {
    PACSET_RETURN_IF_ERROR(ScanTrace(o.trace, &flow).status());
  }
  if (rep.requests_used == 0) {
    rep.used_marks = false;
    flow.PopularityOnly(static_cast<double>(pop.accesses));
  }
  rep.decided_by_trace = flow.total() > 0 ? flow.decided() / flow.total() : 0;
  forest.cardinality = std::move(weight);
  forest.cardinality_source = CardinalitySource::kTrace;
  return Status::Ok();
}

}  // namespace pacset
