// How summed leaf values become the library's prediction: base score,
// accumulation precision, averaging and the post-processing link. Shared by
// the in-memory predictor and the packed engine so that both produce the same
// bits.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "model/forest.h"
#include "util/status.h"

namespace pacset {

struct OutputRule {
  uint32_t num_outputs = 1;
  Postprocess postprocess = Postprocess::kIdentity;
  double sigmoid_alpha = 1.0;
  double isolation_denominator = 0.0;  // Postprocess::kIsolationScore only
  double isolation_offset = 0.0;
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

// scikit-learn IsolationForest's three outputs. pacset computes
// score_samples (Postprocess::kIsolationScore); the other two follow from it
// exactly as sklearn derives them (ensemble/_iforest.py).
enum class IsolationMethod : uint8_t {
  kScoreSamples = 0,
  kDecisionFunction = 1,  // score_samples - offset_
  kPredict = 2,           // -1 where decision_function < 0, else 1
};

// Parses "score_samples", "decision_function", "predict".
StatusOr<IsolationMethod> ParseIsolationMethod(const std::string& name);

// Turns `n` score_samples values into `method`'s values, in place.
void ApplyIsolationMethod(IsolationMethod method, double offset, double* scores, size_t n);

}  // namespace pacset
