// What the `pacset` commands that pack a model share (pack, import,
// layout-report): their pack options turned into PackOptions, the model
// loaded for packing, and the line that says which bins were chosen.
#pragma once

#include <string>

#include "layout/pack.h"
#include "model/forest.h"
#include "model/import.h"
#include "tools/commands.h"
#include "util/row_matrix.h"
#include "util/status.h"

namespace pacset {

// --bin-depth and --trees-per-bin into `o`: "auto" lets the packer choose
// (layout/pack.h), --trees-per-bin "fit" fills a block.
Status ParseBinOptions(const std::string& depth, const std::string& trees, PackOptions* o);

// The command line's pack options, validated.
StatusOr<PackOptions> ToPackOptions(const PackCliOptions& c);

// Imports a model to pack; with `calibrate` rows, they weigh the layout and
// (through *rows, for PackOptions::score_rows) choose its bin parameters.
// A .pac file is refused: it is packed already.
StatusOr<Forest> LoadForPacking(const std::string& model, ModelFormat format,
                                const std::string& calibrate, RowMatrix* rows);

// One line for pack and import: the bins chosen and why.
void PrintBinChoiceLine(const PackReport& r);

}  // namespace pacset
