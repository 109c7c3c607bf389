#include <gtest/gtest.h>

#include <cmath>
#include <limits>

#include "model/import.h"
#include "model/json_reader.h"
#include "model/predict.h"

namespace pacset {
namespace {

// One tree: x0 < 0.5 ? -1 : 2, missing goes left. `default_left` and
// `base_score` spellings vary by XGBoost version.
std::string Model(const std::string& default_left, const std::string& base_score,
                  const std::string& objective = "reg:squarederror",
                  const std::string& split_type = "[0,0,0]") {
  return R"({"learner":{"learner_model_param":{"base_score":)" + base_score +
         R"(,"num_class":"0","num_feature":"2","num_target":"1"},
  "objective":{"name":")" +
         objective + R"("},
  "gradient_booster":{"name":"gbtree","model":{"gbtree_model_param":{"num_trees":"1"},
  "tree_info":[0],"trees":[{"left_children":[1,-1,-1],"right_children":[2,-1,-1],
  "split_indices":[0,0,0],"split_conditions":[0.5,-1.0,2.0],"default_left":)" +
         default_left + R"(,"split_type":)" + split_type + R"(,
  "sum_hessian":[10,6,4],"tree_param":{"num_nodes":"3","size_leaf_vector":"0"}}]}}},
  "version":[1,7,4]})";
}

double Predict(const Forest& f, double x0) {
  double row[2] = {x0, 0}, out = 0;
  ForestPredictor(f).Predict(row, &out);
  return out;
}

TEST(XgboostImport, ReadsIntAndBoolDefaultLeftAndScalarOrArrayBaseScore) {
  for (const auto& [dl, bs] : std::vector<std::pair<std::string, std::string>>{
           {"[1,0,0]", R"("5E-1")"}, {"[true,false,false]", "0.5"}, {"[1,0,0]", R"("[5E-1]")"}}) {
    auto f = ImportXgboostJson(Model(dl, bs), "m.json");
    ASSERT_TRUE(f.ok()) << f.status().ToString();
    EXPECT_EQ(Predict(*f, 0.25), 0.5 - 1.0);
    EXPECT_EQ(Predict(*f, std::nan("")), 0.5 - 1.0);  // default left
    EXPECT_EQ(Predict(*f, 0.75), 0.5 + 2.0);
    EXPECT_EQ(f->cardinality_source, CardinalitySource::kHessian);
    EXPECT_EQ(f->cardinality[1], 6);
  }
}

TEST(XgboostImport, StrictLessThanBecomesLessOrEqualToThePreviousFloat) {
  auto f = ImportXgboostJson(Model("[0,0,0]", "0.5"), "m.json");
  ASSERT_TRUE(f.ok());
  EXPECT_EQ(Predict(*f, 0.5), 2.5);  // 0.5 < 0.5 is false: right
  EXPECT_EQ(Predict(*f, std::nextafter(0.5f, 0.0f)), -0.5);
  EXPECT_EQ(Predict(*f, std::nan("")), 2.5);  // default right
  // 0.5 + 1e-12 rounds to 0.5 in float32 before the comparison, as in XGBoost.
  EXPECT_EQ(Predict(*f, 0.5 - 1e-12), 2.5);
}

TEST(XgboostImport, LogisticBaseScoreBecomesAMarginAndSigmoidIsApplied) {
  auto f = ImportXgboostJson(Model("[0,0,0]", R"("2.5E-1")", "binary:logistic"), "m.json");
  ASSERT_TRUE(f.ok());
  const float margin = -logf(1.0f / 0.25f - 1.0f) + 2.0f;
  EXPECT_EQ(Predict(*f, 1.0), 1.0f / (1.0f + expf(-margin)));
}

// One tree whose root is a categorical split on x0 (as XGBoost 1.7.4 writes
// it: split_condition NaN, the categories in four arrays); its stored set
// {0, 3, 40} goes right (2.0), the rest left (-1.0). `categories` replaces
// the four arrays.
const char kCategories[] =
    R"("categories":[0,3,40],"categories_nodes":[0],"categories_segments":[0],)"
    R"("categories_sizes":[3])";
std::string CategoricalModel(const std::string& categories = kCategories,
                             const std::string& split_type = "[1,0,0]") {
  std::string m = Model("[0,0,0]", "0.5", "reg:squarederror", split_type);
  m.replace(m.find("[0.5,-1.0,2.0]"), 14, "[NaN,-1.0,2.0]");
  m.replace(m.find("\"sum_hessian\""), 0, categories + ",");
  return m;
}

