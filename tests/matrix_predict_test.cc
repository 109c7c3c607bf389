#include "engine/matrix_predict.h"

#include <gtest/gtest.h>

#include <cmath>
#include <vector>

#include "layout/pack.h"
#include "testkit/random_forest.h"

namespace pacset {
namespace {

std::unique_ptr<PacEngine> Packed(const Forest& f) {
  auto bytes = PackForestToBuffer(f, PackOptions{});
  EXPECT_TRUE(bytes.ok()) << bytes.status().ToString();
  auto file = PacFile::FromBuffer(std::move(bytes).value(), "mem.pac");
  EXPECT_TRUE(file.ok()) << file.status().ToString();
  auto engine = PacEngine::FromFile(std::move(file).value());
  EXPECT_TRUE(engine.ok()) << engine.status().ToString();
  return std::move(engine).value();
}

// Every layout of the input (float32/float64, C/Fortran order, a strided
// slice) gives the engine's own results on the same values, for any thread count.
TEST(MatrixPredict, AnyDtypeOrderAndStrideMatchesTheEngine) {
  for (auto flavor :
       {testing::Flavor::kXgboost, testing::Flavor::kSklearnProba, testing::Flavor::kLightgbm}) {
    testing::RandomForestSpec spec;
    spec.flavor = flavor;
    const Forest forest = testing::MakeRandomForest(spec);
    auto engine = Packed(forest);
    RowMatrix rows = testing::MakeAdversarialRows(forest, 700, 3);
    const bool f32_only = forest.input_precision == Precision::kFloat32;
    if (f32_only)  // float32 input must hold the values exactly to compare with float64
      for (double& v : rows.values) v = static_cast<float>(v);
    std::vector<double> want;
    ASSERT_TRUE(engine->PredictAll(rows, false, 1, &want).ok());
    std::vector<int32_t> want_leaves;
    ASSERT_TRUE(engine->PredictLeaves(rows, 1, &want_leaves).ok());
    const size_t n = rows.num_rows, nf = rows.num_cols;
    std::vector<float> c32(rows.values.begin(), rows.values.end());
    std::vector<double> fortran(n * nf), strided(n * nf * 6);
    for (size_t r = 0; r < n; ++r)
      for (size_t c = 0; c < nf; ++c) {
        fortran[c * n + r] = rows.values[r * nf + c];
        strided[(2 * r) * nf * 3 + 3 * c] = rows.values[r * nf + c];
      }
    std::vector<MatrixView> views;
    views.push_back({reinterpret_cast<const char*>(rows.values.data()), n, nf,
                     static_cast<ptrdiff_t>(nf * 8), 8, false});
    views.push_back({reinterpret_cast<const char*>(fortran.data()), n, nf, 8,
                     static_cast<ptrdiff_t>(n * 8), false});
    views.push_back({reinterpret_cast<const char*>(strided.data()), n, nf,
                     static_cast<ptrdiff_t>(2 * nf * 3 * 8), 24, false});
    if (f32_only)
      views.push_back({reinterpret_cast<const char*>(c32.data()), n, nf,
                       static_cast<ptrdiff_t>(nf * 4), 4, true});
    for (const auto& v : views) {
      for (int threads : {1, 3}) {
        std::vector<double> got(n * engine->num_columns(false));
        ASSERT_TRUE(PredictMatrix(*engine, v, false, threads, got.data()).ok());
        for (size_t i = 0; i < got.size(); ++i)
          ASSERT_TRUE(got[i] == want[i] || (std::isnan(got[i]) && std::isnan(want[i])))
              << "value " << i;
        std::vector<int32_t> leaves(n * engine->num_trees());
        ASSERT_TRUE(ApplyMatrix(*engine, v, threads, leaves.data()).ok());
        EXPECT_EQ(leaves, want_leaves);
      }
    }
  }
}

// The default source of a file's blocks, but never a warm image: every
// request walks in flight (engine/inflight_walk.cc).
class NoWarmImage final : public BlockSource {
 public:
  explicit NoWarmImage(std::unique_ptr<BlockSource> inner) : inner_(std::move(inner)) {}
  uint32_t block_size() const override { return inner_->block_size(); }
  uint64_t block_count() const override { return inner_->block_count(); }
  const char* Ready(uint64_t b) override { return inner_->Ready(b); }
  std::unique_ptr<BlockFetcher> NewFetcher() override { return inner_->NewFetcher(); }
  const char* WarmImage(uint64_t, uint64_t, uint64_t, bool) override { return nullptr; }

