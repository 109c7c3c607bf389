#include "tools/commands.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <unistd.h>
#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <ctime>
#include <map>
#include <mutex>
#include <thread>
#include <vector>

#include <nlohmann/json.hpp>

#include "engine/blocks_per_row.h"
#include "engine/engine.h"
#include "layout/block.h"
#include "layout/pack.h"
#include "layout/structure_check.h"
#include "model/json_reader.h"
#include "model/predict.h"
#include "store/block_store.h"
#include "store/publish.h"
#include "tools/helper_programs.h"
#include "trace/analysis/trace_weights.h"
#include "trace/request_marks.h"
#include "util/atomic_file.h"
#include "util/csv.h"
#include "util/file_io.h"
#include "util/parallel.h"
#include "util/size.h"

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

// ImportModel, with the import's warnings shown on stderr.
StatusOr<Forest> ImportModelWarning(const std::string& path, ModelFormat format) {
  auto forest = ImportModel(path, format, FindHelperPrograms());
  if (forest.ok())
    for (const auto& w : forest->source.warnings) std::fprintf(stderr, "%s\n", w.c_str());
  return forest;
}

// Whether `path` starts with the .pac magic. Every command that takes a model
// or .pac path asks this first, so a path that is not a regular file (a FIFO
// would block the open forever) is refused here, at once (OpenRegularFile).
StatusOr<bool> IsPacFile(const std::string& path) {
  PACSET_ASSIGN_OR_RETURN(UniqueFd fd, OpenRegularFile(path));
  char magic[8] = {};
  PACSET_ASSIGN_OR_RETURN(const size_t n, PreadUpTo(fd.get(), magic, sizeof magic, 0, path));
  return n == sizeof magic && std::memcmp(magic, kPacMagic, sizeof magic) == 0;
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

// Predicts with an engine over a .pac file (with request `marks`, PlanMarks)
// or over a model packed in memory (no marks: it reads no file).
Status PredictWithEngine(std::unique_ptr<PacEngine> engine, const PredictOptions& opts,
                         const MarkPlan& marks) {
  PACSET_ASSIGN_OR_RETURN(RowMatrix rows, ReadCsvRows(opts.input, engine->num_features()));
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
  engine_options.block_io = opts.block_io == "threads"    ? BlockIo::kThreads
                            : opts.block_io == "io_uring" ? BlockIo::kUring
                                                          : BlockIo::kAuto;
  // Per-row requests are traced to see what each row reads: no row reads
  // the others' blocks ahead for them.
  engine_options.sequential_reads = marks.path.empty() || !marks.per_row;
  PACSET_ASSIGN_OR_RETURN(auto engine, PacEngine::Open(opts.model, engine_options));
  return PredictWithEngine(std::move(engine), opts, marks);
}

// --bin-depth and --trees-per-bin: "auto" lets the packer choose (pack.h).
StatusOr<uint32_t> ParseBinParameter(const std::string& option, const std::string& text,
                                     uint32_t max) {
  if (text == "auto") return kChooseBins;
  if (option == "--trees-per-bin" && text == "fit") return kTreesPerBinFit;
  char* end = nullptr;
  const unsigned long long v = std::strtoull(text.c_str(), &end, 10);
  if (text.empty() || *end != '\0' || text[0] == '-' || v < 1 || v > max)
    return Status::InvalidArgument(option + " '" + text + "' is not auto" +
                                   (option == "--trees-per-bin" ? ", fit" : "") +
                                   " or a number from 1 to " + std::to_string(max));
  return static_cast<uint32_t>(v);
}

Status ParseBinOptions(const std::string& depth, const std::string& trees, PackOptions* o) {
  PACSET_ASSIGN_OR_RETURN(o->bin_depth, ParseBinParameter("--bin-depth", depth, 16));
  PACSET_ASSIGN_OR_RETURN(o->trees_per_bin, ParseBinParameter("--trees-per-bin", trees, 1u << 24));
  return Status::Ok();
}

StatusOr<PackOptions> ToPackOptions(const PackCliOptions& c) {
  PackOptions o;
  PACSET_ASSIGN_OR_RETURN(o.layout, ParseLayoutKind(c.layout));
  PACSET_ASSIGN_OR_RETURN(o.block_size, ParseBlockSize(c.block_size));
  PACSET_RETURN_IF_ERROR(ParseBinOptions(c.bin_depth, c.trees_per_bin, &o));
  o.leaf_ids = !c.no_leaf_ids;
  o.force_wide_nodes = c.wide_nodes;
  o.format_version = c.format_version;
  PACSET_RETURN_IF_ERROR(ValidatePackOptions(o));
  return o;
}

// Imports a model to pack; with `calibrate` rows, they weigh the layout and
// (through *rows, for PackOptions::score_rows) choose its bin parameters.
StatusOr<Forest> LoadForPacking(const std::string& model, ModelFormat format,
                                const std::string& calibrate, RowMatrix* rows) {
  PACSET_ASSIGN_OR_RETURN(const bool is_pac, IsPacFile(model));
  if (is_pac)
    return Status::InvalidArgument(model +
                                   " is already a packed .pac file; pack the model it "
                                   "came from instead");
  PACSET_ASSIGN_OR_RETURN(Forest forest, ImportModelWarning(model, format));
  if (!calibrate.empty()) {
    PACSET_ASSIGN_OR_RETURN(*rows, ReadCsvRows(calibrate, forest.num_features));
    if (rows->num_rows == 0)
      return Status::InvalidArgument(calibrate + ": no rows to calibrate with");
    CalibrateCardinality(forest, *rows);
  }
  return forest;
}

// The source info's record of how the bins were chosen (layout/FORMAT.md §4).
// The file may come from anywhere: fields of the wrong type are shown as 0 / ?.
void PrintBinChoice(const nlohmann::json& source) {
  auto number = [](const nlohmann::json& o, const char* key) {
    return o.is_object() && o.contains(key) && o[key].is_number() ? o[key].get<double>() : 0.0;
  };
  auto text = [](const nlohmann::json& o, const char* key) {
    return o.is_object() && o.contains(key) && o[key].is_string() ? o[key].get<std::string>()
                                                                  : std::string("?");
  };
  if (source.is_object() && source.contains("expected_blocks_per_row"))
    std::printf("expected:      %.2f node blocks per row (from the node weights)\n",
                number(source, "expected_blocks_per_row"));
  if (!source.is_object() || !source.contains("bin_choice")) return;
  const nlohmann::json& c = source["bin_choice"];
  const std::string why =
      text(c, "scored_by") == "rows"
          ? "fewest blocks per row on " + std::to_string(int64_t(number(c, "rows"))) +
                " calibration rows"
          : "fewest expected blocks per row (" + text(c, "weights") + " weights)";
  std::printf("bin choice:    bin depth %s, trees per bin %s: %s\n", text(c, "bin_depth").c_str(),
              text(c, "trees_per_bin").c_str(), why.c_str());
  if (!c.is_object() || !c.contains("candidates") || !c["candidates"].is_array()) return;
  std::printf("                 depth  trees/bin   bins  largest bin  node blocks  blocks/row\n");
  const double chosen = number(c, "chosen");
  double i = 0;
  for (const auto& k : c["candidates"]) {
    const double tpb = number(k, "trees_per_bin");
    std::printf("                 %5.0f  %9s  %5.0f  %11.0f  %11.0f  %10.2f%s\n",
                number(k, "bin_depth"), tpb == 0 ? "fit" : std::to_string(int64_t(tpb)).c_str(),
                number(k, "bins"), number(k, "largest_bin"), number(k, "node_blocks"),
                number(k, "blocks_per_row"), i++ == chosen ? "  <- packed" : "");
  }
}

// One line for pack and import: the bins chosen and why.
void PrintBinChoiceLine(const PackReport& r) {
  if (r.candidates.empty()) return;
  const LayoutCandidate& c = r.candidates[r.chosen_candidate];
  const std::string score =
      r.scored_rows ? "blocks per row on " + std::to_string(r.scored_rows) + " calibration rows"
                    : "expected blocks per row";
  std::printf(
      "  bin depth %u%s, trees per bin %s%s: %.2f %s, the fewest of %zu candidates (pacset "
      "info lists them)\n",
      c.bin_depth, r.chose_bin_depth ? " (chosen)" : "",
      c.trees_per_bin == kTreesPerBinFit ? "fit" : std::to_string(c.trees_per_bin).c_str(),
      r.chose_trees_per_bin ? " (chosen)" : "", c.blocks_per_row, score.c_str(),
      r.candidates.size());
}

Status InfoForPac(const std::string& path, bool json) {
  PACSET_ASSIGN_OR_RETURN(auto file, PacFile::Open(path));
  const PacHeader& h = file->header();
  // Depth-limited: a crafted file must not make copying or printing it recurse without end.
  auto parsed = ParseJsonDocument(file->SourceInfoJson(), path + ": source info");
  const nlohmann::json source = parsed.ok() ? *parsed : nlohmann::json();
  auto src = [&](const char* key) -> std::string {
    if (source.is_object() && source.contains(key) && source[key].is_string())
      return source[key].get<std::string>();
    return "";
  };
  const uint64_t leaf_id_blocks = h.block_count - h.node_first_block - h.node_block_count;
  if (json) {
    nlohmann::json j = {
        {"path", path},
        {"format_version", h.version},
        {"size_bytes", file->size()},
        {"block_size", h.block_size},
        {"block_count", h.block_count},
        {"metadata_blocks", h.node_first_block},
        {"bin_blocks", h.bin_block_count},
        {"node_blocks", h.node_block_count},
        {"leaf_id_blocks", leaf_id_blocks},
        {"layout", LayoutKindName(static_cast<LayoutKind>(h.layout))},
        {"bin_depth", h.bin_depth},
        {"trees_per_bin", h.trees_per_bin},
        {"node_format", NodeFormatName(static_cast<NodeFormat>(h.node_format))},
        {"task", TaskName(static_cast<Task>(h.task))},
        {"num_trees", h.num_trees},
        {"num_nodes", h.num_nodes},
        {"num_leaf_records", h.num_leaf_records},
        {"num_features", h.num_features},
        {"num_outputs", h.num_outputs},
        {"num_classes", h.num_classes},
        {"postprocess", PostprocessName(static_cast<Postprocess>(h.postprocess))},
        {"aggregation", AggregationName(static_cast<Aggregation>(h.aggregation))},
        {"max_depth", h.max_depth},
        {"header_checksum", h.checksum},
        {"file_id", h.file_id},
        {"source", source.is_object() ? source : nlohmann::json::object()},
    };
    std::printf("%s\n", j.dump(2).c_str());
    return Status::Ok();
  }
  std::printf("file:          %s (%s)\n", path.c_str(), FormatByteSize(file->size()).c_str());
  std::printf("format:        .pac version %u, header checksum %016llx", h.version,
              static_cast<unsigned long long>(h.checksum));
  if (h.version >= 3) std::printf(", file id %016llx", static_cast<unsigned long long>(h.file_id));
  std::printf("\n");
  std::printf("model:         %s (%s%s%s), objective %s\n", src("source_file").c_str(),
              src("source_format").c_str(), src("library_version").empty() ? "" : ", ",
              src("library_version").c_str(), src("objective").c_str());
  std::printf("task:          %s, %u features, %u classes, %u outputs\n",
              TaskName(static_cast<Task>(h.task)), h.num_features, h.num_classes, h.num_outputs);
  std::printf("trees:         %llu (max depth %u), %s of leaves, %s\n",
              static_cast<unsigned long long>(h.num_trees), h.max_depth,
              AggregationName(static_cast<Aggregation>(h.aggregation)),
              PostprocessName(static_cast<Postprocess>(h.postprocess)));
  std::printf("nodes:         %llu internal, %llu leaf records (other leaves inlined)\n",
              static_cast<unsigned long long>(h.num_nodes),
              static_cast<unsigned long long>(h.num_leaf_records));
  std::printf("node format:   %s (%u bytes per node)\n",
              NodeFormatName(static_cast<NodeFormat>(h.node_format)), h.node_format == 0 ? 16 : 32);
  std::printf("layout:        %s", LayoutKindName(static_cast<LayoutKind>(h.layout)));
  if (h.bin_depth)
    std::printf(", bin depth %u, up to %u trees per bin", h.bin_depth, h.trees_per_bin);
  std::printf(", cardinality from %s\n", src("cardinality").c_str());
  PrintBinChoice(source);
  std::printf(
      "blocks:        %llu x %s = %llu metadata + %llu bins + %llu residual + %llu leaf ids\n",
      static_cast<unsigned long long>(h.block_count), FormatByteSize(h.block_size).c_str(),
      static_cast<unsigned long long>(h.node_first_block),
      static_cast<unsigned long long>(h.bin_block_count),
      static_cast<unsigned long long>(h.node_block_count - h.bin_block_count),
      static_cast<unsigned long long>(leaf_id_blocks));
  return Status::Ok();
}

}  // namespace

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

