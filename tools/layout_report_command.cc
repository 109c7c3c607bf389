// pacset layout-report: blocks per row of every layout and block size asked
// for, counted with the engine on the given rows.
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "engine/blocks_per_row.h"
#include "engine/engine.h"
#include "layout/block.h"
#include "layout/pack.h"
#include "tools/commands.h"
#include "tools/pack_cli.h"
#include "util/csv.h"
#include "util/size.h"

namespace pacset {

Status RunLayoutReport(const LayoutReportOptions& opts) {
  RowMatrix calibrate;
  PACSET_ASSIGN_OR_RETURN(Forest forest,
                          LoadForPacking(opts.model, opts.format, opts.calibrate, &calibrate));
  PACSET_ASSIGN_OR_RETURN(RowMatrix rows, ReadCsvRows(opts.input, forest.num_features));
  if (rows.num_rows == 0) return Status::InvalidArgument(opts.input + ": no rows");
  std::vector<uint32_t> sizes;
  for (const auto& b : opts.block_sizes) {
    PACSET_ASSIGN_OR_RETURN(uint32_t bs, ParseBlockSize(b));
    sizes.push_back(bs);
  }
  if (sizes.empty()) sizes = {4096, 65536};
  std::vector<LayoutKind> layouts;
  if (opts.layouts.empty()) {
    layouts = AllLayoutKinds();
  } else {
    size_t pos = 0;
    while (pos <= opts.layouts.size()) {
      size_t c = opts.layouts.find(',', pos);
      if (c == std::string::npos) c = opts.layouts.size();
      PACSET_ASSIGN_OR_RETURN(LayoutKind k, ParseLayoutKind(opts.layouts.substr(pos, c - pos)));
      layouts.push_back(k);
      pos = c + 1;
    }
  }
  PackOptions bins;
  PACSET_RETURN_IF_ERROR(ParseBinOptions(opts.bin_depth, opts.trees_per_bin, &bins));
  nlohmann::json report = nlohmann::json::object();
  if (!opts.json)
    std::printf("%-8s %-14s %5s %5s %9s %9s %7s %7s %7s %12s %12s %6s\n", "block", "layout",
                "depth", "bin", "mean", "expected", "median", "p95", "max", "batch-unique",
                "model-blocks", "open");
  for (uint32_t bs : sizes) {
    nlohmann::json per_size = nlohmann::json::object();
    for (LayoutKind k : layouts) {
      PackOptions po = bins;
      po.layout = k;
      po.block_size = bs;
      po.leaf_ids = false;
      if (calibrate.num_rows) po.score_rows = &calibrate;
      PACSET_RETURN_IF_ERROR(ValidatePackOptions(po));
      PackReport pr;
      PACSET_ASSIGN_OR_RETURN(std::string bytes, PackForestToBuffer(forest, po, &pr));
      PACSET_ASSIGN_OR_RETURN(auto file, PacFile::FromBuffer(std::move(bytes), LayoutKindName(k)));
      const PacHeader h = file->header();
      PACSET_ASSIGN_OR_RETURN(auto engine, PacEngine::FromFile(std::move(file)));
      PACSET_ASSIGN_OR_RETURN(BlocksPerRow counts, CountBlocksPerRow(*engine, rows));
      std::vector<uint64_t> sorted = counts.per_row;
      std::sort(sorted.begin(), sorted.end());
      const double mean = counts.mean();
      const double median = sorted.size() % 2
                                ? sorted[sorted.size() / 2]
                                : (sorted[sorted.size() / 2 - 1] + sorted[sorted.size() / 2]) / 2.0;
      const size_t p95_idx =
          std::min(sorted.size() - 1, static_cast<size_t>(std::ceil(0.95 * sorted.size())) - 1);
      const double p95 = sorted[p95_idx];
      const double mx = sorted.back();
      per_size[LayoutKindName(k)] = {
          {"blocks_per_row", {{"mean", mean}, {"median", median}, {"p95", p95}, {"max", mx}}},
          {"expected_blocks_per_row", pr.expected_blocks_per_row},
          {"bin_depth", pr.bin_depth},
          {"trees_per_bin", pr.trees_per_bin},
          {"batch_unique_blocks", counts.batch_unique},
          {"model_blocks", h.block_count},
          {"open_blocks", h.node_first_block},
      };
      if (!opts.json)
        std::printf("%-8s %-14s %5u %5u %9.2f %9.2f %7.1f %7.0f %7.0f %12llu %12llu %6llu\n",
                    FormatByteSize(bs).c_str(), LayoutKindName(k), pr.bin_depth, pr.trees_per_bin,
                    mean, pr.expected_blocks_per_row, median, p95, mx,
                    static_cast<unsigned long long>(counts.batch_unique),
                    static_cast<unsigned long long>(h.block_count),
                    static_cast<unsigned long long>(h.node_first_block));
    }
    report[std::to_string(bs)] = per_size;
  }
  if (opts.json) {
    std::printf("%s\n", report.dump(2).c_str());
  } else {
    std::printf(
        "(blocks per row count node blocks touched by one row; 'expected' is the packer's "
        "estimate from the node weights, which chose the bin depth and trees per bin ('bin': "
        "the largest bin) unless forced; 'open' is the metadata blocks read once when the file "
        "is opened)\n");
  }
  return Status::Ok();
}

}  // namespace pacset
