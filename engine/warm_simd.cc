#include "engine/internal/warm_simd.h"

#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <string>

#if defined(__x86_64__) || defined(__i386__)
#include <immintrin.h>
#define PACSET_WARM_X86 1
#if __has_include(<sys/platform/x86.h>)
// CPU_FEATURE_ACTIVE (glibc 2.33). The header is C: its _Bool is no type in
// clang's C++ (gcc takes it as an extension).
#ifdef __clang__
#define _Bool bool
#include <sys/platform/x86.h>
#undef _Bool
#else
#include <sys/platform/x86.h>
#endif
#define PACSET_GLIBC_CPU_FEATURES 1
#endif
#endif

namespace pacset::internal {
namespace {

#ifdef PACSET_WARM_X86

// Both kernels walk one tree with kGroups vectors of consecutive rows (one
// row per lane) side by side: a step is a chain of dependent gathers (the
// node; the row's value), so one vector would wait on each, while
// independent vectors overlap. A lane whose walk has ended is masked off
// until every lane of the batch has ended; then the batch stores its leaves
// and the next rows start. (Refilling ended lanes at once, with AVX-512's
// expand and scatter, was slower: the refill chains the vectors' steps.) A
// node (WarmNode<float>) is read as two 64-bit halves, (threshold, feature)
// and (left, right): the children are gathered beside the threshold, off the
// chain, and the compare picks one — 48 loads a step instead of 64 with
// 32-bit gathers, and two gathers deep instead of three. `!(x <= threshold)`
// (NLE, true for NaN too) goes right, as GoesLeft's plain compare does for
// the rows the plain kernels are given (the routed ones: below). The
// feature is the feature word masked (kWarmFeatureMask). A batch is 64 rows (4 x 16, 8 x 8). A
// value is gathered from the rows where they lie (row-major, x + row * nf +
// feature, the row offsets computed once per batch): no transposition pass
// over the input and no multiply on the chain. What each of these choices
// gained: engine/DESIGN.md, "SIMD kernels".

// Routed kernels (kRouted; warm_simd.h): `!(x <= threshold)` goes right
// (true for NaN, and for any x against a NaN threshold) except for NaN at a
// default-left node (an unordered self-compare). kCategorical: the lanes at a
// categorical node (the feature word's kWarmCategoricalBit) take the bit of
// their category in the split's direction words, gathered only when some
// lane is at one; the category is x truncated toward zero when x >= 0 (or,
// for LightGBM's rule, x > -1) and below 32 << direction_shift, else (and
// for +-inf, huge values, negatives) there is none and the node's outside
// direction applies; NaN takes the default direction.

// AVX-512: 16 lanes a vector; each half of 16 nodes by two 8-lane gathers.
template <int kGroups, bool kRouted, bool kCategorical>
__attribute__((target("avx512f"), always_inline)) inline void WalkTreeAvx512Pairs(
    const WarmKernelForest& forest, int32_t root, const float* x, uint32_t nrows, uint32_t nf,
    int32_t* leaf) {
  const long long* const base = reinterpret_cast<const long long*>(forest.nodes);
  const uint32_t* const words = forest.direction_words;
  const __m512i iota = _mm512_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15);
  const __m512i evens = _mm512_add_epi32(iota, iota);
  const __m512i odds = _mm512_add_epi32(evens, _mm512_set1_epi32(1));
  const __m512i zero = _mm512_setzero_si512();
  const __m512i vn = _mm512_set1_epi32(static_cast<int32_t>(nrows));
  const __m512i feature_mask = _mm512_set1_epi32(static_cast<int32_t>(kWarmFeatureMask));
  const __m512i default_left_bit = _mm512_set1_epi32(static_cast<int32_t>(kWarmDefaultLeftBit));
  const __m512i categorical_bit = _mm512_set1_epi32(static_cast<int32_t>(kWarmCategoricalBit));
  const __m512i outside_left_bit = _mm512_set1_epi32(static_cast<int32_t>(kWarmOutsideLeftBit));
  const __m512i truncates_bit = _mm512_set1_epi32(static_cast<int32_t>(kWarmTruncatesBit));
  const __m512i categories = _mm512_set1_epi32(static_cast<int32_t>(32u << forest.direction_shift));
  const __m128i shift = _mm_cvtsi32_si128(static_cast<int>(forest.direction_shift));
  const __m512i one = _mm512_set1_epi32(1), low5 = _mm512_set1_epi32(31);
  // Full masks on intrinsics whose unmasked forms GCC 12 warns about
  // (maybe-uninitialized on their undefined source), as for the extracts.
  constexpr __mmask16 kAll = 0xFFFF;
  for (uint32_t r0 = 0; r0 < nrows; r0 += 16 * kGroups) {
    __m512i row[kGroups], at[kGroups], off[kGroups];
    __mmask16 live[kGroups];
    for (int g = 0; g < kGroups; ++g) {
      row[g] = _mm512_add_epi32(iota, _mm512_set1_epi32(static_cast<int32_t>(r0 + 16 * g)));
      off[g] = _mm512_mullo_epi32(row[g], _mm512_set1_epi32(static_cast<int32_t>(nf)));
      live[g] = _mm512_cmplt_epi32_mask(row[g], vn);
      at[g] = _mm512_set1_epi32(root);
    }
    for (;;) {
      uint32_t any = 0;
      for (int g = 0; g < kGroups; ++g) any |= live[g];
      if (!any) break;
      for (int g = 0; g < kGroups; ++g) {
        const __mmask16 a = live[g];
        const __mmask8 alo = static_cast<__mmask8>(a), ahi = static_cast<__mmask8>(a >> 8);
        const __m512i idx = _mm512_add_epi32(at[g], at[g]);  // in 8-byte units
        const __m256i ilo = _mm512_maskz_extracti64x4_epi64(0xFF, idx, 0);
        const __m256i ihi = _mm512_maskz_extracti64x4_epi64(0xFF, idx, 1);
        const __m512i tf_lo = _mm512_mask_i32gather_epi64(zero, alo, ilo, base, 8);
        const __m512i tf_hi = _mm512_mask_i32gather_epi64(zero, ahi, ihi, base, 8);
        const __m512i lr_lo = _mm512_mask_i32gather_epi64(zero, alo, ilo, base + 1, 8);
        const __m512i lr_hi = _mm512_mask_i32gather_epi64(zero, ahi, ihi, base + 1, 8);
        const __m512i thr_bits = _mm512_permutex2var_epi32(tf_lo, evens, tf_hi);
        const __m512 thr = _mm512_castsi512_ps(thr_bits);
        const __m512i word = _mm512_permutex2var_epi32(tf_lo, odds, tf_hi);
        const __m512i feat = _mm512_and_si512(word, feature_mask);
        const __m512 v =
            _mm512_mask_i32gather_ps(_mm512_setzero_ps(), a, _mm512_add_epi32(feat, off[g]), x, 4);
        __mmask16 right = _mm512_mask_cmp_ps_mask(a, v, thr, _CMP_NLE_UQ);
        if constexpr (kRouted) {
          const __mmask16 default_left = _mm512_mask_test_epi32_mask(a, word, default_left_bit);
          const __mmask16 nan = _mm512_cmp_ps_mask(v, v, _CMP_UNORD_Q);
          right = static_cast<__mmask16>(right & ~(nan & default_left));
          if constexpr (kCategorical) {
            const __mmask16 cat = _mm512_mask_test_epi32_mask(a, word, categorical_bit);
            if (cat) {
              const __m512i c = _mm512_maskz_cvttps_epi32(kAll, v);  // INT_MIN for NaN, inf, huge
              const __mmask16 truncates = _mm512_test_epi32_mask(word, truncates_bit);
              const __mmask16 from = static_cast<__mmask16>(
                  (_mm512_cmp_ps_mask(v, _mm512_setzero_ps(), _CMP_GE_OQ) & ~truncates) |
                  (_mm512_cmp_ps_mask(v, _mm512_set1_ps(-1.0f), _CMP_GT_OQ) & truncates));
              const __mmask16 in =
                  _mm512_mask_cmplt_epu32_mask(static_cast<__mmask16>(cat & from), c, categories);
              const __m512i outside_left = _mm512_maskz_srli_epi32(
                  kAll, _mm512_and_si512(word, outside_left_bit), kWarmOutsideLeftShift);
              const __m512i set = _mm512_maskz_sll_epi32(
                  kAll, _mm512_or_si512(_mm512_add_epi32(thr_bits, thr_bits), outside_left), shift);
              const __m512i at_word = _mm512_add_epi32(set, _mm512_maskz_srli_epi32(kAll, c, 5));
              const __m512i bits = _mm512_mask_i32gather_epi32(zero, in, at_word, words, 4);
              const __mmask16 bit = _mm512_test_epi32_mask(
                  _mm512_maskz_srlv_epi32(kAll, bits, _mm512_and_si512(c, low5)), one);
              const __mmask16 outside = _mm512_test_epi32_mask(word, outside_left_bit);
              const __mmask16 left = static_cast<__mmask16>(
                  (nan & default_left) | (~nan & ((in & bit) | (~in & outside))));
              right = static_cast<__mmask16>((right & ~cat) | (cat & ~left));
            }
          }
        }
        const __m512i pick = _mm512_mask_mov_epi32(evens, right, odds);
        at[g] = _mm512_mask_mov_epi32(at[g], a, _mm512_permutex2var_epi32(lr_lo, pick, lr_hi));
        live[g] = _mm512_mask_cmpge_epi32_mask(a, at[g], zero);
      }
    }
    for (int g = 0; g < kGroups; ++g)
      _mm512_mask_storeu_epi32(leaf + r0 + 16 * g, _mm512_cmplt_epi32_mask(row[g], vn), at[g]);
  }
}

// Of the 64-bit pairs p0..p3 (in lo) and p4..p7 (in hi): the low halves in
// order (kHigh false) or the high halves.
template <bool kHigh>
__attribute__((target("avx2"), always_inline)) inline __m256i Halves(__m256i lo, __m256i hi) {
  constexpr int kSel = kHigh ? _MM_SHUFFLE(3, 1, 3, 1) : _MM_SHUFFLE(2, 0, 2, 0);
  const __m256 m = _mm256_shuffle_ps(_mm256_castsi256_ps(lo), _mm256_castsi256_ps(hi), kSel);
  return _mm256_permute4x64_epi64(_mm256_castps_si256(m), _MM_SHUFFLE(3, 1, 2, 0));
}

// All ones in the lanes whose `word` has `bit`.
__attribute__((target("avx2"), always_inline)) inline __m256 HasBit(__m256i word, __m256i bit) {
  return _mm256_castsi256_ps(_mm256_cmpeq_epi32(_mm256_and_si256(word, bit), bit));
}

// AVX2: 8 lanes a vector; each half of 8 nodes by two 4-lane gathers.
template <int kGroups, bool kRouted, bool kCategorical>
__attribute__((target("avx2"), always_inline)) inline void WalkTreeAvx2Pairs(
    const WarmKernelForest& forest, int32_t root, const float* x, uint32_t nrows, uint32_t nf,
    int32_t* leaf) {
  const long long* const base = reinterpret_cast<const long long*>(forest.nodes);
  const int* const words = reinterpret_cast<const int*>(forest.direction_words);
  const __m256i iota = _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7);
  const __m256i zero = _mm256_setzero_si256();
  const __m256i minus_one = _mm256_set1_epi32(-1);
  const __m256i vn = _mm256_set1_epi32(static_cast<int32_t>(nrows));
  const __m256i feature_mask = _mm256_set1_epi32(static_cast<int32_t>(kWarmFeatureMask));
  const __m256i default_left_bit = _mm256_set1_epi32(static_cast<int32_t>(kWarmDefaultLeftBit));
  const __m256i categorical_bit = _mm256_set1_epi32(static_cast<int32_t>(kWarmCategoricalBit));
  const __m256i outside_left_bit = _mm256_set1_epi32(static_cast<int32_t>(kWarmOutsideLeftBit));
  const __m256i truncates_bit = _mm256_set1_epi32(static_cast<int32_t>(kWarmTruncatesBit));
  const __m256i categories = _mm256_set1_epi32(static_cast<int32_t>(32u << forest.direction_shift));
  const __m128i shift = _mm_cvtsi32_si128(static_cast<int>(forest.direction_shift));
  const __m256i one = _mm256_set1_epi32(1), low5 = _mm256_set1_epi32(31);
  for (uint32_t r0 = 0; r0 < nrows; r0 += 8 * kGroups) {
    __m256i row[kGroups], at[kGroups], off[kGroups];
    for (int g = 0; g < kGroups; ++g) {
      row[g] = _mm256_add_epi32(iota, _mm256_set1_epi32(static_cast<int32_t>(r0 + 8 * g)));
      off[g] = _mm256_mullo_epi32(row[g], _mm256_set1_epi32(static_cast<int32_t>(nf)));
      // A lane past the end starts at an ended "leaf".
      at[g] =
          _mm256_blendv_epi8(minus_one, _mm256_set1_epi32(root), _mm256_cmpgt_epi32(vn, row[g]));
    }
    for (;;) {
      __m256i any = at[0];
      for (int g = 1; g < kGroups; ++g) any = _mm256_and_si256(any, at[g]);
      // Every lane ended when every at has its sign bit set.
      if (_mm256_movemask_ps(_mm256_castsi256_ps(any)) == 0xFF) break;
      for (int g = 0; g < kGroups; ++g) {
        const __m256i a = _mm256_cmpgt_epi32(at[g], minus_one);  // at >= 0
        const __m256i mlo = _mm256_cvtepi32_epi64(_mm256_castsi256_si128(a));
        const __m256i mhi = _mm256_cvtepi32_epi64(_mm256_extracti128_si256(a, 1));
        const __m256i idx = _mm256_add_epi32(at[g], at[g]);  // in 8-byte units
        const __m128i ilo = _mm256_castsi256_si128(idx);
        const __m128i ihi = _mm256_extracti128_si256(idx, 1);
        const __m256i tf_lo = _mm256_mask_i32gather_epi64(zero, base, ilo, mlo, 8);
        const __m256i tf_hi = _mm256_mask_i32gather_epi64(zero, base, ihi, mhi, 8);
        const __m256i lr_lo = _mm256_mask_i32gather_epi64(zero, base + 1, ilo, mlo, 8);
        const __m256i lr_hi = _mm256_mask_i32gather_epi64(zero, base + 1, ihi, mhi, 8);
        const __m256i thr_bits = Halves<false>(tf_lo, tf_hi);
        const __m256 thr = _mm256_castsi256_ps(thr_bits);
        const __m256i word = Halves<true>(tf_lo, tf_hi);
        const __m256i feat = _mm256_and_si256(word, feature_mask);
        const __m256 v = _mm256_mask_i32gather_ps(
            _mm256_setzero_ps(), x, _mm256_add_epi32(feat, off[g]), _mm256_castsi256_ps(a), 4);
        __m256 right = _mm256_cmp_ps(v, thr, _CMP_NLE_UQ);
        if constexpr (kRouted) {
          const __m256 default_left = HasBit(word, default_left_bit);
          const __m256 nan = _mm256_cmp_ps(v, v, _CMP_UNORD_Q);
          right = _mm256_andnot_ps(_mm256_and_ps(nan, default_left), right);
          if constexpr (kCategorical) {
            const __m256 cat = _mm256_and_ps(HasBit(word, categorical_bit), _mm256_castsi256_ps(a));
            if (_mm256_movemask_ps(cat)) {
              const __m256i c = _mm256_cvttps_epi32(v);  // INT_MIN for NaN, inf, huge
              const __m256 from = _mm256_blendv_ps(
                  _mm256_cmp_ps(v, _mm256_setzero_ps(), _CMP_GE_OQ),
                  _mm256_cmp_ps(v, _mm256_set1_ps(-1.0f), _CMP_GT_OQ), HasBit(word, truncates_bit));
              const __m256i below = _mm256_and_si256(_mm256_cmpgt_epi32(categories, c),
                                                     _mm256_cmpgt_epi32(c, minus_one));
              const __m256 in = _mm256_and_ps(_mm256_and_ps(cat, from), _mm256_castsi256_ps(below));
              const __m256i outside_left = _mm256_srli_epi32(
                  _mm256_and_si256(word, outside_left_bit), kWarmOutsideLeftShift);
              const __m256i set = _mm256_sll_epi32(
                  _mm256_or_si256(_mm256_add_epi32(thr_bits, thr_bits), outside_left), shift);
              const __m256i at_word = _mm256_add_epi32(set, _mm256_srli_epi32(c, 5));
              const __m256i bits =
                  _mm256_mask_i32gather_epi32(zero, words, at_word, _mm256_castps_si256(in), 4);
              const __m256 bit = _mm256_castsi256_ps(_mm256_cmpeq_epi32(
                  _mm256_and_si256(_mm256_srlv_epi32(bits, _mm256_and_si256(c, low5)), one), one));
              __m256 left = _mm256_blendv_ps(HasBit(word, outside_left_bit), bit, in);
              left = _mm256_blendv_ps(left, default_left, nan);
              right =
                  _mm256_blendv_ps(right, _mm256_xor_ps(left, _mm256_castsi256_ps(minus_one)), cat);
            }
          }
        }
        right = _mm256_and_ps(right, _mm256_castsi256_ps(a));
        const __m256i child = _mm256_castps_si256(
            _mm256_blendv_ps(_mm256_castsi256_ps(Halves<false>(lr_lo, lr_hi)),
                             _mm256_castsi256_ps(Halves<true>(lr_lo, lr_hi)), right));
        at[g] = _mm256_blendv_epi8(at[g], child, a);
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

template <bool kRouted, bool kCategorical>
__attribute__((target("avx512f"))) void WalkTreeAvx512(const WarmKernelForest& forest, int32_t root,
                                                       const float* x, uint32_t nrows, uint32_t nf,
                                                       int32_t* leaf) {
  WalkTreeAvx512Pairs<4, kRouted, kCategorical>(forest, root, x, nrows, nf, leaf);
}

template <bool kRouted, bool kCategorical>
__attribute__((target("avx2"))) void WalkTreeAvx2(const WarmKernelForest& forest, int32_t root,
                                                  const float* x, uint32_t nrows, uint32_t nf,
                                                  int32_t* leaf) {
  WalkTreeAvx2Pairs<8, kRouted, kCategorical>(forest, root, x, nrows, nf, leaf);
}

// glibc's record of the CPU (what the dynamic loader found, and the kernel
// lets user code use) where it has one: __builtin_cpu_supports would link
// libgcc's constructor that runs CPUID at every program's start (each a VM
// exit on a virtual machine), also in programs that never walk a tree.
#ifdef PACSET_GLIBC_CPU_FEATURES
WarmIsa CpuWarmIsa() {
  if (CPU_FEATURE_ACTIVE(AVX512F)) return WarmIsa::kAvx512;
  if (CPU_FEATURE_ACTIVE(AVX2)) return WarmIsa::kAvx2;
  return WarmIsa::kScalar;
}
#else
WarmIsa CpuWarmIsa() {
  __builtin_cpu_init();
  if (__builtin_cpu_supports("avx512f")) return WarmIsa::kAvx512;
  if (__builtin_cpu_supports("avx2")) return WarmIsa::kAvx2;
  return WarmIsa::kScalar;
}
#endif

#else

WarmIsa CpuWarmIsa() { return WarmIsa::kScalar; }

#endif

// PACSET_ISA, read once: the widest the environment allows. Unset, empty or
// "auto": no cap. Anything else is an error (a typo must not silently run
// another kernel than the one asked for).
struct EnvCap {
  WarmIsa isa = WarmIsa::kAvx512;
  std::string error;
};

EnvCap ReadEnvWarmIsa() {
  EnvCap cap;
  const char* v = std::getenv("PACSET_ISA");
  if (!v || !*v || !std::strcmp(v, "auto")) return cap;
  if (!std::strcmp(v, "scalar")) {
    cap.isa = WarmIsa::kScalar;
  } else if (!std::strcmp(v, "avx2")) {
    cap.isa = WarmIsa::kAvx2;
  } else if (!std::strcmp(v, "avx512")) {
    cap.isa = WarmIsa::kAvx512;
  } else {
    std::string shown(v, strnlen(v, 32));
    cap.error = "PACSET_ISA=" + shown + ": expected scalar, avx2, avx512 or auto";
  }
  return cap;
}

WarmIsa Narrower(WarmIsa a, WarmIsa b) { return a < b ? a : b; }

}  // namespace

Status ResolveWarmIsa(WarmIsa requested, WarmIsa* resolved) {
  static const WarmIsa cpu = CpuWarmIsa();
  static const EnvCap env = ReadEnvWarmIsa();
  if (requested != WarmIsa::kAuto) {
    *resolved = Narrower(cpu, requested);
    return Status::Ok();
  }
  if (!env.error.empty()) return Status::InvalidArgument(env.error);
  *resolved = Narrower(cpu, env.isa);
  return Status::Ok();
}

WarmTreeKernel WarmTreeKernelFor(WarmIsa isa, bool routed, bool categorical) {
#ifdef PACSET_WARM_X86
  switch (isa) {
    case WarmIsa::kAvx512:
      return !routed       ? WalkTreeAvx512<false, false>
             : categorical ? WalkTreeAvx512<true, true>
                           : WalkTreeAvx512<true, false>;
    case WarmIsa::kAvx2:
      return !routed       ? WalkTreeAvx2<false, false>
             : categorical ? WalkTreeAvx2<true, true>
                           : WalkTreeAvx2<true, false>;
    case WarmIsa::kScalar:
    case WarmIsa::kAuto:
      break;
  }
#else
  (void)routed;
  (void)categorical;
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
