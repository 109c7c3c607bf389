// Model importers: files written by the training libraries -> Forest.
//
// Each importer either returns a validated Forest that predicts exactly what
// the library predicts, or a Status naming the file, the field (JSON path) or
// line, and the reason. Unsupported features (categorical splits, linear
// trees, ...) are reported as kNotSupported, never approximated, with what
// the user can do instead.
#pragma once

#include <string>
#include <string_view>

#include "model/forest.h"
#include "util/status.h"

namespace pacset {

enum class ModelFormat {
  kAuto,           // decide from the file's first bytes and extension
  kXgboostJson,    // XGBoost save_model("*.json"), versions 1.x to 3.x
  kXgboostUbjson,  // XGBoost save_model("*.ubj")
  kSklearnJson,    // JSON written by tools/pacset-sklearn-export (format: docs/sklearn-export.md)
  kSklearnPickle,  // a .joblib / .pkl file, converted by running pacset-sklearn-export
  kLightgbmText,   // LightGBM save_model() text
  kPacsetForest,   // a Forest saved with SaveForest()
};

const char* ModelFormatName(ModelFormat f);
// Parses "xgboost-json", "xgboost-ubjson", "sklearn-json", "sklearn-pickle", "lightgbm", "auto".
StatusOr<ModelFormat> ParseModelFormat(const std::string& name);

// Guesses the format from the path's extension and first bytes. Like every
// importer here that opens a path, it refuses at once a path that is not a
// regular file (a FIFO, a device, a directory: util/file_io.h OpenRegularFile).
StatusOr<ModelFormat> DetectModelFormat(const std::string& path);

// The helper programs an import may run. The library looks none up: the
// tool layer decides (tools/helper_programs.h) and passes them in.
struct HelperPrograms {
  // pacset-sklearn-export, for .joblib/.pkl files; empty: pickles are refused.
  std::string sklearn_exporter;
  // The python3 that runs it (one with python3-sklearn and python3-joblib).
  std::string python = "python3";
};

// Reads and imports a model file.
StatusOr<Forest> ImportModel(const std::string& path, ModelFormat format = ModelFormat::kAuto,
                             const HelperPrograms& helpers = {});

// The individual importers; `name` is used in error messages.
StatusOr<Forest> ImportXgboostJson(std::string_view text, const std::string& name);
StatusOr<Forest> ImportXgboostUbjson(std::string_view bytes, const std::string& name);
StatusOr<Forest> ImportSklearnJson(std::string_view text, const std::string& name);
StatusOr<Forest> ImportLightgbmText(std::string_view text, const std::string& name);

// The binary stream `pacset-sklearn-export --stream` writes (docs/sklearn-export.md):
// the magic, a little-endian u64 length, the JSON document whose arrays are
// {"dtype", "blob": [offset, count]} references, then the arrays' raw bytes.
// The arrays are read in place.
inline constexpr char kSklearnStreamMagic[8] = {'P', 'A', 'C', 'S', 'K', 'L', '\0', '1'};
StatusOr<Forest> ImportSklearnStream(std::string_view bytes, const std::string& name);

// Runs the scikit-learn exporter on a pickled estimator and imports its JSON.
// Needs python3 with scikit-learn; the error says what to install otherwise.
// Unpickling runs code from the file: only use files you trust.
StatusOr<Forest> ImportSklearnPickle(const std::string& path, const HelperPrograms& helpers);

}  // namespace pacset
