// pacset pack: a model into a .pac file.
#include <chrono>
#include <cstdio>

#include "layout/pack.h"
#include "tools/commands.h"
#include "tools/pack_cli.h"
#include "trace/analysis/trace_weights.h"
#include "util/size.h"

namespace pacset {

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

}  // namespace pacset