Status RunInfo(const InfoOptions& opts) {
  PACSET_ASSIGN_OR_RETURN(const bool is_pac, IsPacFile(opts.path));
  if (is_pac) return InfoForPac(opts.path, opts.json);
  PACSET_ASSIGN_OR_RETURN(Forest f, ImportModelWarning(opts.path, opts.format));
  size_t leaves = 0, max_depth = 0;
  for (size_t t = 0; t < f.num_trees(); ++t) {
    const uint64_t base = f.tree_offset[t];
    std::vector<std::pair<int32_t, size_t>> stack{{0, 0}};
    while (!stack.empty()) {
      auto [n, d] = stack.back();
      stack.pop_back();
      max_depth = std::max(max_depth, d);
      if (f.left_child[base + n] < 0) {
        ++leaves;
        continue;
      }
      stack.push_back({f.left_child[base + n], d + 1});
      stack.push_back({f.right_child[base + n], d + 1});
    }
  }
  if (opts.json) {
    nlohmann::json j = {{"path", opts.path},
                        {"format", f.source.format},
                        {"library_version", f.source.library_version},
                        {"objective", f.source.objective},
                        {"task", TaskName(f.task)},
                        {"num_features", f.num_features},
                        {"num_classes", f.num_classes},
                        {"num_outputs", f.num_outputs},
                        {"num_trees", f.num_trees()},
                        {"num_nodes", f.num_nodes()},
                        {"num_leaves", leaves},
                        {"max_depth", max_depth},
                        {"cardinality", CardinalitySourceName(f.cardinality_source)}};
    std::printf("%s\n", j.dump(2).c_str());
    return Status::Ok();
  }
  std::printf("model:        %s\n", f.source.file_name.c_str());
  std::printf("format:       %s%s%s\n", f.source.format.c_str(),
              f.source.library_version.empty() ? "" : " ", f.source.library_version.c_str());
  std::printf("objective:    %s\n", f.source.objective.c_str());
  std::printf("task:         %s\n", TaskName(f.task));
  std::printf("features:     %u\n", f.num_features);
  std::printf("classes:      %u\n", f.num_classes);
  std::printf("outputs:      %u (leaf width %u)\n", f.num_outputs, f.leaf_width);
  std::printf("trees:        %zu\n", f.num_trees());
  std::printf("nodes:        %zu (%zu leaves, max depth %zu)\n", f.num_nodes(), leaves, max_depth);
  std::printf("aggregation:  %s\n", AggregationName(f.aggregation));
  std::printf("postprocess:  %s\n", PostprocessName(f.postprocess));
  std::printf("precision:    input %s, accumulate %s\n",
              f.input_precision == Precision::kFloat32 ? "float32" : "float64",
              f.accumulate_precision == Precision::kFloat32 ? "float32" : "float64");
  std::printf("cardinality:  %s\n", CardinalitySourceName(f.cardinality_source));
  return Status::Ok();
}

