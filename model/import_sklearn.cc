// scikit-learn importer: a fitted estimator's tree arrays -> Forest. The
// arrays come straight from the estimator (ImportSklearnArrays, used by the
// Python package), from the JSON written by tools/pacset-sklearn-export, or
// from its binary stream (format of both: docs/sklearn-export.md); the JSON
// and the stream are read into the same SklearnEstimatorArrays, so there is
// one mapping from scikit-learn to a Forest.
//
// Exactness (scikit-learn sklearn/tree/_tree.pyx, ensemble/_forest.py,
// ensemble/_gb.py, ensemble/_gradient_boosting.pyx):
//  - X is cast to float32 and a row goes left iff x <= threshold, compared in
//    float64. For float32 x that is x <= the largest float32 <= threshold, so
//    thresholds are stored as Float32AtOrBelow(t) with float32 input precision.
//  - Classifier forests: predict_proba is the mean over the trees of each
//    tree's leaf vector divided by its sum (numpy's pairwise sum; a zero sum
//    counts as 1), added in float64 in tree order and divided by the number of
//    trees. The normalised vectors are computed here exactly as numpy does, so
//    the predictor's kMean aggregation reproduces sklearn's bits.
//  - Regressor forests average value[leaf] the same way.
//  - GradientBoosting: raw = init + sum over stages of learning_rate *
//    value[leaf], in float64, stage by stage (predict_stages). Leaves store the
//    product learning_rate * value, the same double sklearn adds. Then expit,
//    written as sklearn's two columns [1 - p, p] (binary), softmax
//    (multiclass) or nothing (regression).
//  - IsolationForest (ensemble/_iforest.py): score_samples sums, tree by
//    tree in float64, `path nodes + c(n_node_samples[leaf]) - 1.0`, which
//    depends on the leaf only, so it is the leaf's value (IsolationLeafValues);
//    Postprocess::kIsolationScore turns the sum into -2 ** (-sum / d).
//  - Missing values: scikit-learn < 1.3 rejects NaN at predict time; from 1.3
//    NaN follows missing_go_to_left, which the exporter writes when the tree
//    has it. Otherwise we apply the rule scikit-learn >= 1.3 stores for a split
//    that saw no missing values in training (sklearn/tree/_splitter.pyx:
//    `missing_go_to_left = n_left > n_right`): NaN goes to the child with more
//    training samples (n_node_samples), and to the right on a tie.
//  - HistGradientBoosting (ensemble/_hist_gradient_boosting/): float64
//    inputs and thresholds, NaN to missing_go_to_left, categorical splits as
//    CategoryRule::kSklearn; raw = baseline + sum of leaf values (shrinkage
//    already applied) in float64, iteration order; then the loss's inverse
//    link. See ImportHistTree and docs/sklearn-export.md.
#include <cmath>
#include <cstring>
#include <limits>

#include "model/array_import.h"
#include "model/import.h"
#include "model/json_reader.h"

