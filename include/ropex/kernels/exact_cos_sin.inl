// Private: the vector cos/sin of the exact angle, written once for every SIMD family. Each of
// avx2.hpp, avx512.hpp and neon.hpp defines a struct `f64` of lane-wise double operations in its
// own namespace and target region, then includes this file there, so the same source is compiled
// once per instruction set (no #pragma once on purpose).
//
//   f64::vec, f64::lanes              a vector of doubles and its lane count
//   set1 add mul                      the obvious
//   fma(a, b, c) = a b + c, fms(a, b, c) = a b - c, fnma(a, b, c) = c - a b   (one rounding)
//   round(a)                          to the nearest integer, ties to even
//   quadrant(q, c, s, cos_r, sin_r)   sincos.hpp step 3: (cos, sin) of r from those of y
//   load(p) / load(p, n)              a full vector / n < lanes lanes, zero beyond
//   store(p, v) / store(p, v, n)      the same for stores; store_floats rounds to float first
//
// Algorithm and error: angles.hpp (reduction) and sincos.hpp (polynomial); block_angles.hpp
// (how a seed and a step combine).
#ifndef ROPEX_INSIDE
#error "ropex/kernels/exact_cos_sin.inl is private; include <ropex/ropex.hpp>"
#endif

// cos and sin of p * inv_freq, lane-wise, within 2^-49 + 2^-52 of the exact values.
inline void exact_cos_sin_lanes(f64::vec p, f64::vec inv_freq, f64::vec& cos_r, f64::vec& sin_r) {
  using V = f64;
  // reduced_angle(): p * inv_freq = hi + lo exactly, minus k * 2pi in three parts. Do not simplify.
  const V::vec hi = V::mul(p, inv_freq);
  const V::vec lo = V::fms(p, inv_freq, hi);
  const V::vec k = V::round(V::mul(hi, V::set1(ropex::detail::inv_two_pi)));
  V::vec r = V::fnma(k, V::set1(ropex::detail::two_pi_1), hi);
  r = V::add(r, lo);
  r = V::fnma(k, V::set1(ropex::detail::two_pi_2), r);
  r = V::fnma(k, V::set1(ropex::detail::two_pi_3), r);
  // sincos.hpp steps 1-3.
  const V::vec q = V::round(V::mul(r, V::set1(sincos::two_over_pi)));
  V::vec y = V::fnma(q, V::set1(sincos::pi_over_2_hi), r);
  y = V::fnma(q, V::set1(sincos::pi_over_2_lo), y);
  const V::vec z = V::mul(y, y);
  V::vec ps = V::fma(z, V::set1(sincos::s6), V::set1(sincos::s5));
  ps = V::fma(z, ps, V::set1(sincos::s4));
  ps = V::fma(z, ps, V::set1(sincos::s3));
  ps = V::fma(z, ps, V::set1(sincos::s2));
  ps = V::fma(z, ps, V::set1(sincos::s1));
  const V::vec s = V::fma(V::mul(y, z), ps, y);
  V::vec pc = V::fma(z, V::set1(sincos::c6), V::set1(sincos::c5));
  pc = V::fma(z, pc, V::set1(sincos::c4));
  pc = V::fma(z, pc, V::set1(sincos::c3));
  pc = V::fma(z, pc, V::set1(sincos::c2));
  pc = V::fma(z, pc, V::set1(sincos::c1));
  const V::vec c = V::fma(V::mul(z, z), pc, V::fnma(V::set1(0.5), z, V::set1(1.0)));
  V::quadrant(q, c, s, cos_r, sin_r);
}

// Same contract as scalar::cos_sin_seed. The in-line form is for a kernel that reaches a new block
// inside its token loop (rotate_token.inl's combined_source::walk), where the seed's chain of
// double operations then overlaps the work around it instead of waiting behind a call; elsewhere
// a call keeps the loops small.
ROPEX_ALWAYS_INLINE void cos_sin_seed_inline(std::int64_t position, const double* inv_freq, int n, double magnitude,
                                             double sign, double* cos_out, double* sin_out) {
  using V = f64;
  const V::vec p = V::set1(static_cast<double>(position));
  const V::vec m = V::set1(magnitude), sm = V::set1(sign * magnitude);
  V::vec c, s;
  int i = 0;
  for (; i + V::lanes <= n; i += V::lanes) {
    exact_cos_sin_lanes(p, V::load(inv_freq + i), c, s);
    V::store(cos_out + i, V::mul(m, c));
    V::store(sin_out + i, V::mul(sm, s));
  }
  if (i < n) {
    exact_cos_sin_lanes(p, V::load(inv_freq + i, n - i), c, s);
    V::store(cos_out + i, V::mul(m, c), n - i);
    V::store(sin_out + i, V::mul(sm, s), n - i);
  }
}
ROPEX_NOINLINE inline void cos_sin_seed(std::int64_t position, const double* inv_freq, int n, double magnitude,
                                        double sign, double* cos_out, double* sin_out) {
  cos_sin_seed_inline(position, inv_freq, n, magnitude, sign, cos_out, sin_out);
}

// The seed (c0, s0) turned by the step (ck, sk = sign * step sin) by angle addition, lane-wise:
// cos_sin_combine's operations before the rounding to float.
ROPEX_ALWAYS_INLINE void combine_lanes(f64::vec c0, f64::vec s0, f64::vec ck, f64::vec sk, f64::vec& cos_r, f64::vec& sin_r) {
  cos_r = f64::fms(c0, ck, f64::mul(s0, sk));
  sin_r = f64::fma(s0, ck, f64::mul(c0, sk));
}

// Same contract as scalar::cos_sin_combine: the same operations in the same order, so the floats
// equal the scalar ones for equal seeds.
inline void cos_sin_combine(const double* seed_cos, const double* seed_sin, const double* step_cos,
                            const double* step_sin, int n, double sign, float* cos_out, float* sin_out) {
  using V = f64;
  const V::vec sg = V::set1(sign);
  int i = 0;
  for (; i + V::lanes <= n; i += V::lanes) {
    const V::vec c0 = V::load(seed_cos + i), s0 = V::load(seed_sin + i);
    const V::vec ck = V::load(step_cos + i), sk = V::mul(sg, V::load(step_sin + i));
    V::vec c, s;
    combine_lanes(c0, s0, ck, sk, c, s);
    V::store_floats(cos_out + i, c);
    V::store_floats(sin_out + i, s);
  }
  if (i < n) {
    const int left = n - i;
    const V::vec c0 = V::load(seed_cos + i, left), s0 = V::load(seed_sin + i, left);
    const V::vec ck = V::load(step_cos + i, left), sk = V::mul(sg, V::load(step_sin + i, left));
    V::vec c, s;
    combine_lanes(c0, s0, ck, sk, c, s);
    V::store_floats(cos_out + i, c, left);
    V::store_floats(sin_out + i, s, left);
  }
}
