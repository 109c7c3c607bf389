// pacset: import, pack, inspect and predict with decision forests.
// Exit status: 0 success, 1 runtime failure, 2 usage error.
#include <CLI/CLI.hpp>

#include <cstdio>

#include "store/block_store.h"
#include "tools/commands.h"

namespace {

int Fail(const pacset::Status& s) {
  std::fprintf(stderr, "pacset: error: %s\n", s.ToString().c_str());
  return 1;
}

void AddPackOptions(CLI::App* app, pacset::PackCliOptions* o);
void AddStore(CLI::App* app, pacset::StoreCommandOptions* o);

CLI::Option* AddFormat(CLI::App* app, std::string* format) {
  return app
      ->add_option("--format", *format,
                   "Model format: auto, xgboost-json, xgboost-ubjson, sklearn-json, "
                   "sklearn-pickle, lightgbm, pacset-forest")
      ->default_val("auto");
}

void AddStore(CLI::App* app, pacset::StoreCommandOptions* o) {
  app->add_option("--store", o->store,
                  "Store URI: rocksdb:PATH, dir:PATH, redis://[:PASSWORD@]HOST:PORT[/DB] or "
                  "redis-cluster://[:PASSWORD@]HOST:PORT[,HOST:PORT...] "
                  "(default: $PACSET_STORE, else " +
                      pacset::DefaultStoreUri() + ")");
}

void AddPackOptions(CLI::App* app, pacset::PackCliOptions* o) {
  app->add_option(
         "--layout", o->layout,
         "bfs, dfs, wdfs, block-wdfs, bin-bfs, bin-dfs, bin-wdfs, bin-block-wdfs or pacset")
      ->default_val("pacset");
  app->add_option("--block-size", o->block_size,
                  "Block size: 256 .. 1MiB, a power of two (below 4KiB: read straight from a "
                  "store, not through a mount)")
      ->default_val("64KiB");
  app->add_option("--bin-depth", o->bin_depth,
                  "Levels per interleaved bin, 1..16 (auto: the fewest blocks per row; pacset "
                  "info shows the candidates)")
      ->default_val("auto");
  app->add_option("--trees-per-bin", o->trees_per_bin,
                  "Trees per bin (auto: chosen; fit: as many as fit a block)")
      ->default_val("auto");
  app->add_option("--calibrate", o->calibrate,
                  "CSV rows: weigh the layout by how many of them reach each node, and choose "
                  "the bins by the blocks they touch (limits as predict --input)");
  app->add_flag("--no-leaf-ids", o->no_leaf_ids,
                "Leave out the leaf-id section (smaller file; predict --leaf then fails)");
  app->add_option("--format-version", o->format_version,
                  ".pac format version: 3 (blocks bound to the file), or 2 for readers of "
                  "pacset 0.1 (writes version 1 or 2)")
      ->default_val(3)
      ->check(CLI::IsMember({2, 3}));
  // Hidden: 32-byte nodes even where 16 would be exact (tests/spec reads both).
  app->add_flag("--wide-nodes", o->wide_nodes)->group("");
  app->add_option(
      "--weights-from-trace", o->weights_from_trace,
      "Weigh the layout by the traffic in this pacset-trace trace (needs --traced-pac)");
  app->add_option("--traced-pac", o->traced_pac,
                  "The .pac file the trace was taken of (a packing of the same model)");
  app->add_option("--trace-forest", o->trace_forest,
                  "Forest name in the trace (default: the only one)");
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"pacset: pack decision forests for selective, page-faulted inference"};
  app.set_version_flag("--version", std::string("pacset ") + PACSET_VERSION);
  app.require_subcommand(1);

