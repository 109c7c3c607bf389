#include "util/populated_memory.h"

#include <gtest/gtest.h>
#include <sys/mman.h>
#include <unistd.h>

#include <cstdint>
#include <utility>
#include <vector>

namespace pacset {
namespace {

// Pages of [p, p + bytes) the kernel has in memory now (mincore).
size_t ResidentPages(const char* p, size_t bytes) {
  const auto page = static_cast<uintptr_t>(sysconf(_SC_PAGESIZE));
  const uintptr_t start = reinterpret_cast<uintptr_t>(p) & ~(page - 1);
  const uintptr_t end = reinterpret_cast<uintptr_t>(p) + bytes;
  std::vector<unsigned char> in((end - start + page - 1) / page);
  EXPECT_EQ(mincore(reinterpret_cast<void*>(start), end - start, in.data()), 0);
  size_t n = 0;
  for (unsigned char c : in) n += c & 1;
  return n;
}

TEST(PopulatedMemory, EveryPageIsInMemoryBeforeItIsTouched) {
  const size_t bytes = 1 << 20;
  PopulatedBuffer b = AllocatePopulated(bytes);
  ASSERT_NE(b, nullptr);
  const auto page = static_cast<size_t>(sysconf(_SC_PAGESIZE));
  // Fresh anonymous memory would have none (or only a page at each end,
  // shared with other heap data) until written.
  EXPECT_GE(ResidentPages(b.get(), bytes), bytes / page);
}

TEST(PopulatedMemory, IsZeroedWritableAndReleased) {
  const size_t bytes = 3 * 4096 + 100;  // not a whole number of pages
  PopulatedBuffer b = AllocatePopulated(bytes);
  for (size_t i = 0; i < bytes; ++i) ASSERT_EQ(b[i], 0) << i;
  for (size_t i = 0; i < bytes; ++i) b[i] = static_cast<char>(i);
  for (size_t i = 0; i < bytes; ++i) ASSERT_EQ(b[i], static_cast<char>(i)) << i;
  PopulatedBuffer moved = std::move(b);
  EXPECT_EQ(b, nullptr);
  EXPECT_EQ(moved[bytes - 1], static_cast<char>(bytes - 1));
  moved.reset();  // unmapped (or freed in sanitizer builds) without a fault
  EXPECT_EQ(moved, nullptr);
}

TEST(PopulatedMemory, ZeroBytesIsRefusedLikeAFailedAllocation) {
  EXPECT_THROW(AllocatePopulated(0), std::bad_alloc);
}

}  // namespace
}  // namespace pacset
