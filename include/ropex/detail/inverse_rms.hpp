// Private: the inverse RMS of a row, 1 / sqrt(mean(x^2) + eps), in the one order of operations
// every path takes (the norm's row loops in norm_kernels.hpp, and the rotation kernels when they
// fold a norm into their loads, kernels/rotate_token.inl): written once with GCC/Clang vector
// extensions over 16 float lanes, so each family compiles it in its own target region and a norm
// folded into a family's rotation gives the bits of that family's norm.
#pragma once
#ifndef ROPEX_INSIDE
#error "ropex/detail/inverse_rms.hpp is private; include <ropex/ropex.hpp>"
#endif

#include <cmath>
#include <cstdint>
#include <cstring>

#include "ropex/kernels/arch.hpp"
#if ROPEX_KERNELS_X86
#include <immintrin.h>
#elif ROPEX_KERNELS_NEON
#include <arm_neon.h>
#endif

namespace ropex::detail {

// 8 KiB: the sum of squares spends about two operations per 64 bytes, so the misses of a stream
// need a longer lead than the rotation's 4 KiB (a sweep of 2-16 KiB on AMD Zen 5 put 8 KiB first,
// by a margin close to that machine's run-to-run noise).
inline constexpr int norm_prefetch_floats = 2048;

// The sum of squares has one order: lane j accumulates channels j, j+16, ..., then the 16 lanes
// are folded in halves (16 -> 8 -> 4 -> 2 -> 1). Families with FMA may fuse square and sum, so
// results can differ in the last bit between families, never within one.
inline float fold_lanes(float* lanes) {
  for (int width = 8; width >= 1; width /= 2)
    for (int j = 0; j < width; ++j) lanes[j] += lanes[j + width];
  return lanes[0];
}

inline float inverse_rms_scalar(const float* x, int head_dim, float eps) {
  float lanes[16] = {};
  for (int i = 0; i < head_dim; ++i) lanes[i & 15] += x[i] * x[i];
  return 1.0f / std::sqrt(fold_lanes(lanes) / static_cast<float>(head_dim) + eps);
}

#if defined(__GNUC__)
typedef float float16_lanes __attribute__((vector_size(64)));
typedef float float8_lanes __attribute__((vector_size(32)));
typedef float float4_lanes __attribute__((vector_size(16)));

// fold_lanes' first two steps on registers (16 -> 8 -> 4 lanes): halves are taken with memcpy,
// which compilers turn into register extracts; reading the lanes back from memory after a 64-byte
// store stalls store forwarding.
__attribute__((always_inline)) inline float4_lanes fold_to_quarter(const float16_lanes& v) {
  float8_lanes low8, high8;
  std::memcpy(&low8, &v, sizeof low8);
  std::memcpy(&high8, reinterpret_cast<const char*>(&v) + sizeof low8, sizeof high8);
  const float8_lanes s8 = low8 + high8;
  float4_lanes low4, high4;
  std::memcpy(&low4, &s8, sizeof low4);
  std::memcpy(&high4, reinterpret_cast<const char*>(&s8) + sizeof low4, sizeof high4);
  return low4 + high4;
}

__attribute__((always_inline)) inline float fold_lanes(const float16_lanes& v) {
  const float4_lanes s4 = fold_to_quarter(v);
  return (s4[0] + s4[2]) + (s4[1] + s4[3]);
}

// fold_lanes of four rows' sums at once, {fold(s0), fold(s1), fold(s2), fold(s3)} with the same
// additions: each row is halved to 4 lanes alone, then the last two steps, (v0 + v2) + (v1 + v3),
// are taken for the four rows together, two shuffles and one addition a step instead of a row's
// extracts and scalar additions.
__attribute__((always_inline)) inline float4_lanes fold_lanes4(const float16_lanes& s0, const float16_lanes& s1,
                                                                const float16_lanes& s2, const float16_lanes& s3) {
  const float4_lanes a = fold_to_quarter(s0), b = fold_to_quarter(s1), c = fold_to_quarter(s2),
                     d = fold_to_quarter(s3);
  // {a0 + a2, a1 + a3, b0 + b2, b1 + b3} and the same for c, d.
  const float4_lanes ab = __builtin_shufflevector(a, b, 0, 1, 4, 5) + __builtin_shufflevector(a, b, 2, 3, 6, 7);
  const float4_lanes cd = __builtin_shufflevector(c, d, 0, 1, 4, 5) + __builtin_shufflevector(c, d, 2, 3, 6, 7);
  return __builtin_shufflevector(ab, cd, 0, 2, 4, 6) + __builtin_shufflevector(ab, cd, 1, 3, 5, 7);
}

// The square root of each lane, rounded as std::sqrt rounds it (IEEE: correctly rounded), so four
// rows' 1 / sqrt(mean + eps) in vectors give the bits of four scalar ones.
__attribute__((always_inline)) inline float4_lanes sqrt_lanes(float4_lanes v) {
#if ROPEX_KERNELS_X86
  __m128 m;
  std::memcpy(&m, &v, sizeof m);
  m = _mm_sqrt_ps(m);
  std::memcpy(&v, &m, sizeof v);
#elif ROPEX_KERNELS_NEON
  float32x4_t m;
  std::memcpy(&m, &v, sizeof m);
  m = vsqrtq_f32(m);
  std::memcpy(&v, &m, sizeof v);
#else
  for (int j = 0; j < 4; ++j) v[j] = std::sqrt(v[j]);
#endif
  return v;
}

// The squares of a ragged tail (n < 16 values: head_dim not a multiple of 16) added to the first
// lanes of sum.
__attribute__((always_inline)) inline void add_tail_squares(const float* x, int n, float16_lanes& sum) {
  float tail[16] = {};
  std::memcpy(tail, x, sizeof(float) * static_cast<std::size_t>(n));
  float16_lanes v;
  std::memcpy(&v, tail, sizeof v);
  sum += v * v;
}

// The sum of squares of one row into 16 lanes (the order of fold_lanes's comment). An out
// parameter: a returned 64-byte vector changes the ABI where AVX-512 is not enabled.
template <bool Prefetch>
__attribute__((always_inline)) inline void sum_of_squares(const float* x, int head_dim, float16_lanes& sum) {
  sum = float16_lanes{};
  int i = 0;
  for (; i + 16 <= head_dim; i += 16) {
    if (Prefetch) __builtin_prefetch(x + i + norm_prefetch_floats);
    float16_lanes v;
    std::memcpy(&v, x + i, sizeof v);
    sum += v * v;
  }
  if (i < head_dim) add_tail_squares(x + i, head_dim - i, sum);
}

// sum_of_squares of four rows, x + g * x_stride, in one loop: each step adds to four independent
// sums (a row alone is a chain of dependent additions), and each sum keeps its row's order. Named
// accumulators, not an array: an indexed array of vectors is kept in memory with a run-time
// head_dim. Rows in L1 (one token of Qwen3-8B shapes, Zen 5): 15.7 -> 9.9 cycles a row against
// four rows' sum_of_squares one after the other. Rows that stream keep those: there the four
// interleaved streams gained nothing.
__attribute__((always_inline)) inline void sum_of_squares4(const float* x, std::int64_t x_stride, int head_dim,
                                                           float16_lanes& s0, float16_lanes& s1, float16_lanes& s2,
                                                           float16_lanes& s3) {
  const float* x0 = x;
  const float* x1 = x + x_stride;
  const float* x2 = x + 2 * x_stride;
  const float* x3 = x + 3 * x_stride;
  s0 = s1 = s2 = s3 = float16_lanes{};
  int i = 0;
  for (; i + 16 <= head_dim; i += 16) {
    float16_lanes v0, v1, v2, v3;
    std::memcpy(&v0, x0 + i, sizeof v0);
    std::memcpy(&v1, x1 + i, sizeof v1);
    std::memcpy(&v2, x2 + i, sizeof v2);
    std::memcpy(&v3, x3 + i, sizeof v3);
    s0 += v0 * v0;
    s1 += v1 * v1;
    s2 += v2 * v2;
    s3 += v3 * v3;
  }
  if (i < head_dim) {
    add_tail_squares(x0 + i, head_dim - i, s0);
    add_tail_squares(x1 + i, head_dim - i, s1);
    add_tail_squares(x2 + i, head_dim - i, s2);
    add_tail_squares(x3 + i, head_dim - i, s3);
  }
}

// 1 / sqrt(mean(x^2) + eps) of Group rows x + g * x_stride into r[g]: the sum of squares of one
// row is a chain of dependent additions (one per 16 channels), then a fold, a division and a
// square root, so a row alone is bound by latency; Group independent chains overlap. Every row
// keeps its own order of operations, so the bits are those of one row at a time. Rows in cache
// take the four sums in one loop (sum_of_squares4), rows that stream one row after another.
template <int Group, bool Prefetch>
__attribute__((always_inline)) inline void inverse_rms_group(const float* x, std::int64_t x_stride, int head_dim,
                                                             float eps, float* r) {
  if constexpr (Group == 4) {  // 1 / sqrt(mean + eps) of the four rows in one vector of each operation
    float16_lanes s0, s1, s2, s3;
    if constexpr (!Prefetch) {
      sum_of_squares4(x, x_stride, head_dim, s0, s1, s2, s3);
    } else {
      sum_of_squares<Prefetch>(x, head_dim, s0);
      sum_of_squares<Prefetch>(x + x_stride, head_dim, s1);
      sum_of_squares<Prefetch>(x + 2 * x_stride, head_dim, s2);
      sum_of_squares<Prefetch>(x + 3 * x_stride, head_dim, s3);
    }
    const float4_lanes mean = fold_lanes4(s0, s1, s2, s3);
    const float4_lanes inverse = 1.0f / sqrt_lanes(mean / static_cast<float>(head_dim) + eps);
    std::memcpy(r, &inverse, sizeof inverse);
  } else {
#pragma GCC unroll 8
    for (int g = 0; g < Group; ++g) {
      float16_lanes sum;
      sum_of_squares<Prefetch>(x + g * x_stride, head_dim, sum);
      r[g] = 1.0f / std::sqrt(fold_lanes(sum) / static_cast<float>(head_dim) + eps);
    }
  }
}
#endif

// Rows x + j * x_stride, j < rows: r[j] = their inverse RMS, the bits of the norm's row loops of
// the family compiling the caller.
template <bool Prefetch = false>
ROPEX_ALWAYS_INLINE void inverse_rms_rows(const float* x, std::int64_t x_stride, std::int64_t rows, int head_dim,
                                          float eps, float* r) {
#if defined(__GNUC__)
  std::int64_t j = 0;
  for (; j + 4 <= rows; j += 4)
    inverse_rms_group<4, Prefetch>(x + j * x_stride, x_stride, head_dim, eps, r + j);
  for (; j < rows; ++j) inverse_rms_group<1, Prefetch>(x + j * x_stride, x_stride, head_dim, eps, r + j);
#else
  for (std::int64_t j = 0; j < rows; ++j) r[j] = inverse_rms_scalar(x + j * x_stride, head_dim, eps);
#endif
}

}  // namespace ropex::detail
