// Private: the RMSNorm row loops of rms_norm.hpp, written once with GCC/Clang vector extensions
// over 16 float lanes and compiled for AVX-512, for AVX2+FMA and for the baseline (SSE2, or
// Advanced SIMD on aarch64); the family is chosen once per call from the kernels' own choice
// (kernels/dispatch.hpp, so ROPEX_ISA caps it too), never per row.
#pragma once
#ifndef ROPEX_INSIDE
#error "ropex/detail/norm_kernels.hpp is private; include <ropex/ropex.hpp>"
#endif

#include <cmath>
#include <cstring>

#include "ropex/kernels/arch.hpp"
#include "ropex/kernels/dispatch.hpp"

namespace ropex::detail {

// One row: out[i] = x[i] * r * w[i] with r = 1 / sqrt(mean(x^2) + eps); w = weight, 1 + weight
// (unit_offset), or ones when weight is null (then 2 under unit_offset).
using normalize_row_fn = void (*)(const float* x, float* out, int head_dim, float eps, const float* weight,
                                  bool unit_offset);

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

__attribute__((always_inline)) inline void normalize_row_body(const float* x, float* out, int head_dim, float eps,
                                                               const float* weight, bool unit_offset) {
  float16_lanes sum = {};
  int i = 0;
  for (; i + 16 <= head_dim; i += 16) {
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
  const float r = 1.0f / std::sqrt(fold_lanes(sum) / static_cast<float>(head_dim) + eps);
  const float constant_weight = unit_offset ? 2.0f : 1.0f, offset = unit_offset ? 1.0f : 0.0f;
  i = 0;
  for (; i + 16 <= head_dim; i += 16) {
    float16_lanes v, w;
    std::memcpy(&v, x + i, sizeof v);
    if (weight == nullptr) {
      v = v * r * constant_weight;
    } else {
      std::memcpy(&w, weight + i, sizeof w);
      v = v * r * (w + offset);
    }
    std::memcpy(out + i, &v, sizeof v);
  }
  for (; i < head_dim; ++i) out[i] = x[i] * r * (weight == nullptr ? constant_weight : weight[i] + offset);
}

inline void normalize_row_baseline(const float* x, float* out, int head_dim, float eps, const float* weight,
                                   bool unit_offset) {
  normalize_row_body(x, out, head_dim, eps, weight, unit_offset);
}
#endif

#if ROPEX_KERNELS_X86
__attribute__((target("avx2,fma"))) inline void normalize_row_avx2(const float* x, float* out, int head_dim, float eps,
                                                                    const float* weight, bool unit_offset) {
  normalize_row_body(x, out, head_dim, eps, weight, unit_offset);
}
__attribute__((target("avx512f,avx512bw,avx512vl,avx512dq,avx2,fma"))) inline void normalize_row_avx512(
    const float* x, float* out, int head_dim, float eps, const float* weight, bool unit_offset) {
  normalize_row_body(x, out, head_dim, eps, weight, unit_offset);
}
#endif

inline normalize_row_fn active_normalize_row() {
#if ROPEX_KERNELS_X86
  switch (kernels::active_isa()) {
    case kernels::isa::avx512: return normalize_row_avx512;
    case kernels::isa::avx2: return normalize_row_avx2;
    default: break;
  }
#endif
#if defined(__GNUC__)
  return normalize_row_baseline;
#else
  return normalize_row_scalar;
#endif
}

}  // namespace ropex::detail
