// Exact angle formation and reduction: theta = position * inv_freq, reduced mod 2 pi, then cos/sin.
//
// Why: float32 pipelines round p * inv_freq to 24 bits, an error of up to 0.5 rad-ulp(theta) that
// reaches 0.4-2.4 at p = 2^24 (docs/formulas.md section 4). Here the product is split exactly
// (hi + lo, Dekker/FMA two-product) and reduced with a three-part 2 pi (Cody-Waite, FMA form).
//
// Valid range: integer |position| <= 2^53 (exact as double), inv_freq finite and >= 0.
// Error: reduced_angle() is within 2^-49 rad of (position * inv_freq mod 2 pi) computed on the
// double inv_freq, for every valid position. Relative to the infinitely precise frequency the
// double rounding of inv_freq adds at most |position * inv_freq| * 2^-53 (1.9e-9 rad at 2^24).
// cos_sin() therefore returns fl32(m cos theta), fl32(m sin theta) within 0.5 float ulp + 1e-15.
// The rotation itself forms cos/sin by block_angles.hpp (an exact seed per block of 16 positions,
// computed by the kernels' cos_sin_seed: this reduction lane-wise, then the double polynomial of
// kernels/sincos.hpp), within m 2^-48 before the float rounding; cos_sin() here is the direct
// reference the tests hold it to.
#pragma once

#include <cmath>
#include <cstdint>

namespace ropex {

// Positions per block of block_angles.hpp: a seed serves 16 consecutive positions; the step table
// has 16 rows.
inline constexpr int angle_block = 16;

// First position of p's block (floor to a multiple of angle_block; also for negative p).
inline std::int64_t block_start(std::int64_t p) { return p & ~std::int64_t{angle_block - 1}; }

namespace detail {
// 2 pi = C1 + C2 + C3 to ~160 bits; C1 is the double nearest 2 pi.
inline constexpr double two_pi_1 = 6.283185307179586;
inline constexpr double two_pi_2 = 2.4492935982947064e-16;
inline constexpr double two_pi_3 = -5.989539619436679e-33;
inline constexpr double inv_two_pi = 0.15915494309189535;
inline constexpr double pi = 3.141592653589793;
}  // namespace detail

// position * inv_freq mod 2 pi, in [-pi - 2^-50, pi + 2^-50]. Do not "simplify": every fma here
// is what makes the result exact (compensated arithmetic).
inline double reduced_angle(std::int64_t position, double inv_freq) {
  const double p = static_cast<double>(position);           // exact for |p| <= 2^53
  const double hi = p * inv_freq;
  const double lo = std::fma(p, inv_freq, -hi);              // p * inv = hi + lo exactly
  const double k = std::nearbyint(hi * detail::inv_two_pi);  // |hi - k 2pi| <= pi + tiny
  // hi - k*C1 is a multiple of ulp(C1)/2 below 8 in magnitude, so the fma result is exact.
  double r = std::fma(-k, detail::two_pi_1, hi);
  r += lo;
  r = std::fma(-k, detail::two_pi_2, r);
  r = std::fma(-k, detail::two_pi_3, r);
  // Above |hi| ~ 2^50 the rounding of hi / 2pi can pick k off by one; one more step brings r back
  // into [-pi, pi] (r - C1 is exact by Sterbenz for r in [pi, 4 pi]).
  if (std::fabs(r) > detail::pi) {
    const double k2 = r > 0 ? 1.0 : -1.0;
    r = std::fma(-k2, detail::two_pi_2, r - k2 * detail::two_pi_1);
  }
  return r;
}

// cos/sin of `sign * position * inv_freq[i]` times `magnitude`, rounded once to float, for
// i in [0, n). sign is +1 (rotate) or -1 (inverse rotation).
inline void cos_sin(std::int64_t position, const double* inv_freq, int n, double magnitude, double sign,
                    float* cos_out, float* sin_out) {
  for (int i = 0; i < n; ++i) {
    const double theta = reduced_angle(position, inv_freq[i]);
    cos_out[i] = static_cast<float>(magnitude * std::cos(theta));
    sin_out[i] = static_cast<float>(sign * magnitude * std::sin(theta));
  }
}

}  // namespace ropex
