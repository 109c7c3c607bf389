// scikit-learn IsolationForest: the importer's leaf values and errors, the
// isolation-score postprocess, decision_function / predict, and the .pac
// section that carries the postprocess's parameters. Exactness against the
// real library: tests/exact/sklearn_exact_test.py and tests/python.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdio>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "engine/engine.h"
#include "layout/pac_file.h"
#include "layout/pack.h"
#include "model/import.h"
#include "model/output.h"
#include "model/predict.h"

namespace pacset {
namespace {

using nlohmann::json;

constexpr double kDenominator = 7.25;
constexpr double kOffset = -0.5;

// x0 <= 0.5 ? leaf 1 (c = 0.3) : (x1 <= 2 ? leaf 3 (c = 1.1) : leaf 4 (c = 0)).
// 0.3 and 1.1 are values for which sklearn's order, (path nodes + c) - 1,
// rounds differently from c + (path nodes - 1).
json IsolationDoc() {
  json tree = {{"children_left", {1, -1, 3, -1, -1}}, {"children_right", {2, -1, 4, -1, -1}},
               {"feature", {0, -2, 1, -2, -2}},       {"threshold", {0.5, -2.0, 2.0, -2.0, -2.0}},
               {"value", {4.0, 0.3, 2.5, 1.1, 0.0}},  {"n_node_samples", {10, 4, 6, 3, 3}}};
  return {{"format", "pacset-sklearn"},
          {"format_version", 1},
          {"sklearn_version", "1.2.1"},
          {"estimator", "IsolationForest"},
          {"task", "outlier_detection"},
          {"n_features", 2},
          {"n_classes", 1},
          {"classes", json::array()},
          {"aggregation", "sum"},
          {"score_denominator", kDenominator},
          {"offset", kOffset},
          {"n_trees", 2},
          {"trees", {tree, tree}}};
}

StatusOr<Forest> Import(const json& doc) { return ImportSklearnJson(doc.dump(), "if.json"); }

double Margin(const Forest& f, double x0, double x1) {
  const double row[2] = {x0, x1};
  double out = 0;
  ForestPredictor(f).PredictMargin(row, &out);
  return out;
}

double Score(const Forest& f, double x0, double x1) {
  const double row[2] = {x0, x1};
  double out = 0;
  ForestPredictor(f).Predict(row, &out);
  return out;
}

void ExpectError(const json& doc, const std::vector<std::string>& parts) {
  auto f = Import(doc);
  ASSERT_FALSE(f.ok());
  for (const auto& p : parts)
    EXPECT_NE(f.status().message().find(p), std::string::npos)
        << "'" << p << "' not in: " << f.status().message();
}

TEST(IsolationForestImport, LeafAddsPathNodesPlusAveragePathLengthMinusOneInThatOrder) {
  auto f = Import(IsolationDoc());
  ASSERT_TRUE(f.ok()) << f.status().ToString();
  EXPECT_EQ(f->postprocess, Postprocess::kIsolationScore);
  EXPECT_EQ(f->num_prediction_columns(), 1u);
  // Two trees, each adding (path nodes + c) - 1.0; the sum starts at 0.
  const double leaf1 = (2.0 + 0.3) - 1.0, leaf3 = (3.0 + 1.1) - 1.0;
  ASSERT_NE(leaf1, 0.3 + 1.0);  // the order matters for these values
  ASSERT_NE(leaf3, 1.1 + 2.0);
  EXPECT_EQ(Margin(*f, 0.5, 0.0), leaf1 + leaf1);
  EXPECT_EQ(Margin(*f, 0.6, 2.0), leaf3 + leaf3);
  EXPECT_EQ(Margin(*f, 0.6, 2.5), 2.0 + 2.0);
}

TEST(IsolationForestImport, ScoreIsMinusTwoToTheMinusMeanDepthOverTheDenominator) {
  auto f = Import(IsolationDoc());
  ASSERT_TRUE(f.ok()) << f.status().ToString();
  const double depths = Margin(*f, 0.6, 2.0);
  EXPECT_EQ(Score(*f, 0.6, 2.0), -std::pow(2.0, -(depths / kDenominator)));
}

TEST(IsolationForestImport, ZeroDenominatorScoresMinusOneHalfAsSklearnDoes) {
  // max_samples_ = 1: c(1) = 0, and sklearn's np.divide(..., out=ones,
  // where=d != 0) leaves 1, so score_samples is -2 ** -1.
  json doc = IsolationDoc();
  doc["score_denominator"] = 0.0;
  auto f = Import(doc);
  ASSERT_TRUE(f.ok()) << f.status().ToString();
  EXPECT_EQ(Score(*f, 0.0, 0.0), -0.5);
}

TEST(IsolationForestImport, ParametersSurviveSaveAndLoad) {
  auto f = Import(IsolationDoc());
  ASSERT_TRUE(f.ok());
  const std::string path = ::testing::TempDir() + "/isolation.forest";
  ASSERT_TRUE(SaveForest(*f, path).ok());
  auto g = LoadForest(path);
  ASSERT_TRUE(g.ok()) << g.status().ToString();
  EXPECT_EQ(g->isolation_denominator, kDenominator);
  EXPECT_EQ(g->isolation_offset, kOffset);
  EXPECT_EQ(Score(*g, 0.6, 2.0), Score(*f, 0.6, 2.0));
  std::remove(path.c_str());
}

TEST(IsolationForestImport, ValidateRefusesAnIsolationScoreItCannotCompute) {
  auto f = Import(IsolationDoc());
  ASSERT_TRUE(f.ok());
  Forest g = *f;
  g.accumulate_precision = Precision::kFloat32;
  EXPECT_FALSE(g.Validate().ok());
  g = *f;
  g.isolation_offset = NAN;
  EXPECT_FALSE(g.Validate().ok());
  g = *f;
  g.isolation_denominator = -1.0;
  Status s = g.Validate();
  ASSERT_FALSE(s.ok());
  EXPECT_NE(s.message().find("isolation-score"), std::string::npos) << s.ToString();
}

TEST(IsolationForestImport, RejectsANegativeOrMissingDenominator) {
  json doc = IsolationDoc();
  doc["score_denominator"] = -1.0;
  ExpectError(doc, {"if.json", "score_denominator", "at least 0"});
  doc.erase("score_denominator");
  ExpectError(doc, {"score_denominator"});
}

TEST(IsolationForestImport, RejectsANonFiniteOrMissingOffset) {
  json doc = IsolationDoc();
  doc["offset"] = 1e308 * 10;  // json writes inf as null
  ExpectError(doc, {"offset"});
  doc.erase("offset");
  ExpectError(doc, {"offset"});
}

TEST(IsolationForestImport, RejectsAnotherTaskOrAggregation) {
  json doc = IsolationDoc();
  doc["task"] = "regression";
  ExpectError(doc, {"task", "outlier_detection"});
  doc = IsolationDoc();
  doc["aggregation"] = "mean";
  ExpectError(doc, {"aggregation", "\"sum\""});
}

TEST(IsolationForestImport, RejectsClasses) {
  json doc = IsolationDoc();
  doc["n_classes"] = 2;
  ExpectError(doc, {"n_classes"});
}

TEST(IsolationForestImport, RejectsAValueArrayOfTheWrongLength) {
  json doc = IsolationDoc();
  doc["trees"][1]["value"] = {1.0, 2.0};
  ExpectError(doc, {"trees/1/value", "expected 5 values"});
}

TEST(IsolationMethod, DecisionIsScoreMinusOffsetAndPredictIsItsSign) {
  const double offset = -0.6;
  std::vector<double> scores = {-0.7, -0.6, -0.5, -0.6000000000000001};
  std::vector<double> decision = scores, label = scores;
  ApplyIsolationMethod(IsolationMethod::kDecisionFunction, offset, decision.data(), 4);
  ApplyIsolationMethod(IsolationMethod::kPredict, offset, label.data(), 4);
  for (size_t i = 0; i < scores.size(); ++i) {
    EXPECT_EQ(decision[i], scores[i] - offset);
    // sklearn: -1 where decision_function < 0; a decision of exactly 0 is an inlier.
    EXPECT_EQ(label[i], scores[i] - offset < 0 ? -1.0 : 1.0);
  }
  EXPECT_EQ(label[1], 1.0);
  EXPECT_EQ(label[3], -1.0);
  std::vector<double> same = scores;
  ApplyIsolationMethod(IsolationMethod::kScoreSamples, offset, same.data(), 4);
  EXPECT_EQ(same, scores);
}

TEST(IsolationMethod, ParsesSklearnMethodNamesOnly) {
  EXPECT_EQ(*ParseIsolationMethod("decision_function"), IsolationMethod::kDecisionFunction);
  EXPECT_EQ(*ParseIsolationMethod("predict"), IsolationMethod::kPredict);
  EXPECT_EQ(*ParseIsolationMethod("score_samples"), IsolationMethod::kScoreSamples);
  auto bad = ParseIsolationMethod("predict_proba");
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.status().message().find("score_samples"), std::string::npos);
}

std::string PackedIsolation() {
  auto f = Import(IsolationDoc());
  EXPECT_TRUE(f.ok());
  PackOptions o;
  o.block_size = 4096;
  auto bytes = PackForestToBuffer(*f, o);
  EXPECT_TRUE(bytes.ok()) << bytes.status().ToString();
  return *bytes;
}

TEST(IsolationPac, ParametersLiveInARequiredSectionAndPredictLikeTheForest) {
  const std::string bytes = PackedIsolation();
  auto file = PacFile::FromBuffer(bytes, "if.pac");
  ASSERT_TRUE(file.ok()) << file.status().ToString();
  EXPECT_EQ((*file)->postprocess_params(), (std::vector<double>{kDenominator, kOffset}));
  const SectionEntry* s = (*file)->header().FindSection(SectionType::kPostprocessParams);
  ASSERT_NE(s, nullptr);
  EXPECT_EQ(s->flags & kSectionRequired, kSectionRequired);
  auto engine = PacEngine::FromFile(std::move(*file));
  ASSERT_TRUE(engine.ok()) << engine.status().ToString();
  EXPECT_EQ((*engine)->output_rule().isolation_offset, kOffset);
  auto forest = Import(IsolationDoc());
  RowMatrix rows;
  rows.num_rows = 3;
  rows.num_cols = 2;
  rows.values = {0.5, 0.0, 0.6, 2.0, 0.6, 2.5};
  std::vector<double> out;
  ASSERT_TRUE((*engine)->PredictAll(rows, false, 1, &out).ok());
  ASSERT_EQ(out.size(), 3u);
  for (size_t r = 0; r < 3; ++r)
    EXPECT_EQ(out[r], Score(*forest, rows.values[2 * r], rows.values[2 * r + 1]));
}

// max_samples=1: every tree is a single leaf (no internal node in the whole
// file). Regression: the engine's warm walk parked idle lanes on node 0 and
// read past the (empty) node array.
TEST(IsolationPac, ForestOfSingleLeafTreesPredictsThroughTheEngine) {
  json leaf = {{"children_left", {-1}}, {"children_right", {-1}}, {"feature", {-2}},
               {"threshold", {-2.0}},   {"value", {0.0}},         {"n_node_samples", {1}}};
  json doc = IsolationDoc();
  doc["score_denominator"] = 0.0;
  doc["trees"] = {leaf, leaf, leaf};
  doc["n_trees"] = 3;
  auto f = Import(doc);
  ASSERT_TRUE(f.ok()) << f.status().ToString();
  auto bytes = PackForestToBuffer(*f, PackOptions{});
  ASSERT_TRUE(bytes.ok()) << bytes.status().ToString();
  auto file = PacFile::FromBuffer(*bytes, "leaves.pac");
  ASSERT_TRUE(file.ok()) << file.status().ToString();
  auto engine = PacEngine::FromFile(std::move(*file));
  ASSERT_TRUE(engine.ok()) << engine.status().ToString();
  for (size_t n : {1, 5, 40}) {
    RowMatrix rows;
    rows.num_rows = n;
    rows.num_cols = 2;
    rows.values.assign(2 * n, 0.25);
    std::vector<double> depths, scores;
    ASSERT_TRUE((*engine)->PredictAll(rows, true, 1, &depths).ok());
    ASSERT_TRUE((*engine)->PredictAll(rows, false, 1, &scores).ok());
    EXPECT_EQ(depths, std::vector<double>(n, 0.0));  // (1 + c(1)) - 1 per tree
    EXPECT_EQ(scores, std::vector<double>(n, -0.5));
  }
}

// The header of `bytes` changed by `edit`, re-encoded, and decoded again.
Status DecodeEdited(const std::string& bytes, void (*edit)(PacHeader&)) {
  auto h = PacHeader::DecodeFromFile(bytes.data(), bytes.size(), "if.pac");
  EXPECT_TRUE(h.ok());
  edit(*h);
  std::string stream(h->EncodedSize(), '\0');
  h->EncodeTo(stream.data());
  return PacHeader::DecodeFrom(stream.data(), stream.size(), "if.pac").status();
}

TEST(IsolationPac, RefusesAnIsolationScoreWithoutItsParameters) {
  Status s = DecodeEdited(PackedIsolation(), [](PacHeader& h) {
    for (size_t i = 0; i < h.sections.size(); ++i)
      if (h.sections[i].type == static_cast<uint32_t>(SectionType::kPostprocessParams))
        h.sections.erase(h.sections.begin() + i);
  });
  ASSERT_FALSE(s.ok());
  EXPECT_NE(s.message().find("takes 2 parameters"), std::string::npos) << s.ToString();
}

TEST(IsolationPac, RefusesParametersForAPostprocessThatTakesNone) {
  Status s = DecodeEdited(PackedIsolation(), [](PacHeader& h) { h.postprocess = 0; });
  ASSERT_FALSE(s.ok());
  EXPECT_NE(s.message().find("takes 0 parameters"), std::string::npos) << s.ToString();
}

TEST(IsolationPac, RefusesAnUnknownPostprocessAsOlderReadersRefuseThisOne) {
  Status s = DecodeEdited(PackedIsolation(), [](PacHeader& h) { h.postprocess = 7; });
  ASSERT_FALSE(s.ok());
  EXPECT_NE(s.message().find("unknown postprocess 7"), std::string::npos) << s.ToString();
}

TEST(IsolationPac, RefusesFloat32Accumulation) {
  Status s = DecodeEdited(PackedIsolation(), [](PacHeader& h) { h.accumulate_precision = 0; });
  ASSERT_FALSE(s.ok());
  EXPECT_NE(s.message().find("float64"), std::string::npos) << s.ToString();
}

}  // namespace
}  // namespace pacset
