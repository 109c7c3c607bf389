// Buffers whose pages exist before their first use: for memory that reads
// and copies fill as soon as it is made (the engine's read buffers).
//
// Touching fresh anonymous memory costs one page fault per 4 KiB page, and a
// fault exception is dear in a VM (on the 2-core VM the benchmarks run on,
// ~10 us each: 1 MiB touched page by page took 2.6 ms, while the kernel
// populated the same 1 MiB in one mmap(MAP_POPULATE) in 0.2 ms). A cold
// `pacset predict` spent a fifth of its CPU faulting in its read buffers.
#pragma once

#include <cstddef>
#include <memory>

namespace pacset {

// Unmaps what AllocatePopulated mapped (`bytes` of it).
struct UnmapPopulated {
  size_t bytes = 0;
  void operator()(char* p) const noexcept;
};
using PopulatedBuffer = std::unique_ptr<char[], UnmapPopulated>;

// `bytes` (> 0) of zeroed memory with every page present, mapped privately
// (MAP_POPULATE); from the heap in AddressSanitizer builds, for its red zones.
// Throws std::bad_alloc when it cannot be mapped, as new does.
PopulatedBuffer AllocatePopulated(size_t bytes);

}  // namespace pacset
