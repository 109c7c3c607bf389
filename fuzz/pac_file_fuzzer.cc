// libFuzzer target: arbitrary bytes as a .pac file, then a prediction.
// Whatever the input, the reader and the engine return a status; they never
// read out of bounds (ASan) or hit undefined behaviour (UBSan).
#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "engine/engine.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  auto file = pacset::PacFile::FromBuffer(std::string(reinterpret_cast<const char*>(data), size),
                                          "fuzz.pac");
  if (!file.ok()) return 0;
  (void)(*file)->VerifyBlocks();
  (void)(*file)->SourceInfoJson();
  auto engine = pacset::PacEngine::FromFile(std::move(file).value());
  if (!engine.ok()) return 0;
  pacset::RowMatrix rows;
  rows.num_cols = (*engine)->num_features();
  if (rows.num_cols > 100000) return 0;
  rows.num_rows = 3;
  rows.values.assign(rows.num_rows * rows.num_cols, 0.0);
  for (size_t i = 0; i < rows.values.size(); ++i) rows.values[i] = (i % 7) - 3.0;
  std::vector<double> out;
  (void)(*engine)->PredictAll(rows, false, 1, &out);
  std::vector<int32_t> leaves;
  (void)(*engine)->PredictLeaves(rows, 1, &leaves);
  std::vector<uint64_t> blocks;
  (void)(*engine)->TouchedBlocks(rows.row(0), &blocks);
  return 0;
}
