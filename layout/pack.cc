// The packer of layout/pack.h: its options, then Forest -> .pac bytes: plan
// (node format, metadata, placement), then encode. Its other files: the
// layout policies (layout/pack_layouts.cc) and the choice of bin parameters
// (layout/pack_bin_choice.cc), both behind layout/internal/placement.h.
#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <nlohmann/json.hpp>

#include <chrono>
#include <cmath>
#include <cstring>

#include "layout/internal/placement.h"
#include "layout/pack.h"
#include "util/atomic_file.h"
#include "util/progress.h"

namespace pacset {

StatusOr<LayoutKind> ParseLayoutKind(const std::string& name) {
  for (LayoutKind k : AllLayoutKinds())
    if (name == LayoutKindName(k)) return k;
  return Status::InvalidArgument("unknown layout '" + name +
                                 "' (expected bfs, dfs, wdfs, block-wdfs, bin-bfs, bin-dfs, "
                                 "bin-wdfs, bin-block-wdfs or pacset)");
}

std::vector<LayoutKind> AllLayoutKinds() {
  return {LayoutKind::kBfs,       LayoutKind::kDfs,          LayoutKind::kWdfs,
          LayoutKind::kBlockWdfs, LayoutKind::kBinBfs,       LayoutKind::kBinDfs,
          LayoutKind::kBinWdfs,   LayoutKind::kBinBlockWdfs, LayoutKind::kPacset};
}

bool LayoutHasBins(LayoutKind k) {
  return k == LayoutKind::kBinBfs || k == LayoutKind::kBinDfs || k == LayoutKind::kBinWdfs ||
         k == LayoutKind::kBinBlockWdfs || k == LayoutKind::kPacset;
}

Status ValidatePackOptions(const PackOptions& o) {
  if (!IsValidBlockSize(o.block_size))
    return Status::InvalidArgument("block size " + std::to_string(o.block_size) +
                                   " must be a power of two from 256 to 1048576");
  if (LayoutHasBins(o.layout) && o.bin_depth > 16)
    return Status::InvalidArgument("bin depth must be between 1 and 16");
  if (o.trees_per_bin > (1u << 24) && o.trees_per_bin != kTreesPerBinFit)
    return Status::InvalidArgument("trees per bin is too large");
  if (o.format_version != 0 && o.format_version != 2 && o.format_version != kPacVersion)
    return Status::InvalidArgument("format version " + std::to_string(o.format_version) +
                                   " cannot be written: 2 (versions 1 and 2, read by pacset "
                                   "0.1) or 3 (the newest)");
  return Status::Ok();
}

namespace {

using Clock = std::chrono::steady_clock;

double Seconds(Clock::time_point since) {
  return std::chrono::duration<double>(Clock::now() - since).count();
}

bool IsOneHot(const double* v, uint32_t n, uint32_t* k) {
  int ones = 0;
  for (uint32_t i = 0; i < n; ++i) {
    if (v[i] == 1.0) {
      ++ones;
      *k = i;
    } else if (!(v[i] == 0.0 && !std::signbit(v[i]))) {
      return false;
    }
  }
  return ones == 1;
}

struct Plan {
  PackInput in;
  BinDecision bins;  // the placement and how its bin parameters were chosen
  NodeFormat format = NodeFormat::kCompact16;
  std::string format_reason;
  PacHeader header;
  uint64_t node_first_unit = 0;
  uint64_t leaf_id_blocks = 0;
  std::string info_json;
  uint64_t inlined = 0;
};

// Why 16-byte nodes cannot be exact for this forest ("" when they can).
std::string WideReason(const Forest& f, const PackInput& in) {
  if (f.num_features - 1 > kMaxCompactFeature)
    return std::to_string(f.num_features) + " features exceed the 24-bit feature field";
  if (f.input_precision == Precision::kFloat64) {
    uint64_t inexact = 0;
    for (size_t g = 0; g < f.num_nodes(); ++g)
      if (in.reachable[g] && f.left_child[g] >= 0 && !(f.flags[g] & kCategorical) &&
          static_cast<double>(static_cast<float>(f.threshold[g])) != f.threshold[g])
        ++inexact;
    if (inexact)
      return std::to_string(inexact) + " thresholds are float64 values that float32 cannot hold";
  }
  return "";
}

void ComputeInput(const Forest& f, NodeFormat fmt, PackInput& in, uint64_t* inlined) {
  const size_t n = f.num_nodes();
  in.forest = &f;
  in.kind.assign(n, static_cast<uint8_t>(RefKind::kNode));
  in.weight.assign(n, 0.0);
  in.depth.assign(n, 0);
  in.reachable.assign(n, 0);
  in.tree_of.assign(n, 0);
  const uint32_t w = f.leaf_width;
  in.node_units = fmt == NodeFormat::kCompact16 ? 1 : 2;
  in.record_units = (8 * w + kUnit - 1) / kUnit;
  const bool known = f.cardinality_source != CardinalitySource::kNone;
  *inlined = 0;
  std::vector<uint64_t> stack;
  for (size_t t = 0; t < f.num_trees(); ++t) {
    const uint64_t base = f.tree_offset[t];
    const double root_card = f.cardinality[base];
    const bool use_card = known && root_card > 0;
    for (uint64_t g = base; g < f.tree_offset[t + 1]; ++g) in.tree_of[g] = static_cast<uint32_t>(t);
    stack.assign(1, base);
    in.depth[base] = 0;
    while (!stack.empty()) {
      const uint64_t g = stack.back();
      stack.pop_back();
      in.reachable[g] = 1;
      in.weight[g] = use_card ? std::max(0.0, f.cardinality[g]) / root_card
                              : std::ldexp(1.0, -static_cast<int>(std::min(in.depth[g], 1000u)));
      if (f.left_child[g] >= 0) {
        for (int32_t c : {f.left_child[g], f.right_child[g]}) {
          in.depth[base + c] = in.depth[g] + 1;
          stack.push_back(base + c);
        }
        continue;
      }
      const double* v = &f.leaf_value[g * w];
      uint32_t k = 0;
      if (w == 1 && static_cast<double>(static_cast<float>(v[0])) == v[0]) {
        in.kind[g] = static_cast<uint8_t>(RefKind::kInlineValue);
        ++*inlined;
      } else if (w > 1 && IsOneHot(v, w, &k)) {
        in.kind[g] = static_cast<uint8_t>(RefKind::kInlineClass);
        ++*inlined;
      } else {
        in.kind[g] = static_cast<uint8_t>(RefKind::kLeafRecord);
      }
    }
  }
  in.latent_classes = LatentClasses(f, in.reachable);
}

double Rounded(double blocks) { return std::round(blocks * 100) / 100; }

// The source-info record of how the bin parameters were chosen (FORMAT.md §4).
nlohmann::json BinChoiceJson(const PackOptions& o, CardinalitySource weights,
                             const BinDecision& bins) {
  nlohmann::json list = nlohmann::json::array();
  for (const LayoutCandidate& c : bins.candidates)
    list.push_back({{"bin_depth", c.bin_depth},
                    {"trees_per_bin", c.trees_per_bin == kTreesPerBinFit ? 0 : c.trees_per_bin},
                    {"largest_bin", c.largest_bin},
                    {"bins", c.num_bins},
                    {"node_blocks", c.node_blocks},
                    {"blocks_per_row", Rounded(c.blocks_per_row)}});
  return {{"bin_depth", o.bin_depth == kChooseBins ? "chosen" : "forced"},
          {"trees_per_bin", o.trees_per_bin == kChooseBins ? "chosen" : "forced"},
          {"weights", CardinalitySourceName(weights)},
          {"scored_by", bins.scored_rows ? "rows" : "expected"},
          {"rows", bins.scored_rows},
          {"candidates", list},
          {"chosen", bins.chosen}};
}

// Lays out the tree table, base score and source info right after a header
// with `num_sections` entries (which flows through the payloads of the first
// blocks when it does not fit block 0's), records flowing through block
// payloads; returns the first free byte. Small forests keep all metadata in
// block 0.
uint64_t PlaceMetadata(PacHeader& h, size_t num_sections, size_t info_len, const Forest& f) {
  const uint64_t bs = h.block_size, payload = h.payload_size();
  h.sections.clear();
  // Versions 1 and 2 share the fixed part's size.
  const uint64_t header_size =
      FixedHeaderSize(h.max_version) + num_sections * kSectionEntrySize + 8;
  uint64_t pos = PayloadStreamOffset((header_size + 15) / 16 * 16, h.block_size);
  auto place = [&](SectionType type, uint32_t flags, uint64_t count, uint32_t rs) {
    if (pos % bs + rs > payload) pos = (pos / bs + 1) * bs;
    SectionEntry s{static_cast<uint32_t>(type), flags, pos, count, rs, 0};
    h.sections.push_back(s);
    pos = SectionEnd(s, h.block_size);
    pos = (pos + 15) / 16 * 16;
  };
  place(SectionType::kTreeTable, kSectionRequired, h.num_trees, sizeof(TreeRecord));
  place(SectionType::kBaseScore, kSectionRequired, h.num_outputs, 8);
  place(SectionType::kSourceInfo, 0, info_len, 1);
  // Categorical splits (FORMAT.md §3): required, so a reader that does not
  // know them refuses the file instead of misrouting it.
  if (!f.categorical_splits.empty()) {
    place(SectionType::kCategoryWords, kSectionRequired, f.category_words.size(), 4);
    place(SectionType::kCategoricalSplits, kSectionRequired, f.categorical_splits.size(),
          sizeof(CategoricalSplitRecord));
  }
  // The postprocess's parameters (FORMAT.md §2, section 8).
  if (const uint64_t n = PostprocessParamCount(h.postprocess); n > 0)
    place(SectionType::kPostprocessParams, kSectionRequired, n, 8);
  return pos;
}

StatusOr<Plan> MakePlan(const Forest& f, const PackOptions& o) {
  PACSET_RETURN_IF_ERROR(ValidatePackOptions(o));
  PACSET_RETURN_IF_ERROR(f.Validate());
  if (o.score_rows && o.score_rows->num_rows > 0 && o.score_rows->num_cols != f.num_features)
    return Status::InvalidArgument(
        "rows to choose the bins with have " + std::to_string(o.score_rows->num_cols) +
        " columns; the forest has " + std::to_string(f.num_features) + " features");
  if (!f.categorical_splits.empty()) {
    if (o.format_version == 2)
      return Status::InvalidArgument(
          "categorical splits need format version 3 (leave out "
          "--format-version, or give 3)");
    for (const CategoricalSplit& c : f.categorical_splits)
      if (c.left_words > kMaxCategorySetWords || c.right_words > kMaxCategorySetWords)
        return Status::InvalidArgument(
            "a categorical split has a category above " +
            std::to_string(kMaxCategorySetWords * 32 - 1) +
            ", the largest a .pac file holds; recode the categories as 0, 1, 2, ...");
  }
  Plan plan;
  const uint32_t bs = o.block_size;
  const uint64_t block_units = bs / kUnit;
  const uint64_t payload_bytes = bs - kBlockTrailerSize;
  const uint64_t payload_units = payload_bytes / kUnit;
  if ((8ull * f.leaf_width + kUnit - 1) / kUnit * kUnit > payload_bytes)
    return Status::InvalidArgument("leaf vectors of " + std::to_string(f.leaf_width) +
                                   " values do not fit a " + std::to_string(bs) +
                                   "-byte block; use a larger --block-size");
  // Pass 1 decides inlining and reachability with compact nodes.
  ComputeInput(f, NodeFormat::kCompact16, plan.in, &plan.inlined);
  plan.format_reason = o.force_wide_nodes ? "requested" : WideReason(f, plan.in);
  plan.format = plan.format_reason.empty() ? NodeFormat::kCompact16 : NodeFormat::kWide32;
  if (plan.format == NodeFormat::kWide32) ComputeInput(f, plan.format, plan.in, &plan.inlined);

  PacHeader& h = plan.header;
  h.max_version = o.format_version == 0 ? kPacVersion : o.format_version;
  h.block_size = bs;
  h.task = static_cast<uint8_t>(f.task);
  h.postprocess = static_cast<uint8_t>(f.postprocess);
  h.aggregation = static_cast<uint8_t>(f.aggregation);
  h.input_precision = static_cast<uint8_t>(f.input_precision);
  h.accumulate_precision = static_cast<uint8_t>(f.accumulate_precision);
  h.layout = static_cast<uint8_t>(o.layout);
  h.cardinality_source = static_cast<uint8_t>(f.cardinality_source);
  h.num_features = f.num_features;
  h.num_outputs = f.num_outputs;
  h.num_classes = f.num_classes;
  h.leaf_width = f.leaf_width;
  h.num_trees = f.num_trees();
  h.sigmoid_alpha = f.sigmoid_alpha;
  uint32_t max_depth = 0;
  for (size_t g = 0; g < f.num_nodes(); ++g) {
    if (!plan.in.reachable[g]) continue;
    max_depth = std::max(max_depth, plan.in.depth[g]);
    if (f.left_child[g] >= 0)
      ++h.num_nodes;
    else if (plan.in.kind[g] == static_cast<uint8_t>(RefKind::kLeafRecord))
      ++h.num_leaf_records;
  }
  h.max_depth = max_depth;

  for (int attempt = 0; attempt < 2; ++attempt) {
    plan.bins = DecideBins(*MakeLayoutPolicy(o.layout), plan.in, o);
    const Placement& placement = plan.bins.placement;
    h.node_format = static_cast<uint8_t>(plan.format);
    h.bin_depth = plan.bins.params.depth;
    h.trees_per_bin = placement.max_trees_per_bin;
    nlohmann::json info = {
        {"source_file", f.source.file_name},
        {"source_format", f.source.format},
        {"library_version", f.source.library_version},
        {"objective", f.source.objective},
        {"layout", LayoutKindName(o.layout)},
        {"block_size", bs},
        {"bin_depth", h.bin_depth},
        {"trees_per_bin", h.trees_per_bin},
        {"node_format", NodeFormatName(plan.format)},
        {"cardinality", CardinalitySourceName(f.cardinality_source)},
        {"packed_by", std::string("pacset ") + PACSET_VERSION},
        {"expected_blocks_per_row", Rounded(plan.bins.expected_blocks_per_row)},
    };
    if (!plan.bins.candidates.empty())
      info["bin_choice"] = BinChoiceJson(o, f.cardinality_source, plan.bins);
    plan.info_json = info.dump();
    const size_t num_sections = 4 + (o.leaf_ids ? 1 : 0) + (f.categorical_splits.empty() ? 0 : 2) +
                                (PostprocessParamCount(h.postprocess) > 0 ? 1 : 0);
    const uint64_t meta_end = PlaceMetadata(h, num_sections, plan.info_json.size(), f);
    h.node_first_block = (meta_end + bs - 1) / bs;
    h.node_block_count = std::max<uint64_t>(placement.node_blocks, 1);
    h.bin_block_count = placement.bin_blocks;
    plan.node_first_unit = h.node_first_block * block_units;
    h.sections.push_back({static_cast<uint32_t>(SectionType::kNodes), kSectionRequired,
                          h.node_first_block * bs, h.node_block_count * payload_units, kUnit, 0});
    uint64_t end_block = h.node_first_block + h.node_block_count;
    plan.leaf_id_blocks = 0;
    if (o.leaf_ids) {
      SectionEntry s{static_cast<uint32_t>(SectionType::kLeafIds), 0, end_block * bs,
                     h.node_block_count * payload_units,           8, 0};
      h.sections.push_back(s);
      plan.leaf_id_blocks = (SectionEnd(s, bs) - s.offset + bs - 1) / bs;
      end_block += plan.leaf_id_blocks;
    }
    h.block_count = end_block;
    const uint64_t max_unit = (h.node_first_block + h.node_block_count) * block_units;
    if (plan.format == NodeFormat::kCompact16 && max_unit > UINT32_MAX) {
      plan.format = NodeFormat::kWide32;
      plan.format_reason = "the node region is larger than 64 GiB (32-bit references)";
      ComputeInput(f, plan.format, plan.in, &plan.inlined);
      continue;
    }
    break;
  }
  // The placement is decided: encoding reads only kind and reachable.
  // Give the rest back before the output is allocated (a 2^24-node tree: 270 MB
  // of the peak).
  std::vector<double>().swap(plan.in.weight);
  std::vector<uint32_t>().swap(plan.in.depth);
  std::vector<uint32_t>().swap(plan.in.tree_of);
  return plan;
}

void Encode(const Forest& f, Plan& plan, char* base, bool progress) {
  PacHeader& h = plan.header;
  const uint32_t bs = h.block_size;
  const PackInput& in = plan.in;
  const auto& pos = plan.bins.placement.pos;
  auto abs_unit = [&](uint64_t g) { return plan.node_first_unit + pos[g]; };
  auto ref_of = [&](uint64_t g, uint8_t* kind) -> uint64_t {
    *kind = in.kind[g];
    switch (static_cast<RefKind>(in.kind[g])) {
      case RefKind::kNode:
      case RefKind::kLeafRecord:
        return abs_unit(g);
      case RefKind::kInlineValue: {
        const float v = static_cast<float>(f.leaf_value[g * f.leaf_width]);
        uint32_t bits;
        std::memcpy(&bits, &v, 4);
        return bits;
      }
      case RefKind::kInlineClass: {
        uint32_t k = 0;
        IsOneHot(&f.leaf_value[g * f.leaf_width], f.leaf_width, &k);
        return k;
      }
    }
    return 0;
  };
  // Tree table and base score.
  const SectionEntry& trees = *h.FindSection(SectionType::kTreeTable);
  for (size_t t = 0; t < f.num_trees(); ++t) {
    TreeRecord r{};
    uint8_t kind;
    r.root = ref_of(f.tree_offset[t], &kind);
    r.root_kind = kind;
    r.group = f.leaf_width == 1 ? f.tree_group[t] : 0;
    std::memcpy(base + SectionRecordOffset(trees, bs, t), &r, sizeof(r));
  }
  const SectionEntry& bsec = *h.FindSection(SectionType::kBaseScore);
  for (uint32_t k = 0; k < f.num_outputs; ++k)
    std::memcpy(base + SectionRecordOffset(bsec, bs, k), &f.base_score[k], 8);
  const SectionEntry& isec = *h.FindSection(SectionType::kSourceInfo);
  for (size_t i = 0; i < plan.info_json.size(); ++i)
    base[SectionRecordOffset(isec, bs, i)] = plan.info_json[i];
  if (const SectionEntry* params = h.FindSection(SectionType::kPostprocessParams)) {
    const double values[] = {f.isolation_denominator, f.isolation_offset};
    for (uint64_t i = 0; i < params->count; ++i)
      std::memcpy(base + SectionRecordOffset(*params, bs, i), &values[i], 8);
  }
  const SectionEntry* leaf_ids = h.FindSection(SectionType::kLeafIds);
  if (const SectionEntry* words = h.FindSection(SectionType::kCategoryWords)) {
    for (size_t i = 0; i < f.category_words.size(); ++i)
      std::memcpy(base + SectionRecordOffset(*words, bs, i), &f.category_words[i], 4);
    const SectionEntry& splits = *h.FindSection(SectionType::kCategoricalSplits);
    for (size_t i = 0; i < f.categorical_splits.size(); ++i) {
      const CategoricalSplit& c = f.categorical_splits[i];
      CategoricalSplitRecord r{};
      r.left_first = c.left_first;
      r.right_first = c.right_first;
      r.left_words = static_cast<uint16_t>(c.left_words);
      r.right_words = static_cast<uint16_t>(c.right_words);
      r.rule = c.rule;
      std::memcpy(base + SectionRecordOffset(splits, bs, i), &r, sizeof(r));
    }
  }

  // Nodes and leaf records.
  ProgressBar bar("packing", f.num_nodes(), progress);
  for (size_t t = 0; t < f.num_trees(); ++t) {
    const uint64_t tb = f.tree_offset[t];
    for (uint64_t g = tb; g < f.tree_offset[t + 1]; ++g) {
      if (!in.stored(g)) continue;
      char* dst = base + abs_unit(g) * kUnit;
      if (f.left_child[g] < 0) {  // leaf record
        std::memcpy(dst, &f.leaf_value[g * f.leaf_width], 8 * f.leaf_width);
        continue;
      }
      const uint64_t l = tb + f.left_child[g], r = tb + f.right_child[g];
      uint8_t lk, rk;
      const uint64_t lref = ref_of(l, &lk), rref = ref_of(r, &rk);
      const bool categorical = f.flags[g] & kCategorical;
      const uint8_t flags =
          static_cast<uint8_t>((f.flags[g] & kRoutingFlagMask) | (lk << kLeftKindShift) |
                               (rk << kRightKindShift) | (categorical ? kNodeFlagCategorical : 0));
      // A categorical node's threshold field holds its split's index.
      const uint64_t split = categorical ? static_cast<uint64_t>(f.threshold[g]) : 0;
      if (plan.format == NodeFormat::kCompact16) {
        CompactNode n{static_cast<float>(f.threshold[g]),
                      f.split_feature[g] | (static_cast<uint32_t>(flags) << 24),
                      static_cast<uint32_t>(lref), static_cast<uint32_t>(rref)};
        if (categorical) {
          const uint32_t index = static_cast<uint32_t>(split);
          std::memcpy(&n.threshold, &index, 4);
        }
        std::memcpy(dst, &n, sizeof(n));
      } else {
        WideNode n{};
        n.threshold = f.threshold[g];
        if (categorical) std::memcpy(&n.threshold, &split, 8);
        n.feature = f.split_feature[g];
        n.flags = flags;
        n.left = lref;
        n.right = rref;
        std::memcpy(dst, &n, sizeof(n));
      }
      if (leaf_ids) {
        const uint32_t ids[2] = {static_cast<uint32_t>(f.left_child[g]),
                                 static_cast<uint32_t>(f.right_child[g])};
        std::memcpy(base + SectionRecordOffset(*leaf_ids, bs, LeafIdIndex(pos[g], bs)), ids, 8);
      }
    }
    if ((t & 255) == 0) bar.Update(f.tree_offset[t + 1]);
  }
  bar.Finish();
  // Version 3: the file's identity from its contents, taken with file_id 0
  // (FORMAT.md §2), then the header that holds it; every block's checksum
  // is seeded with it.
  h.file_id = 0;
  h.EncodeToFile(base);
  if (h.version >= 3) {
    h.file_id = FileIdentity(base, bs, h.block_count);
    h.EncodeToFile(base);
  }
  for (uint64_t b = 0; b < h.block_count; ++b) SealBlock(base + b * bs, bs, b, h.block_seed());
}

void FillReport(const Plan& plan, const PackOptions& o, PackReport* r) {
  if (!r) return;
  const PacHeader& h = plan.header;
  r->node_format = plan.format;
  r->node_format_reason = plan.format_reason;
  r->file_bytes = h.block_count * h.block_size;
  r->block_count = h.block_count;
  r->metadata_blocks = h.node_first_block;
  r->node_blocks = h.node_block_count;
  r->bin_blocks = h.bin_block_count;
  r->leaf_id_blocks = plan.leaf_id_blocks;
  r->num_nodes = h.num_nodes;
  r->num_leaf_records = h.num_leaf_records;
  r->inlined_leaves = plan.inlined;
  r->num_bins = plan.bins.placement.num_bins;
  r->bin_depth = h.bin_depth;
  r->trees_per_bin = plan.bins.placement.max_trees_per_bin;
  r->expected_blocks_per_row = plan.bins.expected_blocks_per_row;
  r->scored_rows = plan.bins.scored_rows;
  r->candidates = plan.bins.candidates;
  r->chosen_candidate = plan.bins.chosen;
  r->chose_bin_depth = !r->candidates.empty() && o.bin_depth == kChooseBins;
  r->chose_trees_per_bin = !r->candidates.empty() && o.trees_per_bin == kChooseBins;
}

}  // namespace

StatusOr<std::string> PackForestToBuffer(const Forest& forest, const PackOptions& options,
                                         PackReport* report) {
  auto t0 = Clock::now();
  PACSET_ASSIGN_OR_RETURN(Plan plan, MakePlan(forest, options));
  const double layout_s = Seconds(t0);
  auto t1 = Clock::now();
  std::string bytes(plan.header.block_count * plan.header.block_size, '\0');
  Encode(forest, plan, bytes.data(), options.progress);
  FillReport(plan, options, report);
  if (report) {
    report->layout_seconds = layout_s;
    report->encode_seconds = Seconds(t1);
  }
  return bytes;
}

Status PackForestToFile(const Forest& forest, const PackOptions& options, const std::string& path,
                        PackReport* report) {
  auto t0 = Clock::now();
  PACSET_ASSIGN_OR_RETURN(Plan plan, MakePlan(forest, options));
  const double layout_s = Seconds(t0);
  auto t1 = Clock::now();
  const uint64_t size = plan.header.block_count * plan.header.block_size;
  PACSET_ASSIGN_OR_RETURN(std::unique_ptr<AtomicFile> file, AtomicFile::Create(path));
  const int fd = file->fd();
  // Reserve the space up front so a full disk fails here, not as SIGBUS later.
  if (int err = posix_fallocate(fd, 0, static_cast<off_t>(size)); err != 0)
    return Status::FromErrno(
        "cannot allocate " + std::to_string(size) + " bytes for " + file->temp_path(), err);
  void* map = mmap(nullptr, size, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
  if (map == MAP_FAILED) return Status::FromErrno("cannot map " + file->temp_path(), errno);
  Encode(forest, plan, static_cast<char*>(map), options.progress);
  const int sync_rc = msync(map, size, MS_SYNC);
  const int sync_err = errno;
  munmap(map, size);
  if (sync_rc != 0) return Status::FromErrno("cannot write " + file->temp_path(), sync_err);
  PACSET_RETURN_IF_ERROR(file->Commit());
  FillReport(plan, options, report);
  if (report) {
    report->layout_seconds = layout_s;
    report->encode_seconds = Seconds(t1);
  }
  return Status::Ok();
}

}  // namespace pacset
