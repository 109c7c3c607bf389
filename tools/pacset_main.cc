// pacset: import, pack, inspect and predict with decision forests.
// Exit status: 0 success, 1 runtime failure, 2 usage error.
#include <CLI/CLI.hpp>

#include <cstdio>

#include "tools/commands.h"

namespace {

int Fail(const pacset::Status& s) {
  std::fprintf(stderr, "pacset: error: %s\n", s.ToString().c_str());
  return 1;
}

CLI::Option* AddFormat(CLI::App* app, std::string* format) {
  return app->add_option("--format", *format,
                         "Model format: auto, xgboost-json, xgboost-ubjson, sklearn-json, "
                         "sklearn-pickle, lightgbm, pacset-forest")
      ->default_val("auto");
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"pacset: pack decision forests for selective, page-faulted inference"};
  app.set_version_flag("--version", std::string("pacset ") + PACSET_VERSION);
  app.require_subcommand(1);

  pacset::PredictOptions predict;
  std::string predict_format;
  auto* p = app.add_subcommand("predict", "Predict rows of a CSV file with a model or .pac file");
  p->add_option("MODEL", predict.model, "Model file")->required();
  p->add_option("-i,--input", predict.input, "CSV rows (header optional; empty or NaN = missing)")
      ->required();
  p->add_option("-o,--output", predict.output, "Output CSV (default: standard output)");
  p->add_flag("--margin", predict.margin, "Write raw scores (margins) instead of predictions");
  p->add_flag("--leaf", predict.leaf, "Write the leaf index reached in every tree");
  p->add_option("-j,--threads", predict.threads, "Worker threads")->check(CLI::Range(1, 1024));
  AddFormat(p, &predict_format);

  pacset::InfoOptions info;
  std::string info_format;
  auto* i = app.add_subcommand("info", "Describe a model or .pac file");
  i->add_option("PATH", info.path, "Model or .pac file")->required();
  AddFormat(i, &info_format);

  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    const int rc = app.exit(e);
    return rc == 0 ? 0 : 2;
  }

  pacset::Status s;
  if (*p) {
    auto f = pacset::ParseModelFormat(predict_format);
    if (!f.ok()) return Fail(f.status());
    predict.format = *f;
    s = pacset::RunPredict(predict);
  } else if (*i) {
    auto f = pacset::ParseModelFormat(info_format);
    if (!f.ok()) return Fail(f.status());
    info.format = *f;
    s = pacset::RunInfo(info);
  }
  return s.ok() ? 0 : Fail(s);
}
