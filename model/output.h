// How summed leaf values become the library's prediction: base score,
// accumulation precision, averaging and the post-processing link. Shared by
// the in-memory predictor and the packed engine so that both produce the same
// bits.
#pragma once

#include <cstdint>
#include <vector>

#include "model/forest.h"

namespace pacset {

struct OutputRule {
  uint32_t num_outputs = 1;
  Postprocess postprocess = Postprocess::kIdentity;
  double sigmoid_alpha = 1.0;
  Aggregation aggregation = Aggregation::kSum;
  Precision accumulate_precision = Precision::kFloat64;
  std::vector<double> base_score;        // per output
  std::vector<double> trees_per_output;  // divisor for Aggregation::kMean

  static OutputRule FromForest(const Forest& forest);

  uint32_t num_prediction_columns() const {
    if (postprocess == Postprocess::kSigmoidPair) return 2;
    return postprocess == Postprocess::kClassIndex ? 1 : num_outputs;
  }

  // Accumulators for one row start at the base score.
  template <typename Acc>
  void Init(Acc* acc) const {
    for (uint32_t k = 0; k < num_outputs; ++k) acc[k] = static_cast<Acc>(base_score[k]);
  }

  // Turns accumulated sums into margins (averaging for random forests) and
  // writes them to `margin` (num_outputs values).
  template <typename Acc>
  void Finish(Acc* acc, double* margin) const {
    for (uint32_t k = 0; k < num_outputs; ++k) {
      if (aggregation == Aggregation::kMean) acc[k] /= static_cast<Acc>(trees_per_output[k]);
      margin[k] = static_cast<double>(acc[k]);
    }
  }

  // Margins -> prediction columns, in accumulate_precision (XGBoost's links
  // run in float32 with expf; the others in float64).
  void Transform(const double* margin, double* out) const;
};

}  // namespace pacset
