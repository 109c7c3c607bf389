// scikit-learn importer: the JSON written by tools/pacset-sklearn-export
// (format: docs/sklearn-export.md) -> Forest.
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
//  - Missing values: scikit-learn < 1.3 rejects NaN at predict time; from 1.3
//    NaN follows missing_go_to_left, which the exporter writes when the tree
//    has it. Otherwise we apply the rule scikit-learn >= 1.3 stores for a split
//    that saw no missing values in training (sklearn/tree/_splitter.pyx:
//    `missing_go_to_left = n_left > n_right`): NaN goes to the child with more
//    training samples (n_node_samples), and to the right on a tie.
#include <cmath>
#include <limits>

#include "model/import.h"
#include "model/json_reader.h"

namespace pacset {
namespace {

constexpr int64_t kFormatVersion = 1;

enum class EstimatorKind { kForest, kBoosting };

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
};

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

// kNotSupported with the file and JSON path of `r`.
Status NotSupportedAt(const JsonReader& r, const std::string& what) {
  return Status::NotSupported(r.Error(what).message());
}

struct GradientBoostingLoss {
  Postprocess post;
  double sigmoid_alpha;
};

// The link from raw predictions to sklearn's predict / predict_proba.
StatusOr<GradientBoostingLoss> LookupLoss(const std::string& loss, bool classifier,
                                          uint32_t num_outputs, const JsonReader& where) {
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
  return NotSupportedAt(where, "loss '" + loss + "' is not supported for a " +
                                   (classifier ? "classifier (supported: log_loss, deviance, "
                                                 "exponential for two classes)"
                                               : "regressor (supported: squared_error, "
                                                 "absolute_error, huber, quantile)"));
}

// Reads one tree of `trees` into `f`. `value_width` values per node;
// `leaf_scale` multiplies leaf values (the learning rate, or 1).
Status ImportTree(const JsonReader& tree, size_t t, uint32_t group, uint32_t value_width,
                  bool normalise, double leaf_scale, Forest& f) {
  PACSET_ASSIGN_OR_RETURN(auto left_r, tree.Member("children_left"));
  PACSET_ASSIGN_OR_RETURN(auto left, left_r.Integers());
  const int64_t n = static_cast<int64_t>(left.size());
  if (n == 0) return left_r.Error("a tree needs at least one node");
  if (n > INT32_MAX) return left_r.Error("tree too large");
  PACSET_ASSIGN_OR_RETURN(auto right_r, tree.Member("children_right"));
  PACSET_ASSIGN_OR_RETURN(auto right, right_r.Integers(n));
  PACSET_ASSIGN_OR_RETURN(auto feat_r, tree.Member("feature"));
  PACSET_ASSIGN_OR_RETURN(auto feat, feat_r.Integers(n));
  PACSET_ASSIGN_OR_RETURN(auto th_r, tree.Member("threshold"));
  PACSET_ASSIGN_OR_RETURN(auto th, th_r.Doubles(n));
  PACSET_ASSIGN_OR_RETURN(auto value_r, tree.Member("value"));
  PACSET_ASSIGN_OR_RETURN(auto value, value_r.Doubles(n * static_cast<int64_t>(value_width)));
  PACSET_ASSIGN_OR_RETURN(auto samples_r, tree.Member("n_node_samples"));
  PACSET_ASSIGN_OR_RETURN(auto samples, samples_r.Integers(n));
  std::vector<int64_t> missing_left;
  const bool has_missing_left = tree.Has("missing_go_to_left");
  if (has_missing_left) {
    PACSET_ASSIGN_OR_RETURN(auto ml_r, tree.Member("missing_go_to_left"));
    PACSET_ASSIGN_OR_RETURN(missing_left, ml_r.Integers(n));
  }

  const uint64_t base = f.AddTree(group, static_cast<uint32_t>(n));
  const std::string where = "tree " + std::to_string(t) + " node ";
  for (int64_t i = 0; i < n; ++i) {
    const uint64_t g = base + i;
    if (samples[i] < 0)
      return samples_r.Error(where + std::to_string(i) + " has a negative sample count");
    f.cardinality[g] = static_cast<double>(samples[i]);
    if (left[i] == -1 || right[i] == -1) {
      if (left[i] != right[i])
        return left_r.Error(where + std::to_string(i) + " has only one child");
      const double* v = value.data() + i * value_width;
      double* out = f.leaf_value.data() + g * f.leaf_width;
      for (uint32_t k = 0; k < value_width; ++k)
        if (std::isnan(v[k]))
          return value_r.Error(where + std::to_string(i) + " has a NaN leaf value");
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
    for (const auto* c : {&left, &right}) {
      const int64_t child = (*c)[i];
      if (child <= i || child >= n)
        return (c == &left ? left_r : right_r)
            .Error(where + std::to_string(i) + " has child " + std::to_string(child) + " outside " +
                   std::to_string(i + 1) + ".." + std::to_string(n - 1));
    }
    if (feat[i] < 0 || feat[i] >= static_cast<int64_t>(f.num_features))
      return feat_r.Error(where + std::to_string(i) + " splits on feature " +
                          std::to_string(feat[i]) + " but n_features is " +
                          std::to_string(f.num_features));
    if (std::isnan(th[i])) return th_r.Error(where + std::to_string(i) + " has a NaN threshold");
    f.left_child[g] = static_cast<int32_t>(left[i]);
    f.right_child[g] = static_cast<int32_t>(right[i]);
    f.split_feature[g] = static_cast<uint32_t>(feat[i]);
    // float32 x <= t (in double)  <=>  x <= the largest float32 <= t.
    f.threshold[g] = Float32AtOrBelow(th[i]);
    const bool nan_left =
        has_missing_left ? missing_left[i] != 0 : samples[left[i]] > samples[right[i]];
    f.flags[g] = nan_left ? kDefaultLeft : 0;
  }
  return Status::Ok();
}

StatusOr<Forest> ImportSklearnDocument(const nlohmann::json& doc, const std::string& file) {
  JsonReader root(doc, file);
  if (!doc.is_object()) return root.Error("expected a JSON object");
  PACSET_ASSIGN_OR_RETURN(auto format_r, root.Member("format"));
  PACSET_ASSIGN_OR_RETURN(std::string format, format_r.String());
  if (format != "pacset-sklearn")
    return format_r.Error("expected \"pacset-sklearn\", found \"" + format.substr(0, 40) + "\"");
  PACSET_ASSIGN_OR_RETURN(auto version_r, root.Member("format_version"));
  PACSET_ASSIGN_OR_RETURN(int64_t version, version_r.Integer());
  if (version != kFormatVersion)
    return NotSupportedAt(version_r, "version " + std::to_string(version) +
                                         " is not supported (this pacset reads " +
                                         std::to_string(kFormatVersion) +
                                         "; re-export with its pacset-sklearn-export)");

  Forest f;
  f.source.format = "sklearn-json";
  PACSET_ASSIGN_OR_RETURN(auto sk_version_r, root.Member("sklearn_version"));
  PACSET_ASSIGN_OR_RETURN(std::string sk_version, sk_version_r.String());
  f.source.library_version = "scikit-learn " + sk_version;

  PACSET_ASSIGN_OR_RETURN(auto estimator_r, root.Member("estimator"));
  PACSET_ASSIGN_OR_RETURN(std::string estimator, estimator_r.String());
  const EstimatorInfo* info = LookupEstimator(estimator);
  if (info == nullptr)
    return NotSupportedAt(estimator_r,
                          "estimator '" + estimator.substr(0, 80) +
                              "' is not supported (supported: " + SupportedEstimators() + ")");
  f.source.objective = estimator;
  const bool boosting = info->kind == EstimatorKind::kBoosting;

  PACSET_ASSIGN_OR_RETURN(auto features_r, root.Member("n_features"));
  PACSET_ASSIGN_OR_RETURN(int64_t num_features, features_r.Integer());
  if (num_features <= 0 || num_features > (1 << 30))
    return features_r.Error("n_features must be between 1 and 2^30");
  PACSET_ASSIGN_OR_RETURN(auto classes_n_r, root.Member("n_classes"));
  PACSET_ASSIGN_OR_RETURN(int64_t num_classes, classes_n_r.Integer());
  if (info->classifier ? (num_classes < 2 || num_classes > 100000) : num_classes != 1)
    return classes_n_r.Error(info->classifier ? "a classifier needs 2 to 100000 classes"
                                              : "a regressor has n_classes 1");
  PACSET_ASSIGN_OR_RETURN(auto classes_r, root.Member("classes"));
  PACSET_ASSIGN_OR_RETURN(size_t classes_size, classes_r.ArraySize());
  if (classes_size != static_cast<size_t>(info->classifier ? num_classes : 0))
    return classes_r.Error("expected " + std::to_string(info->classifier ? num_classes : 0) +
                           " class labels, found " + std::to_string(classes_size));

  PACSET_ASSIGN_OR_RETURN(auto task_r, root.Member("task"));
  PACSET_ASSIGN_OR_RETURN(std::string task, task_r.String());
  f.task = !info->classifier  ? Task::kRegression
           : num_classes == 2 ? Task::kBinaryClassification
                              : Task::kMulticlassClassification;
  if (task != TaskName(f.task))
    return task_r.Error("expected \"" + std::string(TaskName(f.task)) + "\" for a " + estimator +
                        " with n_classes " + std::to_string(num_classes) + ", found \"" +
                        task.substr(0, 40) + "\"");
  PACSET_ASSIGN_OR_RETURN(auto aggregation_r, root.Member("aggregation"));
  PACSET_ASSIGN_OR_RETURN(std::string aggregation, aggregation_r.String());
  f.aggregation = boosting ? Aggregation::kSum : Aggregation::kMean;
  if (aggregation != AggregationName(f.aggregation))
    return aggregation_r.Error("expected \"" + std::string(AggregationName(f.aggregation)) +
                               "\" for a " + estimator + ", found \"" + aggregation.substr(0, 40) +
                               "\"");

  f.num_features = static_cast<uint32_t>(num_features);
  f.num_classes = static_cast<uint32_t>(num_classes);
  f.input_precision = Precision::kFloat32;
  f.accumulate_precision = Precision::kFloat64;
  f.cardinality_source = CardinalitySource::kTraining;

  double learning_rate = 1.0;
  uint32_t value_width = 1;
  if (boosting) {
    // One tree per class and stage for multiclass, else one per stage.
    f.num_outputs = num_classes > 2 ? static_cast<uint32_t>(num_classes) : 1;
    f.leaf_width = 1;
    PACSET_ASSIGN_OR_RETURN(auto outputs_r, root.Member("n_outputs"));
    PACSET_ASSIGN_OR_RETURN(int64_t outputs, outputs_r.Integer());
    if (outputs != f.num_outputs)
      return outputs_r.Error("expected " + std::to_string(f.num_outputs) + " for " + task +
                             ", found " + std::to_string(outputs));
    PACSET_ASSIGN_OR_RETURN(auto loss_r, root.Member("loss"));
    PACSET_ASSIGN_OR_RETURN(std::string loss_name, loss_r.String());
    PACSET_ASSIGN_OR_RETURN(GradientBoostingLoss loss,
                            LookupLoss(loss_name, info->classifier, f.num_outputs, loss_r));
    f.postprocess = loss.post;
    f.sigmoid_alpha = loss.sigmoid_alpha;
    PACSET_ASSIGN_OR_RETURN(auto lr_r, root.Member("learning_rate"));
    PACSET_ASSIGN_OR_RETURN(learning_rate, lr_r.Number());
    if (!std::isfinite(learning_rate)) return lr_r.Error("learning_rate must be finite");
    PACSET_ASSIGN_OR_RETURN(auto init_r, root.Member("init_raw_prediction"));
    PACSET_ASSIGN_OR_RETURN(f.base_score, init_r.Doubles(f.num_outputs));
    for (double b : f.base_score)
      if (!std::isfinite(b)) return init_r.Error("the initial raw prediction must be finite");
  } else {
    // Classifier leaves are probability vectors over all classes.
    f.num_outputs = info->classifier ? static_cast<uint32_t>(num_classes) : 1;
    f.leaf_width = f.num_outputs;
    value_width = f.num_outputs;
    f.postprocess = Postprocess::kIdentity;
    f.base_score.assign(f.num_outputs, 0.0);
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
  for (size_t t = 0; t < num_trees; ++t) {
    PACSET_ASSIGN_OR_RETURN(auto tree, trees.Element(t));
    if (!tree.json().is_object()) return tree.Error("expected an object");
    uint32_t group = 0;
    if (boosting) {
      PACSET_ASSIGN_OR_RETURN(auto output_r, tree.Member("output"));
      PACSET_ASSIGN_OR_RETURN(int64_t output, output_r.Integer());
      if (output < 0 || output >= static_cast<int64_t>(f.num_outputs))
        return output_r.Error("tree " + std::to_string(t) + " feeds output " +
                              std::to_string(output) + " but the model has " +
                              std::to_string(f.num_outputs));
      group = static_cast<uint32_t>(output);
    }
    PACSET_RETURN_IF_ERROR(
        ImportTree(tree, t, group, value_width, info->classifier && !boosting, learning_rate, f));
  }
  PACSET_RETURN_IF_ERROR(f.Validate().WithContext(file));
  return f;
}

}  // namespace

StatusOr<Forest> ImportSklearnJson(std::string_view text, const std::string& name) {
  PACSET_ASSIGN_OR_RETURN(nlohmann::json doc, ParseJsonDocument(text, name));
  return ImportSklearnDocument(doc, name);
}

}  // namespace pacset