Status RunPack(const PackCommandOptions& opts) {
  PACSET_ASSIGN_OR_RETURN(PackOptions po, ToPackOptions(opts.pack));
  po.progress = true;
  auto t0 = std::chrono::steady_clock::now();
  RowMatrix calibrate;
  PACSET_ASSIGN_OR_RETURN(Forest forest,
                          LoadForPacking(opts.model, opts.format, opts.pack.calibrate, &calibrate));
  if (calibrate.num_rows) po.score_rows = &calibrate;
  if (!opts.pack.weights_from_trace.empty()) {
    if (!opts.pack.calibrate.empty())
      return Status::InvalidArgument(
          "--weights-from-trace and --calibrate both set the weights: "
          "choose one");
    TraceWeightsReport tr;
    PACSET_RETURN_IF_ERROR(ApplyTraceWeights(
        forest, {opts.pack.weights_from_trace, opts.pack.traced_pac, opts.pack.trace_forest}, &tr));
    if (tr.used_marks) {
      std::printf(
          "weights from trace %s: forest '%s', %llu requests replayed (%llu read nothing "
          "of it), %.0f%% of branch decisions decided by the trace\n",
          opts.pack.weights_from_trace.c_str(), tr.forest.c_str(),
          static_cast<unsigned long long>(tr.requests_used),
          static_cast<unsigned long long>(tr.requests_skipped), 100 * tr.decided_by_trace);
    } else {
      std::printf(
          "weights from trace %s: forest '%s' has no request marks; weighted by block "
          "popularity only (%llu reads)\n",
          opts.pack.weights_from_trace.c_str(), tr.forest.c_str(),
          static_cast<unsigned long long>(tr.accesses));
    }
  }
  const double import_s =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  PackReport r;
  PACSET_RETURN_IF_ERROR(PackForestToFile(forest, po, opts.output, &r));
  std::printf("packed %zu trees (%llu nodes, %llu leaf records, %llu leaves inlined) into %s\n",
              forest.num_trees(), static_cast<unsigned long long>(r.num_nodes),
              static_cast<unsigned long long>(r.num_leaf_records),
              static_cast<unsigned long long>(r.inlined_leaves), opts.output.c_str());
  std::printf(
      "  layout %s, %llu blocks of %s (%s): %llu metadata, %llu bin blocks (%llu bins of up "
      "to %u trees), %llu residual, %llu leaf ids\n",
      LayoutKindName(po.layout), static_cast<unsigned long long>(r.block_count),
      FormatByteSize(po.block_size).c_str(), FormatByteSize(r.file_bytes).c_str(),
      static_cast<unsigned long long>(r.metadata_blocks),
      static_cast<unsigned long long>(r.bin_blocks), static_cast<unsigned long long>(r.num_bins),
      r.trees_per_bin, static_cast<unsigned long long>(r.node_blocks - r.bin_blocks),
      static_cast<unsigned long long>(r.leaf_id_blocks));
  PrintBinChoiceLine(r);
  std::printf("  nodes %s%s%s; import %.2f s, layout %.2f s, write %.2f s\n",
              NodeFormatName(r.node_format), r.node_format_reason.empty() ? "" : ": ",
              r.node_format_reason.c_str(), import_s, r.layout_seconds, r.encode_seconds);
  return Status::Ok();
}

