// CSV rows in, CSV predictions out.
//
// Input: one row per line, comma separated, optional header line (a first
// line none of whose fields is a number). An empty field, "nan" or "NaN" is a
// missing value; "inf", "-inf" are accepted. Every row must have exactly the
// expected number of columns. Errors name the file, line and column.
//
// Input limits: a line may hold at most 1 MiB plus 64 bytes per column the
// model expects (CsvMaxLineBytes), a field at most 4 KiB (kCsvMaxFieldBytes).
// Longer is an error naming the source, the line and the limit. They bound
// what a reader holds beyond the rows it has parsed -- one line -- so input
// with no newline (/dev/zero, a stream whose line never ends) is refused
// after about a megabyte instead of growing until memory runs out. Real rows
// are far below them: a double in its shortest round-trip form has at most 24
// characters. The number of rows is not limited: files are parsed as they are
// read, never held whole.
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

// The longest field, in bytes (spaces included).
inline constexpr size_t kCsvMaxFieldBytes = 4096;
// The longest line, in bytes (without its '\n'): kCsvLineBaseBytes plus
// kCsvLineBytesPerColumn for each of `expected_cols` columns (the model's
// features; 0 when unknown).
inline constexpr size_t kCsvLineBaseBytes = size_t{1} << 20;
inline constexpr size_t kCsvLineBytesPerColumn = 64;
size_t CsvMaxLineBytes(size_t expected_cols);

// Parses CSV text. `expected_cols` == 0 accepts the first data row's width
// (and sets the line limit for 0 columns). `source_name` is used in error
// messages.
StatusOr<RowMatrix> ParseCsvRows(std::string_view text, size_t expected_cols,
                                 const std::string& source_name);

// One line of CSV into `values`. With `allow_header`, a line none of whose
// fields is a number is a header: no values, *header_columns = its width
// (0 otherwise). A field that is not a number, or longer than
// kCsvMaxFieldBytes, is kInvalidArgument naming `where` (e.g. "<stdin> line
// 7") and the column. The line's length is the caller's to check
// (CsvLineReader does).
Status ParseCsvLine(std::string_view line, const std::string& where, bool allow_header,
                    std::vector<double>* values, size_t* header_columns);

// `text` as one CSV field (RFC 4180): as is, or in double quotes (quotes
// doubled) when it holds a comma, quote, CR or LF.
std::string CsvField(std::string_view text);

// Reads a CSV file ("-" = standard input; a pipe or FIFO works too),
// parsing it line by line as it is read: memory is the rows parsed plus one
// line (CsvMaxLineBytes(expected_cols)) and a read buffer.
StatusOr<RowMatrix> ReadCsvRows(const std::string& path, size_t expected_cols);

// Splits what a file descriptor delivers into lines, holding at most one
// line of CsvMaxLineBytes(expected_cols) bytes plus a 64 KiB read buffer.
// A line is returned as soon as its '\n' has been read (read(2) returns what
// a pipe holds), so a stream can be answered line by line. Not thread-safe.
class CsvLineReader {
 public:
  // `fd` is not owned; `source_name` ("rows.csv", "<stdin>") names it in errors.
  CsvLineReader(int fd, std::string source_name, size_t expected_cols);
  CsvLineReader(const CsvLineReader&) = delete;
  CsvLineReader& operator=(const CsvLineReader&) = delete;

  // The next line, without its '\n' (a '\r' before it is kept; fields are
  // trimmed), valid until the next call. *at_end: no more lines (a last line
  // without '\n' is a line). Errors:
  // - kInvalidArgument "SOURCE line N: longer than L bytes, the limit for a
  //   line of C columns (...)": the line is skipped -- the next call returns
  //   the line after it -- so a stream can go on. It is reported as soon as
  //   the limit is passed, without waiting for the line's end.
  // - any other code (kIOError "read SOURCE: ..."): the input cannot be
  //   read; do not call again.
  Status Next(std::string_view* line, bool* at_end);

  // The number of the line last returned or reported (1-based).
  size_t line_number() const { return line_no_; }
  size_t max_line_bytes() const { return max_line_; }

 private:
  // Error for line `line_no_` being longer than max_line_.
  Status TooLong() const;

  const int fd_;
  const std::string source_;
  const size_t expected_cols_;
  const size_t max_line_;
  const size_t capacity_;        // max_line_ + the read size
  std::unique_ptr<char[]> buf_;  // allocated on the first read, not zeroed
  size_t begin_ = 0;             // [begin_, end_): bytes read, not yet returned
  size_t end_ = 0;
  size_t scanned_ = 0;     // [begin_, scanned_) holds no '\n'
  bool skipping_ = false;  // discarding the rest of a line that was too long
  bool eof_ = false;
  size_t line_no_ = 0;
};

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
