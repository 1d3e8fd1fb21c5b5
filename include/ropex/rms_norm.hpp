// Per-head RMSNorm of q and k (Qwen3, Gemma 3/4, OLMo 2 normalise every head row before RoPE):
// y = x / sqrt(mean(x^2) + eps) * w over the head_dim channels of each (token, head) row, in float.
#pragma once

#include <cmath>
#include <cstdint>

#include "ropex/config.hpp"
#include "ropex/detail/check.hpp"
#include "ropex/types.hpp"
#include "ropex/view.hpp"

namespace ropex {

struct rms_norm {
  const float* weight = nullptr;  // head_dim weights; nullptr = all ones
  double eps = 1e-6;
  bool unit_offset = false;  // Gemma: x * (1 + weight)
};

namespace detail {
inline constexpr int max_norm_dim = 1024;

inline void validate_rms_norm(const rms_norm& norm, const char* name) {
  if (!(std::isfinite(norm.eps) && norm.eps >= 0))
    fail(std::string(name) + ".eps", "must be finite and >= 0 (got " + std::to_string(norm.eps) + ")");
}

// 1 / sqrt(mean(x^2) + eps) of one row, in float. The sum of squares has one fixed order so that
// every kernel can reproduce it bit for bit: 16 lanes, lane j accumulating the rounded squares of
// channels j, j+16, ..., then folded in halves (16 -> 8 -> 4 -> 2 -> 1), as one 512-bit register
// (or two 256-bit, four 128-bit ones) does it. Square and sum are rounded separately (no fused
// multiply-add): the portable build has no FMA instruction, and a library fmaf per value would
// cost more than the memory traffic.
template <class T>
float inverse_rms(const T* x, int head_dim, float eps) {
  float lanes[16] = {};
  int i = 0;
  for (; i + 16 <= head_dim; i += 16)  // a fixed-width inner loop the compiler vectorises
    for (int j = 0; j < 16; ++j) {
      const float v = load(x[i + j]);
      lanes[j] += v * v;
    }
  for (int j = 0; i + j < head_dim; ++j) {
    const float v = load(x[i + j]);
    lanes[j] += v * v;
  }
  for (int width = 8; width >= 1; width /= 2)
    for (int j = 0; j < width; ++j) lanes[j] += lanes[j + width];
  return 1.0f / std::sqrt(lanes[0] / static_cast<float>(head_dim) + eps);
}

// out[i] = x[i] * r * w[i] (w = weight, 1 + weight, or 1), products rounded in that order.
template <class T>
void normalize_row(const T* x, float* out, int head_dim, const rms_norm& norm) {
  const float r = inverse_rms(x, head_dim, static_cast<float>(norm.eps));
  if (norm.weight == nullptr) {
    const float w = norm.unit_offset ? 2.0f : 1.0f;  // a null weight is all ones, also under 1 + weight
    for (int i = 0; i < head_dim; ++i) out[i] = load(x[i]) * r * w;
  } else if (norm.unit_offset) {
    for (int i = 0; i < head_dim; ++i) out[i] = load(x[i]) * r * (1.0f + norm.weight[i]);
  } else {
    for (int i = 0; i < head_dim; ++i) out[i] = load(x[i]) * r * norm.weight[i];
  }
}
}  // namespace detail

// Every (token, head) row of x normalised in place, the result rounded to T once.
template <class T>
void rms_norm_heads(tensor_view<T> x, const rms_norm& norm, int head_dim) {
  static_assert(is_storage_type_v<T>, "ropex stores float, ropex::float16 or ropex::bfloat16");
  if (head_dim <= 0 || head_dim > detail::max_norm_dim)
    detail::fail("head_dim", "must lie in [1, 1024] (got " + std::to_string(head_dim) + ")");
  detail::validate_rms_norm(norm, "norm");
  detail::validate_view(x, head_dim, "x");
  float row[detail::max_norm_dim];
  for (std::int64_t t = 0; t < x.tokens; ++t)
    for (std::int64_t h = 0; h < x.heads; ++h) {
      T* p = x.data + t * x.token_stride + h * x.head_stride;
      detail::normalize_row(p, row, head_dim, norm);
      for (int i = 0; i < head_dim; ++i) p[i] = detail::store<T>(row[i]);
    }
}

// The same with the row length read off the view: the stride of its inner dimension (head_stride
// when it has several heads and heads are closer than tokens, else token_stride), which is
// head_dim for contiguous tensors, q/k slices of a fused qkv buffer and head-major tensors.
template <class T>
void rms_norm_heads(tensor_view<T> x, const rms_norm& norm) {
  if (x.tokens <= 0 || x.heads <= 0) {  // nothing to normalise; still report bad arguments
    detail::validate_rms_norm(norm, "norm");
    detail::validate_view(x, 1, "x");
    return;
  }
  if (x.tokens == 1 && x.heads == 1)
    detail::fail("x", "has one row, so its head_dim cannot be read off the strides: pass head_dim");
  std::int64_t inner = 0;
  if (x.heads > 1) inner = x.head_stride;
  if (x.tokens > 1 && (inner == 0 || (x.token_stride > 0 && x.token_stride < inner))) inner = x.token_stride;
  if (inner <= 0 || inner > detail::max_norm_dim)
    detail::fail("x", "strides do not give a head_dim in [1, 1024] (inner stride " + std::to_string(inner) +
                          "): pass head_dim");
  rms_norm_heads(x, norm, static_cast<int>(inner));
}

}  // namespace ropex
