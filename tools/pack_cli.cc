#include "tools/pack_cli.h"

#include <cstdio>
#include <cstdlib>
#include <string>

#include "layout/block.h"
#include "model/predict.h"
#include "tools/model_input.h"
#include "util/csv.h"

namespace pacset {
namespace {

// --bin-depth and --trees-per-bin: "auto" lets the packer choose (pack.h).
StatusOr<uint32_t> ParseBinParameter(const std::string& option, const std::string& text,
                                     uint32_t max) {
  if (text == "auto") return kChooseBins;
  if (option == "--trees-per-bin" && text == "fit") return kTreesPerBinFit;
  char* end = nullptr;
  const unsigned long long v = std::strtoull(text.c_str(), &end, 10);
  if (text.empty() || *end != '\0' || text[0] == '-' || v < 1 || v > max)
    return Status::InvalidArgument(option + " '" + text + "' is not auto" +
                                   (option == "--trees-per-bin" ? ", fit" : "") +
                                   " or a number from 1 to " + std::to_string(max));
  return static_cast<uint32_t>(v);
}

}  // namespace

Status ParseBinOptions(const std::string& depth, const std::string& trees, PackOptions* o) {
  PACSET_ASSIGN_OR_RETURN(o->bin_depth, ParseBinParameter("--bin-depth", depth, 16));
  PACSET_ASSIGN_OR_RETURN(o->trees_per_bin, ParseBinParameter("--trees-per-bin", trees, 1u << 24));
  return Status::Ok();
}

StatusOr<PackOptions> ToPackOptions(const PackCliOptions& c) {
  PackOptions o;
  PACSET_ASSIGN_OR_RETURN(o.layout, ParseLayoutKind(c.layout));
  PACSET_ASSIGN_OR_RETURN(o.block_size, ParseBlockSize(c.block_size));
  PACSET_RETURN_IF_ERROR(ParseBinOptions(c.bin_depth, c.trees_per_bin, &o));
  o.leaf_ids = !c.no_leaf_ids;
  o.force_wide_nodes = c.wide_nodes;
  o.format_version = c.format_version;
  PACSET_RETURN_IF_ERROR(ValidatePackOptions(o));
  return o;
}

StatusOr<Forest> LoadForPacking(const std::string& model, ModelFormat format,
                                const std::string& calibrate, RowMatrix* rows) {
  PACSET_ASSIGN_OR_RETURN(const bool is_pac, IsPacFile(model));
  if (is_pac)
    return Status::InvalidArgument(model +
                                   " is already a packed .pac file; pack the model it "
                                   "came from instead");
  PACSET_ASSIGN_OR_RETURN(Forest forest, ImportModelWarning(model, format));
  if (!calibrate.empty()) {
    PACSET_ASSIGN_OR_RETURN(*rows, ReadCsvRows(calibrate, forest.num_features));
    if (rows->num_rows == 0)
      return Status::InvalidArgument(calibrate + ": no rows to calibrate with");
    CalibrateCardinality(forest, *rows);
  }
  return forest;
}

void PrintBinChoiceLine(const PackReport& r) {
  if (r.candidates.empty()) return;
  const LayoutCandidate& c = r.candidates[r.chosen_candidate];
  const std::string score =
      r.scored_rows ? "blocks per row on " + std::to_string(r.scored_rows) + " calibration rows"
                    : "expected blocks per row";
  std::printf(
      "  bin depth %u%s, trees per bin %s%s: %.2f %s, the fewest of %zu candidates (pacset "
      "info lists them)\n",
      c.bin_depth, r.chose_bin_depth ? " (chosen)" : "",
      c.trees_per_bin == kTreesPerBinFit ? "fit" : std::to_string(c.trees_per_bin).c_str(),
      r.chose_trees_per_bin ? " (chosen)" : "", c.blocks_per_row, score.c_str(),
      r.candidates.size());
}

}  // namespace pacset
