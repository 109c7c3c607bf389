// SIMD walks of the warm forest (layout/internal/warm_forest.h): many rows
// through one tree at once, one row per vector lane, with gathers. Compiled
// for AVX2 and AVX-512 as separate functions (target attributes), chosen at
// run time: the library itself needs only x86-64 (or any other target, where
// only the scalar loop exists).
//
// A kernel routes by `x <= threshold` alone on float32 values and
// WarmForest::nodes32: the caller uses it only for blocks of rows without NaN
// through a forest with no LightGBM zero-as-missing node
// (WarmForest::plain_routing), where that is what GoesLeft gives
// (model/routing.h), and, for a float64-input forest, only for blocks whose
// every value float32 holds exactly (then x <= t iff x <= nodes32's t). It returns, per row, the
// leaf its walk ends on; the caller adds the leaves tree by tree, so every row still adds its trees
// in order and sums keep their bits.
#pragma once

#include <cstddef>
#include <cstdint>

#include "layout/engine.h"
#include "layout/internal/warm_forest.h"

namespace pacset::internal {

// Whether any of v[0, n) is NaN. Written as counts over 16 values so that
// the compiler vectorizes it at -O2 (a bool reduction it does not): measured
// ~10% of a warm request of 256 depth-8 trees otherwise.
template <typename T>
bool AnyNan(const T* v, size_t n) {
  size_t i = 0;
  int nan = 0;
  for (; i + 16 <= n; i += 16) {
    int c = 0;
    for (int j = 0; j < 16; ++j) c += v[i + j] != v[i + j];
    nan |= c;
  }
  for (; i < n; ++i) nan |= v[i] != v[i];
  return nan != 0;
}

// For every row r < nrows of `x`, feature-major (feature f of row r at
// x[f * nrows + r]): leaf[r] = the child reference (< 0, ~index into
// WarmForest::leaves) its walk from node `root` (>= 0) ends on. Requires
// fewer than kWarmSimdMaxNodes nodes and nrows * nf < 2^31 (gather indices
// are int32).
using WarmTreeKernel = void (*)(const WarmNode<float>* nodes, int32_t root, const float* x,
                                uint32_t nrows, int32_t* leaf);

inline constexpr uint64_t kWarmSimdMaxNodes = uint64_t{1} << 29;

// What a transposition found among the values it converted (bits).
inline constexpr uint32_t kFoundNan = 1;
// A value float32 cannot hold exactly (NaN included): a float64-input forest
// then needs the float64 compare for that block (see WarmForest::nodes32).
inline constexpr uint32_t kFoundNotFloat32 = 2;

// Rows [0, n) of `rows` (row i at rows + i * nf) as float32, feature-major
// (feature f of row i at x[f * n + i]: the layout the kernels take, where
// rows walking a tree together read the same cache lines near its root);
// returns kFoundNan | kFoundNotFloat32 bits. Requires n * nf < 2^31.
using WarmTransposeFn = uint32_t (*)(const double* rows, size_t n, uint32_t nf, float* x);

// The instruction set `requested` resolves to on this CPU, in *resolved
// (never kAuto): kAuto is the widest the CPU has unless the environment
// variable PACSET_ISA (scalar, avx2, avx512; unset, empty or auto: no cap)
// caps it; any other request is capped by what the CPU has. InvalidArgument
// when kAuto meets a PACSET_ISA value that is none of those.
Status ResolveWarmIsa(WarmIsa requested, WarmIsa* resolved);

// The kernel of `isa`; nullptr for kScalar (the portable lane loop of
// layout/warm_walk.cc).
WarmTreeKernel WarmTreeKernelFor(WarmIsa isa);
// The transposition for `isa`'s kernel: with gathers for kAvx512 and kAvx2,
// portable code otherwise. Never null.
WarmTransposeFn WarmTransposeFor(WarmIsa isa);

}  // namespace pacset::internal
