// Private: a table-driven float natural logarithm for the AVX-512 entropy / KL / JS reductions
// (detail/avx512_reduce.hpp), and its scalar twin (same operations, same order, same roundings)
// that the tests hold to the error bound below.
//
// Method (the reduction of Tang, "Table-driven implementation of the logarithm function", ACM
// TOMS 1990, with a 32-entry table that fits two AVX-512 registers):
//   x = 2^e m, m in [0.75, 1.5)              getmant(x, [0.75, 1.5)) and getexp(x * 4/3)
//   i = bits 22..18 of m                     m in [1 + i/32, 1 + (i+1)/32) for i < 16,
//                                            m in [0.75 + (i-16)/64, ...) for i >= 16
//   r = m * invc_i - 1 (one FMA)             |r| <= 1/64 (1/32 for i = 0, where invc = 1)
//   ln x = (e ln2 + logc_i) + log1p(r),      logc_i = -ln(invc_i) rounded to float,
//   log1p(r) = r + r^2 (a2 + a3 r + a4 r^2)  minimax-like fit on [-1/64, 1/32] (Chebyshev nodes),
//                                            relative error 1.9e-8 (0.32 ulp of r) at worst.
// invc = 1 and logc = 0 on the two intervals touching m = 1, so near x = 1 the result is log1p of
// an exact r: ln 1 = 0 exactly, and a one-hot row has entropy exactly 0. Centring on [0.75, 1.5)
// keeps e ln2 and log1p(r) from cancelling for x in [0.75, 1).
// The exponent comes from getexp(fma(x, 4/3, FLT_MIN)): float(4/3) = 1.33333337 rounds x up just
// enough that 1.5 * 2^k maps to 2^(k+1) and nothing below it does (a mismatch would be an error of
// ln 2, which the tests would see on every float of [0.375, 1.5)), and + FLT_MIN keeps x = 0
// finite, also under DAZ/FTZ.
//
// Valid range: finite x >= 2^-100. Error (measured against long double by
// tests/attention/test_vector_math.cpp over every float in [0.375, 1.5), every 3rd in [1.5, 3],
// every float of [2^-90, 2^-89] and every 97th float of [2^-100, 2^20]; the test holds it):
//   |table_log(x) - ln x| <= 1e-9 + 2.1 * 2^-24 |ln x|           (about 1 ulp of the result)
// The 2.1 are the rounding of hi = e ln2 + logc_i and of hi + log1p(r); logc_i is within 2e-4 ulp
// of -ln(invc_i) and the polynomial within 0.32 ulp of log1p(r), so near x = 1 the error is
// relative to ln x itself.
// Below 2^-100 (and for subnormals, 0) the result is finite but may be off by ln 2 or more; the
// callers multiply it by x, so such an entry moves a sum by less than 2^-100 * 71 < 6e-29.
// Negative, NaN and infinite x give garbage or NaN; the callers validate those separately.
#pragma once
#ifndef ROPEX_INSIDE
#error "ropex/attention/detail/table_log.hpp is private; include <ropex/attention.hpp>"
#endif

#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>

#include "ropex/kernels/arch.hpp"

