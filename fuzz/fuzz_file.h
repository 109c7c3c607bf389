// For fuzz targets whose parser takes a path: the input as a file that only
// this process can see (a memfd, named through /proc/self/fd), rewritten for
// every input. No name in a shared directory, nothing left behind.
#pragma once

#include <sys/mman.h>
#include <unistd.h>

#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <string>

namespace pacset {

inline const std::string& FuzzInputAsFile(const uint8_t* data, size_t size) {
  static const int fd = memfd_create("pacset-fuzz-input", MFD_CLOEXEC);
  static const std::string path = "/proc/self/fd/" + std::to_string(fd);
  if (fd < 0 || ftruncate(fd, 0) != 0) std::abort();
  size_t done = 0;
  while (done < size) {
    const ssize_t n = pwrite(fd, data + done, size - done, static_cast<off_t>(done));
    if (n <= 0) std::abort();
    done += static_cast<size_t>(n);
  }
  return path;
}

}  // namespace pacset
