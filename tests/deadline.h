// A deadline for calls that a regression would make block or run forever
// (opening a FIFO with no writer, reading /dev/zero to the end): the test
// fails instead of hanging until ctest's timeout, or filling the machine's
// memory.
#pragma once

#include <unistd.h>

#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <future>
#include <memory>
#include <thread>
#include <utility>

namespace pacset::testing {

// This process's resident memory in bytes (0 if /proc cannot tell).
inline uint64_t ResidentBytes() {
  unsigned long long pages = 0, resident = 0;
  std::FILE* f = std::fopen("/proc/self/statm", "r");
  if (f == nullptr) return 0;
  const int n = std::fscanf(f, "%llu %llu", &pages, &resident);
  std::fclose(f);
  return n == 2 ? resident * static_cast<uint64_t>(::sysconf(_SC_PAGESIZE)) : 0;
}

// Runs fn() on its own thread and returns its result. A call still running
// after `limit`, or one that has made the process grow by more than
// `max_growth` bytes, cannot be cancelled (it may be blocked in open(2)), so
// the test process ends there, failing the test. The bounds are generous:
// they guard against a hang or a runaway read, they time nothing.
template <typename Fn>
auto FinishesWithin(std::chrono::seconds limit, const char* what, Fn fn,
                    uint64_t max_growth = uint64_t{1} << 30) -> decltype(fn()) {
  using Result = decltype(fn());
  auto done = std::make_shared<std::promise<Result>>();
  std::future<Result> result = done->get_future();
  const uint64_t start_bytes = ResidentBytes();
  const auto deadline = std::chrono::steady_clock::now() + limit;
  std::thread([done, fn = std::move(fn)]() mutable { done->set_value(fn()); }).detach();
  while (result.wait_for(std::chrono::milliseconds(50)) != std::future_status::ready) {
    const char* why = nullptr;
    if (std::chrono::steady_clock::now() > deadline) why = "did not return in time (blocked?)";
    if (ResidentBytes() > start_bytes + max_growth) why = "grew past its memory bound";
    if (why == nullptr) continue;
    std::fprintf(stderr, "FAILED: %s %s (limits: %lld s, %llu MiB)\n", what, why,
                 static_cast<long long>(limit.count()),
                 static_cast<unsigned long long>(max_growth >> 20));
    std::fflush(stderr);
    std::_Exit(1);
  }
  return result.get();
}

}  // namespace pacset::testing
