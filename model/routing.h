// The one routing rule every prediction path shares (in-memory predictor,
// packed mmap engine, analytical I/O counting). Keeping it in one inline
// function is what makes "every path agrees" true by construction.
#pragma once

#include <cmath>
#include <cstdint>

#include "model/forest.h"

namespace pacset {

// LightGBM's kZeroThreshold is declared `const double = 1e-35f`.
inline constexpr double kLightgbmZeroThreshold = static_cast<double>(1e-35f);

// `x` is the input value already rounded to the forest's input precision.
// Returns true when the row goes to the left child.
template <typename T>
inline bool GoesLeft(T x, T threshold, uint8_t flags) {
  if (__builtin_expect(!(flags & (kNanIsZero | kZeroIsMissing)), 1)) {
    // XGBoost, scikit-learn and LightGBM's NaN type: NaN takes the default
    // direction. Branch-free: a NaN compares false.
    return (x <= threshold) | (std::isnan(x) & static_cast<bool>(flags & kDefaultLeft));
  }
  if (std::isnan(x)) {
    if (!(flags & kNanIsZero)) return flags & kDefaultLeft;
    x = T(0);
  }
  if ((flags & kZeroIsMissing) && x >= T(-kLightgbmZeroThreshold) && x <= T(kLightgbmZeroThreshold))
    return flags & kDefaultLeft;
  return x <= threshold;
}

// The local id of the child of internal node `g` (global id) that `row`
// goes to, for a Forest in memory.
inline int32_t ForestChild(const Forest& f, uint64_t g, const double* row) {
  const double x = row[f.split_feature[g]];
  const bool left =
      f.input_precision == Precision::kFloat32
          ? GoesLeft<float>(static_cast<float>(x), static_cast<float>(f.threshold[g]), f.flags[g])
          : GoesLeft<double>(x, f.threshold[g], f.flags[g]);
  return left ? f.left_child[g] : f.right_child[g];
}

}  // namespace pacset
