// LightGBM text importer tests. The fixtures under tests/data/lightgbm/ are
// hand-written in the exact layout LightGBM's save_model() produces (LightGBM
// is not packaged for Debian 12); every expected value below was worked out
// by hand from the fixture and LightGBM's rules (tree.h NumericalDecision,
// gbdt_prediction.cpp, the objectives' ConvertOutput), summing leaf values in
// tree order from 0.0 as GBDT::PredictRaw does.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdio>
#include <fstream>
#include <limits>
#include <sstream>
#include <string>
#include <utility>
#include <vector>

#include "model/import.h"
#include "model/predict.h"
#include "model/routing.h"
#include "tests/test_files.h"
#include "tests/test_forests.h"
#include "tools/commands.h"

namespace pacset {
namespace {

constexpr double kInf = std::numeric_limits<double>::infinity();
const double kNan = std::nan("");
// LightGBM's kZeroThreshold (1e-35f) as a double, written by LightGBM as
// 1.0000000180025095e-35 (a bin bound around zero).
constexpr double kZ = kLightgbmZeroThreshold;

double Up(double x) { return std::nextafter(x, kInf); }
double Down(double x) { return std::nextafter(x, -kInf); }

std::string FixturePath(const std::string& name) {
  return std::string(PACSET_TEST_DATA) + "/lightgbm/" + name;
}

std::string ReadFixture(const std::string& name) {
  std::ifstream in(FixturePath(name), std::ios::binary);
  EXPECT_TRUE(in.good()) << FixturePath(name);
  std::ostringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

StatusOr<Forest> Import(const std::string& fixture) {
  return ImportLightgbmText(ReadFixture(fixture), fixture);
}

// The fixture with the first occurrence of `from` replaced by `to`.
std::string Edit(const std::string& fixture, const std::string& from, const std::string& to) {
  std::string s = ReadFixture(fixture);
  const size_t p = s.find(from);
  EXPECT_NE(p, std::string::npos) << from;
  if (p != std::string::npos) s.replace(p, from.size(), to);
  return s;
}

using testing::Margins;
using testing::Predictions;

double Margin(const Forest& f, const std::vector<double>& row) { return Margins(f, row)[0]; }

// LightGBM's leaf index (pred_leaf) for tree t: local id - (num_leaves - 1).
int32_t LightgbmLeaf(const Forest& f, size_t t, const std::vector<double>& row) {
  const int32_t num_leaves = static_cast<int32_t>((f.tree_size(t) + 1) / 2);
  return ForestPredictor(f).LeafIndex(t, row.data()) - (num_leaves - 1);
}

// BinaryLogloss::ConvertOutput.
double Sigmoid(double alpha, double raw) { return 1.0 / (1.0 + std::exp(-alpha * raw)); }

#define EXPECT_ERROR(result, code_, text)                                                     \
  do {                                                                                        \
    const auto& r_ = (result);                                                                \
    ASSERT_FALSE(r_.ok());                                                                    \
    EXPECT_EQ(r_.status().code(), code_) << r_.status().ToString();                           \
    EXPECT_NE(r_.status().message().find(text), std::string::npos) << r_.status().ToString(); \
  } while (0)

// ---- regression.txt ----
// Tree=0: node0 f0 <= 0.5 ? node1 : node2
//         node1 f1 <= 2.5000000000000004 ? leaf0 (0.1) : leaf2 (0.25)
//         node2 f2 <= -0.25 ? leaf1 (-0.375) : leaf3 (0.5)
// Tree=1: node0 f2 <= 1.0000000180025095e-35 ? node1 : leaf1 (0.2)
//         node1 f0 <= -1.5 ? leaf0 (-0.05) : leaf2 (0.0625)
// All decision_type 2: missing type None (NaN reads as 0.0), default_left set.

TEST(LightgbmImport, RegressionHeaderBecomesFloat64SumWithIdentity) {
  auto f = Import("regression.txt");
  ASSERT_TRUE(f.ok()) << f.status().ToString();
  EXPECT_EQ(f->task, Task::kRegression);
  EXPECT_EQ(f->num_features, 3u);
  EXPECT_EQ(f->num_outputs, 1u);
  EXPECT_EQ(f->num_classes, 1u);
  EXPECT_EQ(f->base_score, std::vector<double>{0.0});
  EXPECT_EQ(f->postprocess, Postprocess::kIdentity);
  EXPECT_EQ(f->aggregation, Aggregation::kSum);
  EXPECT_EQ(f->input_precision, Precision::kFloat64);
  EXPECT_EQ(f->accumulate_precision, Precision::kFloat64);
  EXPECT_EQ(f->source.format, "lightgbm-text");
  EXPECT_EQ(f->source.library_version, "v4");
  EXPECT_EQ(f->source.objective, "regression");
  EXPECT_TRUE(f->Validate().ok());
}

TEST(LightgbmImport, InternalNodesKeepTheirIdsAndLeavesFollowThem) {
  auto f = Import("regression.txt");
  ASSERT_TRUE(f.ok()) << f.status().ToString();
  ASSERT_EQ(f->num_trees(), 2u);
  ASSERT_EQ(f->tree_size(0), 7u);  // 3 internal + 4 leaves
  ASSERT_EQ(f->tree_size(1), 5u);
  // Tree=0: internal 0..2, leaf j -> 3 + j.
  EXPECT_EQ(f->left_child, (std::vector<int32_t>{1, 3, 4, -1, -1, -1, -1,  //
                                                 1, 2, -1, -1, -1}));
  EXPECT_EQ(f->right_child, (std::vector<int32_t>{2, 5, 6, -1, -1, -1, -1,  //
                                                  3, 4, -1, -1, -1}));
  const std::pair<size_t, uint32_t> features[] = {{0, 0}, {1, 1}, {2, 2}, {7, 2}, {8, 0}};
  for (auto [node, feature] : features) EXPECT_EQ(f->split_feature[node], feature) << node;
  const std::pair<size_t, double> leaves[] = {{3, 0.1},   {4, -0.375}, {5, 0.25},   {6, 0.5},
                                              {9, -0.05}, {10, 0.2},   {11, 0.0625}};
  for (auto [node, value] : leaves) EXPECT_EQ(f->leaf_value[node], value) << node;
  // internal_count / leaf_count.
  EXPECT_EQ(f->cardinality_source, CardinalitySource::kTraining);
  EXPECT_EQ(f->cardinality, (std::vector<double>{100, 60, 40, 35, 30, 25, 10,  //
                                                 100, 55, 20, 45, 35}));
  EXPECT_EQ(f->tree_group, (std::vector<uint32_t>{0, 0}));
}

TEST(LightgbmImport, ThresholdsAreStoredUnchangedOutsideTheZeroBand) {
  auto f = Import("regression.txt");
  ASSERT_TRUE(f.ok()) << f.status().ToString();
  // +kZeroThreshold itself (node 7) needs no folding (see
  // ThresholdAtMinusZeroThresholdIsFoldedBelowIt).
  const std::pair<size_t, double> thresholds[] = {
      {0, 0.5}, {1, 2.5000000000000004}, {2, -0.25}, {7, 1.0000000180025095e-35}, {8, -1.5}};
  for (auto [node, t] : thresholds) EXPECT_EQ(f->threshold[node], t) << node;
  for (size_t g : {0, 1, 2, 7, 8}) EXPECT_EQ(f->flags[g], kDefaultLeft | kNanIsZero) << g;
}

TEST(LightgbmImport, LeafIndexConvertsBackToLightgbmPredLeaf) {
  auto f = Import("regression.txt");
  ASSERT_TRUE(f.ok()) << f.status().ToString();
  struct Case {
    std::vector<double> row;
    int32_t leaf0, leaf1;
  } cases[] = {
      {{0.5, 2.5000000000000004, 0}, 0, 2},
      {{0.25, 3, 0}, 2, 2},
      {{1, 0, -0.25}, 1, 2},
      {{1, 0, 1}, 3, 1},
      {{-2, 0, -1}, 0, 0},
  };
  for (const auto& c : cases) {
    EXPECT_EQ(LightgbmLeaf(*f, 0, c.row), c.leaf0);
    EXPECT_EQ(LightgbmLeaf(*f, 1, c.row), c.leaf1);
  }
}

TEST(LightgbmImport, RegressionMarginsFollowLightgbmsComparisons) {
  auto f = Import("regression.txt");
  ASSERT_TRUE(f.ok()) << f.status().ToString();
  const struct {
    std::vector<double> row;
    double margin;
  } cases[] = {
      // Thresholds are inclusive (x == threshold goes left) and compared in
      // float64: the next double above goes right, even where float32 would
      // round both to 2.5.
      {{0.5, 2.5000000000000004, 0}, 0.1 + 0.0625},
      {{0.25, Up(2.5000000000000004), 0}, 0.25 + 0.0625},
      {{0.25, Down(2.5000000000000004), 0}, 0.1 + 0.0625},
      {{Up(0.5), 0, -0.25}, -0.375 + 0.0625},
      {{Up(0.5), 0, Up(-0.25)}, 0.5 + 0.0625},
      {{-1.5, 3, kZ}, 0.25 + -0.05},
      {{Down(-1.5), 0, Up(kZ)}, 0.1 + 0.2},
      // Missing type None reads NaN (and -0.0) as 0.0.
      {{kNan, kNan, kNan}, 0.1 + 0.0625},
      {{0.0, 0.0, 0.0}, 0.1 + 0.0625},
      {{-0.0, -0.0, -0.0}, 0.1 + 0.0625},
      // Infinities follow the comparison.
      {{-kInf, kInf, kInf}, 0.25 + 0.2},
      {{kInf, -kInf, -kInf}, -0.375 + 0.0625},
      // Tiny values around Tree=1's split of f2 at +kZeroThreshold.
      {{0, 0, 1e-36}, 0.1 + 0.0625},
      {{0, 0, -1e-36}, 0.1 + 0.0625},
      {{0, 0, kZ}, 0.1 + 0.0625},
      {{0, 0, Up(kZ)}, 0.1 + 0.2},
      {{0, 0, 1e-34}, 0.1 + 0.2},
  };
  for (const auto& c : cases)
    EXPECT_EQ(Margin(*f, c.row), c.margin) << ::testing::PrintToString(c.row);
  // Identity objective: the prediction is the raw score.
  EXPECT_EQ(Predictions(*f, {-1.5, 3, kZ})[0], 0.25 + -0.05);
}

// ---- missing_types.txt ----
// Eight stumps on the one feature x; tree k sends x left to a leaf worth
// 2^(2k) and right to 2^(2k+1), so the raw score spells out every direction.
//   k  decision_type  missing  default  threshold
//   0  0              None     right    -0.5
//   1  2              None     left     -0.5
//   2  4              Zero     right     0.5
//   3  6              Zero     left     -0.5
//   4  8              NaN      right     1.5
//   5  10             NaN      left     -1.5
//   6  2              None     left     -kZeroThreshold
//   7  8              NaN      right    -kZeroThreshold

// The raw score for the directions `lr` ("LRRL..."; one letter per tree).
double Directions(const std::string& lr) {
  double sum = 0.0;
  for (size_t k = 0; k < lr.size(); ++k) sum += std::ldexp(1.0, 2 * k + (lr[k] == 'R' ? 1 : 0));
  return sum;
}

class LightgbmMissingTypes : public ::testing::Test {
 protected:
  void SetUp() override {
    auto f = Import("missing_types.txt");
    ASSERT_TRUE(f.ok()) << f.status().ToString();
    forest_ = std::move(*f);
  }
  void ExpectDirections(double x, const std::string& lr) {
    EXPECT_EQ(Margin(forest_, {x}), Directions(lr)) << "x = " << x << ", expected " << lr;
    for (size_t k = 0; k < lr.size(); ++k)
      EXPECT_EQ(LightgbmLeaf(forest_, k, {x}), lr[k] == 'L' ? 0 : 1)
          << "x = " << x << " tree " << k;
  }
  Forest forest_;
};

TEST_F(LightgbmMissingTypes, DecisionTypeBitsBecomeRoutingFlags) {
  const uint8_t expected[] = {kNanIsZero,
                              kNanIsZero | kDefaultLeft,
                              kNanIsZero | kZeroIsMissing,
                              kNanIsZero | kZeroIsMissing | kDefaultLeft,
                              0,
                              kDefaultLeft,
                              kNanIsZero | kDefaultLeft,
                              0};
  ASSERT_EQ(forest_.num_trees(), 8u);
  for (size_t k = 0; k < 8; ++k) {
    EXPECT_EQ(forest_.flags[forest_.tree_offset[k]], expected[k]) << "tree " << k;
    EXPECT_EQ(forest_.left_child[forest_.tree_offset[k]], 1);
    EXPECT_EQ(forest_.right_child[forest_.tree_offset[k]], 2);
  }
}

TEST_F(LightgbmMissingTypes, ThresholdAtMinusZeroThresholdIsFoldedBelowIt) {
  // LightGBM's predictors store |x| <= 1e-35f as 0.0 before the trees see it,
  // so at threshold -kZeroThreshold (trees 6 and 7) x = -kZeroThreshold goes
  // right (0.0 > t) although x <= t; the importer folds this into the threshold.
  EXPECT_EQ(forest_.threshold[forest_.tree_offset[6]], Down(-kZ));
  EXPECT_EQ(forest_.threshold[forest_.tree_offset[7]], Down(-kZ));
}

TEST_F(LightgbmMissingTypes, EveryTreeSendsEachInputWhereLightgbmDoes) {
  const struct {
    double x;
    const char* lr;
  } cases[] = {
      // None (trees 0, 1): NaN -> 0.0 > -0.5 goes right whatever default_left says.
      {kNan, "RRRLRLRR"},
      {-0.5, "LLLLLRLL"},
      {Down(-0.5), "LLLLLRLL"},
      {Up(-0.5), "RRLRLRLL"},
      // Zero (trees 2 default right, 3 default left): 0.0, -0.0, NaN and
      // |x| <= 1e-35f take the default direction; anything larger compares.
      {0.0, "RRRLLRRR"},
      {-0.0, "RRRLLRRR"},
      {1e-36, "RRRLLRRR"},
      {-1e-36, "RRRLLRRR"},
      {kZ, "RRRLLRRR"},
      {-kZ, "RRRLLRRR"},
      {1e-34, "RRLRLRRR"},
      {-1e-34, "RRLRLRLL"},
      {Up(kZ), "RRLRLRRR"},
      {0.5, "RRLRLRRR"},
      {Up(0.5), "RRRRLRRR"},
      // NaN (trees 4 default right, 5 default left): only NaN takes the default.
      {kNan, "RRRLRLRR"},
      {0.0, "RRRLLRRR"},
      {1.5, "RRRRLRRR"},
      {Up(1.5), "RRRRRRRR"},
      {-1.5, "LLLLLLLL"},
      {Up(-1.5), "LLLLLRLL"},
      // Within kZeroThreshold inputs compare as 0.0, like LightGBM's
      // predictors (trees 6 and 7; the threshold fold above).
      {-kZ, "RRRLLRRR"},
      {Down(-kZ), "RRLRLRLL"},
      {-1e-34, "RRLRLRLL"},
      // Infinities are ordinary values.
      {kInf, "RRRRRRRR"},
      {-kInf, "LLLLLLLL"},
  };
  for (const auto& c : cases) ExpectDirections(c.x, c.lr);
}

// ---- binary.txt / binary_sigmoid_0.7.txt ----
// Tree=0: node0 f0 <= 0.5 (NaN missing, default left) ? node1 : leaf1 (0.8)
//         node1 f1 <= -2  (NaN missing, default right) ? leaf0 (-1.2) : leaf2 (0.35)
// Tree=1: f1 <= 3.25 (None) ? -0.1 : 0.6

TEST(LightgbmImport, BinarySigmoidOneGivesProbabilities) {
  auto f = Import("binary.txt");
  ASSERT_TRUE(f.ok()) << f.status().ToString();
  EXPECT_EQ(f->task, Task::kBinaryClassification);
  EXPECT_EQ(f->num_classes, 2u);
  EXPECT_EQ(f->postprocess, Postprocess::kSigmoid);
  EXPECT_EQ(f->sigmoid_alpha, 1.0);
  struct Case {
    std::vector<double> row;
    double raw;
  } cases[] = {
      {{0.5, -2}, -1.2 + -0.1},
      {{kNan, kNan}, 0.35 + -0.1},  // left by default, then right by
                                    // default
      {{0.0, -2}, -1.2 + -0.1},     // 0.0 is a value under missing type NaN
      {{Up(0.5), 3.25}, 0.8 + -0.1},
      {{0.0, Up(3.25)}, 0.35 + 0.6},
      {{-kInf, Up(-2)}, 0.35 + -0.1},
  };
  for (const auto& c : cases) {
    EXPECT_EQ(Margin(*f, c.row), c.raw);
    EXPECT_EQ(Predictions(*f, c.row)[0], Sigmoid(1.0, c.raw));
  }
}

TEST(LightgbmImport, BinarySigmoidAlphaScalesTheMargin) {
  auto f = Import("binary_sigmoid_0.7.txt");
  ASSERT_TRUE(f.ok()) << f.status().ToString();
  EXPECT_EQ(f->sigmoid_alpha, 0.7);
  EXPECT_EQ(f->source.objective, "binary sigmoid:0.7");
  const double raw = 0.8 + -0.1;
  EXPECT_EQ(Margin(*f, {1, 0}), raw);
  EXPECT_EQ(Predictions(*f, {1, 0})[0], Sigmoid(0.7, raw));
  EXPECT_NE(Predictions(*f, {1, 0})[0], Sigmoid(1.0, raw));
}

// ---- multiclass.txt ---- (tree i feeds class i % 3)
//   Tree=0 c0: f0 <= 1.5  (None)        ? 0.3   : -0.2
//   Tree=1 c1: f1 <= 0.25 (NaN, left)   ? -0.1  : 0.4
//   Tree=2 c2: f0 <= -0.5 (None)        ? 0.15  : -0.05
//   Tree=3 c0: f1 <= 0.75 (None)        ? 0.07  : -0.03
//   Tree=4 c1: f0 <= 2.5  (Zero, left)  ? 0.02  : -0.08
//   Tree=5 c2: f1 <= -1   (None)        ? -0.06 : 0.09

// MulticlassSoftmax::ConvertOutput (Common::Softmax), spelled out.
std::vector<double> Softmax(double a, double b, double c) {
  const double wmax = std::max(std::max(a, b), c);
  const double ea = std::exp(a - wmax), eb = std::exp(b - wmax), ec = std::exp(c - wmax);
  const double sum = ea + eb + ec;
  return {ea / sum, eb / sum, ec / sum};
}

TEST(LightgbmImport, MulticlassSumsEachClassInIterationOrderThenSoftmax) {
  auto f = Import("multiclass.txt");
  ASSERT_TRUE(f.ok()) << f.status().ToString();
  EXPECT_EQ(f->task, Task::kMulticlassClassification);
  EXPECT_EQ(f->num_outputs, 3u);
  EXPECT_EQ(f->num_classes, 3u);
  EXPECT_EQ(f->postprocess, Postprocess::kSoftmax);
  EXPECT_EQ(f->base_score, (std::vector<double>{0, 0, 0}));
  EXPECT_EQ(f->tree_group, (std::vector<uint32_t>{0, 1, 2, 0, 1, 2}));
  struct Case {
    std::vector<double> row;
    double c0, c1, c2;
  } cases[] = {
      {{1.5, 0.25}, 0.3 + 0.07, -0.1 + 0.02, -0.05 + 0.09},
      {{3, 1}, -0.2 + -0.03, 0.4 + -0.08, -0.05 + 0.09},
      {{1e-36, -1}, 0.3 + 0.07, -0.1 + 0.02, -0.05 + -0.06},  // Tree=4: tiny is missing
      {{Up(2.5), kNan}, -0.2 + 0.07, -0.1 + -0.08, -0.05 + 0.09},
      {{-0.5, Up(0.75)}, 0.3 + -0.03, 0.4 + 0.02, 0.15 + 0.09},
  };
  for (const auto& c : cases) {
    EXPECT_EQ(Margins(*f, c.row), (std::vector<double>{c.c0, c.c1, c.c2}));
    EXPECT_EQ(Predictions(*f, c.row), Softmax(c.c0, c.c1, c.c2));
  }
}

// ---- random_forest.txt ---- (average_output, binary sigmoid:1, 3 iterations)
//   Tree=0: f0 <= 1   (None)      ? -0.4 : 1.1
//   Tree=1: f1 <= 0.5 (None)      ? 0.3  : -0.7
//   Tree=2: f0 <= 3   (NaN, left) ? 0.2  : 2.2

TEST(LightgbmImport, AverageOutputDividesBySumOfIterationsBeforeSigmoid) {
  auto f = Import("random_forest.txt");
  ASSERT_TRUE(f.ok()) << f.status().ToString();
  EXPECT_EQ(f->aggregation, Aggregation::kMean);
  struct Case {
    std::vector<double> row;
    double sum;
  } cases[] = {
      {{1, 0.5}, -0.4 + 0.3 + 0.2},
      {{Up(1), Up(0.5)}, 1.1 + -0.7 + 0.2},
      {{4, kNan}, 1.1 + 0.3 + 2.2},
      {{kNan, 0}, -0.4 + 0.3 + 0.2},
  };
  for (const auto& c : cases) {
    const double margin = c.sum / 3;  // GBDT::Predict: output[k] /= num_iteration_for_pred_
    EXPECT_EQ(Margin(*f, c.row), margin);
    EXPECT_EQ(Predictions(*f, c.row)[0], Sigmoid(1.0, margin));
  }
}

// ---- single_leaf.txt ----
//   Tree=0: one leaf, 3.25 (empty split arrays)
//   Tree=1: f0 <= 0.25 ? -0.5 : 0.75

TEST(LightgbmImport, SingleLeafTreeIsOneNodeThatAlwaysAdds) {
  auto f = Import("single_leaf.txt");
  ASSERT_TRUE(f.ok()) << f.status().ToString();
  ASSERT_EQ(f->tree_size(0), 1u);
  EXPECT_TRUE(f->is_leaf(0));
  EXPECT_EQ(f->leaf_value[0], 3.25);
  EXPECT_EQ(f->cardinality[0], 0.0);
  EXPECT_EQ(LightgbmLeaf(*f, 0, {kNan, kNan}), 0);
  EXPECT_EQ(Margin(*f, {0.25, 0}), 3.25 + -0.5);
  EXPECT_EQ(Margin(*f, {Up(0.25), 0}), 3.25 + 0.75);
  EXPECT_EQ(Margin(*f, {kNan, kNan}), 3.25 + -0.5);
}

// ---- objectives ----

StatusOr<Forest> WithObjective(const std::string& objective) {
  return ImportLightgbmText(Edit("regression.txt", "objective=regression\n", objective),
                            "regression.txt");
}

TEST(LightgbmImport, ObjectivesMapToTheirLinks) {
  struct Case {
    const char* line;
    Postprocess post;
    double alpha;
  } cases[] = {
      {"objective=regression_l1\n", Postprocess::kIdentity, 1},
      {"objective=huber\n", Postprocess::kIdentity, 1},
      {"objective=fair\n", Postprocess::kIdentity, 1},
      {"objective=quantile\n", Postprocess::kIdentity, 1},
      {"objective=mape\n", Postprocess::kIdentity, 1},
      {"objective=lambdarank\n", Postprocess::kIdentity, 1},
      {"objective=rank_xendcg\n", Postprocess::kIdentity, 1},
      {"objective=poisson\n", Postprocess::kExponential, 1},
      {"objective=gamma\n", Postprocess::kExponential, 1},
      {"objective=tweedie\n", Postprocess::kExponential, 1},
      {"objective=cross_entropy\n", Postprocess::kSigmoid, 1},
      {"objective=xentropy\n", Postprocess::kSigmoid, 1},
      {"objective=binary sigmoid:2.5\n", Postprocess::kSigmoid, 2.5},
      {"", Postprocess::kIdentity, 1},  // custom objective: no objective line, raw scores
      {"objective=custom\n", Postprocess::kIdentity, 1},
      // huber drops sqrt (LightGBM disables it), so the model is still exact.
      {"objective=huber sqrt\n", Postprocess::kIdentity, 1},
  };
  for (const auto& c : cases) {
    auto f = WithObjective(c.line);
    ASSERT_TRUE(f.ok()) << c.line << f.status().ToString();
    EXPECT_EQ(f->postprocess, c.post) << c.line;
    EXPECT_EQ(f->sigmoid_alpha, c.alpha) << c.line;
  }
  auto poisson = WithObjective("objective=poisson\n");
  ASSERT_TRUE(poisson.ok());
  EXPECT_EQ(Predictions(*poisson, {0, 0, 1})[0], std::exp(0.1 + 0.2));
}

TEST(LightgbmImport, MulticlassOvaIsOneSigmoidPerClass) {
  auto f = ImportLightgbmText(Edit("multiclass.txt", "objective=multiclass num_class:3",
                                   "objective=multiclassova num_class:3 sigmoid:1.5"),
                              "multiclass.txt");
  ASSERT_TRUE(f.ok()) << f.status().ToString();
  EXPECT_EQ(f->postprocess, Postprocess::kSigmoid);
  const std::vector<double> row = {3, 1};
  const double c0 = -0.2 + -0.03, c1 = 0.4 + -0.08, c2 = -0.05 + 0.09;
  EXPECT_EQ(Predictions(*f, row),
            (std::vector<double>{Sigmoid(1.5, c0), Sigmoid(1.5, c1), Sigmoid(1.5, c2)}));
}

// ---- rejected and malformed files: an edit of a fixture, and its error ----
// Each is imported as "model.txt": errors name the file they were given, the
// line and the key.

struct RejectedEdit {
  const char* name;  // the case, as gtest names it
  const char* from;  // the first occurrence of `from` in the fixture becomes `to`
  const char* to;
  const char* error;  // a part of the message
  StatusCode code = StatusCode::kInvalidArgument;
  const char* fixture = "regression.txt";
};

void PrintTo(const RejectedEdit& e, std::ostream* os) { *os << e.name; }

constexpr StatusCode kNotSupported = StatusCode::kNotSupported;
constexpr StatusCode kInvalid = StatusCode::kInvalidArgument;

const RejectedEdit kRejectedEdits[] = {
    // Objectives the importer cannot make exact, or whose options are wrong.
    {"ObjectiveRegressionSqrt", "objective=regression\n", "objective=regression sqrt\n",
     "model.txt line 7 (objective): 'regression sqrt' (reg_sqrt=true)", kNotSupported},
    {"ObjectiveCrossEntropyLambda", "objective=regression\n", "objective=cross_entropy_lambda\n",
     "cross_entropy_lambda", kNotSupported},
    {"ObjectiveSurvival", "objective=regression\n", "objective=survival\n",
     "LightGBM objective 'survival' is not supported", kNotSupported},
    {"BinaryWithoutSigmoid", "objective=regression\n", "objective=binary\n",
     "binary needs a positive sigmoid:<alpha>"},
    {"BinaryNegativeSigmoid", "objective=regression\n", "objective=binary sigmoid:-1\n",
     "positive sigmoid"},
    {"BinarySigmoidNotANumber", "objective=regression\n", "objective=binary sigmoid:x\n",
     "'sigmoid:x' is not sigmoid:<number>"},
    {"MulticlassOfOneOutput", "objective=regression\n", "objective=multiclass num_class:3\n",
     "multiclass needs num_class:1"},
    {"MulticlassNumClassDisagrees", "objective=multiclass num_class:3",
     "objective=multiclass num_class:4", "multiclass needs num_class:3", kInvalid,
     "multiclass.txt"},
    {"RegressionOfThreeClasses", "objective=multiclass num_class:3", "objective=regression",
     "regression has one output but num_class is 3", kInvalid, "multiclass.txt"},
    // Features the importer does not support.
    {"LinearTree", "is_linear=0", "is_linear=1",
     "model.txt line 27 (Tree=0 is_linear): linear trees (linear_tree=true)", kNotSupported},
    {"UnknownModelVersion", "version=v4", "version=v9", "model.txt line 2 (version)",
     kNotSupported},
    // Wrong array lengths name the line, the tree and the key.
    {"ThresholdTooShort", "threshold=0.5 2.5000000000000004 -0.25",
     "threshold=0.5 2.5000000000000004",
     "model.txt line 17 (Tree=0 threshold): expected 3 values, found 2"},
    {"LeafValueTooLong", "leaf_value=-0.050000000000000003 0.20000000000000001 0.0625",
     "leaf_value=-0.050000000000000003 0.20000000000000001 0.0625 1",
     "model.txt line 40 (Tree=1 leaf_value): expected 3 values, found 4"},
    {"LeafCountTooShort", "leaf_count=35 30 25 10", "leaf_count=35 30 25",
     "line 23 (Tree=0 leaf_count): expected 4 values"},
    {"InternalValueTooShort", "internal_value=0 0.05 -0.075", "internal_value=0 0.05",
     "line 24 (Tree=0 internal_value): expected 3 values"},
    // A huge num_leaves fails on the arrays, without allocating for it.
    {"HugeNumLeaves", "num_leaves=4", "num_leaves=1073741824",
     "line 21 (Tree=0 leaf_value): expected 1073741824 values, found 4"},
    {"NumLeavesAboveTheLimit", "num_leaves=4", "num_leaves=99999999999",
     "line 13 (Tree=0 num_leaves): 99999999999 is outside 1..1073741824"},
    {"ZeroNumLeaves", "num_leaves=4", "num_leaves=0", "(Tree=0 num_leaves): 0 is outside"},
    // Missing keys are named.
    {"MissingThreshold", "threshold=0.5 2.5000000000000004 -0.25\n", "",
     "model.txt line 12 (Tree=0): missing key threshold"},
    {"MissingLeafValue", "leaf_value=-0.050000000000000003 0.20000000000000001 0.0625\n", "",
     "model.txt line 31 (Tree=1): missing key leaf_value"},
    {"MissingNumCat", "num_cat=0\n", "", "(Tree=0): missing key num_cat"},
    {"MissingMaxFeatureIdx", "max_feature_idx=2\n", "",
     "model.txt line 11 (header): missing key max_feature_idx"},
    {"MissingNumClass", "num_class=1\n", "", "(header): missing key num_class"},
    {"MissingFeatureInfos", "feature_infos=[-3.5:4.25] [0:10] [-1:1]\n", "",
     "(header): missing key feature_infos"},
    // Values that are not numbers are named, with their entry.
    {"LeafValueNotANumber", "leaf_value=0.10000000000000001 -0.375",
     "leaf_value=0.10000000000000001 x",
     "model.txt line 21 (Tree=0 leaf_value): entry 1 'x' is not a number"},
    {"SplitFeatureNotAnInteger", "split_feature=0 1 2", "split_feature=0 1.5 2",
     "line 15 (Tree=0 split_feature): entry 1 '1.5' is not an integer"},
    {"HexadecimalThreshold", "threshold=0.5 ", "threshold=0x1p-1 ",
     "entry 0 '0x1p-1' is not a number"},
    {"ThresholdBeyondDoubles", "threshold=0.5 ", "threshold=1e999 ", "out of the double range"},
    {"MaxFeatureIdxNotAnInteger", "max_feature_idx=2", "max_feature_idx=two",
     "model.txt line 6 (max_feature_idx): 'two' is not an integer"},
    {"NumLeavesNotAnInteger", "num_leaves=3", "num_leaves=3x",
     "line 32 (Tree=1 num_leaves): '3x' is not an integer"},
    // NaN leaves and thresholds.
    {"NanLeaf", "leaf_value=0.10000000000000001", "leaf_value=nan",
     "line 21 (Tree=0 leaf_value): leaf 0 is NaN"},
    {"NanThreshold", "threshold=0.5 ", "threshold=nan ",
     "line 17 (Tree=0 threshold): node 0 is NaN"},
    // Children out of range, shared or in a cycle.
    {"LeftChildBeyondTheLeaves", "left_child=1 -1 -2", "left_child=1 -1 -5",
     "model.txt line 19 (Tree=0 left_child): node 2 has child -5; expected an internal node "
     "1..2 or a leaf -1..-4"},
    {"RightChildBeyondTheNodes", "right_child=2 -3 -4", "right_child=3 -3 -4",
     "line 20 (Tree=0 right_child): node 0 has child 3"},
    {"ChildIsTheRoot", "left_child=1 -1 -2", "left_child=0 -1 -2", "node 0 has child 0"},
    {"SharedLeaf", "right_child=2 -3 -4", "right_child=2 -3 -1",
     "line 20 (Tree=0 right_child): node 2 and node 1 both have child -1"},
    // Root -> two leaves; nodes 1 and 2 point at each other.
    {"CyclicNodes", "left_child=1 -1 -2\nright_child=2 -3 -4",
     "left_child=-1 2 1\nright_child=-2 -3 -4",
     "line 19 (Tree=0 left_child): node 1 is not reachable from the root"},
    // Features beyond max_feature_idx.
    {"FeatureAboveMaxFeatureIdx", "split_feature=2 0", "split_feature=3 0",
     "model.txt line 34 (Tree=1 split_feature): node 0 splits on feature 3 but max_feature_idx "
     "is 2"},
    {"NegativeFeature", "split_feature=2 0", "split_feature=2 -1", "node 1 splits on feature -1"},
    // Header counts must agree.
    {"TooFewFeatureNames", "feature_names=f0 f1 f2", "feature_names=f0 f1",
     "model.txt line 8 (feature_names): expected 3 values (max_feature_idx + 1), found 2"},
    {"MaxFeatureIdxAboveTheFeatureNames", "max_feature_idx=2", "max_feature_idx=3",
     "(feature_names): expected 4 values"},
    {"TwoTreesPerIterationForOneOutput", "num_tree_per_iteration=1", "num_tree_per_iteration=2",
     "num_tree_per_iteration is 2"},
    // Duplicate or misnumbered trees, duplicate keys, lines without '='.
    {"DuplicateTree", "Tree=1\n", "Tree=0\n",
     "model.txt line 31 (Tree=0): duplicate tree (first at line 12)"},
    {"TreeOutOfSequence", "Tree=1\n", "Tree=2\n", "line 31 (Tree=2): expected Tree=1"},
    {"TreeIndexNotANumber", "Tree=1\n", "Tree=one\n", "line 31 (Tree): 'one' is not a tree index"},
    {"DuplicateKey", "num_cat=0\n", "num_cat=0\nnum_cat=0\n",
     "line 15 (Tree=0 num_cat): duplicate key (first at line 14)"},
    {"LineWithoutValue", "is_linear=0\n", "is_linear\n",
     "line 27 (Tree=0): expected key=value, found 'is_linear'"},
    // decision_type bits LightGBM does not define.
    {"DecisionTypeBit3", "decision_type=2 2 2", "decision_type=2 14 2",
     "line 18 (Tree=0 decision_type): node 1 has decision_type 14"},
    {"DecisionTypeBit4", "decision_type=2 2 2", "decision_type=2 2 16",
     "node 2 has decision_type 16"},
    // Categorical splits: num_cat, cat_boundaries, cat_threshold and the
    // node's set index must agree (categorical.txt: node 1 names set 0).
    {"NumCatAboveTheBoundaries", "num_cat=1", "num_cat=2",
     "model.txt line 27 (Tree=0 cat_boundaries): expected 3 values (num_cat + 1), found 2",
     kInvalid, "categorical.txt"},
    {"CatBoundariesDecrease", "cat_boundaries=0 1", "cat_boundaries=1 0",
     "line 27 (Tree=0 cat_boundaries): entry 1 (0) is below entry 0; the entries are offsets "
     "into cat_threshold, non-negative and non-decreasing",
     kInvalid, "categorical.txt"},
    {"CatBoundaryNegative", "cat_boundaries=0 1", "cat_boundaries=-1 1",
     "(Tree=0 cat_boundaries): entry 0 (-1) is below 0", kInvalid, "categorical.txt"},
    {"CatBoundaryNotAnInteger", "cat_boundaries=0 1", "cat_boundaries=0 1.0",
     "(Tree=0 cat_boundaries): entry 1 '1.0' is not an integer", kInvalid, "categorical.txt"},
    {"CatBoundariesBeyondCatThreshold", "cat_boundaries=0 1", "cat_boundaries=0 2",
     "model.txt line 28 (Tree=0 cat_threshold): expected 2 values (the last cat_boundaries "
     "entry), found 1",
     kInvalid, "categorical.txt"},
    {"CatThresholdBeyondTheBoundaries", "cat_threshold=10", "cat_threshold=10 3",
     "(Tree=0 cat_threshold): expected 1 values (the last cat_boundaries entry), found 2", kInvalid,
     "categorical.txt"},
    {"CatThresholdWordNegative", "cat_threshold=10", "cat_threshold=-10",
     "line 28 (Tree=0 cat_threshold): entry 0 (-10) is not a 32-bit bitset word "
     "(0..4294967295)",
     kInvalid, "categorical.txt"},
    {"CatThresholdWordAbove32Bits", "cat_threshold=10", "cat_threshold=4294967296",
     "entry 0 (4294967296) is not a 32-bit bitset word", kInvalid, "categorical.txt"},
    {"CatThresholdWordNotAnInteger", "cat_threshold=10", "cat_threshold=1e1",
     "(Tree=0 cat_threshold): entry 0 '1e1' is not an integer", kInvalid, "categorical.txt"},
    {"MissingCatBoundaries", "cat_boundaries=0 1\n", "",
     "model.txt line 12 (Tree=0): missing key cat_boundaries", kInvalid, "categorical.txt"},
    {"MissingCatThreshold", "cat_threshold=10\n", "",
     "model.txt line 12 (Tree=0): missing key cat_threshold", kInvalid, "categorical.txt"},
    {"CategoricalNodeWithoutNumCat", "num_cat=1", "num_cat=0",
     "model.txt line 18 (Tree=0 decision_type): node 1 is a categorical split but num_cat is 0",
     kInvalid, "categorical.txt"},
    {"CategoricalSetIndexBeyondNumCat", "threshold=4.5 0", "threshold=4.5 1",
     "model.txt line 17 (Tree=0 threshold): node 1 is a categorical split whose threshold '1' "
     "is not a category set index 0..0 (num_cat - 1)",
     kInvalid, "categorical.txt"},
    {"CategoricalSetIndexNotAnInteger", "threshold=4.5 0", "threshold=4.5 0.5",
     "node 1 is a categorical split whose threshold '0.5' is not a category set index", kInvalid,
     "categorical.txt"},
    {"CategoricalSetIndexNegative", "threshold=4.5 0", "threshold=4.5 -1",
     "threshold '-1' is not a category set index", kInvalid, "categorical.txt"},
    {"CategoricalSetIndexNan", "threshold=4.5 0", "threshold=4.5 nan",
     "threshold 'nan' is not a category set index", kInvalid, "categorical.txt"},
    {"CategoricalDecisionTypeBit3", "decision_type=2 1", "decision_type=2 13",
     "node 1 has decision_type 13", kInvalid, "categorical.txt"},
    // tree_sizes must match the tree blocks.
    {"TreeSizeOneByteOff", "tree_sizes=378 356", "tree_sizes=378 357",
     "model.txt line 10 (tree_sizes): Tree=1 takes 356 bytes but tree_sizes says 357"},
    {"TreeSizeMissing", "tree_sizes=378 356", "tree_sizes=378",
     "(tree_sizes): expected 2 values, found 1"},
    // A hand edit that keeps the model valid but changes a block's length.
    {"TreeBlockLengthEdited", "threshold=0.5 ", "threshold=0.50 ",
     "Tree=0 takes 379 bytes but tree_sizes says 378"},
};

class LightgbmRejectedEdit : public ::testing::TestWithParam<RejectedEdit> {};

TEST_P(LightgbmRejectedEdit, FailsNamingWhatIsWrong) {
  const RejectedEdit& e = GetParam();
  EXPECT_ERROR(ImportLightgbmText(Edit(e.fixture, e.from, e.to), "model.txt"), e.code, e.error);
}

INSTANTIATE_TEST_SUITE_P(LightgbmImport, LightgbmRejectedEdit, ::testing::ValuesIn(kRejectedEdits),
                         [](const ::testing::TestParamInfo<RejectedEdit>& p) {
                           return std::string(p.param.name);
                         });

TEST(LightgbmImport, TreesThatMakeNoWholeIterationAreRejected) {
  // Five trees cannot make whole iterations of three.
  std::string m = ReadFixture("multiclass.txt");
  const size_t a = m.find("Tree=5"), b = m.find("end of trees");
  m.erase(a, b - a);
  m.erase(m.find("tree_sizes="), m.find('\n', m.find("tree_sizes=")) - m.find("tree_sizes=") + 1);
  EXPECT_ERROR(ImportLightgbmText(m, "multiclass.txt"), StatusCode::kInvalidArgument,
               "the model has 5 trees, not a multiple of num_tree_per_iteration = 3");
}

TEST(LightgbmImport, TruncatedFileIsReportedAsTruncated) {
  const std::string full = ReadFixture("regression.txt");
  const std::string cut = full.substr(0, full.find("end of trees"));
  EXPECT_ERROR(ImportLightgbmText(cut, "model.txt"), StatusCode::kInvalidArgument,
               "model.txt: no 'end of trees' line in 49 lines: the file is truncated");
  EXPECT_ERROR(ImportLightgbmText("", "model.txt"), StatusCode::kInvalidArgument,
               "no 'end of trees' line");
  EXPECT_ERROR(ImportLightgbmText("tree\nversion=v4\nend of trees\n", "model.txt"),
               StatusCode::kInvalidArgument, "missing key num_class");
}

TEST(LightgbmImport, ModelWithoutTreesIsRejected) {
  std::string m = ReadFixture("regression.txt");
  m.erase(m.find("Tree=0"), m.find("end of trees") - m.find("Tree=0"));
  EXPECT_ERROR(ImportLightgbmText(m, "model.txt"), StatusCode::kInvalidArgument,
               "(trees): the model has no trees");
}

// ---- tree_sizes ----

TEST(LightgbmImport, WithoutTreeSizesTreesAreReadInSequence) {
  auto with = Import("regression.txt");
  auto without =
      ImportLightgbmText(Edit("regression.txt", "tree_sizes=378 356\n", ""), "model.txt");
  ASSERT_TRUE(with.ok());
  ASSERT_TRUE(without.ok()) << without.status().ToString();
  EXPECT_EQ(with->left_child, without->left_child);
  EXPECT_EQ(with->threshold, without->threshold);
  EXPECT_EQ(with->leaf_value, without->leaf_value);
  // Hand-edited spacing is then fine too.
  auto edited = ImportLightgbmText(
      Edit("regression.txt", "tree_sizes=378 356\n", "").insert(0, "\n"), "model.txt");
  EXPECT_TRUE(edited.ok()) << edited.status().ToString();
}

TEST(LightgbmImport, CrlfLineEndingsAreReadWithoutTreeSizes) {
  std::string crlf;
  for (char c : Edit("regression.txt", "tree_sizes=378 356\n", "")) {
    if (c == '\n') crlf += '\r';
    crlf += c;
  }
  auto f = ImportLightgbmText(crlf, "model.txt");
  ASSERT_TRUE(f.ok()) << f.status().ToString();
  EXPECT_EQ(Margin(*f, {0, 0, 1e-34}), 0.1 + 0.2);
}

// ---- robustness: never crash, return an error or a valid forest ----

const char* const kFixtures[] = {
    "regression.txt",  "binary.txt",        "binary_sigmoid_0.7.txt",
    "multiclass.txt",  "random_forest.txt", "missing_types.txt",
    "single_leaf.txt", "categorical.txt",   "categorical_multiclass.txt"};

TEST(LightgbmImport, EveryPrefixOfEveryFixtureIsAnErrorOrAValidForest) {
  for (const char* name : kFixtures) {
    const std::string text = ReadFixture(name);
    const size_t end_of_trees = text.find("end of trees") + std::string("end of trees").size();
    const bool importable = Import(name).ok();
    for (size_t n = 0; n <= text.size(); ++n) {
      auto f = ImportLightgbmText(std::string_view(text).substr(0, n), name);
      if (f.ok()) {
        EXPECT_TRUE(f->Validate().ok()) << name << " prefix " << n;
      }
      // Cut before "end of trees": truncated. After it: the whole model.
      if (n < end_of_trees) {
        EXPECT_FALSE(f.ok()) << name << " prefix " << n;
      } else {
        EXPECT_EQ(f.ok(), importable) << name << " prefix " << n;
      }
    }
  }
}

TEST(LightgbmImport, SingleByteCorruptionsNeverCrash) {
  for (const char* name :
       {"regression.txt", "missing_types.txt", "multiclass.txt", "categorical.txt"}) {
    const std::string text = ReadFixture(name);
    for (size_t i = 0; i < text.size(); ++i) {
      for (char c : {'0', '9', '-', ' ', '\n', '=', 'x', '\0'}) {
        std::string m = text;
        m[i] = c;
        auto f = ImportLightgbmText(m, name);
        if (f.ok()) {
          EXPECT_TRUE(f->Validate().ok()) << name << " byte " << i << " = " << int(c);
        }
      }
    }
  }
}

// ---- through the model dispatcher and `pacset predict` ----

TEST(LightgbmImport, ImportModelDetectsLightgbmText) {
  auto format = DetectModelFormat(FixturePath("binary.txt"));
  ASSERT_TRUE(format.ok()) << format.status().ToString();
  EXPECT_EQ(*format, ModelFormat::kLightgbmText);
  auto f = ImportModel(FixturePath("binary.txt"));
  ASSERT_TRUE(f.ok()) << f.status().ToString();
  EXPECT_EQ(f->source.file_name, "binary.txt");
  EXPECT_EQ(f->postprocess, Postprocess::kSigmoid);
}

TEST(LightgbmImport, PacsetPredictRunsOnLightgbmModels) {
  const std::string dir = ::testing::TempDir();
  const std::string rows = dir + "/lightgbm_rows.csv", out = dir + "/lightgbm_out.csv";
  {
    std::ofstream csv(rows);
    csv << "x\nnan\n0\n-1.0000000180025095e-35\n-inf\n1e-34\n";
  }
  PredictOptions opts;
  opts.model = FixturePath("missing_types.txt");
  opts.input = rows;
  opts.output = out;
  ASSERT_TRUE(RunPredict(opts).ok());
  EXPECT_EQ(::pacset::testing::ReadAll(out),
            "42602\n43370\n43370\n21845\n"
            "43418\n");  // RRRLRLRR, RRRLLRRR, RRRLLRRR, LLLLLLLL, RRLRLRRR
  opts.leaf = true;
  ASSERT_TRUE(RunPredict(opts).ok());
  EXPECT_EQ(::pacset::testing::ReadAll(out).substr(0, 16),
            "2,2,2,1,2,1,2,2\n");  // local ids: leaf0 = 1, leaf1 = 2
  std::remove(rows.c_str());
  std::remove(out.c_str());
}

}  // namespace
}  // namespace pacset
