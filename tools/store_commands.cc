// The store commands: pacset import, ls, rm, verify and export.
#include <cstdio>
#include <ctime>
#include <memory>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "layout/pac_file.h"
#include "layout/pack.h"
#include "layout/structure_check.h"
#include "model/json_reader.h"
#include "store/block_store.h"
#include "store/publish.h"
#include "tools/commands.h"
#include "tools/model_input.h"
#include "tools/pack_cli.h"
#include "util/atomic_file.h"
#include "util/file_io.h"
#include "util/size.h"

namespace pacset {
namespace {

StatusOr<std::unique_ptr<BlockStore>> OpenStoreFor(const StoreCommandOptions& o, bool write) {
  StoreOptions so;
  so.read_only = !write;
  const std::string uri = o.store.empty() ? DefaultStoreUri() : o.store;
  auto s = OpenBlockStore(uri, so);
  if (!s.ok()) return s.status().WithContext("store " + RedactStoreUri(uri));
  return s;
}

std::string TimeString(int64_t unix_ns) {
  const time_t t = static_cast<time_t>(unix_ns / 1000000000);
  char buf[64];
  std::tm tm;
  gmtime_r(&t, &tm);
  std::strftime(buf, sizeof(buf), "%Y-%m-%dT%H:%M:%SZ", &tm);
  return buf;
}

}  // namespace

Status RunImport(const ImportOptions& opts) {
  PACSET_RETURN_IF_ERROR(ValidateForestName(opts.name));
  std::string pac = opts.input;
  std::unique_ptr<TempDir> temp;  // private (mode 0700): nobody can plant a name in it
  ForestInfo info;
  info.source_file = BaseName(opts.input);
  PACSET_ASSIGN_OR_RETURN(const bool is_pac, IsPacFile(opts.input));
  if (!is_pac) {
    // A model: pack it on the way in, into a temporary file.
    PACSET_ASSIGN_OR_RETURN(PackOptions po, ToPackOptions(opts.pack));
    po.progress = true;
    RowMatrix calibrate;
    PACSET_ASSIGN_OR_RETURN(
        Forest forest, LoadForPacking(opts.input, opts.format, opts.pack.calibrate, &calibrate));
    if (calibrate.num_rows) po.score_rows = &calibrate;
    PACSET_ASSIGN_OR_RETURN(temp, TempDir::Create("pacset-import"));
    pac = temp->path() + "/forest.pac";
    PackReport report;
    PACSET_RETURN_IF_ERROR(PackForestToFile(forest, po, pac, &report));
    PrintBinChoiceLine(report);
    info.source_format = forest.source.format;
    info.source_library = forest.source.library_version;
  } else {
    info.source_format = "pac";
  }
  PACSET_ASSIGN_OR_RETURN(auto file, PacFile::Open(pac));
  // What every reader would refuse is never published (its blocks are
  // checked as they are stored).
  {
    auto reader = NewPacFileBlockReader(*file);
    PACSET_RETURN_IF_ERROR(CheckForestStructure(*file, *reader).status());
  }
  if (info.source_format == "pac") {
    auto parsed = ParseJsonDocument(file->SourceInfoJson(), pac + ": source info");
    const nlohmann::json src = parsed.ok() ? *parsed : nlohmann::json();
    if (src.is_object()) {
      info.source_format = src.value("source_format", std::string("pac"));
      info.source_library = src.value("library_version", std::string());
      if (!src.value("source_file", std::string()).empty())
        info.source_file = src.value("source_file", std::string());
    }
  }
  info.header_checksum = file->header().checksum;
  info.block_seed = file->header().block_seed();
  info.created_unix_ns = static_cast<int64_t>(std::time(nullptr)) * 1000000000;
  const uint32_t bs = file->header().block_size;
  const uint64_t size = file->size();
  file.reset();
  PACSET_ASSIGN_OR_RETURN(auto store, OpenStoreFor(opts.store, /*write=*/true));
  uint64_t gen = 0;
  PACSET_RETURN_IF_ERROR(PublishFile(*store, opts.name, pac, bs, info, &gen));
  // What this import published (the catalog may already name a newer
  // generation, published by another writer of a shared store).
  std::printf("imported %s as '%s' generation %llu: %llu blocks of %s (%s)\n", opts.input.c_str(),
              opts.name.c_str(), static_cast<unsigned long long>(gen),
              static_cast<unsigned long long>(size / bs), FormatByteSize(bs).c_str(),
              FormatByteSize(size).c_str());
  return Status::Ok();
}

Status RunList(const StoreCommandOptions& opts) {
  PACSET_ASSIGN_OR_RETURN(auto store, OpenStoreFor(opts, false));
  PACSET_ASSIGN_OR_RETURN(std::vector<ForestInfo> list, store->List());
  if (opts.json) {
    nlohmann::json j = nlohmann::json::array();
    for (const auto& f : list)
      j.push_back({{"name", f.name},
                   {"generation", f.generation},
                   {"size_bytes", f.size_bytes},
                   {"block_size", f.block_size},
                   {"block_count", f.block_count},
                   {"header_checksum", f.header_checksum},
                   {"created", TimeString(f.created_unix_ns)},
                   {"source_file", f.source_file},
                   {"source_format", f.source_format},
                   {"source_library", f.source_library}});
    std::printf("%s\n", j.dump(2).c_str());
    return Status::Ok();
  }
  std::printf("%-24s %4s %10s %8s %8s  %-20s  %s\n", "NAME", "GEN", "SIZE", "BLOCK", "BLOCKS",
              "CREATED", "SOURCE");
  for (const auto& f : list)
    std::printf(
        "%-24s %4llu %10s %8s %8llu  %-20s  %s (%s%s%s)\n", f.name.c_str(),
        static_cast<unsigned long long>(f.generation), FormatByteSize(f.size_bytes).c_str(),
        FormatByteSize(f.block_size).c_str(), static_cast<unsigned long long>(f.block_count),
        TimeString(f.created_unix_ns).c_str(), f.source_file.c_str(), f.source_format.c_str(),
        f.source_library.empty() ? "" : ", ", f.source_library.c_str());
  return Status::Ok();
}

Status RunRemove(const std::string& name, const StoreCommandOptions& opts) {
  PACSET_RETURN_IF_ERROR(ValidateForestName(name));
  PACSET_ASSIGN_OR_RETURN(auto store, OpenStoreFor(opts, true));
  PACSET_RETURN_IF_ERROR(store->Delete(name));
  std::printf("removed '%s'\n", name.c_str());
  return Status::Ok();
}

namespace {

std::string StructureLine(const StatusOr<StructureSummary>& s) {
  if (!s.ok()) return "structure is corrupt: " + s.status().message();
  return "structure ok (" + std::to_string(s->nodes) + " nodes, " +
         std::to_string(s->leaf_records) + " leaf records, " + std::to_string(s->inline_leaves) +
         " inline leaves)";
}

Status VerifyFile(const std::string& path) {
  PACSET_ASSIGN_OR_RETURN(auto file, PacFile::Open(path));
  const std::vector<uint64_t> bad = file->VerifyBlocks();
  for (uint64_t b : bad)
    std::printf("%s: block %llu is corrupt or unreadable\n", path.c_str(),
                static_cast<unsigned long long>(b));
  std::string line = path + ": " + std::to_string(file->header().block_count) + " blocks, " +
                     std::to_string(bad.size()) + " bad";
  StatusOr<StructureSummary> structure = Status::Corruption("not checked: blocks are bad");
  if (bad.empty()) {
    auto reader = NewPacFileBlockReader(*file);
    structure = CheckForestStructure(*file, *reader);
    line += "; " + StructureLine(structure);
  }
  std::printf("%s\n", line.c_str());
  if (!bad.empty())
    return Status::Corruption(std::to_string(bad.size()) + " bad block" +
                              (bad.size() > 1 ? "s" : ""));
  return structure.status();
}

}  // namespace

Status RunVerify(const std::string& name, const std::string& file_path,
                 const StoreCommandOptions& opts) {
  if (!file_path.empty()) return VerifyFile(file_path);
  PACSET_ASSIGN_OR_RETURN(auto store, OpenStoreFor(opts, false));
  std::vector<ForestInfo> forests;
  if (name.empty()) {
    PACSET_ASSIGN_OR_RETURN(forests, store->List());
  } else {
    PACSET_RETURN_IF_ERROR(ValidateForestName(name));
    PACSET_ASSIGN_OR_RETURN(ForestInfo f, store->Lookup(name));
    forests.push_back(f);
  }
  uint64_t bad_total = 0, bad_structure = 0;
  for (const auto& f : forests) {
    PACSET_ASSIGN_OR_RETURN(std::vector<uint64_t> bad, VerifyForest(*store, f));
    for (uint64_t b : bad)
      std::printf("%s generation %llu: block %llu is corrupt or missing\n", f.name.c_str(),
                  static_cast<unsigned long long>(f.generation),
                  static_cast<unsigned long long>(b));
    std::string line = f.name + " generation " + std::to_string(f.generation) + ": " +
                       std::to_string(f.block_count) + " blocks, " + std::to_string(bad.size()) +
                       " bad";
    if (bad.empty()) {
      const StatusOr<StructureSummary> structure = CheckStoredStructure(*store, f);
      // A store that stopped answering is not a verdict on the forest.
      if (!structure.ok() && !structure.status().IsCorruption()) return structure.status();
      line += "; " + StructureLine(structure);
      bad_structure += !structure.ok();
    }
    std::printf("%s\n", line.c_str());
    bad_total += bad.size();
  }
  if (bad_total)
    return Status::Corruption(std::to_string(bad_total) + " bad block" +
                              (bad_total > 1 ? "s" : ""));
  if (bad_structure)
    return Status::Corruption(std::to_string(bad_structure) + " forest" +
                              (bad_structure > 1 ? "s" : "") + " with a corrupt structure");
  return Status::Ok();
}

Status RunExport(const std::string& name, const std::string& output,
                 const StoreCommandOptions& opts) {
  PACSET_RETURN_IF_ERROR(ValidateForestName(name));
  PACSET_ASSIGN_OR_RETURN(auto store, OpenStoreFor(opts, false));
  PACSET_ASSIGN_OR_RETURN(ForestInfo f, store->Lookup(name));
  PACSET_RETURN_IF_ERROR(ExportToFile(*store, f, output));
  std::printf("exported '%s' generation %llu to %s (%s)\n", name.c_str(),
              static_cast<unsigned long long>(f.generation), output.c_str(),
              FormatByteSize(f.size_bytes).c_str());
  return Status::Ok();
}

}  // namespace pacset
