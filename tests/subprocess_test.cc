#include "util/subprocess.h"

#include <fcntl.h>
#include <gtest/gtest.h>
#include <pthread.h>
#include <signal.h>
#include <sys/mman.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/time.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <chrono>
#include <cstdlib>
#include <functional>
#include <string>
#include <thread>
#include <vector>

#include "tests/deadline.h"
#include "util/atomic_file.h"
#include "util/file_io.h"

namespace pacset {
namespace {

// What a child started by StartChild wrote (stdout and stderr both, to a
// pipe) and its wait status.
struct Ran {
  int start_error = -1;
  std::string out;
  int wstatus = 0;
};

Ran RunChild(const std::vector<std::string>& args, ChildOptions options = {}) {
  Ran r;
  int fds[2];
  if (pipe2(fds, O_CLOEXEC) != 0) return r;
  options.stdout_fd = options.stderr_fd = fds[1];
  pid_t pid = -1;
  r.start_error = StartChild(args, options, &pid);
  close(fds[1]);
  char buf[4096];
  ssize_t n;
  while ((n = read(fds[0], buf, sizeof buf)) > 0) r.out.append(buf, static_cast<size_t>(n));
  close(fds[0]);
  if (r.start_error == 0) {
    EXPECT_TRUE(WaitForChild(pid, &r.wstatus));
  }
  return r;
}

TEST(StartChild, RunsAProgramFoundOnPathWithItsArguments) {
  const Ran r = RunChild({"sh", "-c", "echo $0 $1; echo err >&2; exit 3", "zero", "one"});
  ASSERT_EQ(r.start_error, 0);
  EXPECT_EQ(r.out, "zero one\nerr\n");
  ASSERT_TRUE(WIFEXITED(r.wstatus));
  EXPECT_EQ(WEXITSTATUS(r.wstatus), 3);
}

TEST(StartChild, ReportsWhatCannotBeStartedAsItsErrno) {
  EXPECT_EQ(RunChild({"/nonexistent/program"}).start_error, ENOENT);
  EXPECT_EQ(RunChild({"pacset-no-such-program"}).start_error, ENOENT);
  EXPECT_EQ(RunChild({""}).start_error, ENOENT);
  EXPECT_EQ(RunChild({}).start_error, ENOENT);
  ChildOptions no_search;
  no_search.search_path = false;  // "true" is then ./true, which is not there
  EXPECT_EQ(RunChild({"true"}, no_search).start_error, ENOENT);
  auto dir = TempDir::Create("subprocess-test").value();
  const std::string file = dir->path() + "/not-executable";
  ASSERT_TRUE(WriteFileAtomically(file, "exit 0\n", 0644).ok());
  EXPECT_EQ(RunChild({file}).start_error, EACCES);
}

TEST(StartChild, GivesTheChildTheVariablesItIsAskedToAndKeepsTheOthers) {
  ASSERT_EQ(setenv("PACSET_SUBPROCESS_TEST_A", "parent", 1), 0);
  ASSERT_EQ(setenv("PACSET_SUBPROCESS_TEST_B", "kept", 1), 0);
  ChildOptions o;
  o.env = {"PACSET_SUBPROCESS_TEST_A=child", "PACSET_SUBPROCESS_TEST_C=new"};
  const Ran r = RunChild({"sh", "-c",
                          "echo $PACSET_SUBPROCESS_TEST_A $PACSET_SUBPROCESS_TEST_B "
                          "$PACSET_SUBPROCESS_TEST_C; env | grep -c ^PACSET_SUBPROCESS_TEST_A="},
                         o);
  ASSERT_EQ(r.start_error, 0);
  EXPECT_EQ(r.out, "child kept new\n1\n");
  EXPECT_STREQ(getenv("PACSET_SUBPROCESS_TEST_A"), "parent");
  EXPECT_EQ(getenv("PACSET_SUBPROCESS_TEST_C"), nullptr);
  unsetenv("PACSET_SUBPROCESS_TEST_A");
  unsetenv("PACSET_SUBPROCESS_TEST_B");
}

TEST(StartChild, InstallsTheSignalDispositionsItIsGiven) {
  struct sigaction ignore {
  }, old{};
  ignore.sa_handler = SIG_IGN;
  ASSERT_EQ(sigaction(SIGUSR1, &ignore, &old), 0);
  const std::vector<std::string> kill_self = {"sh", "-c", "kill -USR1 $$; exit 0"};
  const Ran ignored = RunChild(kill_self);  // an ignored signal stays ignored across exec
  ChildOptions o;
  struct sigaction dfl {};
  dfl.sa_handler = SIG_DFL;
  o.signal_actions = {{SIGUSR1, dfl}};
  const Ran killed = RunChild(kill_self, o);
  sigaction(SIGUSR1, &old, nullptr);
  ASSERT_EQ(ignored.start_error, 0);
  EXPECT_TRUE(WIFEXITED(ignored.wstatus) && WEXITSTATUS(ignored.wstatus) == 0);
  ASSERT_EQ(killed.start_error, 0);
  EXPECT_TRUE(WIFSIGNALED(killed.wstatus) && WTERMSIG(killed.wstatus) == SIGUSR1);
}

// Signals are blocked only while the child is set up: the program gets the
// starting thread's own mask.
TEST(StartChild, StartsTheProgramWithTheCallersSignalMask) {
  // This thread's "SigBlk:\t<hex>\n" line.
  auto own_mask = [] {
    const std::string status = ReadWholeFile("/proc/thread-self/status").value();
    const size_t at = status.find("SigBlk:");
    return status.substr(at, status.find('\n', at) + 1 - at);
  };
  const std::vector<std::string> show_mask = {"grep", "^SigBlk:", "/proc/self/status"};
  sigset_t usr2, old;
  sigemptyset(&usr2);
  sigaddset(&usr2, SIGUSR2);
  ASSERT_EQ(pthread_sigmask(SIG_BLOCK, &usr2, &old), 0);
  const std::string blocked_mask = own_mask();
  const Ran blocked = RunChild(show_mask);
  pthread_sigmask(SIG_SETMASK, &old, nullptr);
  const Ran unblocked = RunChild(show_mask);
  ASSERT_EQ(blocked.start_error, 0);
  EXPECT_EQ(blocked.out, blocked_mask);
  EXPECT_NE(blocked_mask, own_mask());
  ASSERT_EQ(unblocked.start_error, 0);
  EXPECT_EQ(unblocked.out, own_mask());
}

TEST(StartChild, RunsAScriptWithoutAnInterpreterLineWithShOnlyWhenAsked) {
  auto dir = TempDir::Create("subprocess-test").value();
  const std::string script = dir->path() + "/script";
  ASSERT_TRUE(WriteFileAtomically(script, "echo \"$0 $1\"; exit 7\n", 0755).ok());
  EXPECT_EQ(RunChild({script, "arg"}).start_error, ENOEXEC);
  ChildOptions o;
  o.run_scripts_with_sh = true;
  const Ran r = RunChild({script, "arg"}, o);
  ASSERT_EQ(r.start_error, 0);
  EXPECT_EQ(r.out, script + " arg\n");
  EXPECT_TRUE(WIFEXITED(r.wstatus) && WEXITSTATUS(r.wstatus) == 7);
}

TEST(StartChild, KillsTheChildWhenTheThreadThatStartedItEnds) {
  ChildOptions o;
  o.kill_with_parent = true;
  pid_t pid = -1;
  int start_error = -1;
  std::thread([&] { start_error = StartChild({"sleep", "30"}, o, &pid); }).join();
  ASSERT_EQ(start_error, 0);
  int wstatus = 0;
  ASSERT_TRUE(::pacset::testing::FinishesWithin(std::chrono::seconds(20), "wait for the child",
                                                [&] { return WaitForChild(pid, &wstatus); }));
  EXPECT_TRUE(WIFSIGNALED(wstatus) && WTERMSIG(wstatus) == SIGKILL);
}

// The child of a threaded program must not need a lock another thread may
// hold at fork() (the allocator's): e4bc0c5, where a child that built its
// argv after fork() hung under AddressSanitizer.
TEST(StartChild, StartsChildrenWhileOtherThreadsAllocate) {
  std::atomic<bool> stop{false};
  std::vector<std::thread> allocators;
  for (int t = 0; t < 3; ++t)
    allocators.emplace_back([&stop] {
      while (!stop.load()) std::vector<std::string> v(64, std::string(200, 'x'));
    });
  const int started =
      ::pacset::testing::FinishesWithin(std::chrono::seconds(60), "100 children", [] {
        int ok = 0;
        for (int i = 0; i < 100; ++i) {
          const Ran r = RunChild({"true"});
          ok += r.start_error == 0 && WIFEXITED(r.wstatus) && WEXITSTATUS(r.wstatus) == 0;
        }
        return ok;
      });
  stop = true;
  for (auto& t : allocators) t.join();
  EXPECT_EQ(started, 100);
}

TEST(StartChild, KeepsTheDescriptorsItIsAskedToOnlyInTheChild) {
  int fds[2];
  ASSERT_EQ(pipe2(fds, O_CLOEXEC), 0);
  UniqueFd read_end(fds[0]), write_end(fds[1]);
  const std::vector<std::string> write_to_it = {"sh", "-c",
                                                "echo kept >&" + std::to_string(write_end.get())};
  const Ran closed = RunChild(write_to_it);  // close-on-exec: the shell cannot write to it
  ChildOptions o;
  o.keep_fds = {write_end.get()};
  const Ran kept = RunChild(write_to_it, o);
  EXPECT_NE(fcntl(write_end.get(), F_GETFD) & FD_CLOEXEC, 0);  // still close-on-exec here
  write_end.reset();
  std::string got;
  char buf[64];
  ssize_t n;
  while ((n = read(read_end.get(), buf, sizeof buf)) > 0) got.append(buf, static_cast<size_t>(n));
  ASSERT_EQ(closed.start_error, 0);
  EXPECT_TRUE(WIFEXITED(closed.wstatus) && WEXITSTATUS(closed.wstatus) != 0);
  ASSERT_EQ(kept.start_error, 0);
  EXPECT_TRUE(WIFEXITED(kept.wstatus) && WEXITSTATUS(kept.wstatus) == 0);
  EXPECT_EQ(got, "kept\n");
}

// Minor page faults of this process while it writes to every page of
// `pages` pages it wrote before `start` ran.
long FaultsWritingPagesAfter(size_t pages, const std::function<void()>& start) {
  const size_t bytes = pages * 4096;
  void* p = mmap(nullptr, bytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  if (p == MAP_FAILED) return -1;
  (void)madvise(p, bytes, MADV_NOHUGEPAGE);  // a fault a page, not one per 2 MiB
  auto* bytes_p = static_cast<volatile char*>(p);
  for (size_t i = 0; i < bytes; i += 4096) bytes_p[i] = 1;
  start();
  rusage before{}, after{};
  getrusage(RUSAGE_SELF, &before);
  for (size_t i = 0; i < bytes; i += 4096) bytes_p[i] = 2;
  getrusage(RUSAGE_SELF, &after);
  munmap(p, bytes);
  return after.ru_minflt - before.ru_minflt;
}

// A child started without fork() write-protects none of this process's
// pages (fork() does, and every next write to one faults: a fresh daemon's
// mount through fusermount3, fs/internal/fusermount.h).
TEST(StartChild, LeavesThisProcesssPagesWritableUnlessItMustFork) {
  constexpr size_t kPages = 8192;
  auto start_true = [](ChildOptions o) {
    return [o] {
      pid_t pid = -1;
      int wstatus = 0;
      if (StartChild({"true"}, o, &pid) == 0) (void)WaitForChild(pid, &wstatus);
    };
  };
  const long spawned = FaultsWritingPagesAfter(kPages, start_true({}));
  ChildOptions forked;
  forked.kill_with_parent = true;  // needs code of ours in the child: fork()
  const long after_fork = FaultsWritingPagesAfter(kPages, start_true(forked));
  EXPECT_GE(spawned, 0);
  EXPECT_LT(spawned, static_cast<long>(kPages / 8));
  EXPECT_GT(after_fork, static_cast<long>(kPages / 2));  // the measure sees a fork's faults
}

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
