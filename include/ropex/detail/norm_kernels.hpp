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

#include "ropex/detail/inverse_rms.hpp"
#include "ropex/kernels/arch.hpp"
#include "ropex/kernels/dispatch.hpp"

namespace ropex::detail {

// Rows j < rows, x + j * x_stride into out + j * out_stride: out[i] = x[i] * r * w[i] with
// r = 1 / sqrt(mean(x^2) + eps); w = weight, 1 + weight (unit_offset), or ones when weight is null
// (then 2 under unit_offset). An out row is its x row (in place) or disjoint from every x row.
// prefetch: rows stream from memory (kernels/prefetch.hpp's worth_prefetching of the call's bytes),
// so each line norm_prefetch_floats ahead of the one read is prefetched.
using normalize_rows_fn = void (*)(const float* x, std::int64_t x_stride, float* out, std::int64_t out_stride,
                                   std::int64_t rows, int head_dim, float eps, const float* weight, bool unit_offset,
                                   bool prefetch);

// The factor channel i is multiplied by after r: the weight as stored (a weight of -0 keeps its
// sign, as in PyTorch's x * w), 1 + weight under unit_offset, 1 or 2 without weights.
inline float norm_factor(const float* weight, int i, bool unit_offset) {
  if (weight == nullptr) return unit_offset ? 2.0f : 1.0f;
  return unit_offset ? 1.0f + weight[i] : weight[i];
}

inline void normalize_row_scalar(const float* x, float* out, int head_dim, float eps, const float* weight,
                                 bool unit_offset) {
  const float r = inverse_rms_scalar(x, head_dim, eps);
  for (int i = 0; i < head_dim; ++i) out[i] = x[i] * r * norm_factor(weight, i, unit_offset);
}

inline void normalize_rows_scalar(const float* x, std::int64_t x_stride, float* out, std::int64_t out_stride,
                                  std::int64_t rows, int head_dim, float eps, const float* weight, bool unit_offset,
                                  bool /*prefetch*/) {
  for (std::int64_t j = 0; j < rows; ++j)
    normalize_row_scalar(x + j * x_stride, out + j * out_stride, head_dim, eps, weight, unit_offset);
}

#if defined(__GNUC__)
// Rows x + g * x_stride, g < rows, scaled into out + g * out_stride by their inverse RMS r[g] and
// norm_factor's factors, each weight vector loaded once for all the rows. The rows were read (their
// r formed) before any of them is written (out rows are x's rows or disjoint).
template <int Bytes>
__attribute__((always_inline)) inline void scale_rows(const float* x, std::int64_t x_stride, float* out,
                                                       std::int64_t out_stride, std::int64_t rows, int head_dim,
                                                       const float* r, const float* weight, bool unit_offset) {
  int i = 0;
  for (; i + 16 <= head_dim; i += 16) {
    // Without weights, every lane's factor is norm_factor's constant: the same products.
    lanes16<Bytes> w;
    set_lanes(w, norm_factor(nullptr, 0, unit_offset));
    if (weight != nullptr) {
      load_lanes(w, weight + i);
      if (unit_offset) add_to_lanes(w, 1.0f);
    }
    for (std::int64_t g = 0; g < rows; ++g) {
      lanes16<Bytes> v;
      load_lanes(v, x + g * x_stride + i);
      scale_lanes(v, r[g], w);
      store_lanes(out + g * out_stride + i, v);
    }
  }
  for (; i < head_dim; ++i)
    for (std::int64_t g = 0; g < rows; ++g)
      out[g * out_stride + i] = x[g * x_stride + i] * r[g] * norm_factor(weight, i, unit_offset);
}

// `rows` rows, x + j * x_stride normalised into out + j * out_stride, 16 rows at a time: first the
// inverse RMS of all 16, then their scaling. A row's sum, fold, square root and division are a
// chain of latencies that its multiplies wait on; forming 16 rows' r before any multiply lets those
// chains overlap, where a group of 4 normalised in turn left each group waiting on its own (one
// token of Qwen3-8B shapes in L1, Zen 5: rms_norm_heads + apply 0.50-0.545 -> 0.44-0.47 us). Each row
// keeps its own order of operations, so the bits are unchanged.
template <bool Prefetch, int Bytes>
__attribute__((always_inline)) inline void normalize_rows_body(const float* x, std::int64_t x_stride, float* out,
                                                                std::int64_t out_stride, std::int64_t rows,
                                                                int head_dim, float eps, const float* weight,
                                                                bool unit_offset) {
  constexpr std::int64_t chunk = 16;
  float r[chunk];
  for (std::int64_t j = 0; j < rows; j += chunk) {
    const std::int64_t n = rows - j < chunk ? rows - j : chunk;
    inverse_rms_rows<Prefetch, Bytes>(x + j * x_stride, x_stride, n, head_dim, eps, r);
    scale_rows<Bytes>(x + j * x_stride, x_stride, out + j * out_stride, out_stride, n, head_dim, r, weight, unit_offset);
  }
}

// The body of every family's entry: the prefetching form and the plain one, for a family whose
// registers are Bytes wide.
template <int Bytes>
__attribute__((always_inline)) inline void normalize_rows_either(const float* x, std::int64_t x_stride, float* out,
                                                                  std::int64_t out_stride, std::int64_t rows,
                                                                  int head_dim, float eps, const float* weight,
                                                                  bool unit_offset, bool prefetch) {
  if (prefetch)
    return normalize_rows_body<true, Bytes>(x, x_stride, out, out_stride, rows, head_dim, eps, weight, unit_offset);
  normalize_rows_body<false, Bytes>(x, x_stride, out, out_stride, rows, head_dim, eps, weight, unit_offset);
}

inline void normalize_rows_baseline(const float* x, std::int64_t x_stride, float* out, std::int64_t out_stride,
                                    std::int64_t rows, int head_dim, float eps, const float* weight,
                                    bool unit_offset, bool prefetch) {
  normalize_rows_either<16>(x, x_stride, out, out_stride, rows, head_dim, eps, weight, unit_offset, prefetch);
}
#endif

#if ROPEX_KERNELS_X86
__attribute__((target("avx2,fma"))) inline void normalize_rows_avx2(const float* x, std::int64_t x_stride, float* out,
                                                                     std::int64_t out_stride, std::int64_t rows,
                                                                     int head_dim, float eps, const float* weight,
                                                                     bool unit_offset, bool prefetch) {
  normalize_rows_either<32>(x, x_stride, out, out_stride, rows, head_dim, eps, weight, unit_offset, prefetch);
}
__attribute__((target("avx512f,avx512bw,avx512vl,avx512dq,avx2,fma"))) inline void normalize_rows_avx512(
    const float* x, std::int64_t x_stride, float* out, std::int64_t out_stride, std::int64_t rows, int head_dim,
    float eps, const float* weight, bool unit_offset, bool prefetch) {
  normalize_rows_either<64>(x, x_stride, out, out_stride, rows, head_dim, eps, weight, unit_offset, prefetch);
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
