// The exactness check shared by engine tests: a PacEngine against the
// in-memory ForestPredictor, bit for bit.
#pragma once

#include <gtest/gtest.h>

#include <algorithm>
#include <cstring>
#include <string>
#include <vector>

#include "engine/engine.h"
#include "model/predict.h"

namespace pacset::testing {

// Bit-identical margins (one thread), predictions and leaf ids (`threads`
// threads) against ForestPredictor.
inline void ExpectSameAsInMemory(const Forest& f, const PacEngine& e, const RowMatrix& rows,
                                 const std::string& what, int threads = 1) {
  ForestPredictor ref(f);
  std::vector<double> got_margin, got_pred;
  Status s = e.PredictAll(rows, true, 1, &got_margin);
  ASSERT_TRUE(s.ok()) << what << ": " << s.ToString();
  s = e.PredictAll(rows, false, threads, &got_pred);
  ASSERT_TRUE(s.ok()) << what << ": " << s.ToString();
  std::vector<int32_t> leaves;
  s = e.PredictLeaves(rows, threads, &leaves);
  ASSERT_TRUE(s.ok()) << what << ": " << s.ToString();
  const size_t K = f.num_outputs, C = f.num_prediction_columns();
  std::vector<double> want(std::max(K, C));
  for (size_t r = 0; r < rows.num_rows; ++r) {
    ref.PredictMargin(rows.row(r), want.data());
    ASSERT_EQ(0, std::memcmp(want.data(), &got_margin[r * K], K * 8))
        << what << " margin row " << r;
    ref.Predict(rows.row(r), want.data());
    ASSERT_EQ(0, std::memcmp(want.data(), &got_pred[r * C], C * 8)) << what << " row " << r;
    for (size_t t = 0; t < f.num_trees(); ++t)
      ASSERT_EQ(ref.LeafIndex(t, rows.row(r)), leaves[r * f.num_trees() + t])
          << what << " leaf row " << r << " tree " << t;
  }
}

}  // namespace pacset::testing
