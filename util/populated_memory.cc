#include "util/populated_memory.h"

#include <sys/mman.h>

#include <new>

// Sanitizer builds take the buffers from the heap, where AddressSanitizer
// puts its red zones around them (a mapping has none to check).
#if defined(__SANITIZE_ADDRESS__)
#define PACSET_POPULATED_FROM_HEAP 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer) || __has_feature(memory_sanitizer)
#define PACSET_POPULATED_FROM_HEAP 1
#endif
#endif

namespace pacset {

void UnmapPopulated::operator()(char* p) const noexcept {
#ifdef PACSET_POPULATED_FROM_HEAP
  delete[] p;
#else
  if (p != nullptr) munmap(p, bytes);
#endif
}

PopulatedBuffer AllocatePopulated(size_t bytes) {
  if (bytes == 0) throw std::bad_alloc();
#ifdef PACSET_POPULATED_FROM_HEAP
  return PopulatedBuffer(new char[bytes](), UnmapPopulated{bytes});
#else
  void* p = mmap(nullptr, bytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_POPULATE,
                 -1, 0);
  if (p == MAP_FAILED) throw std::bad_alloc();
  return PopulatedBuffer(static_cast<char*>(p), UnmapPopulated{bytes});
#endif
}

}  // namespace pacset
