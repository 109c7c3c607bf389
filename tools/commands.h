// The `pacset` subcommands as library functions: tools/pacset_main.cc only
// parses the command line and calls these, so tests can call them too.
// Each returns a Status; the caller prints it and picks the exit code.
//
// One file per command group: tools/predict_command.cc (predict),
// tools/predict_store.cc (predict --store), tools/info_command.cc,
// tools/pack_command.cc, tools/layout_report_command.cc and
// tools/store_commands.cc (import, ls, rm, verify, export); what they share
// in tools/model_input.h and tools/pack_cli.h.
#pragma once

#include <string>
#include <vector>

#include "model/import.h"
#include "model/output.h"
#include "util/status.h"

namespace pacset {

struct PredictOptions {
  std::string model;  // a model file (any importable format) or a .pac file
  std::string input;  // CSV rows, "-" for stdin
  std::string output = "-";
  ModelFormat format = ModelFormat::kAuto;
  bool margin = false;  // raw scores instead of probabilities
  bool leaf = false;    // leaf index per tree instead of predictions
  // scikit-learn IsolationForest only: which method's output to write,
  // score_samples (the default, what the engine computes), decision_function
  // or predict (model/output.h IsolationMethod). Empty: score_samples.
  std::string method;
  int threads = 1;
  int repeat = 1;       // predict the batch this many times (benchmarking)
  bool timing = false;  // print the prediction time (CSV and model loading excluded) to stderr
  // .pac files (engine/engine.h EngineOptions): verify each block once
  // (false: --no-verify), and the most blocks read at once when cold
  // (0: the default, 32 for files; for a store see StoreForestOptions).
  bool verify_blocks = true;
  uint32_t max_in_flight = 0;
  std::string block_io = "auto";  // auto, io_uring, threads (.pac files)
  // Straight from a store (engine/store_forest.h): `model` is then the
  // forest's name in the store at this URI; with input "-" rows are
  // answered one line at a time as they arrive (tools/predict_store.cc).
  std::string store;
  std::string cache_size = "256MiB";  // the in-process block cache
  int store_timeout_ms = 10000;
  // Request marks (trace/request_marks.h), .pac models only: marks go to
  // `marks_file`, else to $PACSET_REQUEST_MARKS when set; one request per
  // "row" or per "batch" (default: $PACSET_REQUEST_MARKS_UNIT, else batch).
  std::string mark_requests;
  std::string marks_file;
  // With per-row marks: drop the file's pages from this process's mapping and
  // the page cache before each row, so every request reads its blocks (what a
  // request costs when the model does not stay in memory).
  bool evict_between_rows = false;
};

// opts.method applied to `n` predictions (one column) in place: nothing
// without --method; an error naming what to do instead when the model is no
// IsolationForest or the output is margins or leaf ids.
Status ApplyPredictMethod(const PredictOptions& opts, const OutputRule& rule, double* result,
                          size_t n);

Status RunPredict(const PredictOptions& opts);
Status RunPredictFromStore(const PredictOptions& opts);

struct InfoOptions {
  std::string path;
  ModelFormat format = ModelFormat::kAuto;
  bool json = false;
};
Status RunInfo(const InfoOptions& opts);

// Options shared by everything that packs a model.
struct PackCliOptions {
  std::string layout = "pacset";
  std::string block_size = "64KiB";
  std::string bin_depth = "auto";      // "auto" (chosen, layout/pack.h) or 1..16
  std::string trees_per_bin = "auto";  // "auto", "fit" (as many as fit one block) or a count
  std::string calibrate;               // CSV rows whose paths give the cardinalities
  bool no_leaf_ids = false;
  bool wide_nodes = false;      // PackOptions::force_wide_nodes
  uint32_t format_version = 3;  // PackOptions::format_version
  // Trace-driven weights (trace/analysis/trace_weights.h): the node weights come from
  // a pacsetfs trace of `traced_pac` (a packing of the same model).
  std::string weights_from_trace;
  std::string traced_pac;
  std::string trace_forest;  // forest name in the trace; "" = the only one
};

struct PackCommandOptions {
  std::string model;
  std::string output;
  ModelFormat format = ModelFormat::kAuto;
  PackCliOptions pack;
};
Status RunPack(const PackCommandOptions& opts);

struct LayoutReportOptions {
  std::string model;
  std::string input;
  ModelFormat format = ModelFormat::kAuto;
  std::vector<std::string> block_sizes;  // default: 4KiB and 64KiB
  std::string layouts;                   // comma separated; default: all
  std::string bin_depth = "auto";        // as in PackCliOptions
  std::string trees_per_bin = "auto";
  std::string calibrate;
  bool json = false;
};
Status RunLayoutReport(const LayoutReportOptions& opts);

struct StoreCommandOptions {
  std::string store;  // URI; empty: DefaultStoreUri()
  bool json = false;
};

struct ImportOptions {
  std::string input;  // a model file or a .pac file
  std::string name;
  ModelFormat format = ModelFormat::kAuto;
  PackCliOptions pack;
  StoreCommandOptions store;
};
Status RunImport(const ImportOptions& opts);
Status RunList(const StoreCommandOptions& opts);
Status RunRemove(const std::string& name, const StoreCommandOptions& opts);
// Reports every bad block of NAME (all forests when empty), then the
// structure of each forest whose blocks are all good (layout/structure_check.h);
// with `file`, the same for that .pac file. kCorruption if anything is bad.
Status RunVerify(const std::string& name, const std::string& file, const StoreCommandOptions& opts);
Status RunExport(const std::string& name, const std::string& output,
                 const StoreCommandOptions& opts);

}  // namespace pacset
