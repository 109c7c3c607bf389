#include "model/array_import.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <limits>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "model/import.h"
#include "model/predict.h"

namespace pacset {
namespace {

// scikit-learn's node record (sklearn/tree/_tree.pxd): arrays are strided views into it.
struct SkNode {
  int64_t left, right, feature;
  double threshold, impurity;
  int64_t n_node_samples;
  double weighted;
};

ArrayView Field(const std::vector<SkNode>& nodes, size_t offset, ElementType type) {
  ArrayView a;
  a.data = reinterpret_cast<const char*>(nodes.data()) + offset;
  a.size = nodes.size();
  a.stride = sizeof(SkNode);
  a.type = type;
  return a;
}

// x0 <= 0.3 ? [3, 1] : (x1 <= 2.5 ? [0, 2] : [4, 0])
struct Classifier {
  std::vector<SkNode> nodes = {{1, 2, 0, 0.3, 0, 10, 10},
                               {-1, -1, -2, -2, 0, 4, 4},
                               {3, 4, 1, 2.5, 0, 6, 6},
                               {-1, -1, -2, -2, 0, 2, 2},
                               {-1, -1, -2, -2, 0, 4, 4}};
  std::vector<double> value = {7, 3, 3, 1, 4, 2, 0, 2, 4, 0};

