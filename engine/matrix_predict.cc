#include "engine/matrix_predict.h"

#include <algorithm>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <type_traits>
#include <vector>

#include "util/parallel.h"

namespace pacset {
namespace {

// Rows per conversion, at most: enough for the warm loop's largest block
// (engine/warm_walk.cc BlockRows), while the buffer stays within
// kChunkBytes for any width.
constexpr size_t kChunkRows = 1024;
constexpr size_t kChunkBytes = 8 << 20;
// Fewest rows per request when several threads share the rows.
constexpr size_t kMinThreadRows = 256;

size_t ChunkRows(size_t cols) {
  return std::max<size_t>(1, std::min(kChunkRows, kChunkBytes / (8 * std::max<size_t>(1, cols))));
}

template <typename In>
void ConvertRows(const MatrixView& x, size_t r0, size_t n, double* dst) {
  const size_t nf = x.cols;
  const char* base = x.data + static_cast<ptrdiff_t>(r0) * x.row_stride;
  // Walk the input in its own memory order (C: along a row, Fortran: down a column).
  if (x.col_stride == static_cast<ptrdiff_t>(sizeof(In))) {
    // Contiguous rows (C order), 8 values at a time: fixed-count loops the
    // compiler vectorizes at -O2 (memcpy: a view may be unaligned).
    constexpr size_t kStep = 8;
    for (size_t r = 0; r < n; ++r) {
      const char* row = base + static_cast<ptrdiff_t>(r) * x.row_stride;
      double* out = dst + r * nf;
      size_t f = 0;
      for (; f + kStep <= nf; f += kStep) {
        In v[kStep];
        std::memcpy(v, row + f * sizeof(In), sizeof(v));
        for (size_t j = 0; j < kStep; ++j) out[f + j] = static_cast<double>(v[j]);
      }
      for (; f < nf; ++f) {
        In v;
        std::memcpy(&v, row + f * sizeof(In), sizeof(In));
        out[f] = static_cast<double>(v);
      }
    }
  } else if (std::abs(x.col_stride) <= std::abs(x.row_stride)) {
    for (size_t r = 0; r < n; ++r) {
      const char* row = base + static_cast<ptrdiff_t>(r) * x.row_stride;
      for (size_t f = 0; f < nf; ++f) {
        In v;
        std::memcpy(&v, row + static_cast<ptrdiff_t>(f) * x.col_stride, sizeof(In));
        dst[r * nf + f] = static_cast<double>(v);
      }
    }
  } else {
    for (size_t f = 0; f < nf; ++f) {
      const char* col = base + static_cast<ptrdiff_t>(f) * x.col_stride;
      for (size_t r = 0; r < n; ++r) {
        In v;
        std::memcpy(&v, col + static_cast<ptrdiff_t>(r) * x.row_stride, sizeof(In));
        dst[r * nf + f] = static_cast<double>(v);
      }
    }
  }
}

Status CheckWidth(const PacEngine& engine, const MatrixView& x) {
  if (x.cols != engine.num_features())
    return Status::InvalidArgument("the input has " + std::to_string(x.cols) +
                                   " columns but the forest has " +
                                   std::to_string(engine.num_features()) + " features");
  return Status::Ok();
}

// fn(chunk, r0, n) for consecutive chunks of rows, over `threads` threads.
template <typename Fn>
Status ForEachChunk(const MatrixView& x, int threads, Fn fn) {
  const int t = ResolveThreads(threads);
  const size_t chunk_rows = BalancedChunk(x.rows, t, kMinThreadRows, ChunkRows(x.cols));
  std::vector<RowMatrix> buffers(t);  // per worker, made on its first chunk
  return ParallelForChunks(x.rows, t, chunk_rows, [&](size_t worker, size_t r0, size_t e) {
    RowMatrix& chunk = buffers[worker];
    const size_t n = e - r0;
    chunk.num_cols = x.cols;
    chunk.num_rows = n;
    if (chunk.values.size() < n * x.cols) chunk.values.resize(chunk_rows * x.cols);
    if (x.float32) {
      ConvertRows<float>(x, r0, n, chunk.values.data());
    } else {
      ConvertRows<double>(x, r0, n, chunk.values.data());
    }
    return fn(chunk, r0, n);
  });
}

// Float32 rows in C order, aligned: the engine reads them where they lie
// (PacEngine::Predict of float32 rows), with no float64 copy.
bool Float32RowMajor(const MatrixView& x) {
  return x.float32 && x.col_stride == static_cast<ptrdiff_t>(sizeof(float)) &&
         x.row_stride == static_cast<ptrdiff_t>(sizeof(float) * x.cols) &&
         reinterpret_cast<uintptr_t>(x.data) % alignof(float) == 0;
}

template <typename Out>
Status PredictInto(const PacEngine& engine, const MatrixView& x, bool margin, int threads,
                   Out* out) {
  PACSET_RETURN_IF_ERROR(CheckWidth(engine, x));
  const size_t cols = engine.num_columns(margin);
  // Rows [r0, r0 + n) into out, through predict(double* dst).
  auto into_out = [&](size_t r0, size_t n, const auto& predict) -> Status {
    if constexpr (std::is_same_v<Out, double>) {
      return predict(out + r0 * cols);
    } else {
      thread_local std::vector<double> tmp;
      tmp.resize(n * cols);
      PACSET_RETURN_IF_ERROR(predict(tmp.data()));
      for (size_t i = 0; i < n * cols; ++i) out[r0 * cols + i] = static_cast<Out>(tmp[i]);
      return Status::Ok();
    }
  };
  const int t = ResolveThreads(threads);
  if (Float32RowMajor(x)) {
    // Requests taken by the next free thread (ParallelForChunks: a slower
    // core takes fewer); float32 outputs at most kChunkRows at a time
    // through tmp, float64 ones straight into out.
    const float* rows = reinterpret_cast<const float*>(x.data);
    const size_t most = std::is_same_v<Out, double> ? x.rows : kChunkRows;
    return ParallelForChunks(x.rows, t, BalancedChunk(x.rows, t, kMinThreadRows, most),
                             [&](size_t, size_t b, size_t e) -> Status {
                               return into_out(b, e - b, [&](double* dst) {
                                 return engine.Predict(rows + b * x.cols, e - b, margin, dst);
                               });
                             });
  }
  return ForEachChunk(x, threads, [&](const RowMatrix& chunk, size_t r0, size_t n) -> Status {
    return into_out(r0, n, [&](double* dst) { return engine.Predict(chunk, 0, n, margin, dst); });
  });
}

}  // namespace

Status PredictMatrix(const PacEngine& engine, const MatrixView& x, bool margin, int threads,
                     double* out) {
  return PredictInto(engine, x, margin, threads, out);
}

Status PredictMatrix(const PacEngine& engine, const MatrixView& x, bool margin, int threads,
                     float* out) {
  return PredictInto(engine, x, margin, threads, out);
}

Status ApplyMatrix(const PacEngine& engine, const MatrixView& x, int threads, int32_t* out) {
  PACSET_RETURN_IF_ERROR(CheckWidth(engine, x));
  const size_t T = engine.num_trees();
  return ForEachChunk(x, threads, [&](const RowMatrix& chunk, size_t r0, size_t n) -> Status {
    thread_local std::vector<int32_t> leaves;
    PACSET_RETURN_IF_ERROR(engine.PredictLeaves(chunk, 1, &leaves));
    std::copy(leaves.begin(), leaves.begin() + n * T, out + r0 * T);
    return Status::Ok();
  });
}

}  // namespace pacset
