#include "tools/helper_programs.h"

#include <unistd.h>

#include <cstdlib>
#include <string>

#include "util/file_io.h"

namespace pacset {
namespace {

std::string FindExporter() {
  if (const char* e = std::getenv("PACSET_SKLEARN_EXPORTER")) return e;
  const std::string candidates[] = {
      ExecutableDir() + "/pacset-sklearn-export",
      std::string(PACSET_DATADIR) + "/pacset-sklearn-export",
#ifdef PACSET_SOURCE_DIR
      std::string(PACSET_SOURCE_DIR) + "/tools/pacset-sklearn-export",
#endif
  };
  for (const auto& c : candidates)
    if (access(c.c_str(), R_OK) == 0) return c;
  return "";
}

std::string FindPython() {
  if (const char* e = std::getenv("PACSET_PYTHON")) return e;
  if (access("/usr/bin/python3", X_OK) == 0) return "/usr/bin/python3";
  return "python3";
}

}  // namespace

HelperPrograms FindHelperPrograms() {
  HelperPrograms o;
  o.sklearn_exporter = FindExporter();
  o.python = FindPython();
  return o;
}

}  // namespace pacset
