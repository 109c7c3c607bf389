// Block-access trace files (version 1). Normative description:
// trace/FORMAT.md. Written by pacsetfs (--trace FILE), read by pacset-trace.
//
// A trace is a 64-byte file header followed by fixed-size 48-byte records,
// each carrying its own checksum, so a reader can stream a trace of any size
// and stop cleanly at a torn tail (a daemon killed mid-write).
#pragma once

#include <cstdint>
#include <cstring>
#include <string>

namespace pacset {

inline constexpr char kTraceMagic[8] = {'P', 'A', 'C', 'T', 'R', 'A', 'C', 'E'};
inline constexpr uint32_t kTraceVersion = 1;
inline constexpr uint32_t kTraceHeaderSize = 64;
inline constexpr uint32_t kTraceRecordSize = 48;

enum class TraceRecordType : uint8_t {
  kForestName = 1,    // defines forest id -> name (in chunks of 32 bytes)
  kBlockAccess = 2,   // one block served or fetched
  kDropped = 3,       // `block` = number of events dropped since the last such record
  kRequestBegin = 4,  // a reader marks the start of request `block` (pid, time)
  kRequestEnd = 5,    // ... and its end
  kDropCache = 6,     // caches were dropped for forest id (0 = all)
};

enum class TraceSource : uint8_t {
  kStore = 0,     // fetched from the block store
  kCache = 1,     // served from the daemon's block cache
  kJoined = 2,    // waited for a fetch another reader had started
  kPrefetch = 3,  // fetched ahead of use (pushed into the page cache)
};

// One decoded record. Field use depends on type (see FORMAT.md).
struct TraceRecord {
  TraceRecordType type = TraceRecordType::kBlockAccess;
  TraceSource source = TraceSource::kStore;
  uint16_t flags = 0;       // block access: bit 0 = failed (the reader got EIO)
  uint32_t forest = 0;      // forest id
  uint64_t time_ns = 0;     // CLOCK_MONOTONIC
  uint64_t generation = 0;  // forest name record: total name length
  uint64_t block = 0;       // block index; request id; dropped count
  uint32_t bytes = 0;       // bytes of the read request this access served
  uint32_t pid = 0;
  uint32_t latency_ns = 0;  // saturates at 2^32-1
  std::string name_chunk;   // forest name records: up to 32 bytes of the name
  uint32_t chunk_index = 0; // forest name records
};

inline constexpr uint16_t kTraceFlagError = 1;
inline constexpr size_t kTraceNameChunk = 32;

// Encodes into 48 bytes (checksum included).
void EncodeTraceRecord(const TraceRecord& r, char out[kTraceRecordSize]);
// False when the checksum or the type is wrong.
bool DecodeTraceRecord(const char in[kTraceRecordSize], TraceRecord* r);

struct TraceFileHeader {
  uint32_t version = kTraceVersion;
  uint64_t start_monotonic_ns = 0;
  uint64_t start_realtime_ns = 0;
  uint32_t pid = 0;  // of the writer
};
void EncodeTraceHeader(const TraceFileHeader& h, char out[kTraceHeaderSize]);
bool DecodeTraceHeader(const char in[kTraceHeaderSize], TraceFileHeader* h, std::string* error);

uint64_t MonotonicNowNs();

}  // namespace pacset
