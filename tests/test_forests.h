// Small hand-built forests for unit tests.
#pragma once

#include <vector>

#include "model/forest.h"
#include "model/predict.h"

namespace pacset::testing {

// One row's margins and prediction columns from the in-memory predictor.
inline std::vector<double> Margins(const Forest& f, const std::vector<double>& row) {
  std::vector<double> m(f.num_outputs);
  ForestPredictor(f).PredictMargin(row.data(), m.data());
  return m;
}
inline std::vector<double> Predictions(const Forest& f, const std::vector<double>& row) {
  std::vector<double> p(f.num_prediction_columns());
  ForestPredictor(f).Predict(row.data(), p.data());
  return p;
}

// Two float32 regression trees over 2 features:
//   tree 0: x0 <= 0.5 ? (x1 <= 2 ? 1 : 2) : 3      (missing goes left at the root)
//   tree 1: x1 <= -1 ? 10 : 20
inline Forest TwoTreeRegression() {
  Forest f;
  f.num_features = 2;
  f.base_score = {0.5};
  f.input_precision = Precision::kFloat32;
  f.accumulate_precision = Precision::kFloat32;
  f.cardinality_source = CardinalitySource::kTraining;
  uint64_t r = f.AddTree(0, 5);
  f.left_child[r] = 1;
  f.right_child[r] = 2;
  f.split_feature[r] = 0;
  f.threshold[r] = 0.5;
  f.flags[r] = kDefaultLeft;
  f.left_child[r + 1] = 3;
  f.right_child[r + 1] = 4;
  f.split_feature[r + 1] = 1;
  f.threshold[r + 1] = 2;
  f.leaf_value[r + 2] = 3;
  f.leaf_value[r + 3] = 1;
  f.leaf_value[r + 4] = 2;
  f.cardinality[r] = 10;
  f.cardinality[r + 1] = 7;
  f.cardinality[r + 2] = 3;
  f.cardinality[r + 3] = 5;
  f.cardinality[r + 4] = 2;
  r = f.AddTree(0, 3);
  f.left_child[r] = 1;
  f.right_child[r] = 2;
  f.split_feature[r] = 1;
  f.threshold[r] = -1;
  f.leaf_value[r + 1] = 10;
  f.leaf_value[r + 2] = 20;
  f.cardinality[r] = 10;
  f.cardinality[r + 1] = 4;
  f.cardinality[r + 2] = 6;
  return f;
}

}  // namespace pacset::testing
