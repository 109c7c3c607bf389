// PLACEHOLDER until the LightGBM importer lands.
#include "model/import.h"
namespace pacset {
StatusOr<Forest> ImportLightgbmText(std::string_view, const std::string& name) {
  return Status::NotSupported(name + ": LightGBM import is not implemented yet");
}
}  // namespace pacset
