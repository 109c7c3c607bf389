// The `pacset` subcommands as library functions: tools/pacset_main.cc only
// parses the command line and calls these, so tests can call them too.
// Each returns a Status; the caller prints it and picks the exit code.
#pragma once

#include <string>

#include "model/import.h"
#include "util/status.h"

namespace pacset {

struct PredictOptions {
  std::string model;   // a model file (any importable format) or a .pac file
  std::string input;   // CSV rows, "-" for stdin
  std::string output = "-";
  ModelFormat format = ModelFormat::kAuto;
  bool margin = false;  // raw scores instead of probabilities
  bool leaf = false;    // leaf index per tree instead of predictions
  int threads = 1;
};
Status RunPredict(const PredictOptions& opts);

struct InfoOptions {
  std::string path;
  ModelFormat format = ModelFormat::kAuto;
  bool json = false;
};
Status RunInfo(const InfoOptions& opts);

}  // namespace pacset
