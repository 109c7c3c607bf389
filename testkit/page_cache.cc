#include "testkit/page_cache.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <unistd.h>

namespace pacset {
namespace store_test {

std::vector<bool> ResidentPages(const std::string& path) {
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NOFOLLOW);
  if (fd < 0) return {};
  const off_t size = lseek(fd, 0, SEEK_END);
  void* m = size > 0 ? mmap(nullptr, size, PROT_READ, MAP_SHARED, fd, 0) : MAP_FAILED;
  ::close(fd);
  if (m == MAP_FAILED) return {};
  const long page = sysconf(_SC_PAGESIZE);
  std::vector<unsigned char> vec((size + page - 1) / page);
  const bool ok = mincore(m, size, vec.data()) == 0;
  munmap(m, size);
  if (!ok) return {};
  std::vector<bool> out(vec.size());
  for (size_t i = 0; i < vec.size(); ++i) out[i] = vec[i] & 1;
  return out;
}

size_t CountResident(const std::vector<bool>& pages) {
  size_t n = 0;
  for (bool r : pages) n += r ? 1 : 0;
  return n;
}

bool EvictFromPageCache(const std::string& path) {
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NOFOLLOW);
  if (fd < 0) return false;
  (void)fdatasync(fd);
  (void)posix_fadvise(fd, 0, 0, POSIX_FADV_DONTNEED);
  ::close(fd);
  return CountResident(ResidentPages(path)) == 0;
}

bool DirectReadsWork(const std::string& path) {
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NOFOLLOW | O_DIRECT);
  if (fd < 0) return false;
  ::close(fd);
  return true;
}

}  // namespace store_test
}  // namespace pacset
