// Replacing a file so that readers see the old or the new contents, never a
// mix, and a crash never leaves a half-written file under the name.
#pragma once

#include <string>
#include <string_view>

#include "util/status.h"

namespace pacset {

// Writes `contents` to a new temporary file beside `path` (O_EXCL, a random
// name), fsyncs it, renames it over `path` and fsyncs the directory. On error
// the temporary file is removed and `path` is untouched.
Status WriteFileAtomically(const std::string& path, std::string_view contents, int mode = 0644);

}  // namespace pacset
