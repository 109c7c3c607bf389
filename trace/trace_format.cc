#include "trace/trace_format.h"

#include <time.h>
#include "util/xxhash.h"

#include <algorithm>

#include "util/le_fields.h"

namespace pacset {
namespace {

bool IsRequestMark(TraceRecordType t) {
  return t == TraceRecordType::kRequestBegin || t == TraceRecordType::kRequestEnd;
}

uint32_t Checksum(const char* rec) { return static_cast<uint32_t>(XXH3_64bits(rec, 44)); }

}  // namespace

const char* TraceSourceName(TraceSource s) {
  switch (s) {
    case TraceSource::kStore:
      return "store";
    case TraceSource::kCache:
      return "cache";
    case TraceSource::kJoined:
      return "joined";
    case TraceSource::kPrefetch:
      return "prefetch";
  }
  return "unknown";
}

uint64_t MonotonicNowNs() {
  timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return static_cast<uint64_t>(ts.tv_sec) * 1000000000ull + static_cast<uint64_t>(ts.tv_nsec);
}

uint64_t RealtimeNowNs() {
  timespec ts;
  clock_gettime(CLOCK_REALTIME, &ts);
  return static_cast<uint64_t>(ts.tv_sec) * 1000000000ull + static_cast<uint64_t>(ts.tv_nsec);
}

// Record layout (little-endian; FORMAT.md section 3 has the table per type):
//   0 u8 type | 1 u8 source | 2 u16 flags | 4 u32 forest | 8 u64 A | 16 u64 B
//  24 u64 C | 32 u32 D | 36 u32 pid | 40 u32 E | 44 u32 checksum (low 32 bits
//  of XXH3-64, seed 0, of bytes [0, 44)).
void EncodeTraceRecord(const TraceRecord& r, char out[kTraceRecordSize]) {
  std::memset(out, 0, kTraceRecordSize);
  out[0] = static_cast<char>(r.type);
  out[1] = static_cast<char>(r.source);
  PutField<uint32_t>(out, 4, r.forest);
  if (r.type == TraceRecordType::kForestName) {
    PutField<uint16_t>(out, 2, static_cast<uint16_t>(r.generation));  // total name length
    std::memcpy(out + 8, r.name_chunk.data(), std::min(r.name_chunk.size(), kTraceNameChunk));
    PutField<uint32_t>(out, 40, r.chunk_index);
  } else {
    const bool mark = IsRequestMark(r.type);
    PutField<uint16_t>(out, 2, r.flags);
    PutField<uint64_t>(out, 8,
                       r.type == TraceRecordType::kForestInfo ? r.header_checksum : r.time_ns);
    PutField<uint64_t>(out, 16, mark ? r.first_row : r.generation);
    PutField<uint64_t>(out, 24, r.block);
    PutField<uint32_t>(out, 32, mark ? r.row_count : r.bytes);
    PutField<uint32_t>(out, 36, r.pid);
    PutField<uint32_t>(out, 40, mark || r.type == TraceRecordType::kThread ? r.tgid : r.latency_ns);
  }
  PutField<uint32_t>(out, 44, Checksum(out));
}

TraceDecodeResult DecodeTraceRecord(const char in[kTraceRecordSize], TraceRecord* r) {
  if (GetField<uint32_t>(in, 44) != Checksum(in)) return TraceDecodeResult::kBadChecksum;
  const uint8_t type = static_cast<uint8_t>(in[0]);
  if (type < 1 || type > kMaxKnownRecordType) return TraceDecodeResult::kUnknownType;
  *r = TraceRecord();
  r->type = static_cast<TraceRecordType>(type);
  r->source = static_cast<TraceSource>(static_cast<uint8_t>(in[1]));
  r->forest = GetField<uint32_t>(in, 4);
  if (r->type == TraceRecordType::kForestName) {
    const uint16_t total = GetField<uint16_t>(in, 2);
    r->generation = total;
    r->chunk_index = GetField<uint32_t>(in, 40);
    const size_t start = static_cast<size_t>(r->chunk_index) * kTraceNameChunk;
    const size_t n = start >= total ? 0 : std::min(kTraceNameChunk, total - start);
    r->name_chunk.assign(in + 8, n);
    return TraceDecodeResult::kOk;
  }
  const bool mark = IsRequestMark(r->type);
  r->flags = GetField<uint16_t>(in, 2);
  if (r->type == TraceRecordType::kForestInfo) {
    r->header_checksum = GetField<uint64_t>(in, 8);
  } else {
    r->time_ns = GetField<uint64_t>(in, 8);
  }
  (mark ? r->first_row : r->generation) = GetField<uint64_t>(in, 16);
  r->block = GetField<uint64_t>(in, 24);
  (mark ? r->row_count : r->bytes) = GetField<uint32_t>(in, 32);
  r->pid = GetField<uint32_t>(in, 36);
  (mark || r->type == TraceRecordType::kThread ? r->tgid : r->latency_ns) =
      GetField<uint32_t>(in, 40);
  return TraceDecodeResult::kOk;
}

// Header: 0 magic[8] | 8 u32 version | 12 u32 header size | 16 u32 record size
//        | 20 u32 writer pid | 24 u64 start monotonic ns | 32 u64 start realtime ns
//        | 40..56 reserved | 56 u64 checksum = XXH3-64 of [0, 56)
void EncodeTraceHeader(const TraceFileHeader& h, char out[kTraceHeaderSize]) {
  std::memset(out, 0, kTraceHeaderSize);
  std::memcpy(out, kTraceMagic, 8);
  PutField<uint32_t>(out, 8, h.version);
  PutField<uint32_t>(out, 12, kTraceHeaderSize);
  PutField<uint32_t>(out, 16, kTraceRecordSize);
  PutField<uint32_t>(out, 20, h.pid);
  PutField<uint64_t>(out, 24, h.start_monotonic_ns);
  PutField<uint64_t>(out, 32, h.start_realtime_ns);
  PutField<uint64_t>(out, 56, XXH3_64bits(out, 56));
}

bool DecodeTraceHeader(const char in[kTraceHeaderSize], TraceFileHeader* h, std::string* error) {
  if (std::memcmp(in, kTraceMagic, 8) != 0) {
    *error = "not a pacsetfs trace file (no PACTRACE magic)";
    return false;
  }
  if (GetField<uint64_t>(in, 56) != XXH3_64bits(in, 56)) {
    *error = "trace header checksum mismatch (damaged header)";
    return false;
  }
  h->version = GetField<uint32_t>(in, 8);
  if (h->version < kTraceOldestVersion || h->version > kTraceVersion) {
    *error = "trace format version " + std::to_string(h->version) +
             " is not supported (this build reads versions " + std::to_string(kTraceOldestVersion) +
             " to " + std::to_string(kTraceVersion) + ")";
    return false;
  }
  if (GetField<uint32_t>(in, 12) != kTraceHeaderSize ||
      GetField<uint32_t>(in, 16) != kTraceRecordSize) {
    *error = "unexpected trace header or record size";
    return false;
  }
  h->pid = GetField<uint32_t>(in, 20);
  h->start_monotonic_ns = GetField<uint64_t>(in, 24);
  h->start_realtime_ns = GetField<uint64_t>(in, 32);
  return true;
}

}  // namespace pacset
