// PLACEHOLDER until the sklearn importer lands.
#include "model/import.h"
namespace pacset {
StatusOr<Forest> ImportSklearnJson(std::string_view, const std::string& name) {
  return Status::NotSupported(name + ": scikit-learn import is not implemented yet");
}
}  // namespace pacset
