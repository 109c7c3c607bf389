// CSV rows in, CSV predictions out.
//
// Input: one row per line, comma separated, optional header line (a first
// line none of whose fields is a number). An empty field, "nan" or "NaN" is a
// missing value; "inf", "-inf" are accepted. Every row must have exactly the
// expected number of columns. Errors name the file, line and column.
//
// Output: numbers in the shortest form that reads back to the same bits
// (std::to_chars), float32 values printed as float32.
#pragma once

#include <cstdint>
#include <cstdio>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "util/atomic_file.h"
#include "util/row_matrix.h"
#include "util/status.h"

namespace pacset {

// Parses CSV text. `expected_cols` == 0 accepts the first data row's width.
// `source_name` is used in error messages.
StatusOr<RowMatrix> ParseCsvRows(std::string_view text, size_t expected_cols,
                                 const std::string& source_name);

// One line of CSV into `values`. With `allow_header`, a line none of whose
// fields is a number is a header: no values, *header_columns = its width
// (0 otherwise). A field that is not a number is kInvalidArgument naming
// `where` (e.g. "<stdin> line 7") and the column.
Status ParseCsvLine(std::string_view line, const std::string& where, bool allow_header,
                    std::vector<double>* values, size_t* header_columns);

// Reads a CSV file ("-" = standard input).
StatusOr<RowMatrix> ReadCsvRows(const std::string& path, size_t expected_cols);

// Appends the shortest round-trip decimal form of `v` (as float32 when
// `as_float32`), e.g. "0.5", "1e-07", "nan", "inf".
void AppendNumber(std::string& out, double v, bool as_float32);

// Buffered CSV writer to a file or standard output ("-"). A file is written
// through an AtomicFile: it appears, whole, when Close() succeeds; a writer
// destroyed without Close() leaves the destination as it was.
class CsvWriter {
 public:
  CsvWriter() = default;
  ~CsvWriter();
  CsvWriter(const CsvWriter&) = delete;
  CsvWriter& operator=(const CsvWriter&) = delete;

  Status Open(const std::string& path);
  void WriteRow(const double* values, size_t n, bool as_float32);
  void WriteRow(const int32_t* values, size_t n);
  // A line of text as is (e.g. an error in a stream of answers).
  void WriteLine(std::string_view text);
  // Writes out everything so far (one answer per line for a stream).
  Status Flush();
  // Flushes and closes; reports write errors (e.g. disk full).
  Status Close();

 private:
  void MaybeFlush();
  // Writes the buffer and flushes the stream; failures set failed_.
  void WriteOut();
  std::unique_ptr<AtomicFile> target_;
  std::FILE* file_ = nullptr;
  bool owned_ = false;
  std::string path_;
  std::string buf_;
  bool failed_ = false;
};

}  // namespace pacset
