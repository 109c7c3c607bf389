// Trace format v2, streaming reader, writer ordering, request marks, scan
// attribution, report aggregation, compare, trace-driven weights and HTML.
#include <sys/syscall.h>
#include <unistd.h>

#include <gtest/gtest.h>

#include <algorithm>
#include <cstdio>
#include <fstream>
#include <numeric>
#include <set>
#include <thread>

#include "engine/engine.h"
#include "layout/pack.h"
#include "model/predict.h"
#include "testkit/random_forest.h"
#include "tests/test_files.h"
#include "tests/trace_builder.h"
#include "tools/commands.h"
#include "trace/analysis/trace_compare.h"
#include "trace/analysis/trace_html.h"
#include "trace/analysis/trace_report.h"
#include "trace/analysis/trace_scan.h"
#include "trace/analysis/trace_weights.h"
#include "trace/request_marks.h"
#include "trace/trace_format.h"
#include "trace/trace_reader.h"
#include "trace/trace_writer.h"
#include "util/csv.h"
#include "util/xxhash.h"

namespace pacset {
namespace {

// A path of this test process's own (testing::TempPath): the trace writer's
// O_EXCL would refuse a file an earlier run with the same pid left behind.
std::string Temp(const std::string& name) { return testing::TempPath(name); }

using testing::ReadAll;
using testing::WriteAll;

// ---- format ----

TEST(TraceFormat, EveryRecordTypeRoundTrips) {
  TraceRecord a;
  a.type = TraceRecordType::kBlockAccess;
  a.source = TraceSource::kJoined;
  a.flags = kTraceFlagError;
  a.forest = 7;
  a.time_ns = 123456789012345;
  a.generation = 42;
  a.block = (1ull << 40) + 3;
  a.bytes = 4000;
  a.pid = 99;
  a.latency_ns = 77;
  TraceRecord m;
  m.type = TraceRecordType::kRequestEnd;
  m.time_ns = 5;
  m.first_row = 1ull << 35;
  m.block = 12;
  m.row_count = 64;
  m.pid = 1001;
  m.tgid = 1000;
  TraceRecord info;
  info.type = TraceRecordType::kForestInfo;
  info.forest = 2;
  info.header_checksum = 0xfeedfacecafebeefull;
  info.generation = 9;
  info.block = 1234;
  info.bytes = 65536;
  TraceRecord th;
  th.type = TraceRecordType::kThread;
  th.time_ns = 8;
  th.pid = 31;
  th.tgid = 30;
  for (const TraceRecord& r : {a, m, info, th}) {
    char buf[kTraceRecordSize];
    EncodeTraceRecord(r, buf);
    TraceRecord d;
    ASSERT_EQ(DecodeTraceRecord(buf, &d), TraceDecodeResult::kOk);
    EXPECT_EQ(d.type, r.type);
    EXPECT_EQ(d.source, r.source);
    EXPECT_EQ(d.flags, r.flags);
    EXPECT_EQ(d.forest, r.forest);
    EXPECT_EQ(d.time_ns, r.time_ns);
    EXPECT_EQ(d.generation, r.generation);
    EXPECT_EQ(d.block, r.block);
    EXPECT_EQ(d.bytes, r.bytes);
    EXPECT_EQ(d.pid, r.pid);
    EXPECT_EQ(d.latency_ns, r.latency_ns);
    EXPECT_EQ(d.tgid, r.tgid);
    EXPECT_EQ(d.first_row, r.first_row);
    EXPECT_EQ(d.row_count, r.row_count);
    EXPECT_EQ(d.header_checksum, r.header_checksum);
  }
}

TEST(TraceFormat, AnyFlippedBitFailsTheChecksum) {
  TraceRecord r;
  r.block = 5;
  r.time_ns = 10;
  char buf[kTraceRecordSize];
  EncodeTraceRecord(r, buf);
  for (size_t bit = 0; bit < kTraceRecordSize * 8; ++bit) {
    char copy[kTraceRecordSize];
    std::memcpy(copy, buf, sizeof(copy));
    copy[bit / 8] ^= static_cast<char>(1 << (bit % 8));
    TraceRecord d;
    EXPECT_NE(DecodeTraceRecord(copy, &d), TraceDecodeResult::kOk) << "bit " << bit;
  }
}

TEST(TraceFormat, UnknownTypeWithValidChecksumIsReportedAsUnknownNotDamaged) {
  TraceRecord r;
  char buf[kTraceRecordSize];
  EncodeTraceRecord(r, buf);
  buf[0] = 42;
  const uint64_t h = XXH3_64bits(buf, 44);
  const uint32_t c = static_cast<uint32_t>(h);
  std::memcpy(buf + 44, &c, 4);
  TraceRecord d;
  EXPECT_EQ(DecodeTraceRecord(buf, &d), TraceDecodeResult::kUnknownType);
}

TEST(TraceFormat, HeaderRejectsNewerVersionsAndDamage) {
  TraceFileHeader h;
  char buf[kTraceHeaderSize];
  std::string error;
  TraceFileHeader d;
  h.version = kTraceVersion + 1;
  EncodeTraceHeader(h, buf);
  EXPECT_FALSE(DecodeTraceHeader(buf, &d, &error));
  EXPECT_NE(error.find("version 3 is not supported"), std::string::npos) << error;
  h.version = kTraceVersion;
  EncodeTraceHeader(h, buf);
  buf[30] ^= 1;
  EXPECT_FALSE(DecodeTraceHeader(buf, &d, &error));
  EXPECT_NE(error.find("checksum"), std::string::npos) << error;
}

// ---- reader ----

TEST(TraceReader, ClearErrorsForFilesThatAreNotWholeTraces) {
  const std::string not_trace = Temp("not_trace");
  WriteAll(not_trace, "hello, this is a CSV file,1,2,3\n");
  auto r = TraceReader::Open(not_trace);
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.status().message().find("not a pacsetfs trace"), std::string::npos);
  const std::string torn_header = Temp("torn_header");
  WriteAll(torn_header, TraceBuilder().bytes().substr(0, 40));
  r = TraceReader::Open(torn_header);
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.status().message().find("truncated trace header"), std::string::npos)
      << r.status().ToString();
  r = TraceReader::Open(Temp("does_not_exist"));
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), StatusCode::kNotFound);
}

