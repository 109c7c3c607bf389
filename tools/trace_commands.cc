#include "tools/trace_commands.h"

#include <fcntl.h>
#include <signal.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <sstream>

#include <nlohmann/json.hpp>

#include "engine/blocks_per_row.h"
#include "engine/engine.h"
#include "layout/block.h"
#include "layout/pack.h"
#include "model/import.h"
#include "model/predict.h"
#include "protocol/control.h"
#include "tools/helper_programs.h"
#include "trace/analysis/miss_ratio.h"
#include "trace/analysis/policy_curve.h"
#include "trace/analysis/trace_compare.h"
#include "trace/analysis/trace_html.h"
#include "trace/analysis/trace_report.h"
#include "trace/request_marks.h"
#include "trace/trace_reader.h"
#include "util/atomic_file.h"
#include "util/csv.h"
#include "util/file_io.h"
#include "util/size.h"
#include "util/subprocess.h"

namespace pacset {
namespace {

StatusOr<nlohmann::json> ReadStats(const std::string& mount) {
  PACSET_ASSIGN_OR_RETURN(std::string text, ReadWholeFile(mount + kStatsFilePath));
  nlohmann::json j = nlohmann::json::parse(text, nullptr, false);
  if (j.is_discarded()) return Status::Corruption(mount + "/.pacsetfs/stats is not JSON");
  return j;
}

std::vector<std::string> SplitComma(const std::string& s) {
  std::vector<std::string> out;
  size_t pos = 0;
  while (pos <= s.size()) {
    size_t c = s.find(',', pos);
    if (c == std::string::npos) c = s.size();
    if (c > pos) out.push_back(s.substr(pos, c - pos));
    pos = c + 1;
  }
  return out;
}

CountDistribution Analytical(const PacEngine& engine, const RowMatrix& rows, Status* s) {
  CountDistribution d;
  auto counts = CountBlocksPerRow(engine, rows);
  *s = counts.status();
  if (counts.ok())
    for (uint64_t c : counts->per_row) d.Add(c);
  return d;
}

// The curves of `trace` under `policy` (lru: exact; else simulated, also at
// `extra` sizes), with the same sampling.
StatusOr<MissRatioReport> PolicyMissRatio(const std::string& trace, const std::string& policy,
                                          double sample_rate, uint64_t seed,
                                          const std::vector<uint64_t>& extra) {
  PolicyCurveOptions po;
  PACSET_ASSIGN_OR_RETURN(po.policy, ParseCachePolicy(policy));
  po.sample_rate = sample_rate;
  po.seed = seed;
  MissRatioOptions mo;
  mo.sample_rate = sample_rate;
  mo.seed = seed;
  PACSET_ASSIGN_OR_RETURN(MissRatioReport m, ComputeMissRatio(trace, mo));
  PACSET_RETURN_IF_ERROR(ApplyPolicyCurves(trace, po, extra, &m));
  return m;
}

}  // namespace

Status RunRecord(const RecordOptions& o, int* command_status) {
  *command_status = 0;
  if (o.command.empty()) return Status::InvalidArgument("no command to run (after --)");
  if (o.output.empty()) return Status::InvalidArgument("-o TRACE is required");
  if (!o.unit.empty() && o.unit != "row" && o.unit != "batch")
    return Status::InvalidArgument("request unit '" + o.unit + "' is not row or batch");
  std::string mount = o.mount;
  if (mount.empty()) {
    PACSET_ASSIGN_OR_RETURN(mount, FindPacsetfsMount(o.command));
  }
  PACSET_ASSIGN_OR_RETURN(nlohmann::json stats, ReadStats(mount));
  if (stats.contains("trace"))
    return Status::InvalidArgument(
        mount + " is already tracing to " + stats["trace"].value("path", std::string("?")) +
        "; stop it first (echo 'trace stop' > " + mount + "/.pacsetfs/control)");
  std::string trace = o.output;
  (void)MakeAbsolute(&trace);  // kept as given when the working directory is gone
  // The daemon creates the trace and never overwrites a file; an earlier
  // output of ours is replaced, by us, with our own rights.
  if (unlink(trace.c_str()) != 0 && errno != ENOENT)
    return Status::FromErrno("cannot replace " + trace, errno);
  // The command appends its request marks to $PACSET_REQUEST_MARKS: an empty
  // file in a private directory, removed (with the directory) on return.
  auto marks_dir = TempDir::Create("pacset-marks");
  if (!marks_dir.ok()) return marks_dir.status().WithContext("cannot create a request marks file");
  const std::string marks = (*marks_dir)->path() + "/marks";
  if (!UniqueFd(open(marks.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0600)).valid())
    return Status::FromErrno("cannot create a request marks file " + marks, errno);
  if (o.cold) PACSET_RETURN_IF_ERROR(SendControlCommand(mount, ControlCommand::Drop("*")));
  PACSET_RETURN_IF_ERROR(SendControlCommand(mount, ControlCommand::TraceStart(trace)));

  // Ctrl-C goes to the command (same process group); we still stop tracing.
  struct sigaction ignore {
  }, old_int{}, old_term{};
  ignore.sa_handler = SIG_IGN;
  sigaction(SIGINT, &ignore, &old_int);
  sigaction(SIGTERM, &ignore, &old_term);
  ChildOptions child;
  child.env.push_back(std::string(kRequestMarksEnv) + "=" + marks);
  if (!o.unit.empty()) child.env.push_back(std::string(kRequestMarksUnitEnv) + "=" + o.unit);
  child.signal_actions = {{SIGINT, old_int}, {SIGTERM, old_term}};  // the command's own
  child.run_scripts_with_sh = true;                                 // run as execvp runs it
  pid_t pid = -1;
  const int start_error = StartChild(o.command, child, &pid);
  int wstatus = 0;
  Status run;
  if (start_error != 0) {
    // As if the command had said so and exited 127 (a shell's "cannot run"):
    // the trace still stops and is kept.
    std::fprintf(stderr, "pacset-trace: cannot run %s: %s\n", o.command[0].c_str(),
                 std::strerror(start_error));
    *command_status = 127;
  } else {
    if (!WaitForChild(pid, &wstatus)) run = Status::FromErrno("wait for " + o.command[0], errno);
    *command_status = WIFEXITED(wstatus) ? WEXITSTATUS(wstatus) : 128 + WTERMSIG(wstatus);
  }
  sigaction(SIGINT, &old_int, nullptr);
  sigaction(SIGTERM, &old_term, nullptr);
  PACSET_RETURN_IF_ERROR(SendControlCommand(mount, ControlCommand::TraceStop()));
  PACSET_RETURN_IF_ERROR(run);
  uint64_t merged = 0;
  PACSET_RETURN_IF_ERROR(MergeRequestMarks(trace, marks, trace, &merged));
  PACSET_ASSIGN_OR_RETURN(ScanResult scan, ScanTrace(trace, nullptr));
  std::fprintf(stderr,
               "pacset-trace: %s: %llu block accesses, %llu requests (%llu marks) from `%s`\n",
               o.output.c_str(), static_cast<unsigned long long>(scan.accesses),
               static_cast<unsigned long long>(scan.requests),
               static_cast<unsigned long long>(merged), o.command[0].c_str());
  if (*command_status != 0)
    return Status::IOError(o.command[0] + " exited with status " + std::to_string(*command_status) +
                           " (the trace is kept)");
  return Status::Ok();
}

Status RunMerge(const std::string& trace, const std::string& marks, const std::string& output) {
  uint64_t merged = 0;
  PACSET_RETURN_IF_ERROR(MergeRequestMarks(trace, marks, output.empty() ? trace : output, &merged));
  std::fprintf(stderr, "pacset-trace: merged %llu request marks\n",
               static_cast<unsigned long long>(merged));
  return Status::Ok();
}

Status RunReport(const ReportCliOptions& o) {
  ReportOptions ro;
  ro.bucket_seconds = o.bucket_seconds;
  PACSET_ASSIGN_OR_RETURN(TraceReport report, BuildTraceReport(o.trace, ro));
  PACSET_ASSIGN_OR_RETURN(MissRatioReport memory,
                          PolicyMissRatio(o.trace, o.policy, o.sample_rate, 0, {}));
  if (!o.html.empty()) {
    PacRegions regions;
    uint32_t regions_forest = 0;
    bool have_regions = false;
    if (!o.model.empty()) {
      PACSET_ASSIGN_OR_RETURN(auto pac, PacFile::Open(o.model));
      regions = PacRegions::FromHeader(pac->header());
      // The forest traced from this file: by header checksum, else the only one.
      for (const auto& [id, meta] : report.scan.forests)
        for (const auto& [g, info] : meta.generations)
          if (info.header_checksum == pac->header().checksum) regions_forest = id;
      if (!regions_forest && report.forests.size() == 1)
        regions_forest = report.forests.begin()->first;
      if (!regions_forest)
        return Status::InvalidArgument(o.model + " is not the file of any forest in " + o.trace);
      have_regions = true;
    }
    PACSET_RETURN_IF_ERROR(WriteFileAtomically(
        o.html,
        RenderReportHtml(report, have_regions ? &regions : nullptr, regions_forest, &memory)));
  }
  if (o.json) {
    nlohmann::json j = report.ToJson();
    j["memory"] = memory.ToJson();
    std::printf("%s\n", j.dump(2).c_str());
  } else if (o.html.empty()) {
    std::fputs(report.ToText().c_str(), stdout);
    std::fputs(("\n" + memory.ToText()).c_str(), stdout);
  } else {
    std::printf("wrote %s\n", o.html.c_str());
  }
  return Status::Ok();
}

Status RunMrc(const MrcCliOptions& o) {
  std::vector<uint64_t> sizes;
  for (const auto& text : o.sizes) {
    PACSET_ASSIGN_OR_RETURN(uint64_t v, ParseByteSize(text, "cache size"));
    sizes.push_back(v);
  }
  PACSET_ASSIGN_OR_RETURN(MissRatioReport m,
                          PolicyMissRatio(o.trace, o.policy, o.sample_rate, o.seed, sizes));
  if (o.json) {
    nlohmann::json j = m.ToJson(o.points);
    nlohmann::json at = nlohmann::json::array();
    for (uint64_t c : sizes) {
      const MissRatioPoint p = m.all.At(c);
      at.push_back({{"cache", c},
                    {"miss_ratio", p.miss_ratio},
                    {"misses", p.misses},
                    {"error", p.error},
                    {"size_error", p.size_error}});
    }
    j["at"] = at;
    std::printf("%s\n", j.dump(2).c_str());
  } else if (o.csv) {
    std::fputs(m.ToCsv(o.points).c_str(), stdout);
  } else {
    std::fputs(m.ToText().c_str(), stdout);
    for (uint64_t c : sizes) {
      const MissRatioPoint p = m.all.At(c);
      std::printf(
          "  at %s: miss ratio %.4f%%, %.0f misses of %llu accesses%s\n", FormatByteSize(c).c_str(),
          100 * p.miss_ratio, p.misses, static_cast<unsigned long long>(m.all.accesses()),
          m.all.exact() || m.all.simulated() ? ""
                                             : (" (+- " + std::to_string(p.error) + ")").c_str());
    }
  }
  return Status::Ok();
}

Status RunCompare(const CompareCliOptions& o) {
  CompareOptions co{o.trace, o.model, o.input, o.forest};
  PACSET_ASSIGN_OR_RETURN(CompareResult r, CompareTrace(co));
  if (o.json) {
    std::printf("%s\n", r.ToJson(SIZE_MAX).dump(2).c_str());
  } else {
    std::fputs(r.ToText(o.requests).c_str(), stdout);
  }
  return Status::Ok();
}

Status RunLayouts(const LayoutsCliOptions& o) {
  if (o.model.empty() && o.pacs.empty() && o.traces.empty())
    return Status::InvalidArgument("give --model, --pac or --trace (several allowed)");
  if ((!o.model.empty() || !o.pacs.empty()) && o.input.empty())
    return Status::InvalidArgument("analytical counts need --input rows.csv");
  std::vector<DistributionSeries> series;
  Status s;
  if (!o.model.empty()) {
    PACSET_ASSIGN_OR_RETURN(Forest forest,
                            ImportModel(o.model, ModelFormat::kAuto, FindHelperPrograms()));
    PACSET_ASSIGN_OR_RETURN(RowMatrix rows, ReadCsvRows(o.input, forest.num_features));
    if (rows.num_rows == 0) return Status::InvalidArgument(o.input + ": no rows");
    if (!o.calibrate.empty()) {
      PACSET_ASSIGN_OR_RETURN(RowMatrix cal, ReadCsvRows(o.calibrate, forest.num_features));
      CalibrateCardinality(forest, cal);
    }
    PACSET_ASSIGN_OR_RETURN(uint32_t bs, ParseBlockSize(o.block_size));
    std::vector<LayoutKind> kinds;
    if (o.layouts.empty()) {
      kinds = AllLayoutKinds();
    } else {
      for (const auto& name : SplitComma(o.layouts)) {
        PACSET_ASSIGN_OR_RETURN(LayoutKind k, ParseLayoutKind(name));
        kinds.push_back(k);
      }
    }
    for (LayoutKind k : kinds) {
      PackOptions po;
      po.layout = k;
      po.block_size = bs;
      po.bin_depth = o.bin_depth;
      po.leaf_ids = false;
      PACSET_ASSIGN_OR_RETURN(std::string bytes, PackForestToBuffer(forest, po));
      PACSET_ASSIGN_OR_RETURN(auto file, PacFile::FromBuffer(std::move(bytes), LayoutKindName(k)));
      const uint64_t blocks = file->header().block_count;
      PACSET_ASSIGN_OR_RETURN(auto engine, PacEngine::FromFile(std::move(file)));
      DistributionSeries d{LayoutKindName(k), "analytical", Analytical(*engine, rows, &s), blocks};
      PACSET_RETURN_IF_ERROR(s);
      series.push_back(std::move(d));
    }
  }
  for (const auto& p : o.pacs) {
    PACSET_ASSIGN_OR_RETURN(auto engine, PacEngine::Open(p));
    PACSET_ASSIGN_OR_RETURN(RowMatrix rows, ReadCsvRows(o.input, engine->num_features()));
    DistributionSeries d{BaseName(p), "analytical", Analytical(*engine, rows, &s),
                         engine->file().header().block_count};
    PACSET_RETURN_IF_ERROR(s);
    series.push_back(std::move(d));
  }
  for (const auto& t : o.traces) {
    PACSET_ASSIGN_OR_RETURN(TraceReport r, BuildTraceReport(t));
    if (r.scan.requests == 0)
      return Status::InvalidArgument(t +
                                     " has no request marks (record it with pacset-trace record)");
    series.push_back({"trace " + BaseName(t), "measured", r.blocks_per_request, 0});
  }
  if (o.json) {
    nlohmann::json j = nlohmann::json::array();
    for (const auto& d : series)
      j.push_back({{"label", d.label},
                   {"kind", d.kind},
                   {"model_blocks", d.model_blocks},
                   {"blocks_per_request", d.blocks.ToJson(true)}});
    std::printf("%s\n", j.dump(2).c_str());
  } else {
    std::printf("%-28s %-10s %9s %7s %7s %7s %8s\n", "series", "kind", "mean", "median", "p95",
                "max", "blocks");
    for (const auto& d : series)
      std::printf("%-28s %-10s %9.2f %7.1f %7llu %7llu %8llu\n", d.label.c_str(), d.kind.c_str(),
                  d.blocks.mean(), d.blocks.median(),
                  static_cast<unsigned long long>(d.blocks.Quantile(0.95)),
                  static_cast<unsigned long long>(d.blocks.max()),
                  static_cast<unsigned long long>(d.model_blocks));
  }
  if (!o.output.empty()) {
    std::string subtitle = "blocks read per request";
    if (!o.model.empty()) subtitle += " - model " + o.model + ", block size " + o.block_size;
    if (!o.input.empty()) subtitle += ", rows " + o.input;
    PACSET_RETURN_IF_ERROR(WriteFileAtomically(
        o.output, RenderLayoutsHtml(series, "Blocks per request, side by side", subtitle)));
  }
  return Status::Ok();
}

Status RunMark(const std::string& marks, bool begin, uint64_t id, uint64_t first_row, uint32_t rows,
               uint32_t pid) {
  PACSET_ASSIGN_OR_RETURN(auto m, RequestMarker::Open(marks));
  m->Mark(begin, id, first_row, rows, pid, pid);
  return m->status();
}

}  // namespace pacset
