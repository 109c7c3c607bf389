// FaultReadahead (fs/internal/fault_readahead.h): what the daemon reads
// ahead for a page-faulting reader, along the layout of a real packed
// forest, and the caps on what read-aheads may hold.
#include "fs/internal/fault_readahead.h"

#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "layout/pac_file.h"
#include "layout/pack.h"
#include "testkit/random_forest.h"
#include "util/atomic_file.h"
#include "util/file_io.h"

namespace pacset {
namespace fs_internal {
namespace {

constexpr uint32_t kBs = 4096;
constexpr fuse_ino_t kIno = 16;

// A random forest packed at 4 KiB with bins: its block 0 and header.
struct PackedForest {
  std::string block0;
  PacHeader header;
};

const PackedForest& Packed() {
  static const PackedForest p = [] {
    testing::RandomForestSpec spec;
    spec.trees = 60;
    spec.max_depth = 12;
    spec.split_probability = 0.95;
    PackOptions po;
    po.block_size = kBs;
    po.bin_depth = 3;
    auto dir = TempDir::Create("pacset-fault-ra");
    EXPECT_TRUE(dir.ok());
    const std::string path = (*dir)->path() + "/f.pac";
    EXPECT_TRUE(PackForestToFile(testing::MakeRandomForest(spec), po, path).ok());
    auto file = PacFile::Open(path);
    EXPECT_TRUE(file.ok()) << file.status().ToString();
    PackedForest out;
    out.header = (*file)->header();
    auto bytes = ReadWholeFile(path);
    EXPECT_TRUE(bytes.ok());
    out.block0 = bytes->substr(0, kBs);
    return out;
  }();
  return p;
}

FaultReadahead::Options Opts() {
  FaultReadahead::Options o;
  o.chunk_bytes = 256 << 10;  // 64 blocks
  o.max_bins_bytes = 16 << 20;
  o.max_bytes_per_user = 8 << 20;
  o.max_bytes = 12 << 20;
  o.mounting_uid = 1000;
  return o;
}

uint64_t NodeEnd(const PacHeader& h) { return h.node_first_block + h.node_block_count; }

TEST(FaultReadahead, ReadsNothingAheadBeforeItKnowsTheLayoutOrWhenOff) {
  const PackedForest& p = Packed();
  const uint64_t bins = p.header.node_first_block;
  FaultReadahead ra(Opts());
  EXPECT_EQ(ra.PlanFor(kIno, 0, bins, bins, 0).count, 0u);
  FaultReadahead::Options off = Opts();
  off.chunk_bytes = 0;
  FaultReadahead none(off);
  none.Learn(kIno, p.block0, kBs, p.header.block_count);
  EXPECT_FALSE(none.Knows(kIno));
  EXPECT_EQ(none.PlanFor(kIno, 0, bins, bins, 0).count, 0u);
  // Not a header: no layout, nothing ahead.
  FaultReadahead garbage(Opts());
  garbage.Learn(kIno, std::string(kBs, 'x'), kBs, p.header.block_count);
  EXPECT_FALSE(garbage.Knows(kIno));
}

TEST(FaultReadahead, TheFirstFaultInTheBinsReadsThemAllOncePerDrop) {
  const PackedForest& p = Packed();
  ASSERT_GT(p.header.bin_block_count, 1u);
  FaultReadahead ra(Opts());
  ra.Learn(kIno, p.block0, kBs, p.header.block_count);
  ASSERT_TRUE(ra.Knows(kIno));
  const uint64_t first = p.header.node_first_block;
  FaultReadahead::Plan plan = ra.PlanFor(kIno, 0, first + 1, first + 1, 0);
  EXPECT_EQ(plan.first, first);
  EXPECT_EQ(plan.count, p.header.bin_block_count);
  // Any later fault in the bins: already read.
  EXPECT_EQ(ra.PlanFor(kIno, 0, first, first, 0).count, 0u);
  // After a drop the bins are cold again.
  EXPECT_EQ(ra.PlanFor(kIno, 0, first, first, 1).count, p.header.bin_block_count);
  // The metadata blocks are read exactly (an engine opening the forest).
  for (uint64_t b = 0; b < first; ++b) EXPECT_EQ(ra.PlanFor(kIno, 0, b, b, 1).count, 0u);
}

TEST(FaultReadahead, TheFirstFaultInAChunkReadsItWithinItsRegionOncePerDrop) {
  const PackedForest& p = Packed();
  FaultReadahead ra(Opts());
  ra.Learn(kIno, p.block0, kBs, p.header.block_count);
  const uint64_t r = p.header.node_first_block + p.header.bin_block_count;  // residual region
  const uint64_t node_end = NodeEnd(p.header);
  ASSERT_GT(node_end, r + 64 + 10);
  // Chunks of 64 blocks, aligned to the residual region's start.
  FaultReadahead::Plan plan = ra.PlanFor(kIno, 0, r + 70, r + 70, 0);
  EXPECT_EQ(plan.first, r + 64);
  EXPECT_EQ(plan.count, std::min<uint64_t>(64, node_end - (r + 64)));
  EXPECT_EQ(ra.PlanFor(kIno, 0, r + 64, r + 64, 0).count, 0u);  // read already
  plan = ra.PlanFor(kIno, 0, r + 3, r + 3, 0);                  // before it: its own chunk
  EXPECT_EQ(plan.first, r);
  EXPECT_EQ(plan.count, 64u);
  // The last chunk of the node region ends with it; what follows (the leaf
  // ids) has chunks of its own, within the file.
  const uint64_t last_chunk = r + (node_end - 1 - r) / 64 * 64;
  plan = ra.PlanFor(kIno, 0, node_end - 1, node_end - 1, 0);
  EXPECT_EQ(plan.first, last_chunk);
  EXPECT_EQ(plan.first + plan.count, node_end);
  ASSERT_GT(p.header.block_count, node_end);
  plan = ra.PlanFor(kIno, 0, node_end, node_end, 0);
  EXPECT_EQ(plan.first, node_end);
  EXPECT_EQ(plan.count, std::min<uint64_t>(64, p.header.block_count - node_end));
  // After a drop, cold again.
  EXPECT_EQ(ra.PlanFor(kIno, 0, r + 64, r + 64, 1).first, r + 64);
}

TEST(FaultReadahead, AFileLargerThanTheBoundGetsItsBinsReadAheadButNoChunks) {
  const PackedForest& p = Packed();
  const uint64_t first = p.header.node_first_block;
  const uint64_t r = first + p.header.bin_block_count;
  ASSERT_GT(NodeEnd(p.header), r + 1);
  const uint64_t file_bytes = p.header.block_count * kBs;
  FaultReadahead::Options o = Opts();
  o.max_file_bytes = file_bytes - kBs;  // one block too small
  FaultReadahead large(o);
  large.Learn(kIno, p.block0, kBs, p.header.block_count);
  ASSERT_TRUE(large.Knows(kIno));
  EXPECT_EQ(large.PlanFor(kIno, 0, first, first, 0).count, p.header.bin_block_count);
  EXPECT_EQ(large.PlanFor(kIno, 0, r + 1, r + 1, 0).count, 0u);
  EXPECT_EQ(large.PlanFor(kIno, 0, NodeEnd(p.header), NodeEnd(p.header), 0).count, 0u);
  o.max_file_bytes = file_bytes;  // exactly the bound: chunks
  FaultReadahead small(o);
  small.Learn(kIno, p.block0, kBs, p.header.block_count);
  EXPECT_EQ(small.PlanFor(kIno, 0, r + 1, r + 1, 0).first, r);
}

TEST(FaultReadahead, WhatReadAheadsHoldIsCappedPerUserAndInTotalUntilReleased) {
  const PackedForest& p = Packed();
  FaultReadahead::Options o = Opts();
  o.chunk_bytes = 64 << 10;  // chunks of 16 blocks, 64 KiB
  o.max_bytes_per_user = 128 << 10;
  o.max_bytes = 192 << 10;
  FaultReadahead ra(o);
  ra.Learn(kIno, p.block0, kBs, p.header.block_count);
  const uint64_t r = p.header.node_first_block + p.header.bin_block_count;
  ASSERT_GT(NodeEnd(p.header), r + 16 * 8);
  auto chunk = [&](uint32_t uid, int i) {
    return ra.PlanFor(kIno, uid, r + 16 * i, r + 16 * i, 0);
  };
  std::vector<FaultReadahead::Plan> held;
  held.push_back(chunk(2000, 0));
  held.push_back(chunk(2000, 1));
  ASSERT_EQ(held[0].count, 16u);
  ASSERT_EQ(held[1].count, 16u);
  EXPECT_EQ(ra.held_bytes_of(2000), 128u << 10);
  EXPECT_EQ(chunk(2000, 2).count, 0u);  // over the user's cap: the fault alone
  held.push_back(chunk(2001, 2));  // another user: within the total (the chunk is still unread)
  EXPECT_EQ(held.back().count, 16u);
  EXPECT_EQ(chunk(2002, 3).count, 0u);  // over the total
  // Root and the mounting user have a budget of their own.
  FaultReadahead::Plan mine = chunk(1000, 4);
  EXPECT_EQ(mine.count, 16u);
  EXPECT_EQ(ra.held_bytes(), (192u + 64) << 10);
  EXPECT_EQ(ra.totals().refused, 2u);
  // A push done (its holds gone) gives the bytes back.
  held.clear();
  EXPECT_EQ(ra.held_bytes_of(2000), 0u);
  EXPECT_EQ(ra.held_bytes(), 64u << 10);
  EXPECT_EQ(chunk(2000, 5).count, 16u);
  EXPECT_EQ(ra.totals().peak_bytes_of_one_user, 128u << 10);
  EXPECT_EQ(ra.totals().peak_bytes_capped, 192u << 10);
}

}  // namespace
}  // namespace fs_internal
}  // namespace pacset
