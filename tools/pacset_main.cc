// pacset: import, pack, inspect and predict with decision forests.
// Exit status: 0 success, 1 runtime failure, 2 usage error.
#include <CLI/CLI.hpp>

#include <cstdio>
#include <cstring>
#include <functional>
#include <memory>
#include <string>

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

// Each subcommand's options are added to its CLI11 app only when argv names
// that subcommand (the rest stay a name and a description, enough for
// `pacset --help`): building all of them cost `pacset --version` a sixth of
// its time. A Command's Add function adds the options, whose values live in
// the returned Runner, which runs the command once argv is parsed.
using Runner = std::function<pacset::Status()>;

// The --format option's value as a ModelFormat in *format, then `run`.
template <typename Options>
pacset::Status WithFormat(const std::string& format, Options* opts,
                          const std::function<pacset::Status(const Options&)>& run) {
  auto f = pacset::ParseModelFormat(format);
  if (!f.ok()) return f.status();
  opts->format = *f;
  return run(*opts);
}

Runner AddPredict(CLI::App* app) {
  struct Args {
    pacset::PredictOptions opts;
    std::string format;
    bool no_verify = false;
  };
  auto o = std::make_shared<Args>();
  app->add_option("MODEL", o->opts.model, "Model file, or the forest's name with --store")
      ->required();
  app->add_option("-i,--input", o->opts.input,
                  "CSV rows (header optional; empty or NaN = missing; a line may hold at most "
                  "1 MiB + 64 bytes per feature, a field 4 KiB: longer is an error naming the "
                  "line); - answers rows from standard input one line at a time as they come "
                  "(one line out per row, flushed; a bad row gets a line 'error: ...')")
      ->required();
  app->add_option("-o,--output", o->opts.output, "Output CSV (default: standard output)");
  app->add_flag("--margin", o->opts.margin, "Write raw scores (margins) instead of predictions");
  app->add_flag("--leaf", o->opts.leaf, "Write the leaf index reached in every tree");
  app->add_option("--method", o->opts.method,
                  "scikit-learn IsolationForest: the method whose output to write, score_samples "
                  "(the default), decision_function (score_samples - offset_) or predict (-1 "
                  "outlier, 1 inlier)")
      ->check(CLI::IsMember({"score_samples", "decision_function", "predict"}));
  app->add_option("-j,--threads", o->opts.threads, "Worker threads")->check(CLI::Range(1, 1024));
  app->add_option("--repeat", o->opts.repeat, "Predict the rows this many times (benchmarking)")
      ->check(CLI::Range(1, 1000000));
  app->add_flag("--timing", o->opts.timing,
                "Print the time spent predicting (loading and CSV excluded) to stderr");
  app->add_option("--mark-requests", o->opts.mark_requests,
                  "Mark request boundaries for pacset-trace: one request per row or per batch")
      ->check(CLI::IsMember({"row", "batch"}));
  app->add_option("--marks-file", o->opts.marks_file,
                  "Append request marks here (default: $PACSET_REQUEST_MARKS)");
  app->add_flag("--evict-between-rows", o->opts.evict_between_rows,
                "With --mark-requests row: evict the file's cached pages before each row");
  app->add_flag("--no-verify", o->no_verify,
                ".pac files: do not verify each block's checksum the first time it is used");
  app->add_option(
         "--max-in-flight", o->opts.max_in_flight,
         ".pac files and --store: most blocks read at once when they are not in memory "
         "(default: 512 KiB of blocks, at least 32, with io_uring, else 32; through a pacsetfs "
         "mount 128; --store: 4096, at most 64 MiB)")
      ->check(CLI::Range(1, 65536));
  app->add_option("--block-io", o->opts.block_io,
                  ".pac files: how missing blocks are read: io_uring (one ring per request), "
                  "threads (a pool of pread threads), auto (io_uring where the kernel allows it; "
                  "on a pacsetfs mount its gathers, else threads on FUSE) or gather-file (as auto, "
                  "but through a pacsetfs mount's gather file, as older engines do)")
      ->check(CLI::IsMember({"auto", "io_uring", "threads", "gather-file"}));
  app->add_option("--store", o->opts.store,
                  "Read the forest MODEL straight from this store, without a mount: "
                  "rocksdb:PATH, dir:PATH, redis://[:PASSWORD@]HOST:PORT[/DB] or "
                  "redis-cluster://[:PASSWORD@]HOST:PORT[,HOST:PORT...] (a password is best given "
                  "in $REDISCLI_AUTH; one in the URI is hidden from ps once parsed)");
  app->add_option("--cache-size", o->opts.cache_size,
                  "--store: in-process block cache (e.g. 64MiB, 1GiB)")
      ->default_val("256MiB");
  app->add_option("--store-timeout", o->opts.store_timeout_ms,
                  "--store: give up on a store call after about this many milliseconds")
      ->check(CLI::Range(1, 3600000))
      ->default_val(10000);
  AddFormat(app, &o->format);
  return [o] {
    o->opts.verify_blocks = !o->no_verify;
    return WithFormat<pacset::PredictOptions>(o->format, &o->opts, pacset::RunPredict);
  };
}

Runner AddInfo(CLI::App* app) {
  struct Args {
    pacset::InfoOptions opts;
    std::string format;
  };
  auto o = std::make_shared<Args>();
  app->add_option("PATH", o->opts.path, "Model or .pac file")->required();
  app->add_flag("--json", o->opts.json, "Print one JSON object");
  AddFormat(app, &o->format);
  return [o] { return WithFormat<pacset::InfoOptions>(o->format, &o->opts, pacset::RunInfo); };
}

