// Private: the AVX-512 softmax row (attention_simd_level() == 2): detail/fast_exp.hpp's method with
// the 2^k scaling done by vscalefps (one instruction, one rounding, subnormal results included)
// and the cutoff / zeroing by a mask, so ~21 operations per 16 exponentials instead of ~30 in the
// portable body; tails are masked vectors. Same passes, error bound and special values as
// softmax_kernel.hpp (max, exp and sum, scale).
#pragma once
#ifndef ROPEX_INSIDE
#error "ropex/attention/detail/avx512_softmax.hpp is private; include <ropex/attention.hpp>"
#endif

#include <cstdint>
#include <limits>

#include "ropex/attention/detail/fast_exp.hpp"
#include "ropex/kernels/arch.hpp"

#if ROPEX_KERNELS_X86
ROPEX_BEGIN_TARGET_AVX512
// GCC 12's wrappers start from _mm512_undefined_*(), which -W(maybe-)uninitialized reports once
// inlined; every lane they return is defined.
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#pragma GCC diagnostic ignored "-Wuninitialized"
#endif
namespace ropex::detail::avx512 {

// exp(x - max) lane by lane; NaN stays NaN, d < -104 (and -inf) gives 0.
__attribute__((always_inline)) inline __m512 exp_difference(__m512 x, __m512 max) {
  const __m512 d = _mm512_sub_ps(x, max);
  const __m512 bb = _mm512_sub_ps(d, x);
  const __m512 err = _mm512_add_ps(_mm512_sub_ps(x, _mm512_sub_ps(d, bb)), _mm512_sub_ps(_mm512_setzero_ps(), _mm512_add_ps(max, bb)));
  const __m512 dc = _mm512_max_ps(d, _mm512_set1_ps(exp_cutoff));  // NaN -> the cutoff: k stays finite
  const __m512 k = _mm512_roundscale_ps(_mm512_mul_ps(dc, _mm512_set1_ps(exp_log2e)), _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
  __m512 r = _mm512_fnmadd_ps(k, _mm512_set1_ps(exp_ln2_hi), dc);
  r = _mm512_fnmadd_ps(k, _mm512_set1_ps(exp_ln2_lo), r);
  r = _mm512_add_ps(r, err);
  __m512 p = _mm512_fmadd_ps(_mm512_set1_ps(exp_c6), r, _mm512_set1_ps(exp_c5));
  p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(exp_c4));
  p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(exp_c3));
  p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(exp_c2));
  const __m512 y = _mm512_add_ps(_mm512_fmadd_ps(_mm512_mul_ps(r, r), p, r), _mm512_set1_ps(1.0f));
  const __mmask16 keep = _mm512_cmp_ps_mask(d, _mm512_set1_ps(exp_cutoff), _CMP_NLT_UQ);  // d >= cutoff or NaN
  return _mm512_maskz_scalef_ps(keep, y, k);
}

inline void softmax_row(const float* x, float* y, std::int64_t n) {
  const float neg_inf = -std::numeric_limits<float>::infinity();
  const std::int64_t body = n - n % 16;
  const __mmask16 tail = static_cast<__mmask16>((1u << (n - body)) - 1);
  // 1. max (NaN never wins: vmaxps returns its second operand when one is NaN).
  __m512 m0 = _mm512_set1_ps(neg_inf), m1 = m0, m2 = m0, m3 = m0;
  std::int64_t i = 0;
  for (; i + 64 <= body; i += 64) {
    m0 = _mm512_max_ps(_mm512_loadu_ps(x + i), m0);
    m1 = _mm512_max_ps(_mm512_loadu_ps(x + i + 16), m1);
    m2 = _mm512_max_ps(_mm512_loadu_ps(x + i + 32), m2);
    m3 = _mm512_max_ps(_mm512_loadu_ps(x + i + 48), m3);
  }
  for (; i < body; i += 16) m0 = _mm512_max_ps(_mm512_loadu_ps(x + i), m0);
  if (tail) m0 = _mm512_max_ps(_mm512_mask_loadu_ps(_mm512_set1_ps(neg_inf), tail, x + body), m0);
  const float max = _mm512_reduce_max_ps(_mm512_max_ps(_mm512_max_ps(m0, m1), _mm512_max_ps(m2, m3)));
  if (max == neg_inf) {  // all masked: zeros
    for (i = 0; i < n; ++i) y[i] = 0.0f;
    return;
  }
  // 2. exponentials, stored, and their sum (pairs in float, then double).
  const __m512 vmax = _mm512_set1_ps(max);
  __m512d s_lo = _mm512_setzero_pd(), s_hi = _mm512_setzero_pd();
  auto add = [&](__m512 v) {
    s_lo = _mm512_add_pd(s_lo, _mm512_cvtps_pd(_mm512_castps512_ps256(v)));
    s_hi = _mm512_add_pd(s_hi, _mm512_cvtps_pd(_mm256_castpd_ps(_mm512_extractf64x4_pd(_mm512_castps_pd(v), 1))));
  };
  for (i = 0; i + 32 <= body; i += 32) {
    const __m512 a = exp_difference(_mm512_loadu_ps(x + i), vmax);
    const __m512 b = exp_difference(_mm512_loadu_ps(x + i + 16), vmax);
    _mm512_storeu_ps(y + i, a);
    _mm512_storeu_ps(y + i + 16, b);
    add(_mm512_add_ps(a, b));
  }
  for (; i < body; i += 16) {
    const __m512 a = exp_difference(_mm512_loadu_ps(x + i), vmax);
    _mm512_storeu_ps(y + i, a);
    add(a);
  }
  if (tail) {
    const __m512 a = _mm512_maskz_mov_ps(tail, exp_difference(_mm512_maskz_loadu_ps(tail, x + body), vmax));
    _mm512_mask_storeu_ps(y + body, tail, a);
    add(a);
  }
  // 3. scale by the reciprocal of the sum.
  const __m512 inv = _mm512_set1_ps(static_cast<float>(1 / _mm512_reduce_add_pd(_mm512_add_pd(s_lo, s_hi))));
  for (i = 0; i < body; i += 16) _mm512_storeu_ps(y + i, _mm512_mul_ps(_mm512_loadu_ps(y + i), inv));
  if (tail) _mm512_mask_storeu_ps(y + body, tail, _mm512_mul_ps(_mm512_maskz_loadu_ps(tail, y + body), inv));
}

}  // namespace ropex::detail::avx512
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC diagnostic pop
#endif
ROPEX_END_TARGET
#endif
