#include "layout/pac_file.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <cstring>

#include "util/file_io.h"

namespace pacset {

PacFile::~PacFile() {
  if (map_) munmap(map_, size_);
  if (fd_ >= 0) close(fd_);
}

StatusOr<std::unique_ptr<PacFile>> PacFile::Open(const std::string& path) {
  std::unique_ptr<PacFile> f(new PacFile());
  f->name_ = path;
  PACSET_ASSIGN_OR_RETURN(UniqueFd fd, OpenRegularFile(path));
  f->fd_ = fd.release();
  struct stat st;
  if (fstat(f->fd_, &st) != 0) return Status::FromErrno("cannot stat " + path, errno);
  f->size_ = static_cast<uint64_t>(st.st_size);
  if (f->size_ < kFixedHeaderSize + 8)
    return Status::InvalidArgument(path + ": too short to be a .pac file (" +
                                   std::to_string(f->size_) + " bytes)");
  void* m = mmap(nullptr, f->size_, PROT_READ, MAP_SHARED, f->fd_, 0);
  if (m == MAP_FAILED) return Status::FromErrno("cannot map " + path, errno);
  f->map_ = m;
  f->data_ = static_cast<const char*>(m);
  // Inference touches a few scattered pages: without this, every fault on a
  // cold local file reads 128 KiB or more around it (measured on a 1 GB
  // forest: cold one-row prediction 229 ms -> 38 ms; warm throughput within
  // noise). Through pacsetfs the daemon already limits readahead. The same
  // for reads through the descriptor (the engine's block fetches).
  (void)madvise(m, f->size_, MADV_RANDOM);
  (void)posix_fadvise(f->fd_, 0, 0, POSIX_FADV_RANDOM);
  PACSET_RETURN_IF_ERROR(f->ReadMetadata());
  return f;
}

StatusOr<std::unique_ptr<PacFile>> PacFile::FromBuffer(std::string bytes, const std::string& name) {
  std::unique_ptr<PacFile> f(new PacFile());
  f->name_ = name;
  f->owned_ = std::move(bytes);
  f->data_ = f->owned_.data();
  f->size_ = f->owned_.size();
  if (f->size_ < kFixedHeaderSize + 8)
    return Status::InvalidArgument(name + ": too short to be a .pac file");
  PACSET_RETURN_IF_ERROR(f->Init(f->data_, f->size_));
  return f;
}

StatusOr<std::unique_ptr<PacFile>> PacFile::FromMetadata(std::string meta, uint64_t file_size,
                                                         const std::string& name) {
  std::unique_ptr<PacFile> f(new PacFile());
  f->name_ = name;
  f->meta_ = std::move(meta);
  f->size_ = file_size;
  PACSET_RETURN_IF_ERROR(f->Init(f->meta_.data(), f->meta_.size()));
  return f;
}

StatusOr<std::unique_ptr<PacFile>> PacFile::FromMemory(const char* data, uint64_t size,
                                                       std::shared_ptr<const void> keep_alive,
                                                       const std::string& name) {
  std::unique_ptr<PacFile> f(new PacFile());
  f->name_ = name;
  f->borrowed_ = std::move(keep_alive);
  f->data_ = data;
  f->size_ = size;
  if (f->size_ < kFixedHeaderSize + 8)
    return Status::InvalidArgument(name + ": too short to be a .pac file");
  PACSET_RETURN_IF_ERROR(f->Init(f->data_, f->size_));
  return f;
}

Status PacFile::ReadMetadata() {
  // The fixed header first (block 0 starts with it), which says how many
  // blocks the header spans, then the rest of the metadata blocks: a few
  // small reads, not a block size's worth of guessing (up to 1 MiB cold).
  meta_.resize(std::min<uint64_t>(size_, kPacVersion1MinBlockSize));
  PACSET_RETURN_IF_ERROR(PreadFull(fd_, meta_.data(), meta_.size(), 0, name_));
  PACSET_ASSIGN_OR_RETURN(const uint64_t header_bytes,
                          HeaderFileBytes(meta_.data(), meta_.size(), name_));
  auto read_up_to = [&](uint64_t bytes) -> Status {
    if (bytes <= meta_.size()) return Status::Ok();
    if (bytes > size_)
      return Status::Corruption(name_ + ": file is " + std::to_string(size_) +
                                " bytes but its metadata needs " + std::to_string(bytes) +
                                " (truncated)");
    const size_t had = meta_.size();
    meta_.resize(bytes);
    return PreadFull(fd_, meta_.data() + had, bytes - had, had, name_);
  };
  PACSET_RETURN_IF_ERROR(read_up_to(header_bytes));
  PACSET_ASSIGN_OR_RETURN(PacHeader h,
                          PacHeader::DecodeFromFile(meta_.data(), meta_.size(), name_));
  PACSET_RETURN_IF_ERROR(read_up_to(h.node_first_block * h.block_size));
  return Init(meta_.data(), meta_.size());
}

Status PacFile::Init(const char* meta, uint64_t meta_size) {
  meta_data_ = meta;
  meta_size_ = meta_size;
  PACSET_ASSIGN_OR_RETURN(header_, PacHeader::DecodeFromFile(meta, meta_size, name_));
  const PacHeader& h = header_;
  const uint64_t expected = h.block_count * h.block_size;
  if (size_ != expected)
    return Status::Corruption(name_ + ": file is " + std::to_string(size_) +
                              " bytes but its header says " + std::to_string(expected) +
                              (size_ < expected ? " (truncated)" : ""));
  const uint64_t meta_end = h.node_first_block * h.block_size;
  if (meta_end > meta_size) return Status::Corruption(name_ + ": metadata blocks are missing");
  for (uint64_t b = 0; b < h.node_first_block; ++b)
    PACSET_RETURN_IF_ERROR(
        VerifyBlock(meta + b * h.block_size, h.block_size, b, h.block_seed(), name_));
  node_begin_unit_ = h.node_first_block * h.block_size / kUnit;
  node_end_unit_ = (h.node_first_block + h.node_block_count) * h.block_size / kUnit;
  const SectionEntry& tt = *h.FindSection(SectionType::kTreeTable);
  const SectionEntry& bs = *h.FindSection(SectionType::kBaseScore);
  // FORMAT.md §5, "Tree table": every record is checked here, once, from a
  // private copy of the metadata, before anything walks a tree.
  trees_.resize(h.num_trees);
  const uint32_t record_bytes =
      static_cast<uint32_t>((8ull * h.leaf_width + kUnit - 1) / kUnit * kUnit);
  const uint32_t node_bytes = h.node_format == 0 ? sizeof(CompactNode) : sizeof(WideNode);
  for (uint64_t t = 0; t < h.num_trees; ++t) {
    std::memcpy(&trees_[t], meta + SectionRecordOffset(tt, h.block_size, t), sizeof(TreeRecord));
    const TreeRecord& r = trees_[t];
    const std::string where = name_ + ": tree " + std::to_string(t);
    // Every tree's group, whatever the leaf width: any tree may end on an
    // inline value, which adds to acc[group].
    if (r.group >= h.num_outputs)
      return Status::Corruption(where + " has output group " + std::to_string(r.group) +
                                " (the forest has " + std::to_string(h.num_outputs) + " outputs)");
    switch (static_cast<RefKind>(r.root_kind)) {
      case RefKind::kNode:
        if (!RefInNodeRegion(r.root, node_bytes))
          return Status::Corruption(where + " has its root outside the node region");
        break;
      case RefKind::kLeafRecord:
        if (!RefInNodeRegion(r.root, record_bytes))
          return Status::Corruption(where + " has its leaf outside the node region");
        break;
      case RefKind::kInlineValue:
        break;
      case RefKind::kInlineClass:
        if (r.root >= h.num_outputs)
          return Status::Corruption(where + " has an out-of-range class");
        break;
      default:
        return Status::Corruption(where + " has an unknown root kind " +
                                  std::to_string(r.root_kind));
    }
  }
  base_score_.resize(h.num_outputs);
  for (uint32_t k = 0; k < h.num_outputs; ++k)
    std::memcpy(&base_score_[k], meta + SectionRecordOffset(bs, h.block_size, k), 8);
  for (double b : base_score_)
    if (std::isnan(b)) return Status::Corruption(name_ + ": base score is NaN");
  if (const SectionEntry* params = h.FindSection(SectionType::kPostprocessParams)) {
    // Its count is the postprocess's (DecodeFrom checked): 2 for isolation score.
    postprocess_params_.resize(params->count);
    for (uint64_t i = 0; i < params->count; ++i)
      std::memcpy(&postprocess_params_[i], meta + SectionRecordOffset(*params, h.block_size, i), 8);
    for (double p : postprocess_params_)
      if (!std::isfinite(p))
        return Status::Corruption(name_ + ": a postprocess parameter is not finite");
    if (h.postprocess == static_cast<uint8_t>(Postprocess::kIsolationScore) &&
        postprocess_params_[0] < 0)
      return Status::Corruption(name_ + ": the isolation score's denominator is negative");
  }
  leaf_ids_ = h.FindSection(SectionType::kLeafIds);
  // Categorical splits: the sections lie in the metadata blocks (checked by
  // DecodeFrom), read here once into private copies.
  if (const SectionEntry* words = h.FindSection(SectionType::kCategoryWords)) {
    const SectionEntry& splits = *h.FindSection(SectionType::kCategoricalSplits);
    if (words->count > (uint64_t{1} << 32) || splits.count > (uint64_t{1} << 32))
      return Status::Corruption(name_ + ": too many category words or categorical splits");
    cat_words_.resize(words->count);
    for (uint64_t i = 0; i < words->count; ++i)
      std::memcpy(&cat_words_[i], meta + SectionRecordOffset(*words, h.block_size, i), 4);
    cat_splits_.resize(splits.count);
    for (uint64_t i = 0; i < splits.count; ++i) {
      CategoricalSplitRecord r;
      std::memcpy(&r, meta + SectionRecordOffset(splits, h.block_size, i), sizeof(r));
      if (r.rule > kMaxCategoryRule || uint64_t{r.left_first} + r.left_words > words->count ||
          uint64_t{r.right_first} + r.right_words > words->count)
        return Status::Corruption(name_ + ": categorical split " + std::to_string(i) +
                                  " has a set outside the category words or an unknown rule " +
                                  std::to_string(r.rule));
      cat_splits_[i] = {r.left_first, r.left_words, r.right_first, r.right_words, r.rule};
    }
  }
  return Status::Ok();
}

std::string PacFile::SourceInfoJson() const {
  const SectionEntry* s = header_.FindSection(SectionType::kSourceInfo);
  // In the metadata blocks (PacHeader::DecodeFrom checked).
  if (!s || SectionEnd(*s, header_.block_size) > meta_size_) return "";
  std::string out;
  out.reserve(s->count);
  for (uint64_t i = 0; i < s->count; ++i)
    out.push_back(meta_data_[SectionRecordOffset(*s, header_.block_size, i)]);
  return out;
}

Status PacFile::ReadBlock(uint64_t b, char* dst) const {
  const uint32_t bs = header_.block_size;
  if (data_ == nullptr)
    return Status::NotSupported(name_ + ": block " + std::to_string(b) +
                                " is not here (only the metadata is)");
  if (fd_ < 0) {
    std::memcpy(dst, data_ + b * bs, bs);
    return Status::Ok();
  }
  Status s = PreadFull(fd_, dst, bs, b * bs, name_ + " block " + std::to_string(b));
  if (s.ok()) return s;
  const std::string where = name_ + ": block " + std::to_string(b) + " (offset " +
                            std::to_string(b * bs) + ") could not be read: ";
  // PreadFull calls a short read corruption; here the file was whole at open.
  if (s.IsCorruption())
    return Status::IOError(where + "the file ends before it (truncated since it was opened)");
  return Status::IOError(where + s.message());
}

std::vector<uint64_t> PacFile::VerifyBlocks() const {
  std::vector<uint64_t> bad;
  std::string buf(header_.block_size, '\0');
  for (uint64_t b = 0; b < header_.block_count; ++b)
    if (!ReadBlock(b, buf.data()).ok() ||
        !VerifyBlock(buf.data(), header_.block_size, b, header_.block_seed(), name_).ok())
      bad.push_back(b);
  return bad;
}

uint64_t PacFile::LeafIdsOffset(uint64_t node_ref) const {
  const uint64_t index = LeafIdIndex(node_ref - node_begin_unit_, header_.block_size);
  return SectionRecordOffset(*leaf_ids_, header_.block_size, index);
}

}  // namespace pacset
