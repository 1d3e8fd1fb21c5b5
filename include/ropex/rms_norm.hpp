// Per-head RMSNorm of q and k (Qwen3, Gemma 3/4, OLMo 2 normalise every head row before RoPE):
// y = x / sqrt(mean(x^2) + eps) * w over the head_dim channels of each (token, head) row, in float.
// 16-bit rows are widened, normalised and weighted in float, then rounded to T once. Gemma's HF
// RMSNorm does the same (its float result times 1 + weight, one cast), so the two agree but where
// the order of the sum of squares tips a rounding. HF's Qwen3RMSNorm rounds twice: the normalised
// value is cast to the input dtype before it is multiplied by the (bf16) weight; ropex's result can
// then differ from Qwen3's by one unit in the last place of T (tests/test_fused.cpp holds both).
#pragma once

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <type_traits>

#include "ropex/config.hpp"
#include "ropex/detail/check.hpp"
#include "ropex/detail/norm_kernels.hpp"
#include "ropex/kernels/prefetch.hpp"
#include "ropex/kernels/rotation_batch.hpp"
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

// Every (token, head) row of `from` converted into the same row of `to` by the active family's
// exact conversions (widening to float, or rounding float to T: the bits of load / store<T>).
template <class From, class To>
void convert_rows(const tensor_view<From>& from, const tensor_view<To>& to, int d) {
  static_assert(std::is_same_v<From, float> != std::is_same_v<To, float>, "one side is float");
  const auto convert = [] {
    if constexpr (std::is_same_v<From, float>) return kernels::active_kernels<To>().from_float;
    else return kernels::active_kernels<From>().to_float;
  }();
  for (std::int64_t t = 0; t < from.tokens; ++t)
    for (std::int64_t h = 0; h < from.heads; ++h)
      convert(from.data + t * from.token_stride + h * from.head_stride, to.data + t * to.token_stride + h * to.head_stride,
              static_cast<std::size_t>(d));
}

// Every (token, head) row of `from` normalised into the same row of `to`, in float: float rows
// straight from `from` (`to` may be `from` itself: in place), 16-bit rows widened into `to` first
// and normalised there. The kernel takes a run of rows at a time (more rows in flight), in memory
// order: a token's heads in a token-major view, a head's tokens in a head-major one, unless that
// run is shorter than 4 rows and the other is longer.
// prefetch: the rows stream from memory (the normalize_rows_fn argument).
template <class T>
void normalize_rows(normalize_rows_fn kernel, const tensor_view<T>& from, const tensor_view<float>& to, int d,
                    const rms_norm& norm, bool prefetch) {
  if constexpr (!std::is_same_v<T, float>) {
    convert_rows(from, to, d);
    normalize_rows(kernel, to, to, d, norm, false);
  } else {
    const float eps = static_cast<float>(norm.eps);
    const bool token_major = from.head_stride <= from.token_stride;
    const std::int64_t inner = token_major ? from.heads : from.tokens, outer = token_major ? from.tokens : from.heads;
    if (token_major == (inner >= 4 || inner >= outer)) {
      for (std::int64_t t = 0; t < from.tokens; ++t)
        kernel(from.data + t * from.token_stride, from.head_stride, to.data + t * to.token_stride, to.head_stride,
               from.heads, d, eps, norm.weight, norm.unit_offset, prefetch);
    } else {
      for (std::int64_t h = 0; h < from.heads; ++h)
        kernel(from.data + h * from.head_stride, from.token_stride, to.data + h * to.head_stride, to.token_stride,
               from.tokens, d, eps, norm.weight, norm.unit_offset, prefetch);
    }
  }
}

