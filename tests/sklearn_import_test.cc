#include <gtest/gtest.h>

#include <cmath>
#include <cstdio>
#include <limits>
#include <nlohmann/json.hpp>
#include <vector>

#include "model/import.h"
#include "model/predict.h"

namespace pacset {
namespace {

using nlohmann::json;

// One classifier tree over two features: x0 <= 0.3 ? [3, 1] : [0, 2].
json ClassifierTree() {
  return {{"children_left", {1, -1, -1}}, {"children_right", {2, -1, -1}},
          {"feature", {0, -2, -2}},       {"threshold", {0.3, -2.0, -2.0}},
          {"value", {3, 3, 3, 1, 0, 2}},  {"n_node_samples", {6, 4, 2}}};
}

// What tools/pacset-sklearn-export writes for a small RandomForestClassifier.
json ForestClassifier() {
  return {{"format", "pacset-sklearn"},
          {"format_version", 1},
          {"sklearn_version", "1.2.1"},
          {"estimator", "RandomForestClassifier"},
          {"task", "binary"},
          {"n_features", 2},
          {"n_classes", 2},
          {"classes", {"no", "yes"}},
          {"aggregation", "mean"},
          {"n_trees", 1},
          {"trees", {ClassifierTree()}}};
}

// GradientBoostingClassifier with `k` outputs (1 = binary) and one stage:
// each tree is x1 <= 1.5 ? -1 - k : 2 + k for output k.
json Boosting(const std::string& estimator, int classes) {
  const int outputs = classes > 2 ? classes : 1;
  json trees = json::array();
  for (int k = 0; k < outputs; ++k)
    trees.push_back({{"output", k},
                     {"children_left", {1, -1, -1}},
                     {"children_right", {2, -1, -1}},
                     {"feature", {1, -2, -2}},
                     {"threshold", {1.5, -2.0, -2.0}},
                     {"value", {0.0, -1.0 - k, 2.0 + k}},
                     {"n_node_samples", {10, 5, 5}}});
  json classes_list = json::array();
  for (int c = 0; c < classes; ++c) classes_list.push_back(c);
  json init = json::array();
  for (int k = 0; k < outputs; ++k) init.push_back(-0.25 * (k + 1));
  const bool classifier = estimator == "GradientBoostingClassifier";
  return {{"format", "pacset-sklearn"},
          {"format_version", 1},
          {"sklearn_version", "1.2.1"},
          {"estimator", estimator},
          {"task", !classifier    ? "regression"
                   : classes == 2 ? "binary"
                                  : "multiclass"},
          {"n_features", 2},
          {"n_classes", classifier ? classes : 1},
          {"classes", classifier ? classes_list : json::array()},
          {"aggregation", "sum"},
          {"loss", classifier ? "log_loss" : "squared_error"},
          {"learning_rate", 0.1},
          {"n_outputs", outputs},
          {"init_raw_prediction", init},
          {"n_trees", outputs},
          {"trees", trees}};
}

StatusOr<Forest> Import(const json& doc) { return ImportSklearnJson(doc.dump(), "m.json"); }

std::vector<double> Predict(const Forest& f, double x0, double x1 = 0.0) {
  const double row[2] = {x0, x1};
  std::vector<double> out(f.num_prediction_columns());
  ForestPredictor(f).Predict(row, out.data());
  return out;
}

std::vector<double> Margin(const Forest& f, double x0, double x1 = 0.0) {
  const double row[2] = {x0, x1};
  std::vector<double> out(f.num_outputs);
  ForestPredictor(f).PredictMargin(row, out.data());
  return out;
}

// Asserts that importing `doc` fails with `code` and a message containing
// every one of `parts`.
void ExpectError(const json& doc, StatusCode code, const std::vector<std::string>& parts) {
  auto f = Import(doc);
  ASSERT_FALSE(f.ok());
  EXPECT_EQ(f.status().code(), code) << f.status().ToString();
  for (const auto& p : parts)
    EXPECT_NE(f.status().message().find(p), std::string::npos)
        << "'" << p << "' not in: " << f.status().message();
}

TEST(SklearnImport, ClassifierLeavesBecomeNormalisedProbabilityVectors) {
  auto f = Import(ForestClassifier());
  ASSERT_TRUE(f.ok()) << f.status().ToString();
  EXPECT_EQ(f->task, Task::kBinaryClassification);
  EXPECT_EQ(f->num_outputs, 2u);
  EXPECT_EQ(f->leaf_width, 2u);
  EXPECT_EQ(f->num_classes, 2u);
  EXPECT_EQ(f->aggregation, Aggregation::kMean);
  EXPECT_EQ(f->postprocess, Postprocess::kIdentity);
  EXPECT_EQ(f->input_precision, Precision::kFloat32);
  EXPECT_EQ(f->accumulate_precision, Precision::kFloat64);
  EXPECT_EQ(f->base_score, (std::vector<double>{0.0, 0.0}));
  EXPECT_EQ(Predict(*f, 0.2), (std::vector<double>{0.75, 0.25}));
  EXPECT_EQ(Predict(*f, 0.4), (std::vector<double>{0.0, 1.0}));
  EXPECT_EQ(f->source.format, "sklearn-json");
  EXPECT_EQ(f->source.library_version, "scikit-learn 1.2.1");
  EXPECT_EQ(f->source.objective, "RandomForestClassifier");
  EXPECT_EQ(f->cardinality_source, CardinalitySource::kTraining);
  EXPECT_EQ(f->cardinality, (std::vector<double>{6, 4, 2}));
}

TEST(SklearnImport, ForestProbabilitiesAreTheMeanOverTrees) {
  json doc = ForestClassifier();
  json second = ClassifierTree();
  second["value"] = {1, 1, 1, 0, 0, 1};
  doc["trees"].push_back(second);
  doc["n_trees"] = 2;
  auto f = Import(doc);
  ASSERT_TRUE(f.ok()) << f.status().ToString();
  EXPECT_EQ(Predict(*f, 0.2), (std::vector<double>{(0.75 + 1.0) / 2, (0.25 + 0.0) / 2}));
}

TEST(SklearnImport, LeafWithZeroWeightKeepsZeroProbabilities) {
  json doc = ForestClassifier();
  doc["trees"][0]["value"] = {3, 3, 0, 0, 0, 2};
  auto f = Import(doc);
  ASSERT_TRUE(f.ok()) << f.status().ToString();
  EXPECT_EQ(Predict(*f, 0.2), (std::vector<double>{0.0, 0.0}));
}

TEST(SklearnImport, ThresholdBecomesTheLargestFloat32AtOrBelow) {
  auto f = Import(ForestClassifier());
  ASSERT_TRUE(f.ok());
  // sklearn compares float32(x) <= 0.3 (double). float32(0.3) is above 0.3.
  EXPECT_EQ(f->threshold[0], static_cast<double>(std::nextafter(0.3f, 0.0f)));
  EXPECT_EQ(Predict(*f, 0.3)[1], 1.0);                          // right
  EXPECT_EQ(Predict(*f, std::nextafter(0.3f, 0.0f))[1], 0.25);  // left
  EXPECT_EQ(Predict(*f, 0.3 - 1e-12)[1], 1.0);  // rounds to float32(0.3) first: right
  EXPECT_EQ(Predict(*f, -0.0)[1], 0.25);
  EXPECT_EQ(Predict(*f, 1e30)[1], 1.0);
  EXPECT_EQ(Predict(*f, -1e30)[1], 0.25);
}

TEST(SklearnImport, ExactlyRepresentableThresholdIsKept) {
  json doc = ForestClassifier();
  doc["trees"][0]["threshold"] = {0.5, -2.0, -2.0};
  auto f = Import(doc);
  ASSERT_TRUE(f.ok());
  EXPECT_EQ(f->threshold[0], 0.5);
  EXPECT_EQ(Predict(*f, 0.5)[1], 0.25);  // 0.5 <= 0.5: left
}

TEST(SklearnImport, NonFiniteThresholdsWrittenAsStringsAreAccepted) {
  json doc = ForestClassifier();
  doc["trees"][0]["threshold"] = {"Infinity", -2.0, -2.0};
  auto f = Import(doc);
  ASSERT_TRUE(f.ok()) << f.status().ToString();
  EXPECT_EQ(Predict(*f, 1e38)[1], 0.25);
  EXPECT_EQ(Predict(*f, std::numeric_limits<double>::infinity())[1], 0.25);
}

TEST(SklearnImport, NanGoesToTheChildWithMoreSamplesAndRightOnATie) {
  const double nan = std::numeric_limits<double>::quiet_NaN();
  auto f = Import(ForestClassifier());  // samples: left 4, right 2
  ASSERT_TRUE(f.ok());
  EXPECT_EQ(Predict(*f, nan)[1], 0.25);
  json doc = ForestClassifier();
  doc["trees"][0]["n_node_samples"] = {6, 2, 4};
  f = Import(doc);
  ASSERT_TRUE(f.ok());
  EXPECT_EQ(Predict(*f, nan)[1], 1.0);
  doc["trees"][0]["n_node_samples"] = {6, 3, 3};
  f = Import(doc);
  ASSERT_TRUE(f.ok());
  EXPECT_EQ(Predict(*f, nan)[1], 1.0);
}

TEST(SklearnImport, MissingGoToLeftOverridesTheSampleCountRule) {
  const double nan = std::numeric_limits<double>::quiet_NaN();
  json doc = ForestClassifier();
  doc["trees"][0]["missing_go_to_left"] = {0, 0, 0};
  auto f = Import(doc);
  ASSERT_TRUE(f.ok()) << f.status().ToString();
  EXPECT_EQ(Predict(*f, nan)[1], 1.0);
  doc["trees"][0]["n_node_samples"] = {6, 2, 4};
  doc["trees"][0]["missing_go_to_left"] = {true, false, false};
  f = Import(doc);
  ASSERT_TRUE(f.ok()) << f.status().ToString();
  EXPECT_EQ(Predict(*f, nan)[1], 0.25);
}

TEST(SklearnImport, RegressorForestAveragesLeafValues) {
  json doc = ForestClassifier();
  doc["estimator"] = "ExtraTreesRegressor";
  doc["task"] = "regression";
  doc["n_classes"] = 1;
  doc["classes"] = json::array();
  doc["trees"][0]["value"] = {1.5, 2.5, -4.0};
  json second = doc["trees"][0];
  second["value"] = {0.0, 0.25, 8.0};
  doc["trees"].push_back(second);
  doc["n_trees"] = 2;
  auto f = Import(doc);
  ASSERT_TRUE(f.ok()) << f.status().ToString();
  EXPECT_EQ(f->leaf_width, 1u);
  EXPECT_EQ(Predict(*f, 0.0), (std::vector<double>{(2.5 + 0.25) / 2}));
  EXPECT_EQ(Predict(*f, 1.0), (std::vector<double>{(-4.0 + 8.0) / 2}));
}

TEST(SklearnImport, BinaryGradientBoostingWritesTwoProbabilityColumns) {
  auto f = Import(Boosting("GradientBoostingClassifier", 2));
  ASSERT_TRUE(f.ok()) << f.status().ToString();
  EXPECT_EQ(f->num_outputs, 1u);
  EXPECT_EQ(f->num_prediction_columns(), 2u);
  EXPECT_EQ(f->postprocess, Postprocess::kSigmoidPair);
  EXPECT_EQ(f->aggregation, Aggregation::kSum);
  const double margin = -0.25 + 0.1 * 2.0;  // init + learning_rate * value
  EXPECT_EQ(Margin(*f, 0, 2.0), (std::vector<double>{margin}));
  const double p = 1.0 / (1.0 + std::exp(-margin));
  EXPECT_EQ(Predict(*f, 0, 2.0), (std::vector<double>{1.0 - p, p}));
}

TEST(SklearnImport, ExponentialLossDoublesTheMarginInTheSigmoid) {
  json doc = Boosting("GradientBoostingClassifier", 2);
  doc["loss"] = "exponential";
  auto f = Import(doc);
  ASSERT_TRUE(f.ok()) << f.status().ToString();
  const double margin = -0.25 + 0.1 * -1.0;
  const double p = 1.0 / (1.0 + std::exp(-(2.0 * margin)));
  EXPECT_EQ(Predict(*f, 0, 1.0), (std::vector<double>{1.0 - p, p}));
}

TEST(SklearnImport, MulticlassGradientBoostingFeedsOneOutputPerTree) {
  auto f = Import(Boosting("GradientBoostingClassifier", 3));
  ASSERT_TRUE(f.ok()) << f.status().ToString();
  EXPECT_EQ(f->task, Task::kMulticlassClassification);
  EXPECT_EQ(f->num_outputs, 3u);
  EXPECT_EQ(f->postprocess, Postprocess::kSoftmax);
  EXPECT_EQ(f->tree_group, (std::vector<uint32_t>{0, 1, 2}));
  const std::vector<double> m = Margin(*f, 0, 0.0);
  EXPECT_EQ(m, (std::vector<double>{-0.25 + 0.1 * -1.0, -0.5 + 0.1 * -2.0, -0.75 + 0.1 * -3.0}));
  const std::vector<double> p = Predict(*f, 0, 0.0);
  EXPECT_NEAR(p[0] + p[1] + p[2], 1.0, 1e-15);
  EXPECT_GT(p[0], p[1]);
}

TEST(SklearnImport, GradientBoostingRegressorIsInitPlusScaledLeaves) {
  auto f = Import(Boosting("GradientBoostingRegressor", 1));
  ASSERT_TRUE(f.ok()) << f.status().ToString();
  EXPECT_EQ(f->task, Task::kRegression);
  EXPECT_EQ(f->postprocess, Postprocess::kIdentity);
  EXPECT_EQ(Predict(*f, 0, 7.0), (std::vector<double>{-0.25 + 0.1 * 2.0}));
}

TEST(SklearnImport, SigmoidPairForestSurvivesSaveAndLoad) {
  auto f = Import(Boosting("GradientBoostingClassifier", 2));
  ASSERT_TRUE(f.ok());
  const std::string path = ::testing::TempDir() + "/sklearn_sigmoid_pair.forest";
  ASSERT_TRUE(SaveForest(*f, path).ok());
  auto g = LoadForest(path);
  ASSERT_TRUE(g.ok()) << g.status().ToString();
  EXPECT_EQ(g->postprocess, Postprocess::kSigmoidPair);
  EXPECT_EQ(Predict(*g, 0, 2.0), Predict(*f, 0, 2.0));
  std::remove(path.c_str());
}

TEST(SklearnImport, RejectsAChildOutsideTheTree) {
  json doc = ForestClassifier();
  doc["trees"][0]["children_right"] = {7, -1, -1};
  ExpectError(doc, StatusCode::kInvalidArgument,
              {"m.json", "trees/0/children_right", "node 0 has child 7 outside 1..2"});
}

TEST(SklearnImport, RejectsAChildThatPointsBackToTheRoot) {
  json doc = ForestClassifier();
  doc["trees"][0]["children_left"] = {0, -1, -1};
  ExpectError(doc, StatusCode::kInvalidArgument, {"trees/0/children_left", "child 0 outside"});
}

TEST(SklearnImport, RejectsANodeWithOneChild) {
  json doc = ForestClassifier();
  doc["trees"][0]["children_left"] = {1, -1, 1};
  ExpectError(doc, StatusCode::kInvalidArgument, {"node 2 has only one child"});
}

TEST(SklearnImport, RejectsAMissingFieldByPath) {
  json doc = ForestClassifier();
  doc["trees"][0].erase("n_node_samples");
  ExpectError(doc, StatusCode::kInvalidArgument, {"missing field trees/0/n_node_samples"});
  doc = Boosting("GradientBoostingClassifier", 2);
  doc.erase("init_raw_prediction");
  ExpectError(doc, StatusCode::kInvalidArgument, {"missing field init_raw_prediction"});
}

TEST(SklearnImport, RejectsAWrongArrayLengthNamingTheField) {
  json doc = ForestClassifier();
  doc["trees"][0]["threshold"] = {0.3, -2.0};
  ExpectError(doc, StatusCode::kInvalidArgument,
              {"trees/0/threshold", "expected 3 values, found 2"});
}

TEST(SklearnImport, RejectsALeafVectorOfTheWrongWidth) {
  json doc = ForestClassifier();
  doc["trees"][0]["value"] = {3, 3, 1};  // one value per node, but two classes
  ExpectError(doc, StatusCode::kInvalidArgument, {"trees/0/value", "expected 6 values, found 3"});
}

TEST(SklearnImport, RejectsAnotherFormatVersion) {
  json doc = ForestClassifier();
  doc["format_version"] = 2;
  ExpectError(doc, StatusCode::kNotSupported, {"format_version", "version 2 is not supported"});
}

TEST(SklearnImport, RejectsADocumentOfAnotherFormat) {
  json doc = ForestClassifier();
  doc["format"] = "treelite";
  ExpectError(doc, StatusCode::kInvalidArgument, {"format", "expected \"pacset-sklearn\""});
}

TEST(SklearnImport, RejectsAnUnsupportedEstimator) {
  json doc = ForestClassifier();
  doc["estimator"] = "BaggingRegressor";
  ExpectError(doc, StatusCode::kNotSupported,
              {"estimator", "'BaggingRegressor' is not supported", "RandomForestClassifier"});
}

TEST(SklearnImport, RejectsAnUnsupportedLoss) {
  json doc = Boosting("GradientBoostingClassifier", 3);
  doc["loss"] = "exponential";  // binary only in sklearn
  ExpectError(doc, StatusCode::kNotSupported, {"loss", "'exponential' is not supported"});
}

TEST(SklearnImport, RejectsATaskThatContradictsTheClassCount) {
  json doc = ForestClassifier();
  doc["task"] = "multiclass";
  ExpectError(doc, StatusCode::kInvalidArgument, {"task", "expected \"binary\""});
}

TEST(SklearnImport, RejectsAFeatureBeyondNFeatures) {
  json doc = ForestClassifier();
  doc["trees"][0]["feature"] = {5, -2, -2};
  ExpectError(doc, StatusCode::kInvalidArgument,
              {"trees/0/feature", "splits on feature 5 but n_features is 2"});
}

TEST(SklearnImport, RejectsANanThreshold) {
  json doc = ForestClassifier();
  doc["trees"][0]["threshold"] = {"NaN", -2.0, -2.0};
  ExpectError(doc, StatusCode::kInvalidArgument, {"trees/0/threshold", "NaN threshold"});
}

TEST(SklearnImport, RejectsATreeFeedingAnOutputThatDoesNotExist) {
  json doc = Boosting("GradientBoostingClassifier", 3);
  doc["trees"][2]["output"] = 3;
  ExpectError(doc, StatusCode::kInvalidArgument, {"trees/2/output", "feeds output 3"});
}

TEST(SklearnImport, RejectsAnEmptyForest) {
  json doc = ForestClassifier();
  doc["trees"] = json::array();
  doc["n_trees"] = 0;
  ExpectError(doc, StatusCode::kInvalidArgument, {"trees", "no trees"});
}

// ---- HistGradientBoosting ----

// A HistGradientBoosting* with one tree per output: node 0 splits feature 0
// by category (left set {1, 3}; known categories {1, 2, 3, 5}; missing
// left), node 1 splits feature 1 at 0.1 (NaN right); leaves 2 (1.0), 3 (2.0),
// 4 (-1.0), plus k for output k. Leaves carry 0 children, as sklearn writes.
json Hist(const std::string& estimator, int classes, const std::string& loss) {
  const int outputs = classes > 2 ? classes : 1;
  const bool classifier = estimator == "HistGradientBoostingClassifier";
  json trees = json::array();
  for (int k = 0; k < outputs; ++k)
    trees.push_back({{"output", k},
                     {"children_left", {1, 2, 0, 0, 0}},
                     {"children_right", {4, 3, 0, 0, 0}},
                     {"feature", {0, 1, 0, 0, 0}},
                     {"threshold", {0.0, 0.1, 0.0, 0.0, 0.0}},
                     {"value", {0.0, 0.0, 1.0 + k, 2.0 + k, -1.0 + k}},
                     {"n_node_samples", {10, 6, 3, 3, 4}},
                     {"missing_go_to_left", {1, 0, 0, 0, 0}},
                     {"is_leaf", {0, 0, 1, 1, 1}},
                     {"is_categorical", {1, 0, 0, 0, 0}},
                     {"bitset_idx", {0, 0, 0, 0, 0}},
                     {"left_cat_bitsets", {0xa, 0, 0, 0, 0, 0, 0, 0}}});
  json classes_list = json::array();
  for (int c = 0; c < classes; ++c) classes_list.push_back(c);
  json init = json::array();
  for (int k = 0; k < outputs; ++k) init.push_back(0.5 * (k + 1));
  return {{"format", "pacset-sklearn"},
          {"format_version", 1},
          {"sklearn_version", "1.2.1"},
          {"estimator", estimator},
          {"task", !classifier    ? "regression"
                   : classes == 2 ? "binary"
                                  : "multiclass"},
          {"n_features", 2},
          {"n_classes", classifier ? classes : 1},
          {"classes", classifier ? classes_list : json::array()},
          {"aggregation", "sum"},
          {"loss", loss},
          {"learning_rate", 0.1},
          {"n_outputs", outputs},
          {"init_raw_prediction", init},
          {"bitset_words", 8},
          {"categorical_features", {0}},
          {"known_category_bitsets", {0x2e, 0, 0, 0, 0, 0, 0, 0}},
          {"n_trees", outputs},
          {"trees", trees}};
}

json HistRegressor(const std::string& loss = "squared_error") {
  return Hist("HistGradientBoostingRegressor", 1, loss);
}

TEST(SklearnImport, HistCategoricalSplitSendsLeftSetLeftKnownRightAndTheRestTheMissingWay) {
  auto f = Import(HistRegressor());
  ASSERT_TRUE(f.ok()) << f.status().ToString();
  const double nan = std::numeric_limits<double>::quiet_NaN();
  const double inf = std::numeric_limits<double>::infinity();
  // Left subtree with x1 = 0 reaches leaf 2 (0.5 + 1.0); right is leaf 4 (0.5 - 1.0).
  for (double x0 : {1.0, 3.0, 3.7, 1.99})  // left set (3.7 is category 3)
    EXPECT_EQ(Margin(*f, x0)[0], 1.5) << x0;
  for (double x0 : {2.0, 5.0, 5.5})  // known, not in the left set
    EXPECT_EQ(Margin(*f, x0)[0], -0.5) << x0;
  // Unknown (0, 4, 255), not a category (negative, >= 256, inf) and NaN:
  // the missing direction, left here.
  for (double x0 : {0.0, -0.0, 4.0, 255.0, 256.0, 257.0, 1e10, inf, -0.5, -1.0, -inf, nan})
    EXPECT_EQ(Margin(*f, x0)[0], 1.5) << x0;
}

TEST(SklearnImport, HistNumericalSplitComparesFloat64Inputs) {
  auto f = Import(HistRegressor());
  ASSERT_TRUE(f.ok()) << f.status().ToString();
  EXPECT_EQ(f->input_precision, Precision::kFloat64);
  // float32(0.1) > 0.1: a float32 comparison would send 0.1 right.
  EXPECT_EQ(Margin(*f, 1.0, 0.1)[0], 1.5);
  EXPECT_EQ(Margin(*f, 1.0, std::nextafter(0.1, 1.0))[0], 2.5);
  EXPECT_EQ(Margin(*f, 1.0, std::numeric_limits<double>::quiet_NaN())[0], 2.5);
}

TEST(SklearnImport, HistLeavesAreAddedWithoutTheLearningRate) {
  auto f = Import(HistRegressor());
  ASSERT_TRUE(f.ok()) << f.status().ToString();
  EXPECT_EQ(Predict(*f, 2.0)[0], 0.5 - 1.0);  // learning_rate 0.1 is already in the leaves
}

TEST(SklearnImport, HistPoissonPredictsTheExponentialOfTheMargin) {
  auto f = Import(HistRegressor("poisson"));
  ASSERT_TRUE(f.ok()) << f.status().ToString();
  EXPECT_EQ(Predict(*f, 2.0)[0], std::exp(-0.5));
  EXPECT_EQ(Margin(*f, 2.0)[0], -0.5);
}

TEST(SklearnImport, HistBinaryClassifierWritesTwoProbabilityColumns) {
  auto f = Import(Hist("HistGradientBoostingClassifier", 2, "log_loss"));
  ASSERT_TRUE(f.ok()) << f.status().ToString();
  const auto p = Predict(*f, 2.0);
  ASSERT_EQ(p.size(), 2u);
  EXPECT_EQ(p[1], 1.0 / (1.0 + std::exp(0.5)));
  EXPECT_EQ(p[0], 1.0 - p[1]);
}

TEST(SklearnImport, HistMulticlassClassifierFeedsOneOutputPerTree) {
  auto f = Import(Hist("HistGradientBoostingClassifier", 3, "log_loss"));
  ASSERT_TRUE(f.ok()) << f.status().ToString();
  EXPECT_EQ(Margin(*f, 2.0), (std::vector<double>{-0.5, 1.0, 2.5}));
  EXPECT_EQ(f->postprocess, Postprocess::kSoftmax);
}

TEST(SklearnImport, RejectsAnUnsupportedHistLossNamingTheSupportedOnes) {
  ExpectError(HistRegressor("gamma"), StatusCode::kNotSupported,
              {"loss", "'gamma' is not supported", "poisson", "refit"});
  ExpectError(Hist("HistGradientBoostingClassifier", 3, "binary_crossentropy"),
              StatusCode::kNotSupported, {"'binary_crossentropy' is not supported"});
}

TEST(SklearnImport, RejectsAHistCategoricalSplitOnANumericalFeature) {
  json doc = HistRegressor();
  doc["categorical_features"] = {1};
  ExpectError(doc, StatusCode::kInvalidArgument,
              {"trees/0/is_categorical", "feature 0, which is not in categorical_features"});
}

TEST(SklearnImport, RejectsAHistBitsetIndexOutsideTheTree) {
  json doc = HistRegressor();
  doc["trees"][0]["bitset_idx"] = {1, 0, 0, 0, 0};
  ExpectError(doc, StatusCode::kInvalidArgument,
              {"trees/0/bitset_idx", "node 0 uses bitset 1 but the tree has 1"});
}

TEST(SklearnImport, RejectsHistBitsetsOfAnotherWidth) {
  json doc = HistRegressor();
  doc["bitset_words"] = 4;
  ExpectError(doc, StatusCode::kInvalidArgument, {"bitset_words", "expected 8, found 4"});
  doc = HistRegressor();
  doc["trees"][0]["left_cat_bitsets"] = {0xa, 0, 0};
  ExpectError(doc, StatusCode::kInvalidArgument,
              {"trees/0/left_cat_bitsets", "3 words is not a multiple of 8"});
  doc = HistRegressor();
  doc["known_category_bitsets"] = {0x2e};
  ExpectError(doc, StatusCode::kInvalidArgument,
              {"known_category_bitsets", "expected 8 words (8 per categorical feature), found 1"});
}

TEST(SklearnImport, RejectsAHistBitsetWordThatIsNotAUint32) {
  json doc = HistRegressor();
  doc["trees"][0]["left_cat_bitsets"][0] = 1LL << 32;
  ExpectError(doc, StatusCode::kInvalidArgument, {"trees/0/left_cat_bitsets", "not a uint32"});
  doc = HistRegressor();
  doc["known_category_bitsets"][0] = -1;
  ExpectError(doc, StatusCode::kInvalidArgument, {"known_category_bitsets", "not a uint32"});
}

TEST(SklearnImport, RejectsAHistCategoricalFeatureOutOfRangeOrTwice) {
  json doc = HistRegressor();
  doc["categorical_features"] = {0, 0};
  doc["known_category_bitsets"] = json::array();
  for (int i = 0; i < 16; ++i) doc["known_category_bitsets"].push_back(0);
  ExpectError(doc, StatusCode::kInvalidArgument,
              {"categorical_features", "feature 0 is out of range or listed twice"});
}

TEST(SklearnImport, RejectsAHistTreeWithoutItsNodeKinds) {
  json doc = HistRegressor();
  doc["trees"][0].erase("is_leaf");
  ExpectError(doc, StatusCode::kInvalidArgument, {"missing field trees/0/is_leaf"});
  doc = HistRegressor();
  doc["trees"][0].erase("missing_go_to_left");
  ExpectError(doc, StatusCode::kInvalidArgument, {"missing field trees/0/missing_go_to_left"});
}

TEST(SklearnImport, RejectsAHistChildPointingBackward) {
  json doc = HistRegressor();
  doc["trees"][0]["children_right"] = {4, 0, 0, 0, 0};  // node 1's right child is the root
  ExpectError(doc, StatusCode::kInvalidArgument,
              {"trees/0/children_right", "node 1 has child 0 outside 2..4"});
}

TEST(SklearnImport, RejectsANanHistLeafValue) {
  json doc = HistRegressor();
  doc["trees"][0]["value"][4] = "NaN";
  ExpectError(doc, StatusCode::kInvalidArgument, {"trees/0/value", "node 4 has a NaN leaf value"});
}

TEST(SklearnImport, RejectsMalformedJsonWithItsPosition) {
  auto f = ImportSklearnJson("{\"format\": \"pacset-sklearn\",\n \"trees\": [1,,2]}", "bad.json");
  ASSERT_FALSE(f.ok());
  EXPECT_NE(f.status().message().find("bad.json: not valid JSON"), std::string::npos);
  EXPECT_NE(f.status().message().find("line 2"), std::string::npos) << f.status().message();
}

}  // namespace
}  // namespace pacset
