// The in-memory reference predictor. Slow-and-obvious on purpose: every other
// prediction path (packed file, mmap, FUSE mount) is tested against it, and it
// is tested against the training libraries.
#pragma once

#include <cstdint>
#include <vector>

#include "model/forest.h"
#include "model/output.h"
#include "util/row_matrix.h"

namespace pacset {

class ForestPredictor {
 public:
  // `forest` must outlive the predictor and be valid (Forest::Validate).
  explicit ForestPredictor(const Forest& forest);

  // Local id of the leaf reached in tree `t`.
  int32_t LeafIndex(size_t t, const double* row) const;

  // Margins (num_outputs values) for one row.
  void PredictMargin(const double* row, double* margin) const;

  // Predictions (num_prediction_columns values) for one row.
  void Predict(const double* row, double* out) const;

  const OutputRule& output_rule() const { return rule_; }

 private:
  template <typename Acc>
  void Accumulate(const double* row, double* margin) const;

  const Forest& f_;
  OutputRule rule_;
};

// Replaces the forest's cardinalities by the number of `rows` that reach each
// node (the --calibrate option) and sets cardinality_source = kCalibrated.
void CalibrateCardinality(Forest& forest, const RowMatrix& rows);

}  // namespace pacset
