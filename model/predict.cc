#include "model/predict.h"

#include <cmath>

#include "model/routing.h"

namespace pacset {

ForestPredictor::ForestPredictor(const Forest& forest)
    : f_(forest), rule_(OutputRule::FromForest(forest)) {}

int32_t ForestPredictor::LeafIndex(size_t t, const double* row) const {
  const uint64_t base = f_.tree_offset[t];
  int32_t node = 0;
  while (f_.left_child[base + node] >= 0) node = ForestChild(f_, base + node, row);
  return node;
}

template <typename Acc>
void ForestPredictor::Accumulate(const double* row, double* margin) const {
  std::vector<Acc> acc(f_.num_outputs);
  rule_.Init(acc.data());
  const uint32_t w = f_.leaf_width;
  for (size_t t = 0; t < f_.num_trees(); ++t) {
    const uint64_t leaf = f_.tree_offset[t] + LeafIndex(t, row);
    if (w == 1) {
      acc[f_.tree_group[t]] += static_cast<Acc>(f_.leaf_value[leaf]);
    } else {
      for (uint32_t k = 0; k < w; ++k) acc[k] += static_cast<Acc>(f_.leaf_value[leaf * w + k]);
    }
  }
  rule_.Finish(acc.data(), margin);
}

void ForestPredictor::PredictMargin(const double* row, double* margin) const {
  if (f_.accumulate_precision == Precision::kFloat32) {
    Accumulate<float>(row, margin);
  } else {
    Accumulate<double>(row, margin);
  }
}

void ForestPredictor::Predict(const double* row, double* out) const {
  std::vector<double> margin(f_.num_outputs);
  PredictMargin(row, margin.data());
  rule_.Transform(margin.data(), out);
}

void CalibrateCardinality(Forest& forest, const RowMatrix& rows) {
  std::fill(forest.cardinality.begin(), forest.cardinality.end(), 0.0);
  for (size_t r = 0; r < rows.num_rows; ++r) {
    const double* row = rows.row(r);
    for (size_t t = 0; t < forest.num_trees(); ++t) {
      const uint64_t base = forest.tree_offset[t];
      int32_t node = 0;
      forest.cardinality[base] += 1;
      while (forest.left_child[base + node] >= 0) {
        node = ForestChild(forest, base + node, row);
        forest.cardinality[base + node] += 1;
      }
    }
  }
  forest.cardinality_source = CardinalitySource::kCalibrated;
}

}  // namespace pacset
