// Block-access trace files, version 2. Normative description:
// trace/FORMAT.md (keep the two in step). Written by pacsetfs (--trace FILE
// or "trace start" on the control file), read by pacset-trace.
//
// A trace is a 64-byte file header followed by fixed-size 48-byte records,
// each carrying its own checksum, so a reader can stream a trace of any size
// and stop cleanly at a torn tail (a daemon killed mid-write). Request marks
// written by inference engines use the same 48-byte records (without a file
// header) and are merged into a trace by `pacset-trace record` / `merge`.
#pragma once

#include <cstdint>
#include <cstring>
#include <string>

namespace pacset {

inline constexpr char kTraceMagic[8] = {'P', 'A', 'C', 'T', 'R', 'A', 'C', 'E'};
inline constexpr uint32_t kTraceVersion = 2;
inline constexpr uint32_t kTraceOldestVersion = 1;  // readers accept [oldest, current]
inline constexpr uint32_t kTraceHeaderSize = 64;
inline constexpr uint32_t kTraceRecordSize = 48;

enum class TraceRecordType : uint8_t {
  kForestName = 1,    // defines forest id -> name (in chunks of 32 bytes)
  kBlockAccess = 2,   // one block served or fetched
  kDropped = 3,       // `block` = number of events dropped since the last such record
  kRequestBegin = 4,  // an engine marks the start of request `block` (tid, time)
  kRequestEnd = 5,    // ... and its end
  kDropCache = 6,     // caches were dropped for forest id (0 = all)
  kForestInfo = 7,    // v2: geometry and header checksum of one forest generation
  kThread = 8,        // v2: thread id `pid` belongs to process `tgid`
};
inline constexpr uint8_t kMaxKnownRecordType = 8;

enum class TraceSource : uint8_t {
  kStore = 0,     // fetched from the block store
  kCache = 1,     // served from the daemon's block cache
  kJoined = 2,    // waited for a fetch another reader had started
  kPrefetch = 3,  // fetched ahead of use (pushed into the page cache)
};
const char* TraceSourceName(TraceSource s);
inline constexpr int kNumTraceSources = 4;

// One decoded record. Which fields a type uses is in FORMAT.md; unused
// fields are zero.
struct TraceRecord {
  TraceRecordType type = TraceRecordType::kBlockAccess;
  TraceSource source = TraceSource::kStore;
  uint16_t flags = 0;            // block access: bit 0 = failed (the reader got EIO)
  uint32_t forest = 0;           // forest id (names: kForestName records)
  uint64_t time_ns = 0;          // CLOCK_MONOTONIC
  uint64_t generation = 0;       // access, forest info; forest name: total name length
  uint64_t block = 0;            // block index; request id; dropped count; forest info: block count
  uint32_t bytes = 0;            // access: bytes of this block the read returned; info: block size
  uint32_t pid = 0;              // thread id (what FUSE reports; equals the pid for one thread)
  uint32_t latency_ns = 0;       // access: saturates at 2^32-1
  uint32_t tgid = 0;             // request marks, thread records: the process id
  uint64_t first_row = 0;        // request marks: index of the request's first input row
  uint32_t row_count = 0;        // request marks: rows in the request (0: unknown)
  uint64_t header_checksum = 0;  // forest info: the .pac header checksum
  std::string name_chunk;        // forest name records: up to 32 bytes of the name
  uint32_t chunk_index = 0;      // forest name records
};

inline constexpr uint16_t kTraceFlagError = 1;
inline constexpr size_t kTraceNameChunk = 32;

// Encodes into 48 bytes (checksum included).
void EncodeTraceRecord(const TraceRecord& r, char out[kTraceRecordSize]);

enum class TraceDecodeResult {
  kOk,
  kBadChecksum,  // torn, overwritten or not a record: skip it
  kUnknownType,  // valid checksum, type from a newer writer: skip it
};
TraceDecodeResult DecodeTraceRecord(const char in[kTraceRecordSize], TraceRecord* r);

struct TraceFileHeader {
  uint32_t version = kTraceVersion;
  uint64_t start_monotonic_ns = 0;
  uint64_t start_realtime_ns = 0;
  uint32_t pid = 0;  // of the writer
};
void EncodeTraceHeader(const TraceFileHeader& h, char out[kTraceHeaderSize]);
// False with a message for a file that is not a trace, is damaged or is of
// an unsupported version.
bool DecodeTraceHeader(const char in[kTraceHeaderSize], TraceFileHeader* h, std::string* error);

uint64_t MonotonicNowNs();
uint64_t RealtimeNowNs();

}  // namespace pacset
