// The in-memory forest: one flat struct of arrays for a whole ensemble.
//
// Every importer (XGBoost, scikit-learn, LightGBM) produces a Forest, the
// packer (layout/) reads one, and the in-memory predictor (model/predict.h)
// is the reference every other prediction path is tested against.
//
// Representation (the treelite-dask-serializer idea): each field is a flat,
// contiguous array over all nodes of all trees, so a forest is saved and
// loaded as a handful of memcpy-sized frames with no per-node work.
// Node ids inside a tree are local (0 = root); tree t owns the global node
// range [tree_offset[t], tree_offset[t+1]).
//
// Split semantics are normalised at import to ONE comparison operator:
//   a non-missing value x goes left  <=>  x <= threshold
// where x is first converted to the forest's input precision (float32 for
// XGBoost and scikit-learn, which cast inputs to float32; float64 for
// LightGBM). Each library's own rule is mapped onto this exactly; see
// model/routing.h and docs/exactness.md.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "util/status.h"

namespace pacset {

enum class Task : uint8_t {
  kRegression = 0,
  kBinaryClassification = 1,
  kMulticlassClassification = 2,
};

// What turns margins (raw scores) into the library's prediction.
enum class Postprocess : uint8_t {
  kIdentity = 0,     // regression, sklearn forests (already probabilities)
  kSigmoid = 1,      // 1 / (1 + exp(-alpha * m)); XGBoost binary:logistic, LightGBM binary
  kSoftmax = 2,      // per-row softmax over the output groups
  kClassIndex = 3,   // index of the largest margin (XGBoost multi:softmax)
  kExponential = 4,  // exp(m): poisson, gamma, tweedie
  // One margin m, two columns [1 - p, p] with p = 1 / (1 + exp(-alpha * m)):
  // scikit-learn's binary GradientBoostingClassifier.predict_proba.
  kSigmoidPair = 5,
  // scikit-learn IsolationForest.score_samples: one margin m (the sum over the
  // trees of each leaf's path length), one column -pow(2, -(m / d)) with d =
  // isolation_denominator (x = 1 instead of m / d when d is 0). Float64 only.
  kIsolationScore = 6,
};
constexpr uint8_t kMaxPostprocess = 6;

// How per-tree leaf values are combined.
enum class Aggregation : uint8_t {
  kSum = 0,   // boosting: margin = base + sum of leaves
  kMean = 1,  // random forests: margin = (base + sum) / trees contributing to the output
};

enum class Precision : uint8_t {
  kFloat32 = 0,
  kFloat64 = 1,
};

// Per-node flag bits (Forest::flags).
enum NodeFlag : uint8_t {
  // A missing value goes to the left child (otherwise right).
  kDefaultLeft = 1u << 0,
  // |x| <= 1e-35f counts as missing (LightGBM missing type "Zero").
  kZeroIsMissing = 1u << 1,
  // NaN is not missing but the value 0.0 (LightGBM missing types "None" and "Zero").
  kNanIsZero = 1u << 2,
  // A categorical split (CategoricalSplit): the node's threshold holds the
  // index of its split in Forest::categorical_splits, and kZeroIsMissing /
  // kNanIsZero are replaced by the outside direction below.
  kCategorical = 1u << 3,
};
constexpr uint8_t kKnownNodeFlags = kDefaultLeft | kZeroIsMissing | kNanIsZero | kCategorical;

// Where a categorical split sends a value that is in neither of its sets, or
// that is not a category at all (below 0, too large, infinite): bits 1-2 of
// a categorical node's flags (they mean kZeroIsMissing / kNanIsZero on a
// numerical node).
enum class OutsideDirection : uint8_t {
  kRight = 0,    // LightGBM
  kLeft = 1,     // XGBoost
  kDefault = 2,  // the missing-value direction (kDefaultLeft): scikit-learn
};
constexpr int kOutsideShift = 1;
constexpr uint8_t kOutsideMask = 3u << kOutsideShift;

// How a value becomes a category (each library's rule, exactly):
enum class CategoryRule : uint8_t {
  // XGBoost (float32): a category iff 0 <= x < 2^24; the category is x
  // truncated toward zero (-0.0 is category 0).
  kXgboost = 0,
  // LightGBM (float64): x truncated toward zero, a category iff that is in
  // [0, 2^31) (so -0.5 is category 0, -1 is none).
  kLightgbm = 1,
  // scikit-learn HistGradientBoosting (float64): a category iff 0 <= x <
  // 2^31, truncated toward zero.
  kSklearn = 2,
};
constexpr uint8_t kMaxCategoryRule = 2;

// One categorical split: the categories that go left and those that go
// right, as bitsets in Forest::category_words (bit c of a set is bit c % 32
// of word first + c / 32; a category beyond the last word is not in it).
// A category in the left set goes left, else one in the right set goes
// right, else (and for a value that is no category) the node's
// OutsideDirection applies; NaN takes the default direction first.
struct CategoricalSplit {
  uint32_t left_first = 0;
  uint32_t left_words = 0;
  uint32_t right_first = 0;
  uint32_t right_words = 0;
  uint8_t rule = 0;  // CategoryRule
};

// Where Forest::cardinality came from, weakest to strongest.
enum class CardinalitySource : uint8_t {
  kNone = 0,        // unknown: layouts fall back to equal weights
  kHessian = 1,     // XGBoost sum_hessian (a row count only for squared error)
  kTraining = 2,    // training-row counts from the model file
  kCalibrated = 3,  // counted by routing real rows (--calibrate)
  kTrace = 4,       // observed block popularity from a pacsetfs trace
};

const char* TaskName(Task t);
const char* PostprocessName(Postprocess p);
const char* AggregationName(Aggregation a);
const char* CardinalitySourceName(CardinalitySource s);

// Where a forest came from; shown by `pacset info` and kept in store catalogs.
struct ModelSource {
  std::string format;           // "xgboost-json", "xgboost-ubjson", "sklearn", "lightgbm-text"
  std::string library_version;  // as recorded in the model file, "" if unknown
  std::string objective;        // library objective / estimator name
  std::string file_name;        // base name of the imported file
  // What the import wants the user to know (e.g. a pickle made by another
  // scikit-learn version); the tool layer shows them. Not saved.
  std::vector<std::string> warnings;
};

struct Forest {
  // ---- forest-wide ----
  Task task = Task::kRegression;
  uint32_t num_features = 0;
  // Length of the margin vector: 1 for regression and XGBoost/LightGBM binary
  // models, K for K-class models (and 2 for sklearn binary forest classifiers,
  // whose leaves are probability vectors; sklearn binary GradientBoosting has 1
  // and writes two prediction columns, see kSigmoidPair).
  uint32_t num_outputs = 1;
  uint32_t num_classes = 1;  // 1 for regression
  // Values per leaf: 1 (the leaf adds to its tree's output group) or
  // num_outputs (the leaf adds a vector to every output).
  uint32_t leaf_width = 1;
  std::vector<double> base_score;  // per output, in margin space
  Postprocess postprocess = Postprocess::kIdentity;
  double sigmoid_alpha = 1.0;
  // kIsolationScore only (0 otherwise): the denominator of the exponent
  // (n_estimators * c(max_samples_)) and IsolationForest.offset_, which
  // decision_function subtracts from score_samples (model/output.h).
  double isolation_denominator = 0.0;
  double isolation_offset = 0.0;
  Aggregation aggregation = Aggregation::kSum;
  // Inputs are rounded to this precision before comparison.
  Precision input_precision = Precision::kFloat32;
  // Margins are accumulated (tree order) and post-processed in this precision.
  Precision accumulate_precision = Precision::kFloat64;
  CardinalitySource cardinality_source = CardinalitySource::kNone;
  ModelSource source;

