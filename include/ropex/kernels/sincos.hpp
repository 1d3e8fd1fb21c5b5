// Private: the double-precision cos/sin polynomial of every SIMD kernel's cos_sin_seed (written
// once, kernels/exact_cos_sin.inl, evaluated lane-wise), and a scalar copy of it that tests hold
// to the error bound below.
//
// Input: the reduced angle r of angles.hpp, |r| <= pi + 2^-40. Steps:
//   1. quadrant q = nearest(r * 2/pi) in {-2..2}; y = r - q pi/2 with pi/2 in two parts
//      (Cody-Waite), |y| <= pi/4 + 2^-40. The fma form makes y exact to ~2^-100 beyond r's own error.
//   2. z = y^2; sin y = y + y z S(z), cos y = 1 - z/2 + z^2 C(z): the minimax polynomials of
//      fdlibm's __kernel_sin / __kernel_cos (approximation error < 2^-58 on |y| <= pi/4).
//   3. (cos, sin) of r from (cos y, sin y) by the quadrant: swap for odd q, signs by q mod 4.
// Error: |result - exact| <= 2^-52 absolute for cos and sin (rounding of the Horner steps and of
// 1 - z/2; tests/test_simd.cpp measures it against long double over 10^6 angles). With the 2^-49
// of the reduction this is the seed bound of block_angles.hpp.
#pragma once
#ifndef ROPEX_INSIDE
#error "ropex/kernels/sincos.hpp is private; include <ropex/ropex.hpp>"
#endif

#include <cmath>

#include "ropex/angles.hpp"  // the three-part 2 pi every family reduces with

namespace ropex::kernels::sincos {

inline constexpr double two_over_pi = 0.63661977236758134308;
inline constexpr double pi_over_2_hi = 1.5707963267948966;     // double nearest pi/2
inline constexpr double pi_over_2_lo = 6.123233995736766e-17;  // pi/2 - pi_over_2_hi
// 1.5 * 2^52: adding it rounds a small double to an integer held in the low mantissa bits.
inline constexpr double round_magic = 6755399441055744.0;

// fdlibm k_sin.c
inline constexpr double s1 = -1.66666666666666324348e-01, s2 = 8.33333333332248946124e-03,
                        s3 = -1.98412698298579493134e-04, s4 = 2.75573137070700676789e-06,
                        s5 = -2.50507602534068634195e-08, s6 = 1.58969099521155010221e-10;
// fdlibm k_cos.c
inline constexpr double c1 = 4.16666666666666019037e-02, c2 = -1.38888888888741095749e-03,
                        c3 = 2.48015872894767294178e-05, c4 = -2.75573143513906633035e-07,
                        c5 = 2.08757232129817482790e-09, c6 = -1.13596475577881948265e-11;

// Scalar copy of the vector algorithm (same operation order, fma where the vectors use fma).
inline void cos_sin_reduced(double r, double& cos_out, double& sin_out) {
  const double q = std::nearbyint(r * two_over_pi);
  double y = std::fma(-q, pi_over_2_hi, r);
  y = std::fma(-q, pi_over_2_lo, y);
  const double z = y * y;
  double ps = std::fma(z, s6, s5);
  ps = std::fma(z, ps, s4);
  ps = std::fma(z, ps, s3);
  ps = std::fma(z, ps, s2);
  ps = std::fma(z, ps, s1);
  const double s = std::fma(y * z, ps, y);
  double pc = std::fma(z, c6, c5);
  pc = std::fma(z, pc, c4);
  pc = std::fma(z, pc, c3);
  pc = std::fma(z, pc, c2);
  pc = std::fma(z, pc, c1);
  const double c = std::fma(z * z, pc, std::fma(-0.5, z, 1.0));
  const long n = static_cast<long>(q) & 3;
  const double cs = (n & 1) ? s : c, sn = (n & 1) ? c : s;
  cos_out = ((n + 1) & 2) ? -cs : cs;
  sin_out = (n & 2) ? -sn : sn;
}

}  // namespace ropex::kernels::sincos