TEST(TraceReader, CutAtEveryByteOfTheLastRecordsKeepsEveryWholeRecord) {
  // A real writer's trace.
  const std::string path = Temp("cut_source");
  {
    auto w = TraceWriter::Open(path, 64).value();
    const uint32_t id = w->Forest({"forest-with-a-name-longer-than-32-bytes", 1, 4096, 10, 99});
    for (int i = 0; i < 20; ++i) {
      TraceRecord r;
      r.forest = id;
      r.block = static_cast<uint64_t>(i);
      r.time_ns = 100 + i;
      w->Record(r);
    }
    ASSERT_TRUE(w->Close().ok());
  }
  const std::string full = ReadAll(path);
  ASSERT_EQ((full.size() - kTraceHeaderSize) % kTraceRecordSize, 0u);
  const size_t total = (full.size() - kTraceHeaderSize) / kTraceRecordSize;
  ASSERT_GE(total, 22u);  // 2 name chunks, 1 info, 20 accesses
  const std::string cut = Temp("cut");
  for (size_t len = full.size() - 3 * kTraceRecordSize; len <= full.size(); ++len) {
    WriteAll(cut, full.substr(0, len));
    auto r = TraceReader::Open(cut).value();
    TraceRecord rec;
    uint64_t n = 0, last_block = 0;
    while (r->Next(&rec)) {
      ++n;
      if (rec.type == TraceRecordType::kBlockAccess) last_block = rec.block;
    }
    const size_t whole = (len - kTraceHeaderSize) / kTraceRecordSize;
    EXPECT_EQ(n, whole) << "cut at " << len;
    EXPECT_EQ(r->torn_bytes(), (len - kTraceHeaderSize) % kTraceRecordSize) << len;
    EXPECT_EQ(r->bad_records(), 0u);
    EXPECT_EQ(last_block, whole - (total - 20) - 1) << len;
    EXPECT_EQ(r->ForestName(1), "forest-with-a-name-longer-than-32-bytes");
  }
}

TEST(TraceReader, SkipsADamagedRecordAndReadsOn) {
  TraceBuilder b;
  b.Access(1, 1, 10, 5).Access(1, 2, 11, 5).Access(1, 3, 12, 5);
  std::string bytes = b.bytes();
  bytes[kTraceHeaderSize + kTraceRecordSize + 30] ^= 0x40;  // the middle record
  const std::string path = Temp("damaged");
  WriteAll(path, bytes);
  auto r = TraceReader::Open(path).value();
  TraceRecord rec;
  std::vector<uint64_t> blocks;
  while (r->Next(&rec)) blocks.push_back(rec.block);
  EXPECT_EQ(blocks, (std::vector<uint64_t>{1, 3}));
  EXPECT_EQ(r->bad_records(), 1u);
}

