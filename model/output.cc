#include "model/output.h"

#include <algorithm>
#include <cmath>

namespace pacset {

OutputRule OutputRule::FromForest(const Forest& f) {
  OutputRule r;
  r.num_outputs = f.num_outputs;
  r.postprocess = f.postprocess;
  r.sigmoid_alpha = f.sigmoid_alpha;
  r.isolation_denominator = f.isolation_denominator;
  r.isolation_offset = f.isolation_offset;
  r.aggregation = f.aggregation;
  r.accumulate_precision = f.accumulate_precision;
  r.base_score = f.base_score;
  r.trees_per_output.assign(f.num_outputs, 0.0);
  for (size_t t = 0; t < f.num_trees(); ++t) {
    if (f.leaf_width > 1) {
      for (auto& c : r.trees_per_output) c += 1;
    } else {
      r.trees_per_output[f.tree_group[t]] += 1;
    }
  }
  for (auto& c : r.trees_per_output) c = std::max(c, 1.0);
  return r;
}

namespace {

// IsolationForest._compute_score_samples: 2 ** (-np.divide(depths, d,
// out=ones, where=d != 0)), negated by score_samples. numpy's power on
// AVX512 machines is not C's pow: up to 1 ulp apart (docs/sklearn-export.md).
double IsolationScore(const OutputRule& r, double depths) {
  const double x = r.isolation_denominator != 0.0 ? depths / r.isolation_denominator : 1.0;
  return -std::pow(2.0, -x);
}

template <typename T>
size_t ArgMax(const T* v, uint32_t n) {
  size_t best = 0;
  for (uint32_t k = 1; k < n; ++k)
    if (v[k] > v[best]) best = k;
  return best;
}

void TransformFloat32(const OutputRule& r, const double* margin, double* out) {
  const uint32_t n = r.num_outputs;
  switch (r.postprocess) {
    case Postprocess::kIdentity:
      for (uint32_t k = 0; k < n; ++k) out[k] = margin[k];
      return;
    case Postprocess::kSigmoid:
      // xgboost 1.7 common::Sigmoid
      for (uint32_t k = 0; k < n; ++k) {
        const float x = static_cast<float>(margin[k]) * static_cast<float>(r.sigmoid_alpha);
        out[k] = 1.0f / (1.0f + expf(-x));
      }
      return;
    case Postprocess::kSigmoidPair: {
      const float x = static_cast<float>(margin[0]) * static_cast<float>(r.sigmoid_alpha);
      const float p = 1.0f / (1.0f + expf(-x));
      out[0] = 1.0f - p;
      out[1] = p;
      return;
    }
    case Postprocess::kExponential:
      for (uint32_t k = 0; k < n; ++k) out[k] = expf(static_cast<float>(margin[k]));
      return;
    case Postprocess::kSoftmax: {
      // xgboost 1.7 common::Softmax: float max, float exps, double sum.
      float wmax = static_cast<float>(margin[0]);
      for (uint32_t k = 1; k < n; ++k) wmax = std::max(static_cast<float>(margin[k]), wmax);
      double wsum = 0.0;
      for (uint32_t k = 0; k < n; ++k) {
        const float e = expf(static_cast<float>(margin[k]) - wmax);
        out[k] = e;
        wsum += e;
      }
      for (uint32_t k = 0; k < n; ++k)
        out[k] = static_cast<float>(out[k]) / static_cast<float>(wsum);
      return;
    }
    case Postprocess::kClassIndex: {
      // Compare in float32, like xgboost; the first maximum wins.
      size_t best = 0;
      for (uint32_t k = 1; k < n; ++k)
        if (static_cast<float>(margin[k]) > static_cast<float>(margin[best])) best = k;
      out[0] = static_cast<double>(best);
      return;
    }
    case Postprocess::kIsolationScore:  // float64 only (Forest::Validate, FORMAT.md)
      out[0] = IsolationScore(r, margin[0]);
      return;
  }
}

void TransformFloat64(const OutputRule& r, const double* margin, double* out) {
  const uint32_t n = r.num_outputs;
  switch (r.postprocess) {
    case Postprocess::kIdentity:
      for (uint32_t k = 0; k < n; ++k) out[k] = margin[k];
      return;
    case Postprocess::kSigmoid:
      for (uint32_t k = 0; k < n; ++k)
        out[k] = 1.0 / (1.0 + std::exp(-r.sigmoid_alpha * margin[k]));
      return;
    case Postprocess::kSigmoidPair: {
      // sklearn: proba[:, 1] = expit(alpha * raw); proba[:, 0] = 1 - proba[:, 1].
      const double p = 1.0 / (1.0 + std::exp(-r.sigmoid_alpha * margin[0]));
      out[0] = 1.0 - p;
      out[1] = p;
      return;
    }
    case Postprocess::kExponential:
      for (uint32_t k = 0; k < n; ++k) out[k] = std::exp(margin[k]);
      return;
    case Postprocess::kSoftmax: {
      double wmax = margin[0];
      for (uint32_t k = 1; k < n; ++k) wmax = std::max(margin[k], wmax);
      double wsum = 0.0;
      for (uint32_t k = 0; k < n; ++k) {
        out[k] = std::exp(margin[k] - wmax);
        wsum += out[k];
      }
      for (uint32_t k = 0; k < n; ++k) out[k] /= wsum;
      return;
    }
    case Postprocess::kClassIndex:
      out[0] = static_cast<double>(ArgMax(margin, n));
      return;
    case Postprocess::kIsolationScore:
      out[0] = IsolationScore(r, margin[0]);
      return;
  }
}

}  // namespace

void OutputRule::Transform(const double* margin, double* out) const {
  if (accumulate_precision == Precision::kFloat32) {
    TransformFloat32(*this, margin, out);
  } else {
    TransformFloat64(*this, margin, out);
  }
}

StatusOr<IsolationMethod> ParseIsolationMethod(const std::string& name) {
  if (name == "score_samples") return IsolationMethod::kScoreSamples;
  if (name == "decision_function") return IsolationMethod::kDecisionFunction;
  if (name == "predict") return IsolationMethod::kPredict;
  return Status::InvalidArgument("method '" + name.substr(0, 40) +
                                 "' is not score_samples, decision_function or predict");
}

void ApplyIsolationMethod(IsolationMethod method, double offset, double* scores, size_t n) {
  if (method == IsolationMethod::kScoreSamples) return;
  for (size_t i = 0; i < n; ++i) {
    const double decision = scores[i] - offset;
    scores[i] = method == IsolationMethod::kDecisionFunction ? decision : decision < 0 ? -1.0 : 1.0;
  }
}

}  // namespace pacset
