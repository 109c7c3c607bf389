// pacset predict: rows through the engine, from a .pac file (with request
// marks when asked) or from a model packed in memory; --input - answers them
// line by line (tools/predict_rows.h). Straight from a store:
// tools/predict_store.cc.
#include <fcntl.h>
#include <sys/mman.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <memory>
#include <mutex>
#include <vector>

#include "engine/engine.h"
#include "layout/block.h"
#include "layout/pack.h"
#include "tools/commands.h"
#include "tools/model_input.h"
#include "tools/predict_rows.h"
#include "trace/request_marks.h"
#include "util/csv.h"
#include "util/parallel.h"

namespace pacset {
namespace {

// Runs fn(begin, end) over [0, n) split into `threads` contiguous chunks.
template <typename Fn>
void ParallelRows(size_t n, int threads, Fn fn) {
  (void)ParallelFor(n, threads, 1, [&](size_t b, size_t e) {
    fn(b, e);
    return Status::Ok();
  });
}

void ReportTiming(const PredictOptions& opts, size_t rows,
                  std::chrono::steady_clock::time_point since) {
  if (!opts.timing) return;
  const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - since).count();
  const int passes = std::max(1, opts.repeat);
  std::fprintf(stderr, "predict: %zu rows x %d passes in %.6f s = %.0f rows/s (%d threads)\n", rows,
               passes, s, rows * passes / s, opts.threads);
}

// A model file predicts through the engine too, packed in memory (no
// temporary file): the same speed and the same bits as its .pac. Here the
// layout only has to pack fast and walk fast warm, no block count to save:
// bin-dfs with depth-2 bins and no choosing packs the 682-tree forest in
// half the CPU time of pacset's layout and walks it at least as fast.
StatusOr<std::unique_ptr<PacEngine>> PackInMemory(const Forest& forest, bool leaf_ids) {
  PackOptions o;
  o.layout = LayoutKind::kBinDfs;
  o.bin_depth = 2;
  o.trees_per_bin = kTreesPerBinFit;
  o.leaf_ids = leaf_ids;
  // A block must hold a leaf vector (and its trailer).
  const uint64_t record = (8ull * forest.leaf_width + kUnit - 1) / kUnit * kUnit;
  while (o.block_size < (1u << 20) && o.block_size - kBlockTrailerSize < record) o.block_size *= 2;
  auto bytes = PackForestToBuffer(forest, o);
  if (!bytes.ok())
    return bytes.status().WithContext("cannot predict with " + forest.source.file_name);
  PACSET_ASSIGN_OR_RETURN(auto file,
                          PacFile::FromBuffer(std::move(bytes).value(), forest.source.file_name));
  return PacEngine::FromFile(std::move(file));
}

// Where and how to mark requests: from the options, else the environment.
struct MarkPlan {
  std::string path;  // "": no marks
  bool per_row = false;
};

StatusOr<MarkPlan> PlanMarks(const PredictOptions& opts) {
  MarkPlan plan;
  if (opts.evict_between_rows && opts.mark_requests != "row")
    return Status::InvalidArgument("--evict-between-rows needs --mark-requests row");
  const char* env_path = std::getenv(kRequestMarksEnv);
  const char* env_unit = std::getenv(kRequestMarksUnitEnv);
  plan.path = !opts.marks_file.empty() ? opts.marks_file : env_path ? env_path : "";
  std::string unit = !opts.mark_requests.empty() ? opts.mark_requests : env_unit ? env_unit : "";
  if (unit.empty()) unit = "batch";
  if (unit != "row" && unit != "batch")
    return Status::InvalidArgument("request unit '" + unit + "' is not row or batch");
  if (plan.path.empty() && !opts.mark_requests.empty())
    return Status::InvalidArgument("--mark-requests needs --marks-file or $" +
                                   std::string(kRequestMarksEnv));
  plan.per_row = unit == "row";
  return plan;
}

// Drops the mapped file's pages from this process and from the page cache
// (a pacsetfs mount then serves the next reads from its daemon cache, and
// traces them).
Status EvictPages(const PacEngine& engine, const std::string& path) {
  void* base = const_cast<char*>(engine.file().data());
  if (madvise(base, engine.file().size(), MADV_DONTNEED) != 0)
    return Status::FromErrno("cannot drop the mapping of " + path, errno);
  const int fd = open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return Status::FromErrno("cannot open " + path, errno);
  const int rc = posix_fadvise(fd, 0, 0, POSIX_FADV_DONTNEED);
  close(fd);
  if (rc != 0) return Status::FromErrno("cannot drop the cached pages of " + path, rc);
  return Status::Ok();
}

// Predicts with request marks. Per row: rows go through the engine one at a
// time (so each row's page faults fall between its marks), split over
// `threads` threads that each mark their own rows. Per batch: one request
// around the whole prediction. Results equal the unmarked path's.
Status PredictWithPacMarked(const PacEngine& engine, const RowMatrix& rows,
                            const PredictOptions& opts, const MarkPlan& plan) {
  PACSET_ASSIGN_OR_RETURN(auto marker, RequestMarker::Open(plan.path));
  CsvWriter out;
  PACSET_RETURN_IF_ERROR(out.Open(opts.output));
  const size_t cols = engine.num_columns(opts.margin);
  const size_t T = engine.num_trees();
  std::vector<double> result;
  std::vector<int32_t> leaves;
  if (!plan.per_row) {
    const uint32_t n = static_cast<uint32_t>(std::min<size_t>(rows.num_rows, UINT32_MAX));
    marker->Begin(0, 0, n);
    Status s = opts.leaf ? engine.PredictLeaves(rows, opts.threads, &leaves)
                         : engine.PredictAll(rows, opts.margin, opts.threads, &result);
    marker->End(0, 0, n);
    PACSET_RETURN_IF_ERROR(s);
  } else {
    if (opts.leaf) {
      leaves.assign(rows.num_rows * T, 0);
    } else {
      result.assign(rows.num_rows * cols, 0.0);
    }
    std::mutex mu;
    Status first_error;
    ParallelRows(rows.num_rows, opts.threads, [&](size_t b, size_t e) {
      Status s;
      RowMatrix one;
      std::vector<int32_t> one_leaves;
      for (size_t r = b; r < e && s.ok(); ++r) {
        if (opts.evict_between_rows) s = EvictPages(engine, opts.model);
        marker->Begin(r, r, 1);
        if (opts.leaf) {
          one.num_rows = 1;
          one.num_cols = rows.num_cols;
          one.values.assign(rows.row(r), rows.row(r) + rows.num_cols);
          s = engine.PredictLeaves(one, 1, &one_leaves);
          if (s.ok()) std::copy(one_leaves.begin(), one_leaves.end(), leaves.begin() + r * T);
        } else {
          s = engine.Predict(rows, r, r + 1, opts.margin, result.data() + r * cols);
        }
        marker->End(r, r, 1);
      }
      std::lock_guard<std::mutex> lock(mu);
      if (!s.ok() && first_error.ok()) first_error = s;
    });
    PACSET_RETURN_IF_ERROR(first_error);
  }
  PACSET_RETURN_IF_ERROR(marker->status());
  if (!opts.leaf)
    PACSET_RETURN_IF_ERROR(
        ApplyPredictMethod(opts, engine.output_rule(), result.data(), result.size()));
  for (size_t r = 0; r < rows.num_rows; ++r) {
    if (opts.leaf) {
      out.WriteRow(leaves.data() + r * T, T);
    } else {
      out.WriteRow(result.data() + r * cols, cols, engine.float32_outputs());
    }
  }
  return out.Close();
}

// With --timing: how the engine got its blocks.
void ReportEngineStats(const PredictOptions& opts, const PacEngine& engine) {
  if (!opts.timing) return;
  const EngineStats s = engine.stats();
  std::fprintf(stderr,
               "predict: %llu warm + %llu in-flight requests, %llu blocks fetched in %llu rounds "
               "(reads: %s); warm loop %s, %llu rows by its SIMD kernel\n",
               static_cast<unsigned long long>(s.warm_requests),
               static_cast<unsigned long long>(s.inflight_requests),
               static_cast<unsigned long long>(s.blocks_fetched),
               static_cast<unsigned long long>(s.fetch_waits), s.block_io, WarmIsaName(s.warm_isa),
               static_cast<unsigned long long>(s.warm_simd_rows));
}

// Standard input, one line at a time (tools/predict_rows.h). With marks,
// each row is a request.
Status StreamWithEngine(const PacEngine& engine, const PredictOptions& opts,
                        const MarkPlan& marks) {
  StreamHooks hooks;
  hooks.report = [&] { ReportEngineStats(opts, engine); };
  std::unique_ptr<RequestMarker> marker;
  if (!marks.path.empty()) {
    PACSET_ASSIGN_OR_RETURN(marker, RequestMarker::Open(marks.path));
    hooks.before_row = [&](uint64_t r) {
      Status s = opts.evict_between_rows ? EvictPages(engine, opts.model) : Status::Ok();
      marker->Begin(r, r, 1);
      return s;
    };
    hooks.after_row = [&](uint64_t r) { marker->End(r, r, 1); };
  }
  Status s = PredictStream(engine, opts, hooks);
  if (marker) PACSET_RETURN_IF_ERROR(marker->status());
  return s;
}

// Predicts with an engine over a .pac file (with request `marks`, PlanMarks)
// or over a model packed in memory (no marks: it reads no file).
Status PredictWithEngine(std::unique_ptr<PacEngine> engine, const PredictOptions& opts,
                         const MarkPlan& marks) {
  if (opts.input == "-") return StreamWithEngine(*engine, opts, marks);
  PACSET_ASSIGN_OR_RETURN(RowMatrix rows, ReadCsvRows(opts.input, engine->num_features()));
  // --method with --leaf or on another model is refused before predicting.
  PACSET_RETURN_IF_ERROR(ApplyPredictMethod(opts, engine->output_rule(), nullptr, 0));
  if (!marks.path.empty()) return PredictWithPacMarked(*engine, rows, opts, marks);
  CsvWriter out;
  PACSET_RETURN_IF_ERROR(out.Open(opts.output));
  if (opts.leaf) {
    std::vector<int32_t> leaves;
    PACSET_RETURN_IF_ERROR(engine->PredictLeaves(rows, opts.threads, &leaves));
    const size_t T = engine->num_trees();
    for (size_t r = 0; r < rows.num_rows; ++r) out.WriteRow(leaves.data() + r * T, T);
    return out.Close();
  }
  std::vector<double> result;
  const auto t0 = std::chrono::steady_clock::now();
  for (int i = 0; i < std::max(1, opts.repeat); ++i)
    PACSET_RETURN_IF_ERROR(engine->PredictAll(rows, opts.margin, opts.threads, &result));
  ReportTiming(opts, rows.num_rows, t0);
  ReportEngineStats(opts, *engine);
  PACSET_RETURN_IF_ERROR(
      ApplyPredictMethod(opts, engine->output_rule(), result.data(), result.size()));
  const size_t cols = engine->num_columns(opts.margin);
  for (size_t r = 0; r < rows.num_rows; ++r)
    out.WriteRow(result.data() + r * cols, cols, engine->float32_outputs());
  return out.Close();
}

Status PredictWithPac(const PredictOptions& opts) {
  PACSET_ASSIGN_OR_RETURN(MarkPlan marks, PlanMarks(opts));
  EngineOptions engine_options;
  engine_options.verify_blocks = opts.verify_blocks;
  if (opts.max_in_flight != 0) engine_options.max_in_flight = opts.max_in_flight;
  engine_options.block_io = opts.block_io == "threads"       ? BlockIo::kThreads
                            : opts.block_io == "io_uring"    ? BlockIo::kUring
                            : opts.block_io == "gather-file" ? BlockIo::kGatherFile
                                                             : BlockIo::kAuto;
  // Per-row requests are traced to see what each row reads: no row reads
  // the others' blocks ahead for them.
  engine_options.sequential_reads = marks.path.empty() || !marks.per_row;
  PACSET_ASSIGN_OR_RETURN(auto engine, PacEngine::Open(opts.model, engine_options));
  return PredictWithEngine(std::move(engine), opts, marks);
}

}  // namespace

