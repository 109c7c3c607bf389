#include "util/csv.h"

#include <gtest/gtest.h>

#include <fcntl.h>
#include <pthread.h>
#include <signal.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <chrono>
#include <cmath>
#include <cstring>
#include <string>
#include <thread>
#include <vector>

#include "tests/deadline.h"
#include "util/atomic_file.h"

namespace pacset {
namespace {

TEST(CsvRows, SkipsAHeaderAndReadsMissingValuesAsNaN) {
  auto m = ParseCsvRows("a,b,c\n1,,3\nNaN,-0,inf\n", 3, "rows.csv");
  ASSERT_TRUE(m.ok()) << m.status().ToString();
  ASSERT_EQ(m->num_rows, 2u);
  EXPECT_EQ(m->row(0)[0], 1.0);
  EXPECT_TRUE(std::isnan(m->row(0)[1]));
  EXPECT_TRUE(std::isnan(m->row(1)[0]));
  EXPECT_EQ(m->row(1)[1], 0.0);
  EXPECT_TRUE(std::signbit(m->row(1)[1]));
  EXPECT_TRUE(std::isinf(m->row(1)[2]));
}

TEST(CsvRows, ReadsWithoutHeaderAndKeepsFullDoublePrecision) {
  auto m = ParseCsvRows("0.1000000000000000055511151231257827,1e-320\r\n+2,-1.5e300\n", 2, "x");
  ASSERT_TRUE(m.ok());
  ASSERT_EQ(m->num_rows, 2u);
  EXPECT_EQ(m->row(0)[0], 0.1);
  EXPECT_EQ(m->row(0)[1], 1e-320);
  EXPECT_EQ(m->row(1)[0], 2.0);
  EXPECT_EQ(m->row(1)[1], -1.5e300);
}

TEST(CsvRows, OverflowingNumbersBecomeInfinity) {
  auto m = ParseCsvRows("1e400,-1e400\n", 2, "x");
  ASSERT_TRUE(m.ok());
  EXPECT_EQ(m->row(0)[0], HUGE_VAL);
  EXPECT_EQ(m->row(0)[1], -HUGE_VAL);
}

TEST(CsvRows, WrongColumnCountNamesTheLine) {
  auto m = ParseCsvRows("1,2,3\n4,5\n", 3, "rows.csv");
  ASSERT_FALSE(m.ok());
  EXPECT_EQ(m.status().message(), "rows.csv line 2: expected 3 columns, found 2");
}

TEST(CsvRows, NonNumericFieldNamesLineAndColumn) {
  auto m = ParseCsvRows("1,2,3\n4,five,6\n", 3, "rows.csv");
  ASSERT_FALSE(m.ok());
  EXPECT_EQ(m.status().message(), "rows.csv line 2 column 2: 'five' is not a number");
}

TEST(CsvRows, HeaderWithWrongWidthIsAnError) {
  auto m = ParseCsvRows("a,b\n1,2\n", 3, "rows.csv");
  ASSERT_FALSE(m.ok());
  EXPECT_NE(m.status().message().find("header has 2 columns"), std::string::npos);
}

TEST(CsvRows, MixedFirstLineIsNotTakenForAHeader) {
  auto m = ParseCsvRows("1,x\n", 2, "rows.csv");
  ASSERT_FALSE(m.ok());
  EXPECT_NE(m.status().message().find("line 1 column 2"), std::string::npos);
}

TEST(CsvLimits, ALineIsOneMebibytePlus64BytesPerColumnAndAField4KiB) {
  EXPECT_EQ(CsvMaxLineBytes(0), 1048576u);
  EXPECT_EQ(CsvMaxLineBytes(784), 1048576u + 64 * 784);
  EXPECT_EQ(kCsvMaxFieldBytes, 4096u);
}

TEST(CsvRows, ALineOfExactlyTheLimitIsRead) {
  // Spaces: a line that long is otherwise made of fields over their own limit.
  const std::string text = "1,2\n" + std::string(CsvMaxLineBytes(2), ' ') + "\n3,4\n";
  auto m = ParseCsvRows(text, 2, "rows.csv");
  ASSERT_TRUE(m.ok()) << m.status().ToString();
  EXPECT_EQ(m->num_rows, 2u);
}

TEST(CsvRows, ALineOneByteOverTheLimitNamesTheLineAndTheLimit) {
  const std::string text = "1,2\n" + std::string(CsvMaxLineBytes(2) + 1, ' ') + "\n3,4\n";
  auto m = ParseCsvRows(text, 2, "rows.csv");
  ASSERT_FALSE(m.ok());
  EXPECT_EQ(m.status().code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(m.status().message(),
            "rows.csv line 2: longer than 1048704 bytes, the limit for a line of 2 columns "
            "(1 MiB + 64 bytes per column)");
}

TEST(CsvRows, ALongRowOfManyColumnsIsReadWhenTheirCountIsNotKnown) {
  std::string row = "1";
  while (row.size() + 2 <= CsvMaxLineBytes(0)) row += ",1";
  auto m = ParseCsvRows(row + "\n", 0, "rows.csv");
  ASSERT_TRUE(m.ok()) << m.status().ToString();
  EXPECT_EQ(m->num_cols, (row.size() + 1) / 2);
  EXPECT_FALSE(ParseCsvRows(row + ",1\n", 0, "rows.csv").ok());
}

TEST(CsvRows, AFieldOverTheLimitNamesLineColumnAndLimit) {
  const std::string at_limit = std::string(kCsvMaxFieldBytes - 1, ' ') + "4";
  auto ok = ParseCsvRows("1,2\n3," + at_limit + "\n", 2, "rows.csv");
  ASSERT_TRUE(ok.ok()) << ok.status().ToString();
  EXPECT_EQ(ok->row(1)[1], 4.0);
  auto m = ParseCsvRows("1,2\n3, " + at_limit + "\n", 2, "rows.csv");
  ASSERT_FALSE(m.ok());
  EXPECT_EQ(m.status().message(),
            "rows.csv line 2 column 2: longer than 4096 bytes, the limit for a field");
  // In a header too.
  auto h = ParseCsvRows("a," + std::string(5000, 'b') + "\n1,2\n", 2, "rows.csv");
  ASSERT_FALSE(h.ok());
  EXPECT_EQ(h.status().message(),
            "rows.csv line 1 column 2: longer than 4096 bytes, the limit for a field");
}

// A pipe whose write end a thread feeds; the read end is the test's.
class Pipe {
 public:
  Pipe() { EXPECT_EQ(::pipe2(fds_, O_CLOEXEC), 0) << std::strerror(errno); }
  ~Pipe() {
    CloseRead();
    CloseWrite();
    if (writer_.joinable()) writer_.join();
  }
  int read_fd() const { return fds_[0]; }

  // Writes `text`, then `repeat` bytes of `fill` (no newline), then closes
  // the write end unless `keep_open`. Stops early when the read end closes
  // (EPIPE: SIGPIPE is blocked on the writer's thread).
  void Feed(std::string text, size_t repeat = 0, char fill = 'x', bool keep_open = false) {
    writer_ = std::thread([this, text = std::move(text), repeat, fill, keep_open] {
      sigset_t pipe_signal;
      sigemptyset(&pipe_signal);
      sigaddset(&pipe_signal, SIGPIPE);
      pthread_sigmask(SIG_BLOCK, &pipe_signal, nullptr);
      bool open = WriteAll(text.data(), text.size());
      const std::string chunk(65536, fill);
      for (size_t left = repeat; open && left > 0;) {
        const size_t n = std::min(left, chunk.size());
        open = WriteAll(chunk.data(), n);
        left -= n;
      }
      if (!keep_open) CloseWrite();
    });
  }
  // Bytes the writer got into the pipe.
  size_t written() const { return written_; }
  void CloseRead() {
    if (fds_[0] >= 0) ::close(fds_[0]);
    fds_[0] = -1;
  }
  void CloseWrite() {
    if (fds_[1] >= 0) ::close(fds_[1]);
    fds_[1] = -1;
  }
  void JoinWriter() { writer_.join(); }

 private:
  bool WriteAll(const char* p, size_t n) {
    while (n > 0) {
      const ssize_t w = ::write(fds_[1], p, n);
      if (w < 0 && errno == EINTR) continue;
      if (w <= 0) return false;
      written_ += static_cast<size_t>(w);
      p += w;
      n -= static_cast<size_t>(w);
    }
    return true;
  }
  int fds_[2] = {-1, -1};
  std::thread writer_;
  std::atomic<size_t> written_{0};
};

constexpr std::chrono::seconds kHang{20};

TEST(CsvLineReader, RefusesAStreamWithNoNewlineAfterOneLineOfInput) {
  Pipe pipe;
  const size_t endless = size_t{1} << 30;  // 1 GiB of 'x': far more than a reader may hold
  pipe.Feed("", endless);
  CsvLineReader reader(pipe.read_fd(), "<stdin>", 2);
  std::string_view line;
  bool at_end = false;
  Status s = ::pacset::testing::FinishesWithin(kHang, "CsvLineReader::Next on an endless line",
                                               [&] { return reader.Next(&line, &at_end); });
  EXPECT_EQ(s.code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(s.message(),
            "<stdin> line 1: longer than 1048704 bytes, the limit for a line of 2 columns "
            "(1 MiB + 64 bytes per column)");
  EXPECT_EQ(reader.line_number(), 1u);
  // It read about one line's worth, not the stream: the writer is still blocked.
  pipe.CloseRead();
  pipe.JoinWriter();
  EXPECT_LT(pipe.written(), size_t{8} << 20);
}

TEST(CsvLineReader, ALineOverTheLimitIsSkippedAndTheNextOnesAreRead) {
  Pipe pipe;
  const size_t max = CsvMaxLineBytes(2);
  std::string text = "1,2\n" + std::string(max, 'a') + "\n" + std::string(max + 1, 'b') + "\n" +
                     std::string(3 * max, 'c') + "\n3,4\n5,6";
  pipe.Feed(text);
  CsvLineReader reader(pipe.read_fd(), "rows.csv", 2);
  std::vector<std::string> lines;
  std::vector<size_t> too_long;
  for (;;) {
    std::string_view line;
    bool at_end = false;
    Status s = reader.Next(&line, &at_end);
    if (at_end) break;
    if (!s.ok()) {
      ASSERT_EQ(s.code(), StatusCode::kInvalidArgument) << s.ToString();
      EXPECT_NE(s.message().find("rows.csv line " + std::to_string(reader.line_number()) +
                                 ": longer than 1048704 bytes"),
                std::string::npos)
          << s.message();
      too_long.push_back(reader.line_number());
      continue;
    }
    lines.emplace_back(line);
  }
  ASSERT_EQ(lines.size(), 4u);
  EXPECT_EQ(lines[0], "1,2");
  EXPECT_EQ(lines[1].size(), max);  // one byte under the limit: a line
  EXPECT_EQ(lines[2], "3,4");
  EXPECT_EQ(lines[3], "5,6");  // the last line needs no '\n'
  EXPECT_EQ(too_long, (std::vector<size_t>{3, 4}));
}

TEST(CsvLineReader, ReturnsALineAsSoonAsItArrives) {
  Pipe pipe;
  pipe.Feed("1,2\n", 0, 'x', /*keep_open=*/true);  // more may come: no end of input yet
  CsvLineReader reader(pipe.read_fd(), "<stdin>", 2);
  std::string_view line;
  bool at_end = false;
  Status s = ::pacset::testing::FinishesWithin(kHang, "CsvLineReader::Next on an open stream",
                                               [&] { return reader.Next(&line, &at_end); });
  ASSERT_TRUE(s.ok()) << s.ToString();
  EXPECT_FALSE(at_end);
  EXPECT_EQ(line, "1,2");
  pipe.JoinWriter();
  pipe.CloseWrite();
  ASSERT_TRUE(reader.Next(&line, &at_end).ok());
  EXPECT_TRUE(at_end);
}

TEST(ReadCsvRows, RefusesAFileWithNoNewlineNamingItsLineAndTheLimit) {
  auto m = ::pacset::testing::FinishesWithin(kHang, "ReadCsvRows(/dev/zero)",
                                             [] { return ReadCsvRows("/dev/zero", 3); });
  ASSERT_FALSE(m.ok());
  EXPECT_EQ(m.status().message(),
            "/dev/zero line 1: longer than 1048768 bytes, the limit for a line of 3 columns "
            "(1 MiB + 64 bytes per column)");
}

TEST(ReadCsvRows, ReadsRowsThroughAFifo) {
  auto dir = TempDir::Create("csv-test").value();
  const std::string fifo = dir->path() + "/rows.csv";
  ASSERT_EQ(::mkfifo(fifo.c_str(), 0600), 0) << std::strerror(errno);
  std::thread writer([fifo] {
    const int fd = ::open(fifo.c_str(), O_WRONLY | O_CLOEXEC);
    ASSERT_GE(fd, 0);
    const std::string rows = "a,b\n1,2\n\n3,4";
    EXPECT_EQ(::write(fd, rows.data(), rows.size()), static_cast<ssize_t>(rows.size()));
    ::close(fd);
  });
  auto m = ReadCsvRows(fifo, 2);
  writer.join();
  ASSERT_TRUE(m.ok()) << m.status().ToString();
  ASSERT_EQ(m->num_rows, 2u);
  EXPECT_EQ(m->row(1)[1], 4.0);
}

TEST(ReadCsvRows, ReadsAFileLargerThanOneRead) {
  auto dir = TempDir::Create("csv-test").value();
  std::string text = "x,y\n";
  for (int i = 0; i < 100000; ++i) text += std::to_string(i) + "," + std::to_string(-i) + "\n";
  ASSERT_TRUE(WriteFileAtomically(dir->path() + "/rows.csv", text).ok());
  auto m = ReadCsvRows(dir->path() + "/rows.csv", 2);
  ASSERT_TRUE(m.ok()) << m.status().ToString();
  ASSERT_EQ(m->num_rows, 100000u);
  EXPECT_EQ(m->row(99999)[0], 99999.0);
  EXPECT_EQ(m->row(99999)[1], -99999.0);
  auto missing = ReadCsvRows(dir->path() + "/missing.csv", 2);
  EXPECT_TRUE(missing.status().IsNotFound());
}

TEST(AppendNumber, PrintsShortestRoundTripForms) {
  std::string s;
  AppendNumber(s, 0.1, false);
  s += ' ';
  AppendNumber(s, static_cast<float>(0.1), true);
  s += ' ';
  AppendNumber(s, 3.0, true);
  EXPECT_EQ(s, "0.1 0.1 3");
  double back = 0;
  std::string t;
  AppendNumber(t, 1.0 / 3.0, false);
  back = std::stod(t);
  EXPECT_EQ(back, 1.0 / 3.0);
}

}  // namespace
}  // namespace pacset
