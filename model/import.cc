#include "model/import.h"

#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <vector>

#include "util/file_io.h"
#include "util/string_util.h"
#include "util/subprocess.h"

namespace pacset {

const char* ModelFormatName(ModelFormat f) {
  switch (f) {
    case ModelFormat::kAuto:
      return "auto";
    case ModelFormat::kXgboostJson:
      return "xgboost-json";
    case ModelFormat::kXgboostUbjson:
      return "xgboost-ubjson";
    case ModelFormat::kSklearnJson:
      return "sklearn-json";
    case ModelFormat::kSklearnPickle:
      return "sklearn-pickle";
    case ModelFormat::kLightgbmText:
      return "lightgbm";
    case ModelFormat::kPacsetForest:
      return "pacset-forest";
  }
  return "?";
}

StatusOr<ModelFormat> ParseModelFormat(const std::string& name) {
  for (ModelFormat f : {ModelFormat::kAuto, ModelFormat::kXgboostJson, ModelFormat::kXgboostUbjson,
                        ModelFormat::kSklearnJson, ModelFormat::kSklearnPickle,
                        ModelFormat::kLightgbmText, ModelFormat::kPacsetForest})
    if (name == ModelFormatName(f)) return f;
  return Status::InvalidArgument("unknown model format '" + name +
                                 "' (expected auto, xgboost-json, xgboost-ubjson, sklearn-json, "
                                 "sklearn-pickle, lightgbm or pacset-forest)");
}

StatusOr<ModelFormat> DetectModelFormat(const std::string& path) {
  PACSET_ASSIGN_OR_RETURN(UniqueFd fd, OpenRegularFile(path));
  if (EndsWith(path, ".joblib") || EndsWith(path, ".pkl") || EndsWith(path, ".pickle"))
    return ModelFormat::kSklearnPickle;
  char head[4096];
  PACSET_ASSIGN_OR_RETURN(const size_t n, PreadUpTo(fd.get(), head, sizeof(head), 0, path));
  if (n == 0) return Status::InvalidArgument(path + ": the file is empty");
  std::string_view h(head, n);
  if (n >= 5 && head[0] == 1 && h.substr(1, 4) == "FCAP") return ModelFormat::kPacsetForest;
  if (static_cast<unsigned char>(head[0]) == 0x80) return ModelFormat::kSklearnPickle;
  size_t i = 0;
  while (i < n && (head[i] == ' ' || head[i] == '\n' || head[i] == '\r' || head[i] == '\t')) ++i;
  if (i < n && head[i] == '{') {
    const char next = i + 1 < n ? head[i + 1] : 0;
    if (EndsWith(path, ".ubj") || std::strchr("UiIlLd$#", next) != nullptr)
      return ModelFormat::kXgboostUbjson;
    if (h.find("\"pacset-sklearn\"") != std::string_view::npos) return ModelFormat::kSklearnJson;
    return ModelFormat::kXgboostJson;
  }
  if (h.rfind("tree\n", 0) == 0 || h.rfind("tree\r\n", 0) == 0 ||
      h.find("\nversion=v") != std::string_view::npos)
    return ModelFormat::kLightgbmText;
  return Status::InvalidArgument(
      path +
      ": unrecognised model format (expected an XGBoost .json/.ubj model, a LightGBM text "
      "model, a scikit-learn .joblib/.pkl file or its exported JSON; use --format to say "
      "which)");
}

StatusOr<Forest> ImportModel(const std::string& path, ModelFormat format,
                             const HelperPrograms& helpers) {
  if (format == ModelFormat::kAuto) {
    PACSET_ASSIGN_OR_RETURN(format, DetectModelFormat(path));
  }
  StatusOr<Forest> result = Status::Internal("unreachable");
  if (format == ModelFormat::kSklearnPickle) {
    result = ImportSklearnPickle(path, helpers);
  } else if (format == ModelFormat::kPacsetForest) {
    result = LoadForest(path);
  } else {
    PACSET_ASSIGN_OR_RETURN(std::string bytes, ReadWholeRegularFile(path));
    switch (format) {
      case ModelFormat::kXgboostJson:
        result = ImportXgboostJson(bytes, path);
        break;
      case ModelFormat::kXgboostUbjson:
        result = ImportXgboostUbjson(bytes, path);
        break;
      case ModelFormat::kSklearnJson:
        result = ImportSklearnJson(bytes, path);
        break;
      case ModelFormat::kLightgbmText:
        result = ImportLightgbmText(bytes, path);
        break;
      default:
        return Status::Internal("unhandled model format");
    }
  }
  if (result.ok() && result->source.file_name.empty()) result->source.file_name = BaseName(path);
  return result;
}

namespace {

// Maps the exporter's stream written to `fd` (closed here) and imports it.
StatusOr<Forest> ImportMappedStream(int fd, const std::string& path) {
  struct stat st {};
  if (fstat(fd, &st) != 0) {
    const int e = errno;
    close(fd);
    return Status::FromErrno("cannot read the export of " + path, e);
  }
  const size_t size = static_cast<size_t>(st.st_size);
  void* map = size ? mmap(nullptr, size, PROT_READ, MAP_PRIVATE, fd, 0) : nullptr;
  const int map_errno = errno;
  close(fd);
  if (map == MAP_FAILED) return Status::FromErrno("cannot map the export of " + path, map_errno);
  auto forest = ImportSklearnStream(std::string_view(static_cast<const char*>(map), size),
                                    path + " (exported)");
  if (map) munmap(map, size);
  return forest;
}

}  // namespace

StatusOr<Forest> ImportSklearnPickle(const std::string& path, const HelperPrograms& helpers) {
  // The exporter opens the path itself; refuse here, at once, what it would
  // block on (a FIFO) or read without end (a device).
  PACSET_RETURN_IF_ERROR(OpenRegularFile(path).status());
  const std::string& exporter = helpers.sklearn_exporter;
  if (exporter.empty())
    return Status::NotFound("cannot find pacset-sklearn-export (set PACSET_SKLEARN_EXPORTER)");
  const std::string& python = helpers.python;
  // The exporter streams the estimator's arrays in binary (no JSON numbers)
  // into an anonymous memory file that is then mapped: no pipe copy, no
  // growing buffer, no temporary file name. Reading costs about what
  // joblib.load costs.
  const int fd = memfd_create("pacset-sklearn-stream", MFD_CLOEXEC);
  if (fd < 0) return Status::FromErrno("cannot create the export buffer for " + path, errno);
  std::string err;
  int code = 0;
  const int spawn_error = RunWritingTo({python, exporter, "--stream", path}, fd, &err, &code);
  if (spawn_error != 0) {
    close(fd);
    return Status::NotSupported(path + ": reading scikit-learn models needs python3 (" + python +
                                ": " + std::strerror(spawn_error) +
                                "); install it with: apt-get install python3 python3-sklearn "
                                "python3-joblib");
  }
  while (!err.empty() && err.back() == '\n') err.pop_back();
  if (code != 0) {
    close(fd);
    // The exporter exits 3 when python3-sklearn / joblib is missing.
    if (code == 3) return Status::NotSupported(err);
    if (code == 127 || err.find("No such file") != std::string::npos)
      return Status::NotSupported(path + ": reading scikit-learn models needs python3: " + err);
    return Status::InvalidArgument(path + ": " + (err.empty() ? "exporter failed" : err));
  }
  auto forest = ImportMappedStream(fd, path);
  if (!forest.ok()) return forest;
  // Warnings (e.g. "pickled by another scikit-learn version") go to the caller.
  size_t begin = 0;
  while (begin < err.size()) {
    size_t end = err.find('\n', begin);
    if (end == std::string::npos) end = err.size();
    if (end > begin) forest->source.warnings.push_back(err.substr(begin, end - begin));
    begin = end + 1;
  }
  return forest;
}

}  // namespace pacset
