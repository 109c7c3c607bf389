#include "layout/internal/warm_simd.h"

#include <cstdlib>
#include <cstring>

#if defined(__x86_64__) || defined(__i386__)
#include <immintrin.h>
#define PACSET_WARM_X86 1
#endif

namespace pacset::internal {
namespace {

#ifdef PACSET_WARM_X86

// Both kernels walk one tree with kGroups vectors of consecutive rows (one
// row per lane) side by side: a step is a chain of three dependent gathers
// (feature; the row's value; the chosen child), so one vector would wait on
// each, while independent vectors overlap. A lane whose walk has ended is
// masked off until every lane of the batch has ended; then the batch stores
// its leaves and the next rows start. (Refilling ended lanes at once, with
// AVX-512's expand and scatter, measured slower: the refill chains the
// vectors' steps.) A node is four int32 words (threshold, feature, left,
// right: WarmNode<float>); `!(x <= threshold)` (NLE, true for NaN too) goes
// right, as GoesLeft's plain compare does for the rows these kernels are
// given. Measured (1 thread, AVX-512 machine, 1,030 trees of depth 12):
// 64 rows a batch (4 x 16, 8 x 8) 1.2-1.3x faster than 32, and AVX-512 ~10%
// faster than AVX2.

template <int kGroups>
__attribute__((target("avx512f"), always_inline)) inline void WalkTreeAvx512Batch(
    const WarmNode<float>* nodes, int32_t root, const float* x, uint32_t nrows, int32_t* leaf) {
  const int32_t* const base = reinterpret_cast<const int32_t*>(nodes);
  const __m512i iota = _mm512_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15);
  const __m512i one = _mm512_set1_epi32(1), two = _mm512_set1_epi32(2);
  const __m512i zero = _mm512_setzero_si512();
  const __m512i vn = _mm512_set1_epi32(static_cast<int32_t>(nrows));
  for (uint32_t r0 = 0; r0 < nrows; r0 += 16 * kGroups) {
    __m512i row[kGroups], at[kGroups];
    __mmask16 live[kGroups];
    for (int g = 0; g < kGroups; ++g) {
      row[g] = _mm512_add_epi32(iota, _mm512_set1_epi32(static_cast<int32_t>(r0 + 16 * g)));
      live[g] = _mm512_cmplt_epi32_mask(row[g], vn);
      at[g] = _mm512_set1_epi32(root);
    }
    for (;;) {
      uint32_t any = 0;
      for (int g = 0; g < kGroups; ++g) any |= live[g];
      if (!any) break;
      for (int g = 0; g < kGroups; ++g) {
        const __mmask16 a = live[g];
        const __m512i idx = _mm512_maskz_slli_epi32(0xFFFF, at[g], 2);
        const __m512i feat =
            _mm512_mask_i32gather_epi32(zero, a, _mm512_add_epi32(idx, one), base, 4);
        const __m512 thr = _mm512_mask_i32gather_ps(_mm512_setzero_ps(), a, idx, base, 4);
        const __m512 v = _mm512_mask_i32gather_ps(
            _mm512_setzero_ps(), a,
            _mm512_add_epi32(_mm512_maskz_mullo_epi32(0xFFFF, feat, vn), row[g]), x, 4);
        const __mmask16 right = _mm512_mask_cmp_ps_mask(a, v, thr, _CMP_NLE_UQ);
        const __m512i left = _mm512_add_epi32(idx, two);
        const __m512i child = _mm512_mask_add_epi32(left, right, left, one);
        at[g] = _mm512_mask_i32gather_epi32(at[g], a, child, base, 4);
        live[g] = _mm512_mask_cmpge_epi32_mask(a, at[g], zero);
      }
    }
    for (int g = 0; g < kGroups; ++g)
      _mm512_mask_storeu_epi32(leaf + r0 + 16 * g, _mm512_cmplt_epi32_mask(row[g], vn), at[g]);
  }
}

template <int kGroups>
__attribute__((target("avx2"), always_inline)) inline void WalkTreeAvx2Batch(
    const WarmNode<float>* nodes, int32_t root, const float* x, uint32_t nrows, int32_t* leaf) {
  const int* const base = reinterpret_cast<const int*>(nodes);
  const __m256i iota = _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7);
  const __m256i one = _mm256_set1_epi32(1), two = _mm256_set1_epi32(2);
  const __m256i zero = _mm256_setzero_si256();
  const __m256i vn = _mm256_set1_epi32(static_cast<int32_t>(nrows));
  for (uint32_t r0 = 0; r0 < nrows; r0 += 8 * kGroups) {
    __m256i row[kGroups], at[kGroups];
    for (int g = 0; g < kGroups; ++g) {
      row[g] = _mm256_add_epi32(iota, _mm256_set1_epi32(static_cast<int32_t>(r0 + 8 * g)));
      // A lane past the end starts at an ended "leaf".
      at[g] = _mm256_blendv_epi8(_mm256_set1_epi32(-1), _mm256_set1_epi32(root),
                                 _mm256_cmpgt_epi32(vn, row[g]));
    }
    for (;;) {
      __m256i any = at[0];
      for (int g = 1; g < kGroups; ++g) any = _mm256_and_si256(any, at[g]);
      // Every lane ended when every at has its sign bit set.
      if (_mm256_movemask_ps(_mm256_castsi256_ps(any)) == 0xFF) break;
      for (int g = 0; g < kGroups; ++g) {
        const __m256i a = _mm256_cmpgt_epi32(at[g], _mm256_set1_epi32(-1));  // at >= 0
        const __m256i idx = _mm256_slli_epi32(at[g], 2);
        const __m256i feat =
            _mm256_mask_i32gather_epi32(zero, base, _mm256_add_epi32(idx, one), a, 4);
        const __m256 thr =
            _mm256_mask_i32gather_ps(_mm256_setzero_ps(), reinterpret_cast<const float*>(base), idx,
                                     _mm256_castsi256_ps(a), 4);
        const __m256 v = _mm256_mask_i32gather_ps(
            _mm256_setzero_ps(), x, _mm256_add_epi32(_mm256_mullo_epi32(feat, vn), row[g]),
            _mm256_castsi256_ps(a), 4);
        // All ones (-1) where the row goes right: child = idx + 2 - (-1).
        const __m256i right = _mm256_castps_si256(_mm256_cmp_ps(v, thr, _CMP_NLE_UQ));
        const __m256i child = _mm256_sub_epi32(_mm256_add_epi32(idx, two), right);
        at[g] = _mm256_mask_i32gather_epi32(at[g], base, child, a, 4);
      }
    }
    for (int g = 0; g < kGroups; ++g) {
      alignas(32) int32_t out[8];
      _mm256_store_si256(reinterpret_cast<__m256i*>(out), at[g]);
      const uint32_t first = r0 + 8 * g;
      for (uint32_t j = 0; j < 8 && first + j < nrows; ++j) leaf[first + j] = out[j];
    }
  }
}

