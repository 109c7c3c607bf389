// Editing .pac files the way an attacker would: change fields, then make
// every checksum valid again, so that what a reader sees past its checksums
// is exactly the edit (tests, and the structure-aware fuzz target). Written
// from layout/FORMAT.md §1-§2; it trusts nothing in the bytes it seals.
#pragma once

#include <cstdint>
#include <cstring>
#include <string>

#include "layout/block.h"
#include "layout/pac_format.h"
#include "util/le_fields.h"

namespace pacset::testing {

// Recomputes the header checksum over the gathered header stream and seals
// every whole block (index, and checksum under the seed the header names:
// its file_id from version 3). Bytes that cannot hold a header (a block size
// that is not one, a header past the end) are sealed as far as they go; the
// reader then refuses them for what they are.
inline void ResealPac(std::string& bytes) {
  if (bytes.size() < kFixedHeaderSize) return;
  const char* d = bytes.data();
  const uint32_t version = GetField<uint32_t>(d, 8);
  const uint32_t header_size = GetField<uint32_t>(d, 12);
  const uint32_t bs = GetField<uint32_t>(d, 16);
  if (!IsValidBlockSize(bs)) return;
  if (header_size >= 16 && header_size <= (1u << 20) &&
      PayloadStreamOffset(header_size - 1, bs) < bytes.size()) {
    std::string stream(header_size - 8, '\0');
    for (uint32_t j = 0; j < header_size - 8; ++j) stream[j] = bytes[PayloadStreamOffset(j, bs)];
    const uint64_t sum = Checksum64(stream.data(), stream.size());
    char raw[8];
    std::memcpy(raw, &sum, 8);
    for (uint32_t i = 0; i < 8; ++i) bytes[PayloadStreamOffset(header_size - 8 + i, bs)] = raw[i];
  }
  // No whole block: nothing more to seal (and file_id, at 128, may lie
  // past the end of a short input).
  if (bytes.size() < bs) return;
  const uint64_t seed = version >= 3 ? GetField<uint64_t>(bytes.data(), 128) : 0;
  for (uint64_t b = 0; b < bytes.size() / bs; ++b) SealBlock(bytes.data() + b * bs, bs, b, seed);
}

// Fields of a valid file, to edit in place; Reseal() when done.
class PacEditor {
 public:
  // `bytes` must hold a file whose header decodes.
  explicit PacEditor(std::string bytes) : bytes_(std::move(bytes)) {
    auto h = PacHeader::DecodeFromFile(bytes_.data(), bytes_.size(), "edited.pac");
    if (h.ok()) header_ = *h;
    ok_ = h.ok();
  }
  bool ok() const { return ok_; }
  const PacHeader& header() const { return header_; }
  std::string& bytes() { return bytes_; }

  uint64_t TreeOffset(uint64_t t) const {
    return SectionRecordOffset(*header_.FindSection(SectionType::kTreeTable), header_.block_size,
                               t);
  }
  TreeRecord Tree(uint64_t t) const {
    TreeRecord r;
    std::memcpy(&r, bytes_.data() + TreeOffset(t), sizeof(r));
    return r;
  }
  void SetTree(uint64_t t, const TreeRecord& r) {
    std::memcpy(bytes_.data() + TreeOffset(t), &r, sizeof(r));
  }
  template <typename NodeT>
  NodeT Node(uint64_t ref) const {
    NodeT n;
    std::memcpy(&n, bytes_.data() + ref * kUnit, sizeof(n));
    return n;
  }
  template <typename NodeT>
  void SetNode(uint64_t ref, const NodeT& n) {
    std::memcpy(bytes_.data() + ref * kUnit, &n, sizeof(n));
  }
  // A field of the header stream (FORMAT.md §2 offsets), wherever its bytes
  // lie in the file.
  template <typename T>
  void SetHeaderField(uint32_t offset, T value) {
    char raw[sizeof(T)];
    std::memcpy(raw, &value, sizeof(T));
    for (uint32_t i = 0; i < sizeof(T); ++i)
      bytes_[PayloadStreamOffset(offset + i, header_.block_size)] = raw[i];
  }
  // Checksums valid again; returns the bytes.
  const std::string& Reseal() {
    ResealPac(bytes_);
    return bytes_;
  }

 private:
  std::string bytes_;
  PacHeader header_;
  bool ok_ = false;
};

}  // namespace pacset::testing
