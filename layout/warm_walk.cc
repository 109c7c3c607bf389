// The warm loop: every block the request can touch is in memory and
// verified (BlockSource::WarmImage), so walks follow references with no
// residency or verification checks — only the format's safety checks.
#include <algorithm>
#include <vector>

#include "layout/internal/sigbus.h"
#include "layout/internal/walk.h"

namespace pacset::internal {
namespace {

template <typename NodeT, bool kF32Input, typename Acc, bool kLeaves>
class WarmLoop {
 public:
  WarmLoop(const PacFile& file, const OutputRule& rule, const char* image)
      : file_(file), rule_(rule), base_(image) {}

  // Rows are taken kBlockRows at a time (measured: 8..32 within 5%; 16 rows
  // of features stay in L1/L2). The buffers are the caller's: this runs
  // where a SIGBUS may jump out, so it creates nothing with a destructor.
  static constexpr size_t kBlockRows = 16;

  __attribute__((noinline)) WalkFault Run(const WalkJob& job, Acc* acc, float* x32,
                                          double* margins) const;

 private:
  const PacFile& file_;
  const OutputRule& rule_;
  const char* const base_;
};

// Per node: one range check (a reference outside the node region, or a path
// longer than max_depth, is corruption), one feature check, the routing rule
// and a branch-free step to the chosen child. References that land on a
// block trailer read harmless in-bounds bytes; the checks on the next step
// still hold, so no test for that is needed here.
template <typename NodeT, bool kF32Input, typename Acc, bool kLeaves>
WalkFault WarmLoop<NodeT, kF32Input, Acc, kLeaves>::Run(const WalkJob& job, Acc* acc, float* x32,
                                                        double* margins) const {
  constexpr uint64_t kNodeUnits = sizeof(NodeT) / kUnit;
  const RowMatrix& rows = *job.rows;
  const PacHeader& h = file_.header();
  const char* const base = base_;
  const uint32_t nf = h.num_features, K = h.num_outputs, w = h.leaf_width;
  const uint32_t record_bytes = LeafRecordBytes(w);
  const uint64_t T = h.num_trees;
  const uint32_t max_steps = h.max_depth + 1;
  const uint64_t lo = h.node_first_block * (h.block_size / kUnit);
  const uint64_t span = h.node_block_count * (h.block_size / kUnit) - (kNodeUnits - 1);
  const uint32_t cols = job.margin ? rule_.num_outputs : rule_.num_prediction_columns();
  const TreeRecord* trees = file_.trees().data();
  auto step = [&](uint64_t& ref, uint32_t& kind, const float* xf, const double* xd,
                  bool* went_left = nullptr) {
    return Step<NodeT, kF32Input>(base + ref * kUnit, nf, xf, xd, ref, kind, went_left);
  };

  for (size_t r0 = job.begin; r0 < job.end; r0 += kBlockRows) {
    const size_t nrows = std::min(kBlockRows, job.end - r0);
    if constexpr (kF32Input) {
      for (size_t i = 0; i < nrows; ++i) {
        const double* row = rows.row(r0 + i);
        for (uint32_t f = 0; f < nf; ++f) x32[i * nf + f] = static_cast<float>(row[f]);
      }
    }
    if constexpr (!kLeaves)
      for (size_t i = 0; i < nrows; ++i) rule_.Init(&acc[i * K]);
    for (uint64_t t = 0; t < T; ++t) {
      const TreeRecord& tr = trees[t];
      // Adds the leaf a walk ended on to the row's sums; false for a corrupt leaf.
      auto add_leaf = [&](size_t row, uint64_t ref, uint32_t kind) {
        const char* record = nullptr;
        if (kind == static_cast<uint32_t>(RefKind::kLeafRecord)) {
          if (!file_.RefInNodeRegion(ref, record_bytes)) return false;
          record = base + ref * kUnit;
        }
        return AddLeaf<Acc>(&acc[row * K], tr.group, K, w, ref, kind, record);
      };
      size_t i = 0;
      if constexpr (!kLeaves) {
        // Several rows at a time: their walks are independent dependency
        // chains (node load -> feature load -> compare -> next node), so the
        // CPU overlaps them. Same routing and checks as the one-row loop below.
        for (; i + 3 < nrows; i += 4) {
          uint64_t r[4] = {tr.root, tr.root, tr.root, tr.root};
          uint32_t k[4] = {tr.root_kind, tr.root_kind, tr.root_kind, tr.root_kind};
          const float* xf[4];
          const double* xd[4];
          for (int j = 0; j < 4; ++j) {
            xf[j] = kF32Input ? x32 + (i + j) * nf : nullptr;
            xd[j] = kF32Input ? nullptr : rows.row(r0 + i + j);
          }
          uint32_t steps = 0;
          bool ok = true;
          while (((k[0] | k[1] | k[2] | k[3]) == kNodeKind)) {  // all four still walking
            if (__builtin_expect(r[0] - lo >= span || r[1] - lo >= span || r[2] - lo >= span ||
                                     r[3] - lo >= span || ++steps > max_steps,
                                 0)) {
              ok = false;
              break;
            }
            // All four steps run (no short circuit): they overlap in the CPU.
            const bool s0 = step(r[0], k[0], xf[0], xd[0]);
            const bool s1 = step(r[1], k[1], xf[1], xd[1]);
            const bool s2 = step(r[2], k[2], xf[2], xd[2]);
            const bool s3 = step(r[3], k[3], xf[3], xd[3]);
            ok = s0 & s1 & s2 & s3;
            if (__builtin_expect(!ok, 0)) break;
          }
          for (int j = 0; j < 4 && ok; ++j) {
            uint32_t s2 = steps;
            while (ok && k[j] == kNodeKind) {
              if (__builtin_expect(r[j] - lo >= span || ++s2 > max_steps, 0))
                ok = false;
              else
                ok = step(r[j], k[j], xf[j], xd[j]);
            }
          }
          for (int j = 0; j < 4 && ok; ++j) ok = add_leaf(i + j, r[j], k[j]);
          if (__builtin_expect(!ok, 0)) return {WalkFault::kLockstep, t};
        }
        for (; i + 1 < nrows; i += 2) {
          uint64_t ra = tr.root, rb = tr.root;
          uint32_t ka = tr.root_kind, kb = tr.root_kind, steps = 0;
          const float* xa = kF32Input ? x32 + i * nf : nullptr;
          const float* xb = kF32Input ? x32 + (i + 1) * nf : nullptr;
          const double* da = kF32Input ? nullptr : rows.row(r0 + i);
          const double* db = kF32Input ? nullptr : rows.row(r0 + i + 1);
          bool ok = true;
          while (ka == kNodeKind && kb == kNodeKind) {
            if (__builtin_expect(ra - lo >= span || rb - lo >= span || ++steps > max_steps, 0)) {
              ok = false;
              break;
            }
            const bool sa = step(ra, ka, xa, da);
            const bool sb = step(rb, kb, xb, db);
            ok = sa & sb;
            if (__builtin_expect(!ok, 0)) break;
          }
          while (ok && ka == kNodeKind) {
            if (__builtin_expect(ra - lo >= span || ++steps > max_steps, 0))
              ok = false;
            else
              ok = step(ra, ka, xa, da);
          }
          while (ok && kb == kNodeKind) {
            if (__builtin_expect(rb - lo >= span || ++steps > max_steps, 0))
              ok = false;
            else
              ok = step(rb, kb, xb, db);
          }
          if (__builtin_expect(!ok || !add_leaf(i, ra, ka) || !add_leaf(i + 1, rb, kb), 0))
            return {WalkFault::kLockstep, t};
        }
      }
      for (; i < nrows; ++i) {
        uint64_t ref = tr.root;
        uint32_t kind = tr.root_kind;
        uint32_t leaf_id = 0, steps = 0;
        const float* xf = kF32Input ? x32 + i * nf : nullptr;
        const double* xd = kF32Input ? nullptr : rows.row(r0 + i);
        while (kind == kNodeKind) {
          if (__builtin_expect(ref - lo >= span || ++steps > max_steps, 0))
            return {WalkFault::kBadReference, t};
          const uint64_t at = ref;
          bool left = false;
          if (__builtin_expect(!step(ref, kind, xf, xd, &left), 0))
            return {WalkFault::kBadFeature, t};
          if constexpr (kLeaves) {
            if (kind != kNodeKind) {
              uint32_t ids[2];
              std::memcpy(ids, base + file_.LeafIdsOffset(at), 8);
              leaf_id = ids[left ? 0 : 1];
            }
          }
        }
        if constexpr (kLeaves) {
          job.leaves[(r0 + i - job.begin) * T + t] = static_cast<int32_t>(leaf_id);
        } else if (__builtin_expect(!add_leaf(i, ref, kind), 0)) {
          return {WalkFault::kBadLeaf, t};
        }
      }
    }
    if constexpr (!kLeaves) {
      for (size_t i = 0; i < nrows; ++i) {
        double* dst = job.out + (r0 + i - job.begin) * cols;
        rule_.Finish(&acc[i * K], job.margin ? dst : margins);
        if (!job.margin) rule_.Transform(margins, dst);
      }
    }
  }
  return {};
}

template <typename NodeT, bool kF32Input, typename Acc, bool kLeaves>
Status RunWarm(const PacFile& file, const OutputRule& rule, const char* image, const WalkJob& job) {
  using Loop = WarmLoop<NodeT, kF32Input, Acc, kLeaves>;
  const PacHeader& h = file.header();
  // Buffers live in this frame, outside the region a SIGBUS can jump out of.
  std::vector<Acc> acc(Loop::kBlockRows * h.num_outputs);
  std::vector<float> x32(kF32Input ? Loop::kBlockRows * h.num_features : 0);
  std::vector<double> margins(h.num_outputs);
  const Loop loop(file, rule, image);
  SigbusScope scope(image, file.size(), h.block_size);
  if (sigsetjmp(*scope.env(), 0) != 0) return scope.Error(file.name());
  scope.Arm();
  const WalkFault fault = loop.Run(job, acc.data(), x32.data(), margins.data());
  scope.Disarm();
  return FaultStatus(file, fault);
}

struct RunWarmLoop {
  const PacFile& file;
  const OutputRule& rule;
  const char* image;
  const WalkJob& job;
  template <typename NodeT, bool kF32Input, typename Acc>
  Status Call() const {
    if (job.leaves) return RunWarm<NodeT, kF32Input, Acc, true>(file, rule, image, job);
    return RunWarm<NodeT, kF32Input, Acc, false>(file, rule, image, job);
  }
};

}  // namespace

Status WarmWalk(const PacFile& file, const OutputRule& rule, const char* image,
                const WalkJob& job) {
  return DispatchByFormat(file.header(), RunWarmLoop{file, rule, image, job});
}

}  // namespace pacset::internal