Status RunLayoutReport(const LayoutReportOptions& opts) {
  RowMatrix calibrate;
  PACSET_ASSIGN_OR_RETURN(Forest forest,
                          LoadForPacking(opts.model, opts.format, opts.calibrate, &calibrate));
  PACSET_ASSIGN_OR_RETURN(RowMatrix rows, ReadCsvRows(opts.input, forest.num_features));
  if (rows.num_rows == 0) return Status::InvalidArgument(opts.input + ": no rows");
  std::vector<uint32_t> sizes;
  for (const auto& b : opts.block_sizes) {
    PACSET_ASSIGN_OR_RETURN(uint32_t bs, ParseBlockSize(b));
    sizes.push_back(bs);
  }
  if (sizes.empty()) sizes = {4096, 65536};
  std::vector<LayoutKind> layouts;
  if (opts.layouts.empty()) {
    layouts = AllLayoutKinds();
  } else {
    size_t pos = 0;
    while (pos <= opts.layouts.size()) {
      size_t c = opts.layouts.find(',', pos);
      if (c == std::string::npos) c = opts.layouts.size();
      PACSET_ASSIGN_OR_RETURN(LayoutKind k, ParseLayoutKind(opts.layouts.substr(pos, c - pos)));
      layouts.push_back(k);
      pos = c + 1;
    }
  }
  PackOptions bins;
  PACSET_RETURN_IF_ERROR(ParseBinOptions(opts.bin_depth, opts.trees_per_bin, &bins));
  nlohmann::json report = nlohmann::json::object();
  if (!opts.json)
    std::printf("%-8s %-14s %5s %5s %9s %9s %7s %7s %7s %12s %12s %6s\n", "block", "layout",
                "depth", "bin", "mean", "expected", "median", "p95", "max", "batch-unique",
                "model-blocks", "open");
  for (uint32_t bs : sizes) {
    nlohmann::json per_size = nlohmann::json::object();
    for (LayoutKind k : layouts) {
      PackOptions po = bins;
      po.layout = k;
      po.block_size = bs;
      po.leaf_ids = false;
      if (calibrate.num_rows) po.score_rows = &calibrate;
      PACSET_RETURN_IF_ERROR(ValidatePackOptions(po));
      PackReport pr;
      PACSET_ASSIGN_OR_RETURN(std::string bytes, PackForestToBuffer(forest, po, &pr));
      PACSET_ASSIGN_OR_RETURN(auto file, PacFile::FromBuffer(std::move(bytes), LayoutKindName(k)));
      const PacHeader h = file->header();
      PACSET_ASSIGN_OR_RETURN(auto engine, PacEngine::FromFile(std::move(file)));
      PACSET_ASSIGN_OR_RETURN(BlocksPerRow counts, CountBlocksPerRow(*engine, rows));
      std::vector<uint64_t> sorted = counts.per_row;
      std::sort(sorted.begin(), sorted.end());
      const double mean = counts.mean();
      const double median = sorted.size() % 2
                                ? sorted[sorted.size() / 2]
                                : (sorted[sorted.size() / 2 - 1] + sorted[sorted.size() / 2]) / 2.0;
      const size_t p95_idx =
          std::min(sorted.size() - 1, static_cast<size_t>(std::ceil(0.95 * sorted.size())) - 1);
      const double p95 = sorted[p95_idx];
      const double mx = sorted.back();
      per_size[LayoutKindName(k)] = {
          {"blocks_per_row", {{"mean", mean}, {"median", median}, {"p95", p95}, {"max", mx}}},
          {"expected_blocks_per_row", pr.expected_blocks_per_row},
          {"bin_depth", pr.bin_depth},
          {"trees_per_bin", pr.trees_per_bin},
          {"batch_unique_blocks", counts.batch_unique},
          {"model_blocks", h.block_count},
          {"open_blocks", h.node_first_block},
      };
      if (!opts.json)
        std::printf("%-8s %-14s %5u %5u %9.2f %9.2f %7.1f %7.0f %7.0f %12llu %12llu %6llu\n",
                    FormatByteSize(bs).c_str(), LayoutKindName(k), pr.bin_depth, pr.trees_per_bin,
                    mean, pr.expected_blocks_per_row, median, p95, mx,
                    static_cast<unsigned long long>(counts.batch_unique),
                    static_cast<unsigned long long>(h.block_count),
                    static_cast<unsigned long long>(h.node_first_block));
    }
    report[std::to_string(bs)] = per_size;
  }
  if (opts.json) {
    std::printf("%s\n", report.dump(2).c_str());
  } else {
    std::printf(
        "(blocks per row count node blocks touched by one row; 'expected' is the packer's "
        "estimate from the node weights, which chose the bin depth and trees per bin ('bin': "
        "the largest bin) unless forced; 'open' is the metadata blocks read once when the file "
        "is opened)\n");
  }
  return Status::Ok();
}

}  // namespace pacset

