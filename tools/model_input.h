// What every `pacset` command that takes a model or a .pac file does first:
// tell the two apart, and import a model with its warnings shown.
#pragma once

#include <string>

#include "model/forest.h"
#include "model/import.h"
#include "util/status.h"

namespace pacset {

// ImportModel, with the import's warnings shown on stderr.
StatusOr<Forest> ImportModelWarning(const std::string& path, ModelFormat format);

// Whether `path` starts with the .pac magic. Every command that takes a model
// or .pac path asks this first, so a path that is not a regular file (a FIFO
// would block the open forever) is refused here, at once (OpenRegularFile).
StatusOr<bool> IsPacFile(const std::string& path);

}  // namespace pacset
