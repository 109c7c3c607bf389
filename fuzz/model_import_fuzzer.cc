// libFuzzer target: every importer on arbitrary bytes (the first byte picks
// the importer). A forest that is returned must validate and predict.
#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

#include "model/import.h"
#include "model/predict.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size < 1) return 0;
  const std::string_view text(reinterpret_cast<const char*>(data) + 1, size - 1);
  pacset::StatusOr<pacset::Forest> f = pacset::Status::InvalidArgument("");
  switch (data[0] % 5) {
    case 0:
      f = pacset::ImportXgboostJson(text, "fuzz.json");
      break;
    case 1:
      f = pacset::ImportXgboostUbjson(text, "fuzz.ubj");
      break;
    case 2:
      f = pacset::ImportSklearnJson(text, "fuzz.json");
      break;
    case 3:
      f = pacset::ImportLightgbmText(text, "fuzz.txt");
      break;
    case 4:  // the exporter's binary stream, magic supplied
      f = pacset::ImportSklearnStream(
          std::string(pacset::kSklearnStreamMagic, sizeof(pacset::kSklearnStreamMagic)) +
              std::string(text),
          "fuzz.joblib");
      break;
  }
  if (!f.ok()) return 0;
  if (!f->Validate().ok()) __builtin_trap();  // importers must only return valid forests
  if (f->num_features > 100000) return 0;
  std::vector<double> row(f->num_features, 0.5), out(f->num_prediction_columns());
  pacset::ForestPredictor(*f).Predict(row.data(), out.data());
  return 0;
}
