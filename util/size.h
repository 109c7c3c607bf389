// Byte counts written by people: "4096", "4K", "64KiB", "1GiB" (command-line
// flags, mount options, benchmark arguments), and printed back for reading.
// One grammar everywhere:
//
//   size   := digits [unit]
//   unit   := K | KiB | M | MiB | G | GiB      (case-insensitive: k, kib, ...)
//
// Units are binary (K = 1024). No sign, spaces, fractions or decimal units
// (KB, MB). The value must fit in 64 bits.
#pragma once

#include <cstdint>
#include <string>

#include "util/status.h"

namespace pacset {

// Parses `text` by the grammar above. On error: kInvalidArgument naming
// `what` (e.g. "block size", "option cache_size") and the text.
StatusOr<uint64_t> ParseByteSize(const std::string& text, const std::string& what);

// For people to read, not to parse back: "512 B", "3.5 KiB", "1.25 MiB",
// "2.00 GiB" (one decimal below a MiB, two from there).
std::string FormatByteSize(uint64_t bytes);

}  // namespace pacset