TEST(TraceReader, ReadsVersionOneTraces) {
  const std::string path = TraceBuilder(1).Name(1, "old").Access(1, 4, 10, 3).Save("v1");
  auto r = TraceReader::Open(path).value();
  EXPECT_EQ(r->header().version, 1u);
  TraceRecord rec;
  ASSERT_TRUE(r->Next(&rec));
  ASSERT_TRUE(r->Next(&rec));
  EXPECT_EQ(rec.block, 4u);
  EXPECT_EQ(r->ForestName(1), "old");
  EXPECT_EQ(r->ProcessOf(3), 3u);  // no thread records: a thread is its own process
}

// ---- writer ----

TEST(TraceWriter, DefinitionsPrecedeTheirFirstUseUnderConcurrentProducers) {
  const std::string path = Temp("concurrent");
  {
    auto w = TraceWriter::Open(path, 1 << 16).value();
    std::vector<std::thread> threads;
    for (int t = 0; t < 4; ++t) {
      threads.emplace_back([&w, t] {
        for (int i = 0; i < 300; ++i) {
          const uint32_t tid = static_cast<uint32_t>(syscall(SYS_gettid));
          const uint32_t id = w->Forest(
              {"f" + std::to_string((t * 300 + i) % 37), static_cast<uint64_t>(i % 3), 4096, 8, 1});
          w->NoteThread(tid);
          TraceRecord r;
          r.forest = id;
          r.generation = static_cast<uint64_t>(i % 3);
          r.pid = tid;
          r.time_ns = MonotonicNowNs();
          w->Record(r);
        }
      });
    }
    for (auto& t : threads) t.join();
    ASSERT_TRUE(w->Close().ok());
    EXPECT_EQ(w->dropped(), 0u);
  }
  auto r = TraceReader::Open(path).value();
  std::set<uint32_t> named, threads;
  std::set<std::pair<uint32_t, uint64_t>> described;
  TraceRecord rec;
  uint64_t accesses = 0;
  while (r->Next(&rec)) {
    if (rec.type == TraceRecordType::kForestName) named.insert(rec.forest);
    if (rec.type == TraceRecordType::kForestInfo) described.insert({rec.forest, rec.generation});
    if (rec.type == TraceRecordType::kThread) {
      threads.insert(rec.pid);
      EXPECT_EQ(rec.tgid, static_cast<uint32_t>(getpid()));
    }
    if (rec.type == TraceRecordType::kBlockAccess) {
      ++accesses;
      EXPECT_TRUE(named.count(rec.forest)) << "access before its forest's name";
      EXPECT_TRUE(described.count({rec.forest, rec.generation})) << "access before forest info";
      EXPECT_TRUE(threads.count(rec.pid)) << "access before its thread record";
    }
  }
  EXPECT_EQ(accesses, 1200u);
  EXPECT_EQ(named.size(), 37u);
}

// ---- request marks and attribution ----

// The merge wrote OUT.merge-PID with fopen("wb"), following a symlink planted
// there (e.g. by another user of /tmp), and rename()d it over OUT.
TEST(RequestMarks, MergeNeverWritesThroughAPlantedSymlink) {
  const std::string trace = TraceBuilder().Name(1, "f").Access(1, 1, 100, 7).Save("plant_trace");
  const std::string marks = Temp("plant_marks");
  WriteAll(marks, "");
  const std::string victim = Temp("plant_victim");
  WriteAll(victim, "precious\n");
  const std::string out = Temp("plant_out");
  unlink(out.c_str());
  const std::string planted = out + ".merge-" + std::to_string(getpid());
  unlink(planted.c_str());
  ASSERT_EQ(symlink(victim.c_str(), planted.c_str()), 0);
  uint64_t merged = 0;
  ASSERT_TRUE(MergeRequestMarks(trace, marks, out, &merged).ok());
  EXPECT_EQ(ReadAll(victim), "precious\n");
  EXPECT_TRUE(TraceReader::Open(out).ok());
  // A symlink at the output itself is replaced, not written through.
  unlink(out.c_str());
  ASSERT_EQ(symlink(victim.c_str(), out.c_str()), 0);
  ASSERT_TRUE(MergeRequestMarks(trace, marks, out, &merged).ok());
  EXPECT_EQ(ReadAll(victim), "precious\n");
  EXPECT_TRUE(TraceReader::Open(out).ok());
  unlink(planted.c_str());
}

