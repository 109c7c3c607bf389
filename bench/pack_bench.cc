// Packing speed: nodes per second for growing forests, per layout.
//
//   pack_bench [--max-nodes N]
//
// Forests are random (testkit/random_forest.h): deep scikit-learn-like trees
// with one-hot leaves. Times cover layout + encoding into memory; the
// baseline printed first is a plain memcpy of the same number of bytes, to
// read the figures against on a noisy machine.
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include "layout/pack.h"
#include "testkit/random_forest.h"

namespace {

double Seconds(std::chrono::steady_clock::time_point t0) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}

}  // namespace

int main(int argc, char** argv) {
  uint64_t max_nodes = 16u << 20;
  for (int i = 1; i + 1 < argc; ++i)
    if (std::strcmp(argv[i], "--max-nodes") == 0)
      max_nodes = std::strtoull(argv[i + 1], nullptr, 10);
  std::printf("%12s %-10s %10s %10s %12s %14s\n", "nodes", "layout", "layout s", "encode s",
              "Mnodes/s", "vs memcpy");
  for (uint64_t target = 1u << 20; target <= max_nodes; target *= 4) {
    pacset::testing::RandomForestSpec spec;
    spec.flavor = pacset::testing::Flavor::kSklearnProba;
    spec.outputs = 10;
    spec.max_depth = 18;
    spec.split_probability = 0.75;  // about 1.5 children per node: trees of ~10^3..10^4 nodes
    spec.trees = 64;
    // Size the tree count from a sample so the forest is about `target` nodes.
    pacset::Forest f = pacset::testing::MakeRandomForest(spec);
    const double per_tree = static_cast<double>(f.num_nodes()) / spec.trees;
    spec.trees = static_cast<int>(target / std::max(1.0, per_tree)) + 1;
    f = pacset::testing::MakeRandomForest(spec);
    const uint64_t nodes = f.num_nodes();
    // Baseline: copying 16 bytes per node.
    std::vector<char> src(nodes * 16, 1), dst(nodes * 16);
    auto t0 = std::chrono::steady_clock::now();
    std::memcpy(dst.data(), src.data(), src.size());
    const double copy_s = Seconds(t0);
    for (pacset::LayoutKind k :
         {pacset::LayoutKind::kDfs, pacset::LayoutKind::kBlockWdfs, pacset::LayoutKind::kPacset}) {
      pacset::PackOptions o;
      o.layout = k;
      pacset::PackReport r;
      t0 = std::chrono::steady_clock::now();
      auto bytes = pacset::PackForestToBuffer(f, o, &r);
      const double s = Seconds(t0);
      if (!bytes.ok()) {
        std::fprintf(stderr, "%s\n", bytes.status().ToString().c_str());
        return 1;
      }
      std::printf("%12llu %-10s %10.3f %10.3f %12.2f %13.0fx\n",
                  static_cast<unsigned long long>(nodes), pacset::LayoutKindName(k),
                  r.layout_seconds, r.encode_seconds, nodes / s / 1e6, s / copy_s);
    }
  }
  return 0;
}