TEST(XgboostImport, CategoricalSplitSendsItsCategoriesRightAndEverythingElseLeft) {
  auto f = ImportXgboostJson(CategoricalModel(), "m.json");
  ASSERT_TRUE(f.ok()) << f.status().ToString();
  ASSERT_EQ(f->categorical_splits.size(), 1u);
  EXPECT_TRUE(f->flags[0] & kCategorical);
  const double kRight = 0.5 + 2.0, kLeft = 0.5 - 1.0;
  // In the set (the value truncated toward zero in float32; -0.0 is 0).
  for (double x : {0.0, -0.0, 0.5, 3.0, 3.99, 40.0, 40.9}) EXPECT_EQ(Predict(*f, x), kRight) << x;
  // Other categories, and values that are no category, go left.
  for (double x : {1.0, 2.0, 4.0, 39.0, 41.0, 1000.0, 16777215.0, 16777216.0, 16777218.0, 1e30,
                   -1.0, -0.5, -1e-45, HUGE_VAL, -HUGE_VAL})
    EXPECT_EQ(Predict(*f, x), kLeft) << x;
  // The input is rounded to float32 before it is truncated: 3.9999999999 is 4.0f.
  EXPECT_EQ(Predict(*f, 3.9999999999), kLeft);
  EXPECT_EQ(Predict(*f, std::nan("")), kRight);  // default_left is 0
}

TEST(XgboostImport, CategoricalLeafNeedsNoCategoriesEntry) {
  // XGBoost keeps split_type 1 on a split pruned into a leaf.
  auto f = ImportXgboostJson(CategoricalModel(kCategories, "[1,1,0]"), "m.json");
  ASSERT_TRUE(f.ok()) << f.status().ToString();
  EXPECT_EQ(Predict(*f, 1.0), 0.5 - 1.0);
}

TEST(XgboostImport, MalformedCategoriesArraysAreRejectedNamingTheField) {
  const std::string kArrays = R"("categories_segments":[0],"categories_sizes":[3])";
  const std::pair<std::string, std::string> cases[] = {
      {R"("categories":[0,3,40],"categories_nodes":[1],)" + kArrays,
       "categories_nodes: entry 0 names node 1, whose split_type is not 1"},
      {R"("categories":[0,3,40],"categories_nodes":[3],)" + kArrays,
       "entry 0 names node 3 but the tree has 3 nodes"},
      {R"("categories":[0,3,40],"categories_nodes":[-1],)" + kArrays, "names node -1"},
      {R"("categories":[0,3],"categories_nodes":[0],"categories_segments":[1],)"
       R"("categories_sizes":[2])",
       "categories_segments: entry 0 (node 0) spans categories [1, +2) but the categories "
       "array has 2"},
      {R"("categories":[0,3,40],"categories_nodes":[0],"categories_segments":[-1],)"
       R"("categories_sizes":[1])",
       "spans categories [-1, +1)"},
      {R"("categories":[0,3,40],"categories_nodes":[0],"categories_segments":[2],)"
       R"("categories_sizes":[2])",
       "spans categories [2, +2)"},
      {R"("categories":[0,3,40],"categories_nodes":[0],"categories_segments":[0],)"
       R"("categories_sizes":[9223372036854775807])",
       "the sizes add up to more than"},
      {R"("categories":[0,3,40],"categories_nodes":[0,1],"categories_segments":[0,0],)"
       R"("categories_sizes":[3,3])",
       "categories_sizes: the sizes add up to more than the 3 categories stored"},
      {R"("categories":[0,-3,40],"categories_nodes":[0],)" + kArrays,
       "categories: element 1 is category -3, outside XGBoost's 0..16777215"},
      {R"("categories":[0,16777216,40],"categories_nodes":[0],)" + kArrays,
       "element 1 is category 16777216"},
      {R"("categories":[0,3.5,40],"categories_nodes":[0],)" + kArrays,
       "categories: element 1 is not an integer"},
      {R"("categories":[0,3,40],"categories_nodes":[0,0],"categories_segments":[0,1],)"
       R"("categories_sizes":[1,1])",
       "node 0 is listed twice"},
      {R"("categories":[0,3,40],"categories_nodes":[0],"categories_segments":[0,0],)"
       R"("categories_sizes":[3])",
       "categories_segments: expected 1 values, found 2"},
      {R"("categories":[],"categories_nodes":[],"categories_segments":[],"categories_sizes":[])",
       "tree 0 node 0 is a categorical split but has no categories entry"},
      {R"("categories_nodes":[0],)" + kArrays, "missing field"},
  };
  for (const auto& [categories, want] : cases) {
    auto f = ImportXgboostJson(CategoricalModel(categories), "m.json");
    ASSERT_FALSE(f.ok()) << categories;
    EXPECT_NE(f.status().message().find(want), std::string::npos) << categories << "\n"
                                                                  << f.status().message();
  }
}

TEST(XgboostImport, SplitTypeOtherThanZeroOrOneIsRejected) {
  auto f = ImportXgboostJson(CategoricalModel(kCategories, "[2,0,0]"), "m.json");
  ASSERT_FALSE(f.ok());
  EXPECT_NE(f.status().message().find("tree 0 node 0 has split_type 2"), std::string::npos)
      << f.status().message();
}

TEST(XgboostImport, UbjsonCategoricalModelReadsLikeJson) {
  auto doc = ParseJsonDocument(CategoricalModel(), "m.json");
  ASSERT_TRUE(doc.ok()) << doc.status().ToString();
  const std::vector<uint8_t> bytes = nlohmann::json::to_ubjson(*doc, true, true);
  auto f = ImportXgboostUbjson(
      std::string_view(reinterpret_cast<const char*>(bytes.data()), bytes.size()), "m.ubj");
  ASSERT_TRUE(f.ok()) << f.status().ToString();
  EXPECT_EQ(Predict(*f, 3.5), 0.5 + 2.0);
  EXPECT_EQ(Predict(*f, 4.0), 0.5 - 1.0);
}