// Marks are appended as the workload's user: a symlink (or another user's
// file) under the agreed name must not receive them.
TEST(RequestMarks, MarkerRefusesASymlinkedMarksFile) {
  const std::string victim = Temp("marks_victim");
  WriteAll(victim, "precious\n");
  const std::string link = Temp("marks_link");
  unlink(link.c_str());
  ASSERT_EQ(symlink(victim.c_str(), link.c_str()), 0);
  auto m = RequestMarker::Open(link);
  ASSERT_FALSE(m.ok());
  EXPECT_NE(m.status().message().find("symbolic link"), std::string::npos) << m.status().ToString();
  EXPECT_EQ(ReadAll(victim), "precious\n");
  unlink(link.c_str());
  EXPECT_FALSE(RequestMarker::Open("/dev/null").ok());  // not a regular file
}

TEST(RequestMarks, MergeInsertsMarksByTimeAndKeepsEveryTraceRecord) {
  const std::string trace = TraceBuilder()
                                .Name(1, "f")
                                .Access(1, 1, 100, 7)
                                .Access(1, 2, 200, 7)
                                .Access(1, 3, 300, 7)
                                .Save("merge_trace");
  const std::string marks = Temp("merge_marks");
  unlink(marks.c_str());
  {
    auto m = RequestMarker::Open(marks).value();
    // Written out of order, as several processes would.
    m->Mark(true, 2, 0, 0, 7, 7);  // placeholder times are replaced below
  }
  // Exact times: build the marks file by hand.
  std::string bytes;
  for (auto [begin, id, t] :
       {std::tuple{true, 1, 150}, {false, 1, 250}, {true, 0, 50}, {false, 0, 120}}) {
    TraceRecord r;
    r.type = begin ? TraceRecordType::kRequestBegin : TraceRecordType::kRequestEnd;
    r.block = static_cast<uint64_t>(id);
    r.time_ns = static_cast<uint64_t>(t);
    r.pid = r.tgid = 7;
    char buf[kTraceRecordSize];
    EncodeTraceRecord(r, buf);
    bytes.append(buf, sizeof(buf));
  }
  bytes.append("torn", 4);  // a torn last mark is ignored
  WriteAll(marks, bytes);
  const std::string out = Temp("merged");
  uint64_t merged = 0;
  ASSERT_TRUE(MergeRequestMarks(trace, marks, out, &merged).ok());
  EXPECT_EQ(merged, 4u);
  auto r = TraceReader::Open(out).value();
  std::vector<std::string> seq;
  TraceRecord rec;
  while (r->Next(&rec)) {
    if (rec.type == TraceRecordType::kBlockAccess) seq.push_back("a" + std::to_string(rec.block));
    if (rec.type == TraceRecordType::kRequestBegin) seq.push_back("b" + std::to_string(rec.block));
    if (rec.type == TraceRecordType::kRequestEnd) seq.push_back("e" + std::to_string(rec.block));
  }
  EXPECT_EQ(seq, (std::vector<std::string>{"b0", "a1", "e0", "b1", "a2", "e1", "a3"}));
  auto scan = ScanTrace(out, nullptr).value();
  EXPECT_EQ(scan.requests, 2u);
}

class CollectRequests : public TraceVisitor {
 public:
  void OnRequestEnd(const ScannedRequest& r) override {
    std::set<uint64_t> b;
    for (const auto& [k, s] : r.blocks) b.insert(BlockKeyBlock(k));
    requests.push_back({r.id, b});
  }
  std::vector<std::pair<uint64_t, std::set<uint64_t>>> requests;
};

