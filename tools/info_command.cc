// pacset info: what a .pac file holds (its header and the record of how it
// was packed), or what a model file holds.
#include <algorithm>
#include <cstdio>
#include <string>
#include <utility>
#include <vector>

#include <nlohmann/json.hpp>

#include "layout/pac_file.h"
#include "layout/pack.h"
#include "model/json_reader.h"
#include "tools/commands.h"
#include "tools/model_input.h"
#include "util/size.h"

namespace pacset {
namespace {

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
    if (file->postprocess_params().size() == 2) {  // isolation score
      j["isolation_denominator"] = file->postprocess_params()[0];
      j["isolation_offset"] = file->postprocess_params()[1];
    }
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
  if (file->postprocess_params().size() == 2)
    std::printf("isolation:     score -2^(-sum / %.17g), offset_ %.17g (--method)\n",
                file->postprocess_params()[0], file->postprocess_params()[1]);
  std::printf("nodes:         %llu internal, %llu leaf records (other leaves inlined)\n",
              static_cast<unsigned long long>(h.num_nodes),
              static_cast<unsigned long long>(h.num_leaf_records));
  if (!file->categorical_splits().empty())
    std::printf("categorical:   %zu splits, their category sets %s (read at open)\n",
                file->categorical_splits().size(),
                FormatByteSize(file->category_words().size() * 4).c_str());
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
  if (!f.categorical_splits.empty())
    std::printf("categorical:  %zu splits (%zu category words)\n", f.categorical_splits.size(),
                f.category_words.size());
  std::printf("aggregation:  %s\n", AggregationName(f.aggregation));
  std::printf("postprocess:  %s\n", PostprocessName(f.postprocess));
  if (f.postprocess == Postprocess::kIsolationScore)
    std::printf("isolation:    score -2^(-sum / %.17g), offset_ %.17g (--method)\n",
                f.isolation_denominator, f.isolation_offset);
  std::printf("precision:    input %s, accumulate %s\n",
              f.input_precision == Precision::kFloat32 ? "float32" : "float64",
              f.accumulate_precision == Precision::kFloat32 ? "float32" : "float64");
  std::printf("cardinality:  %s\n", CardinalitySourceName(f.cardinality_source));
  return Status::Ok();
}

}  // namespace pacset
