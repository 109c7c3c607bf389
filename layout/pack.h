// The PACSET packer: Forest -> .pac file.
//
// A layout policy decides where every stored node and leaf record goes in
// the node region; the encoder then writes the header, the sections and the
// sealed blocks (layout/FORMAT.md). Packing is deterministic: the same forest
// and options always give the same bytes.
//
// Layouts (LayoutKind):
//   bfs         each tree breadth-first, trees one after another (XGBoost-like)
//   dfs         each tree depth-first, left child first (scikit-learn-like)
//   wdfs        depth-first, the child with the higher cardinality first
//   block-wdfs  WDFS that stops at every block boundary and restarts from the
//               highest-cardinality unplaced subtree in the whole forest
//   bin-bfs, bin-dfs, bin-wdfs
//               interleaved bins (the top bin_depth levels of trees_per_bin
//               trees striped level by level into one block), then the
//               residual subtrees in bfs / dfs / wdfs order
//   bin-block-wdfs
//               interleaved bins + block-aligned WDFS residuals (the paper's
//               PACSET, "binblockstat")
//   pacset      interleaved bins + block-aligned residuals whose blocks are
//               filled hottest-frontier-first (the default; see pack_layouts.cc)
//
// Bin parameters. How many levels to interleave and how many trees to put in
// a bin depend on the forest and the block size (no one depth is best for
// every forest: docs/bin-choice.md). Unless forced, the packer chooses them:
// it places the forest with each candidate and keeps the one whose rows touch
// the fewest node blocks. With `score_rows` (pacset's --calibrate rows) that
// is counted exactly, by routing up to 2,000 of them; otherwise it is the
// *expected* count from the node weights alone (training cardinalities: a
// node's access probability is its cardinality over its root's), which
// cannot tell apart candidates that score within its error
// (layout/internal/placement.h; how close it comes: docs/bin-choice.md).
// Candidates: depths 1, 2, ... until three in a row do not improve (at most 8
// and the forest's depth), each with as many trees per bin as fit one block;
// then, at the best depth, one bin of all trees when bins are small. The
// choice and every candidate's score are kept in the file's source info
// (layout/FORMAT.md) and shown by `pacset info`. Choosing costs one placement
// per candidate, up to 4 at a time on 4 cores (each holds 8 bytes a node);
// the encoding is done once.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "layout/pac_format.h"
#include "model/forest.h"
#include "util/row_matrix.h"
#include "util/status.h"

namespace pacset {

StatusOr<LayoutKind> ParseLayoutKind(const std::string& name);
std::vector<LayoutKind> AllLayoutKinds();
bool LayoutHasBins(LayoutKind k);

// PackOptions::bin_depth / trees_per_bin: let the packer choose (above).
inline constexpr uint32_t kChooseBins = 0;
// PackOptions::trees_per_bin: as many trees as fit one block.
inline constexpr uint32_t kTreesPerBinFit = 0xFFFFFFFFu;

struct PackOptions {
  LayoutKind layout = LayoutKind::kPacset;
  uint32_t block_size = 64 * 1024;       // power of two, 256 B .. 1 MiB (mounts: >= a page)
  uint32_t bin_depth = kChooseBins;      // levels interleaved in a bin (binned layouts), 1..16
  uint32_t trees_per_bin = kChooseBins;  // a count, or kTreesPerBinFit
  bool leaf_ids = true;                  // store library leaf ids (for predict --leaf)
  bool force_wide_nodes = false;         // for tests: use 32-byte nodes even when 16 would be exact
  bool progress = false;                 // draw a progress bar on stderr
  // The .pac format version to write (layout/FORMAT.md): 0 or 3, the newest
  // (blocks bound to the file by its identity); 2 for readers that predate
  // version 3 (pacset 0.1): version 1 when the blocks are at least
  // 4 KiB and the header fits block 0, else 2.
  uint32_t format_version = 0;
  // Rows to count blocks per row on when choosing bin parameters (not owned;
  // forest.num_features columns). Null: the expected count from the weights.
  const RowMatrix* score_rows = nullptr;
};

// Validates block size, bin depth and trees per bin.
Status ValidatePackOptions(const PackOptions& options);

// One bin configuration the packer compared.
struct LayoutCandidate {
  uint32_t bin_depth = 0;
  uint32_t trees_per_bin = 0;  // as asked: a count, or kTreesPerBinFit
  uint32_t largest_bin = 0;    // trees in the largest bin it gave
  uint64_t num_bins = 0;
  uint64_t node_blocks = 0;   // bins + residuals
  double blocks_per_row = 0;  // node blocks one row touches: counted on the rows, else expected
};

struct PackReport {
  NodeFormat node_format = NodeFormat::kCompact16;
  std::string node_format_reason;  // why wide nodes were needed, "" for compact
  uint64_t file_bytes = 0;
  uint64_t block_count = 0;
  uint64_t metadata_blocks = 0;  // header, tree table, base score, source info
  uint64_t node_blocks = 0;      // node region (bins + residuals)
  uint64_t bin_blocks = 0;
  uint64_t leaf_id_blocks = 0;
  uint64_t num_nodes = 0;  // internal nodes stored
  uint64_t num_leaf_records = 0;
  uint64_t inlined_leaves = 0;
  uint64_t num_bins = 0;
  uint32_t bin_depth = 0;      // 0: no bins
  uint32_t trees_per_bin = 0;  // largest bin
  // Expected node blocks one row touches (EstimateBlocksPerRow), from the
  // node weights the layout used; always computed.
  double expected_blocks_per_row = 0;
  uint64_t scored_rows = 0;      // rows the candidates were counted on; 0: by the expected count
  bool chose_bin_depth = false;  // bin_depth was chosen, not forced
  bool chose_trees_per_bin = false;         // trees_per_bin was chosen, not forced
  std::vector<LayoutCandidate> candidates;  // compared when choosing, in order
  size_t chosen_candidate = 0;              // the packed one, in `candidates`
  double layout_seconds = 0;                // choosing and placing
  double encode_seconds = 0;
};

// Packs into memory: the returned string is the whole .pac file.
StatusOr<std::string> PackForestToBuffer(const Forest& forest, const PackOptions& options,
                                         PackReport* report = nullptr);

// Packs to `path` atomically (written to a temporary file next to it, synced,
// then renamed), so a crash never leaves a half-written .pac under that name.
Status PackForestToFile(const Forest& forest, const PackOptions& options, const std::string& path,
                        PackReport* report = nullptr);

}  // namespace pacset