TEST(TraceScan, AnAccessBelongsToItsThreadsRequestElseToTheOnlyRequestOfItsProcess) {
  TraceBuilder b;
  b.Name(1, "f").Thread(11, 10).Thread(12, 10).Thread(21, 20);
  b.Mark(true, 100, 1, 10, 10);  // batch request of process 10 (main thread 10)
  b.Access(1, 1, 2, 11);         // worker thread 11 of process 10
  b.Access(1, 2, 3, 12);         // worker thread 12 of process 10
  b.Mark(true, 200, 4, 21, 20);  // request on thread 21 of process 20
  b.Access(1, 3, 5, 21);
  b.Access(1, 4, 6, 99);  // unknown thread: no request
  b.Access(1, 5, 7, 0, TraceSource::kPrefetch);
  b.Mark(false, 200, 8, 21, 20);
  b.Mark(false, 100, 9, 10, 10);
  b.Mark(true, 300, 10, 30, 30);  // never ends
  CollectRequests v;
  auto scan = ScanTrace(b.Save("attribution"), &v).value();
  ASSERT_EQ(v.requests.size(), 2u);
  EXPECT_EQ(v.requests[0].first, 200u);
  EXPECT_EQ(v.requests[0].second, (std::set<uint64_t>{3}));
  EXPECT_EQ(v.requests[1].first, 100u);
  EXPECT_EQ(v.requests[1].second, (std::set<uint64_t>{1, 2}));
  EXPECT_EQ(scan.unterminated_requests, 1u);
}

// ---- report aggregation ----

TEST(CountDistribution, MedianAndP95FollowLayoutReport) {
  CountDistribution d;
  for (uint64_t v : {1, 2, 3, 4}) d.Add(v);
  EXPECT_DOUBLE_EQ(d.median(), 2.5);
  EXPECT_DOUBLE_EQ(d.mean(), 2.5);
  EXPECT_EQ(d.Quantile(0.95), 4u);
  for (int i = 0; i < 95; ++i) d.Add(10);
  d.Add(1000);
  EXPECT_EQ(d.max(), 1000u);
  EXPECT_EQ(d.Quantile(0.95), 10u);
}

TEST(TraceReport, CountsSourcesUniqueBlocksRequestsProcessesAndSeconds) {
  TraceBuilder b;
  b.Name(1, "alpha").Name(2, "beta").Thread(5, 5);
  const uint64_t s = 1000000000;
  b.Mark(true, 0, 1, 5, 5, 0, 1);
  b.Access(1, 0, 2, 5).Access(1, 1, 3, 5).Access(1, 1, 4, 5, TraceSource::kCache);
  b.Access(2, 9, 5, 5, TraceSource::kJoined);
  b.Mark(false, 0, 6, 5, 5, 0, 1);
  b.Mark(true, 1, s + 1, 5, 5, 1, 1);
  b.Access(1, 2, s + 2, 5);
  b.Mark(false, 1, s + 3, 5, 5, 1, 1);
  b.Access(1, 3, 2 * s + 5, 0, TraceSource::kPrefetch);
  auto rep = BuildTraceReport(b.Save("report")).value();
  ASSERT_EQ(rep.forests.size(), 2u);
  const ForestReport& a = rep.forests.at(1);
  EXPECT_EQ(a.name, "alpha");
  EXPECT_EQ(a.by_source[0], 3u);
  EXPECT_EQ(a.by_source[1], 1u);
  EXPECT_EQ(a.by_source[3], 1u);
  EXPECT_EQ(a.blocks.size(), 4u);
  EXPECT_EQ(a.blocks.at(1).demand, 2u);
  EXPECT_EQ(a.blocks_per_request.count(), 2u);
  EXPECT_DOUBLE_EQ(a.blocks_per_request.mean(), 1.5);
  EXPECT_EQ(rep.blocks_per_request.max(), 3u);  // request 0: alpha 0, 1 and beta 9
  EXPECT_EQ(rep.scan.requests, 2u);
  EXPECT_EQ(rep.processes.at(5).requests, 2u);
  ASSERT_EQ(rep.timeline.size(), 3u);
  EXPECT_EQ(rep.timeline[0].by_source[0], 2u);
  EXPECT_EQ(rep.timeline[1].by_source[0], 1u);
  EXPECT_EQ(rep.timeline[2].by_source[3], 1u);
  const auto j = rep.ToJson();
  EXPECT_EQ(j["requests"]["blocks_per_request"]["max"], 3);
  EXPECT_NE(rep.ToText().find("alpha"), std::string::npos);
}

TEST(TraceReport, ClearErrorForSomethingThatIsNotATrace) {
  const std::string path = Temp("csv");
  WriteAll(path, "1,2,3\n");
  auto r = BuildTraceReport(path);
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.status().message().find("not a pacsetfs trace"), std::string::npos);
}

// ---- engine marks, compare, weights: a real packed forest ----

