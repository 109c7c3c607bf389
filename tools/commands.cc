#include "tools/commands.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <thread>
#include <vector>

#include "model/predict.h"
#include "util/csv.h"

namespace pacset {
namespace {

// Runs fn(begin, end) over [0, n) split into `threads` contiguous chunks.
template <typename Fn>
void ParallelRows(size_t n, int threads, Fn fn) {
  threads = std::max(1, std::min<int>(threads, static_cast<int>(std::max<size_t>(n, 1))));
  if (threads == 1) {
    fn(size_t{0}, n);
    return;
  }
  std::vector<std::thread> pool;
  const size_t chunk = (n + threads - 1) / threads;
  for (int i = 0; i < threads; ++i) {
    const size_t b = std::min(n, i * chunk), e = std::min(n, b + chunk);
    pool.emplace_back([=] { fn(b, e); });
  }
  for (auto& t : pool) t.join();
}

Status PredictWithForest(const Forest& forest, const PredictOptions& opts) {
  PACSET_ASSIGN_OR_RETURN(RowMatrix rows, ReadCsvRows(opts.input, forest.num_features));
  ForestPredictor predictor(forest);
  CsvWriter out;
  PACSET_RETURN_IF_ERROR(out.Open(opts.output));
  const bool f32 = forest.accumulate_precision == Precision::kFloat32;
  if (opts.leaf) {
    std::vector<int32_t> leaves(rows.num_rows * forest.num_trees());
    ParallelRows(rows.num_rows, opts.threads, [&](size_t b, size_t e) {
      for (size_t r = b; r < e; ++r)
        for (size_t t = 0; t < forest.num_trees(); ++t)
          leaves[r * forest.num_trees() + t] = predictor.LeafIndex(t, rows.row(r));
    });
    for (size_t r = 0; r < rows.num_rows; ++r)
      out.WriteRow(leaves.data() + r * forest.num_trees(), forest.num_trees());
    return out.Close();
  }
  const size_t cols = opts.margin ? forest.num_outputs : forest.num_prediction_columns();
  std::vector<double> result(rows.num_rows * cols);
  ParallelRows(rows.num_rows, opts.threads, [&](size_t b, size_t e) {
    for (size_t r = b; r < e; ++r) {
      if (opts.margin) {
        predictor.PredictMargin(rows.row(r), result.data() + r * cols);
      } else {
        predictor.Predict(rows.row(r), result.data() + r * cols);
      }
    }
  });
  for (size_t r = 0; r < rows.num_rows; ++r) out.WriteRow(result.data() + r * cols, cols, f32);
  return out.Close();
}

}  // namespace

Status RunPredict(const PredictOptions& opts) {
  PACSET_ASSIGN_OR_RETURN(Forest forest, ImportModel(opts.model, opts.format));
  return PredictWithForest(forest, opts);
}

Status RunInfo(const InfoOptions& opts) {
  PACSET_ASSIGN_OR_RETURN(Forest f, ImportModel(opts.path, opts.format));
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

}  // namespace pacset