  SklearnEstimatorArrays Estimator() const {
    SklearnEstimatorArrays e;
    e.estimator = "RandomForestClassifier";
    e.sklearn_version = "1.2.1";
    e.n_features = 2;
    e.n_classes = 2;
    SklearnTreeArrays t;
    t.children_left = Field(nodes, offsetof(SkNode, left), ElementType::kInt64);
    t.children_right = Field(nodes, offsetof(SkNode, right), ElementType::kInt64);
    t.feature = Field(nodes, offsetof(SkNode, feature), ElementType::kInt64);
    t.threshold = Field(nodes, offsetof(SkNode, threshold), ElementType::kFloat64);
    t.n_node_samples = Field(nodes, offsetof(SkNode, n_node_samples), ElementType::kInt64);
    t.value = ArrayView::Of(value);
    e.trees = {t, t};
    return e;
  }
};

std::vector<double> Predict(const Forest& f, double x0, double x1) {
  const double row[2] = {x0, x1};
  std::vector<double> out(f.num_prediction_columns());
  ForestPredictor(f).Predict(row, out.data());
  return out;
}

TEST(SklearnArrays, StridedNodeRecordsImportLikeTheExportedJson) {
  Classifier c;
  auto f = ImportSklearnArrays(c.Estimator(), "est");
  ASSERT_TRUE(f.ok()) << f.status().ToString();
  EXPECT_EQ(Predict(*f, 0.2, 0), (std::vector<double>{0.75, 0.25}));
  EXPECT_EQ(Predict(*f, 0.4, 3), (std::vector<double>{1.0, 0.0}));
  // The same estimator through the JSON exporter's format gives the same forest.
  nlohmann::json tree = {{"children_left", {1, -1, 3, -1, -1}},
                         {"children_right", {2, -1, 4, -1, -1}},
                         {"feature", {0, -2, 1, -2, -2}},
                         {"threshold", {0.3, -2, 2.5, -2, -2}},
                         {"value", c.value},
                         {"n_node_samples", {10, 4, 6, 2, 4}}};
  nlohmann::json doc = {{"format", "pacset-sklearn"},
                        {"format_version", 1},
                        {"sklearn_version", "1.2.1"},
                        {"estimator", "RandomForestClassifier"},
                        {"task", "binary"},
                        {"n_features", 2},
                        {"n_classes", 2},
                        {"classes", {0, 1}},
                        {"aggregation", "mean"},
                        {"trees", {tree, tree}}};
  auto g = ImportSklearnJson(doc.dump(), "m.json");
  ASSERT_TRUE(g.ok()) << g.status().ToString();
  EXPECT_EQ(f->threshold, g->threshold);
  EXPECT_EQ(f->leaf_value, g->leaf_value);
  EXPECT_EQ(f->flags, g->flags);
  EXPECT_EQ(f->cardinality, g->cardinality);
}

TEST(SklearnArrays, ErrorsNameTheTreeAndField) {
  Classifier c;
  c.nodes[2].left = 9;
  auto f = ImportSklearnArrays(c.Estimator(), "est");
  ASSERT_FALSE(f.ok());
  EXPECT_NE(f.status().message().find("est: trees/0/children_left: node 2 has child 9"),
            std::string::npos)
      << f.status().message();
  Classifier d;
  auto e = d.Estimator();
  e.trees[1].value.size = 9;
  f = ImportSklearnArrays(e, "est");
  ASSERT_FALSE(f.ok());
  EXPECT_NE(f.status().message().find("trees/1/value: expected 10 values, found 9"),
            std::string::npos)
      << f.status().message();
  e = d.Estimator();
  e.estimator = "BaggingRegressor";
  EXPECT_EQ(ImportSklearnArrays(e, "est").status().code(), StatusCode::kNotSupported);
}

// The stream `pacset-sklearn-export --stream` writes: arrays in place after the JSON.
TEST(SklearnStream, ReadsBlobArraysAndRefusesReferencesOutsideTheStream) {
  std::string blob;
  auto put = [&](const auto& v) {
    const size_t offset = blob.size();
    blob.append(reinterpret_cast<const char*>(v.data()), v.size() * sizeof(v[0]));
    return nlohmann::json{
        {"dtype", sizeof(v[0]) == 8 && std::is_floating_point_v<std::decay_t<decltype(v[0])>>
                      ? "<f8"
                      : "<i8"},
        {"blob", {offset, v.size()}}};
  };
  nlohmann::json tree = {{"children_left", put(std::vector<int64_t>{1, -1, -1})},
                         {"children_right", put(std::vector<int64_t>{2, -1, -1})},
                         {"feature", put(std::vector<int64_t>{1, -2, -2})},
                         {"threshold", put(std::vector<double>{1.5, -2, -2})},
                         {"value", put(std::vector<double>{0, 4, 8})},
                         {"n_node_samples", put(std::vector<int64_t>{3, 1, 2})}};
  nlohmann::json doc = {{"format", "pacset-sklearn"},
                        {"format_version", 1},
                        {"sklearn_version", "1.2.1"},
                        {"estimator", "DecisionTreeRegressor"},
                        {"task", "regression"},
                        {"n_features", 2},
                        {"n_classes", 1},
                        {"classes", nlohmann::json::array()},
                        {"aggregation", "mean"},
                        {"trees", {tree}}};
  auto stream = [&](const nlohmann::json& d, const std::string& b) {
    const std::string text = d.dump();
    std::string s(kSklearnStreamMagic, sizeof(kSklearnStreamMagic));
    const uint64_t n = text.size();
    s.append(reinterpret_cast<const char*>(&n), 8);
    return s + text + b;
  };
  auto f = ImportSklearnStream(stream(doc, blob), "m.joblib");
  ASSERT_TRUE(f.ok()) << f.status().ToString();
  EXPECT_EQ(Predict(*f, 0, 1.0)[0], 4.0);
  EXPECT_EQ(Predict(*f, 0, 2.0)[0], 8.0);
  EXPECT_EQ(f->source.format, "sklearn-pickle");
  // A blob reference past the end, and a truncated stream.
  auto bad = ImportSklearnStream(stream(doc, blob.substr(0, blob.size() - 8)), "m.joblib");
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.status().message().find("outside the stream"), std::string::npos)
      << bad.status().message();
  EXPECT_FALSE(ImportSklearnStream(stream(doc, blob).substr(0, 30), "m.joblib").ok());
  EXPECT_FALSE(ImportSklearnStream("PACSKL", "m.joblib").ok());
}

TEST(FlatBuilder, StrictLessThresholdsRouteExactlyAtFloat32) {
  std::vector<int32_t> left = {1, -1, -1}, right = {2, -1, -1}, feature = {0, 0, 0};
  std::vector<float> threshold = {0.5f, 0, 0}, value = {0, -1, 1};
  std::vector<uint8_t> default_left = {1, 0, 0};
  FlatForestSpec spec;
  spec.num_features = 1;
  spec.accumulate_precision = Precision::kFloat32;
  FlatTreeArrays t;
  t.left_child = ArrayView::Of(left);
  t.right_child = ArrayView::Of(right);
  t.feature = ArrayView::Of(feature);
  t.threshold = ArrayView::Of(threshold);
  t.leaf_value = ArrayView::Of(value);
  t.default_left = ArrayView::Of(default_left);
  spec.trees = {t};
  for (bool strict : {false, true}) {
    spec.strict_less = strict;
    auto f = BuildForestFromArrays(spec, "arrays");
    ASSERT_TRUE(f.ok()) << f.status().ToString();
    ForestPredictor p(*f);
    double out;
    const double at = 0.5, above = std::nextafter(0.5f, 1.0f), nan = std::nan("");
    p.Predict(&at, &out);
    EXPECT_EQ(out, strict ? 1.0 : -1.0);
    p.Predict(&above, &out);
    EXPECT_EQ(out, 1.0);
    p.Predict(&nan, &out);
    EXPECT_EQ(out, -1.0);  // default left
  }
}

TEST(FlatBuilder, RefusesChildrenOutOfRangeAndSharedChildren) {
  std::vector<int64_t> left = {1, -1, -1}, right = {3, -1, -1}, feature = {0, 0, 0};
  std::vector<double> threshold = {0.5, 0, 0}, value = {0, 1, 2};
  FlatForestSpec spec;
  spec.num_features = 1;
  FlatTreeArrays t;
  t.left_child = ArrayView::Of(left);
  t.right_child = ArrayView::Of(right);
  t.feature = ArrayView::Of(feature);
  t.threshold = ArrayView::Of(threshold);
  t.leaf_value = ArrayView::Of(value);
  spec.trees = {t};
  auto f = BuildForestFromArrays(spec, "arrays");
  ASSERT_FALSE(f.ok());
  EXPECT_NE(f.status().message().find("trees/0/right_child: node 0 has a child outside -1..2"),
            std::string::npos)
      << f.status().message();
  right = {1, -1, -1};
  f = BuildForestFromArrays(spec, "arrays");
  ASSERT_FALSE(f.ok());
  EXPECT_NE(f.status().message().find("two parents"), std::string::npos) << f.status().message();
}

}  // namespace
}  // namespace pacset
