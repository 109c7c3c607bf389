#include "tools/predict_rows.h"

#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <string>
#include <string_view>
#include <vector>

namespace pacset {

Status AnswerRows(const PacEngine& engine, const RowMatrix& rows, const PredictOptions& opts,
                  CsvWriter& out) {
  PACSET_RETURN_IF_ERROR(ApplyPredictMethod(opts, engine.output_rule(), nullptr, 0));
  if (opts.leaf) {
    std::vector<int32_t> leaves;
    PACSET_RETURN_IF_ERROR(engine.PredictLeaves(rows, opts.threads, &leaves));
    const size_t T = engine.num_trees();
    for (size_t r = 0; r < rows.num_rows; ++r) out.WriteRow(leaves.data() + r * T, T);
    return Status::Ok();
  }
  std::vector<double> result;
  PACSET_RETURN_IF_ERROR(engine.PredictAll(rows, opts.margin, opts.threads, &result));
  PACSET_RETURN_IF_ERROR(
      ApplyPredictMethod(opts, engine.output_rule(), result.data(), result.size()));
  const size_t cols = engine.num_columns(opts.margin);
  for (size_t r = 0; r < rows.num_rows; ++r)
    out.WriteRow(result.data() + r * cols, cols, engine.float32_outputs());
  return Status::Ok();
}

Status PredictStream(const PacEngine& engine, const PredictOptions& opts,
                     const StreamHooks& hooks) {
  // --method with --leaf or on another model is refused before reading.
  PACSET_RETURN_IF_ERROR(ApplyPredictMethod(opts, engine.output_rule(), nullptr, 0));
  CsvWriter out;
  PACSET_RETURN_IF_ERROR(out.Open(opts.output));
  RowMatrix row;
  row.num_rows = 1;
  row.num_cols = engine.num_features();
  CsvLineReader lines(STDIN_FILENO, "<stdin>", row.num_cols);
  size_t answered = 0, failed = 0;
  bool first_content_line = true;
  const auto t0 = std::chrono::steady_clock::now();
  for (;;) {
    std::string_view line;
    bool at_end = false;
    Status s = lines.Next(&line, &at_end);
    // A line too long is kInvalidArgument and answered below; anything else
    // means standard input cannot be read: no more lines.
    if (!s.ok() && s.code() != StatusCode::kInvalidArgument) return s;
    if (at_end) break;
    if (s.ok() && line.find_first_not_of(" \t\r") == std::string_view::npos) continue;
    const std::string where = "<stdin> line " + std::to_string(lines.line_number());
    size_t header_columns = 0;
    if (s.ok()) s = ParseCsvLine(line, where, first_content_line, &row.values, &header_columns);
    first_content_line = false;
    if (s.ok() && header_columns > 0) continue;
    if (s.ok() && row.values.size() != row.num_cols)
      s = Status::InvalidArgument(where + ": expected " + std::to_string(row.num_cols) +
                                  " columns, found " + std::to_string(row.values.size()));
    if (s.ok()) {
      if (hooks.before_row) s = hooks.before_row(answered);
      if (s.ok()) s = AnswerRows(engine, row, opts, out);
      if (hooks.after_row) hooks.after_row(answered);
    }
    if (!s.ok()) {
      ++failed;
      std::fprintf(stderr, "pacset: error: %s\n", s.ToString().c_str());
      out.WriteLine("error: " + s.ToString());
    }
    ++answered;
    PACSET_RETURN_IF_ERROR(out.Flush());
  }
  if (opts.timing) {
    const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    std::fprintf(stderr, "predict: %zu rows answered one at a time in %.6f s = %.0f rows/s\n",
                 answered, s, answered / s);
  }
  if (hooks.report) hooks.report();
  PACSET_RETURN_IF_ERROR(out.Close());
  if (failed > 0)
    return Status::InvalidArgument(std::to_string(failed) + " of " + std::to_string(answered) +
                                   " rows could not be answered (see the error lines)");
  return Status::Ok();
}

}  // namespace pacset
