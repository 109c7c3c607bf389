#include "store/publish.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>

#include "layout/block.h"
#include "store/internal/codec.h"
#include "store/stored_metadata.h"
#include "util/atomic_file.h"
#include "util/file_io.h"

namespace pacset {

namespace {

// Blocks per read or write batch: at least 4 MiB at a time.
uint64_t BatchBlocks(uint32_t block_size) { return std::max<uint64_t>(1, (4u << 20) / block_size); }

}  // namespace

Status PublishFile(BlockStore& store, const std::string& name, const std::string& pac_path,
                   uint32_t block_size, ForestInfo info, uint64_t* generation_out) {
  PACSET_RETURN_IF_ERROR(ValidateForestName(name));
  if (!IsValidBlockSize(block_size))
    return Status::InvalidArgument(pac_path + ": invalid block size " + std::to_string(block_size) +
                                   " (a power of two from 256 to 1048576)");
  PACSET_ASSIGN_OR_RETURN(UniqueFd fd, OpenRegularFile(pac_path));
  struct stat st;
  if (::fstat(fd.get(), &st) != 0) return Status::FromErrno("stat " + pac_path, errno);
  const uint64_t size = static_cast<uint64_t>(st.st_size);
  if (size == 0) return Status::InvalidArgument(pac_path + " is empty");
  if (size % block_size != 0)
    return Status::InvalidArgument(pac_path + ": size " + std::to_string(size) +
                                   " is not a multiple of the block size " +
                                   std::to_string(block_size) + " (truncated file?)");
  const uint64_t count = size / block_size;
  PACSET_ASSIGN_OR_RETURN(std::unique_ptr<GenerationWriter> writer,
                          store.BeginGeneration(name, block_size, count));
  const uint64_t batch = BatchBlocks(block_size);
  std::string buf(batch * block_size, '\0');
  for (uint64_t first = 0; first < count; first += batch) {
    const uint64_t n = std::min(batch, count - first);
    PACSET_RETURN_IF_ERROR(
        PreadFull(fd.get(), buf.data(), n * block_size, first * block_size, pac_path));
    for (uint64_t i = 0; i < n; ++i) {
      const char* block = buf.data() + i * block_size;
      // Checked before it is stored: a damaged input is never published.
      PACSET_RETURN_IF_ERROR(
          VerifyBlock(block, block_size, first + i, info.block_seed, "file " + pac_path));
      PACSET_RETURN_IF_ERROR(writer->Put(first + i, block));
    }
  }
  if (info.source_file.empty()) info.source_file = BaseName(pac_path);
  PACSET_RETURN_IF_ERROR(writer->Publish(std::move(info)));
  if (generation_out != nullptr) *generation_out = writer->generation();
  return Status::Ok();
}

Status ExportToFile(BlockStore& store, const ForestInfo& forest, const std::string& path) {
  PACSET_ASSIGN_OR_RETURN(std::unique_ptr<AtomicFile> file, AtomicFile::Create(path));
  const uint64_t batch = BatchBlocks(forest.block_size);
  std::vector<uint64_t> indexes;
  std::vector<std::string> blocks;
  for (uint64_t first = 0; first < forest.block_count; first += batch) {
    indexes.clear();
    for (uint64_t b = first; b < std::min(forest.block_count, first + batch); ++b)
      indexes.push_back(b);
    PACSET_RETURN_IF_ERROR(store.MultiGet(forest, indexes, &blocks));
    for (size_t i = 0; i < blocks.size(); ++i)
      PACSET_RETURN_IF_ERROR(PwriteFull(file->fd(), blocks[i].data(), blocks[i].size(),
                                        indexes[i] * forest.block_size, file->temp_path()));
  }
  return file->Commit();
}

StatusOr<std::vector<uint64_t>> VerifyForest(BlockStore& store, const ForestInfo& forest) {
  std::vector<uint64_t> bad;
  const uint64_t batch = BatchBlocks(forest.block_size);
  std::vector<uint64_t> indexes;
  std::vector<std::string> blocks;
  std::string one;
  for (uint64_t first = 0; first < forest.block_count; first += batch) {
    indexes.clear();
    for (uint64_t b = first; b < std::min(forest.block_count, first + batch); ++b)
      indexes.push_back(b);
    Status s = store.MultiGet(forest, indexes, &blocks);
    if (s.ok()) continue;
    if (!s.IsCorruption()) return s;
    // Something in this batch is bad: find every bad block in it.
    for (uint64_t b : indexes) {
      Status g = store.Get(forest, b, &one);
      if (g.IsCorruption()) {
        bad.push_back(b);
      } else if (!g.ok()) {
        return g;
      }
    }
  }
  return bad;
}

namespace {

class StoredBlockReader final : public StructureBlockReader {
 public:
  StoredBlockReader(BlockStore& store, const ForestInfo& forest) : store_(store), forest_(forest) {}
  Status Read(uint64_t b, std::string* out) override { return store_.Get(forest_, b, out); }

 private:
  BlockStore& store_;
  const ForestInfo& forest_;
};

}  // namespace

StatusOr<StructureSummary> CheckStoredStructure(BlockStore& store, const ForestInfo& forest) {
  const std::string what = ForestContext(forest.name, forest.generation);
  if (!IsValidBlockSize(forest.block_size) || forest.block_count == 0 ||
      forest.size_bytes != forest.block_count * forest.block_size)
    return Status::Corruption(what + ": catalog entry has " + std::to_string(forest.block_count) +
                              " blocks of " + std::to_string(forest.block_size) + " bytes");
  std::vector<uint64_t> indexes;
  std::vector<std::string> blocks;
  PACSET_ASSIGN_OR_RETURN(
      std::string meta,
      ReadStoredMetadata(forest, what, [&](uint64_t first, uint64_t end, std::string* out) {
        indexes.clear();
        for (uint64_t b = first; b < end; ++b) indexes.push_back(b);
        if (indexes.empty()) return Status::Ok();
        PACSET_RETURN_IF_ERROR(store.MultiGet(forest, indexes, &blocks));
        for (const std::string& block : blocks) out->append(block);
        return Status::Ok();
      }));
  PACSET_ASSIGN_OR_RETURN(auto file,
                          PacFile::FromMetadata(std::move(meta), forest.size_bytes, what));
  StoredBlockReader reader(store, forest);
  return CheckForestStructure(*file, reader);
}

}  // namespace pacset
