// The input of every predictor: the engine (engine/engine.h), the in-memory
// forest (model/predict.h), layout scoring (layout/pack.h). It is made by the
// CSV reader (util/csv.h), the Python module and tests, so it sits below them
// all, on its own: rows are not a CSV idea.
#pragma once

#include <cstddef>
#include <vector>

namespace pacset {

// A dense row-major matrix of inputs; NaN marks a missing value.
struct RowMatrix {
  size_t num_rows = 0;
  size_t num_cols = 0;
  std::vector<double> values;  // num_rows * num_cols
  const double* row(size_t i) const { return values.data() + i * num_cols; }
};

}  // namespace pacset