__attribute__((target("avx512f"))) void WalkTreeAvx512(const WarmNode<float>* nodes, int32_t root,
                                                       const float* x, uint32_t nrows,
                                                       int32_t* leaf) {
  WalkTreeAvx512Batch<4>(nodes, root, x, nrows, leaf);
}

__attribute__((target("avx2"))) void WalkTreeAvx2(const WarmNode<float>* nodes, int32_t root,
                                                  const float* x, uint32_t nrows, int32_t* leaf) {
  WalkTreeAvx2Batch<8>(nodes, root, x, nrows, leaf);
}

WarmIsa CpuWarmIsa() {
  __builtin_cpu_init();
  if (__builtin_cpu_supports("avx512f")) return WarmIsa::kAvx512;
  if (__builtin_cpu_supports("avx2")) return WarmIsa::kAvx2;
  return WarmIsa::kScalar;
}

#else

WarmIsa CpuWarmIsa() { return WarmIsa::kScalar; }

#endif

// PACSET_ISA, read once: the widest the environment allows.
WarmIsa EnvWarmIsa() {
  const char* v = std::getenv("PACSET_ISA");
  if (!v) return WarmIsa::kAvx512;
  if (!std::strcmp(v, "scalar")) return WarmIsa::kScalar;
  if (!std::strcmp(v, "avx2")) return WarmIsa::kAvx2;
  return WarmIsa::kAvx512;
}

WarmIsa Narrower(WarmIsa a, WarmIsa b) { return a < b ? a : b; }

}  // namespace

WarmIsa ResolveWarmIsa(WarmIsa requested) {
  static const WarmIsa cpu = CpuWarmIsa();
  static const WarmIsa env = EnvWarmIsa();
  if (requested == WarmIsa::kAuto) return Narrower(cpu, env);
  return Narrower(cpu, requested);
}

WarmTreeKernel WarmTreeKernelFor(WarmIsa isa) {
#ifdef PACSET_WARM_X86
  switch (isa) {
    case WarmIsa::kAvx512:
      return WalkTreeAvx512;
    case WarmIsa::kAvx2:
      return WalkTreeAvx2;
    case WarmIsa::kScalar:
    case WarmIsa::kAuto:
      break;
  }
#endif
  return nullptr;
}

}  // namespace pacset::internal

namespace pacset {

const char* WarmIsaName(WarmIsa isa) {
  switch (isa) {
    case WarmIsa::kAuto:
      return "auto";
    case WarmIsa::kScalar:
      return "scalar";
    case WarmIsa::kAvx2:
      return "avx2";
    case WarmIsa::kAvx512:
      return "avx512";
  }
  return "?";
}

}  // namespace pacset