namespace ropex::detail {

// invc_i: the float within 600 ulps of 1 / (centre of interval i) whose -ln(invc_i) lies closest to
// a float (Tang's accurate-table trick; within 2e-4 ulp for every i), 1 for i = 0 and 31;
// logc_i = -ln(invc_i) rounded to float. Computed with mpmath at 30 digits; |r| <= 0.957/64 for i != 0.
alignas(64) inline constexpr float log_table_invc[32] = {
    1.000000000e+00f, 9.552043080e-01f, 9.275087118e-01f, 9.013829827e-01f, 8.767418265e-01f, 8.533051610e-01f,
    8.312040567e-01f, 8.100962639e-01f, 7.901558876e-01f, 7.710600495e-01f, 7.529551983e-01f, 7.356563807e-01f,
    7.190728188e-01f, 7.032783628e-01f, 6.881511211e-01f, 6.736566424e-01f, 1.319621682e+00f, 1.292992949e+00f,
    1.267379403e+00f, 1.242700100e+00f, 1.219084024e+00f, 1.196329594e+00f, 1.174247742e+00f, 1.153172135e+00f,
    1.132684112e+00f, 1.113012195e+00f, 1.093976736e+00f, 1.075617909e+00f, 1.057890296e+00f, 1.040705800e+00f,
    1.023967266e+00f, 1.000000000e+00f};
alignas(64) inline constexpr float log_table_logc[32] = {
     0.000000000e+00f,  4.583002627e-02f,  7.525309175e-02f,  1.038250476e-01f,  1.315427125e-01f,
     1.586380452e-01f,  1.848799586e-01f,  2.106021941e-01f,  2.355250269e-01f,  2.599890232e-01f,
     2.837495506e-01f,  3.069921434e-01f,  3.297926486e-01f,  3.520025015e-01f,  3.737468123e-01f,
     3.950347304e-01f, -2.773450911e-01f, -2.569596469e-01f, -2.369513065e-01f, -2.172865123e-01f,
    -1.980997771e-01f, -1.792581975e-01f, -1.606277227e-01f, -1.425165236e-01f, -1.245901361e-01f,
    -1.070700288e-01f, -8.981943876e-02f, -7.289529592e-02f, -5.627663806e-02f, -3.989913687e-02f,
    -2.368455939e-02f,  0.000000000e+00f};
inline constexpr float log1p_a2 = -5.000005364e-01f, log1p_a3 = 3.333787024e-01f, log1p_a4 = -2.454392910e-01f;
inline constexpr float log_four_thirds = 1.33333337306976318359375f;  // float(4/3), rounded up
inline constexpr float log_ln2 = 0.693147182464599609375f;            // float(ln 2), 2.7e-9 relative high

// The scalar twin: bit-identical to log_avx512 below for x >= 2^-100 (frexp/ilogb stand in for
// getmant/getexp, std::fma for the FMAs).
inline float table_log(float x) {
  int k = 0;
  const float f = std::frexp(x, &k);  // x = f 2^k, f in [0.5, 1)
  float m = 2 * f;                    // [1, 2)
  if (m >= 1.5f) m = f;               // [0.75, 1.5), as getmant(x, _MM_MANT_NORM_p75_1p5)
  const float e = static_cast<float>(std::ilogb(std::fma(x, log_four_thirds, std::numeric_limits<float>::min())));
  std::uint32_t bits;
  std::memcpy(&bits, &m, sizeof bits);
  const unsigned i = (bits >> 18) & 31u;
  const float r = std::fma(m, log_table_invc[i], -1.0f);
  float q = std::fma(log1p_a4, r, log1p_a3);
  q = std::fma(q, r, log1p_a2);
  const float r2 = r * r;
  const float hi = std::fma(e, log_ln2, log_table_logc[i]);
  return hi + std::fma(r2, q, r);
}

#if ROPEX_KERNELS_X86
ROPEX_BEGIN_TARGET_AVX512
namespace avx512 {

// The two tables live in four registers for the whole row (vpermt2ps picks by the low 5 index bits).
struct table_log {
  __m512 invc_lo, invc_hi, logc_lo, logc_hi;
  table_log()
      : invc_lo(_mm512_load_ps(log_table_invc)), invc_hi(_mm512_load_ps(log_table_invc + 16)),
        logc_lo(_mm512_load_ps(log_table_logc)), logc_hi(_mm512_load_ps(log_table_logc + 16)) {}

  // 13 operations: 3 on port 0 only (getexp, getmant, shift), 2 on port 5 only (vpermt2ps), 8 FMA/add.
  __attribute__((always_inline)) __m512 operator()(__m512 x) const {
    // The maskz forms with a full mask are the same instructions; GCC 12's unmasked wrappers start
    // from _mm512_undefined_ps(), which -Wmaybe-uninitialized reports.
    const __mmask16 all = 0xffff;
    const __m512 e = _mm512_maskz_getexp_ps(
        all, _mm512_fmadd_ps(x, _mm512_set1_ps(log_four_thirds), _mm512_set1_ps(std::numeric_limits<float>::min())));
    const __m512 m = _mm512_maskz_getmant_ps(all, x, _MM_MANT_NORM_p75_1p5, _MM_MANT_SIGN_zero);
    const __m512i i = _mm512_maskz_srli_epi32(all, _mm512_castps_si512(m), 18);
    const __m512 invc = _mm512_permutex2var_ps(invc_lo, i, invc_hi);
    const __m512 logc = _mm512_permutex2var_ps(logc_lo, i, logc_hi);
    const __m512 r = _mm512_fmsub_ps(m, invc, _mm512_set1_ps(1.0f));
    __m512 q = _mm512_fmadd_ps(_mm512_set1_ps(log1p_a4), r, _mm512_set1_ps(log1p_a3));
    q = _mm512_fmadd_ps(q, r, _mm512_set1_ps(log1p_a2));
    const __m512 r2 = _mm512_mul_ps(r, r);
    const __m512 hi = _mm512_fmadd_ps(e, _mm512_set1_ps(log_ln2), logc);  // e ln2 + logc: same signs for x < 0.75
    return _mm512_add_ps(hi, _mm512_fmadd_ps(r2, q, r));
  }
};

// y[i] = ln x[i] for an array (tests and benchmarks; the reductions inline the functor instead).
inline void table_log_array(const float* x, float* y, std::int64_t n) {
  const table_log ln;
  std::int64_t i = 0;
  for (; i + 16 <= n; i += 16) _mm512_storeu_ps(y + i, ln(_mm512_loadu_ps(x + i)));
  if (i < n) {
    const __mmask16 k = static_cast<__mmask16>((1u << (n - i)) - 1);
    _mm512_mask_storeu_ps(y + i, k, ln(_mm512_mask_loadu_ps(_mm512_set1_ps(1.0f), k, x + i)));
  }
}

}  // namespace avx512
ROPEX_END_TARGET
#endif

}  // namespace ropex::detail