struct Packed {
  Forest forest;
  RowMatrix rows;
  std::string pac, csv;
};

Packed MakePacked(const std::string& name) {
  testing::RandomForestSpec spec;
  spec.flavor = testing::Flavor::kSklearnProba;
  spec.trees = 12;
  spec.max_depth = 10;
  spec.features = 8;
  Packed p;
  p.forest = testing::MakeRandomForest(spec);
  p.rows = testing::MakeAdversarialRows(p.forest, 60, 3);
  PackOptions po;
  po.block_size = 4096;
  p.pac = Temp(name + ".pac");
  EXPECT_TRUE(PackForestToFile(p.forest, po, p.pac).ok());
  p.csv = Temp(name + ".csv");
  std::string text;
  for (size_t r = 0; r < p.rows.num_rows; ++r) {
    for (size_t c = 0; c < p.rows.num_cols; ++c) {
      if (c) text += ',';
      AppendNumber(text, p.rows.row(r)[c], false);
    }
    text += '\n';
  }
  WriteAll(p.csv, text);
  return p;
}

TEST(PredictMarks, MarkingEveryRowChangesNoPredictionAndMarksEachRowOnce) {
  Packed p = MakePacked("marks");
  PredictOptions o;
  o.model = p.pac;
  o.input = p.csv;
  o.output = Temp("plain.csv");
  ASSERT_TRUE(RunPredict(o).ok());
  for (int threads : {1, 3}) {
    for (const char* unit : {"row", "batch"}) {
      PredictOptions m = o;
      m.output = Temp("marked.csv");
      m.mark_requests = unit;
      m.marks_file = Temp("marks.bin");
      m.threads = threads;
      unlink(m.marks_file.c_str());
      ASSERT_TRUE(RunPredict(m).ok());
      EXPECT_EQ(ReadAll(m.output), ReadAll(o.output)) << unit << " " << threads;
      uint64_t skipped = 0;
      auto marks = ReadRequestMarks(m.marks_file, &skipped).value();
      EXPECT_EQ(skipped, 0u);
      const size_t requests = std::string(unit) == "row" ? p.rows.num_rows : 1;
      ASSERT_EQ(marks.size(), 2 * requests);
      std::set<uint64_t> begun;
      for (const auto& r : marks)
        if (r.type == TraceRecordType::kRequestBegin) begun.insert(r.first_row);
      EXPECT_EQ(begun.size(), requests);
      EXPECT_EQ(marks[0].tgid, static_cast<uint32_t>(getpid()));
    }
  }
  PredictOptions bad = o;
  bad.mark_requests = "row";
  EXPECT_EQ(RunPredict(bad).code(), StatusCode::kInvalidArgument);  // no marks file
}

// A trace exactly as pacsetfs would record `predict --mark-requests row
// --evict-between-rows`: every request reads the blocks its row's paths touch.
std::string ColdTraceOf(const Packed& p, const std::string& name) {
  auto engine = PacEngine::Open(p.pac).value();
  TraceBuilder b;
  b.Name(1, "forest");
  TraceRecord info;
  info.type = TraceRecordType::kForestInfo;
  info.forest = 1;
  info.generation = 1;
  info.header_checksum = engine->file().header().checksum;
  info.block = engine->file().header().block_count;
  info.bytes = 4096;
  b.Add(info);
  uint64_t t = 10;
  std::vector<uint64_t> touched;
  for (size_t r = 0; r < p.rows.num_rows; ++r) {
    EXPECT_TRUE(engine->TouchedBlocks(p.rows.row(r), &touched).ok());
    b.Mark(true, r, t++, 7, 7, r, 1);
    for (uint64_t blk : touched) b.Access(1, blk, t++, 7, TraceSource::kCache);
    b.Mark(false, r, t++, 7, 7, r, 1);
  }
  return b.Save(name);
}

