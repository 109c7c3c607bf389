#include <gtest/gtest.h>

#include <cmath>
#include <limits>

#include "model/import.h"
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

TEST(XgboostImport, CategoricalSplitsAreRejectedClearly) {
  auto f = ImportXgboostJson(Model("[0,0,0]", "0.5", "reg:squarederror", "[1,0,0]"), "m.json");
  ASSERT_FALSE(f.ok());
  EXPECT_EQ(f.status().code(), StatusCode::kNotSupported);
  EXPECT_NE(f.status().message().find("tree 0 node 0 is a categorical split"), std::string::npos);
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
