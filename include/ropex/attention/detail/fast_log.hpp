// Private: a float natural logarithm that vectorises, for the portable entropy / KL / JS bodies
// (AVX2 and baseline levels, aarch64, ROPEX_PORTABLE_ONLY; the AVX-512 level uses table_log.hpp).
//
// Method (Cephes logf, S. Moshier): x = 2^e * m with m in [sqrt(1/2), sqrt(2)), t = m - 1,
//   ln x = t - t^2/2 + t^3 P(t) + e ln 2,
// P of degree 8 (minimax on t in [-0.2929, 0.4142]); ln 2 = 0.693359375 - 2.12194440e-4 so that
// e * 0.693359375 is exact in float for |e| <= 2^15.
//
// Valid range: finite x >= FLT_MIN (normal floats). Subnormal x and x = 0 are treated as
// 2^-127 * m: the result is finite and wrong, which is harmless where it is used because the
// callers multiply it by x itself (|x ln x| < 1.1e-36 there) or mask it.
// Error (measured on every float in [0.5, 2], i.e. every mantissa on both sides of the sqrt(2)
// split, and on every 61st float in [2^-126, 2^8], by
// tests/attention/test_fast_log.cpp): |fast_log(x) - ln x| <= 1.5e-7 + 6.0e-8 |ln x|, i.e. a few
// float ulps; the test holds the code to this bound.
#pragma once
#ifndef ROPEX_INSIDE
#error "ropex/attention/detail/fast_log.hpp is private; include <ropex/attention.hpp>"
#endif

#include <cstdint>
#include <cstring>

namespace ropex::detail {

inline constexpr float log_p0 = 7.0376836292e-2f, log_p1 = -1.1514610310e-1f, log_p2 = 1.1676998740e-1f,
                       log_p3 = -1.2420140846e-1f, log_p4 = 1.4249322787e-1f, log_p5 = -1.6668057665e-1f,
                       log_p6 = 2.0000714765e-1f, log_p7 = -2.4999993993e-1f, log_p8 = 3.3333331174e-1f;
inline constexpr float ln2_hi = 0.693359375f, ln2_lo = -2.12194440e-4f;
inline constexpr float sqrt_half = 0.707106781186547524f;

// The scalar twin of fast_log_vec below (same operations, same order): tails and tests.
inline float fast_log(float x) {
  std::uint32_t bits;
  std::memcpy(&bits, &x, sizeof bits);
  // m in [1, 2) from the mantissa, e the unbiased exponent.
  float e = static_cast<float>(static_cast<std::int32_t>((bits >> 23) & 0xffu) - 127);
  const std::uint32_t mbits = (bits & 0x007fffffu) | 0x3f800000u;
  float m;
  std::memcpy(&m, &mbits, sizeof m);
  // Centre on 1: m in [sqrt(2), 2) -> m/2, e + 1, so m lies in [sqrt(1/2), sqrt(2)).
  if (m > 2 * sqrt_half) {
    m *= 0.5f;
    e += 1;
  }
  const float t = m - 1.0f, z = t * t;
  float y = log_p0;
  y = y * t + log_p1;
  y = y * t + log_p2;
  y = y * t + log_p3;
  y = y * t + log_p4;
  y = y * t + log_p5;
  y = y * t + log_p6;
  y = y * t + log_p7;
  y = y * t + log_p8;
  y = y * t * z;
  y += e * ln2_lo;
  y += -0.5f * z;
  return t + y + e * ln2_hi;
}

#if defined(__GNUC__)
// GCC / Clang vector extensions: one source, compiled per target by the caller's attributes, with
// N lanes = one native register (8 for AVX2, 4 for SSE2 and Advanced SIMD). Wider vectors than the
// target's registers are not an option: GCC 12 splits their comparisons and selects into scalar
// code (a 16-lane body compiled for AVX2 ran ~10x slower than this one).
template <int N>
struct simd {
  typedef float f __attribute__((vector_size(4 * N)));
  typedef std::int32_t i __attribute__((vector_size(4 * N)));
  typedef double d __attribute__((vector_size(8 * N)));
};
template <int N> using vfloat = typename simd<N>::f;
template <int N> using vint = typename simd<N>::i;
template <int N> using vdouble = typename simd<N>::d;

// Same arithmetic as fast_log(float), lane by lane. Vectors go by reference and the function is
// always inlined, so no vector crosses a call boundary (no -Wpsabi ABI concerns without AVX-512).
template <int N>
__attribute__((always_inline)) inline void fast_log_vec(const vfloat<N>& x, vfloat<N>& result) {
  vint<N> bits;
  std::memcpy(&bits, &x, sizeof bits);
  vint<N> ei = ((bits >> 23) & 0xff) - 127;
  const vint<N> mbits = (bits & 0x007fffff) | 0x3f800000;
  vfloat<N> m;
  std::memcpy(&m, &mbits, sizeof m);
  const vint<N> big = m > 2 * sqrt_half;  // -1 where true
  m = big ? m * 0.5f : m;
  ei -= big;
  const vfloat<N> e = __builtin_convertvector(ei, vfloat<N>);
  const vfloat<N> t = m - 1.0f, z = t * t;
  vfloat<N> y = log_p0 * t + log_p1;
  y = y * t + log_p2;
  y = y * t + log_p3;
  y = y * t + log_p4;
  y = y * t + log_p5;
  y = y * t + log_p6;
  y = y * t + log_p7;
  y = y * t + log_p8;
  y = y * t * z;
  y += e * ln2_lo;
  y += -0.5f * z;
  result = t + y + e * ln2_hi;
}
#endif

}  // namespace ropex::detail
