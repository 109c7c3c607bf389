#include "util/csv.h"

#include <fcntl.h>
#include <unistd.h>
#include <cerrno>
#include <charconv>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <limits>
#include <utility>

#include "util/file_io.h"
#include "util/string_util.h"

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

// Bytes read at a time by CsvLineReader (at least this much room is free in
// its buffer before each read).
constexpr size_t kReadChunkBytes = 64 << 10;

Status LineTooLong(const std::string& source, size_t line_no, size_t expected_cols) {
  const std::string of_columns =
      expected_cols == 0 ? "" : " of " + std::to_string(expected_cols) + " columns";
  return Status::InvalidArgument(source + " line " + std::to_string(line_no) + ": longer than " +
                                 std::to_string(CsvMaxLineBytes(expected_cols)) +
                                 " bytes, the limit for a line" + of_columns + " (1 MiB + " +
                                 std::to_string(kCsvLineBytesPerColumn) + " bytes per column)");
}

// ParseCsvRows' and ReadCsvRows' rules for a sequence of lines: blank lines
// skipped, an optional header of the right width, every row as wide as the
// first (or as `expected_cols`).
class RowCollector {
 public:
  RowCollector(size_t expected_cols, std::string source)
      : source_(std::move(source)), max_line_(CsvMaxLineBytes(expected_cols)) {
    m_.num_cols = expected_cols;
  }

  Status Add(std::string_view line, size_t line_no) {
    if (line.size() > max_line_) return LineTooLong(source_, line_no, m_.num_cols);
    if (Trim(line).empty()) return Status::Ok();  // blank lines are skipped
    const std::string where = source_ + " line " + std::to_string(line_no);
    size_t header_columns = 0;
    PACSET_RETURN_IF_ERROR(
        ParseCsvLine(line, where, first_content_line_, &fields_, &header_columns));
    first_content_line_ = false;
    if (header_columns > 0) {
      // A header line: remember its width for the check below.
      if (m_.num_cols != 0 && header_columns != m_.num_cols)
        return Status::InvalidArgument(where + ": header has " + std::to_string(header_columns) +
                                       " columns, the model expects " +
                                       std::to_string(m_.num_cols));
      return Status::Ok();
    }
    if (m_.num_cols == 0) m_.num_cols = fields_.size();
    if (fields_.size() != m_.num_cols)
      return Status::InvalidArgument(where + ": expected " + std::to_string(m_.num_cols) +
                                     " columns, found " + std::to_string(fields_.size()));
    m_.values.insert(m_.values.end(), fields_.begin(), fields_.end());
    ++m_.num_rows;
    return Status::Ok();
  }

  RowMatrix Take() { return std::move(m_); }

 private:
  const std::string source_;
  const size_t max_line_;
  RowMatrix m_;
  bool first_content_line_ = true;
  std::vector<double> fields_;
};

}  // namespace

size_t CsvMaxLineBytes(size_t expected_cols) {
  return kCsvLineBaseBytes + kCsvLineBytesPerColumn * expected_cols;
}

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
    if (f.size() > kCsvMaxFieldBytes)
      return Status::InvalidArgument(where + " column " + std::to_string(col) + ": longer than " +
                                     std::to_string(kCsvMaxFieldBytes) +
                                     " bytes, the limit for a field");
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
                                   QuoteExcerpt(bad_field) + " is not a number");
  return Status::Ok();
}

StatusOr<RowMatrix> ParseCsvRows(std::string_view text, size_t expected_cols,
                                 const std::string& source_name) {
  RowCollector rows(expected_cols, source_name);
  size_t line_no = 0;
  size_t pos = 0;
  while (pos < text.size()) {
    size_t end = text.find('\n', pos);
    if (end == std::string_view::npos) end = text.size();
    PACSET_RETURN_IF_ERROR(rows.Add(text.substr(pos, end - pos), ++line_no));
    pos = end + 1;
  }
  return rows.Take();
}

