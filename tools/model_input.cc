#include "tools/model_input.h"

#include <cstdio>
#include <cstring>

#include "layout/pac_format.h"
#include "tools/helper_programs.h"
#include "util/file_io.h"

namespace pacset {

StatusOr<Forest> ImportModelWarning(const std::string& path, ModelFormat format) {
  auto forest = ImportModel(path, format, FindHelperPrograms());
  if (forest.ok())
    for (const auto& w : forest->source.warnings) std::fprintf(stderr, "%s\n", w.c_str());
  return forest;
}

StatusOr<bool> IsPacFile(const std::string& path) {
  PACSET_ASSIGN_OR_RETURN(UniqueFd fd, OpenRegularFile(path));
  char magic[8] = {};
  PACSET_ASSIGN_OR_RETURN(const size_t n, PreadUpTo(fd.get(), magic, sizeof magic, 0, path));
  return n == sizeof magic && std::memcmp(magic, kPacMagic, sizeof magic) == 0;
}

}  // namespace pacset
