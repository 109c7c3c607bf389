// What every `pacset predict` source (a .pac file, a model packed in memory,
// a forest in a store) does with rows once its engine is open: answer a
// matrix of rows, or answer standard input one line at a time.
#pragma once

#include <functional>

#include "engine/engine.h"
#include "tools/commands.h"
#include "util/csv.h"
#include "util/status.h"

namespace pacset {

// Predictions, margins or leaf ids of `rows` (per opts: --margin, --leaf,
// --method, --threads), appended to `out`.
Status AnswerRows(const PacEngine& engine, const RowMatrix& rows, const PredictOptions& opts,
                  CsvWriter& out);

// Called around each streamed row: `row` is its 0-based number among the
// rows answered (request marks use it). An error from before_row is that
// row's error line.
struct StreamHooks {
  std::function<Status(uint64_t row)> before_row;
  std::function<void(uint64_t row)> after_row;
  std::function<void()> report;  // with --timing, once at the end
};

// `--input -`: rows from standard input answered as they come, one CSV line
// in, one line out, flushed before the next line is read, so a process keeps
// its forest open between requests. A header line (the first non-blank line,
// when not numeric) and blank lines get no answer; a row that cannot be
// answered (bad field, wrong column count, a line longer than the limit of
// util/csv.h, a failed read of a block) gets a line "error: MESSAGE" (also on
// stderr) and the stream goes on; the result is then kInvalidArgument naming
// how many rows failed. A line over the limit is answered as soon as the
// limit is passed, and the rest of it is read and dropped: memory stays at
// one line however long a line is.
Status PredictStream(const PacEngine& engine, const PredictOptions& opts, const StreamHooks& hooks);

}  // namespace pacset
