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
//               filled hottest-frontier-first (the default; see layouts.cc)
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "layout/pac_format.h"
#include "model/forest.h"
#include "util/status.h"

namespace pacset {

StatusOr<LayoutKind> ParseLayoutKind(const std::string& name);
std::vector<LayoutKind> AllLayoutKinds();
bool LayoutHasBins(LayoutKind k);

struct PackOptions {
  LayoutKind layout = LayoutKind::kPacset;
  uint32_t block_size = 64 * 1024;  // power of two, 4 KiB .. 1 MiB
  uint32_t bin_depth = 2;           // levels interleaved in a bin (binned layouts)
  uint32_t trees_per_bin = 0;       // 0: as many trees as fit one block
  bool leaf_ids = true;             // store library leaf ids (for predict --leaf)
  bool force_wide_nodes = false;    // for tests: use 32-byte nodes even when 16 would be exact
  bool progress = false;            // draw a progress bar on stderr
};

// Validates block size, bin depth and trees per bin.
Status ValidatePackOptions(const PackOptions& options);

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
  uint32_t trees_per_bin = 0;  // largest bin
  double layout_seconds = 0;
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
