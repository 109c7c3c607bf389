// Predicting a caller's matrix where it lies: float32 or float64 values with
// any row and column strides (numpy C or Fortran order, slices), converted a
// few hundred rows at a time into the engine's input, so a large input is
// never copied whole. NaN is a missing value. Results are the engine's,
// bit for bit (float32 -> float64 -> the forest's precision is exact).
#pragma once

#include <cstddef>
#include <cstdint>

#include "engine/engine.h"
#include "util/status.h"

namespace pacset {

struct MatrixView {
  const char* data = nullptr;
  size_t rows = 0, cols = 0;
  ptrdiff_t row_stride = 0, col_stride = 0;  // bytes
  bool float32 = false;                      // else float64
};

// rows * engine.num_columns(margin) values, row-major, into `out`.
// `threads` <= 0: one per hardware thread.
Status PredictMatrix(const PacEngine& engine, const MatrixView& x, bool margin, int threads,
                     double* out);
Status PredictMatrix(const PacEngine& engine, const MatrixView& x, bool margin, int threads,
                     float* out);
// rows * engine.num_trees() library leaf ids, row-major.
Status ApplyMatrix(const PacEngine& engine, const MatrixView& x, int threads, int32_t* out);

}  // namespace pacset
