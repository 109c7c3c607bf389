// pacset predict --store URI NAME: predictions straight from a block store,
// without a mount (engine/store_forest.h).
//
// A file of rows is one request (all rows' walks in flight together). With
// --input - the rows are answered as they come (tools/predict_rows.h), so a
// function or a service keeps the process, its store connection and its
// block cache between requests; an unreachable store or a corrupt block is
// that row's error line.
#include <chrono>
#include <cstdio>
#include <string>

#include "engine/store_forest.h"
#include "tools/commands.h"
#include "tools/predict_rows.h"
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

Status PredictBatch(const StoreForest& forest, const PredictOptions& opts) {
  const PacEngine& engine = forest.engine();
  PACSET_ASSIGN_OR_RETURN(RowMatrix rows, ReadCsvRows(opts.input, engine.num_features()));
  CsvWriter out;
  PACSET_RETURN_IF_ERROR(out.Open(opts.output));
  const auto t0 = std::chrono::steady_clock::now();
  CsvWriter discard;  // the repeats' answers
  for (int i = 1; i < opts.repeat; ++i) {
    PACSET_RETURN_IF_ERROR(discard.Open("/dev/null"));
    PACSET_RETURN_IF_ERROR(AnswerRows(engine, rows, opts, discard));
    PACSET_RETURN_IF_ERROR(discard.Close());
  }
  PACSET_RETURN_IF_ERROR(AnswerRows(engine, rows, opts, out));
  if (opts.timing) {
    const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    std::fprintf(stderr, "predict: %zu rows x %d passes in %.6f s = %.0f rows/s (%d threads)\n",
                 rows.num_rows, opts.repeat, s, rows.num_rows * opts.repeat / s, opts.threads);
  }
  ReportStoreStats(opts, forest);
  return out.Close();
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
  if (opts.input == "-") {
    StreamHooks hooks;
    hooks.report = [&] { ReportStoreStats(opts, *forest); };
    return PredictStream(forest->engine(), opts, hooks);
  }
  return PredictBatch(*forest, opts);
}

}  // namespace pacset
