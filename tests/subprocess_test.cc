#include "util/subprocess.h"

#include <gtest/gtest.h>
#include <signal.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/time.h>
#include <unistd.h>

#include <cerrno>

namespace pacset {
namespace {

TEST(RunCollecting, CollectsStdoutAndStderrApartWithTheExitStatus) {
  std::string out, err;
  int code = -2;
  ASSERT_EQ(RunCollecting({"/bin/sh", "-c", "echo out; echo err >&2; exit 3"}, &out, &err, &code),
            0);
  EXPECT_EQ(out, "out\n");
  EXPECT_EQ(err, "err\n");
  EXPECT_EQ(code, 3);
}

TEST(RunCollecting, CollectsMoreThanAPipeHoldsOnBothStreams) {
  std::string out, err;
  int code = -2;
  ASSERT_EQ(
      RunCollecting({"/bin/sh", "-c", "head -c 3000000 /dev/zero; head -c 200000 /dev/zero >&2"},
                    &out, &err, &code),
      0);
  EXPECT_EQ(code, 0);
  EXPECT_EQ(out, std::string(3000000, '\0'));
  EXPECT_EQ(err.size(), 200000u);
}

TEST(RunCollecting, ReportsAProgramThatCannotStartAsItsErrno) {
  std::string out, err;
  int code = -2;
  EXPECT_EQ(RunCollecting({"/nonexistent/program"}, &out, &err, &code), ENOENT);
}

TEST(RunWritingTo, WritesStdoutToTheFileAndCollectsStderr) {
  const int fd = memfd_create("subprocess-test", MFD_CLOEXEC);
  ASSERT_GE(fd, 0);
  std::string err;
  int code = -2;
  ASSERT_EQ(RunWritingTo({"/bin/sh", "-c",
                          "head -c 3000000 /dev/zero; printf tail; head -c 200000 /dev/zero >&2; "
                          "exit 2"},
                         fd, &err, &code),
            0);
  EXPECT_EQ(code, 2);
  EXPECT_EQ(err.size(), 200000u);
  struct stat st {};
  ASSERT_EQ(fstat(fd, &st), 0);
  ASSERT_EQ(st.st_size, 3000004);
  char tail[4];
  ASSERT_EQ(pread(fd, tail, 4, 3000000), 4);
  EXPECT_EQ(std::string(tail, 4), "tail");
  close(fd);
}

TEST(RunWritingTo, ReportsAProgramThatCannotStartAsItsErrno) {
  const int fd = memfd_create("subprocess-test", MFD_CLOEXEC);
  ASSERT_GE(fd, 0);
  std::string err;
  int code = -2;
  EXPECT_EQ(RunWritingTo({"/nonexistent/program"}, fd, &err, &code), ENOENT);
  close(fd);
}

TEST(RunQuietly, ReturnsTheExitStatusOrMinusOne) {
  EXPECT_EQ(RunQuietly({"/bin/sh", "-c", "echo hidden >&2; exit 4"}), 4);
  EXPECT_EQ(RunQuietly({"true"}), 0);  // searched on PATH
  EXPECT_EQ(RunQuietly({"/nonexistent/program"}), -1);
  EXPECT_EQ(RunQuietly({"/bin/sh", "-c", "kill -9 $$"}), -1);
}

void Ignore(int) {}

// A signal that interrupts waitpid (a handler without SA_RESTART) must not
// turn a child's success into a failure.
TEST(RunQuietly, WaitsThroughSignalsThatInterruptTheWait) {
  struct sigaction sa {};
  sa.sa_handler = Ignore;
  sa.sa_flags = 0;  // no SA_RESTART: waitpid fails with EINTR
  struct sigaction old {};
  ASSERT_EQ(sigaction(SIGALRM, &sa, &old), 0);
  itimerval every_20ms{{0, 20000}, {0, 20000}};
  ASSERT_EQ(setitimer(ITIMER_REAL, &every_20ms, nullptr), 0);
  const int rc = RunQuietly({"/bin/sh", "-c", "sleep 0.3; exit 5"});
  itimerval off{};
  setitimer(ITIMER_REAL, &off, nullptr);
  sigaction(SIGALRM, &old, nullptr);
  EXPECT_EQ(rc, 5);
}

}  // namespace
}  // namespace pacset
