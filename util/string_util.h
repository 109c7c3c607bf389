// Small text helpers, one home each: prefix and suffix tests, plain decimal
// numbers, values quoted in error messages, printf appended to a string.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

namespace pacset {

inline bool StartsWith(std::string_view s, std::string_view prefix) {
  return s.substr(0, prefix.size()) == prefix;
}

inline bool EndsWith(std::string_view s, std::string_view suffix) {
  return s.size() >= suffix.size() && s.substr(s.size() - suffix.size()) == suffix;
}

// "12" -> 12: true and *out set only for one to twenty decimal digits (no
// sign, space or other character) whose value fits in 64 bits. Leading
// zeros are allowed.
bool ParseUint64(std::string_view s, uint64_t* out);

// A value from an input, for an error message: in single quotes, cut to its
// first 40 bytes followed by "..." when longer ('abc', 'aaaa...aaaa...').
std::string QuoteExcerpt(std::string_view s);

// printf into the end of *out, whatever the length (reports build their text
// with it). The format is checked at compile time like printf's.
void StringAppendF(std::string* out, const char* format, ...) __attribute__((format(printf, 2, 3)));

}  // namespace pacset
