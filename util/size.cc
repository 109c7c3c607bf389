#include "util/size.h"

#include <strings.h>

#include <cstddef>
#include <cstdio>

namespace pacset {

StatusOr<uint64_t> ParseByteSize(const std::string& text, const std::string& what) {
  auto bad = [&] {
    return Status::InvalidArgument(what + " '" + text +
                                   "' is not a size like 4096, 4K, 64KiB or 1GiB");
  };
  size_t digits = 0;
  uint64_t value = 0;
  while (digits < text.size() && text[digits] >= '0' && text[digits] <= '9') {
    const uint64_t d = static_cast<uint64_t>(text[digits] - '0');
    if (value > (UINT64_MAX - d) / 10) return bad();
    value = value * 10 + d;
    ++digits;
  }
  if (digits == 0) return bad();
  const char* unit = text.c_str() + digits;
  int shift = 0;
  if (*unit == '\0') {
    shift = 0;
  } else if (!strcasecmp(unit, "K") || !strcasecmp(unit, "KiB")) {
    shift = 10;
  } else if (!strcasecmp(unit, "M") || !strcasecmp(unit, "MiB")) {
    shift = 20;
  } else if (!strcasecmp(unit, "G") || !strcasecmp(unit, "GiB")) {
    shift = 30;
  } else {
    return bad();
  }
  if (shift > 0 && value > (UINT64_MAX >> shift)) return bad();
  return value << shift;
}

std::string FormatByteSize(uint64_t b) {
  char buf[64];
  if (b >= (1ull << 30))
    std::snprintf(buf, sizeof(buf), "%.2f GiB", b / double(1ull << 30));
  else if (b >= (1ull << 20))
    std::snprintf(buf, sizeof(buf), "%.2f MiB", b / double(1ull << 20));
  else if (b >= 1024)
    std::snprintf(buf, sizeof(buf), "%.1f KiB", b / 1024.0);
  else
    std::snprintf(buf, sizeof(buf), "%llu B", static_cast<unsigned long long>(b));
  return buf;
}

}  // namespace pacset
