#include "util/csv.h"

#include <unistd.h>
#include <cerrno>
#include <charconv>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <iostream>
#include <iterator>
#include <limits>
#include <sstream>

#include "util/file_io.h"

namespace pacset {
namespace {

std::string_view Trim(std::string_view s) {
  while (!s.empty() && (s.front() == ' ' || s.front() == '\t')) s.remove_prefix(1);
  while (!s.empty() && (s.back() == ' ' || s.back() == '\t' || s.back() == '\r'))
    s.remove_suffix(1);
  return s;
}

// Parses one field. Empty, "nan", "NaN", "NA" are missing (NaN).
bool ParseField(std::string_view f, double* out) {
  f = Trim(f);
  if (f.empty() || f == "NA" || f == "na") {
    *out = std::numeric_limits<double>::quiet_NaN();
    return true;
  }
  const char* first = f.data();
  const char* last = f.data() + f.size();
  if (*first == '+') ++first;  // from_chars rejects a leading '+'
  if (first == last) return false;
  auto [ptr, ec] = std::from_chars(first, last, *out);
  if (ec == std::errc::result_out_of_range) {
    // Overflow to +-inf and underflow to 0, as strtod (and numpy) do.
    std::string tmp(first, last);
    errno = 0;
    char* end = nullptr;
    *out = std::strtod(tmp.c_str(), &end);
    return end == tmp.c_str() + tmp.size();
  }
  if (ec != std::errc() || ptr != last) return false;
  if (std::isnan(*out)) *out = std::numeric_limits<double>::quiet_NaN();  // drop payload and sign
  return true;
}

std::string Quote(std::string_view s) {
  if (s.size() > 40) return "'" + std::string(s.substr(0, 40)) + "...'";
  return "'" + std::string(s) + "'";
}

}  // namespace

Status ParseCsvLine(std::string_view line, const std::string& where, bool allow_header,
                    std::vector<double>* values, size_t* header_columns) {
  values->clear();
  *header_columns = 0;
  size_t non_numeric = 0, col = 0;
  std::string_view bad_field;
  size_t bad_col = 0;
  size_t start = 0;
  while (true) {
    size_t comma = line.find(',', start);
    std::string_view f =
        line.substr(start, comma == std::string_view::npos ? line.size() - start : comma - start);
    ++col;
    double v;
    if (ParseField(f, &v)) {
      values->push_back(v);
    } else {
      if (non_numeric == 0) {
        bad_field = Trim(f);
        bad_col = col;
      }
      ++non_numeric;
    }
    if (comma == std::string_view::npos) break;
    start = comma + 1;
  }
  if (allow_header && values->empty()) {  // a header line
    *header_columns = col;
    return Status::Ok();
  }
  if (non_numeric > 0)
    return Status::InvalidArgument(where + " column " + std::to_string(bad_col) + ": " +
                                   Quote(bad_field) + " is not a number");
  return Status::Ok();
}

StatusOr<RowMatrix> ParseCsvRows(std::string_view text, size_t expected_cols,
                                 const std::string& source_name) {
  RowMatrix m;
  m.num_cols = expected_cols;
  size_t line_no = 0;
  size_t pos = 0;
  bool first_content_line = true;
  std::vector<double> fields;
  while (pos < text.size()) {
    size_t end = text.find('\n', pos);
    if (end == std::string_view::npos) end = text.size();
    std::string_view line = text.substr(pos, end - pos);
    pos = end + 1;
    ++line_no;
    if (Trim(line).empty()) continue;  // blank lines are skipped
    const std::string where = source_name + " line " + std::to_string(line_no);
    size_t header_columns = 0;
    PACSET_RETURN_IF_ERROR(ParseCsvLine(line, where, first_content_line, &fields, &header_columns));
    first_content_line = false;
    if (header_columns > 0) {
      // A header line: remember its width for the check below.
      if (m.num_cols != 0 && header_columns != m.num_cols)
        return Status::InvalidArgument(where + ": header has " + std::to_string(header_columns) +
                                       " columns, the model expects " + std::to_string(m.num_cols));
      continue;
    }
    if (m.num_cols == 0) m.num_cols = fields.size();
    if (fields.size() != m.num_cols)
      return Status::InvalidArgument(where + ": expected " + std::to_string(m.num_cols) +
                                     " columns, found " + std::to_string(fields.size()));
    m.values.insert(m.values.end(), fields.begin(), fields.end());
    ++m.num_rows;
  }
  return m;
}

StatusOr<RowMatrix> ReadCsvRows(const std::string& path, size_t expected_cols) {
  std::string text;
  if (path == "-") {
    text.assign(std::istreambuf_iterator<char>(std::cin), std::istreambuf_iterator<char>());
  } else {
    PACSET_ASSIGN_OR_RETURN(text, ReadWholeFile(path));
  }
  return ParseCsvRows(text, expected_cols, path == "-" ? "<stdin>" : path);
}

void AppendNumber(std::string& out, double v, bool as_float32) {
  char buf[64];
  std::to_chars_result r;
  if (as_float32) {
    r = std::to_chars(buf, buf + sizeof(buf), static_cast<float>(v));
  } else {
    r = std::to_chars(buf, buf + sizeof(buf), v);
  }
  out.append(buf, r.ptr);
}

CsvWriter::~CsvWriter() {
  // Not closed: an error cut the output short. Drop it; the AtomicFile
  // removes its temporary file and the destination keeps what it had.
  if (file_ && owned_) std::fclose(file_);
}

Status CsvWriter::Open(const std::string& path) {
  path_ = path;
  if (path == "-") {
    file_ = stdout;
    owned_ = false;
    return Status::Ok();
  }
  PACSET_ASSIGN_OR_RETURN(target_, AtomicFile::Create(path));
  const int fd = dup(target_->fd());
  if (fd < 0 || !(file_ = fdopen(fd, "w"))) {
    const int err = errno;
    if (fd >= 0) close(fd);
    target_.reset();
    return Status::FromErrno("cannot write " + path, err);
  }
  owned_ = true;
  return Status::Ok();
}

void CsvWriter::MaybeFlush() {
  if (buf_.size() < (1u << 16)) return;
  if (std::fwrite(buf_.data(), 1, buf_.size(), file_) != buf_.size()) failed_ = true;
  buf_.clear();
}

void CsvWriter::WriteRow(const double* values, size_t n, bool as_float32) {
  for (size_t k = 0; k < n; ++k) {
    if (k) buf_.push_back(',');
    AppendNumber(buf_, values[k], as_float32);
  }
  buf_.push_back('\n');
  MaybeFlush();
}

void CsvWriter::WriteRow(const int32_t* values, size_t n) {
  char tmp[16];
  for (size_t k = 0; k < n; ++k) {
    if (k) buf_.push_back(',');
    auto r = std::to_chars(tmp, tmp + sizeof(tmp), values[k]);
    buf_.append(tmp, r.ptr);
  }
  buf_.push_back('\n');
  MaybeFlush();
}

void CsvWriter::WriteOut() {
  if (!buf_.empty() && std::fwrite(buf_.data(), 1, buf_.size(), file_) != buf_.size())
    failed_ = true;
  buf_.clear();
  if (std::fflush(file_) != 0) failed_ = true;
}

Status CsvWriter::Flush() {
  if (!file_) return Status::Ok();
  WriteOut();
  if (failed_) return Status::IOError("cannot write " + path_ + ": " + std::strerror(errno));
  return Status::Ok();
}

void CsvWriter::WriteLine(std::string_view text) {
  buf_.append(text);
  buf_.push_back('\n');
  MaybeFlush();
}

Status CsvWriter::Close() {
  if (!file_) return Status::Ok();
  WriteOut();
  if (owned_ && std::fclose(file_) != 0) failed_ = true;
  file_ = nullptr;
  if (failed_) {
    const int err = errno;
    target_.reset();
    return Status::IOError("cannot write " + path_ + ": " + std::strerror(err));
  }
  if (target_) {
    Status s = target_->Commit();
    target_.reset();
    return s;
  }
  return Status::Ok();
}

}  // namespace pacset
