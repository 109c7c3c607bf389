#include "model/forest.h"

#include <cereal/archives/portable_binary.hpp>
#include <cereal/types/string.hpp>
#include <cereal/types/vector.hpp>

#include <sys/stat.h>

#include <algorithm>
#include <cmath>
#include <istream>
#include <limits>
#include <sstream>

#include "util/atomic_file.h"
#include "util/bounded_cereal.h"
#include "util/file_io.h"

namespace pacset {

const char* TaskName(Task t) {
  switch (t) {
    case Task::kRegression:
      return "regression";
    case Task::kBinaryClassification:
      return "binary";
    case Task::kMulticlassClassification:
      return "multiclass";
  }
  return "?";
}

const char* PostprocessName(Postprocess p) {
  switch (p) {
    case Postprocess::kIdentity:
      return "identity";
    case Postprocess::kSigmoid:
      return "sigmoid";
    case Postprocess::kSoftmax:
      return "softmax";
    case Postprocess::kClassIndex:
      return "class-index";
    case Postprocess::kExponential:
      return "exponential";
    case Postprocess::kSigmoidPair:
      return "sigmoid-pair";
    case Postprocess::kIsolationScore:
      return "isolation-score";
  }
  return "?";
}

const char* AggregationName(Aggregation a) { return a == Aggregation::kSum ? "sum" : "mean"; }

const char* CardinalitySourceName(CardinalitySource s) {
  switch (s) {
    case CardinalitySource::kNone:
      return "none";
    case CardinalitySource::kHessian:
      return "hessian";
    case CardinalitySource::kTraining:
      return "training";
    case CardinalitySource::kCalibrated:
      return "calibrated";
    case CardinalitySource::kTrace:
      return "trace";
  }
  return "?";
}

uint32_t AddCategoricalSplit(Forest& f, const std::vector<uint32_t>& left,
                             const std::vector<uint32_t>& right, CategoryRule rule) {
  auto add_set = [&](const std::vector<uint32_t>& cats, uint32_t* first, uint32_t* words) {
    uint32_t top = 0;
    for (uint32_t c : cats) top = std::max(top, c / 32 + 1);
    *first = static_cast<uint32_t>(f.category_words.size());
    *words = top;
    f.category_words.resize(f.category_words.size() + top, 0);
    for (uint32_t c : cats) f.category_words[*first + c / 32] |= 1u << (c % 32);
  };
  CategoricalSplit s;
  add_set(left, &s.left_first, &s.left_words);
  add_set(right, &s.right_first, &s.right_words);
  s.rule = static_cast<uint8_t>(rule);
  f.categorical_splits.push_back(s);
  return static_cast<uint32_t>(f.categorical_splits.size() - 1);
}

float Float32AtOrBelow(double v) {
  if (std::isnan(v)) return std::numeric_limits<float>::quiet_NaN();
  float f = static_cast<float>(v);  // round to nearest; may overflow to inf
  if (static_cast<double>(f) > v) f = std::nextafter(f, -std::numeric_limits<float>::infinity());
  return f;
}

uint64_t Forest::AddTree(uint32_t group, uint32_t n) {
  if (tree_offset.empty()) tree_offset.push_back(0);
  const uint64_t begin = tree_offset.back();
  tree_offset.push_back(begin + n);
  tree_group.push_back(group);
  const size_t total = begin + n;
  left_child.resize(total, -1);
  right_child.resize(total, -1);
  split_feature.resize(total, 0);
  threshold.resize(total, 0.0);
  flags.resize(total, 0);
  cardinality.resize(total, 0.0);
  leaf_value.resize(total * leaf_width, 0.0);
  return begin;
}

void Forest::Reserve(size_t trees, size_t nodes) {
  tree_offset.reserve(trees + 1);
  tree_group.reserve(trees);
  left_child.reserve(nodes);
  right_child.reserve(nodes);
  split_feature.reserve(nodes);
  threshold.reserve(nodes);
  flags.reserve(nodes);
  cardinality.reserve(nodes);
  leaf_value.reserve(nodes * leaf_width);
}

Status Forest::Validate() const {
  auto bad = [](const std::string& m) { return Status::InvalidArgument("invalid forest: " + m); };
  if (num_outputs == 0) return bad("no outputs");
  if (leaf_width != 1 && leaf_width != num_outputs)
    return bad("leaf width must be 1 or num_outputs");
  if (base_score.size() != num_outputs) return bad("base_score must have one value per output");
  if (tree_group.empty()) return bad("the forest has no trees");
  if (tree_offset.size() != tree_group.size() + 1 || tree_offset[0] != 0)
    return bad("tree offsets do not match the tree count");
  const size_t n = left_child.size();
  if (tree_offset.back() != n || right_child.size() != n || split_feature.size() != n ||
      threshold.size() != n || flags.size() != n || cardinality.size() != n ||
      leaf_value.size() != n * leaf_width)
    return bad("node arrays have different lengths");
  if (postprocess == Postprocess::kSoftmax && num_outputs < 2)
    return bad("softmax needs at least two outputs");
  if (postprocess == Postprocess::kSigmoidPair && num_outputs != 1)
    return bad("sigmoid-pair needs exactly one output");
  if (static_cast<uint8_t>(postprocess) > kMaxPostprocess) return bad("unknown postprocess");
  if (postprocess == Postprocess::kIsolationScore &&
      (num_outputs != 1 || accumulate_precision != Precision::kFloat64 ||
       !std::isfinite(isolation_denominator) || isolation_denominator < 0 ||
       !std::isfinite(isolation_offset)))
    return bad(
        "isolation-score needs one output, float64 accumulation, a finite denominator >= 0 "
        "and a finite offset");
  for (size_t k = 0; k < categorical_splits.size(); ++k) {
    const CategoricalSplit& c = categorical_splits[k];
    const uint64_t words = category_words.size();
    if (c.rule > kMaxCategoryRule || uint64_t{c.left_first} + c.left_words > words ||
        uint64_t{c.right_first} + c.right_words > words || c.left_words > 0xFFFF ||
        c.right_words > 0xFFFF)
      return bad("categorical split " + std::to_string(k) + " has sets outside the " +
                 std::to_string(words) + " category words or an unknown rule");
  }
  std::vector<uint8_t> seen;
  for (size_t t = 0; t < num_trees(); ++t) {
    const std::string where = "tree " + std::to_string(t);
    if (tree_offset[t + 1] <= tree_offset[t]) return bad(where + " has no nodes");
    // Only the last offset was compared with the node count above.
    if (tree_offset[t + 1] > n)
      return bad(where + " ends at node " + std::to_string(tree_offset[t + 1]) + " of " +
                 std::to_string(n));
    if (tree_offset[t + 1] - tree_offset[t] > static_cast<uint64_t>(INT32_MAX))
      return bad(where + " has too many nodes");
    if (leaf_width == 1 && tree_group[t] >= num_outputs)
      return bad(where + " belongs to output group " + std::to_string(tree_group[t]) +
                 " but the model has " + std::to_string(num_outputs));
    const uint64_t base = tree_offset[t];
    const int32_t size = static_cast<int32_t>(tree_offset[t + 1] - base);
    seen.assign(size, 0);
    seen[0] = 1;
    // No node is the child of two nodes and the root is nobody's child, so
    // what is reachable from the root is a tree (no cycles, no sharing).
    // Unreachable nodes (XGBoost's deleted nodes) are allowed and ignored.
    for (int32_t i = 0; i < size; ++i) {
      const uint64_t g = base + i;
      const int32_t l = left_child[g], r = right_child[g];
      if ((l < 0) != (r < 0)) return bad(where + " node " + std::to_string(i) + " has one child");
      if (l < 0) {
        for (uint32_t k = 0; k < leaf_width; ++k)
          if (std::isnan(leaf_value[g * leaf_width + k]))
            return bad(where + " leaf " + std::to_string(i) + " has a NaN value");
        continue;
      }
      for (int32_t c : {l, r}) {
        if (c >= size || c == 0)
          return bad(where + " node " + std::to_string(i) + " has child " + std::to_string(c) +
                     " outside 1.." + std::to_string(size - 1));
        if (seen[c]) return bad(where + " node " + std::to_string(c) + " has two parents");
        seen[c] = 1;
      }
      if (split_feature[g] >= num_features)
        return bad(where + " node " + std::to_string(i) + " splits on feature " +
                   std::to_string(split_feature[g]) + " but the model has " +
                   std::to_string(num_features) + " features");
      if (flags[g] & ~kKnownNodeFlags) return bad(where + " node has unknown flags");
      const double th = threshold[g];
      if (flags[g] & kCategorical) {
        if (!(th >= 0 && th < static_cast<double>(categorical_splits.size())) ||
            th != std::floor(th))
          return bad(where + " node " + std::to_string(i) + " names categorical split " +
                     std::to_string(th) + " of " + std::to_string(categorical_splits.size()));
        if (((flags[g] & kOutsideMask) >> kOutsideShift) >
            static_cast<uint8_t>(OutsideDirection::kDefault))
          return bad(where + " node " + std::to_string(i) + " has an unknown outside direction");
        continue;
      }
      if (std::isnan(th)) return bad(where + " node " + std::to_string(i) + " has a NaN threshold");
      if (input_precision == Precision::kFloat32 &&
          static_cast<double>(static_cast<float>(th)) != th)
        return bad(where + " node " + std::to_string(i) + " threshold is not a float32 value");
    }
  }
  return Status::Ok();
}

namespace {

constexpr uint32_t kForestFileMagic = 0x50414346;  // "FCAP"
constexpr uint32_t kForestFileVersion = 3;         // 2: categorical splits; 3: isolation parameters
constexpr uint32_t kForestFileOldestVersion = 1;

template <class Archive>
void Serialize(Archive& ar, Forest& f, uint32_t version) {
  auto b = [](auto& c) { return Bound(c); };
  uint8_t task = static_cast<uint8_t>(f.task), post = static_cast<uint8_t>(f.postprocess),
          agg = static_cast<uint8_t>(f.aggregation), inp = static_cast<uint8_t>(f.input_precision),
          acc = static_cast<uint8_t>(f.accumulate_precision),
          card = static_cast<uint8_t>(f.cardinality_source);
  ar(task, f.num_features, f.num_outputs, f.num_classes, f.leaf_width, b(f.base_score), post,
     f.sigmoid_alpha, agg, inp, acc, card, b(f.source.format), b(f.source.library_version),
     b(f.source.objective), b(f.source.file_name));
  ar(b(f.tree_offset), b(f.tree_group), b(f.left_child), b(f.right_child), b(f.split_feature),
     b(f.threshold), b(f.flags), b(f.cardinality), b(f.leaf_value));
  if (version >= 2) {
    // Five arrays, not one of structs: the file stays a handful of flat frames.
    std::vector<uint32_t> lf, lw, rf, rw;
    std::vector<uint8_t> rule;
    for (const CategoricalSplit& c : f.categorical_splits) {
      lf.push_back(c.left_first);
      lw.push_back(c.left_words);
      rf.push_back(c.right_first);
      rw.push_back(c.right_words);
      rule.push_back(c.rule);
    }
    ar(b(lf), b(lw), b(rf), b(rw), b(rule), b(f.category_words));
    if (lf.size() != lw.size() || lf.size() != rf.size() || lf.size() != rw.size() ||
        lf.size() != rule.size())
      throw cereal::Exception("categorical split arrays of different lengths");
    f.categorical_splits.resize(lf.size());
    for (size_t k = 0; k < lf.size(); ++k)
      f.categorical_splits[k] = {lf[k], lw[k], rf[k], rw[k], rule[k]};
  }
  if (version >= 3) ar(f.isolation_denominator, f.isolation_offset);
  f.task = static_cast<Task>(task);
  f.postprocess = static_cast<Postprocess>(post);
  f.aggregation = static_cast<Aggregation>(agg);
  f.input_precision = static_cast<Precision>(inp);
  f.accumulate_precision = static_cast<Precision>(acc);
  f.cardinality_source = static_cast<CardinalitySource>(card);
}

}  // namespace

Status SaveForest(const Forest& forest, const std::string& path) {
  std::ostringstream out(std::ios::binary);
  {
    cereal::PortableBinaryOutputArchive ar(out);
    uint32_t magic = kForestFileMagic, version = kForestFileVersion;
    ar(magic, version);
    Forest copy = forest;  // Serialize() is symmetric and takes a mutable reference
    Serialize(ar, copy, version);
  }
  return WriteFileAtomically(path, out.str());
}

StatusOr<Forest> LoadForest(const std::string& path) {
  PACSET_ASSIGN_OR_RETURN(UniqueFd fd, OpenRegularFile(path));
  struct stat st;
  if (::fstat(fd.get(), &st) != 0) return Status::FromErrno("cannot stat " + path, errno);
  FdStreambuf buf(fd.get());
  std::istream in(&buf);
  Forest f;
  try {
    BoundedInputArchive ar(in, static_cast<uint64_t>(st.st_size));
    uint32_t magic = 0, version = 0;
    ar(magic, version);
    if (magic != kForestFileMagic)
      return Status::InvalidArgument(path + ": not a pacset forest file");
    if (version < kForestFileOldestVersion || version > kForestFileVersion)
      return Status::NotSupported(path + ": forest file version " + std::to_string(version));
    Serialize(ar, f, version);
  } catch (const std::exception& e) {
    if (buf.error() != 0) return Status::FromErrno("read " + path, buf.error());
    return Status::Corruption(path + ": truncated or corrupt forest file (" + e.what() + ")");
  }
  PACSET_RETURN_IF_ERROR(f.Validate().WithContext(path));
  return f;
}

}  // namespace pacset
