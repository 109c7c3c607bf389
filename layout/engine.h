// The bundled inference engine for .pac files.
//
// It maps the file read-only and touches only the nodes a row's paths go
// through (plus the metadata at open), so on a pacsetfs mount or a cold disk
// a prediction reads a few blocks instead of the whole model. Results are
// bit-identical to the in-memory predictor (model/predict.h) for every
// layout, block size and bin depth.
//
// Safety: every reference is checked before it is followed (inside the node
// region, not across a block trailer, known kind, feature in range, no path
// longer than the header's max depth), so a corrupt or hostile file gives a
// kCorruption status, never an out-of-bounds read. A page that cannot be read
// (SIGBUS from EIO on a mount) gives kIOError naming the block.
//
// Thread-safety: a PacEngine is immutable after Open; Predict may be called
// from many threads at once.
#pragma once

#include <atomic>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "layout/pac_file.h"
#include "model/output.h"
#include "util/csv.h"
#include "util/status.h"

namespace pacset {

struct EngineOptions {
  // Verify each node block's checksum the first time it is touched.
  bool verify_blocks = false;
};

class PacEngine {
 public:
  static StatusOr<std::unique_ptr<PacEngine>> Open(const std::string& path,
                                                   const EngineOptions& options = {});
  static StatusOr<std::unique_ptr<PacEngine>> FromFile(std::unique_ptr<PacFile> file,
                                                       const EngineOptions& options = {});

  const PacFile& file() const { return *file_; }
  const OutputRule& output_rule() const { return rule_; }
  uint32_t num_features() const { return file_->header().num_features; }
  uint64_t num_trees() const { return file_->header().num_trees; }
  // True for XGBoost forests: outputs are float32 values.
  bool float32_outputs() const { return rule_.accumulate_precision == Precision::kFloat32; }
  uint32_t num_columns(bool margin) const {
    return margin ? rule_.num_outputs : rule_.num_prediction_columns();
  }

  // Predictions (or margins) for rows [begin, end) of `rows`, written to
  // out[(r - begin) * num_columns(margin) ...].
  Status Predict(const RowMatrix& rows, size_t begin, size_t end, bool margin, double* out) const;
  // The whole matrix with `threads` threads; out is resized.
  Status PredictAll(const RowMatrix& rows, bool margin, int threads,
                    std::vector<double>* out) const;

  // Library leaf ids per tree (needs the file's leaf-id section).
  Status PredictLeaves(const RowMatrix& rows, int threads, std::vector<int32_t>* out) const;

  // The node-region blocks one row touches (sorted, unique); metadata blocks
  // read at open are blocks [0, header().node_first_block).
  Status TouchedBlocks(const double* row, std::vector<uint64_t>* blocks) const;

 private:
  PacEngine() = default;
  // kFast: predictions; kLeaves: leaf ids; kHooked: one row at a time with
  // per-block hooks (tracing touched blocks, verifying checksums).
  enum Mode { kFast = 0, kLeaves = 1, kHooked = 2 };
  template <typename NodeT, bool kF32Input, typename Acc, int kMode>
  Status Run(const RowMatrix& rows, size_t begin, size_t end, bool margin, double* out,
             int32_t* leaves, std::vector<uint64_t>* trace) const;
  template <typename NodeT, bool kF32Input, typename Acc, int kMode, size_t kBlockRows>
  __attribute__((noinline)) Status RunLoop(const RowMatrix& rows, size_t begin, size_t end,
                                           bool margin, double* out, int32_t* leaves,
                                           std::vector<uint64_t>* trace, Acc* acc, float* x32,
                                           double* margins) const;
  template <int kMode>
  Status Dispatch(const RowMatrix& rows, size_t begin, size_t end, bool margin, double* out,
                  int32_t* leaves, std::vector<uint64_t>* trace) const;
  Status Corrupt(uint64_t tree, const std::string& what) const;
  Status CheckBlock(uint64_t block) const;

  std::unique_ptr<PacFile> file_;
  OutputRule rule_;
  EngineOptions options_;
  std::unique_ptr<std::atomic<uint64_t>[]> verified_;  // bitmap, when verify_blocks
};

}  // namespace pacset
