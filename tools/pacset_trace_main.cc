// pacset-trace: record, report and compare pacsetfs block-access traces.
//
//   pacset-trace record [--mount M] [--cold] [--per-row] -o TRACE -- COMMAND...
//   pacset-trace report TRACE [--json] [--html OUT [--model forest.pac]] [--sample-rate R]
//                [--policy lru|w-tinylfu]
//   pacset-trace mrc TRACE [--policy lru|w-tinylfu] [--sample-rate R] [--at SIZE]... [--csv |
//   --json] pacset-trace cache-policies TRACE [--model forest.pac] [--forest NAME] [--json]
//   pacset-trace compare TRACE --model forest.pac --input rows.csv [--forest NAME]
//   pacset-trace layouts [--model MODEL] [--pac F]... [--trace T]... --input rows.csv [-o OUT.html]
//   pacset-trace merge TRACE MARKS [-o OUT]
//   pacset-trace mark begin|end ID --marks FILE [--pid PID] [--first-row R --rows N]
//
// Exit status: 0 success, 1 failure, 2 usage error. Format: trace/FORMAT.md.
#include <unistd.h>

#include <CLI/CLI.hpp>

#include <cstdio>
#include <iostream>

#include "tools/trace_commands.h"
#include "trace/analysis/cache_policies.h"

namespace {

// --policy of the curves: the daemon's (fs/block_cache.h) by default.
void AddPolicy(CLI::App* app, std::string* policy) {
  app->add_option("--policy", *policy,
                  "Cache policy of the curve: w-tinylfu (the daemon's; simulated) or lru "
                  "(exact; an upper bound on the daemon's misses)")
      ->default_val("w-tinylfu")
      ->check(CLI::IsMember({"lru", "w-tinylfu"}));
}

int Fail(const pacset::Status& s) {
  std::fprintf(stderr, "pacset-trace: error: %s\n", s.ToString().c_str());
  return 1;
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"pacset-trace: block-access traces of pacsetfs, as figures a person can act on"};
  app.set_version_flag("--version", std::string("pacset-trace ") + PACSET_VERSION);
  app.require_subcommand(1);

  pacset::RecordOptions rec;
  auto* r = app.add_subcommand("record", "Trace a command's block accesses on a pacsetfs mount");
  r->add_option(
      "--mount", rec.mount,
      "Mount point (default: the pacsetfs mount the command's paths lead into, else the only one)");
  r->add_flag("--cold", rec.cold, "Drop all caches of the mount first");
  bool per_row = false;
  r->add_flag("--per-row", per_row, "Ask pacset predict to mark one request per row");
  r->add_option("-o,--output", rec.output, "Trace file to write")->required();
  r->add_option("COMMAND", rec.command, "The workload (after --)")->required();

  pacset::ReportCliOptions rep;
  auto* rp = app.add_subcommand("report", "Per forest, request, process and second figures");
  rp->add_option("TRACE", rep.trace)->required();
  rp->add_flag("--json", rep.json, "Print one JSON object");
  rp->add_option("--html", rep.html, "Write a self-contained HTML report (heat map, histograms)");
  rp->add_option("--model", rep.model, "The traced .pac: marks its regions on the heat map");
  rp->add_option("--bucket", rep.bucket_seconds, "Seconds per timeline bucket")->default_val(1.0);
  rp->add_option("--sample-rate", rep.sample_rate,
                 "Memory section: sample this share of the blocks (1: exact)")
      ->default_val(1.0)
      ->check(CLI::Range(0.0, 1.0));
  AddPolicy(rp, &rep.policy);

  pacset::MrcCliOptions mrc;
  auto* mr = app.add_subcommand(
      "mrc", "Miss-ratio curves: the daemon cache's misses at every cache size, memory for hits");
  mr->add_option("TRACE", mrc.trace)->required();
  mr->add_option("--sample-rate", mrc.sample_rate,
                 "Sample this share of the blocks (SHARDS; for billions of accesses), 1: exact")
      ->default_val(1.0)
      ->check(CLI::Range(0.0, 1.0));
  AddPolicy(mr, &mrc.policy);
  mr->add_option("--seed", mrc.seed, "Which blocks the sample takes");
  mr->add_option("--at", mrc.sizes, "Also give the curve at this cache size (e.g. 64MiB)");
  mr->add_option("--points", mrc.points, "Points per curve in --csv and --json")->default_val(200);
  auto* mr_csv = mr->add_flag("--csv", mrc.csv, "Print the curves as CSV");
  mr->add_flag("--json", mrc.json, "Print one JSON object")->excludes(mr_csv);

