// Shared body of the importer fuzz targets: whatever the bytes, an importer
// returns a Status or a forest that validates and predicts (ASan/UBSan and
// libFuzzer's stack and memory limits catch the rest).
#pragma once

#include <vector>

#include "model/forest.h"
#include "model/predict.h"

namespace pacset {

inline int CheckImported(const StatusOr<Forest>& f) {
  if (!f.ok()) return 0;
  if (!f->Validate().ok()) __builtin_trap();  // importers must only return valid forests
  if (f->num_features > 100000) return 0;
  std::vector<double> row(f->num_features, 0.5), out(f->num_prediction_columns());
  ForestPredictor(*f).Predict(row.data(), out.data());
  return 0;
}

}  // namespace pacset
