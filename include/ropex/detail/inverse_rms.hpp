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

// fold_lanes on registers: halves are taken with memcpy, which compilers turn into register
// extracts; reading the lanes back from memory after a 64-byte store stalls store forwarding.
__attribute__((always_inline)) inline float fold_lanes(const float16_lanes& v) {
  float8_lanes low8, high8;
  std::memcpy(&low8, &v, sizeof low8);
  std::memcpy(&high8, reinterpret_cast<const char*>(&v) + sizeof low8, sizeof high8);
  const float8_lanes s8 = low8 + high8;
  float4_lanes low4, high4;
  std::memcpy(&low4, &s8, sizeof low4);
  std::memcpy(&high4, reinterpret_cast<const char*>(&s8) + sizeof low4, sizeof high4);
  const float4_lanes s4 = low4 + high4;
  return (s4[0] + s4[2]) + (s4[1] + s4[3]);
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
  if (i < head_dim) {  // a ragged tail (head_dim not a multiple of 16) goes to the first lanes
    float tail[16] = {};
    std::memcpy(tail, x + i, sizeof(float) * static_cast<std::size_t>(head_dim - i));
    float16_lanes v;
    std::memcpy(&v, tail, sizeof v);
    sum += v * v;
  }
}

// 1 / sqrt(mean(x^2) + eps) of Group rows x + g * x_stride into r[g]: the sum of squares of one
// row is a chain of dependent additions (one per 16 channels), then a fold, a division and a
// square root, so a row alone is bound by latency; Group independent chains overlap. Every row
// keeps its own order of operations, so the bits are those of one row at a time.
template <int Group, bool Prefetch>
__attribute__((always_inline)) inline void inverse_rms_group(const float* x, std::int64_t x_stride, int head_dim,
                                                             float eps, float* r) {
  if constexpr (Group == 4) {  // 1 / sqrt(mean + eps) of the four rows in one vector of each operation
    float4_lanes mean;
#pragma GCC unroll 4
    for (int g = 0; g < Group; ++g) {
      float16_lanes sum;
      sum_of_squares<Prefetch>(x + g * x_stride, head_dim, sum);
      mean[g] = fold_lanes(sum);
    }
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
  for (; j + 4 <= rows; j += 4) inverse_rms_group<4, Prefetch>(x + j * x_stride, x_stride, head_dim, eps, r + j);
  for (; j < rows; ++j) inverse_rms_group<1, Prefetch>(x + j * x_stride, x_stride, head_dim, eps, r + j);
#else
  for (std::int64_t j = 0; j < rows; ++j) r[j] = inverse_rms_scalar(x + j * x_stride, head_dim, eps);
#endif
}

}  // namespace ropex::detail