Runner AddPack(CLI::App* app) {
  struct Args {
    pacset::PackCommandOptions opts;
    std::string format;
  };
  auto o = std::make_shared<Args>();
  app->add_option("MODEL", o->opts.model, "Model file")->required();
  app->add_option("-o,--output", o->opts.output, "The .pac file to write")->required();
  AddPackOptions(app, &o->opts.pack);
  AddFormat(app, &o->format);
  return
      [o] { return WithFormat<pacset::PackCommandOptions>(o->format, &o->opts, pacset::RunPack); };
}

Runner AddLayoutReport(CLI::App* app) {
  struct Args {
    pacset::LayoutReportOptions opts;
    std::string format;
  };
  auto o = std::make_shared<Args>();
  app->add_option("MODEL", o->opts.model, "Model file")->required();
  app->add_option("-i,--input", o->opts.input, "CSV rows (limits as predict --input)")->required();
  app->add_option("--block-size", o->opts.block_sizes,
                  "Block sizes to compare (repeatable; default 4KiB and 64KiB)");
  app->add_option("--layouts", o->opts.layouts, "Comma-separated layouts (default: all)");
  app->add_option("--bin-depth", o->opts.bin_depth, "Levels per interleaved bin (auto: chosen)")
      ->default_val("auto");
  app->add_option("--trees-per-bin", o->opts.trees_per_bin,
                  "Trees per bin (auto: chosen; fit: as many as fit a block)")
      ->default_val("auto");
  app->add_option("--calibrate", o->opts.calibrate,
                  "CSV rows to count node cardinalities with (and to choose the bins by; limits as "
                  "predict --input)");
  app->add_flag("--json", o->opts.json, "Print one JSON object");
  AddFormat(app, &o->format);
  return [o] {
    return WithFormat<pacset::LayoutReportOptions>(o->format, &o->opts, pacset::RunLayoutReport);
  };
}

Runner AddImport(CLI::App* app) {
  struct Args {
    pacset::ImportOptions opts;
    std::string format;
  };
  auto o = std::make_shared<Args>();
  app->add_option("MODEL_OR_PAC", o->opts.input, "Model file or .pac file")->required();
  app->add_option("--name", o->opts.name, "Forest name (the file is NAME.pac on a mount)")
      ->required();
  AddStore(app, &o->opts.store);
  AddPackOptions(app, &o->opts.pack);
  AddFormat(app, &o->format);
  return [o] { return WithFormat<pacset::ImportOptions>(o->format, &o->opts, pacset::RunImport); };
}

// A store command's options and the forest name (and file or output) it takes.
struct StoreArgs {
  pacset::StoreCommandOptions opts;
  std::string name;
  std::string file;    // verify --file
  std::string output;  // export -o
};

Runner AddList(CLI::App* app) {
  auto o = std::make_shared<StoreArgs>();
  AddStore(app, &o->opts);
  app->add_flag("--json", o->opts.json, "Print JSON");
  return [o] { return pacset::RunList(o->opts); };
}

Runner AddRemove(CLI::App* app) {
  auto o = std::make_shared<StoreArgs>();
  app->add_option("NAME", o->name)->required();
  AddStore(app, &o->opts);
  return [o] { return pacset::RunRemove(o->name, o->opts); };
}

Runner AddVerify(CLI::App* app) {
  auto o = std::make_shared<StoreArgs>();
  app->add_option("NAME", o->name);
  app->add_option("--file", o->file, "Check this .pac file instead of a stored forest")
      ->excludes(app->get_option("NAME"));
  AddStore(app, &o->opts);
  return [o] { return pacset::RunVerify(o->name, o->file, o->opts); };
}

Runner AddExport(CLI::App* app) {
  auto o = std::make_shared<StoreArgs>();
  app->add_option("NAME", o->name)->required();
  app->add_option("-o,--output", o->output, "The .pac file to write")->required();
  AddStore(app, &o->opts);
  return [o] { return pacset::RunExport(o->name, o->output, o->opts); };
}

struct Command {
  const char* name;
  const char* description;
  Runner (*add)(CLI::App* app);
};

const Command kCommands[] = {
    {"predict", "Predict rows of a CSV file with a model or .pac file, or a forest in a store",
     AddPredict},
    {"info", "Describe a model or .pac file", AddInfo},
    {"pack", "Pack a model into a .pac file", AddPack},
    {"layout-report", "Count the blocks each layout makes rows touch (analytical I/O)",
     AddLayoutReport},
    {"import", "Put a model (packed on the way in) or a .pac into a store", AddImport},
    {"ls", "List the forests in a store", AddList},
    {"rm", "Remove a forest from a store", AddRemove},
    {"verify", "Check every block and the structure of a forest (or of all forests), or a file",
     AddVerify},
    {"export", "Write a stored forest back to a .pac file", AddExport},
};

// The subcommand argv names: its first argument that is no option (pacset's
// own options, --help and --version, take no value). Null if none.
const char* NamedSubcommand(int argc, char** argv) {
  for (int i = 1; i < argc; ++i) {
    if (argv[i][0] != '-') return argv[i];
  }
  return nullptr;
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"pacset: pack decision forests for selective, page-faulted inference"};
  app.set_version_flag("--version", std::string("pacset ") + PACSET_VERSION);
  app.require_subcommand(1);
  const char* named = NamedSubcommand(argc, argv);
  Runner run;
  for (const Command& c : kCommands) {
    CLI::App* sub = app.add_subcommand(c.name, c.description);
    if (named != nullptr && std::strcmp(named, c.name) == 0) run = c.add(sub);
  }
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    const int rc = app.exit(e);
    return rc == 0 ? 0 : 2;
  }
  pacset::HideStorePasswords(argc, argv);
  if (!run) return 2;  // not reached: CLI11 requires one of the subcommands
  const pacset::Status s = run();
  return s.ok() ? 0 : Fail(s);
}
