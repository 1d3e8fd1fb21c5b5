// Private: the RMSNorm row loops of rms_norm.hpp, written once with GCC/Clang vector extensions
// over 16 float lanes and compiled for AVX-512, for AVX2+FMA and for the baseline (SSE2, or
// Advanced SIMD on aarch64); the family is chosen once per call from the kernels' own choice
// (kernels/dispatch.hpp, so ROPEX_ISA caps it too), never per row.
#pragma once
#ifndef ROPEX_INSIDE
#error "ropex/detail/norm_kernels.hpp is private; include <ropex/ropex.hpp>"
#endif

#include <cmath>
#include <cstdint>
#include <cstring>

#include "ropex/kernels/arch.hpp"
#include "ropex/kernels/dispatch.hpp"
#if ROPEX_KERNELS_X86
#include <immintrin.h>
#elif ROPEX_KERNELS_NEON
#include <arm_neon.h>
#endif

namespace ropex::detail {

// Rows j < rows, x + j * x_stride into out + j * out_stride: out[i] = x[i] * r * w[i] with
// r = 1 / sqrt(mean(x^2) + eps); w = weight, 1 + weight (unit_offset), or ones when weight is null
// (then 2 under unit_offset). An out row is its x row (in place) or disjoint from every x row.
// prefetch: rows stream from memory (kernels/prefetch.hpp's worth_prefetching of the call's bytes),
// so each line norm_prefetch_floats ahead of the one read is prefetched.
using normalize_rows_fn = void (*)(const float* x, std::int64_t x_stride, float* out, std::int64_t out_stride,
                                   std::int64_t rows, int head_dim, float eps, const float* weight, bool unit_offset,
                                   bool prefetch);

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

inline void normalize_row_scalar(const float* x, float* out, int head_dim, float eps, const float* weight,
                                 bool unit_offset) {
  float lanes[16] = {};
  for (int i = 0; i < head_dim; ++i) lanes[i & 15] += x[i] * x[i];
  const float r = 1.0f / std::sqrt(fold_lanes(lanes) / static_cast<float>(head_dim) + eps);
  for (int i = 0; i < head_dim; ++i) {
    const float w = weight == nullptr ? (unit_offset ? 2.0f : 1.0f) : (unit_offset ? 1.0f + weight[i] : weight[i]);
    out[i] = x[i] * r * w;
  }
}

inline void normalize_rows_scalar(const float* x, std::int64_t x_stride, float* out, std::int64_t out_stride,
                                  std::int64_t rows, int head_dim, float eps, const float* weight, bool unit_offset,
                                  bool /*prefetch*/) {
  for (std::int64_t j = 0; j < rows; ++j)
    normalize_row_scalar(x + j * x_stride, out + j * out_stride, head_dim, eps, weight, unit_offset);
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

// Rows normalised Group at a time: the sum of squares of one row is a chain of dependent
// additions (one per 16 channels), then a fold, a division and a square root, so a row alone is
// bound by latency; Group independent chains overlap, and each weight vector is loaded once for
// the Group rows. Every row keeps its own order of operations, so the bits are those of one row
// at a time. Rows are read before any of them is written (out rows are x's rows or disjoint).
template <int Group, bool Prefetch>
__attribute__((always_inline)) inline void normalize_group(const float* x, std::int64_t x_stride, float* out,
                                                           std::int64_t out_stride, int head_dim, float eps,
                                                           const float* weight, bool unit_offset) {
  float r[Group];
  if constexpr (Group == 4) {  // 1 / sqrt(mean + eps) of the four rows in one vector of each operation
    float4_lanes mean;
#pragma GCC unroll 4
    for (int g = 0; g < Group; ++g) {
      float16_lanes sum;
      sum_of_squares<Prefetch>(x + g * x_stride, head_dim, sum);
      mean[g] = fold_lanes(sum);
    }
    const float4_lanes inverse = 1.0f / sqrt_lanes(mean / static_cast<float>(head_dim) + eps);
    std::memcpy(r, &inverse, sizeof r);
  } else {
#pragma GCC unroll 8
    for (int g = 0; g < Group; ++g) {
      float16_lanes sum;
      sum_of_squares<Prefetch>(x + g * x_stride, head_dim, sum);
      r[g] = 1.0f / std::sqrt(fold_lanes(sum) / static_cast<float>(head_dim) + eps);
    }
  }
  const float constant_weight = unit_offset ? 2.0f : 1.0f, offset = unit_offset ? 1.0f : 0.0f;
  int i = 0;
  for (; i + 16 <= head_dim; i += 16) {
    float16_lanes w;
    if (weight != nullptr) {
      std::memcpy(&w, weight + i, sizeof w);
      w += offset;
    }
#pragma GCC unroll 8
    for (int g = 0; g < Group; ++g) {
      float16_lanes v;
      std::memcpy(&v, x + g * x_stride + i, sizeof v);
      v = weight == nullptr ? v * r[g] * constant_weight : v * r[g] * w;
      std::memcpy(out + g * out_stride + i, &v, sizeof v);
    }
  }
  for (; i < head_dim; ++i)
    for (int g = 0; g < Group; ++g)
      out[g * out_stride + i] =
          x[g * x_stride + i] * r[g] * (weight == nullptr ? constant_weight : weight[i] + offset);
}

// `rows` rows, x + j * x_stride normalised into out + j * out_stride.
template <bool Prefetch>
__attribute__((always_inline)) inline void normalize_rows_body(const float* x, std::int64_t x_stride, float* out,
                                                                std::int64_t out_stride, std::int64_t rows,
                                                                int head_dim, float eps, const float* weight,
                                                                bool unit_offset) {
  constexpr int group = 4;
  std::int64_t j = 0;
  for (; j + group <= rows; j += group)
    normalize_group<group, Prefetch>(x + j * x_stride, x_stride, out + j * out_stride, out_stride, head_dim, eps,
                                     weight, unit_offset);
  for (; j < rows; ++j)
    normalize_group<1, Prefetch>(x + j * x_stride, x_stride, out + j * out_stride, out_stride, head_dim, eps, weight,
                                 unit_offset);
}

// The body of every family's entry: the prefetching form and the plain one.
__attribute__((always_inline)) inline void normalize_rows_either(const float* x, std::int64_t x_stride, float* out,
                                                                  std::int64_t out_stride, std::int64_t rows,
                                                                  int head_dim, float eps, const float* weight,
                                                                  bool unit_offset, bool prefetch) {
  if (prefetch) return normalize_rows_body<true>(x, x_stride, out, out_stride, rows, head_dim, eps, weight, unit_offset);
  normalize_rows_body<false>(x, x_stride, out, out_stride, rows, head_dim, eps, weight, unit_offset);
}

inline void normalize_rows_baseline(const float* x, std::int64_t x_stride, float* out, std::int64_t out_stride,
                                    std::int64_t rows, int head_dim, float eps, const float* weight,
                                    bool unit_offset, bool prefetch) {
  normalize_rows_either(x, x_stride, out, out_stride, rows, head_dim, eps, weight, unit_offset, prefetch);
}
#endif

#if ROPEX_KERNELS_X86
__attribute__((target("avx2,fma"))) inline void normalize_rows_avx2(const float* x, std::int64_t x_stride, float* out,
                                                                     std::int64_t out_stride, std::int64_t rows,
                                                                     int head_dim, float eps, const float* weight,
                                                                     bool unit_offset, bool prefetch) {
  normalize_rows_either(x, x_stride, out, out_stride, rows, head_dim, eps, weight, unit_offset, prefetch);
}
__attribute__((target("avx512f,avx512bw,avx512vl,avx512dq,avx2,fma"))) inline void normalize_rows_avx512(
    const float* x, std::int64_t x_stride, float* out, std::int64_t out_stride, std::int64_t rows, int head_dim,
    float eps, const float* weight, bool unit_offset, bool prefetch) {
  normalize_rows_either(x, x_stride, out, out_stride, rows, head_dim, eps, weight, unit_offset, prefetch);
}
#endif

inline normalize_rows_fn active_normalize_rows() {
#if ROPEX_KERNELS_X86
  switch (kernels::active_isa()) {
    case kernels::isa::avx512: return normalize_rows_avx512;
    case kernels::isa::avx2: return normalize_rows_avx2;
    default: break;
  }
#endif
#if defined(__GNUC__)
  return normalize_rows_baseline;
#else
  return normalize_rows_scalar;
#endif
}

}  // namespace ropex::detail