TEST(CompareTrace, ColdRequestsMatchTheAnalyticalCountExactly) {
  Packed p = MakePacked("compare");
  const std::string trace = ColdTraceOf(p, "compare.trace");
  auto c = CompareTrace({trace, p.pac, p.csv, ""}).value();
  EXPECT_EQ(c.requests.size(), p.rows.num_rows);
  EXPECT_DOUBLE_EQ(c.measured.mean(), c.analytical.mean());
  EXPECT_EQ(c.totals.matched, c.totals.analytical);
  EXPECT_EQ(c.totals.unexplained_missing, 0u);
  EXPECT_TRUE(c.checksum_verified);
  // Another file is refused.
  Packed other = MakePacked("compare_other");
  PackOptions po;
  po.block_size = 4096;
  po.layout = LayoutKind::kDfs;
  ASSERT_TRUE(PackForestToFile(p.forest, po, other.pac).ok());
  auto bad = CompareTrace({trace, other.pac, p.csv, ""});
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.status().message().find("is not the file traced"), std::string::npos);
  auto unknown = CompareTrace({trace, p.pac, p.csv, "nosuch"});
  ASSERT_FALSE(unknown.ok());
  EXPECT_NE(unknown.status().message().find("no forest named 'nosuch'"), std::string::npos);
}

TEST(TraceWeights, FlowIsConservedAndOnlyReadBlocksGetWeight) {
  Packed p = MakePacked("weights");
  const std::string trace = ColdTraceOf(p, "weights.trace");
  Forest f = p.forest;
  TraceWeightsReport rep;
  ASSERT_TRUE(ApplyTraceWeights(f, {trace, p.pac, ""}, &rep).ok());
  EXPECT_EQ(f.cardinality_source, CardinalitySource::kTrace);
  EXPECT_EQ(rep.requests_used, p.rows.num_rows);
  auto pac = PacFile::Open(p.pac).value();
  auto blocks = MapNodesToBlocks(f, *pac).value();
  std::set<uint64_t> read;
  auto engine = PacEngine::Open(p.pac).value();
  std::vector<uint64_t> touched;
  for (size_t r = 0; r < p.rows.num_rows; ++r) {
    ASSERT_TRUE(engine->TouchedBlocks(p.rows.row(r), &touched).ok());
    read.insert(touched.begin(), touched.end());
  }
  for (size_t t = 0; t < f.num_trees(); ++t) {
    const uint64_t base = f.tree_offset[t];
    EXPECT_NEAR(f.cardinality[base], static_cast<double>(p.rows.num_rows), 1e-6);
    for (uint64_t g = base; g < f.tree_offset[t + 1]; ++g) {
      if (f.left_child[g] >= 0) {
        EXPECT_NEAR(f.cardinality[g],
                    f.cardinality[base + f.left_child[g]] + f.cardinality[base + f.right_child[g]],
                    1e-6 * p.rows.num_rows);
      }
      if (f.cardinality[g] > 0 && blocks[g] != kNodeWithoutBlock) {
        EXPECT_TRUE(read.count(blocks[g]));
      }
    }
  }
}

TEST(TraceWeights, RefusesAPacOfAnotherModel) {
  Packed p = MakePacked("weights_a");
  testing::RandomForestSpec spec;
  spec.seed = 99;
  Forest other = testing::MakeRandomForest(spec);
  const std::string trace = ColdTraceOf(p, "weights_a.trace");
  auto s = ApplyTraceWeights(other, {trace, p.pac, ""}, nullptr);
  ASSERT_FALSE(s.ok());
  EXPECT_NE(s.message().find("not packed from this model"), std::string::npos) << s.ToString();
  Forest f = p.forest;
  EXPECT_FALSE(ApplyTraceWeights(f, {trace, "", ""}, nullptr).ok());  // --traced-pac missing
}

// ---- HTML ----

TEST(TraceHtml, HeatMapHasOneCellPerBlockAndMarksTheRegions) {
  ForestReport f;
  f.name = "f";
  f.block_count = 100;
  f.blocks[0].demand = 5;
  f.blocks[3].demand = 50;
  PacRegions regions;
  regions.metadata_blocks = 1;
  regions.bin_blocks = 2;
  regions.node_blocks = 80;
  regions.block_count = 100;
  const std::string svg = HeatMapSvg(f, &regions);
  size_t cells = 0;
  for (size_t at = svg.find("<title>block "); at != std::string::npos;
       at = svg.find("<title>block ", at + 1))
    ++cells;
  EXPECT_EQ(cells, 100u);
  EXPECT_NE(svg.find("block 1 (bins"), std::string::npos);
  EXPECT_NE(svg.find("block 0 (metadata"), std::string::npos);
  EXPECT_NE(svg.find("block 90 (leaf ids"), std::string::npos);
  EXPECT_EQ(svg.rfind("</svg>"), svg.size() - 6);
}

}  // namespace
}  // namespace pacset