namespace pacset {
namespace {

constexpr int64_t kFormatVersion = 1;

enum class EstimatorKind { kForest, kBoosting, kHistBoosting, kIsolation };

struct EstimatorInfo {
  const char* name;
  EstimatorKind kind;
  bool classifier;
};

constexpr EstimatorInfo kEstimators[] = {
    {"RandomForestClassifier", EstimatorKind::kForest, true},
    {"ExtraTreesClassifier", EstimatorKind::kForest, true},
    {"DecisionTreeClassifier", EstimatorKind::kForest, true},
    {"ExtraTreeClassifier", EstimatorKind::kForest, true},
    {"RandomForestRegressor", EstimatorKind::kForest, false},
    {"ExtraTreesRegressor", EstimatorKind::kForest, false},
    {"DecisionTreeRegressor", EstimatorKind::kForest, false},
    {"ExtraTreeRegressor", EstimatorKind::kForest, false},
    {"GradientBoostingClassifier", EstimatorKind::kBoosting, true},
    {"GradientBoostingRegressor", EstimatorKind::kBoosting, false},
    {"HistGradientBoostingClassifier", EstimatorKind::kHistBoosting, true},
    {"HistGradientBoostingRegressor", EstimatorKind::kHistBoosting, false},
    {"IsolationForest", EstimatorKind::kIsolation, false},
};

// Words per category bitset in scikit-learn's HistGradientBoosting
// (common.pxd BITSET_DTYPE_C, uint32[8]: categories 0..255).
constexpr uint32_t kHistBitsetWords = 8;

// The "task" the exporter writes for an estimator.
const char* SklearnTaskName(const EstimatorInfo& info, int64_t num_classes) {
  if (info.kind == EstimatorKind::kIsolation) return "outlier_detection";
  if (!info.classifier) return TaskName(Task::kRegression);
  return TaskName(num_classes == 2 ? Task::kBinaryClassification : Task::kMulticlassClassification);
}

const EstimatorInfo* LookupEstimator(const std::string& name) {
  for (const auto& e : kEstimators)
    if (name == e.name) return &e;
  return nullptr;
}

std::string SupportedEstimators() {
  std::string s;
  for (const auto& e : kEstimators) s += (s.empty() ? "" : ", ") + std::string(e.name);
  return s;
}

// numpy's pairwise summation (numpy/core/src/umath/loops_utils.h.src,
// pairwise_sum), which `proba.sum(axis=1)` applies to each row, starting from
// the identity 0.0. Reproduced so normalised leaves match numpy bit for bit.
double NumpyPairwiseSum(const double* a, size_t n) {
  if (n < 8) {
    double res = 0.0;
    for (size_t i = 0; i < n; ++i) res += a[i];
    return res;
  }
  if (n <= 128) {
    double r[8];
    for (int j = 0; j < 8; ++j) r[j] = a[j];
    size_t i = 8;
    for (; i < n - (n % 8); i += 8)
      for (int j = 0; j < 8; ++j) r[j] += a[i + j];
    double res = ((r[0] + r[1]) + (r[2] + r[3])) + ((r[4] + r[5]) + (r[6] + r[7]));
    for (; i < n; ++i) res += a[i];
    return res;
  }
  size_t n2 = n / 2;
  n2 -= n2 % 8;
  return NumpyPairwiseSum(a, n2) + NumpyPairwiseSum(a + n2, n - n2);
}

// "FILE: FIELD: what", the form JsonReader uses, so both paths name fields alike.
Status FieldError(const std::string& name, const std::string& field, const std::string& what,
                  StatusCode code = StatusCode::kInvalidArgument) {
  return Status(code, name + ": " + field + ": " + what);
}

std::string TreeField(size_t t, const char* field) {
  return "trees/" + std::to_string(t) + "/" + field;
}

struct GradientBoostingLoss {
  Postprocess post;
  double sigmoid_alpha;
};

// The link from raw predictions to sklearn's predict / predict_proba.
StatusOr<GradientBoostingLoss> LookupLoss(const std::string& loss, bool classifier,
                                          uint32_t num_outputs, const std::string& name) {
  if (classifier) {
    if (loss == "log_loss" || loss == "deviance")
      return GradientBoostingLoss{
          num_outputs == 1 ? Postprocess::kSigmoidPair : Postprocess::kSoftmax, 1.0};
    // ExponentialLoss._raw_prediction_to_proba: expit(2.0 * raw), binary only.
    if (loss == "exponential" && num_outputs == 1)
      return GradientBoostingLoss{Postprocess::kSigmoidPair, 2.0};
  } else {
    for (const char* l : {"squared_error", "ls", "absolute_error", "lad", "huber", "quantile"})
      if (loss == l) return GradientBoostingLoss{Postprocess::kIdentity, 1.0};
  }
  return FieldError(name, "loss",
                    "loss '" + loss + "' is not supported for a " +
                        (classifier ? "classifier (supported: log_loss, deviance, "
                                      "exponential for two classes)"
                                    : "regressor (supported: squared_error, "
                                      "absolute_error, huber, quantile)") +
                        "; retrain with one of those",
                    StatusCode::kNotSupported);
}

// HistGradientBoosting's loss -> its inverse link (_loss/link.py): binary
// log-loss expit (two columns [1 - p, p], HalfBinomialLoss.predict_proba),
// multiclass softmax (utils/extmath.py softmax: max subtracted, exp, summed in
// class order, divided), poisson exp, the others identity.
StatusOr<GradientBoostingLoss> LookupHistLoss(const std::string& loss, bool classifier,
                                              uint32_t num_outputs, const std::string& name) {
  if (classifier) {
    const bool binary = num_outputs == 1;
    if (loss == "log_loss" || loss == "auto" ||
        loss == (binary ? "binary_crossentropy" : "categorical_crossentropy"))
      return GradientBoostingLoss{binary ? Postprocess::kSigmoidPair : Postprocess::kSoftmax, 1.0};
  } else {
    for (const char* l : {"squared_error", "absolute_error", "quantile", "least_squares",
                          "least_absolute_deviation"})
      if (loss == l) return GradientBoostingLoss{Postprocess::kIdentity, 1.0};
    if (loss == "poisson") return GradientBoostingLoss{Postprocess::kExponential, 1.0};
  }
  return FieldError(name, "loss",
                    "loss '" + loss.substr(0, 80) + "' is not supported for a " +
                        (classifier ? "HistGradientBoostingClassifier (supported: log_loss)"
                                    : "HistGradientBoostingRegressor (supported: squared_error, "
                                      "absolute_error, quantile, poisson)") +
                        "; refit with a supported loss or predict with scikit-learn",
                    StatusCode::kNotSupported);
}

// Scratch arrays of one tree, reused across trees.
struct TreeScratch {
  std::vector<int64_t> left, right, feat, samples, missing_left;
  std::vector<double> th, value;
  std::vector<int64_t> is_leaf, is_categorical, bitset_idx, left_bitsets;
  std::vector<uint32_t> left_set, right_set;