  pacset::CachePoliciesCliOptions pol;
  auto* cp = app.add_subcommand("cache-policies",
                                "Hit ratio of each block-cache policy over a trace, by cache size");
  cp->add_option("TRACE", pol.trace)->required();
  cp->add_option("--model", pol.model, "The traced .pac: its metadata and bins for bin-lru");
  cp->add_option("--forest", pol.forest, "Forest name in the trace (default: the only one)");
  cp->add_flag("--json", pol.json, "Print one JSON object");

  pacset::CompareCliOptions cmp;
  auto* c =
      app.add_subcommand("compare", "Measured blocks per request next to the analytical count");
  c->add_option("TRACE", cmp.trace)->required();
  c->add_option("--model", cmp.model, "The traced .pac file")->required();
  c->add_option("-i,--input", cmp.input, "The rows the workload predicted")->required();
  c->add_option("--forest", cmp.forest, "Forest name in the trace (default: the only one)");
  c->add_option("--requests", cmp.requests, "Per-request lines to print")->default_val(20);
  c->add_flag("--json", cmp.json, "Print one JSON object");

  pacset::LayoutsCliOptions lay;
  auto* l = app.add_subcommand("layouts", "Blocks-per-request distributions side by side (HTML)");
  l->add_option("--model", lay.model, "Model to pack in every layout (in memory)");
  l->add_option("--pac", lay.pacs, "Packed .pac files to compare (repeatable)");
  l->add_option("--trace", lay.traces, "Traces whose measured distribution to show (repeatable)");
  l->add_option("-i,--input", lay.input, "Rows for the analytical counts");
  l->add_option("--layouts", lay.layouts, "Comma-separated layouts (default: all)");
  l->add_option("--block-size", lay.block_size, "Block size for --model")->default_val("4KiB");
  l->add_option("--bin-depth", lay.bin_depth, "Levels per bin for --model")->default_val(2);
  l->add_option("--calibrate", lay.calibrate, "Rows to weigh the --model layouts with");
  l->add_option("-o,--output", lay.output, "HTML file to write");
  l->add_flag("--json", lay.json, "Print JSON instead of a table");

  std::string merge_trace, merge_marks, merge_out;
  auto* m = app.add_subcommand("merge", "Merge a request-marks file into a trace");
  m->add_option("TRACE", merge_trace)->required();
  m->add_option("MARKS", merge_marks)->required();
  m->add_option("-o,--output", merge_out, "Output trace (default: rewrite TRACE)");

  std::string mark_what, mark_file;
  uint64_t mark_id = 0, mark_first = 0;
  uint32_t mark_rows = 0, mark_pid = static_cast<uint32_t>(getppid());
  auto* mk = app.add_subcommand("mark", "Append one request mark (for engines without a writer)");
  mk->add_option("WHAT", mark_what, "begin or end")
      ->required()
      ->check(CLI::IsMember({"begin", "end"}));
  mk->add_option("ID", mark_id, "Request id")->required();
  mk->add_option("--marks", mark_file, "Marks file (default: $PACSET_REQUEST_MARKS)")
      ->envname("PACSET_REQUEST_MARKS")
      ->required();
  mk->add_option("--pid", mark_pid, "Process whose reads belong to the request (default: parent)");
  mk->add_option("--first-row", mark_first, "First input row of the request");
  mk->add_option("--rows", mark_rows, "Rows in the request");

  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    const int rc = app.exit(e);
    return rc == 0 ? 0 : 2;
  }

  pacset::Status s;
  if (*r) {
    if (per_row) rec.unit = "row";
    int command_status = 0;
    s = pacset::RunRecord(rec, &command_status);
    // Like time(1): the trace is written, and the exit status is the command's.
    if (command_status != 0) {
      std::fprintf(stderr, "pacset-trace: %s\n", s.message().c_str());
      return command_status;
    }
  } else if (*rp) {
    s = pacset::RunReport(rep);
  } else if (*mr) {
    s = pacset::RunMrc(mrc);
  } else if (*cp) {
    s = pacset::RunCachePoliciesCommand(pol, std::cout);
  } else if (*c) {
    s = pacset::RunCompare(cmp);
  } else if (*l) {
    s = pacset::RunLayouts(lay);
  } else if (*m) {
    s = pacset::RunMerge(merge_trace, merge_marks, merge_out);
  } else if (*mk) {
    s = pacset::RunMark(mark_file, mark_what == "begin", mark_id, mark_first, mark_rows, mark_pid);
  }
  if (s.code() == pacset::StatusCode::kInvalidArgument && *r && rec.command.empty()) {
    std::fprintf(stderr, "pacset-trace: %s\n", s.message().c_str());
    return 2;
  }
  return s.ok() ? 0 : Fail(s);
}