 private:
  std::unique_ptr<BlockSource> inner_;
};

// A caller's float32 rows in C order are read where they lie (no float64
// copy): the same bits as those values as float64 rows, for every flavor —
// float64-input forests included, whose blocks of float32 values take the
// SIMD kernels — with NaN (the scalar lanes) and without, warm (with and
// without the warm forest) and in flight, float64 and float32 outputs.
TEST(MatrixPredict, Float32RowsInCOrderGiveTheBitsOfTheSameValuesAsFloat64) {
  for (auto flavor : {testing::Flavor::kXgboost, testing::Flavor::kSklearnProba,
                      testing::Flavor::kSklearnReg, testing::Flavor::kLightgbm}) {
    testing::RandomForestSpec spec;
    spec.flavor = flavor;
    spec.trees = 40;
    spec.max_depth = 10;
    Forest forest = testing::MakeRandomForest(spec);
    if (flavor == testing::Flavor::kLightgbm)  // the rule that keeps the kernels away
      for (uint8_t& fl : forest.flags) fl &= static_cast<uint8_t>(~kZeroIsMissing);
    auto bytes = PackForestToBuffer(forest, PackOptions{});
    ASSERT_TRUE(bytes.ok()) << bytes.status().ToString();
    for (bool nan : {false, true}) {
      RowMatrix rows = testing::MakeAdversarialRows(forest, 700, 4);
      for (double& v : rows.values) {
        v = static_cast<float>(v);
        if (!nan && std::isnan(v)) v = 0.5;
      }
      const std::vector<float> c32(rows.values.begin(), rows.values.end());
      const MatrixView view{reinterpret_cast<const char*>(c32.data()),
                            rows.num_rows,
                            rows.num_cols,
                            static_cast<ptrdiff_t>(rows.num_cols * 4),
                            4,
                            true};
      std::vector<double> want;
      ASSERT_TRUE(Packed(forest)->PredictAll(rows, false, 1, &want).ok());
      for (int how = 0; how < 3; ++how) {  // warm forest, warm mapping, in flight
        EngineOptions o;
        o.warm_forest = how == 0;
        auto file = PacFile::FromBuffer(*bytes, "mem.pac");
        ASSERT_TRUE(file.ok());
        PacEngine::SourceFactory cold = [](const PacFile& f, const EngineOptions& eo) {
          return std::make_unique<NoWarmImage>(
              NewPacFileSource(f, eo.verify_blocks, eo.max_in_flight));
        };
        auto engine = PacEngine::FromFile(std::move(*file), o, how == 2 ? cold : nullptr);
        ASSERT_TRUE(engine.ok()) << engine.status().ToString();
        const std::string what = std::to_string(static_cast<int>(flavor)) + " nan " +
                                 std::to_string(nan) + " how " + std::to_string(how);
        for (int threads : {1, 3}) {
          std::vector<double> got(want.size());
          ASSERT_TRUE(PredictMatrix(**engine, view, false, threads, got.data()).ok()) << what;
          for (size_t i = 0; i < got.size(); ++i)
            ASSERT_TRUE(got[i] == want[i] || (std::isnan(got[i]) && std::isnan(want[i])))
                << what << " value " << i << ": " << got[i] << " vs " << want[i];
          std::vector<float> got32(want.size());
          ASSERT_TRUE(PredictMatrix(**engine, view, false, threads, got32.data()).ok()) << what;
          for (size_t i = 0; i < got32.size(); ++i)
            ASSERT_TRUE(got32[i] == static_cast<float>(want[i]) ||
                        (std::isnan(got32[i]) && std::isnan(want[i])))
                << what << " float value " << i;
        }
        const EngineStats st = (*engine)->stats();
        if (how == 2) {
          EXPECT_EQ(st.warm_requests, 0u) << what;
        } else {
          EXPECT_GT(st.warm_requests, 0u) << what;
        }
        if (how == 0 && !nan && st.warm_isa != WarmIsa::kScalar) {
          EXPECT_GT(st.warm_simd_rows, 0u) << what;
        }
      }
    }
  }
}

TEST(MatrixPredict, WrongWidthIsInvalidArgument) {
  const Forest forest = testing::MakeRandomForest({});
  auto engine = Packed(forest);
  std::vector<double> x(10 * (forest.num_features + 1));
  MatrixView v{reinterpret_cast<const char*>(x.data()),
               10,
               forest.num_features + 1,
               static_cast<ptrdiff_t>(8 * (forest.num_features + 1)),
               8,
               false};
  std::vector<double> out(100);
  Status s = PredictMatrix(*engine, v, false, 1, out.data());
  EXPECT_EQ(s.code(), StatusCode::kInvalidArgument);
  EXPECT_NE(s.message().find("columns"), std::string::npos);
}

TEST(PacFileFromMemory, ReadsTheCallersBytesInPlace) {
  const Forest forest = testing::MakeRandomForest({});
  auto bytes = PackForestToBuffer(forest, PackOptions{});
  ASSERT_TRUE(bytes.ok());
  auto owner = std::make_shared<std::string>(std::move(bytes).value());
  auto file = PacFile::FromMemory(owner->data(), owner->size(), owner, "mem");
  ASSERT_TRUE(file.ok()) << file.status().ToString();
  EXPECT_EQ((*file)->data(), owner->data());
  EXPECT_FALSE((*file)->mapped());
  EXPECT_FALSE(PacFile::FromMemory(owner->data(), 100, owner, "short").ok());
}

}  // namespace
}  // namespace pacset
