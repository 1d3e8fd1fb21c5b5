// Private: the softmax row kernel behind softmax.hpp: AVX-512 intrinsics at level 2
// (detail/avx512_softmax.hpp), else this body, written once with vector extensions and compiled
// for AVX2+FMA and the baseline (SSE2 / Advanced SIMD); the level comes from
// attention_simd_level(), once per process. Three passes over the row, as a streaming softmax must:
//   1. max (four independent vector maxima, so the max latency does not serialise the pass);
//   2. e_i = exp(x_i - max) (detail/fast_exp.hpp), stored, and their sum: pairs of vectors added
//      in float (one rounding, <= u relative for positive terms), then converted to double exactly;
//   3. y_i = e_i * float(1 / sum).
// Tails (n mod N) go through the scalar twins. Nothing allocates or throws.
#pragma once
#ifndef ROPEX_INSIDE
#error "ropex/attention/detail/softmax_kernel.hpp is private; include <ropex/attention.hpp>"
#endif

#include <cstdint>
#include <cstring>
#include <limits>

#include "ropex/attention/detail/avx512_softmax.hpp"
#include "ropex/attention/detail/fast_exp.hpp"
#include "ropex/attention/detail/simd_level.hpp"

namespace ropex::detail {

inline constexpr float softmax_neg_inf = -std::numeric_limits<float>::infinity();

#if defined(__GNUC__)
template <int N>
__attribute__((always_inline)) inline void softmax_body(const float* x, float* y, std::int64_t n) {
  const std::int64_t body = n - n % N;
  // 1. max; NaN never wins a comparison, as in the scalar loop (NaN rows come out NaN from pass 2).
  vfloat<N> m0 = vfloat<N>{} + softmax_neg_inf, m1 = m0, m2 = m0, m3 = m0;
  std::int64_t i = 0;
  for (; i + 4 * N <= body; i += 4 * N) {
    vfloat<N> a, b, c, d;
    std::memcpy(&a, x + i, sizeof a);
    std::memcpy(&b, x + i + N, sizeof b);
    std::memcpy(&c, x + i + 2 * N, sizeof c);
    std::memcpy(&d, x + i + 3 * N, sizeof d);
    m0 = a > m0 ? a : m0;
    m1 = b > m1 ? b : m1;
    m2 = c > m2 ? c : m2;
    m3 = d > m3 ? d : m3;
  }
  for (; i < body; i += N) {
    vfloat<N> a;
    std::memcpy(&a, x + i, sizeof a);
    m0 = a > m0 ? a : m0;
  }
  m0 = m1 > m0 ? m1 : m0;
  m2 = m3 > m2 ? m3 : m2;
  m0 = m2 > m0 ? m2 : m0;
  float max = softmax_neg_inf;
  for (int k = 0; k < N; ++k) max = m0[k] > max ? m0[k] : max;
  for (i = body; i < n; ++i) max = x[i] > max ? x[i] : max;
  if (max == softmax_neg_inf) {  // all masked (or n == 0): defined as zeros
    for (i = 0; i < n; ++i) y[i] = 0.0f;
    return;
  }
  // 2. exponentials and their sum.
  vdouble<N> sum = {};
  for (i = 0; i + 2 * N <= body; i += 2 * N) {
    vfloat<N> a, b, ea, eb;
    std::memcpy(&a, x + i, sizeof a);
    std::memcpy(&b, x + i + N, sizeof b);
    exp_difference_vec<N>(a, max, ea);
    exp_difference_vec<N>(b, max, eb);
    std::memcpy(y + i, &ea, sizeof ea);
    std::memcpy(y + i + N, &eb, sizeof eb);
    sum += __builtin_convertvector(ea + eb, vdouble<N>);
  }
  for (; i < body; i += N) {
    vfloat<N> a, ea;
    std::memcpy(&a, x + i, sizeof a);
    exp_difference_vec<N>(a, max, ea);
    std::memcpy(y + i, &ea, sizeof ea);
    sum += __builtin_convertvector(ea, vdouble<N>);
  }
  double total = 0;
  for (int k = 0; k < N; ++k) total += sum[k];
  for (i = body; i < n; ++i) {
    y[i] = exp_difference(x[i], max);
    total += y[i];
  }
  // 3. scale.
  const float inv = static_cast<float>(1 / total);
  for (i = 0; i < body; i += N) {
    vfloat<N> e;
    std::memcpy(&e, y + i, sizeof e);
    e *= inv;
    std::memcpy(y + i, &e, sizeof e);
  }
  for (i = body; i < n; ++i) y[i] *= inv;
}

#if defined(ROPEX_ATTENTION_X86_DISPATCH)
__attribute__((target("avx2,fma"))) inline void softmax_avx2(const float* x, float* y, std::int64_t n) {
  softmax_body<8>(x, y, n);
}
#endif
#endif  // __GNUC__

// x and y may be the same row (in place); other overlap is not allowed.
inline void softmax_row(const float* x, float* y, std::int64_t n) {
  if (n <= 0) return;  // also keeps GCC's -Warray-bounds quiet about softmax(nullptr, 0)
#if defined(ROPEX_ATTENTION_X86_DISPATCH)
  switch (attention_simd_level()) {
    case 2: return avx512::softmax_row(x, y, n);
    case 1: return softmax_avx2(x, y, n);
    default: break;
  }
#endif
#if defined(__GNUC__)
  softmax_body<4>(x, y, n);  // SSE2 / Advanced SIMD registers
#else
  float max = softmax_neg_inf;
  for (std::int64_t i = 0; i < n; ++i) max = x[i] > max ? x[i] : max;
  if (max == softmax_neg_inf) {
    for (std::int64_t i = 0; i < n; ++i) y[i] = 0.0f;
    return;
  }
  double total = 0;
  for (std::int64_t i = 0; i < n; ++i) total += (y[i] = exp_difference(x[i], max));
  const float inv = static_cast<float>(1 / total);
  for (std::int64_t i = 0; i < n; ++i) y[i] *= inv;
#endif
}

}  // namespace ropex::detail