  pacset::PredictOptions predict;
  std::string predict_format;
  auto* p = app.add_subcommand(
      "predict", "Predict rows of a CSV file with a model or .pac file, or a forest in a store");
  p->add_option("MODEL", predict.model, "Model file, or the forest's name with --store")
      ->required();
  p->add_option("-i,--input", predict.input,
                "CSV rows (header optional; empty or NaN = missing; a line may hold at most "
                "1 MiB + 64 bytes per feature, a field 4 KiB: longer is an error naming the "
                "line); - answers rows from standard input one line at a time as they come "
                "(one line out per row, flushed; a bad row gets a line 'error: ...')")
      ->required();
  p->add_option("-o,--output", predict.output, "Output CSV (default: standard output)");
  p->add_flag("--margin", predict.margin, "Write raw scores (margins) instead of predictions");
  p->add_flag("--leaf", predict.leaf, "Write the leaf index reached in every tree");
  p->add_option("--method", predict.method,
                "scikit-learn IsolationForest: the method whose output to write, score_samples "
                "(the default), decision_function (score_samples - offset_) or predict (-1 "
                "outlier, 1 inlier)")
      ->check(CLI::IsMember({"score_samples", "decision_function", "predict"}));
  p->add_option("-j,--threads", predict.threads, "Worker threads")->check(CLI::Range(1, 1024));
  p->add_option("--repeat", predict.repeat, "Predict the rows this many times (benchmarking)")
      ->check(CLI::Range(1, 1000000));
  p->add_flag("--timing", predict.timing,
              "Print the time spent predicting (loading and CSV excluded) to stderr");
  p->add_option("--mark-requests", predict.mark_requests,
                "Mark request boundaries for pacset-trace: one request per row or per batch")
      ->check(CLI::IsMember({"row", "batch"}));
  p->add_option("--marks-file", predict.marks_file,
                "Append request marks here (default: $PACSET_REQUEST_MARKS)");
  p->add_flag("--evict-between-rows", predict.evict_between_rows,
              "With --mark-requests row: evict the file's cached pages before each row");
  bool no_verify = false;
  p->add_flag("--no-verify", no_verify,
              ".pac files: do not verify each block's checksum the first time it is used");
  p->add_option(
       "--max-in-flight", predict.max_in_flight,
       ".pac files and --store: most blocks read at once when they are not in memory "
       "(default: 512 KiB of blocks, at least 32, with io_uring, else 32; through a pacsetfs "
       "mount 128; --store: 4096, at most 64 MiB)")
      ->check(CLI::Range(1, 65536));
  p->add_option("--block-io", predict.block_io,
                ".pac files: how missing blocks are read: io_uring (one ring per request), "
                "threads (a pool of pread threads), auto (io_uring where the kernel allows it; "
                "on a pacsetfs mount its gathers, else threads on FUSE) or gather-file (as auto, "
                "but through a pacsetfs mount's gather file, as older engines do)")
      ->check(CLI::IsMember({"auto", "io_uring", "threads", "gather-file"}));
  p->add_option("--store", predict.store,
                "Read the forest MODEL straight from this store, without a mount: "
                "rocksdb:PATH, dir:PATH, redis://[:PASSWORD@]HOST:PORT[/DB] or "
                "redis-cluster://[:PASSWORD@]HOST:PORT[,HOST:PORT...] (a password is best given "
                "in $REDISCLI_AUTH; one in the URI is hidden from ps once parsed)");
  p->add_option("--cache-size", predict.cache_size,
                "--store: in-process block cache (e.g. 64MiB, 1GiB)")
      ->default_val("256MiB");
  p->add_option("--store-timeout", predict.store_timeout_ms,
                "--store: give up on a store call after about this many milliseconds")
      ->check(CLI::Range(1, 3600000))
      ->default_val(10000);
  AddFormat(p, &predict_format);

  pacset::InfoOptions info;
  std::string info_format;
  auto* i = app.add_subcommand("info", "Describe a model or .pac file");
  i->add_option("PATH", info.path, "Model or .pac file")->required();
  i->add_flag("--json", info.json, "Print one JSON object");
  AddFormat(i, &info_format);

  pacset::PackCommandOptions pack;
  std::string pack_format;
  auto* k = app.add_subcommand("pack", "Pack a model into a .pac file");
  k->add_option("MODEL", pack.model, "Model file")->required();
  k->add_option("-o,--output", pack.output, "The .pac file to write")->required();
  AddPackOptions(k, &pack.pack);
  AddFormat(k, &pack_format);