  // ---- per tree (size num_trees) ----
  std::vector<uint64_t> tree_offset;  // size num_trees + 1; tree_offset[0] == 0
  std::vector<uint32_t> tree_group;   // output group of scalar leaves (0 when leaf_width > 1)

  // ---- per node (size num_nodes) ----
  std::vector<int32_t>
      left_child;  // local id of the child taken when x <= threshold; -1 for a leaf
  std::vector<int32_t> right_child;  // local id; -1 for a leaf
  std::vector<uint32_t> split_feature;
  std::vector<double> threshold;    // exact in input_precision
  std::vector<uint8_t> flags;       // NodeFlag bits
  std::vector<double> cardinality;  // rows reaching the node; 0 where unknown
  std::vector<double> leaf_value;   // leaf_width values per node (zeros for internal nodes)

  // ---- categorical splits (empty for forests without) ----
  std::vector<CategoricalSplit> categorical_splits;
  std::vector<uint32_t> category_words;

  size_t num_trees() const { return tree_group.size(); }
  size_t num_nodes() const { return left_child.size(); }
  size_t tree_size(size_t t) const { return tree_offset[t + 1] - tree_offset[t]; }
  bool is_leaf(uint64_t global_node) const { return left_child[global_node] < 0; }
  // Number of columns `pacset predict` writes per row (without --margin).
  uint32_t num_prediction_columns() const {
    if (postprocess == Postprocess::kSigmoidPair) return 2;
    return postprocess == Postprocess::kClassIndex ? 1 : num_outputs;
  }

  // Appends a tree with `n` nodes initialised as leaves with zero values and
  // returns the global id of its root.
  uint64_t AddTree(uint32_t group, uint32_t n);
  // Reserves room for `trees` trees of `nodes` nodes in all (leaf_width set
  // first), so building a large forest does not reallocate its arrays.
  void Reserve(size_t trees, size_t nodes);

  // Checks every structural invariant (array sizes, child ids in range, no
  // node with two parents, root nobody's child, features < num_features,
  // thresholds exact in input_precision, groups < num_outputs, categorical
  // splits and their sets in range). Importers call it last, so a forest
  // that reaches the packer or the predictor is sound.
  Status Validate() const;
};

// Adds a categorical split (sets given as category lists; `left` and `right`
// must not share a category) and returns its index, for an importer to store
// as the node's threshold with kCategorical set.
uint32_t AddCategoricalSplit(Forest& f, const std::vector<uint32_t>& left,
                             const std::vector<uint32_t>& right, CategoryRule rule);

// Largest float32 value <= v (v itself when representable); NaN stays NaN.
float Float32AtOrBelow(double v);

// Saves / loads the forest as flat frames (cereal portable binary archive).
// Loading validates the result, and refuses a path that is not a regular file
// (util/file_io.h OpenRegularFile).
Status SaveForest(const Forest& forest, const std::string& path);
StatusOr<Forest> LoadForest(const std::string& path);

}  // namespace pacset
