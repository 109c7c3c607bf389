#include "layout/engine.h"

#include <algorithm>
#include <cstring>
#include <thread>

#include "layout/internal/sigbus.h"
#include "model/routing.h"

namespace pacset {
namespace {

struct CompactView {
  using Node = CompactNode;
  static uint32_t Feature(const Node& n) { return n.feature_flags & 0xFFFFFFu; }
  static uint8_t Flags(const Node& n) { return static_cast<uint8_t>(n.feature_flags >> 24); }
};
struct WideView {
  using Node = WideNode;
  static uint32_t Feature(const Node& n) { return n.feature; }
  static uint8_t Flags(const Node& n) { return n.flags; }
};
template <typename NodeT>
struct ViewOf;
template <>
struct ViewOf<CompactNode> : CompactView {};
template <>
struct ViewOf<WideNode> : WideView {};

template <typename Fn>
Status ParallelChunks(size_t n, int threads, Fn fn) {
  threads = std::max(1, std::min<int>(threads, static_cast<int>(std::max<size_t>(1, n / 64))));
  if (threads == 1) return fn(size_t{0}, n);
  std::vector<Status> results(threads);
  std::vector<std::thread> pool;
  const size_t chunk = (n + threads - 1) / threads;
  for (int i = 0; i < threads; ++i) {
    const size_t b = std::min(n, i * chunk), e = std::min(n, b + chunk);
    pool.emplace_back([&, i, b, e] { results[i] = fn(b, e); });
  }
  for (auto& t : pool) t.join();
  for (auto& s : results) PACSET_RETURN_IF_ERROR(s);
  return Status::Ok();
}

}  // namespace

StatusOr<std::unique_ptr<PacEngine>> PacEngine::Open(const std::string& path,
                                                     const EngineOptions& options) {
  PACSET_ASSIGN_OR_RETURN(auto file, PacFile::Open(path));
  return FromFile(std::move(file), options);
}

StatusOr<std::unique_ptr<PacEngine>> PacEngine::FromFile(std::unique_ptr<PacFile> file,
                                                         const EngineOptions& options) {
  std::unique_ptr<PacEngine> e(new PacEngine());
  const PacHeader& h = file->header();
  e->rule_.num_outputs = h.num_outputs;
  e->rule_.postprocess = static_cast<Postprocess>(h.postprocess);
  e->rule_.sigmoid_alpha = h.sigmoid_alpha;
  e->rule_.aggregation = static_cast<Aggregation>(h.aggregation);
  e->rule_.accumulate_precision = static_cast<Precision>(h.accumulate_precision);
  e->rule_.base_score = file->base_score();
  e->rule_.trees_per_output.assign(h.num_outputs, 0.0);
  for (const TreeRecord& t : file->trees()) {
    if (h.leaf_width > 1) {
      for (auto& c : e->rule_.trees_per_output) c += 1;
    } else {
      e->rule_.trees_per_output[t.group] += 1;
    }
  }
  for (auto& c : e->rule_.trees_per_output) c = std::max(c, 1.0);
  if (e->rule_.postprocess == Postprocess::kSoftmax && h.num_outputs < 2)
    return Status::Corruption(file->name() + ": softmax with a single output");
  e->options_ = options;
  if (options.verify_blocks) {
    const uint64_t words = (h.block_count + 63) / 64;
    e->verified_.reset(new std::atomic<uint64_t>[words]);
    for (uint64_t i = 0; i < words; ++i) e->verified_[i].store(0, std::memory_order_relaxed);
  }
  e->file_ = std::move(file);
  return e;
}

Status PacEngine::CheckBlock(uint64_t block) const {
  std::atomic<uint64_t>& word = verified_[block / 64];
  const uint64_t bit = uint64_t{1} << (block % 64);
  if (word.load(std::memory_order_acquire) & bit) return Status::Ok();
  const PacHeader& h = file_->header();
  PACSET_RETURN_IF_ERROR(
      VerifyBlock(file_->data() + block * h.block_size, h.block_size, block, file_->name()));
  word.fetch_or(bit, std::memory_order_release);
  return Status::Ok();
}

template <typename NodeT, bool kF32Input, typename Acc, int kMode>
Status PacEngine::Run(const RowMatrix& rows, size_t begin, size_t end, bool margin, double* out,
                      int32_t* leaves, std::vector<uint64_t>* trace) const {
  const PacHeader& h = file_->header();
  constexpr size_t kBlockRows =
      kMode == kHooked ? 1 : 16;  // measured: 8..32 within 5%  // 16 rows of features stay in L1/L2
  // Buffers live in this frame, outside the region a SIGBUS can jump out of.
  std::vector<Acc> acc(kBlockRows * h.num_outputs);
  std::vector<float> x32(kF32Input ? kBlockRows * h.num_features : 0);
  std::vector<double> margins(h.num_outputs);
  SigbusScope scope(file_->data(), file_->size(), h.block_size);
  if (sigsetjmp(*scope.env(), 1) != 0) return scope.Error(file_->name());
  scope.Arm();
  Status s = RunLoop<NodeT, kF32Input, Acc, kMode, kBlockRows>(
      rows, begin, end, margin, out, leaves, trace, acc.data(), x32.data(), margins.data());
  scope.Disarm();
  return s;
}

Status PacEngine::Corrupt(uint64_t tree, const std::string& what) const {
  return Status::Corruption(file_->name() + ": tree " + std::to_string(tree) + " " + what);
}

// The hot loop. Per node: one range check (a reference outside the node
// region, or a path longer than max_depth, is corruption), one feature check,
// the routing rule, and a branch-free step to the chosen child. References
// that land on a block trailer read harmless in-bounds bytes; the checks on
// the next step still hold, so no test for that is needed here.
template <typename NodeT, bool kF32Input, typename Acc, int kMode, size_t kBlockRows>
Status PacEngine::RunLoop(const RowMatrix& rows, size_t begin, size_t end, bool margin, double* out,
                          int32_t* leaves, std::vector<uint64_t>* trace, Acc* acc, float* x32,
                          double* margins) const {
  using V = ViewOf<NodeT>;
  constexpr uint64_t kNodeUnits = sizeof(NodeT) / kUnit;
  const PacHeader& h = file_->header();
  const char* const base = file_->data();
  const uint32_t nf = h.num_features, K = h.num_outputs, w = h.leaf_width;
  const uint32_t bs_shift = static_cast<uint32_t>(__builtin_ctz(h.block_size));
  const uint32_t record_bytes = static_cast<uint32_t>((8ull * w + kUnit - 1) / kUnit * kUnit);
  const uint64_t T = h.num_trees;
  const uint32_t max_steps = h.max_depth + 1;
  const uint64_t lo = h.node_first_block * (h.block_size / kUnit);
  const uint64_t span = h.node_block_count * (h.block_size / kUnit) - (kNodeUnits - 1);
  const bool verify = options_.verify_blocks;
  const uint32_t cols = num_columns(margin);
  const TreeRecord* trees = file_->trees().data();
  Status status;

  for (size_t r0 = begin; r0 < end; r0 += kBlockRows) {
    const size_t nrows = std::min(kBlockRows, end - r0);
    if constexpr (kF32Input) {
      for (size_t i = 0; i < nrows; ++i) {
        const double* row = rows.row(r0 + i);
        for (uint32_t f = 0; f < nf; ++f) x32[i * nf + f] = static_cast<float>(row[f]);
      }
    }
    if constexpr (kMode != kLeaves)
      for (size_t i = 0; i < nrows; ++i) rule_.Init(&acc[i * K]);
    for (uint64_t t = 0; t < T; ++t) {
      const TreeRecord& tr = trees[t];
      // One step down the tree: false when the node splits on a feature the
      // model does not have. `went_left` tells the leaf-id lookup which child.
      auto step = [&](uint64_t& ref, uint32_t& kind, const float* xf, const double* xd,
                      bool* went_left = nullptr) {
        NodeT n;
        std::memcpy(&n, base + ref * kUnit, sizeof(NodeT));
        const uint32_t feature = V::Feature(n);
        const uint32_t flags = V::Flags(n);
        if (__builtin_expect(feature >= nf, 0)) return false;
        bool left;
        if constexpr (kF32Input) {
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
      };
      // Adds the leaf a walk ended on to the row's sums; false for a corrupt leaf.
      auto add_leaf = [&](size_t row, uint64_t ref, uint32_t kind) {
        Acc* a = &acc[row * K];
        switch (static_cast<RefKind>(kind)) {
          case RefKind::kInlineValue: {
            const uint32_t bits = static_cast<uint32_t>(ref);
            float v;
            std::memcpy(&v, &bits, 4);
            a[tr.group] += static_cast<Acc>(v);
            return true;
          }
          case RefKind::kInlineClass:
            if (__builtin_expect(ref >= K, 0)) return false;
            a[ref] += Acc(1);
            return true;
          case RefKind::kLeafRecord: {
            if (!file_->RefInNodeRegion(ref, record_bytes)) return false;
            const char* v = base + ref * kUnit;
            if (w == 1) {
              double x;
              std::memcpy(&x, v, 8);
              a[tr.group] += static_cast<Acc>(x);
            } else {
              for (uint32_t c = 0; c < w; ++c) {
                double x;
                std::memcpy(&x, v + 8 * c, 8);
                a[c] += static_cast<Acc>(x);
              }
            }
            return true;
          }
          case RefKind::kNode:
            break;
        }
        return false;
      };
      size_t i = 0;
      if constexpr (kMode == kFast) {
        // Several rows at a time: their walks are independent dependency
        // chains (node load -> feature load -> compare -> next node), so the
        // CPU overlaps them. Same routing and checks as the one-row loop below.
        constexpr uint32_t kNodeKind = static_cast<uint32_t>(RefKind::kNode);
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
            ok = (int{step(r[0], k[0], xf[0], xd[0])} & int{step(r[1], k[1], xf[1], xd[1])} &
                  int{step(r[2], k[2], xf[2], xd[2])} & int{step(r[3], k[3], xf[3], xd[3])}) != 0;
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
          if (__builtin_expect(!ok, 0))
            return Corrupt(t,
                           "has a reference outside the node region, a cycle, a feature or "
                           "class out of range");
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
            ok = (int{step(ra, ka, xa, da)} & int{step(rb, kb, xb, db)}) != 0;
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
            return Corrupt(t,
                           "has a reference outside the node region, a cycle, a feature or "
                           "class out of range");
        }
      }
      for (; i < nrows; ++i) {
        uint64_t ref = tr.root;
        uint32_t kind = tr.root_kind;
        uint32_t leaf_id = 0, steps = 0;
        const float* xf = kF32Input ? x32 + i * nf : nullptr;
        const double* xd = kF32Input ? nullptr : rows.row(r0 + i);
        while (kind == static_cast<uint32_t>(RefKind::kNode)) {
          if (__builtin_expect(ref - lo >= span || ++steps > max_steps, 0))
            return Corrupt(t, "has a node reference outside the node region or a cycle");
          if constexpr (kMode == kHooked) {
            const uint64_t block = (ref * kUnit) >> bs_shift;
            if (trace) trace->push_back(block);
            if (verify) {
              status = CheckBlock(block);
              if (!status.ok()) return status;
            }
          }
          const uint64_t at = ref;
          bool left = false;
          if (__builtin_expect(!step(ref, kind, xf, xd, &left), 0))
            return Corrupt(t, "splits on a feature the model does not have (it has " +
                                  std::to_string(nf) + ")");
          if constexpr (kMode != kFast) {
            if (leaves && kind != static_cast<uint32_t>(RefKind::kNode)) {
              uint32_t ids[2];
              file_->ChildLeafIds(at, ids);
              leaf_id = ids[left ? 0 : 1];
            }
          }
        }
        if constexpr (kMode != kFast) {
          if (leaves) {
            leaves[(r0 + i - begin) * T + t] = static_cast<int32_t>(leaf_id);
            if (!trace) continue;
          }
        }
        if constexpr (kMode == kHooked) {
          if (kind == static_cast<uint32_t>(RefKind::kLeafRecord) &&
              file_->RefInNodeRegion(ref, record_bytes)) {
            const uint64_t block = (ref * kUnit) >> bs_shift;
            if (trace) trace->push_back(block);
            if (verify) {
              status = CheckBlock(block);
              if (!status.ok()) return status;
            }
          }
        }
        if (__builtin_expect(!add_leaf(i, ref, kind), 0))
          return Corrupt(t, "has a leaf outside the node region or a class out of range");
      }
    }
    if (leaves || trace) continue;
    for (size_t i = 0; i < nrows; ++i) {
      double* dst = out + (r0 + i - begin) * cols;
      rule_.Finish(&acc[i * K], margin ? dst : margins);
      if (!margin) rule_.Transform(margins, dst);
    }
  }
  return Status::Ok();
}

template <int kMode>
Status PacEngine::Dispatch(const RowMatrix& rows, size_t begin, size_t end, bool margin,
                           double* out, int32_t* leaves, std::vector<uint64_t>* trace) const {
  const PacHeader& h = file_->header();
  if (rows.num_cols != h.num_features)
    return Status::InvalidArgument("rows have " + std::to_string(rows.num_cols) +
                                   " columns, the model expects " + std::to_string(h.num_features));
  const bool compact = h.node_format == static_cast<uint8_t>(NodeFormat::kCompact16);
  const bool f32in = h.input_precision == static_cast<uint8_t>(Precision::kFloat32);
  const bool f32acc = h.accumulate_precision == static_cast<uint8_t>(Precision::kFloat32);
#define PACSET_RUN(N, I, A) return Run<N, I, A, kMode>(rows, begin, end, margin, out, leaves, trace)
  if (compact) {
    if (f32in) {
      if (f32acc) PACSET_RUN(CompactNode, true, float);
      PACSET_RUN(CompactNode, true, double);
    }
    if (f32acc) PACSET_RUN(CompactNode, false, float);
    PACSET_RUN(CompactNode, false, double);
  }
  if (f32in) {
    if (f32acc) PACSET_RUN(WideNode, true, float);
    PACSET_RUN(WideNode, true, double);
  }
  if (f32acc) PACSET_RUN(WideNode, false, float);
  PACSET_RUN(WideNode, false, double);
#undef PACSET_RUN
}

Status PacEngine::Predict(const RowMatrix& rows, size_t begin, size_t end, bool margin,
                          double* out) const {
  if (options_.verify_blocks)
    return Dispatch<kHooked>(rows, begin, end, margin, out, nullptr, nullptr);
  return Dispatch<kFast>(rows, begin, end, margin, out, nullptr, nullptr);
}

Status PacEngine::PredictAll(const RowMatrix& rows, bool margin, int threads,
                             std::vector<double>* out) const {
  const uint32_t cols = num_columns(margin);
  out->assign(rows.num_rows * cols, 0.0);
  return ParallelChunks(rows.num_rows, threads, [&](size_t b, size_t e) {
    return Predict(rows, b, e, margin, out->data() + b * cols);
  });
}

Status PacEngine::PredictLeaves(const RowMatrix& rows, int threads,
                                std::vector<int32_t>* out) const {
  if (!file_->has_leaf_ids())
    return Status::NotSupported(
        file_->name() + ": packed without leaf ids; repack without --no-leaf-ids to use --leaf");
  const uint64_t T = num_trees();
  out->assign(rows.num_rows * T, 0);
  return ParallelChunks(rows.num_rows, threads, [&](size_t b, size_t e) {
    if (options_.verify_blocks)
      return Dispatch<kHooked>(rows, b, e, false, nullptr, out->data() + b * T, nullptr);
    return Dispatch<kLeaves>(rows, b, e, false, nullptr, out->data() + b * T, nullptr);
  });
}

Status PacEngine::TouchedBlocks(const double* row, std::vector<uint64_t>* blocks) const {
  RowMatrix one;
  one.num_rows = 1;
  one.num_cols = num_features();
  one.values.assign(row, row + one.num_cols);
  blocks->clear();
  double dummy[1];
  PACSET_RETURN_IF_ERROR(Dispatch<kHooked>(one, 0, 1, false, dummy, nullptr, blocks));
  std::sort(blocks->begin(), blocks->end());
  blocks->erase(std::unique(blocks->begin(), blocks->end()), blocks->end());
  return Status::Ok();
}

}  // namespace pacset