  pacset::LayoutReportOptions report;
  std::string report_format;
  auto* r = app.add_subcommand("layout-report",
                               "Count the blocks each layout makes rows touch (analytical I/O)");
  r->add_option("MODEL", report.model, "Model file")->required();
  r->add_option("-i,--input", report.input, "CSV rows (limits as predict --input)")->required();
  r->add_option("--block-size", report.block_sizes,
                "Block sizes to compare (repeatable; default 4KiB and 64KiB)");
  r->add_option("--layouts", report.layouts, "Comma-separated layouts (default: all)");
  r->add_option("--bin-depth", report.bin_depth, "Levels per interleaved bin (auto: chosen)")
      ->default_val("auto");
  r->add_option("--trees-per-bin", report.trees_per_bin,
                "Trees per bin (auto: chosen; fit: as many as fit a block)")
      ->default_val("auto");
  r->add_option("--calibrate", report.calibrate,
                "CSV rows to count node cardinalities with (and to choose the bins by; limits as "
                "predict --input)");
  r->add_flag("--json", report.json, "Print one JSON object");
  AddFormat(r, &report_format);

  pacset::ImportOptions import;
  std::string import_format;
  auto* im =
      app.add_subcommand("import", "Put a model (packed on the way in) or a .pac into a store");
  im->add_option("MODEL_OR_PAC", import.input, "Model file or .pac file")->required();
  im->add_option("--name", import.name, "Forest name (the file is NAME.pac on a mount)")
      ->required();
  AddStore(im, &import.store);
  AddPackOptions(im, &import.pack);
  AddFormat(im, &import_format);

  pacset::StoreCommandOptions ls_opts;
  auto* ls = app.add_subcommand("ls", "List the forests in a store");
  AddStore(ls, &ls_opts);
  ls->add_flag("--json", ls_opts.json, "Print JSON");

  pacset::StoreCommandOptions rm_opts;
  std::string rm_name;
  auto* rm = app.add_subcommand("rm", "Remove a forest from a store");
  rm->add_option("NAME", rm_name)->required();
  AddStore(rm, &rm_opts);

  pacset::StoreCommandOptions verify_opts;
  std::string verify_name;
  std::string verify_file;
  auto* vf = app.add_subcommand(
      "verify", "Check every block and the structure of a forest (or of all forests), or a file");
  vf->add_option("NAME", verify_name);
  vf->add_option("--file", verify_file, "Check this .pac file instead of a stored forest")
      ->excludes(vf->get_option("NAME"));
  AddStore(vf, &verify_opts);

  pacset::StoreCommandOptions export_opts;
  std::string export_name, export_out;
  auto* ex = app.add_subcommand("export", "Write a stored forest back to a .pac file");
  ex->add_option("NAME", export_name)->required();
  ex->add_option("-o,--output", export_out, "The .pac file to write")->required();
  AddStore(ex, &export_opts);

  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    const int rc = app.exit(e);
    return rc == 0 ? 0 : 2;
  }
  pacset::HideStorePasswords(argc, argv);

  pacset::Status s;
  if (*p) {
    auto f = pacset::ParseModelFormat(predict_format);
    if (!f.ok()) return Fail(f.status());
    predict.format = *f;
    predict.verify_blocks = !no_verify;
    s = pacset::RunPredict(predict);
  } else if (*i) {
    auto f = pacset::ParseModelFormat(info_format);
    if (!f.ok()) return Fail(f.status());
    info.format = *f;
    s = pacset::RunInfo(info);
  } else if (*k) {
    auto f = pacset::ParseModelFormat(pack_format);
    if (!f.ok()) return Fail(f.status());
    pack.format = *f;
    s = pacset::RunPack(pack);
  } else if (*im) {
    auto f = pacset::ParseModelFormat(import_format);
    if (!f.ok()) return Fail(f.status());
    import.format = *f;
    s = pacset::RunImport(import);
  } else if (*ls) {
    s = pacset::RunList(ls_opts);
  } else if (*rm) {
    s = pacset::RunRemove(rm_name, rm_opts);
  } else if (*vf) {
    s = pacset::RunVerify(verify_name, verify_file, verify_opts);
  } else if (*ex) {
    s = pacset::RunExport(export_name, export_out, export_opts);
  } else if (*r) {
    auto f = pacset::ParseModelFormat(report_format);
    if (!f.ok()) return Fail(f.status());
    report.format = *f;
    s = pacset::RunLayoutReport(report);
  }
  return s.ok() ? 0 : Fail(s);
}