  // The arrays every kind of tree has (their lengths and types checked).
  void LoadNodeArrays(const SklearnTreeArrays& tree) {
    tree.children_left.CopyTo(&left);
    tree.children_right.CopyTo(&right);
    tree.feature.CopyTo(&feat);
    tree.threshold.CopyTo(&th);
    tree.value.CopyTo(&value);
    tree.n_node_samples.CopyTo(&samples);
  }
};

Status CheckLength(const ArrayView& a, size_t expected, const std::string& name,
                   const std::string& field) {
  if (a.size != expected)
    return FieldError(
        name, field,
        "expected " + std::to_string(expected) + " values, found " + std::to_string(a.size));
  return Status::Ok();
}

// Appends tree `t` to `f`. `value_width` values per node; `leaf_scale`
// multiplies leaf values (the learning rate, or 1).
Status ImportTree(const SklearnTreeArrays& tree, size_t t, uint32_t value_width, bool normalise,
                  double leaf_scale, const std::string& name, TreeScratch& s, Forest& f) {
  const size_t n = tree.children_left.size;
  if (n == 0)
    return FieldError(name, TreeField(t, "children_left"), "a tree needs at least one node");
  if (n > static_cast<size_t>(INT32_MAX))
    return FieldError(name, TreeField(t, "children_left"), "tree too large");
  PACSET_RETURN_IF_ERROR(CheckLength(tree.children_right, n, name, TreeField(t, "children_right")));
  PACSET_RETURN_IF_ERROR(CheckLength(tree.feature, n, name, TreeField(t, "feature")));
  PACSET_RETURN_IF_ERROR(CheckLength(tree.threshold, n, name, TreeField(t, "threshold")));
  PACSET_RETURN_IF_ERROR(CheckLength(tree.value, n * value_width, name, TreeField(t, "value")));
  PACSET_RETURN_IF_ERROR(CheckLength(tree.n_node_samples, n, name, TreeField(t, "n_node_samples")));
  const bool has_missing_left = !tree.missing_go_to_left.empty();
  if (has_missing_left)
    PACSET_RETURN_IF_ERROR(
        CheckLength(tree.missing_go_to_left, n, name, TreeField(t, "missing_go_to_left")));
  for (const ArrayView* a : {&tree.children_left, &tree.children_right, &tree.feature,
                             &tree.n_node_samples, &tree.missing_go_to_left})
    if (!a->empty() && !a->is_integer())
      return FieldError(name, TreeField(t, "children_left"),
                        std::string("integer arrays expected, found ") + ElementTypeName(a->type));
  s.LoadNodeArrays(tree);
  if (has_missing_left) tree.missing_go_to_left.CopyTo(&s.missing_left);

  const uint64_t base = f.AddTree(tree.output, static_cast<uint32_t>(n));
  const std::string where = "node ";
  for (size_t i = 0; i < n; ++i) {
    const uint64_t g = base + i;
    if (s.samples[i] < 0)
      return FieldError(name, TreeField(t, "n_node_samples"),
                        where + std::to_string(i) + " has a negative sample count");
    f.cardinality[g] = static_cast<double>(s.samples[i]);
    const int64_t l = s.left[i], r = s.right[i];
    if (l == -1 || r == -1) {
      if (l != r)
        return FieldError(name, TreeField(t, "children_left"),
                          where + std::to_string(i) + " has only one child");
      const double* v = s.value.data() + i * value_width;
      double* out = f.leaf_value.data() + g * f.leaf_width;
      for (uint32_t k = 0; k < value_width; ++k)
        if (std::isnan(v[k]))
          return FieldError(name, TreeField(t, "value"),
                            where + std::to_string(i) + " has a NaN leaf value");
      if (normalise) {
        // DecisionTreeClassifier.predict_proba: proba / proba.sum(axis=1),
        // with a zero sum replaced by 1.
        double sum = NumpyPairwiseSum(v, value_width);
        if (sum == 0.0) sum = 1.0;
        for (uint32_t k = 0; k < value_width; ++k) out[k] = v[k] / sum;
      } else {
        for (uint32_t k = 0; k < value_width; ++k) out[k] = leaf_scale * v[k];
      }
      continue;
    }
    for (const int64_t child : {l, r}) {
      if (child <= static_cast<int64_t>(i) || child >= static_cast<int64_t>(n))
        return FieldError(name, TreeField(t, child == l ? "children_left" : "children_right"),
                          where + std::to_string(i) + " has child " + std::to_string(child) +
                              " outside " + std::to_string(i + 1) + ".." + std::to_string(n - 1));
    }
    if (s.feat[i] < 0 || s.feat[i] >= static_cast<int64_t>(f.num_features))
      return FieldError(name, TreeField(t, "feature"),
                        where + std::to_string(i) + " splits on feature " +
                            std::to_string(s.feat[i]) + " but n_features is " +
                            std::to_string(f.num_features));
    if (std::isnan(s.th[i]))
      return FieldError(name, TreeField(t, "threshold"),
                        where + std::to_string(i) + " has a NaN threshold");
    f.left_child[g] = static_cast<int32_t>(l);
    f.right_child[g] = static_cast<int32_t>(r);
    f.split_feature[g] = static_cast<uint32_t>(s.feat[i]);
    // float32 x <= t (in double)  <=>  x <= the largest float32 <= t.
    f.threshold[g] = Float32AtOrBelow(s.th[i]);
    const bool nan_left = has_missing_left ? s.missing_left[i] != 0 : s.samples[l] > s.samples[r];
    f.flags[g] = nan_left ? kDefaultLeft : 0;
  }
  return Status::Ok();
}

// The known categories of a HistGradientBoosting's categorical features.
struct HistCategories {
  uint32_t words = 0;                // per bitset
  std::vector<int64_t> feature_row;  // per feature: its row of known, or -1
  const uint32_t* known = nullptr;   // words per categorical feature
};

StatusOr<HistCategories> ReadHistCategories(const SklearnEstimatorArrays& est,
                                            const std::string& name) {
  HistCategories c;
  c.words = est.bitset_words;
  if (c.words != kHistBitsetWords)
    return FieldError(
        name, "bitset_words",
        "expected " + std::to_string(kHistBitsetWords) + ", found " + std::to_string(c.words));
  c.feature_row.assign(static_cast<size_t>(est.n_features), -1);
  for (size_t i = 0; i < est.categorical_features.size(); ++i) {
    const int64_t feature = est.categorical_features[i];
    if (feature < 0 || feature >= est.n_features || c.feature_row[feature] >= 0)
      return FieldError(name, "categorical_features",
                        "feature " + std::to_string(feature) +
                            " is out of range or listed twice (n_features is " +
                            std::to_string(est.n_features) + ")");
    c.feature_row[feature] = static_cast<int64_t>(i);
  }
  if (est.known_category_bitsets.size() != est.categorical_features.size() * c.words)
    return FieldError(name, "known_category_bitsets",
                      "expected " + std::to_string(est.categorical_features.size() * c.words) +
                          " words (" + std::to_string(c.words) +
                          " per categorical feature), found " +
                          std::to_string(est.known_category_bitsets.size()));
  c.known = est.known_category_bitsets.data();
  return c;
}

// The categories set in `n` bitset words.
void BitsetMembers(const int64_t* words, const uint32_t* known, uint32_t n, bool minus,
                   std::vector<uint32_t>& out) {
  out.clear();
  for (uint32_t w = 0; w < n; ++w) {
    uint32_t bits = static_cast<uint32_t>(words[w]);
    if (known != nullptr) bits = known[w] & (minus ? ~bits : bits);
    for (uint32_t b = 0; b < 32; ++b)
      if ((bits >> b) & 1u) out.push_back(w * 32 + b);
  }
}

// Appends HistGradientBoosting tree `t` to `f` (predictor.py, _predictor.pyx
// _predict_one_from_raw_data), in float64: a leaf (is_leaf) adds `value`, in
// which the learning rate is already applied; a numerical node sends x left
// iff x <= threshold (float64, +inf included) and NaN to missing_go_to_left;
// a categorical node sends NaN and x < 0 the missing direction, a category in
// its row of left_cat_bitsets left, else a known category of the feature
// right, else (unknown) the missing direction: CategoryRule::kSklearn with
// OutsideDirection::kDefault and the right set = known minus left.
// (sklearn casts x to uint8 before the lookup, so there x >= 256 wraps; here
// it is an unknown category: docs/sklearn-export.md.)
Status ImportHistTree(const SklearnTreeArrays& tree, size_t t, const HistCategories& cats,
                      const std::string& name, TreeScratch& s, Forest& f) {
  const size_t n = tree.children_left.size;
  if (n == 0)
    return FieldError(name, TreeField(t, "children_left"), "a tree needs at least one node");
  if (n > static_cast<size_t>(INT32_MAX))
    return FieldError(name, TreeField(t, "children_left"), "tree too large");
  const std::pair<const ArrayView*, const char*> fields[] = {
      {&tree.children_right, "children_right"},
      {&tree.feature, "feature"},
      {&tree.threshold, "threshold"},
      {&tree.value, "value"},
      {&tree.n_node_samples, "n_node_samples"},
      {&tree.missing_go_to_left, "missing_go_to_left"},
      {&tree.is_leaf, "is_leaf"},
      {&tree.is_categorical, "is_categorical"},
      {&tree.bitset_idx, "bitset_idx"}};
  for (const auto& [a, field] : fields)
    PACSET_RETURN_IF_ERROR(CheckLength(*a, n, name, TreeField(t, field)));
  for (const auto& [a, field] : fields)
    if (a != &tree.threshold && a != &tree.value && !a->is_integer())
      return FieldError(
          name, TreeField(t, field),
          std::string("an integer array expected, found ") + ElementTypeName(a->type));
  if (!tree.children_left.is_integer() ||
      (!tree.left_cat_bitsets.empty() && !tree.left_cat_bitsets.is_integer()))
    return FieldError(name, TreeField(t, "children_left"), "integer arrays expected");
  if (tree.left_cat_bitsets.size % cats.words != 0)
    return FieldError(name, TreeField(t, "left_cat_bitsets"),
                      std::to_string(tree.left_cat_bitsets.size) + " words is not a multiple of " +
                          std::to_string(cats.words));
  const size_t num_bitsets = tree.left_cat_bitsets.size / cats.words;
  s.LoadNodeArrays(tree);
  tree.missing_go_to_left.CopyTo(&s.missing_left);
  tree.is_leaf.CopyTo(&s.is_leaf);
  tree.is_categorical.CopyTo(&s.is_categorical);
  tree.bitset_idx.CopyTo(&s.bitset_idx);
  tree.left_cat_bitsets.CopyTo(&s.left_bitsets);

  const uint64_t base = f.AddTree(tree.output, static_cast<uint32_t>(n));
  for (size_t i = 0; i < n; ++i) {
    const uint64_t g = base + i;
    const std::string node = "node " + std::to_string(i);
    if (s.samples[i] < 0)
      return FieldError(name, TreeField(t, "n_node_samples"), node + " has a negative count");
    f.cardinality[g] = static_cast<double>(s.samples[i]);
    if (s.is_leaf[i] != 0) {
      if (std::isnan(s.value[i]))
        return FieldError(name, TreeField(t, "value"), node + " has a NaN leaf value");
      f.leaf_value[g] = s.value[i];
      continue;
    }
    const int64_t l = s.left[i], r = s.right[i];
    for (const int64_t child : {l, r})
      if (child <= static_cast<int64_t>(i) || child >= static_cast<int64_t>(n))
        return FieldError(name, TreeField(t, child == l ? "children_left" : "children_right"),
                          node + " has child " + std::to_string(child) + " outside " +
                              std::to_string(i + 1) + ".." + std::to_string(n - 1));
    if (s.feat[i] < 0 || s.feat[i] >= static_cast<int64_t>(f.num_features))
      return FieldError(name, TreeField(t, "feature"),
                        node + " splits on feature " + std::to_string(s.feat[i]) +
                            " but n_features is " + std::to_string(f.num_features));
    f.left_child[g] = static_cast<int32_t>(l);
    f.right_child[g] = static_cast<int32_t>(r);
    f.split_feature[g] = static_cast<uint32_t>(s.feat[i]);
    const uint8_t missing_left = s.missing_left[i] != 0 ? kDefaultLeft : 0;
    if (s.is_categorical[i] == 0) {
      if (std::isnan(s.th[i]))
        return FieldError(name, TreeField(t, "threshold"), node + " has a NaN threshold");
      f.threshold[g] = s.th[i];
      f.flags[g] = missing_left;
      continue;
    }
    const int64_t row = cats.feature_row[static_cast<size_t>(s.feat[i])];
    if (row < 0)
      return FieldError(name, TreeField(t, "is_categorical"),
                        node + " is a categorical split on feature " + std::to_string(s.feat[i]) +
                            ", which is not in categorical_features");
    const int64_t b = s.bitset_idx[i];
    if (b < 0 || static_cast<size_t>(b) >= num_bitsets)
      return FieldError(name, TreeField(t, "bitset_idx"),
                        node + " uses bitset " + std::to_string(b) + " but the tree has " +
                            std::to_string(num_bitsets));
    const int64_t* left_words = s.left_bitsets.data() + b * cats.words;
    for (uint32_t w = 0; w < cats.words; ++w)
      if (left_words[w] < 0 || left_words[w] > UINT32_MAX)
        return FieldError(name, TreeField(t, "left_cat_bitsets"),
                          "word " + std::to_string(b * cats.words + w) + " is not a uint32");
    BitsetMembers(left_words, nullptr, cats.words, false, s.left_set);
    BitsetMembers(left_words, cats.known + row * cats.words, cats.words, true, s.right_set);
    f.threshold[g] = AddCategoricalSplit(f, s.left_set, s.right_set, CategoryRule::kSklearn);
    f.flags[g] =
        kCategorical | missing_left |
        static_cast<uint8_t>(static_cast<uint8_t>(OutsideDirection::kDefault) << kOutsideShift);
  }
  return Status::Ok();
}

// ---- the exported JSON (and its binary stream) -> SklearnEstimatorArrays ----

// The raw bytes after the JSON document of a binary stream; empty for JSON.
struct Blob {
  std::string_view bytes;
};

// Owned arrays of a JSON document; the views in SklearnEstimatorArrays point here.
struct JsonArrays {
  std::vector<std::vector<int64_t>> ints;
  std::vector<std::vector<double>> doubles;
};

// An array member: a JSON list, {"dtype", "base64"}, or in a binary stream
// {"dtype", "blob": [offset, count]} viewed in place.
StatusOr<ArrayView> ReadArray(const JsonReader& parent, const std::string& key, bool integer,
                              int64_t expected, const Blob& blob, JsonArrays& store) {
  PACSET_ASSIGN_OR_RETURN(auto r, parent.Member(key));
  const nlohmann::json& j = r.json();
  if (j.is_object() && j.contains("blob")) {
    if (blob.bytes.empty()) return r.Error("a blob reference outside a binary stream");
    if (!j.contains("dtype") || !j["dtype"].is_string())
      return r.Error("a blob reference needs a dtype");
    const std::string dtype = j["dtype"].get<std::string>();
    ArrayView a;
    if (dtype == "<i8") {
      a.type = ElementType::kInt64;
    } else if (dtype == "<f8") {
      a.type = ElementType::kFloat64;
    } else if (dtype == "|u1") {
      a.type = ElementType::kUint8;
    } else {
      return r.Error("dtype " + dtype + " is not <i8, <f8 or |u1");
    }
    if (a.is_integer() != integer)
      return r.Error(std::string(integer ? "an integer" : "a float") + " array is expected");
    PACSET_ASSIGN_OR_RETURN(auto where, r.Member("blob"));
    PACSET_ASSIGN_OR_RETURN(auto pos, where.Integers(2));
    const uint64_t size = ElementSize(a.type);
    if (pos[0] < 0 || pos[1] < 0 || static_cast<uint64_t>(pos[1]) > blob.bytes.size() / size ||
        static_cast<uint64_t>(pos[0]) > blob.bytes.size() - static_cast<uint64_t>(pos[1]) * size)
      return r.Error("the blob reference lies outside the stream's " +
                     std::to_string(blob.bytes.size()) + " bytes of arrays");
    if (expected >= 0 && pos[1] != expected)
      return r.Error("expected " + std::to_string(expected) + " values, found " +
                     std::to_string(pos[1]));
    a.data = blob.bytes.data() + pos[0];
    a.size = static_cast<size_t>(pos[1]);
    a.stride = static_cast<ptrdiff_t>(size);
    return a;
  }
  if (integer) {
    PACSET_ASSIGN_OR_RETURN(auto v, r.Integers(expected));
    store.ints.push_back(std::move(v));
    return ArrayView::Of(store.ints.back());
  }
  PACSET_ASSIGN_OR_RETURN(auto v, r.Doubles(expected));
  store.doubles.push_back(std::move(v));
  return ArrayView::Of(store.doubles.back());
}

// The HistGradientBoosting members: bitset_words, categorical_features,
// known_category_bitsets (uint32 words).
Status ReadHistMembers(const JsonReader& root, SklearnEstimatorArrays& est) {
  PACSET_ASSIGN_OR_RETURN(auto words_r, root.Member("bitset_words"));
  PACSET_ASSIGN_OR_RETURN(int64_t words, words_r.Integer());
  if (words != kHistBitsetWords)
    return words_r.Error("expected " + std::to_string(kHistBitsetWords) + ", found " +
                         std::to_string(words));
  est.bitset_words = kHistBitsetWords;
  PACSET_ASSIGN_OR_RETURN(auto features_r, root.Member("categorical_features"));
  PACSET_ASSIGN_OR_RETURN(est.categorical_features, features_r.Integers(-1));
  PACSET_ASSIGN_OR_RETURN(auto known_r, root.Member("known_category_bitsets"));
  PACSET_ASSIGN_OR_RETURN(std::vector<int64_t> known, known_r.Integers(-1));
  for (int64_t w : known)
    if (w < 0 || w > UINT32_MAX)
      return known_r.Error("a word is not a uint32: " + std::to_string(w));
  est.known_category_bitsets.assign(known.begin(), known.end());
  return Status::Ok();
}

StatusOr<Forest> ImportSklearnDocument(const nlohmann::json& doc, const std::string& file,
                                       const Blob& blob) {
  JsonReader root(doc, file);
  if (!doc.is_object()) return root.Error("expected a JSON object");
  PACSET_ASSIGN_OR_RETURN(auto format_r, root.Member("format"));
  PACSET_ASSIGN_OR_RETURN(std::string format, format_r.String());
  if (format != "pacset-sklearn")
    return format_r.Error("expected \"pacset-sklearn\", found \"" + format.substr(0, 40) + "\"");
  PACSET_ASSIGN_OR_RETURN(auto version_r, root.Member("format_version"));
  PACSET_ASSIGN_OR_RETURN(int64_t version, version_r.Integer());
  if (version != kFormatVersion)
    return Status::NotSupported(
        version_r
            .Error("version " + std::to_string(version) + " is not supported (this pacset reads " +
                   std::to_string(kFormatVersion) + "; re-export with its pacset-sklearn-export)")
            .message());

  SklearnEstimatorArrays est;
  PACSET_ASSIGN_OR_RETURN(auto sk_version_r, root.Member("sklearn_version"));
  PACSET_ASSIGN_OR_RETURN(est.sklearn_version, sk_version_r.String());
  PACSET_ASSIGN_OR_RETURN(auto estimator_r, root.Member("estimator"));
  PACSET_ASSIGN_OR_RETURN(est.estimator, estimator_r.String());
  const EstimatorInfo* info = LookupEstimator(est.estimator);
  if (info == nullptr)
    return Status::NotSupported(
        estimator_r
            .Error("estimator '" + est.estimator.substr(0, 80) +
                   "' is not supported (supported: " + SupportedEstimators() + ")")
            .message());
  const bool hist = info->kind == EstimatorKind::kHistBoosting;
  const bool boosting = info->kind == EstimatorKind::kBoosting || hist;
  PACSET_ASSIGN_OR_RETURN(auto features_r, root.Member("n_features"));
  PACSET_ASSIGN_OR_RETURN(est.n_features, features_r.Integer());
  PACSET_ASSIGN_OR_RETURN(auto classes_n_r, root.Member("n_classes"));
  PACSET_ASSIGN_OR_RETURN(est.n_classes, classes_n_r.Integer());
  const int64_t num_classes = est.n_classes;
  if (info->classifier ? (num_classes < 2 || num_classes > 100000) : num_classes != 1)
    return classes_n_r.Error(info->classifier ? "a classifier needs 2 to 100000 classes"
                                              : "a regressor has n_classes 1");

  // Members that only restate what the estimator implies: checked for consistency.
  PACSET_ASSIGN_OR_RETURN(auto classes_r, root.Member("classes"));
  PACSET_ASSIGN_OR_RETURN(size_t classes_size, classes_r.ArraySize());
  if (classes_size != static_cast<size_t>(info->classifier ? num_classes : 0))
    return classes_r.Error("expected " + std::to_string(info->classifier ? num_classes : 0) +
                           " class labels, found " + std::to_string(classes_size));
  PACSET_ASSIGN_OR_RETURN(auto task_r, root.Member("task"));
  PACSET_ASSIGN_OR_RETURN(std::string task, task_r.String());
  const std::string expected_task = SklearnTaskName(*info, num_classes);
  if (task != expected_task)
    return task_r.Error("expected \"" + expected_task + "\" for a " + est.estimator +
                        " with n_classes " + std::to_string(num_classes) + ", found \"" +
                        task.substr(0, 40) + "\"");
  PACSET_ASSIGN_OR_RETURN(auto aggregation_r, root.Member("aggregation"));
  PACSET_ASSIGN_OR_RETURN(std::string aggregation, aggregation_r.String());
  const bool isolation = info->kind == EstimatorKind::kIsolation;
  const Aggregation expected_aggregation =
      boosting || isolation ? Aggregation::kSum : Aggregation::kMean;
  if (aggregation != AggregationName(expected_aggregation))
    return aggregation_r.Error("expected \"" + std::string(AggregationName(expected_aggregation)) +
                               "\" for a " + est.estimator + ", found \"" +
                               aggregation.substr(0, 40) + "\"");

  uint32_t num_outputs = 1, value_width = 1;
  if (boosting) {
    num_outputs = num_classes > 2 ? static_cast<uint32_t>(num_classes) : 1;
    PACSET_ASSIGN_OR_RETURN(auto outputs_r, root.Member("n_outputs"));
    PACSET_ASSIGN_OR_RETURN(int64_t outputs, outputs_r.Integer());
    if (outputs != num_outputs)
      return outputs_r.Error("expected " + std::to_string(num_outputs) + " for " + task +
                             ", found " + std::to_string(outputs));
    PACSET_ASSIGN_OR_RETURN(auto loss_r, root.Member("loss"));
    PACSET_ASSIGN_OR_RETURN(est.loss, loss_r.String());
    PACSET_ASSIGN_OR_RETURN(auto lr_r, root.Member("learning_rate"));
    PACSET_ASSIGN_OR_RETURN(est.learning_rate, lr_r.Number());
    PACSET_ASSIGN_OR_RETURN(auto init_r, root.Member("init_raw_prediction"));
    PACSET_ASSIGN_OR_RETURN(est.init_raw_prediction, init_r.Doubles(num_outputs));
    if (hist) PACSET_RETURN_IF_ERROR(ReadHistMembers(root, est));
  } else if (info->classifier) {
    value_width = static_cast<uint32_t>(num_classes);
  } else if (isolation) {
    PACSET_ASSIGN_OR_RETURN(auto denominator_r, root.Member("score_denominator"));
    PACSET_ASSIGN_OR_RETURN(est.score_denominator, denominator_r.Number());
    PACSET_ASSIGN_OR_RETURN(auto offset_r, root.Member("offset"));
    PACSET_ASSIGN_OR_RETURN(est.offset, offset_r.Number());
  }

  PACSET_ASSIGN_OR_RETURN(auto trees, root.Member("trees"));
  PACSET_ASSIGN_OR_RETURN(size_t num_trees, trees.ArraySize());
  if (num_trees == 0) return trees.Error("the model has no trees");
  if (root.Has("n_trees")) {
    PACSET_ASSIGN_OR_RETURN(auto nt_r, root.Member("n_trees"));
    PACSET_ASSIGN_OR_RETURN(int64_t nt, nt_r.Integer());
    if (nt != static_cast<int64_t>(num_trees))
      return nt_r.Error("n_trees is " + std::to_string(nt) + " but trees has " +
                        std::to_string(num_trees) + " entries");
  }
  JsonArrays store;
  est.trees.resize(num_trees);
  for (size_t t = 0; t < num_trees; ++t) {
    PACSET_ASSIGN_OR_RETURN(auto tree, trees.Element(t));
    if (!tree.json().is_object()) return tree.Error("expected an object");
    SklearnTreeArrays& a = est.trees[t];
    if (boosting) {
      PACSET_ASSIGN_OR_RETURN(auto output_r, tree.Member("output"));
      PACSET_ASSIGN_OR_RETURN(int64_t output, output_r.Integer());
      if (output < 0 || output >= static_cast<int64_t>(num_outputs))
        return output_r.Error("tree " + std::to_string(t) + " feeds output " +
                              std::to_string(output) + " but the model has " +
                              std::to_string(num_outputs));
      a.output = static_cast<uint32_t>(output);
    }
    PACSET_ASSIGN_OR_RETURN(a.children_left,
                            ReadArray(tree, "children_left", true, -1, blob, store));
    const int64_t n = static_cast<int64_t>(a.children_left.size);
    PACSET_ASSIGN_OR_RETURN(a.children_right,
                            ReadArray(tree, "children_right", true, n, blob, store));
    PACSET_ASSIGN_OR_RETURN(a.feature, ReadArray(tree, "feature", true, n, blob, store));
    PACSET_ASSIGN_OR_RETURN(a.threshold, ReadArray(tree, "threshold", false, n, blob, store));
    PACSET_ASSIGN_OR_RETURN(a.value, ReadArray(tree, "value", false, n * value_width, blob, store));
    PACSET_ASSIGN_OR_RETURN(a.n_node_samples,
                            ReadArray(tree, "n_node_samples", true, n, blob, store));
    if (hist || tree.Has("missing_go_to_left")) {
      PACSET_ASSIGN_OR_RETURN(a.missing_go_to_left,
                              ReadArray(tree, "missing_go_to_left", true, n, blob, store));
    }
    if (hist) {
      PACSET_ASSIGN_OR_RETURN(a.is_leaf, ReadArray(tree, "is_leaf", true, n, blob, store));
      PACSET_ASSIGN_OR_RETURN(a.is_categorical,
                              ReadArray(tree, "is_categorical", true, n, blob, store));
      PACSET_ASSIGN_OR_RETURN(a.bitset_idx, ReadArray(tree, "bitset_idx", true, n, blob, store));
      PACSET_ASSIGN_OR_RETURN(a.left_cat_bitsets,
                              ReadArray(tree, "left_cat_bitsets", true, -1, blob, store));
    }
  }
  auto forest = ImportSklearnArrays(est, file);
  if (forest.ok()) forest->source.format = "sklearn-json";
  return forest;
}

// IsolationForest._compute_score_samples adds, per tree,
// `node_indicator.sum(axis=1) + _average_path_length(n_samples_leaf) - 1.0`:
// the number of nodes on the row's path (an integer, exact in float64) plus
// the leaf's c(n), minus 1, in that order. ImportTree left c(n) (the tree's
// value array) in each leaf; this makes it the whole addend. Children come
// after their parent (ImportTree checked), so one pass finds the depths.
void IsolationLeafValues(Forest& f, size_t t, std::vector<int64_t>& path_nodes) {
  const uint64_t base = f.tree_offset[t];
  const size_t n = f.tree_size(t);
  path_nodes.assign(n, 0);
  path_nodes[0] = 1;
  for (size_t i = 0; i < n; ++i) {
    const uint64_t g = base + i;
    if (f.is_leaf(g)) {
      f.leaf_value[g] = (static_cast<double>(path_nodes[i]) + f.leaf_value[g]) - 1.0;
    } else {
      path_nodes[f.left_child[g]] = path_nodes[i] + 1;
      path_nodes[f.right_child[g]] = path_nodes[i] + 1;
    }
  }
}

// IsolationForest: one output, the sum of the trees' path lengths, turned
// into score_samples by Postprocess::kIsolationScore.
StatusOr<Forest> ImportIsolationForest(const SklearnEstimatorArrays& est, const std::string& name) {
  if (est.n_features <= 0 || est.n_features > (1 << 30))
    return FieldError(name, "n_features", "n_features must be between 1 and 2^30");
  if (est.n_classes != 1)
    return FieldError(name, "n_classes", "an IsolationForest has n_classes 1");
  if (!std::isfinite(est.score_denominator) || est.score_denominator < 0)
    return FieldError(name, "score_denominator", "must be finite and at least 0");
  if (!std::isfinite(est.offset)) return FieldError(name, "offset", "offset_ must be finite");
  if (est.trees.empty()) return FieldError(name, "trees", "the model has no trees");
  Forest f;
  f.source.format = "sklearn";
  f.source.library_version = "scikit-learn " + est.sklearn_version;
  f.source.objective = est.estimator;
  f.task = Task::kRegression;  // one continuous score per row
  f.aggregation = Aggregation::kSum;
  f.num_features = static_cast<uint32_t>(est.n_features);
  f.input_precision = Precision::kFloat32;
  f.accumulate_precision = Precision::kFloat64;
  f.cardinality_source = CardinalitySource::kTraining;
  f.postprocess = Postprocess::kIsolationScore;
  f.isolation_denominator = est.score_denominator;
  f.isolation_offset = est.offset;
  f.base_score.assign(1, 0.0);  // depths = np.zeros(n_samples)
  size_t total_nodes = 0;
  for (const auto& tree : est.trees) total_nodes += tree.children_left.size;
  f.Reserve(est.trees.size(), total_nodes);
  TreeScratch scratch;
  std::vector<int64_t> path_nodes;
  for (size_t t = 0; t < est.trees.size(); ++t) {
    if (est.trees[t].output != 0)
      return FieldError(name, TreeField(t, "output"), "an IsolationForest has one output");
    PACSET_RETURN_IF_ERROR(ImportTree(est.trees[t], t, 1, false, 1.0, name, scratch, f));
    IsolationLeafValues(f, t, path_nodes);
  }
  PACSET_RETURN_IF_ERROR(f.Validate().WithContext(name));
  return f;
}

}  // namespace

StatusOr<Forest> ImportSklearnArrays(const SklearnEstimatorArrays& est, const std::string& name) {
  const EstimatorInfo* info = LookupEstimator(est.estimator);
  if (info == nullptr)
    return FieldError(name, "estimator",
                      "estimator '" + est.estimator.substr(0, 80) +
                          "' is not supported (supported: " + SupportedEstimators() + ")",
                      StatusCode::kNotSupported);
  const bool hist = info->kind == EstimatorKind::kHistBoosting;
  const bool boosting = info->kind == EstimatorKind::kBoosting || hist;
  if (est.n_features <= 0 || est.n_features > (1 << 30))
    return FieldError(name, "n_features", "n_features must be between 1 and 2^30");
  const int64_t num_classes = est.n_classes;
  if (info->classifier ? (num_classes < 2 || num_classes > 100000) : num_classes != 1)
    return FieldError(name, "n_classes",
                      info->classifier ? "a classifier needs 2 to 100000 classes"
                                       : "a regressor has n_classes 1");
  if (info->kind == EstimatorKind::kIsolation) return ImportIsolationForest(est, name);
  Forest f;
  f.source.format = "sklearn";
  f.source.library_version = "scikit-learn " + est.sklearn_version;
  f.source.objective = est.estimator;
  f.task = !info->classifier  ? Task::kRegression
           : num_classes == 2 ? Task::kBinaryClassification
                              : Task::kMulticlassClassification;
  f.aggregation = boosting ? Aggregation::kSum : Aggregation::kMean;
  f.num_features = static_cast<uint32_t>(est.n_features);
  f.num_classes = static_cast<uint32_t>(num_classes);
  // HistGradientBoosting compares float64 X (X_DTYPE); the others float32.
  f.input_precision = hist ? Precision::kFloat64 : Precision::kFloat32;
  f.accumulate_precision = Precision::kFloat64;
  f.cardinality_source = CardinalitySource::kTraining;

  double learning_rate = 1.0;
  uint32_t value_width = 1;
  if (boosting) {
    // One tree per class and stage for multiclass, else one per stage.
    f.num_outputs = num_classes > 2 ? static_cast<uint32_t>(num_classes) : 1;
    f.leaf_width = 1;
    PACSET_ASSIGN_OR_RETURN(GradientBoostingLoss loss,
                            hist ? LookupHistLoss(est.loss, info->classifier, f.num_outputs, name)
                                 : LookupLoss(est.loss, info->classifier, f.num_outputs, name));
    f.postprocess = loss.post;
    f.sigmoid_alpha = loss.sigmoid_alpha;
    if (!std::isfinite(est.learning_rate))
      return FieldError(name, "learning_rate", "learning_rate must be finite");
    // HistGradientBoosting leaves already hold the shrunk value (grower.py
    // _apply_shrinkage); GradientBoosting* leaves are scaled here.
    learning_rate = hist ? 1.0 : est.learning_rate;
    if (est.init_raw_prediction.size() != f.num_outputs)
      return FieldError(name, "init_raw_prediction",
                        "expected " + std::to_string(f.num_outputs) + " values, found " +
                            std::to_string(est.init_raw_prediction.size()));
    f.base_score = est.init_raw_prediction;
    for (double b : f.base_score)
      if (!std::isfinite(b))
        return FieldError(name, "init_raw_prediction", "the initial raw prediction must be finite");
  } else {
    // Classifier leaves are probability vectors over all classes.
    f.num_outputs = info->classifier ? static_cast<uint32_t>(num_classes) : 1;
    f.leaf_width = f.num_outputs;
    value_width = f.num_outputs;
    f.postprocess = Postprocess::kIdentity;
    f.base_score.assign(f.num_outputs, 0.0);
  }
  if (est.trees.empty()) return FieldError(name, "trees", "the model has no trees");
  size_t total_nodes = 0;
  for (const auto& tree : est.trees) total_nodes += tree.children_left.size;
  f.Reserve(est.trees.size(), total_nodes);
  HistCategories cats;
  if (hist) {
    PACSET_ASSIGN_OR_RETURN(cats, ReadHistCategories(est, name));
  }
  TreeScratch scratch;
  for (size_t t = 0; t < est.trees.size(); ++t) {
    const SklearnTreeArrays& tree = est.trees[t];
    if (boosting ? tree.output >= f.num_outputs : tree.output != 0)
      return FieldError(name, TreeField(t, "output"),
                        "tree " + std::to_string(t) + " feeds output " +
                            std::to_string(tree.output) + " but the model has " +
                            std::to_string(f.num_outputs));
    PACSET_RETURN_IF_ERROR(hist ? ImportHistTree(tree, t, cats, name, scratch, f)
                                : ImportTree(tree, t, value_width, info->classifier && !boosting,
                                             learning_rate, name, scratch, f));
  }
  PACSET_RETURN_IF_ERROR(f.Validate().WithContext(name));
  return f;
}

StatusOr<Forest> ImportSklearnJson(std::string_view text, const std::string& name) {
  PACSET_ASSIGN_OR_RETURN(nlohmann::json doc, ParseJsonDocument(text, name));
  return ImportSklearnDocument(doc, name, Blob{});
}

StatusOr<Forest> ImportSklearnStream(std::string_view bytes, const std::string& name) {
  constexpr size_t kPrefix = sizeof(kSklearnStreamMagic) + 8;
  if (bytes.size() < kPrefix ||
      std::memcmp(bytes.data(), kSklearnStreamMagic, sizeof(kSklearnStreamMagic)) != 0)
    return Status::InvalidArgument(name + ": not a pacset-sklearn binary stream");
  uint64_t json_size = 0;
  std::memcpy(&json_size, bytes.data() + sizeof(kSklearnStreamMagic), 8);
  if (json_size > bytes.size() - kPrefix)
    return Status::InvalidArgument(name + ": the stream ends inside its JSON document (" +
                                   std::to_string(bytes.size()) + " bytes)");
  PACSET_ASSIGN_OR_RETURN(nlohmann::json doc,
                          ParseJsonDocument(bytes.substr(kPrefix, json_size), name));
  Blob blob{bytes.substr(kPrefix + json_size)};
  auto forest = ImportSklearnDocument(doc, name, blob);
  if (forest.ok()) forest->source.format = "sklearn-pickle";
  return forest;
}

}  // namespace pacset
