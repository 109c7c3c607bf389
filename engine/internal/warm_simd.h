// SIMD walks of the warm forest (engine/internal/warm_forest.h): many rows
// through one tree at once, one row per vector lane, with gathers. Compiled
// for AVX2 and AVX-512 as separate functions (target attributes), chosen at
// run time: the library itself needs only x86-64 (or any other target, where
// only the scalar loop exists).
//
// The kernels walk WarmForest::nodes32 on float32 values. Two kinds:
//   plain: routes by `x <= threshold` alone; the caller uses it only for
//     blocks of rows without NaN through a forest with no categorical node
//     and no LightGBM zero-as-missing node (WarmForest::plain_routing),
//     where that is what GoesLeft gives (model/routing.h);
//   routed: GoesLeft and CategoricalGoesLeft for any row, NaN included,
//     through a forest of WarmForest::simd_routing: NaN goes the node's
//     default direction (an ordered compare for default-left nodes, an
//     unordered one for the others); a categorical node's value becomes a
//     category by its rule and takes its bit of the split's direction words
//     (one gather), or the node's outside direction past them.
// For a float64-input forest the caller uses either only for blocks whose
// every value float32 holds (NaN included): then x <= t iff x <= nodes32's
// t, and a value's category is the same in either precision. A kernel
// returns, per row, the leaf its walk ends on; the caller adds the leaves
// tree by tree, so every row still adds its trees in order and sums keep
// their bits.
#pragma once

#include <cstddef>
#include <cstdint>

#include "engine/engine.h"
#include "engine/internal/warm_forest.h"

namespace pacset::internal {

// Whether any of v[0, n) is NaN. Written as counts over 16 values so that
// the compiler vectorizes it at -O2 (a bool reduction it does not), which a
// warm request otherwise noticeably pays for (engine/DESIGN.md, "The warm
// walk").
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

// What a kernel reads of the warm forest.
struct WarmKernelForest {
  const WarmNode<float>* nodes = nullptr;  // WarmForest::nodes32
  const uint32_t* direction_words = nullptr;
  uint32_t direction_shift = 0;
};

// For every row r < nrows of `x` (feature f of row r at x[r * nf + f]: the
// caller's own row-major float32 values where it has them): leaf[r] = the
// child reference (< 0, ~index into WarmForest::leaves) its walk from node
// `root` (>= 0) ends on. Requires fewer than kWarmSimdMaxNodes nodes and
// nrows * nf < 2^31 (gather indices are int32).
using WarmTreeKernel = void (*)(const WarmKernelForest& forest, int32_t root, const float* x,
                                uint32_t nrows, uint32_t nf, int32_t* leaf);

inline constexpr uint64_t kWarmSimdMaxNodes = uint64_t{1} << 29;

// What ToFloat32 found among the values it converted (bits).
inline constexpr uint32_t kFoundNan = 1;
// A value float32 cannot hold exactly (NaN is held): a float64-input forest
// then needs the float64 compare for that block (see WarmForest::nodes32).
inline constexpr uint32_t kFoundNotFloat32 = 2;

// x[i] = (float)v[i] for i < n; returns kFoundNan | kFoundNotFloat32 bits.
// Counted over 16 values at a time, as AnyNan, so that it vectorizes.
inline uint32_t ToFloat32(const double* v, size_t n, float* x) {
  size_t i = 0;
  int nan = 0, inexact = 0;
  for (; i + 16 <= n; i += 16) {
    int a = 0, b = 0;
    for (int j = 0; j < 16; ++j) {
      const float f = static_cast<float>(v[i + j]);
      a += v[i + j] != v[i + j];
      b += (static_cast<double>(f) != v[i + j]) & (v[i + j] == v[i + j]);
      x[i + j] = f;
    }
    nan |= a;
    inexact |= b;
  }
  for (; i < n; ++i) {
    const float f = static_cast<float>(v[i]);
    nan |= v[i] != v[i];
    inexact |= (static_cast<double>(f) != v[i]) & (v[i] == v[i]);
    x[i] = f;
  }
  return (nan ? kFoundNan : 0) | (inexact ? kFoundNotFloat32 : 0);
}

// The instruction set `requested` resolves to on this CPU, in *resolved
// (never kAuto): kAuto is the widest the CPU has unless the environment
// variable PACSET_ISA (scalar, avx2, avx512; unset, empty or auto: no cap)
// caps it; any other request is capped by what the CPU has. InvalidArgument
// when kAuto meets a PACSET_ISA value that is none of those.
Status ResolveWarmIsa(WarmIsa requested, WarmIsa* resolved);

// The kernel of `isa`, plain or routed (above); nullptr for kScalar (the
// portable lane loop of engine/warm_walk.cc). `categorical`: a routed
// kernel for a forest with categorical nodes (one without them takes none).
WarmTreeKernel WarmTreeKernelFor(WarmIsa isa, bool routed, bool categorical);

}  // namespace pacset::internal