namespace pacset {
namespace {

StatusOr<std::unique_ptr<BlockStore>> OpenStoreFor(const StoreCommandOptions& o, bool write) {
  StoreOptions so;
  so.read_only = !write;
  const std::string uri = o.store.empty() ? DefaultStoreUri() : o.store;
  auto s = OpenBlockStore(uri, so);
  if (!s.ok()) return s.status().WithContext("store " + RedactStoreUri(uri));
  return s;
}

std::string TimeString(int64_t unix_ns) {
  const time_t t = static_cast<time_t>(unix_ns / 1000000000);
  char buf[64];
  std::tm tm;
  gmtime_r(&t, &tm);
  std::strftime(buf, sizeof(buf), "%Y-%m-%dT%H:%M:%SZ", &tm);
  return buf;
}

}  // namespace

Status RunImport(const ImportOptions& opts) {
  PACSET_RETURN_IF_ERROR(ValidateForestName(opts.name));
  std::string pac = opts.input;
  std::unique_ptr<TempDir> temp;  // private (mode 0700): nobody can plant a name in it
  ForestInfo info;
  info.source_file = BaseName(opts.input);
  PACSET_ASSIGN_OR_RETURN(const bool is_pac, IsPacFile(opts.input));
  if (!is_pac) {
    // A model: pack it on the way in, into a temporary file.
    PACSET_ASSIGN_OR_RETURN(PackOptions po, ToPackOptions(opts.pack));
    po.progress = true;
    RowMatrix calibrate;
    PACSET_ASSIGN_OR_RETURN(
        Forest forest, LoadForPacking(opts.input, opts.format, opts.pack.calibrate, &calibrate));
    if (calibrate.num_rows) po.score_rows = &calibrate;
    PACSET_ASSIGN_OR_RETURN(temp, TempDir::Create("pacset-import"));
    pac = temp->path() + "/forest.pac";
    PackReport report;
    PACSET_RETURN_IF_ERROR(PackForestToFile(forest, po, pac, &report));
    PrintBinChoiceLine(report);
    info.source_format = forest.source.format;
    info.source_library = forest.source.library_version;
  } else {
    info.source_format = "pac";
  }
  PACSET_ASSIGN_OR_RETURN(auto file, PacFile::Open(pac));
  // What every reader would refuse is never published (its blocks are
  // checked as they are stored).
  {
    auto reader = NewPacFileBlockReader(*file);
    PACSET_RETURN_IF_ERROR(CheckForestStructure(*file, *reader).status());
  }
  if (info.source_format == "pac") {
    auto parsed = ParseJsonDocument(file->SourceInfoJson(), pac + ": source info");
    const nlohmann::json src = parsed.ok() ? *parsed : nlohmann::json();
    if (src.is_object()) {
      info.source_format = src.value("source_format", std::string("pac"));
      info.source_library = src.value("library_version", std::string());
      if (!src.value("source_file", std::string()).empty())
        info.source_file = src.value("source_file", std::string());
    }
  }
  info.header_checksum = file->header().checksum;
  info.block_seed = file->header().block_seed();
  info.created_unix_ns = static_cast<int64_t>(std::time(nullptr)) * 1000000000;
  const uint32_t bs = file->header().block_size;
  const uint64_t size = file->size();
  file.reset();
  PACSET_ASSIGN_OR_RETURN(auto store, OpenStoreFor(opts.store, /*write=*/true));
  uint64_t gen = 0;
  PACSET_RETURN_IF_ERROR(PublishFile(*store, opts.name, pac, bs, info, &gen));
  // What this import published (the catalog may already name a newer
  // generation, published by another writer of a shared store).
  std::printf("imported %s as '%s' generation %llu: %llu blocks of %s (%s)\n", opts.input.c_str(),
              opts.name.c_str(), static_cast<unsigned long long>(gen),
              static_cast<unsigned long long>(size / bs), FormatByteSize(bs).c_str(),
              FormatByteSize(size).c_str());
  return Status::Ok();
}

Status RunList(const StoreCommandOptions& opts) {
  PACSET_ASSIGN_OR_RETURN(auto store, OpenStoreFor(opts, false));
  PACSET_ASSIGN_OR_RETURN(std::vector<ForestInfo> list, store->List());
  if (opts.json) {
    nlohmann::json j = nlohmann::json::array();
    for (const auto& f : list)
      j.push_back({{"name", f.name},
                   {"generation", f.generation},
                   {"size_bytes", f.size_bytes},
                   {"block_size", f.block_size},
                   {"block_count", f.block_count},
                   {"header_checksum", f.header_checksum},
                   {"created", TimeString(f.created_unix_ns)},
                   {"source_file", f.source_file},
                   {"source_format", f.source_format},
                   {"source_library", f.source_library}});
    std::printf("%s\n", j.dump(2).c_str());
    return Status::Ok();
  }
  std::printf("%-24s %4s %10s %8s %8s  %-20s  %s\n", "NAME", "GEN", "SIZE", "BLOCK", "BLOCKS",
              "CREATED", "SOURCE");
  for (const auto& f : list)
    std::printf(
        "%-24s %4llu %10s %8s %8llu  %-20s  %s (%s%s%s)\n", f.name.c_str(),
        static_cast<unsigned long long>(f.generation), FormatByteSize(f.size_bytes).c_str(),
        FormatByteSize(f.block_size).c_str(), static_cast<unsigned long long>(f.block_count),
        TimeString(f.created_unix_ns).c_str(), f.source_file.c_str(), f.source_format.c_str(),
        f.source_library.empty() ? "" : ", ", f.source_library.c_str());
  return Status::Ok();
}

Status RunRemove(const std::string& name, const StoreCommandOptions& opts) {
  PACSET_RETURN_IF_ERROR(ValidateForestName(name));
  PACSET_ASSIGN_OR_RETURN(auto store, OpenStoreFor(opts, true));
  PACSET_RETURN_IF_ERROR(store->Delete(name));
  std::printf("removed '%s'\n", name.c_str());
  return Status::Ok();
}

namespace {

std::string StructureLine(const StatusOr<StructureSummary>& s) {
  if (!s.ok()) return "structure is corrupt: " + s.status().message();
  return "structure ok (" + std::to_string(s->nodes) + " nodes, " +
         std::to_string(s->leaf_records) + " leaf records, " + std::to_string(s->inline_leaves) +
         " inline leaves)";
}

Status VerifyFile(const std::string& path) {
  PACSET_ASSIGN_OR_RETURN(auto file, PacFile::Open(path));
  const std::vector<uint64_t> bad = file->VerifyBlocks();
  for (uint64_t b : bad)
    std::printf("%s: block %llu is corrupt or unreadable\n", path.c_str(),
                static_cast<unsigned long long>(b));
  std::string line = path + ": " + std::to_string(file->header().block_count) + " blocks, " +
                     std::to_string(bad.size()) + " bad";
  StatusOr<StructureSummary> structure = Status::Corruption("not checked: blocks are bad");
  if (bad.empty()) {
    auto reader = NewPacFileBlockReader(*file);
    structure = CheckForestStructure(*file, *reader);
    line += "; " + StructureLine(structure);
  }
  std::printf("%s\n", line.c_str());
  if (!bad.empty())
    return Status::Corruption(std::to_string(bad.size()) + " bad block" +
                              (bad.size() > 1 ? "s" : ""));
  return structure.status();
}

}  // namespace

Status RunVerify(const std::string& name, const std::string& file_path,
                 const StoreCommandOptions& opts) {
  if (!file_path.empty()) return VerifyFile(file_path);
  PACSET_ASSIGN_OR_RETURN(auto store, OpenStoreFor(opts, false));
  std::vector<ForestInfo> forests;
  if (name.empty()) {
    PACSET_ASSIGN_OR_RETURN(forests, store->List());
  } else {
    PACSET_RETURN_IF_ERROR(ValidateForestName(name));
    PACSET_ASSIGN_OR_RETURN(ForestInfo f, store->Lookup(name));
    forests.push_back(f);
  }
  uint64_t bad_total = 0, bad_structure = 0;
  for (const auto& f : forests) {
    PACSET_ASSIGN_OR_RETURN(std::vector<uint64_t> bad, VerifyForest(*store, f));
    for (uint64_t b : bad)
      std::printf("%s generation %llu: block %llu is corrupt or missing\n", f.name.c_str(),
                  static_cast<unsigned long long>(f.generation),
                  static_cast<unsigned long long>(b));
    std::string line = f.name + " generation " + std::to_string(f.generation) + ": " +
                       std::to_string(f.block_count) + " blocks, " + std::to_string(bad.size()) +
                       " bad";
    if (bad.empty()) {
      const StatusOr<StructureSummary> structure = CheckStoredStructure(*store, f);
      // A store that stopped answering is not a verdict on the forest.
      if (!structure.ok() && !structure.status().IsCorruption()) return structure.status();
      line += "; " + StructureLine(structure);
      bad_structure += !structure.ok();
    }
    std::printf("%s\n", line.c_str());
    bad_total += bad.size();
  }
  if (bad_total)
    return Status::Corruption(std::to_string(bad_total) + " bad block" +
                              (bad_total > 1 ? "s" : ""));
  if (bad_structure)
    return Status::Corruption(std::to_string(bad_structure) + " forest" +
                              (bad_structure > 1 ? "s" : "") + " with a corrupt structure");
  return Status::Ok();
}

Status RunExport(const std::string& name, const std::string& output,
                 const StoreCommandOptions& opts) {
  PACSET_RETURN_IF_ERROR(ValidateForestName(name));
  PACSET_ASSIGN_OR_RETURN(auto store, OpenStoreFor(opts, false));
  PACSET_ASSIGN_OR_RETURN(ForestInfo f, store->Lookup(name));
  PACSET_RETURN_IF_ERROR(ExportToFile(*store, f, output));
  std::printf("exported '%s' generation %llu to %s (%s)\n", name.c_str(),
              static_cast<unsigned long long>(f.generation), output.c_str(),
              FormatByteSize(f.size_bytes).c_str());
  return Status::Ok();
}

}  // namespace pacset
