#include "util/populated_memory.h"

#include <sys/mman.h>

#include <new>

namespace pacset {

void UnmapPopulated::operator()(char* p) const noexcept {
  if (p != nullptr) munmap(p, bytes);
}

PopulatedBuffer AllocatePopulated(size_t bytes) {
  if (bytes == 0) throw std::bad_alloc();
  void* p = mmap(nullptr, bytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_POPULATE,
                 -1, 0);
  if (p == MAP_FAILED) throw std::bad_alloc();
  return PopulatedBuffer(static_cast<char*>(p), UnmapPopulated{bytes});
}

}  // namespace pacset