StatusOr<RowMatrix> ReadCsvRows(const std::string& path, size_t expected_cols) {
  const bool standard_input = path == "-";
  const std::string source = standard_input ? "<stdin>" : path;
  UniqueFd file;
  if (!standard_input) {
    // Not OpenRegularFile: rows may come through a pipe (<(...), /dev/stdin).
    file.reset(::open(path.c_str(), O_RDONLY | O_CLOEXEC));
    if (!file.valid()) return Status::FromErrno("open " + path, errno);
  }
  CsvLineReader reader(standard_input ? STDIN_FILENO : file.get(), source, expected_cols);
  RowCollector rows(expected_cols, source);
  for (;;) {
    std::string_view line;
    bool at_end = false;
    PACSET_RETURN_IF_ERROR(reader.Next(&line, &at_end));
    if (at_end) return rows.Take();
    PACSET_RETURN_IF_ERROR(rows.Add(line, reader.line_number()));
  }
}

CsvLineReader::CsvLineReader(int fd, std::string source_name, size_t expected_cols)
    : fd_(fd),
      source_(std::move(source_name)),
      expected_cols_(expected_cols),
      max_line_(CsvMaxLineBytes(expected_cols)),
      capacity_(max_line_ + kReadChunkBytes) {}

Status CsvLineReader::TooLong() const { return LineTooLong(source_, line_no_, expected_cols_); }

Status CsvLineReader::Next(std::string_view* line, bool* at_end) {
  *at_end = false;
  for (;;) {
    const char* base = buf_.get();
    const void* nl =
        scanned_ < end_ ? std::memchr(base + scanned_, '\n', end_ - scanned_) : nullptr;
    if (nl != nullptr) {
      const size_t stop = static_cast<size_t>(static_cast<const char*>(nl) - base);
      const size_t start = begin_;
      begin_ = scanned_ = stop + 1;
      if (skipping_) {  // the end of a line already reported as too long
        skipping_ = false;
        continue;
      }
      ++line_no_;
      // One read can bring a whole line longer than the limit.
      if (stop - start > max_line_) return TooLong();
      *line = std::string_view(base + start, stop - start);
      return Status::Ok();
    }
    scanned_ = end_;
    if (skipping_) {
      begin_ = scanned_ = end_ = 0;  // drop what is read of the line, keep reading
    } else if (end_ - begin_ > max_line_) {
      ++line_no_;
      skipping_ = true;
      begin_ = scanned_ = end_ = 0;
      return TooLong();
    }
    if (eof_) {
      if (begin_ == end_) {
        *at_end = true;
        return Status::Ok();
      }
      ++line_no_;  // a last line without '\n'
      *line = std::string_view(base + begin_, end_ - begin_);
      begin_ = scanned_ = end_;
      return Status::Ok();
    }
    // Room for a read: the partial line (at most max_line_ bytes) moves to
    // the front when less than a read's worth is free behind it.
    if (!buf_) buf_.reset(new char[capacity_]);
    if (capacity_ - end_ < kReadChunkBytes) {
      std::memmove(buf_.get(), buf_.get() + begin_, end_ - begin_);
      end_ -= begin_;
      scanned_ -= begin_;
      begin_ = 0;
    }
    const ssize_t r = ::read(fd_, buf_.get() + end_, capacity_ - end_);
    if (r < 0) {
      if (errno == EINTR) continue;
      return Status::FromErrno("read " + source_, errno);
    }
    if (r == 0) eof_ = true;
    end_ += static_cast<size_t>(r);
  }
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

std::string CsvField(std::string_view text) {
  if (text.find_first_of(",\"\r\n") == std::string_view::npos) return std::string(text);
  std::string out = "\"";
  for (char c : text) {
    if (c == '"') out += '"';
    out += c;
  }
  return out + "\"";
}

}  // namespace pacset
