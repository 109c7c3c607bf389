// pacset predict --store URI NAME: predictions straight from a block store,
// without a mount (engine/store_forest.h).
//
// A file of rows is one request (all rows' walks in flight together). With
// --input - the rows are answered as they come: one CSV line in, one line
// out, flushed, so a function or a service keeps the process, its store
// connection and its block cache between requests. A header line and blank
// lines get no answer; a row that cannot be answered (bad field, a line
// longer than the limit of util/csv.h, store unreachable, corrupt block) gets
// a line "error: MESSAGE" (also on stderr) and the stream goes on; the exit
// status is then 1 at the end. A line over the limit is answered as soon as
// the limit is passed, and the rest of it is read and dropped: memory stays
// at one line however long a line is.
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <string>
#include <string_view>
#include <vector>

#include "engine/store_forest.h"
#include "tools/commands.h"
#include "util/csv.h"
#include "util/size.h"

namespace pacset {
namespace {

Status CheckStoreOptions(const PredictOptions& opts) {
  if (!opts.verify_blocks)
    return Status::InvalidArgument("--no-verify: blocks read from a store are always verified");
  if (!opts.mark_requests.empty() || !opts.marks_file.empty() || opts.evict_between_rows)
    return Status::InvalidArgument(
        "request marks and --evict-between-rows work with .pac files, not with --store");
  if (opts.format != ModelFormat::kAuto)
    return Status::InvalidArgument("--format: a stored forest is always a packed forest");
  if (opts.store_timeout_ms < 1)
    return Status::InvalidArgument("--store-timeout must be at least 1 ms");
  return Status::Ok();
}

void ReportStoreStats(const PredictOptions& opts, const StoreForest& forest) {
  if (!opts.timing) return;
  const StoreReadStats s = forest.read_stats();
  std::fprintf(
      stderr,
      "predict: read %llu blocks (%llu bytes) from the store in %llu rounds, %llu "
      "MultiGets (metadata included); %llu bytes cached, %llu blocks evicted\n",
      static_cast<unsigned long long>(s.blocks), static_cast<unsigned long long>(s.bytes),
      static_cast<unsigned long long>(s.rounds), static_cast<unsigned long long>(s.multigets),
      static_cast<unsigned long long>(s.cached_bytes), static_cast<unsigned long long>(s.evicted));
}

// Predictions, margins or leaf ids of `rows`, written to `out`.
Status Answer(const PacEngine& engine, const RowMatrix& rows, const PredictOptions& opts,
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

Status PredictBatch(const StoreForest& forest, const PredictOptions& opts) {
  const PacEngine& engine = forest.engine();
  PACSET_ASSIGN_OR_RETURN(RowMatrix rows, ReadCsvRows(opts.input, engine.num_features()));
  CsvWriter out;
  PACSET_RETURN_IF_ERROR(out.Open(opts.output));
  const auto t0 = std::chrono::steady_clock::now();
  CsvWriter discard;  // the repeats' answers
  for (int i = 1; i < opts.repeat; ++i) {
    PACSET_RETURN_IF_ERROR(discard.Open("/dev/null"));
    PACSET_RETURN_IF_ERROR(Answer(engine, rows, opts, discard));
    PACSET_RETURN_IF_ERROR(discard.Close());
  }
  PACSET_RETURN_IF_ERROR(Answer(engine, rows, opts, out));
  if (opts.timing) {
    const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    std::fprintf(stderr, "predict: %zu rows x %d passes in %.6f s = %.0f rows/s (%d threads)\n",
                 rows.num_rows, opts.repeat, s, rows.num_rows * opts.repeat / s, opts.threads);
  }
  ReportStoreStats(opts, forest);
  return out.Close();
}

Status PredictStream(const StoreForest& forest, const PredictOptions& opts) {
  const PacEngine& engine = forest.engine();
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
    if (s.ok()) s = Answer(engine, row, opts, out);
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
  ReportStoreStats(opts, forest);
  PACSET_RETURN_IF_ERROR(out.Close());
  if (failed > 0)
    return Status::InvalidArgument(std::to_string(failed) + " of " + std::to_string(answered) +
                                   " rows could not be answered (see the error lines)");
  return Status::Ok();
}

}  // namespace

Status RunPredictFromStore(const PredictOptions& opts) {
  PACSET_RETURN_IF_ERROR(CheckStoreOptions(opts));
  StoreForestOptions fo;
  PACSET_ASSIGN_OR_RETURN(fo.cache_bytes, ParseByteSize(opts.cache_size, "cache size"));
  fo.max_in_flight = opts.max_in_flight;
  // Store errors name the store without its URI (which may hold a password).
  const auto t0 = std::chrono::steady_clock::now();
  PACSET_ASSIGN_OR_RETURN(
      std::unique_ptr<BlockStore> store,
      OpenBlockStore(opts.store, StoreForest::ReadOptions(opts.store_timeout_ms)));
  PACSET_ASSIGN_OR_RETURN(auto forest, StoreForest::Open(std::move(store), opts.model, fo));
  if (opts.timing)
    std::fprintf(stderr, "predict: opened the store and the forest in %.6f s\n",
                 std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count());
  if (opts.input == "-") return PredictStream(*forest, opts);
  return PredictBatch(*forest, opts);
}

}  // namespace pacset
