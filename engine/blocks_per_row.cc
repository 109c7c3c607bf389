#include "engine/blocks_per_row.h"

#include <algorithm>

namespace pacset {

double BlocksPerRow::mean() const {
  if (per_row.empty()) return 0;
  double sum = 0;
  for (uint64_t c : per_row) sum += static_cast<double>(c);
  return sum / per_row.size();
}

StatusOr<BlocksPerRow> CountBlocksPerRow(const PacEngine& engine, const RowMatrix& rows) {
  BlocksPerRow counts;
  counts.per_row.reserve(rows.num_rows);
  std::vector<bool> seen(engine.file().header().block_count, false);
  std::vector<uint64_t> touched;
  for (size_t r = 0; r < rows.num_rows; ++r) {
    PACSET_RETURN_IF_ERROR(engine.TouchedBlocks(rows.row(r), &touched));
    counts.per_row.push_back(touched.size());
    for (uint64_t b : touched) {
      if (b < seen.size() && !seen[b]) {
        seen[b] = true;
        ++counts.batch_unique;
      }
    }
  }
  return counts;
}

}  // namespace pacset