// `norm` as the rotation kernels fold it into their loads (kernels/rotation_batch.hpp's row_norm;
// the caller sets inv_rms). Its head_dim factors (norm_factor's) are the weights themselves or,
// under unit_offset or without weights, formed once a call into `factors`, where the head loops
// would otherwise add the offset again for every head (a fifth of a decode step's vector arithmetic).
inline kernels::row_norm folded_norm(const rms_norm& norm, int head_dim, float* factors) {
  const float eps = static_cast<float>(norm.eps);
  if (norm.weight != nullptr && !norm.unit_offset) return {nullptr, norm.weight, eps, head_dim};
  int i = 0;
#if defined(__GNUC__)
  for (; i + 16 <= head_dim; i += 16) {  // 16 lanes: a decode step's 128 factors in 8 steps
    lanes16<16> w;  // this code is compiled for the baseline: its 16-byte registers
    set_lanes(w, norm_factor(nullptr, 0, norm.unit_offset));
    if (norm.weight != nullptr) {  // under unit_offset: 1 + weight
      load_lanes(w, norm.weight + i);
      add_to_lanes(w, 1.0f);
    }
    store_lanes(factors + i, w);
  }
#endif
  for (; i < head_dim; ++i) factors[i] = norm_factor(norm.weight, i, norm.unit_offset);
  return {nullptr, factors, eps, head_dim};
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
  const detail::normalize_rows_fn kernel = detail::active_normalize_rows();
  if constexpr (std::is_same_v<T, float>) {
    // In place: the kernel reads its rows before writing them.
    const bool prefetch = kernels::worth_prefetching(double(x.tokens) * double(x.heads) * head_dim * sizeof(float));
    detail::normalize_rows(kernel, x, x, head_dim, norm, prefetch);
  } else {
    // Rounded back by the family's conversion (the bits of detail::store<T>).
    float row[detail::max_norm_dim];
    for (std::int64_t t = 0; t < x.tokens; ++t)
      for (std::int64_t h = 0; h < x.heads; ++h) {
        const tensor_view<T> one{x.data + t * x.token_stride + h * x.head_stride, 1, 1, 0, 0};
        const tensor_view<float> widened{row, 1, 1, 0, 0};
        detail::normalize_rows(kernel, one, widened, head_dim, norm, false);
        detail::convert_rows(widened, one, head_dim);
      }
  }
}

namespace detail {
// The row length of a view whose strides say it: the smaller of the strides that step between rows
// (head_stride when there are several heads, token_stride when there are several tokens). With
// one head, token_stride steps between rows that may be longer than a head (the one k head of an
// MQA model inside a fused qkv buffer), so head_stride, which such a view does not otherwise use,
// must give the row: 0 < head_stride <= token_stride (contiguous_view sets it to head_dim).
// A head-major one-head tensor, whose head_stride spans all its tokens, reads token_stride.
// Returns 0 when the strides do not say it.
template <class T>
std::int64_t row_length_of(const tensor_view<T>& x) {
  if (x.heads > 1 && x.tokens > 1) {
    if (x.token_stride <= 0) return x.head_stride;
    return std::min(x.head_stride, x.token_stride);
  }
  if (x.heads > 1) return x.token_stride > 0 && x.token_stride < x.head_stride ? x.token_stride : x.head_stride;
  if (x.tokens == 1) return 0;
  if (x.head_stride > 0 && x.head_stride <= x.token_stride) return x.head_stride;
  if (x.token_stride > 0 && x.head_stride >= x.tokens * x.token_stride) return x.token_stride;
  return 0;
}
}  // namespace detail

// The same with the row length read off the view (detail::row_length_of): head_dim for contiguous
// tensors, q/k slices of a fused qkv buffer (a one-head slice must set head_stride = head_dim) and
// head-major tensors. A view whose strides do not say it is rejected: pass head_dim.
template <class T>
void rms_norm_heads(tensor_view<T> x, const rms_norm& norm) {
  if (x.tokens <= 0 || x.heads <= 0) {  // nothing to normalise; still report bad arguments
    detail::validate_rms_norm(norm, "norm");
    detail::validate_view(x, 1, "x");
    return;
  }
  if (x.tokens == 1 && x.heads == 1)
    detail::fail("x", "has one row, so its head_dim cannot be read off the strides: pass head_dim");
  const std::int64_t inner = detail::row_length_of(x);
  if (inner == 0)
    detail::fail("x.head_stride", "of a one-head view must give its head_dim (0 < head_stride <= token_stride, got " +
                                      std::to_string(x.head_stride) + " with token_stride " +
                                      std::to_string(x.token_stride) + "): set it, or pass head_dim");
  if (inner < 0 || inner > detail::max_norm_dim)
    detail::fail("x", "strides do not give a head_dim in [1, 1024] (inner stride " + std::to_string(inner) +
                          "): pass head_dim");
  rms_norm_heads(x, norm, static_cast<int>(inner));
}

}  // namespace ropex
