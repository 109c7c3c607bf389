// The blocks rows touch in a packed file: the analytical I/O count that
// `pacset layout-report` and `pacset-trace layouts` show (each block counted
// once per row, as if a block once read stays in memory for the row).
//
// The packer scores bin candidates before encoding them, on a placement:
// CountPlacedBlocksPerRow (the same count, on rows) and EstimateBlocksPerRow
// (the expected count from node weights, without rows), both in
// layout/internal/placement.h; `pacset layout-report` shows the expected
// count beside this one.
#pragma once

#include <cstdint>
#include <vector>

#include "engine/engine.h"
#include "util/row_matrix.h"
#include "util/status.h"

namespace pacset {

struct BlocksPerRow {
  std::vector<uint64_t> per_row;  // node-region blocks each row touches
  uint64_t batch_unique = 0;      // distinct node-region blocks all rows touch together

  double mean() const;
};

// Routes every row through `engine` (PacEngine::TouchedBlocks).
StatusOr<BlocksPerRow> CountBlocksPerRow(const PacEngine& engine, const RowMatrix& rows);

}  // namespace pacset
