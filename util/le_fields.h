// Fixed-offset little-endian fields in on-disk records (.pac headers, trace
// records). The formats are little-endian and so is every host we build for
// (checked in layout/pac_format.h), so a field is a memcpy.
#pragma once

#include <cstddef>
#include <cstring>

namespace pacset {

template <typename T>
inline void PutField(char* dst, size_t off, T v) {
  std::memcpy(dst + off, &v, sizeof(T));
}

template <typename T>
inline T GetField(const char* src, size_t off) {
  T v;
  std::memcpy(&v, src + off, sizeof(T));
  return v;
}

}  // namespace pacset
