#include "layout/pac_file.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cmath>
#include <cstdlib>

#include "layout/internal/sigbus.h"

namespace pacset {

PacFile::~PacFile() {
  if (map_) munmap(map_, size_);
}

StatusOr<std::unique_ptr<PacFile>> PacFile::Open(const std::string& path) {
  int fd = open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return Status::FromErrno("cannot open " + path, errno);
  struct stat st;
  if (fstat(fd, &st) != 0) {
    int err = errno;
    close(fd);
    return Status::FromErrno("cannot stat " + path, err);
  }
  std::unique_ptr<PacFile> f(new PacFile());
  f->name_ = path;
  f->size_ = static_cast<uint64_t>(st.st_size);
  if (f->size_ < kFixedHeaderSize + 8) {
    close(fd);
    return Status::InvalidArgument(path + ": too short to be a .pac file (" +
                                   std::to_string(f->size_) + " bytes)");
  }
  void* m = mmap(nullptr, f->size_, PROT_READ, MAP_SHARED, fd, 0);
  int err = errno;
  close(fd);
  if (m == MAP_FAILED) return Status::FromErrno("cannot map " + path, err);
  f->map_ = m;
  f->data_ = static_cast<const char*>(m);
  // Inference touches a few scattered pages: without this, every fault on a
  // cold local file reads 128 KiB or more around it (measured on a 1 GB
  // forest: cold one-row prediction 229 ms -> 38 ms; warm throughput within
  // noise). Through pacsetfs the daemon already limits readahead.
  (void)madvise(m, f->size_, MADV_RANDOM);

  PACSET_RETURN_IF_ERROR(f->Init());
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
  PACSET_RETURN_IF_ERROR(f->Init());
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
  PACSET_RETURN_IF_ERROR(f->Init());
  return f;
}

Status PacFile::Init() {
  // Everything here reads the mapping; a SIGBUS (EIO from a mount) becomes an error.
  SigbusScope scope(data_, size_, 4096);
  if (sigsetjmp(*scope.env(), 1) != 0) return scope.Error(name_);
  scope.Arm();
  const size_t avail = std::min<uint64_t>(size_, kMaxBlockSize);
  auto header = PacHeader::DecodeFrom(data_, avail, name_);
  if (!header.ok()) {
    scope.Disarm();
    return header.status();
  }
  header_ = std::move(header).value();
  const PacHeader& h = header_;
  const uint64_t expected = h.block_count * h.block_size;
  if (size_ != expected) {
    scope.Disarm();
    return Status::Corruption(name_ + ": file is " + std::to_string(size_) +
                              " bytes but its header says " + std::to_string(expected) +
                              (size_ < expected ? " (truncated)" : ""));
  }
  for (uint64_t b = 0; b < h.node_first_block; ++b) {
    Status s = VerifyBlock(data_ + b * h.block_size, h.block_size, b, name_);
    if (!s.ok()) {
      scope.Disarm();
      return s;
    }
  }
  const SectionEntry& nodes = *h.FindSection(SectionType::kNodes);
  node_begin_unit_ = h.node_first_block * h.block_size / kUnit;
  node_end_unit_ = (h.node_first_block + h.node_block_count) * h.block_size / kUnit;
  if (nodes.offset != h.node_first_block * h.block_size) {
    scope.Disarm();
    return Status::Corruption(name_ + ": node section does not start at the node region");
  }
  const SectionEntry& tt = *h.FindSection(SectionType::kTreeTable);
  const SectionEntry& bs = *h.FindSection(SectionType::kBaseScore);
  if (SectionEnd(tt, h.block_size) > h.node_first_block * h.block_size ||
      SectionEnd(bs, h.block_size) > h.node_first_block * h.block_size) {
    scope.Disarm();
    return Status::Corruption(name_ + ": metadata sections overlap the node region");
  }
  trees_.resize(h.num_trees);
  const uint32_t record_bytes =
      static_cast<uint32_t>((8ull * h.leaf_width + kUnit - 1) / kUnit * kUnit);
  const uint32_t node_bytes = h.node_format == 0 ? sizeof(CompactNode) : sizeof(WideNode);
  Status bad;
  for (uint64_t t = 0; t < h.num_trees && bad.ok(); ++t) {
    std::memcpy(&trees_[t], data_ + SectionRecordOffset(tt, h.block_size, t), sizeof(TreeRecord));
    const TreeRecord& r = trees_[t];
    const std::string where = name_ + ": tree " + std::to_string(t);
    if (r.root_kind > 3) {
      bad = Status::Corruption(where + " has an unknown root kind");
    } else if (r.root_kind == static_cast<uint8_t>(RefKind::kNode) &&
               !RefInNodeRegion(r.root, node_bytes)) {
      bad = Status::Corruption(where + " has its root outside the node region");
    } else if (r.root_kind == static_cast<uint8_t>(RefKind::kLeafRecord) &&
               !RefInNodeRegion(r.root, record_bytes)) {
      bad = Status::Corruption(where + " has its leaf outside the node region");
    } else if (r.root_kind == static_cast<uint8_t>(RefKind::kInlineClass) &&
               r.root >= h.num_outputs) {
      bad = Status::Corruption(where + " has an out-of-range class");
    } else if (h.leaf_width == 1 && r.group >= h.num_outputs) {
      bad = Status::Corruption(where + " has output group " + std::to_string(r.group));
    }
  }
  base_score_.resize(h.num_outputs);
  for (uint32_t k = 0; k < h.num_outputs; ++k)
    std::memcpy(&base_score_[k], data_ + SectionRecordOffset(bs, h.block_size, k), 8);
  scope.Disarm();
  PACSET_RETURN_IF_ERROR(bad);
  for (double b : base_score_)
    if (std::isnan(b)) return Status::Corruption(name_ + ": base score is NaN");
  if (const SectionEntry* li = h.FindSection(SectionType::kLeafIds)) {
    if (li->record_size == 8 && li->count >= h.node_block_count * (h.payload_size() / kUnit))
      leaf_ids_ = li;
  }
  return Status::Ok();
}

std::string PacFile::SourceInfoJson() const {
  const SectionEntry* s = header_.FindSection(SectionType::kSourceInfo);
  if (!s || s->record_size != 1) return "";
  std::string out;
  out.reserve(s->count);
  for (uint64_t i = 0; i < s->count; ++i)
    out.push_back(data_[SectionRecordOffset(*s, header_.block_size, i)]);
  return out;
}

std::vector<uint64_t> PacFile::VerifyBlocks() const {
  std::vector<uint64_t> bad;
  SigbusScope scope(data_, size_, header_.block_size);
  volatile uint64_t b = 0;
  if (sigsetjmp(*scope.env(), 1) != 0) {
    bad.push_back(static_cast<uint64_t>(b));  // unreadable counts as bad; go on after it
    ++b;
  }
  scope.Arm();
  for (; b < header_.block_count; ++b)
    if (!VerifyBlock(data_ + b * header_.block_size, header_.block_size, b, name_).ok())
      bad.push_back(static_cast<uint64_t>(b));
  scope.Disarm();
  return bad;
}

void PacFile::ChildLeafIds(uint64_t node_ref, uint32_t ids[2]) const {
  const uint64_t index = LeafIdIndex(node_ref - node_begin_unit_, header_.block_size);
  std::memcpy(ids, data_ + SectionRecordOffset(*leaf_ids_, header_.block_size, index), 8);
}

}  // namespace pacset
