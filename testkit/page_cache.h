// What of a file is in the kernel's page cache, and emptying it of the file:
// for tests that check which reads go through the page cache.
#pragma once

#include <cstddef>
#include <string>
#include <vector>

namespace pacset {
namespace store_test {

// One entry per page of the file at `path`: whether it is in the page cache
// (mincore of a shared mapping; mapping touches no page). Empty when the
// file cannot be opened or is empty.
std::vector<bool> ResidentPages(const std::string& path);

size_t CountResident(const std::vector<bool>& pages);

// Writes the file back and drops its pages from the page cache. False when
// pages stay (tmpfs, whose pages are the file) or it cannot be opened.
bool EvictFromPageCache(const std::string& path);

// Whether the file system holding `path` (an existing file) reads with
// O_DIRECT.
bool DirectReadsWork(const std::string& path);

}  // namespace store_test
}  // namespace pacset
