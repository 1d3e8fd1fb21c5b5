// Private: exp(x - max) in float for softmax, written once with GCC/Clang vector extensions (N
// lanes) and compiled per ISA by the caller's target attributes, plus its scalar twin for tails.
//
// Method (Cody & Waite range reduction, as in Cephes expf and SLEEF):
//   d + err = x - max exactly             2Sum (Knuth): d = fl(x - max), err its rounding error, so
//                                         logits of 1e4 or 1e30 lose nothing (the double difference
//                                         of the previous scalar code, without leaving float)
//   k = round(d / ln 2)                   via the 1.5 * 2^23 shifter
//   r = (d - k ln2_hi) - k ln2_lo + err   ln2_hi = 0.693359375 has 9 bits: k ln2_hi and the first
//                                         subtraction are exact for |k| <= 150
//   exp(r) = 1 + r + r^2 P(r)             P of degree 4 fitted at Chebyshev nodes on |r| <= ln2/2
//                                         (mpmath): relative error 0.16 u, u = 2^-24
//   exp(d) = exp(r) 2^k1 2^k2             k1 = k >> 1, k2 = k - k1: both scales are normal floats,
//                                         the first product is exact and the second rounds once,
//                                         so results down to 2^-149 (subnormal) are rounded once.
// d < -104 gives exactly 0 (exp(-104) < 2^-150: the correctly rounded result), -inf included.
// NaN in x or max (and +inf, where max = +inf gives inf - inf) propagates as NaN.
//
// Error: |exp_computed - e^(x - max)| <= 1.501 u e^(x - max) + 2^-150 (about 0.75 ulp). Measured
// on every float d in [-104, 0) against long double: at most 1.50013 u, at d = -16.2885; the
// tests hold every 7th float of that range and logits near 1e4, -1e4, 1e30 to the bound.
#pragma once
#ifndef ROPEX_INSIDE
#error "ropex/attention/detail/fast_exp.hpp is private; include <ropex/attention.hpp>"
#endif

#include <cstdint>
#include <cstring>

#include "ropex/attention/detail/fast_log.hpp"  // vfloat<N>, vint<N>

namespace ropex::detail {

inline constexpr float exp_log2e = 1.44269504088896341f, exp_shifter = 12582912.0f;  // 1.5 * 2^23
inline constexpr float exp_ln2_hi = 0.693359375f, exp_ln2_lo = -2.12194440e-4f;
inline constexpr float exp_c2 = 5.000000000e-01f, exp_c3 = 1.666657776e-01f, exp_c4 = 4.166655615e-02f,
                       exp_c5 = 8.363173343e-03f, exp_c6 = 1.392617589e-03f;
inline constexpr float exp_cutoff = -104.0f;

// 2^k for k in [-126, 127], from the exponent field.
inline float exp2_int(std::int32_t k) {
  const std::uint32_t bits = static_cast<std::uint32_t>(k + 127) << 23;
  float f;
  std::memcpy(&f, &bits, sizeof f);
  return f;
}

// The scalar twin of exp_difference_vec: the same operations in the same order.
inline float exp_difference(float x, float max) {
  const float d = x - max;
  const float bb = d - x;
  const float err = (x - (d - bb)) + (-max - bb);  // 2Sum: keep as written (no reassociation)
  const float dc = d > exp_cutoff ? d : exp_cutoff;
  const float k = (dc * exp_log2e + exp_shifter) - exp_shifter;
  float r = dc - k * exp_ln2_hi;
  r = r - k * exp_ln2_lo;
  r = r + err;
  float p = exp_c6;
  p = p * r + exp_c5;
  p = p * r + exp_c4;
  p = p * r + exp_c3;
  p = p * r + exp_c2;
  const float y = (r * r * p + r) + 1.0f;
  const auto ki = static_cast<std::int32_t>(k);
  const std::int32_t k1 = ki >> 1, k2 = ki - k1;  // arithmetic shift: floor(k / 2)
  const float e = (y * exp2_int(k1)) * exp2_int(k2);
  return d < exp_cutoff ? 0.0f : e;
}

#if defined(__GNUC__)
template <int N>
__attribute__((always_inline)) inline void exp_difference_vec(const vfloat<N>& x, float max, vfloat<N>& result) {
  const vfloat<N> d = x - max;
  const vfloat<N> bb = d - x;
  const vfloat<N> err = (x - (d - bb)) + (-max - bb);
  const vfloat<N> dc = d > exp_cutoff ? d : vfloat<N>{} + exp_cutoff;
  const vfloat<N> k = (dc * exp_log2e + exp_shifter) - exp_shifter;
  vfloat<N> r = dc - k * exp_ln2_hi;
  r = r - k * exp_ln2_lo;
  r = r + err;
  vfloat<N> p = exp_c6 * r + exp_c5;
  p = p * r + exp_c4;
  p = p * r + exp_c3;
  p = p * r + exp_c2;
  const vfloat<N> y = (r * r * p + r) + 1.0f;
  const vint<N> ki = __builtin_convertvector(k, vint<N>);
  const vint<N> k1 = ki >> 1, k2 = ki - k1;
  const vint<N> s1_bits = (k1 + 127) << 23, s2_bits = (k2 + 127) << 23;
  vfloat<N> s1, s2;
  std::memcpy(&s1, &s1_bits, sizeof s1);
  std::memcpy(&s2, &s2_bits, sizeof s2);
  const vfloat<N> e = (y * s1) * s2;
  result = d < exp_cutoff ? vfloat<N>{} : e;
}
#endif

}  // namespace ropex::detail