Status ApplyPredictMethod(const PredictOptions& opts, const OutputRule& rule, double* result,
                          size_t n) {
  if (opts.method.empty()) return Status::Ok();
  PACSET_ASSIGN_OR_RETURN(IsolationMethod method, ParseIsolationMethod(opts.method));
  if (rule.postprocess != Postprocess::kIsolationScore)
    return Status::InvalidArgument("--method chooses a scikit-learn IsolationForest output; " +
                                   opts.model + " is not an IsolationForest (it predicts " +
                                   PostprocessName(rule.postprocess) +
                                   " outputs: leave --method out, or use --margin for raw scores)");
  if (opts.margin || opts.leaf)
    return Status::InvalidArgument(
        "--method does not combine with --margin or --leaf (--margin writes the sum of the "
        "trees' path lengths)");
  ApplyIsolationMethod(method, rule.isolation_offset, result, n);
  return Status::Ok();
}

Status RunPredict(const PredictOptions& opts) {
  if (!opts.store.empty()) return RunPredictFromStore(opts);
  PACSET_ASSIGN_OR_RETURN(const bool is_pac, IsPacFile(opts.model));
  if (is_pac) return PredictWithPac(opts);
  if (!opts.mark_requests.empty() || !opts.marks_file.empty())
    return Status::InvalidArgument("request marks work with .pac files (the bundled engine); " +
                                   opts.model + " is a model file");
  std::unique_ptr<PacEngine> engine;
  {
    PACSET_ASSIGN_OR_RETURN(Forest forest, ImportModelWarning(opts.model, opts.format));
    PACSET_ASSIGN_OR_RETURN(engine, PackInMemory(forest, opts.leaf));
  }  // the packed copy is all prediction needs
  return PredictWithEngine(std::move(engine), opts, MarkPlan{});
}

}  // namespace pacset
