// The packer and the engine: every layout, block size, bin depth and node
// format predicts exactly what the in-memory forest predicts.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <set>

#include <nlohmann/json.hpp>

#include "engine/blocks_per_row.h"
#include "engine/engine.h"
#include "layout/pack.h"
#include "model/predict.h"
#include "testkit/random_forest.h"
#include "tests/expect_exact.h"
#include "tests/flavor_params.h"

namespace pacset {
namespace {

using testing::ExpectSameAsInMemory;
using testing::Flavor;
using testing::MakeAdversarialRows;
using testing::MakeRandomForest;
using testing::RandomForestSpec;

std::unique_ptr<PacEngine> PackAndOpen(const Forest& f, const PackOptions& o,
                                       PackReport* report = nullptr) {
  auto bytes = PackForestToBuffer(f, o, report);
  EXPECT_TRUE(bytes.ok()) << bytes.status().ToString();
  if (!bytes.ok()) return nullptr;
  auto file = PacFile::FromBuffer(std::move(bytes).value(), "test.pac");
  EXPECT_TRUE(file.ok()) << file.status().ToString();
  if (!file.ok()) return nullptr;
  auto engine = PacEngine::FromFile(std::move(file).value());
  EXPECT_TRUE(engine.ok()) << engine.status().ToString();
  return engine.ok() ? std::move(engine).value() : nullptr;
}

class EveryLayout : public ::testing::TestWithParam<testing::FlavorCase> {};

TEST_P(EveryLayout, PredictsExactlyLikeTheInMemoryForest) {
  RandomForestSpec spec;
  spec.flavor = GetParam().flavor;
  spec.trees = 24;
  spec.max_depth = 9;
  spec.seed = 7;
  const Forest f = MakeRandomForest(spec);
  ASSERT_TRUE(f.Validate().ok()) << f.Validate().ToString();
  const RowMatrix rows = MakeAdversarialRows(f, 300, 11);
  for (LayoutKind layout : AllLayoutKinds()) {
    for (uint32_t bs : {256u, 4096u, 8192u, 65536u}) {
      for (uint32_t depth : {kChooseBins, 1u, 2u, 3u}) {
        if (!LayoutHasBins(layout) && depth != kChooseBins) continue;
        for (bool wide : {false, true}) {
          PackOptions o;
          o.layout = layout;
          o.block_size = bs;
          o.bin_depth = depth;
          o.force_wide_nodes = wide;
          auto e = PackAndOpen(f, o);
          ASSERT_NE(e, nullptr);
          ExpectSameAsInMemory(f, *e, rows,
                               std::string(GetParam().name) + " " + LayoutKindName(layout) +
                                   " bs " + std::to_string(bs) + " depth " +
                                   (depth == kChooseBins ? "auto" : std::to_string(depth)) +
                                   (wide ? " wide" : ""),
                               /*threads=*/2);
        }
      }
    }
  }
}

INSTANTIATE_TEST_SUITE_P(Flavors, EveryLayout, testing::AllFlavors(), testing::FlavorCaseName);

TEST(Pack, IsDeterministic) {
  const Forest f = MakeRandomForest({});
  PackOptions o;
  o.block_size = 4096;
  auto a = PackForestToBuffer(f, o), b = PackForestToBuffer(f, o);
  ASSERT_TRUE(a.ok() && b.ok());
  EXPECT_EQ(*a, *b);
}

TEST(Pack, ChoosesCompactNodesForFloat32ForestsAndWideForFloat64Thresholds) {
  PackReport r;
  ASSERT_NE(PackAndOpen(MakeRandomForest({}), PackOptions{}, &r), nullptr);
  EXPECT_EQ(r.node_format, NodeFormat::kCompact16);
  EXPECT_EQ(r.node_format_reason, "");
  RandomForestSpec spec;
  spec.flavor = Flavor::kLightgbm;
  ASSERT_NE(PackAndOpen(MakeRandomForest(spec), PackOptions{}, &r), nullptr);
  EXPECT_EQ(r.node_format, NodeFormat::kWide32);
  EXPECT_NE(r.node_format_reason.find("float32 cannot hold"), std::string::npos);
}

TEST(Pack, Float64ForestWithFloat32ThresholdsStaysCompactAndExact) {
  RandomForestSpec spec;
  spec.flavor = Flavor::kLightgbm;
  Forest f = MakeRandomForest(spec);
  for (auto& t : f.threshold) t = static_cast<float>(t);
  PackReport r;
  auto e = PackAndOpen(f, PackOptions{}, &r);
  ASSERT_NE(e, nullptr);
  EXPECT_EQ(r.node_format, NodeFormat::kCompact16);
  ExpectSameAsInMemory(f, *e, MakeAdversarialRows(f, 200, 3), "float32-valued float64 thresholds",
                       /*threads=*/2);
}

TEST(Pack, InlinesXgboostLeavesAndOneHotClassLeaves) {
  PackReport r;
  const Forest xgb = MakeRandomForest({});
  ASSERT_NE(PackAndOpen(xgb, PackOptions{}, &r), nullptr);
  EXPECT_EQ(r.num_leaf_records, 0u);
  EXPECT_GT(r.inlined_leaves, 0u);
  RandomForestSpec spec;
  spec.flavor = Flavor::kSklearnProba;
  ASSERT_NE(PackAndOpen(MakeRandomForest(spec), PackOptions{}, &r), nullptr);
  EXPECT_GT(r.inlined_leaves, 0u);    // pure leaves become class ids
  EXPECT_GT(r.num_leaf_records, 0u);  // impure ones are records
}

TEST(Pack, RejectsBadBlockSizesAndBinDepths) {
  const Forest f = MakeRandomForest({});
  PackOptions o;
  o.block_size = 3000;
  EXPECT_EQ(PackForestToBuffer(f, o).status().code(), StatusCode::kInvalidArgument);
  o.block_size = 128;
  EXPECT_FALSE(PackForestToBuffer(f, o).ok());
  o.block_size = 2u << 20;
  EXPECT_FALSE(PackForestToBuffer(f, o).ok());
  o.block_size = 4096;
  o.bin_depth = 17;
  EXPECT_FALSE(PackForestToBuffer(f, o).ok());
  o.bin_depth = kChooseBins;
  o.trees_per_bin = (1u << 24) + 1;
  EXPECT_FALSE(PackForestToBuffer(f, o).ok());
}

TEST(Pack, RejectsLeafVectorsLargerThanABlock) {
  RandomForestSpec spec;
  spec.flavor = Flavor::kSklearnProba;
  spec.outputs = 600;  // 4800-byte leaf vectors
  spec.trees = 2;
  const Forest f = MakeRandomForest(spec);
  PackOptions o;
  o.block_size = 4096;
  auto r = PackForestToBuffer(f, o);
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.status().message().find("larger --block-size"), std::string::npos);
  o.block_size = 8192;
  EXPECT_TRUE(PackForestToBuffer(f, o).ok());
}

// The first block of the node region holds the bin: every tree's root.
TEST(InterleavedBins, StripeTheRootsOfAllTreesOfABinIntoOneBlock) {
  RandomForestSpec spec;
  spec.trees = 60;
  const Forest f = MakeRandomForest(spec);
  PackOptions o;
  o.block_size = 4096;  // 255 node slots: 60 trees x 3 nodes fit
  o.bin_depth = 2;
  o.trees_per_bin = kTreesPerBinFit;
  auto e = PackAndOpen(f, o);
  ASSERT_NE(e, nullptr);
  const PacHeader& h = e->file().header();
  EXPECT_EQ(h.trees_per_bin, 60u);
  std::set<uint64_t> root_blocks;
  for (const TreeRecord& t : e->file().trees())
    if (t.root_kind == 0) root_blocks.insert(t.root * 16 / h.block_size);
  EXPECT_EQ(root_blocks, std::set<uint64_t>{h.node_first_block});
}

TEST(InterleavedBins, StartANewBinWhenTheBlockIsFull) {
  RandomForestSpec spec;
  spec.trees = 200;  // 200 x 3 nodes > 255 slots
  const Forest f = MakeRandomForest(spec);
  PackOptions o;
  o.block_size = 4096;
  o.bin_depth = 2;
  o.trees_per_bin = kTreesPerBinFit;
  PackReport r;
  auto e = PackAndOpen(f, o, &r);
  ASSERT_NE(e, nullptr);
  EXPECT_GE(r.num_bins, 3u);
  // Each bin starts its own block: the roots sit in exactly num_bins blocks.
  const PacHeader& h = e->file().header();
  std::set<uint64_t> root_blocks;
  for (const TreeRecord& t : e->file().trees())
    if (t.root_kind == 0) root_blocks.insert(t.root * 16 / h.block_size);
  EXPECT_EQ(root_blocks.size(), r.num_bins);
}

TEST(InterleavedBins, HonourAnExplicitTreesPerBin) {
  RandomForestSpec spec;
  spec.trees = 30;
  PackOptions o;
  o.block_size = 4096;
  o.trees_per_bin = 10;
  PackReport r;
  ASSERT_NE(PackAndOpen(MakeRandomForest(spec), o, &r), nullptr);
  EXPECT_EQ(r.num_bins, 3u);
  EXPECT_EQ(r.trees_per_bin, 10u);
}

// A hand-made forest where cardinalities decide the order.
Forest SkewedChain() {
  Forest f;
  f.num_features = 1;
  f.base_score = {0};
  f.cardinality_source = CardinalitySource::kTraining;
  // root(100) -> left leaf(10), right node(90) -> left node(80) -> ... leaves
  const uint64_t b = f.AddTree(0, 7);
  auto split = [&](int i, int l, int r, double c) {
    f.left_child[b + i] = l;
    f.right_child[b + i] = r;
    f.threshold[b + i] = static_cast<float>(i);
    f.cardinality[b + i] = c;
  };
  split(0, 1, 2, 100);
  f.cardinality[b + 1] = 10;
  split(2, 3, 4, 90);
  split(3, 5, 6, 80);
  f.cardinality[b + 4] = 10;
  f.cardinality[b + 5] = 30;
  f.cardinality[b + 6] = 50;
  return f;
}

TEST(Wdfs, PlacesTheHeavierChildFirst) {
  const Forest f = SkewedChain();
  PackOptions o;
  o.layout = LayoutKind::kWdfs;
  o.block_size = 4096;
  auto e = PackAndOpen(f, o);
  ASSERT_NE(e, nullptr);
  // Root at the start of the node region; its heavier (right) child right after it.
  const PacHeader& h = e->file().header();
  const uint64_t first = h.node_first_block * h.block_size / 16;
  EXPECT_EQ(e->file().trees()[0].root, first);
  CompactNode root;
  std::memcpy(&root, e->file().data() + first * 16, 16);
  EXPECT_EQ(root.right, first + 1);
  o.layout = LayoutKind::kDfs;
  e = PackAndOpen(f, o);
  std::memcpy(&root, e->file().data() + first * 16, 16);
  // dfs: the left child is a leaf (inlined), so the right child is still next.
  EXPECT_EQ(root.right, first + 1);
}

// Block-aligned WDFS: a block boundary restarts from the hottest unplaced
// subtree of the whole forest, so cold nodes end up at the end.
TEST(BlockAlignedWdfs, RestartsAtBlockBoundaryFromTheHottestSubtree) {
  RandomForestSpec spec;
  spec.trees = 40;
  spec.max_depth = 12;
  spec.split_probability = 0.95;
  Forest f = MakeRandomForest(spec);
  const RowMatrix rows = MakeAdversarialRows(f, 400, 5);
  CalibrateCardinality(f, rows);  // weights that match the traffic below
  for (LayoutKind k : {LayoutKind::kBlockWdfs, LayoutKind::kPacset}) {
    PackOptions o;
    o.layout = k;
    o.block_size = 4096;
    auto bytes = PackForestToBuffer(f, o);
    ASSERT_TRUE(bytes.ok());
    auto file = PacFile::FromBuffer(std::move(bytes).value(), "x");
    ASSERT_TRUE(file.ok());
    // Mean access probability of the nodes in each block must not increase
    // much from one block to the next: hot blocks first, cold blocks last.
    const PacHeader& h = (*file)->header();
    auto engine = PacEngine::FromFile(std::move(file).value());
    ASSERT_TRUE(engine.ok());
    std::vector<double> hits(h.block_count, 0);
    std::vector<uint64_t> touched;
    for (size_t r = 0; r < rows.num_rows; ++r) {
      ASSERT_TRUE((*engine)->TouchedBlocks(rows.row(r), &touched).ok());
      for (uint64_t b : touched) hits[b] += 1;
    }
    const uint64_t first = h.node_first_block + h.bin_block_count;
    const uint64_t last = h.node_first_block + h.node_block_count - 1;
    ASSERT_GT(last, first + 6) << "need several residual blocks";
    EXPECT_GT(hits[first] + hits[first + 1] + hits[first + 2],
              2 * (hits[last] + hits[last - 1] + hits[last - 2]))
        << LayoutKindName(k);
  }
}

TEST(AnalyticalCount, PacsetTouchesFewerBlocksThanDfsAndBfsOnSkewedTrees) {
  RandomForestSpec spec;
  spec.trees = 64;
  spec.max_depth = 16;
  spec.split_probability = 0.9;
  const Forest f = MakeRandomForest(spec);
  const RowMatrix rows = MakeAdversarialRows(f, 200, 9);
  std::map<LayoutKind, double> mean;
  for (LayoutKind k : {LayoutKind::kBfs, LayoutKind::kDfs, LayoutKind::kPacset}) {
    PackOptions o;
    o.layout = k;
    o.block_size = 4096;
    auto e = PackAndOpen(f, o);
    ASSERT_NE(e, nullptr);
    std::vector<uint64_t> touched;
    double sum = 0;
    for (size_t r = 0; r < rows.num_rows; ++r) {
      ASSERT_TRUE(e->TouchedBlocks(rows.row(r), &touched).ok());
      sum += touched.size();
    }
    mean[k] = sum / rows.num_rows;
  }
  EXPECT_LT(mean[LayoutKind::kPacset], mean[LayoutKind::kDfs]);
  EXPECT_LT(mean[LayoutKind::kPacset], mean[LayoutKind::kBfs]);
}

TEST(Engine, RefusesRowsOfTheWrongWidth) {
  const Forest f = MakeRandomForest({});
  auto e = PackAndOpen(f, PackOptions{});
  RowMatrix rows;
  rows.num_cols = f.num_features + 1;
  rows.num_rows = 1;
  rows.values.assign(rows.num_cols, 0.0);
  std::vector<double> out;
  EXPECT_EQ(e->PredictAll(rows, false, 1, &out).code(), StatusCode::kInvalidArgument);
}

TEST(Engine, LeafIdsNeedTheLeafIdSection) {
  const Forest f = MakeRandomForest({});
  PackOptions o;
  o.leaf_ids = false;
  auto e = PackAndOpen(f, o);
  RowMatrix rows = MakeAdversarialRows(f, 3, 1);
  std::vector<int32_t> leaves;
  EXPECT_EQ(e->PredictLeaves(rows, 1, &leaves).code(), StatusCode::kNotSupported);
  std::vector<double> out;
  EXPECT_TRUE(e->PredictAll(rows, false, 1, &out).ok());
}

// ---- Choosing the bin parameters (layout/pack_bin_choice.cc) ----

// With one tree and weights counted on the very rows routed, the expected
// blocks per row has nothing left to approximate: it must equal the mean of
// the blocks the engine actually touches for those rows (an independent
// count: the engine walks the packed file).
// Categorical splits are nodes like any other: weights, placement and the
// count route them as the engine does.
TEST(BinChoice, EstimateEqualsTheEngineCountForOneTreeCalibratedOnTheRows) {
  for (auto [flavor, categorical] : {std::pair{Flavor::kXgboost, 0.0},
                                     {Flavor::kSklearnProba, 0.0},
                                     {Flavor::kXgboost, 0.5},
                                     {Flavor::kLightgbm, 0.5}}) {
    RandomForestSpec spec;
    spec.flavor = flavor;
    spec.categorical_probability = categorical;
    spec.outputs = 12;  // sklearn: 96-byte leaf records, often not in their parent's block
    spec.trees = 1;
    spec.max_depth = 16;
    spec.split_probability = 0.9;
    spec.seed = 5;
    Forest f = MakeRandomForest(spec);
    const RowMatrix rows = MakeAdversarialRows(f, 500, 4);
    CalibrateCardinality(f, rows);
    for (LayoutKind layout : {LayoutKind::kPacset, LayoutKind::kBinDfs, LayoutKind::kBfs,
                              LayoutKind::kBlockWdfs, LayoutKind::kBinBlockWdfs}) {
      for (uint32_t depth : {kChooseBins, 1u, 3u}) {
        if (!LayoutHasBins(layout) && depth != kChooseBins) continue;
        PackOptions o;
        o.layout = layout;
        o.block_size = 4096;
        o.bin_depth = depth;
        PackReport r;
        auto e = PackAndOpen(f, o, &r);
        ASSERT_NE(e, nullptr);
        auto counted = CountBlocksPerRow(*e, rows);
        ASSERT_TRUE(counted.ok());
        ASSERT_GT(e->file().header().node_block_count, 3u) << "need several blocks";
        EXPECT_NEAR(r.expected_blocks_per_row, counted->mean(), 1e-9 * counted->mean())
            << LayoutKindName(layout) << " depth " << depth << " flavor "
            << static_cast<int>(flavor) << " categorical " << categorical;
      }
    }
  }
}

// Trees deep enough for bin depths 1..8 to differ.
Forest ForestForBins(int trees, Flavor flavor = Flavor::kXgboost, int outputs = 3,
                     double categorical = 0) {
  RandomForestSpec spec;
  spec.flavor = flavor;
  spec.outputs = outputs;
  spec.trees = trees;
  spec.max_depth = 14;
  spec.split_probability = 0.9;
  spec.categorical_probability = categorical;
  return MakeRandomForest(spec);
}

TEST(BinChoice, ChoosesTheCandidateWithTheFewestExpectedBlocks) {
  const Forest f = ForestForBins(40, Flavor::kSklearnProba);
  PackOptions o;
  o.block_size = 4096;
  PackReport r;
  ASSERT_NE(PackAndOpen(f, o, &r), nullptr);
  ASSERT_GE(r.candidates.size(), 3u);
  EXPECT_TRUE(r.chose_bin_depth);
  EXPECT_TRUE(r.chose_trees_per_bin);
  const LayoutCandidate& chosen = r.candidates[r.chosen_candidate];
  for (const LayoutCandidate& c : r.candidates) EXPECT_LE(chosen.blocks_per_row, c.blocks_per_row);
  EXPECT_EQ(r.bin_depth, chosen.bin_depth);
  EXPECT_EQ(r.trees_per_bin, chosen.largest_bin);
  EXPECT_EQ(r.expected_blocks_per_row, chosen.blocks_per_row);
  // Depths are tried from 1 up, each filling blocks with as many trees as fit.
  EXPECT_EQ(r.candidates[0].bin_depth, 1u);
  EXPECT_EQ(r.candidates[0].trees_per_bin, kTreesPerBinFit);
  EXPECT_EQ(r.candidates[1].bin_depth, 2u);
}

// With rows to score on (pacset's --calibrate), every candidate's count is
// what the engine counts on the packed file for those rows, so the choice is
// the true minimum for them.
TEST(BinChoice, CountsOnScoreRowsEqualTheEngineCounts) {
  const Forest f = ForestForBins(30, Flavor::kSklearnProba, /*outputs=*/12);
  const Forest categorical = ForestForBins(30, Flavor::kXgboost, 3, /*categorical=*/0.4);
  for (const Forest* forest : {&f, &categorical}) {
    const RowMatrix rows = MakeAdversarialRows(*forest, 300, 8);
    for (LayoutKind layout : {LayoutKind::kPacset, LayoutKind::kBinBfs}) {
      PackOptions o;
      o.layout = layout;
      o.block_size = 4096;
      o.score_rows = &rows;
      PackReport r;
      ASSERT_NE(PackAndOpen(*forest, o, &r), nullptr);
      EXPECT_EQ(r.scored_rows, 300u);
      ASSERT_GE(r.candidates.size(), 3u);
      for (const LayoutCandidate& c : r.candidates) {
        PackOptions forced = o;
        forced.bin_depth = c.bin_depth;
        forced.trees_per_bin = c.trees_per_bin;
        auto e = PackAndOpen(*forest, forced);
        ASSERT_NE(e, nullptr);
        auto counted = CountBlocksPerRow(*e, rows);
        ASSERT_TRUE(counted.ok());
        EXPECT_NEAR(c.blocks_per_row, counted->mean(), 1e-9)
            << LayoutKindName(layout) << " depth " << c.bin_depth;
        EXPECT_LE(r.candidates[r.chosen_candidate].blocks_per_row, counted->mean());
      }
    }
  }
  // Many rows: counted on 2,000 of them.
  const RowMatrix many = MakeAdversarialRows(f, 2500, 9);
  PackOptions o;
  o.block_size = 4096;
  o.score_rows = &many;
  PackReport r;
  ASSERT_NE(PackAndOpen(f, o, &r), nullptr);
  EXPECT_EQ(r.scored_rows, 2000u);
  // Rows of the wrong width are refused.
  RowMatrix narrow;
  narrow.num_rows = 1;
  narrow.num_cols = f.num_features - 1;
  narrow.values.assign(narrow.num_cols, 0.0);
  o.score_rows = &narrow;
  EXPECT_EQ(PackForestToBuffer(f, o).status().code(), StatusCode::kInvalidArgument);
}

TEST(BinChoice, ForcedParametersAreKept) {
  const Forest f = ForestForBins(40);
  PackOptions o;
  o.block_size = 4096;
  o.bin_depth = 3;
  o.trees_per_bin = 7;
  PackReport r;
  auto e = PackAndOpen(f, o, &r);
  ASSERT_NE(e, nullptr);
  EXPECT_TRUE(r.candidates.empty());  // nothing to choose
  EXPECT_EQ(e->file().header().bin_depth, 3u);
  EXPECT_EQ(e->file().header().trees_per_bin, 7u);
  EXPECT_EQ(r.num_bins, 6u);
  // A forced depth: only the trees per bin are chosen, at that depth.
  o.trees_per_bin = kChooseBins;
  ASSERT_NE(PackAndOpen(f, o, &r), nullptr);
  EXPECT_FALSE(r.chose_bin_depth);
  EXPECT_TRUE(r.chose_trees_per_bin);
  for (const LayoutCandidate& c : r.candidates) EXPECT_EQ(c.bin_depth, 3u);
  // Forced trees per bin: every depth candidate uses it.
  o.bin_depth = kChooseBins;
  o.trees_per_bin = 5;
  ASSERT_NE(PackAndOpen(f, o, &r), nullptr);
  EXPECT_TRUE(r.chose_bin_depth);
  EXPECT_FALSE(r.chose_trees_per_bin);
  ASSERT_GE(r.candidates.size(), 2u);
  for (const LayoutCandidate& c : r.candidates) {
    EXPECT_EQ(c.trees_per_bin, 5u);
    EXPECT_EQ(c.num_bins, 8u);
  }
  // Layouts without bins have nothing to choose.
  o.layout = LayoutKind::kDfs;
  auto dfs = PackAndOpen(f, o, &r);
  ASSERT_NE(dfs, nullptr);
  EXPECT_TRUE(r.candidates.empty());
  EXPECT_EQ(dfs->file().header().bin_depth, 0u);
}

// The source info keeps the choice for `pacset info` (layout/FORMAT.md §4).
TEST(BinChoice, SourceInfoRecordsTheCandidatesAndTheChoice) {
  const Forest f = ForestForBins(30);
  PackOptions o;
  o.block_size = 4096;
  o.trees_per_bin = kTreesPerBinFit;
  PackReport r;
  auto e = PackAndOpen(f, o, &r);
  ASSERT_NE(e, nullptr);
  const auto info = nlohmann::json::parse(e->file().SourceInfoJson());
  EXPECT_DOUBLE_EQ(info.at("expected_blocks_per_row").get<double>(),
                   std::round(r.expected_blocks_per_row * 100) / 100);
  const auto& choice = info.at("bin_choice");
  EXPECT_EQ(choice.at("bin_depth"), "chosen");
  EXPECT_EQ(choice.at("trees_per_bin"), "forced");
  EXPECT_EQ(choice.at("weights"), "training");
  EXPECT_EQ(choice.at("chosen").get<size_t>(), r.chosen_candidate);
  ASSERT_EQ(choice.at("candidates").size(), r.candidates.size());
  for (size_t i = 0; i < r.candidates.size(); ++i) {
    const auto& c = choice.at("candidates")[i];
    EXPECT_EQ(c.at("bin_depth").get<uint32_t>(), r.candidates[i].bin_depth);
    EXPECT_EQ(c.at("trees_per_bin").get<uint32_t>(), 0u);  // fit
    EXPECT_EQ(c.at("largest_bin").get<uint32_t>(), r.candidates[i].largest_bin);
  }
}

}  // namespace
}  // namespace pacset
