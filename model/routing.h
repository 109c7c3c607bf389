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

// The category of `x` (not NaN) under a CategoryRule, or -1 when x is no
// category (docs: model/forest.h CategoryRule, layout/FORMAT.md §3).
template <typename T>
inline int64_t CategoryOf(T x, uint8_t rule) {
  constexpr double kTwo31 = 2147483648.0;
  switch (static_cast<CategoryRule>(rule)) {
    case CategoryRule::kXgboost:
      return x >= T(0) && static_cast<double>(x) < 16777216.0 ? static_cast<int64_t>(x) : -1;
    case CategoryRule::kLightgbm: {
      const double t = std::trunc(static_cast<double>(x));
      return t >= 0.0 && t < kTwo31 ? static_cast<int64_t>(t) : -1;
    }
    case CategoryRule::kSklearn:
      return x >= T(0) && static_cast<double>(x) < kTwo31 ? static_cast<int64_t>(x) : -1;
  }
  return -1;
}

// Whether category `c` is in the bitset of `n` words at `words` (c = -1,
// no category, is in no set). Without a data-dependent branch: the word is
// read through a pointer chosen by a conditional move (a zero word when
// the category lies beyond the set), since the outcome is unpredictable.
inline bool InCategorySet(const uint32_t* words, uint32_t n, int64_t c) {
  static constexpr uint32_t kNoWord = 0;
  const uint64_t w = static_cast<uint64_t>(c) >> 5;  // c = -1: beyond every set
  const uint32_t* word = w < n ? words + w : &kNoWord;
  return (*word >> (c & 31)) & 1u;
}

// A categorical split's direction for `x` (already rounded to the input
// precision): NaN takes the default direction; a category in the left set
// goes left, else one in the right set goes right; anything else goes the
// node's OutsideDirection. `words` is the forest's category words; the
// split's ranges lie inside them (checked where the split was read).
template <typename T>
inline bool CategoricalGoesLeft(T x, uint8_t flags, const CategoricalSplit& s,
                                const uint32_t* words) {
  const bool default_left = flags & kDefaultLeft;
  if (std::isnan(x)) return default_left;
  const int64_t c = CategoryOf(x, s.rule);
  const bool in_left = InCategorySet(words + s.left_first, s.left_words, c);
  const bool in_right = InCategorySet(words + s.right_first, s.right_words, c);
  const uint8_t outside = (flags & kOutsideMask) >> kOutsideShift;
  const bool outside_left =
      (outside == static_cast<uint8_t>(OutsideDirection::kLeft)) |
      ((outside == static_cast<uint8_t>(OutsideDirection::kDefault)) & default_left);
  return in_left | (!in_right & outside_left);
}

// `x` is the input value already rounded to the forest's input precision.
// Returns true when the row goes to the left child. For a numerical node.
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
  const bool f32 = f.input_precision == Precision::kFloat32;
  bool left;
  if (f.flags[g] & kCategorical) {
    const CategoricalSplit& s = f.categorical_splits[static_cast<size_t>(f.threshold[g])];
    left = f32 ? CategoricalGoesLeft<float>(static_cast<float>(x), f.flags[g], s,
                                            f.category_words.data())
               : CategoricalGoesLeft<double>(x, f.flags[g], s, f.category_words.data());
  } else {
    left =
        f32 ? GoesLeft<float>(static_cast<float>(x), static_cast<float>(f.threshold[g]), f.flags[g])
            : GoesLeft<double>(x, f.threshold[g], f.flags[g]);
  }
  return left ? f.left_child[g] : f.right_child[g];
}

}  // namespace pacset