// The Model tree as a DART booster with the given weight_drop.
std::string DartModel(const std::string& weight_drop, const std::string& leaves = "-1.0,2.0") {
  std::string m = Model("[0,0,0]", "0.5");
  m.replace(m.find("-1.0,2.0"), 8, leaves);
  const std::string gbtree = R"("name":"gbtree","model":)";
  m.replace(m.find(gbtree), gbtree.size(), R"("name":"dart","gbtree":{"name":"gbtree","model":)");
  const std::string end = R"("size_leaf_vector":"0"}}]})";
  m.replace(m.find(end), end.size(), end + R"(},"weight_drop":)" + weight_drop);
  return m;
}

TEST(XgboostImport, DartLeavesAreWeighedInFloat32LikeBoosterPredict) {
  auto f = ImportXgboostJson(DartModel("[0.3]", "0.1,-0.7"), "m.json");
  ASSERT_TRUE(f.ok()) << f.status().ToString();
  // XGBoost: margin += (0 + leaf) * w, each rounded to float32.
  EXPECT_EQ(f->leaf_value[1], static_cast<double>(0.1f * 0.3f));
  EXPECT_EQ(f->leaf_value[2], static_cast<double>(-0.7f * 0.3f));
  EXPECT_EQ(Predict(*f, 0.0), static_cast<double>(0.5f + 0.1f * 0.3f));
}

TEST(XgboostImport, DartWeightCountMustMatchTheTrees) {
  for (const char* wd : {"[]", "[0.5,0.5]"}) {
    auto f = ImportXgboostJson(DartModel(wd), "m.json");
    ASSERT_FALSE(f.ok()) << wd;
    EXPECT_NE(f.status().message().find("gradient_booster/weight_drop: expected 1 values"),
              std::string::npos)
        << f.status().message();
  }
}

TEST(XgboostImport, DartNonFiniteWeightIsRejected) {
  for (const char* wd : {"[NaN]", "[Infinity]", "[-Infinity]", "[1e39]"}) {
    auto f = ImportXgboostJson(DartModel(wd), "m.json");
    ASSERT_FALSE(f.ok()) << wd;
    EXPECT_NE(f.status().message().find("tree 0 has weight"), std::string::npos)
        << f.status().message();
  }
}

TEST(XgboostImport, UnknownObjectiveIsNotSupported) {
  auto f = ImportXgboostJson(Model("[0,0,0]", "0.5", "survival:cox"), "m.json");
  ASSERT_FALSE(f.ok());
  EXPECT_EQ(f.status().code(), StatusCode::kNotSupported);
  EXPECT_NE(f.status().message().find("survival:cox"), std::string::npos);
}

TEST(XgboostImport, MalformedJsonNamesLineAndColumn) {
  auto f = ImportXgboostJson("{\"learner\": {\n  \"x\": [1, 2,, 3]}}", "bad.json");
  ASSERT_FALSE(f.ok());
  EXPECT_NE(f.status().message().find("bad.json: not valid JSON"), std::string::npos);
  EXPECT_NE(f.status().message().find("line 2"), std::string::npos) << f.status().message();
}

TEST(XgboostImport, WrongArrayLengthNamesTheField) {
  std::string m = Model("[0,0]", "0.5");
  auto f = ImportXgboostJson(m, "m.json");
  ASSERT_FALSE(f.ok());
  EXPECT_NE(f.status().message().find("gradient_booster/model/trees/0/default_left"),
            std::string::npos)
      << f.status().message();
}

TEST(XgboostImport, ChildOutOfRangeIsRejected) {
  std::string m = Model("[0,0,0]", "0.5");
  m.replace(m.find("[2,-1,-1]"), 9, "[7,-1,-1]");
  auto f = ImportXgboostJson(m, "m.json");
  ASSERT_FALSE(f.ok());
  EXPECT_NE(f.status().message().find("outside"), std::string::npos);
}

TEST(XgboostImport, FeatureBeyondNumFeatureIsRejected) {
  std::string m = Model("[0,0,0]", "0.5");
  m.replace(m.find("[0,0,0],\"split_conditions"), 7, "[5,0,0]");
  auto f = ImportXgboostJson(m, "m.json");
  ASSERT_FALSE(f.ok());
  EXPECT_NE(f.status().message().find("feature 5"), std::string::npos);
}

TEST(XgboostImport, MissingFieldIsNamed) {
  std::string m = Model("[0,0,0]", "0.5");
  m.replace(m.find("\"tree_info\""), 11, "\"tree_inf0\"");
  auto f = ImportXgboostJson(m, "m.json");
  ASSERT_FALSE(f.ok());
  EXPECT_NE(f.status().message().find("missing field learner/gradient_booster/model/tree_info"),
            std::string::npos)
      << f.status().message();
}

}  // namespace
}  // namespace pacset
